#!/usr/bin/env bash
# orbit-relay upgrades under load: wrk -c64 for 5 s through a relay (2 workers,
# a budget of 16 upstreams) that is upgraded twice on the way (orbit-relay
# --upgrade, same arguments): first by a relay of the same library, then by
# one on liborbit-bumped (RELAY_BUMPED_LIB: this library but for one layout,
# as another release would write), whose workers cannot share the running
# generation and start the next one beside it (FLEET@2). Checked: 0 non-2xx
# responses and 0 socket errors (connect, read, write, timeout); each relay
# taken over exits with its workers; the old generation is collected once its
# last worker is gone; the relays of one generation never hold more
# connections to the backend than the budget, old and new together (they
# share its pool), and two generations at most one budget each; a worker
# killed (-9) in either generation is reported dead by its own relay, and its
# generation ends with that relay's live workers alone. Then an upgrade that
# cannot start (another --listen) leaves the running relay serving, --upgrade
# with no relay running says so, and the last relay leaves nothing behind.
# Exits 77 when wrk is missing.
set -euo pipefail
relay=${ORBIT_RELAY_BIN:?ORBIT_RELAY_BIN names no program}
orbitctl=${ORBITCTL_BIN:?ORBITCTL_BIN names no program}
bumped=${RELAY_BUMPED_LIB:?RELAY_BUMPED_LIB names no library}
command -v wrk >/dev/null || { echo "wrk missing: skipped"; exit 77; }

