#!/usr/bin/env bash
# relay-bench.sh — orbit-relay against HAProxy and nginx as reverse proxies (and
# the backend directly), side by side in one run: wrk keep-alive load, 100 B and
# 64 KiB responses, at one or more connection counts; requests/s, p50/p99/p99.9
# latency, and syscalls, context switches and CPU time per request of each
# proxy's workers (perf stat, or /proc counters without it).
#
#   tools/bench/relay-bench.sh [--relay PATH] [--workers N] [--connections C[,C...]]
#                              [--sizes B[,B...]] [--duration S] [--repeat R]
#                              [--upstreams U] [--no-direct] [--floor] [--lean] [--tsv FILE]
#                              [--base PATH] [--variant NAME=WORDS]... [--ref TARGET]
#                              [--only TARGET[,TARGET...]]
#
# Every proxy gets N workers (nginx worker_processes, HAProxy nbthread) and
# reuses its upstream connections (nginx keepalive, HAProxy http-reuse always).
# Each repetition runs every proxy once per connection count and size, the
# order rotated per repetition; the summary gives, per connection count and
# size, the median of the per-repetition ratios relay/HAProxy and relay/nginx
# with their min and max. --floor adds relay-floor (built beside orbit-relay,
# tools/bench/relay-floor.c): a byte mover with a backend connection per
# client and no HTTP, the floor under what any proxy costs on this host.
# --lean adds relay-lean: a second orbit-relay with its opt-in batched wait
# and yielding workers (ORBIT_RELAY_BATCH=1 ORBIT_RELAY_YIELD=1, orbit-relay(1)).
# --base PATH adds "base": another orbit-relay binary (the one before a change),
# run the same way, for before/after pairs. --variant NAME=WORDS adds a relay
# started as `env WORDS orbit-relay ...` (WORDS: VAR=VALUE assignments, then
# optionally a command prefix such as `chrt -b 0`). --ref names the target the
# ratio columns divide by (default haproxy); --only runs just the targets named
# (the reference among them).
# The descriptor limit is raised for the run.
# Installs nothing: says what is missing (wrk, haproxy and nginx are needed;
# perf is optional) and exits 77 without them.
set -euo pipefail

relay=""; workers=2; conns_list=64; sizes=100,65536; duration=8; repeat=1; upstreams=""
direct=1; tsv=""; floor=0; lean=0; base=""; ref=haproxy; only=""
variants=()
usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --relay) relay=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --connections) conns_list=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --upstreams) upstreams=$2; shift 2 ;;
        --no-direct) direct=0; shift ;;
        --floor) floor=1; shift ;;
        --lean) lean=1; shift ;;
        --tsv) tsv=$2; shift 2 ;;
        --base) base=$2; shift 2 ;;
        --variant)
            [[ "$2" =~ ^[a-z][a-z0-9_]*=.+$ ]] || { echo "relay-bench.sh: --variant NAME=WORDS, not '$2'" >&2; exit 2; }
            variants+=("$2"); shift 2 ;;
        --ref) ref=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --version) echo "relay-bench.sh 2"; exit 0 ;;
        *) echo "relay-bench.sh: bad argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
num() { [[ "$1" =~ ^[1-9][0-9]*$ ]] || { echo "relay-bench.sh: bad number '$1' (see --help)" >&2; exit 2; }; }
for v in "$workers" "$duration" "$repeat" ${upstreams:+"$upstreams"}; do num "$v"; done
IFS=, read -r -a conns_arr <<<"$conns_list"
IFS=, read -r -a size_arr <<<"$sizes"
max_conns=0
for c in "${conns_arr[@]}"; do num "$c"; [ "$c" -gt $max_conns ] && max_conns=$c; done
for s in "${size_arr[@]}"; do num "$s"; done
[ "$max_conns" -le 60000 ] || { echo "relay-bench.sh: at most 60000 connections" >&2; exit 2; }
if [ -z "$relay" ]; then
    here=$(cd "$(dirname "$0")/../.." && pwd)
    relay=$here/build/tools/orbit-relay/orbit-relay
