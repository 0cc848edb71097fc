#!/usr/bin/env bash
# orbit-relay's io_uring features (and splice), each forced off (ORBIT_RELAY_NO_*) or asked
# for (the opt-in ORBIT_RELAY_ZC, ORBIT_RELAY_BATCH, ORBIT_RELAY_YIELD): for each setting, --stats
# --json must report the feature so, and real HTTP traffic through the relay
# must come back byte for byte: the load generator's checked bodies over 8
# keep-alive connections, a 300 KB response compared with the backend's own,
# pipelined requests, a 200 KiB upload held whole and a 5 MiB one streamed.
# Exits 77 when curl is missing (meson reports SKIP).
set -euo pipefail
relay=${ORBIT_RELAY_BIN:?ORBIT_RELAY_BIN names no program}
command -v curl >/dev/null || { echo "curl missing: skipped"; exit 77; }

tmp=$(mktemp -d /tmp/relay-features.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL ($setting): $*" >&2; exit 1; }
setting=backend

"$relay" --backend 127.0.0.1:0 >"$tmp/backend.out" 2>&1 & pids+=($!)
for _ in $(seq 100); do grep -q 'listening on' "$tmp/backend.out" && break; sleep 0.05; done
backend=$(grep -o 'listening on [0-9.:]*' "$tmp/backend.out" | awk '{ print $3 }')
[ -n "$backend" ] || fail "the backend did not start"
curl -s --max-time 5 -o "$tmp/want" "http://$backend/size/300000" || fail "backend /size/300000"
head -c 204800 /dev/urandom >"$tmp/up"
head -c 5242880 /dev/zero >"$tmp/big"

# pipelined ADDR: three requests in one write; the three answers must come, then the close.
pipelined() {
    local host=${1%:*} port=${1##*:}
    exec 3<>/dev/tcp/"$host"/"$port" || fail "pipelined: no connection"
    printf 'GET /size/10 HTTP/1.1\r\nHost: a\r\n\r\nGET /size/5000 HTTP/1.1\r\nHost: a\r\n\r\nGET /size/20 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' >&3
    timeout 5 cat <&3 >"$tmp/pipe" || true
    exec 3<&-
    # (a body need not end in a newline: the next status line is not at a line start)
    local n
    n=$(grep -a -o 'HTTP/1.1 200 ' "$tmp/pipe" | wc -l)
    [ "$n" = 3 ] || fail "pipelined: $n answers of 3"
    # Their bodies: 10 + 5000 + 20 bytes, after three heads (the bytes are checked by the load above).
    [ "$(stat -c %s "$tmp/pipe")" -gt 5030 ] || fail "pipelined: $(stat -c %s "$tmp/pipe") bytes"
}

# start_relay FLEET [NAME=VALUE...] -- ARGS...: the relay under that environment with
# ARGS, on the backend; sets pid and addr (declare them local in the caller).
start_relay() {
    local fleet=$1 envs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    # Emptied here, not only by the redirection below: the background job opens the file when
    # it runs, and the loop after it read the previous relay's line meanwhile.
    : >"$tmp/relay.out"
    env "${envs[@]}" "$relay" --fleet "$fleet" --listen 127.0.0.1:0 --upstream "$backend" "$@" \
        >"$tmp/relay.out" 2>&1 &
    pid=$!; pids+=($pid)
    # The whole line: ", backend" follows the address (a partial line has none yet).
    for _ in $(seq 200); do grep -q 'workers on .*, backend' "$tmp/relay.out" && break; sleep 0.05; done
    addr=$(grep -o 'workers on [0-9.:]*' "$tmp/relay.out" | awk '{ print $3 }' || true)
    [ -n "$addr" ] || fail "the relay did not start: $(cat "$tmp/relay.out")"
}

# load_ok CONNECTIONS REQUESTS: the load generator's checked bodies all come back through addr.
load_ok() {
    "$relay" --load "http://$addr/" --connections "$1" --requests "$2" --json >"$tmp/load" || fail "load: $(cat "$tmp/load")"
    grep -q "\"ok\":\"$2\"" "$tmp/load" && grep -q '"bad_body":"0"' "$tmp/load" || fail "load: $(cat "$tmp/load")"
}

# check SETTING EXPECT...: EXPECT are feature=state pairs --stats --json must show.
check() {
    setting=$1; shift
    local fleet="t-relay-feat-$$-$RANDOM" env=() pid addr
    [ "$setting" = default ] || IFS=+ read -r -a env <<<"$setting"
    start_relay "$fleet" "${env[@]/%/=1}" -- --workers 2
    local e n
    for e in "$@"; do
        for _ in $(seq 40); do   # both workers' slots, once they run
            "$relay" --stats "$fleet" --json >"$tmp/stats" || fail "--stats"
            n=$(grep -o "\"${e%=*}\":\"${e#*=}\"" "$tmp/stats" | wc -l || true)
            [ "$n" -ge 2 ] && break
            sleep 0.05
        done
        [ "$n" -ge 2 ] || fail "--stats: $e in $n of 2 workers: $(grep -o '"features":{[^}]*}' "$tmp/stats" | head -2)"
    done
    load_ok 8 3000
    curl -s --max-time 10 -o "$tmp/got" "http://$addr/size/300000" || fail "curl /size/300000"
    cmp -s "$tmp/want" "$tmp/got" || fail "/size/300000 differs from the backend's"
    pipelined "$addr"
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --data-binary @"$tmp/up" "http://$addr/size/5")
    [ "$code" = 200 ] || fail "200 KiB upload: $code"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -H 'Expect:' --data-binary @"$tmp/big" "http://$addr/size/5")
    [ "$code" = 200 ] || fail "5 MiB upload: $code"
    "$relay" --stats "$fleet" --json >"$tmp/stats" || fail "--stats at the end"
    grep -q '"deaths":"0"' "$tmp/stats" || fail "a worker died: $(cat "$tmp/relay.out")"
    # The 300 KB body went by splice exactly where splice is on.
    local spliced
    spliced=$(grep -o '"spliced":"[0-9]*"' "$tmp/stats" | grep -o '[0-9]*' | awk '{ s += $1 } END { print s + 0 }')
    if grep -q '"splice_body":"on"' "$tmp/stats"; then
        [ "$spliced" -gt 0 ] || fail "splice on, yet no body went by splice"
    else
        [ "$spliced" = 0 ] || fail "$spliced bodies went by splice with splice off"
    fi
    kill "$pid" 2>/dev/null || fail "the relay ended early: $(cat "$tmp/relay.out")"
    wait "$pid" 2>/dev/null || true
    echo "ok: $setting ($*)"
}

