#!/usr/bin/env bash
# orbit-relay with real clients: curl (HTTP/1.0, Connection: close, chunked
# and 100-continue uploads, keep-alive reuse) and, where installed, ab -k and
# wrk (keep-alive load that must finish with no error). Exits 77 when curl is
# missing (meson reports SKIP).
set -euo pipefail
relay=${ORBIT_RELAY_BIN:?ORBIT_RELAY_BIN names no program}
command -v curl >/dev/null || { echo "curl missing: skipped"; exit 77; }

tmp=$(mktemp -d /tmp/relay-clients.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$relay" --backend 127.0.0.1:0 >"$tmp/backend.out" 2>&1 & pids+=($!)
for _ in $(seq 100); do grep -q 'listening on' "$tmp/backend.out" && break; sleep 0.05; done
backend=$(grep -o 'listening on [0-9.:]*' "$tmp/backend.out" | awk '{ print $3 }')
fleet="t-relay-clients-$$-$RANDOM"
"$relay" --fleet "$fleet" --listen 127.0.0.1:0 --upstream "$backend" --workers 2 >"$tmp/relay.out" 2>&1 & pids+=($!)
for _ in $(seq 200); do grep -q 'workers on' "$tmp/relay.out" && break; sleep 0.05; done
addr=$(grep -o 'workers on [0-9.:]*' "$tmp/relay.out" | awk '{ print $3 }')
[ -n "$addr" ] || fail "the relay did not start: $(cat "$tmp/relay.out")"
url=http://$addr

# HTTP/1.0: an answer, and no keep-alive promised.
out=$(curl -s -0 -D - -o "$tmp/b" --max-time 5 "$url/size/300") || fail "curl -0"
[ "$(stat -c %s "$tmp/b")" = 300 ] || fail "HTTP/1.0 body: $(stat -c %s "$tmp/b") bytes"
! grep -qi '^connection: keep-alive' <<<"$out" || fail "HTTP/1.0 told keep-alive: $out"
# Connection: close is answered with close.
out=$(curl -s -D - -o /dev/null --max-time 5 -H 'Connection: close' "$url/size/10") || fail "curl close"
grep -qi '^connection: close' <<<"$out" || fail "no Connection: close in $out"
# Keep-alive: two URLs on one connection.
out=$(curl -s -v -o /dev/null -o /dev/null --max-time 5 "$url/size/10" "$url/size/20" 2>&1) || fail "curl reuse"
grep -q 'Re-using existing connection' <<<"$out" || fail "the connection was not reused"
# Uploads: 200 KiB with curl's Expect: 100-continue, then chunked.
head -c 204800 /dev/urandom >"$tmp/up"
code=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 --data-binary @"$tmp/up" "$url/size/5")
[ "${code%% *}" = 200 ] || fail "100-continue upload: $code"
awk -v t="${code##* }" 'BEGIN { exit !(t < 0.9) }' || fail "the upload waited for curl's 1 s Expect timeout: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/up" "$url/size/5")
[ "$code" = 200 ] || fail "chunked upload: $code"
# 5 MiB: beyond any whole-request buffer, the body streams through.
head -c 5242880 /dev/zero >"$tmp/big"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -H 'Expect:' --data-binary @"$tmp/big" "$url/size/5")
[ "$code" = 200 ] || fail "5 MiB upload: $code"
# 8 MiB chunked: streams through re-chunked (no whole-request buffer, no 413).
head -c 8388608 /dev/urandom >"$tmp/big"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -H 'Expect:' -H 'Transfer-Encoding: chunked' \
    --data-binary @"$tmp/big" "$url/size/5")
[ "$code" = 200 ] || fail "8 MiB chunked upload: $code"

# ab -k and wrk, where installed: keep-alive load that must finish cleanly.
if command -v ab >/dev/null; then
    timeout 30 ab -k -q -n 2000 -c 8 "$url/size/100" >"$tmp/ab" 2>&1 || fail "ab -k did not finish: $(tail -3 "$tmp/ab")"
    grep -q '^Failed requests: *0' "$tmp/ab" || fail "ab: $(grep 'Failed' "$tmp/ab")"
    grep -q '^Keep-Alive requests: *2000' "$tmp/ab" || fail "ab: $(grep 'Keep-Alive requests' "$tmp/ab")"
    timeout 30 ab -q -n 500 -c 4 "$url/size/100" >"$tmp/ab" 2>&1 || fail "ab (HTTP/1.0, no keep-alive) did not finish"
    grep -q '^Failed requests: *0' "$tmp/ab" || fail "ab without -k: $(grep 'Failed' "$tmp/ab")"
else
    echo "ab not installed: its keep-alive check not run"
fi
if command -v wrk >/dev/null; then
    timeout 30 wrk -t1 -c16 -d2s "$url/size/100" >"$tmp/wrk" 2>&1 || fail "wrk did not finish"
    ! grep -qE 'Non-2xx|Socket errors' "$tmp/wrk" || fail "wrk: $(grep -E 'Non-2xx|Socket errors' "$tmp/wrk")"
else
    echo "wrk not installed: its check not run"
fi
echo "real clients: ok"