fi
missing=()
[ -x "$relay" ] || missing+=("orbit-relay ($relay: build it first)")
[ -z "$base" ] || [ -x "$base" ] || missing+=("the --base orbit-relay ($base)")
floor_bin=$(dirname "$relay")/../bench/relay-floor
[ $floor = 0 ] || [ -x "$floor_bin" ] || missing+=("relay-floor ($floor_bin: build it first)")
command -v wrk >/dev/null || missing+=("wrk (apt-get install wrk)")
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || missing+=("nginx (apt-get install nginx-light)")
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$HAPROXY" ] || missing+=("haproxy (apt-get install haproxy)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "relay-bench.sh: missing: ${missing[*]}" >&2
    exit 77
fi
# Descriptors: each proxy holds a client and (at worst) an upstream socket a
# connection, wrk and the backend one each.
# The limit is per process: HAProxy's one process holds both sides.
need_fds=$((max_conns * 2 + 1024))
if [ "$(ulimit -n)" -lt $need_fds ]; then
    [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge $need_fds ] || ulimit -Hn $need_fds 2>/dev/null || true
    if ! ulimit -n $need_fds 2>/dev/null; then
        ulimit -n "$(ulimit -Hn)"
        [ "$(ulimit -n)" -gt $((max_conns + 1024)) ] || {
            echo "relay-bench.sh: cannot raise the descriptor limit past $(ulimit -n) for $max_conns connections" >&2
            exit 77
        }
        echo "relay-bench.sh: descriptor limit $(ulimit -n), not $need_fds: a proxy holding both sides may run short" >&2
    fi
fi
have_perf=0
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
    have_perf=1
else
    echo "relay-bench.sh: perf (linux-perf) missing or not permitted: context switches from /proc, no syscall counts" >&2
fi

