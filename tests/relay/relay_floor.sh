#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# relay-floor, the byte mover relay-bench.sh --floor measures: every body that
# crosses it is checked, small ones (orbit-relay --load verifies each) over many
# connections and long ones against the backend's own bytes; its bad arguments get a one-line error and
# exit 2. Formats and bytes, not timings.
set -euo pipefail
R=${ORBIT_RELAY_BIN:?}
F=${RELAY_FLOOR_BIN:?}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "FAIL: nothing listens on $1"; exit 1; }
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }

bport=$(free_port); fport=$(free_port)
"$R" --backend 127.0.0.1:"$bport" --quiet & pids+=($!)
wait_port "$bport"
"$F" --listen 127.0.0.1:"$fport" --upstream 127.0.0.1:"$bport" --workers 2 & pids+=($!)
wait_port "$fport"

out=$("$R" --load "http://127.0.0.1:$fport/" --connections 32 --requests 4000 --json)
echo "load: $out"
check "32 connections, 4000 verified bodies, nothing failed" \
    "python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if (d[\"sent\"],d[\"ok\"],d[\"failed\"],d[\"bad_body\"],d[\"lost\"])==(\"4000\",\"4000\",\"0\",\"0\",\"0\") else 1)' '$out'"
# Long bodies cross in many reads: each, on 4 keep-alive connections at once, must
# equal the backend's own answer byte for byte.
check "bodies of 100 B to 1 MiB equal the backend's, 4 connections at once" "python3 - '$bport' '$fport' <<'PY'
import http.client, sys, threading
b, f = int(sys.argv[1]), int(sys.argv[2])
sizes = [100, 65536, 65537, 1000000, 1 << 20]   # the backend gives at most 1 MiB
def get(port, conn, path):
    conn.request('GET', path)
    r = conn.getresponse()
    return r.status, r.read()
want = {}
direct = http.client.HTTPConnection('127.0.0.1', b, timeout=10)
for n in sizes:
    want[n] = get(b, direct, '/size/%d' % n)
bad = []
def client(i):
    c = http.client.HTTPConnection('127.0.0.1', f, timeout=10)
    for _ in range(3):
        for n in sizes:
            got = get(f, c, '/size/%d' % n)
            if got != want[n] or len(got[1]) != n:
                bad.append((i, n, got[0], len(got[1])))
ts = [threading.Thread(target=client, args=(i,)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print('mismatches:', bad[:5])
sys.exit(1 if bad else 0)
PY"

bad() {   # args... : exit 2 with one line naming the fault on stderr, nothing on stdout
    local err out rc=0
    out=$("$F" "$@" 2>"$BASH_TMP_ERR") || rc=$?
    err=$(cat "$BASH_TMP_ERR")
    check "relay-floor $* -> exit 2, one line: $err" "[ $rc = 2 ] && [ -z \"\$out\" ] && [ \$(printf '%s\n' \"\$err\" | wc -l) = 1 ] && [[ \"\$err\" == relay-floor:* ]]"
}
BASH_TMP_ERR=$(mktemp); trap 'rm -f "$BASH_TMP_ERR"; kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
bad --listen 127.0.0.1:"$fport"
bad --listen 127.0.0.1:0 --upstream 127.0.0.1:"$bport"
bad --listen 127.0.0.1:65536 --upstream 127.0.0.1:"$bport"
bad --listen 127.0.0.1:0x50 --upstream 127.0.0.1:"$bport"
bad --listen :80 --upstream 127.0.0.1:"$bport"
bad --listen 300.1.1.1:80 --upstream 127.0.0.1:"$bport"
bad --listen 127.0.0.1:"$(free_port)" --upstream 127.0.0.1:"$bport" --workers 0
bad --listen 127.0.0.1:"$(free_port)" --upstream 127.0.0.1:"$bport" --workers x
bad --bogus
check "--help exits 0 and says usage" "'$F' --help | grep -q '^usage: relay-floor'"
check "--version names the tool" "'$F' --version | grep -q '^relay-floor '"
exit $fail