tmp=$(mktemp -d /tmp/relay-upgrade.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# wait_for FILE TEXT: up to 10 s for TEXT in FILE.
wait_for() { for _ in $(seq 200); do grep -q "$2" "$1" && return 0; sleep 0.05; done; fail "no '$2' in $1: $(cat "$1")"; }
# The other release: a program run with it finds liborbit.so.0 here first.
mkdir "$tmp/bumped"
ln -s "$bumped" "$tmp/bumped/liborbit.so.0"
other=(env "LD_LIBRARY_PATH=$tmp/bumped${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
# The library the tools below run with: the running relay's (with=("${other[@]}") for the other's).
with=()
# The running relay's counters (--stats --json).
stats() { "${with[@]}" "$relay" --stats "$fleet" --json; }
# The pids of the running relay's workers, from its counters.
workers_of() { stats | python3 -c '
import json, sys
print(" ".join(str(w["pid"]) for w in json.load(sys.stdin)["workers"] if w["state"] == "running"))'; }
# field NAME: one top-level field of the running relay's counters.
field() { stats | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# alone GEN_NAME: that generation's nodes are the running relay's workers, alive, and nobody else.
alone() {
    local want
    want=$(workers_of)
    "${with[@]}" "$orbitctl" --json show "$1" | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["nodes"]
want = sorted(int(p) for p in sys.argv[1].split())
got = sorted(n["pid"] for n in nodes if n["state"] == "alive")
others = [n for n in nodes if n["state"] != "alive"]
sys.exit(0 if got == want and not others else "%s: nodes %s, want alive %s" % (sys.argv[2], nodes, want))' \
        "$want" "$1" || fail "generation $1"
}
# kill_one: kill -9 a worker of the running relay; its relay reports it dead and replaces it.
kill_one() {
    local victim reports
    victim=$(workers_of | awk '{ print $1 }')
    reports=$(field death_reports)
    kill -9 "$victim"
    for _ in $(seq 200); do
        [ "$(field death_reports)" -gt "$reports" ] && [ "$(workers_of | wc -w)" = 2 ] && return 0
        sleep 0.05
    done
    fail "worker $victim killed: no death report, or no replacement: $(stats)"
}
# The generations of the fleet as this library lists them (orbitctl ls): their names. (Other
# tests' fleets on this host may be half made or planted: an entry may lack any field.)
generations() { "$orbitctl" --json ls | python3 -c '
import json, sys
names = [f.get("name") or "" for f in json.load(sys.stdin)["fleets"]]
print(" ".join(sorted(n for n in names if n.split("@")[0] == sys.argv[1])))' "$fleet"; }

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
# A death in generation 1, before the load (a killed worker fails its requests).
kill_one
[ "$(field generation)" = 1 ] || fail "the first relay's workers are not in generation 1: $(stats)"
alone "$fleet"
old_workers=$(workers_of)

# The relays' connections to the backend (ESTABLISHED, to its port), sampled every 20 ms
# while wrk runs, the most at once in each phase (the file phase names it). Counted on the
# relays' side: a connection a relay closed is no longer ESTABLISHED there at once, while
# the backend's side may see the FIN a moment later, after a new connection of another
# CPU's worker. /proc/net/tcp is read bucket by bucket, not at one instant: a connection
# closed during a read and its replacement may both be in it. So a connection counts only
# if two reads, one after the other, hold it: every one counted was open when the first
# read ended.
bport=$(printf '%04X' "${backend##*:}")
established() { awk -v p="0100007F:$bport" '$3 == p && $4 == "01" { print $10 }' /proc/net/tcp | sort; }
echo 1 >"$tmp/phase"
( declare -A max; while [ ! -e "$tmp/stop-sampling" ]; do
      phase=$(cat "$tmp/phase")
      first=$(established); second=$(established)
      n=$(comm -12 <(echo "$first") <(echo "$second") | grep -c . || true)
      [ "$n" -gt "${max[$phase]:-0}" ] && max[$phase]=$n && echo "$n" >"$tmp/max-conns-$phase"
      sleep 0.02
  done ) & pids+=($!)

timeout 30 wrk -t1 -c64 -d5s --latency "http://$addr/size/100" >"$tmp/wrk" 2>&1 & w=$!; pids+=($w)
sleep 1
# Phase 1: a relay of the same library joins generation 1 and its pool.
"$relay" "${args[@]}" --upgrade >"$tmp/b.out" 2>&1 & b=$!; pids+=($b)
wait_for "$tmp/b.out" "took over from pid $a"
wait "$a" || fail "the relay taken over exited $?: $(cat "$tmp/a.out")"
for p in $old_workers; do ! kill -0 "$p" 2>/dev/null || fail "worker $p of the relay taken over is still running"; done
[ "$(field generation)" = 1 ] || fail "a relay of the same layouts left generation 1: $(stats)"
b_workers=$(workers_of)
sleep 1
# Phase 2: a relay of other layouts starts generation 2 beside it.
echo 2 >"$tmp/phase"
"${other[@]}" "$relay" "${args[@]}" --upgrade >"$tmp/c.out" 2>&1 & c=$!; pids+=($c)
wait_for "$tmp/c.out" "took over from pid $b"
wait "$b" || fail "the second relay taken over exited $?: $(cat "$tmp/b.out")"
grep -q "pid $a handed over and exited" "$tmp/b.out" || fail "b did not see a hand over: $(cat "$tmp/b.out")"
for p in $b_workers; do ! kill -0 "$p" 2>/dev/null || fail "worker $p of the second relay taken over is still running"; done
# Its last worker gone, the relay of generation 1 collected it: generation 2 is left alone.
[ "$(generations)" = "$fleet@2" ] || fail "generations after the upgrade across layouts: '$(generations)', want $fleet@2"
with=("${other[@]}")
[ "$(field generation)" = 2 ] || fail "the relay of other layouts is not in generation 2: $(stats)"
wait "$w" || fail "wrk did not finish: $(cat "$tmp/wrk")"
touch "$tmp/stop-sampling"
cat "$tmp/wrk"
! grep -qE 'Non-2xx|Socket errors' "$tmp/wrk" || fail "wrk: $(grep -E 'Non-2xx|Socket errors' "$tmp/wrk")"
requests=$(awk '/requests in/ { print $1 }' "$tmp/wrk")
[ "${requests:-0}" -gt 1000 ] || fail "wrk made only ${requests:-0} requests"
max1=$(cat "$tmp/max-conns-1" 2>/dev/null || echo 0)
max2=$(cat "$tmp/max-conns-2" 2>/dev/null || echo 0)
[ "$max1" -le 16 ] || fail "the relays of one generation held $max1 connections to the backend at once, over the budget of 16"
[ "$max2" -le 32 ] || fail "two generations held $max2 connections to the backend at once, over a budget of 16 each"
echo "connections to the backend at most: $max1 in one generation (budget 16), $max2 in two (16 each)"

# A death in generation 2: its relay reports it there; the generation is the last relay's.
kill_one
alone "$fleet@2"

# An upgrade that cannot start leaves the running relay as it was.
c_workers=$(workers_of)
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
[ -z "$(generations)" ] || fail "generations left behind: $(generations)"
echo "upgrade: ok"