tmp=$(mktemp -d /tmp/relay-bench.XXXXXX)
pids=()
cleanup() {
    [ -n "${KEEP_LOGS:-}" ] && cat "$tmp"/*.start "$tmp"/*.err "$tmp"/haproxy.log >&2 2>/dev/null
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid" 2>/dev/null)" 2>/dev/null || true
    sleep 0.5
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {   # a port nothing listens on
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null || { echo "$p"; return; }
    done
}
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

bport=$(free_port); rport=$(free_port); nport=$(free_port); hport=$(free_port); fport=$(free_port)
lport=$(free_port)
fleet="bench-relay-$$"
"$relay" --backend 127.0.0.1:"$bport" --quiet >/dev/null 2>&1 & pids+=($!)
wait_port "$bport"
"$relay" --fleet "$fleet" --listen 127.0.0.1:"$rport" --upstream 127.0.0.1:"$bport" --workers "$workers" \
    ${upstreams:+--upstreams "$upstreams"} >"$tmp/relay.log" 2>&1 & relay_pid=$!; pids+=($relay_pid)
wait_port "$rport"
if [ $lean = 1 ]; then
    ORBIT_RELAY_BATCH=1 ORBIT_RELAY_YIELD=1 "$relay" --fleet "$fleet-lean" --listen 127.0.0.1:"$lport" \
        --upstream 127.0.0.1:"$bport" --workers "$workers" ${upstreams:+--upstreams "$upstreams"} \
        >"$tmp/lean.log" 2>&1 & lean_pid=$!; pids+=($lean_pid)
    wait_port "$lport"
fi
declare -A extra_pid extra_port
start_extra() {   # NAME BIN WORDS...: another relay fleet on a port of its own
    local name=$1 bin=$2 port
    shift 2
    port=$(free_port)
    env "$@" "$bin" --fleet "$fleet-$name" --listen 127.0.0.1:"$port" --upstream 127.0.0.1:"$bport" \
        --workers "$workers" ${upstreams:+--upstreams "$upstreams"} >"$tmp/$name.log" 2>&1 &
    extra_pid[$name]=$!; extra_port[$name]=$port; pids+=($!)
    wait_port "$port"
}
[ -n "$base" ] && start_extra base "$base"
for v in "${variants[@]}"; do
    read -r -a words <<<"${v#*=}"
    start_extra "${v%%=*}" "$relay" "${words[@]}"
done
if [ $floor = 1 ]; then
    "$floor_bin" --listen 127.0.0.1:"$fport" --upstream 127.0.0.1:"$bport" --workers "$workers" \
        >"$tmp/floor.log" 2>&1 & floor_pid=$!; pids+=($floor_pid)
    wait_port "$fport"
fi
cat >"$tmp/nginx.conf" <<EOF
worker_processes $workers;
worker_rlimit_nofile $(ulimit -n);
pid $tmp/nginx.pid;
error_log $tmp/nginx.err warn;
events { worker_connections $(( $(ulimit -n) - 64 )); }
http {
    access_log off;
    upstream backend { server 127.0.0.1:$bport; keepalive 64; }
    server {
        listen 127.0.0.1:$nport reuseport backlog=4096;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering on;
        }
    }
}
EOF
"$NGINX" -p "$tmp" -c "$tmp/nginx.conf" -g 'daemon off;' 2>"$tmp/nginx.start" & pids+=($!)
wait_port "$nport"
cat >"$tmp/haproxy.cfg" <<EOF
global
    nbthread $workers
    maxconn $(( max_conns + 512 < ($(ulimit -n) - 64) / 2 ? max_conns + 512 : ($(ulimit -n) - 64) / 2 ))
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
frontend fe
    bind 127.0.0.1:$hport backlog 4096
    default_backend be
backend be
    server s1 127.0.0.1:$bport
EOF
"$HAPROXY" -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 & haproxy_pid=$!; pids+=($haproxy_pid)
wait_port "$hport"
sleep 0.3

# wrk's own percentiles, finer than --latency's table: p50, p99, p99.9 in µs.
cat >"$tmp/pct.lua" <<'EOF'
done = function(summary, latency, requests)
    io.write(string.format("PCT %d %d %d\n", latency:percentile(50), latency:percentile(99),
                           latency:percentile(99.9)))
end
EOF

children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -v '^$' | paste -sd, -; }
workers_of() {   # the pids (comma list) whose work a proxy's figures count
    case $1 in
        relay) children "$relay_pid" ;;
        floor) children "$floor_pid" ;;
        lean) children "$lean_pid" ;;
        nginx) children "$(cat "$tmp/nginx.pid")" ;;
        haproxy) echo "$haproxy_pid" ;;   # one process, nbthread threads
        backend) echo "" ;;
        *) children "${extra_pid[$1]}" ;;
    esac
}
cpu_ticks() {   # user + system clock ticks of every thread of the pids in a comma list
    local sum=0 p
    for p in ${1//,/ }; do
        sum=$((sum + $(cat /proc/"$p"/task/*/stat 2>/dev/null | awk '{ s += $14 + $15 } END { print s + 0 }')))
    done
    echo "$sum"
}
ctxsw() {   # context switches of every thread of the pids in a comma list
    local sum=0 p
    for p in ${1//,/ }; do
        sum=$((sum + $(cat /proc/"$p"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }')))
    done
    echo "$sum"
}
port_of() {
    case $1 in backend) echo "$bport" ;; relay) echo "$rport" ;; nginx) echo "$nport" ;; haproxy) echo "$hport" ;;
               floor) echo "$fport" ;; lean) echo "$lport" ;; *) echo "${extra_port[$1]}" ;; esac
}
fmt_us() { awk -v u="$1" 'BEGIN { if (u == "" || u == "-") print "-"; else if (u >= 1000) printf "%.2fms", u / 1000; else printf "%dus", u }'; }