# Linux 6.10 has every feature here (bundles came last): the default runs them all.
kv=$(uname -r | awk -F. '{ print $1 * 100 + $2 }')
if [ "$kv" -ge 610 ]; then
    on=(multishot_accept=on multishot_recv=on recv_bundle=on defer_taskrun=on)
else
    on=()
    echo "kernel $(uname -r) before 6.10: the default's features not checked on"
fi
[ "$(nproc)" -ge 2 ] && on+=(pinned_cpu=on)
# Linux 6.12 brought the min-wait the batched wait and the wait past sends need.
if [ "$kv" -ge 612 ]; then on+=(wait_past_sends=on); fi
# Splice needs the clients' sockets as plain descriptors: direct ones only without it.
check default "${on[@]}" zerocopy_send=opt-in batched_wait=opt-in linked_upstream=on quiet_own_wait=on \
    splice_body=on direct_descriptors=off yields_cpu=opt-in
check ORBIT_RELAY_NO_SPLICE splice_body=env direct_descriptors=on
check ORBIT_RELAY_NO_MULTISHOT multishot_accept=env multishot_recv=env recv_bundle=env splice_body=on
check ORBIT_RELAY_NO_BUNDLE recv_bundle=env multishot_recv=on
check ORBIT_RELAY_NO_DIRECT+ORBIT_RELAY_NO_SPLICE direct_descriptors=env multishot_accept=on multishot_recv=on
check ORBIT_RELAY_NO_DEFER_TASKRUN defer_taskrun=env single_issuer=on
check ORBIT_RELAY_ZC zerocopy_send=on
check ORBIT_RELAY_ZC+ORBIT_RELAY_NO_ZC zerocopy_send=env
if [ "$kv" -ge 612 ]; then
    check ORBIT_RELAY_BATCH batched_wait=on
    check ORBIT_RELAY_BATCH+ORBIT_RELAY_NO_DEFER_TASKRUN batched_wait=on defer_taskrun=env
