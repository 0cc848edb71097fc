#!/usr/bin/env bash
# relay-upgrade.sh — orbit-relay upgraded under load: wrk keep-alive load for
# the whole run, one `orbit-relay --upgrade` in the middle, and the latency
# before, during and after it.
#
#   tools/bench/relay-upgrade.sh [--relay PATH] [--workers N] [--upstreams U]
#                                [--connections C] [--duration S] [--at S] [--size B]
#
# wrk -c C (default 64) runs for S seconds (default 20) against a relay of N
# workers (default 2) in front of `orbit-relay --backend`; at S/2 (--at) a
# second relay of the same binary and arguments takes over with --upgrade.
# Beside wrk, a probe (`orbit-relay --load`, 4 connections, every body checked)
# runs in 1 s windows: each window's p99 is listed and marked before, during
# (it overlaps the hand-over: from the start of the new relay to the exit of
# the old one) or after, with the median p99 of each group. wrk's own totals
# follow: requests, non-2xx responses and socket errors (connect, read,
# write, timeout), p50/p99 of the whole run. Exit 1 when wrk or the probe saw
# a failed request or the hand-over did not complete. Installs nothing: exits
# 77 without wrk.
set -euo pipefail

relay=""; workers=2; upstreams=""; conns=64; duration=20; at=""; size=100
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --relay) relay=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --upstreams) upstreams=$2; shift 2 ;;
        --connections) conns=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --at) at=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "relay-upgrade.sh: bad argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
num() { [[ "$1" =~ ^[1-9][0-9]*$ ]] || { echo "relay-upgrade.sh: bad number '$1' (see --help)" >&2; exit 2; }; }
for v in "$workers" "$conns" "$duration" "$size" ${upstreams:+"$upstreams"} ${at:+"$at"}; do num "$v"; done
at=${at:-$((duration / 2))}
[ "$at" -lt "$duration" ] || { echo "relay-upgrade.sh: --at must be before the end of --duration" >&2; exit 2; }
relay=${relay:-$(cd "$(dirname "$0")/../.." && pwd)/build/tools/orbit-relay/orbit-relay}
[ -x "$relay" ] || { echo "relay-upgrade.sh: no orbit-relay at $relay (--relay PATH)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "relay-upgrade.sh: wrk is not installed"; exit 77; }

tmp=$(mktemp -d /tmp/relay-upgrade.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
die() { echo "relay-upgrade.sh: $*" >&2; exit 1; }
wait_for() { for _ in $(seq 300); do grep -q "$2" "$1" && return 0; sleep 0.05; done; die "no '$2' in $1: $(cat "$1")"; }
now() { date +%s.%N; }

"$relay" --backend 127.0.0.1:0 >"$tmp/backend.out" 2>&1 & pids+=($!)
wait_for "$tmp/backend.out" 'listening on'
backend=$(grep -o 'listening on [0-9.:]*' "$tmp/backend.out" | awk '{ print $3 }')
fleet="bench-upgrade-$$"
args=(--fleet "$fleet" --listen 127.0.0.1:0 --upstream "$backend" --workers "$workers" ${upstreams:+--upstreams "$upstreams"})
"$relay" "${args[@]}" >"$tmp/old.out" 2>&1 & old=$!; pids+=($old)
wait_for "$tmp/old.out" 'workers on'
addr=$(grep -o 'workers on [0-9.:]*' "$tmp/old.out" | awk '{ print $3 }')

echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
echo "relay: $workers workers${upstreams:+, $upstreams upstreams}; wrk -t1 -c$conns -d${duration}s --latency http://$addr/size/$size; upgrade at ${at}s"
t0=$(now)
wrk -t1 -c"$conns" -d"${duration}s" --latency "http://$addr/size/$size" >"$tmp/wrk" 2>&1 & w=$!; pids+=($w)
( end=$(awk -v t="$t0" -v d="$duration" 'BEGIN { printf "%.3f", t + d - 1 }')
  while awk -v n="$(now)" -v e="$end" 'BEGIN { exit !(n < e) }'; do
      s=$(now)
      out=$("$relay" --load "http://$addr/" --connections 4 --duration 1 --json 2>&1) || true
      echo "$s $(now) $out"
  done >"$tmp/probe" ) & probe=$!; pids+=($probe)
sleep "$at"
t_up=$(now)
"$relay" "${args[@]}" --upgrade >"$tmp/new.out" 2>&1 & new=$!; pids+=($new)
wait_for "$tmp/new.out" "took over from pid $old"
t_ready=$(now)
wait "$old" || die "the old relay exited $?: $(cat "$tmp/old.out")"
t_gone=$(now)
wait "$w" || die "wrk failed: $(cat "$tmp/wrk")"
wait "$probe" || true

awk -v t0="$t0" -v up="$t_up" -v ready="$t_ready" -v gone="$t_gone" '
function field(s, k,   m) { if (match(s, "\"" k "\":\"?[0-9.]+")) { m = substr(s, RSTART, RLENGTH); sub(/.*:"?/, "", m); return m } return "" }
function median(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } return n ? (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2) : 0 }
BEGIN { printf "hand-over: new relay started at %.2fs, serving at %.2fs, old relay gone at %.2fs\n", up - t0, ready - t0, gone - t0
        print "probe windows (4 connections, 1 s each):"; print "  start    p50 us   p99 us  failed  when" }
{ s = $1; e = $2; p99 = field($0, "p99_us"); p50 = field($0, "p50_us"); f = field($0, "failed") + field($0, "lost") + field($0, "timeouts")
  if (p99 == "") { print "  probe failed: " $0; bad = 1; next }
  when = e <= up ? "before" : s >= gone ? "after" : "during"
  printf "  %5.1fs %8.1f %8.1f %7d  %s\n", s - t0, p50, p99, f, when
  failed += f; n[when]++; v[when, n[when]] = p99 }
END { for (k in n) { delete a; for (i = 1; i <= n[k]; i++) a[i] = v[k, i]; med[k] = median(a, n[k]) }
      printf "p99 median: before %.1f us (%d windows), during %.1f us (%d), after %.1f us (%d); probe failures %d\n",
             med["before"], n["before"], med["during"], n["during"], med["after"], n["after"], failed
      exit (failed > 0 || bad) }' "$tmp/probe" || probe_bad=1
echo "wrk:"
sed -n '/Latency Distribution/,$p' "$tmp/wrk" | sed 's/^/  /'
grep -qE 'Non-2xx|Socket errors' "$tmp/wrk" && die "wrk saw failed requests"
[ -z "${probe_bad:-}" ] || die "the probe saw failed requests"
echo "no failed request"