# run NAME CONNS SIZE: one wrk run; prints "rps p50 p99 p999 sys/req cs/req cpu/req load errors" (µs).
run() {
    local name=$1 conns=$2 size=$3 who cs0=0 cs1 t0=0 t1 perfpid="" load
    load=$(cut -d' ' -f1 /proc/loadavg)
    who=$(workers_of "$name")
    if [ -n "$who" ]; then
        cs0=$(ctxsw "$who")
        t0=$(cpu_ticks "$who")
        if [ $have_perf = 1 ]; then
            perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$who" -o "$tmp/perf.$name" \
                -- sleep "$duration" >/dev/null 2>&1 & perfpid=$!
        fi
    fi
    local threads=2
    [ "$conns" -lt 2 ] && threads=1
    wrk -t$threads -c"$conns" -d"${duration}s" --timeout 10s -s "$tmp/pct.lua" \
        "http://127.0.0.1:$(port_of "$name")/size/$size" >"$tmp/wrk.out" 2>&1 || true
    [ -n "$perfpid" ] && wait "$perfpid" 2>/dev/null || true
    [ -n "$who" ] && cs1=$(ctxsw "$who") && t1=$(cpu_ticks "$who")
    local rps total pct sys="-" cs="-" cpu="-" err=0
    rps=$(awk '/^Requests\/sec/ { print $2 }' "$tmp/wrk.out")
    total=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
    pct=$(awk '$1 == "PCT" { print $2, $3, $4 }' "$tmp/wrk.out")
    [ -n "$pct" ] || pct="- - -"
    if [ -n "$who" ] && [ -n "$total" ] && [ "$total" -gt 0 ]; then
        if [ $have_perf = 1 ] && [ -s "$tmp/perf.$name" ]; then
            sys=$(awk -F, -v n="$total" '/raw_syscalls/ { printf "%.3f", $1 / n }' "$tmp/perf.$name")
            cs=$(awk -F, -v n="$total" '/context-switches/ { printf "%.3f", $1 / n }' "$tmp/perf.$name")
        else
            cs=$(awk -v a="$cs0" -v b="$cs1" -v n="$total" 'BEGIN { printf "%.3f", (b - a) / n }')
        fi
        cpu=$(awk -v a="$t0" -v b="$t1" -v n="$total" -v hz="$(getconf CLK_TCK)" \
              'BEGIN { printf "%.1f", (b - a) * 1e6 / hz / n }')
    fi
    if grep -q 'Non-2xx\|Socket errors' "$tmp/wrk.out"; then
        err=1
        echo "  ($name c=$conns $size B: $(grep -E 'Non-2xx|Socket errors' "$tmp/wrk.out" | tr -s ' ' | paste -sd' ' -))" >&2
    fi
    echo "${rps:-0} $pct ${sys:--} ${cs:--} ${cpu:--} $load $err"
}

targets=(relay haproxy nginx)
[ $lean = 1 ] && targets+=(lean)
[ $floor = 1 ] && targets+=(floor)
[ -n "$base" ] && targets+=(base)
for v in "${variants[@]}"; do targets+=("${v%%=*}"); done
if [ -n "$only" ]; then
    IFS=, read -r -a targets <<<"$only"
    direct=0
fi
echo "relay-bench: $workers workers each, wrk -t2 -c{$conns_list} -d${duration}s keep-alive, $(nproc) CPUs," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg), ulimit -n $(ulimit -n), $repeat repetition(s)"
echo "  (the load column: the 1-minute load average as each run began; on a shared machine figures are noisy)"
echo "relay: $(head -1 "$tmp/relay.log")"
[ $lean = 1 ] && echo "lean: the same with ORBIT_RELAY_BATCH=1 ORBIT_RELAY_YIELD=1"
[ -n "$base" ] && echo "base: $base"
for v in "${variants[@]}"; do echo "${v%%=*}: env ${v#*=} orbit-relay"; done
echo "haproxy: $("$HAPROXY" -v 2>&1 | head -1 | awk '{ print $3 }'), nbthread $workers, http-reuse always"
echo "nginx: $("$NGINX" -v 2>&1 | sed 's/.*: //'), worker_processes $workers, upstream keepalive 64"
results=$tmp/results.tsv
: >"$results"
printf '%-3s %-6s %-6s %-8s %10s %9s %9s %9s %8s %8s %8s %5s\n' rep conns size target "req/s" p50 p99 p99.9 \
    "sys/req" "cs/req" "cpu/req" load
