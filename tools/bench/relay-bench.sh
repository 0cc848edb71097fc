#!/usr/bin/env bash
# relay-bench.sh — orbit-relay against nginx as a reverse proxy and the backend
# directly, side by side in one run: wrk keep-alive load, 100 B and 64 KiB
# responses; requests/s, p50/p99 latency, and syscalls and context switches
# per request of each proxy's workers (perf stat, or /proc counters without it).
#
#   tools/bench/relay-bench.sh [--relay PATH] [--workers N] [--connections C]
#                              [--duration S] [--repeat R] [--upstreams U]
#
# Installs nothing: says what is missing (wrk and nginx are needed; perf is
# optional) and exits 77 without them.
set -euo pipefail

relay=""; workers=2; conns=64; duration=8; repeat=1; upstreams=""
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --relay) relay=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --connections) conns=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --upstreams) upstreams=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --version) echo "relay-bench.sh 1"; exit 0 ;;
        *) echo "relay-bench.sh: bad argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$workers" "$conns" "$duration" "$repeat" ${upstreams:+"$upstreams"}; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "relay-bench.sh: bad number '$v' (see --help)" >&2; exit 2; }
done
if [ -z "$relay" ]; then
    here=$(cd "$(dirname "$0")/../.." && pwd)
    relay=$here/build/tools/orbit-relay/orbit-relay
fi
missing=()
[ -x "$relay" ] || missing+=("orbit-relay ($relay: build it first)")
command -v wrk >/dev/null || missing+=("wrk (apt-get install wrk)")
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || missing+=("nginx (apt-get install nginx-light)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "relay-bench.sh: missing: ${missing[*]}" >&2
    exit 77
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
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid" 2>/dev/null)" 2>/dev/null || true
    sleep 0.5
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {   # a port nothing listens on
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null || { echo "$p"; return; }
    done
}
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

bport=$(free_port); rport=$(free_port); nport=$(free_port)
fleet="bench-relay-$$"
"$relay" --backend 127.0.0.1:"$bport" --quiet >/dev/null 2>&1 & pids+=($!)
wait_port "$bport"
"$relay" --fleet "$fleet" --listen 127.0.0.1:"$rport" --upstream 127.0.0.1:"$bport" --workers "$workers" \
    ${upstreams:+--upstreams "$upstreams"} >"$tmp/relay.log" 2>&1 & relay_pid=$!; pids+=($relay_pid)
wait_port "$rport"
cat >"$tmp/nginx.conf" <<EOF
worker_processes $workers;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err warn;
events { worker_connections 4096; }
http {
    access_log off;
    upstream backend { server 127.0.0.1:$bport; keepalive 64; }
    server {
        listen 127.0.0.1:$nport reuseport;
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
sleep 0.3

children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -v '^$' | paste -sd, -; }
ctxsw() {   # sum of context switches of the pids in a comma list
    local sum=0 p
    for p in ${1//,/ }; do
        sum=$((sum + $(awk '/ctxt_switches/ { s += $2 } END { print s }' /proc/"$p"/status 2>/dev/null || echo 0)))
    done
    echo "$sum"
}

# run NAME PORT PATH: one wrk run; prints "rps p50 p99 sys/req cs/req load".
run() {
    local name=$1 port=$2 path=$3 who="" cs0=0 cs1 perfpid="" load
    load=$(cut -d' ' -f1 /proc/loadavg)
    case $name in
        relay) who=$(children "$relay_pid") ;;
        nginx) who=$(children "$(cat "$tmp/nginx.pid")") ;;
    esac
    if [ -n "$who" ]; then
        cs0=$(ctxsw "$who")
        if [ $have_perf = 1 ]; then
            perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$who" -o "$tmp/perf.$name" \
                -- sleep "$duration" >/dev/null 2>&1 & perfpid=$!
        fi
    fi
    wrk -t2 -c"$conns" -d"${duration}s" --latency "http://127.0.0.1:$port$path" >"$tmp/wrk.out" 2>&1
    [ -n "$perfpid" ] && wait "$perfpid" 2>/dev/null || true
    local rps p50 p99 total
    rps=$(awk '/^Requests\/sec/ { print $2 }' "$tmp/wrk.out")
    total=$(awk '/requests in/ { print $1 }' "$tmp/wrk.out")
    p50=$(awk '$1 == "50%" { print $2 }' "$tmp/wrk.out")
    p99=$(awk '$1 == "99%" { print $2 }' "$tmp/wrk.out")
    local sys="-" cs="-"
    if [ -n "$who" ] && [ -n "$total" ] && [ "$total" -gt 0 ]; then
        if [ $have_perf = 1 ] && [ -s "$tmp/perf.$name" ]; then
            sys=$(awk -F, -v n="$total" '/raw_syscalls/ { printf "%.2f", $1 / n }' "$tmp/perf.$name")
            cs=$(awk -F, -v n="$total" '/context-switches/ { printf "%.2f", $1 / n }' "$tmp/perf.$name")
        else
            cs1=$(ctxsw "$who")
            cs=$(awk -v a="$cs0" -v b="$cs1" -v n="$total" 'BEGIN { printf "%.2f", (b - a) / n }')
        fi
    fi
    if grep -q 'Non-2xx\|Socket errors' "$tmp/wrk.out"; then
        echo "  ($name $path: $(grep -E 'Non-2xx|Socket errors' "$tmp/wrk.out" | tr -s ' '))" >&2
    fi
    echo "$rps $p50 $p99 $sys $cs $load"
}

echo "relay-bench: $workers workers each, wrk -t2 -c$conns -d${duration}s keep-alive, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  (the load column: the 1-minute load average as each run began; on a shared machine figures are noisy)"
echo "relay: $(head -1 "$tmp/relay.log")"
echo "nginx: $("$NGINX" -v 2>&1 | sed 's/.*: //'), upstream keepalive 64"
printf '%-8s %-6s %12s %10s %10s %9s %9s %12s %6s\n' size target "req/s" p50 p99 "sys/req" "cs/req" "vs nginx" load
for r in $(seq "$repeat"); do
    for size in 100 65536; do
        path=/size/$size
        declare -A res=()
        for t in backend relay nginx; do
            case $t in backend) port=$bport ;; relay) port=$rport ;; nginx) port=$nport ;; esac
            res[$t]=$(run "$t" "$port" "$path")
        done
        nrps=$(echo "${res[nginx]}" | awk '{ print $1 }')
        for t in backend relay nginx; do
            read -r rps p50 p99 sys cs load <<<"${res[$t]}"
            ratio=$(awk -v a="$rps" -v b="$nrps" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
            printf '%-8s %-6s %12s %10s %10s %9s %9s %12s %6s\n' "$size" "$t" "$rps" "$p50" "$p99" "$sys" "$cs" "$ratio" "$load"
        done
    done
done