fi
check ORBIT_RELAY_BATCH+ORBIT_RELAY_NO_BATCH batched_wait=env
check ORBIT_RELAY_NO_LINK linked_upstream=env
check ORBIT_RELAY_NO_WAIT_PAST_SENDS wait_past_sends=env linked_upstream=on
check ORBIT_RELAY_NO_WAIT_PAST_SENDS+ORBIT_RELAY_NO_LINK wait_past_sends=env linked_upstream=env
check ORBIT_RELAY_NO_LINK+ORBIT_RELAY_NO_MULTISHOT linked_upstream=env multishot_recv=env
check ORBIT_RELAY_NO_MULTISHOT+ORBIT_RELAY_NO_DIRECT+ORBIT_RELAY_NO_DEFER_TASKRUN multishot_recv=env \
    direct_descriptors=env defer_taskrun=env
check ORBIT_RELAY_NO_QUIET_WAIT quiet_own_wait=env wait_past_sends=on
# A request waiting for one of its worker's own upstreams (more connections than
# the budget) arms no FUTEX_WAIT on the pool key: quiet_waits counts those. Forced
# off, every such wait arms one and quiet_waits stays 0; the bodies stay exact.
quiet() {   # ENV EXPECT: EXPECT "some" or "none" quiet waits over 24 connections, budget 16
    setting="quiet own wait, $1"
    local fleet="t-relay-feat-$$-q$RANDOM" pid addr n
    start_relay "$fleet" "$1" -- --workers 2 --upstreams 16
    load_ok 24 20000
    "$relay" --stats "$fleet" --json >"$tmp/stats" || fail "--stats"
    n=$(grep -o '"quiet_waits":"[0-9]*"' "$tmp/stats" | grep -o '[0-9]*' | awk '{ s += $1 } END { print s + 0 }')
    local waits
    waits=$(grep -o '"pool_waits":"[0-9]*"' "$tmp/stats" | grep -o '[0-9]*' | awk '{ s += $1 } END { print s + 0 }')
    [ "$waits" -gt 0 ] || fail "no pool waits at all: the load did not exercise them"
    if [ "$2" = some ]; then [ "$n" -gt 0 ] || fail "no quiet waits of $waits pool waits"
    else [ "$n" = 0 ] || fail "$n quiet waits while forced off"; fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "ok: $setting ($n quiet of $waits pool waits)"
}
quiet ORBIT_RELAY_NO_QUIET_WAIT=0 some
quiet ORBIT_RELAY_NO_QUIET_WAIT=1 none
# Workers pinned one to a CPU in turn (two or more CPUs): each worker's
# Cpus_allowed_list is one CPU, and two workers never share it on two CPUs;
# forced off, each may run on every CPU the supervisor may.
pinned() {   # ENV EXPECT (pinned or free)
    setting="pinned workers, $1"
    local fleet="t-relay-feat-$$-p$RANDOM" pid addr
    start_relay "$fleet" "$1" -- --workers 2
    load_ok 8 3000
    local all w lists=()
    all=$(grep Cpus_allowed_list /proc/$$/status | awk '{ print $2 }')
    for w in $(cat /proc/"$pid"/task/*/children); do
        lists+=("$(grep Cpus_allowed_list /proc/"$w"/status | awk '{ print $2 }')")
    done
    [ ${#lists[@]} = 2 ] || fail "${#lists[@]} workers, not 2"
    if [ "$2" = pinned ]; then
        for w in "${lists[@]}"; do [[ "$w" =~ ^[0-9]+$ ]] || fail "a worker may run on $w, not one CPU"; done
        [ "${lists[0]}" != "${lists[1]}" ] || fail "both workers on CPU ${lists[0]}"
    else
        for w in "${lists[@]}"; do [ "$w" = "$all" ] || fail "a worker pinned to $w while forced off"; done
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "ok: $setting (${lists[*]})"
}
# A yielding worker runs at nice ORBIT_RELAY_YIELD_NICE (5 unless set); the
# supervisor keeps its own; turned off, or not asked for, the workers keep it too.
yielding() {   # ENV... -- EXPECT: the workers' nice value
    setting="yielding workers, $*"
    local fleet="t-relay-feat-$$-y$RANDOM" pid addr envs=() w n sup
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    start_relay "$fleet" "${envs[@]}" -- --workers 2
    load_ok 8 3000
    sup=$(awk '{ print $19 }' /proc/"$pid"/stat)
    [ "$sup" = 0 ] || fail "the supervisor runs at nice $sup"
    n=0
    for w in $(cat /proc/"$pid"/task/*/children); do
        [ "$(awk '{ print $19 }' /proc/"$w"/stat)" = "$2" ] || fail "a worker at nice $(awk '{ print $19 }' /proc/"$w"/stat), not $2"
        n=$((n + 1))
    done
    [ $n = 2 ] || fail "$n workers, not 2"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "ok: $setting"
}
check ORBIT_RELAY_YIELD yields_cpu=on
check ORBIT_RELAY_YIELD+ORBIT_RELAY_NO_YIELD yields_cpu=env
yielding ORBIT_RELAY_YIELD=1 -- 5
yielding ORBIT_RELAY_YIELD=1 ORBIT_RELAY_YIELD_NICE=19 -- 19
yielding ORBIT_RELAY_YIELD=1 ORBIT_RELAY_NO_YIELD=1 -- 0
yielding ORBIT_RELAY_YIELD=0 -- 0
if [ "$(nproc)" -ge 2 ]; then
    check ORBIT_RELAY_NO_PIN pinned_cpu=env quiet_own_wait=on
    pinned ORBIT_RELAY_NO_PIN=0 pinned
    pinned ORBIT_RELAY_NO_PIN=1 free