for r in $(seq "$repeat"); do
    # Rotate the order each repetition: no proxy always runs first (or last).
    k=$(( (r - 1) % ${#targets[@]} ))
    order=("${targets[@]:k}" "${targets[@]:0:k}")
    [ $direct = 1 ] && order+=(backend)
    for conns in "${conns_arr[@]}"; do
        for size in "${size_arr[@]}"; do
            for t in "${order[@]}"; do
                read -r rps p50 p99 p999 sys cs cpu load err <<<"$(run "$t" "$conns" "$size")"
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$conns" "$size" "$t" "$rps" "$p50" \
                    "$p99" "$p999" "$sys" "$cs" "$err" "$cpu" >>"$results"
                printf '%-3s %-6s %-6s %-8s %10s %9s %9s %9s %8s %8s %8s %5s\n' "$r" "$conns" "$size" "$t" "$rps" \
                    "$(fmt_us "$p50")" "$(fmt_us "$p99")" "$(fmt_us "$p999")" "$sys" "$cs" "$([ "$cpu" = - ] && echo - || echo "${cpu}us")" "$load"
            done
        done
    done
done
[ -n "$tsv" ] && cp "$results" "$tsv"

# The summary: per connection count and size, medians over the repetitions of
# each proxy's figures and of the per-repetition ratios, with min-max.
echo
echo "summary: medians over $repeat repetition(s); ratios are per repetition, median [min-max]"
printf '%-6s %-6s %-8s %10s %9s %9s %9s %8s %8s %8s  %-22s %-22s %-22s\n' conns size target "req/s" p50 p99 p99.9 \
    "sys/req" "cs/req" "cpu/req" "req/s vs $ref" "p99 vs $ref" "cpu/req vs $ref"
awk -F'\t' -v order="relay base lean ${variants[*]%%=*} haproxy nginx floor backend" -v ref="$ref" '
function med(key, n,   i, j, t, a) {
    n = cnt[key]; if (n == 0) return "-"
    for (i = 1; i <= n; i++) a[i] = v[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[key] = a[1]; hi[key] = a[n]
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function put(key, x) { if (x == "-" || x == "") return; v[key, ++cnt[key]] = x }
function us(x) { if (x == "-") return "-"; return x >= 1000 ? sprintf("%.2fms", x / 1000) : sprintf("%dus", x) }
{
    rep = $1; c = $2; s = $3; t = $4
    if (!((c, s) in seen)) { seen[c, s] = 1; cs_order[++ncs] = c SUBSEP s }
    put(c SUBSEP s SUBSEP t SUBSEP "rps", $5); put(c SUBSEP s SUBSEP t SUBSEP "p50", $6)
    put(c SUBSEP s SUBSEP t SUBSEP "p99", $7); put(c SUBSEP s SUBSEP t SUBSEP "p999", $8)
    put(c SUBSEP s SUBSEP t SUBSEP "sys", $9); put(c SUBSEP s SUBSEP t SUBSEP "cs", $10)
    put(c SUBSEP s SUBSEP t SUBSEP "cpu", $12)
    rps[rep, c, s, t] = $5; p99[rep, c, s, t] = $7; cpu[rep, c, s, t] = $12; reps[rep] = 1
}
END {
    nt = split(order, ts, " ")
    for (i = 1; i <= ncs; i++) {
        split(cs_order[i], k, SUBSEP); c = k[1]; s = k[2]
        for (j = 1; j <= nt; j++) {
            t = ts[j]; base = c SUBSEP s SUBSEP t
            if (cnt[base SUBSEP "rps"] == 0) continue
            rr = "-"; pr = "-"; cr = "-"
            if (t != ref) {
                for (rep in reps) {
                    h = rps[rep, c, s, ref]; x = rps[rep, c, s, t]
                    if (h > 0 && x != "") put(base SUBSEP "rr", x / h)
                    h = p99[rep, c, s, ref]; x = p99[rep, c, s, t]
                    if (h > 0 && h != "-" && x != "-" && x != "") put(base SUBSEP "pr", x / h)
                    h = cpu[rep, c, s, ref]; x = cpu[rep, c, s, t]
                    if (h > 0 && h != "-" && x != "-" && x != "") put(base SUBSEP "cr", x / h)
                }
                m = med(base SUBSEP "rr")
                if (m != "-") rr = sprintf("%.2fx [%.2f-%.2f]", m, lo[base SUBSEP "rr"], hi[base SUBSEP "rr"])
                m = med(base SUBSEP "pr")
                if (m != "-") pr = sprintf("%.2fx [%.2f-%.2f]", m, lo[base SUBSEP "pr"], hi[base SUBSEP "pr"])
                m = med(base SUBSEP "cr")
                if (m != "-") cr = sprintf("%.2fx [%.2f-%.2f]", m, lo[base SUBSEP "cr"], hi[base SUBSEP "cr"])
            }
            sy = med(base SUBSEP "sys"); cw = med(base SUBSEP "cs"); cu = med(base SUBSEP "cpu")
            printf "%-6s %-6s %-8s %10.0f %9s %9s %9s %8s %8s %8s  %-22s %-22s %-22s\n", c, s, t, med(base SUBSEP "rps"),
                us(med(base SUBSEP "p50")), us(med(base SUBSEP "p99")), us(med(base SUBSEP "p999")),
                sy == "-" ? "-" : sprintf("%.3f", sy), cw == "-" ? "-" : sprintf("%.3f", cw),
                cu == "-" ? "-" : sprintf("%.1fus", cu), rr, pr, cr
        }
    }
}' "$results"
