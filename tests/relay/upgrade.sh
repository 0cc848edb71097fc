#!/usr/bin/env bash
# orbit-relay upgrades under load: wrk -c64 for 5 s through a relay (2 workers,
# a budget of 16 upstreams) that is upgraded twice on the way (orbit-relay
# --upgrade, same arguments): 0 non-2xx responses and 0 socket errors
# (connect, read, write, timeout); each relay taken over exits with its
# workers; the fleet ends with the last relay's workers alone, alive; the
# relays never hold more connections to the backend than the budget, old and
# new together (they share the fleet's pool). Then an upgrade that
# cannot start (another --listen) leaves the running relay serving, and
# --upgrade with no relay running says so. Exits 77 when wrk is missing.
set -euo pipefail
relay=${ORBIT_RELAY_BIN:?ORBIT_RELAY_BIN names no program}
orbitctl=${ORBITCTL_BIN:?ORBITCTL_BIN names no program}
command -v wrk >/dev/null || { echo "wrk missing: skipped"; exit 77; }

tmp=$(mktemp -d /tmp/relay-upgrade.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# wait_for FILE TEXT: up to 10 s for TEXT in FILE.
wait_for() { for _ in $(seq 200); do grep -q "$2" "$1" && return 0; sleep 0.05; done; fail "no '$2' in $1: $(cat "$1")"; }
# The pids of a relay's running workers, from its counters (--stats --json).
workers_of() { "$relay" --stats "$fleet" --json | python3 -c '
import json, sys
print(" ".join(str(w["pid"]) for w in json.load(sys.stdin)["workers"] if w["state"] == "running"))'; }

"$relay" --backend 127.0.0.1:0 >"$tmp/backend.out" 2>&1 & pids+=($!)
wait_for "$tmp/backend.out" 'listening on'
backend=$(grep -o 'listening on [0-9.:]*' "$tmp/backend.out" | awk '{ print $3 }')
fleet="t-relay-upgrade-$$-$RANDOM"
args=(--fleet "$fleet" --listen 127.0.0.1:0 --upstream "$backend" --workers 2 --upstreams 16)
"$relay" "${args[@]}" >"$tmp/a.out" 2>&1 & a=$!; pids+=($a)
wait_for "$tmp/a.out" 'workers on'
addr=$(grep -o 'workers on [0-9.:]*' "$tmp/a.out" | awk '{ print $3 }')
ctl=/dev/shm/orbit-relay.$fleet.ctl
[ -S "$ctl" ] && [ "$(stat -c %a "$ctl")" = 600 ] || fail "no control socket of mode 600 at $ctl"
old_workers=$(workers_of)

# The relays' connections to the backend (ESTABLISHED, to its port), sampled every 20 ms
# while wrk runs. Counted on the relays' side: a connection a relay closed is no longer
# ESTABLISHED there at once, while the backend's side may see the FIN a moment later, after
# a new connection of another CPU's worker. /proc/net/tcp is read bucket by bucket, not at
# one instant: a connection closed during a read and its replacement may both be in it. So
# a connection counts only if two reads, one after the other, hold it: every one counted
# was open when the first read ended.
bport=$(printf '%04X' "${backend##*:}")
established() { awk -v p="0100007F:$bport" '$3 == p && $4 == "01" { print $10 }' /proc/net/tcp | sort; }
( max=0; while [ ! -e "$tmp/stop-sampling" ]; do
      first=$(established); second=$(established)
      n=$(comm -12 <(echo "$first") <(echo "$second") | grep -c . || true)
      [ "$n" -gt "$max" ] && max=$n && echo "$max" >"$tmp/max-conns"
      sleep 0.02
  done ) & pids+=($!)

timeout 30 wrk -t1 -c64 -d5s --latency "http://$addr/size/100" >"$tmp/wrk" 2>&1 & w=$!; pids+=($w)
sleep 1
"$relay" "${args[@]}" --upgrade >"$tmp/b.out" 2>&1 & b=$!; pids+=($b)
wait_for "$tmp/b.out" "took over from pid $a"
wait "$a" || fail "the relay taken over exited $?: $(cat "$tmp/a.out")"
for p in $old_workers; do ! kill -0 "$p" 2>/dev/null || fail "worker $p of the relay taken over is still running"; done
b_workers=$(workers_of)
sleep 1
"$relay" "${args[@]}" --upgrade >"$tmp/c.out" 2>&1 & c=$!; pids+=($c)
wait_for "$tmp/c.out" "took over from pid $b"
wait "$b" || fail "the second relay taken over exited $?: $(cat "$tmp/b.out")"
grep -q "pid $a handed over and exited" "$tmp/b.out" || fail "b did not see a hand over: $(cat "$tmp/b.out")"
for p in $b_workers; do ! kill -0 "$p" 2>/dev/null || fail "worker $p of the second relay taken over is still running"; done
wait "$w" || fail "wrk did not finish: $(cat "$tmp/wrk")"
touch "$tmp/stop-sampling"
cat "$tmp/wrk"
! grep -qE 'Non-2xx|Socket errors' "$tmp/wrk" || fail "wrk: $(grep -E 'Non-2xx|Socket errors' "$tmp/wrk")"
requests=$(awk '/requests in/ { print $1 }' "$tmp/wrk")
[ "${requests:-0}" -gt 1000 ] || fail "wrk made only ${requests:-0} requests"
max=$(cat "$tmp/max-conns" 2>/dev/null || echo 0)
[ "$max" -le 16 ] || fail "the relays held $max connections to the backend at once, over the budget of 16"
echo "connections to the backend at most: $max (budget 16)"

# The fleet: the last relay's two workers, alive, and nobody else.
c_workers=$(workers_of)
"$orbitctl" --json show "$fleet" | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["nodes"]
want = sorted(int(p) for p in sys.argv[1].split())
got = sorted(n["pid"] for n in nodes if n["state"] == "alive")
others = [n for n in nodes if n["state"] != "alive"]
sys.exit(0 if got == want and not others else "fleet nodes %s, want alive %s" % (nodes, want))' "$c_workers" \
    || fail "the fleet after the upgrades"

# An upgrade that cannot start leaves the running relay as it was.
rc=0; "$relay" --fleet "$fleet" --listen 127.0.0.1:1 --upstream "$backend" --workers 2 --upgrade \
    >"$tmp/d.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q 'but the running relay listens on' "$tmp/d.out" || fail "a bad upgrade: $rc $(cat "$tmp/d.out")"
kill -0 "$c" || fail "the running relay died of a failed upgrade"
grep -q 'carrying on' "$tmp/c.out" || fail "the running relay did not say it carries on: $(cat "$tmp/c.out")"
timeout 10 wrk -t1 -c4 -d1s "http://$addr/size/100" >"$tmp/wrk2" 2>&1 || fail "wrk after a failed upgrade"
! grep -qE 'Non-2xx|Socket errors' "$tmp/wrk2" || fail "after a failed upgrade: $(cat "$tmp/wrk2")"
[ "$(workers_of)" = "$c_workers" ] || fail "--stats no longer shows the running relay"
# No relay to take over from (here at a --control path of its own): one line, exit 1.
rc=0; "$relay" --fleet "$fleet" --listen 127.0.0.1:0 --upstream "$backend" --control "$tmp/none.ctl" --upgrade \
    >"$tmp/e.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$tmp/e.out")" = 1 ] && grep -q 'no relay of this fleet answers' "$tmp/e.out" \
    || fail "--upgrade with nothing running: $rc $(cat "$tmp/e.out")"

kill "$c"; wait "$c" || fail "the last relay exited $?"
! ls /dev/shm | grep -qF "$fleet" || fail "left behind: $(ls /dev/shm | grep -F "$fleet")"
echo "upgrade: ok"