fi
# The batched wait's depth follows requests in flight, not connections: one busy
# client among 62 idle keep-alive ones must not sit out the min-wait (500 us) on
# each of its requests (a depth by connections made its p50 1.1 ms, not 0.1 ms).
setting="batched wait, 62 idle connections"
fleet="t-relay-feat-$$-idle"
start_relay "$fleet" ORBIT_RELAY_BATCH=1 -- --workers 2
idle=()
for _ in $(seq 62); do exec {fd}<>/dev/tcp/"${addr%:*}"/"${addr##*:}" || fail "idle connection"; idle+=("$fd"); done
best=""
for _ in 1 2 3; do   # the best of three: a busy host may stall one run
    "$relay" --load "http://$addr/" --connections 1 --requests 2000 --json >"$tmp/load" || fail "load: $(cat "$tmp/load")"
    grep -q '"ok":"2000"' "$tmp/load" || fail "load: $(cat "$tmp/load")"
    p50=$(grep -o '"p50_us":[0-9.]*' "$tmp/load" | cut -d: -f2)
    [ -z "$best" ] || awk -v a="$p50" -v b="$best" 'BEGIN { exit !(a < b) }' && best=$p50
done
awk -v p="$best" 'BEGIN { exit !(p < 800) }' || fail "p50 ${best} us with idle connections open (the min-wait sat out?)"
for fd in "${idle[@]}"; do exec {fd}>&-; done
kill "$pid" 2>/dev/null || true
echo "ok: $setting (p50 ${best} us)"
echo "relay features: ok"
