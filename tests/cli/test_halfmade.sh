#!/bin/sh
# test_halfmade.sh ORBITCTL HOSTILE_FLEET — orbitctl beside fleets still being created
# (suite cli). hostile_fleet plants a fleet whose segment never gets ready (its creator
# alive, the creation lock held) and another whose pool table never does: a local user
# can leave them so for good. ls, show, top, reap, node-dead, gc and metrics must each
# answer at once, saying "being created" (ls, show, top, reap, gc), skipping the table
# (node-dead, reap) or orbit_fleet_up 0 (metrics), never wait the library's 10 s
# per segment. Each command gets BOUND seconds.
set -u
# In a /dev/shm of its own where a mount namespace can be had (root): the planted
# fleets would make every other test's "all fleets" scan meet them.
if [ -z "${HALFMADE_PRIVATE:-}" ] && unshare -m true 2>/dev/null; then
    exec unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm &&
        HALFMADE_PRIVATE=1 ORBIT_HUGETLB_DIR= exec sh "$0" "$@"' "$0" "$@"
fi
ctl=$1 hostile=$2
BOUND=3
tag="$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
half="t-halfmade-$tag" table="t-halftable-$tag"
tmp=$(mktemp -d)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cleanup() {
    exec 3>&- 4>&-   # the planters stay until their stdin closes
    wait
    "$ctl" unlink --force "$half" >/dev/null 2>&1
    "$ctl" unlink --force "$table" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

# plant FLEET KIND FD: hostile_fleet plant, its stdin the fifo held open on FD.
plant() {
    mkfifo "$tmp/in.$1"
    eval "exec $3<>\"$tmp/in.$1\""
    # Without the other fifos' descriptors (3, 4): a planter holding a writer would never see EOF.
    "$hostile" plant "$1" "$2" < "$tmp/in.$1" > "$tmp/out.$1" 2>&1 3>&- 4>&- &
    i=0
    while ! grep -q '^ready planted' "$tmp/out.$1" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 200 ] || { echo "FAIL: hostile_fleet plant $1: $(cat "$tmp/out.$1")"; exit 1; }
        sleep 0.1
    done
}
plant "$half" 255 3
plant "$table" 247 4

# timed RC-WANTED NAME ARGS...: orbitctl ARGS within BOUND s and with that exit status;
# its stdout and stderr in $tmp/out and $tmp/err.
timed() {
    want=$1 what=$2; shift 2
    t0=$(date +%s%N)
    timeout 30 "$ctl" "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "orbitctl $*: exit $rc in $ms ms"
    [ "$ms" -lt $((BOUND * 1000)) ] || fail "$what took $ms ms (bound $BOUND s): it waited for a creator"
    [ "$rc" -eq "$want" ] || fail "$what: exit $rc, expected $want: $(cat "$tmp/err")"
}
has() {   # has FILE TEXT WHAT
    grep -qF -- "$2" "$tmp/$1" || fail "$3: $1 lacks '$2': $(head -c 600 "$tmp/$1")"
}

timed 0 "ls" ls
grep -F "$half" "$tmp/out" | grep -qF "being created" || fail "ls: $half not said to be being created: $(cat "$tmp/out")"
timed 0 "ls --json" --json ls
has out "\"error\":\"being created\"" "ls --json"
timed 1 "show of a fleet being created" show "$half"
has err "being created" "show $half"
timed 0 "show of a fleet with a table being created" show "$table"
has out "(being created)" "show $table"
timed 1 "top of a fleet being created" top "$half" --count 1 --interval 0.1
has err "being created" "top $half"
timed 0 "top of a fleet with a table being created" top "$table" --count 1 --interval 0.1
# A death report accounts and reclaims every table: a table being created is skipped, not waited for
# (node 5 never carried incarnation 1: left alone, after looking at each table).
timed 0 "node-dead beside a table being created" node-dead "$table" 5 1
has out "left alone" "node-dead $table"
timed 0 "reap beside a table being created" reap "$table"
timed 1 "reap of a fleet being created" reap "$half"
has err "being created" "reap $half"
timed 0 "gc --dry-run" gc --dry-run "$half"
has out "being created" "gc $half"
timed 1 "metrics" metrics "$half" "$table"
has out "orbit_fleet_up{fleet=\"$half\",generation=\"1\"} 0" "metrics $half"
has out "orbit_fleet_up{fleet=\"$table\",generation=\"1\"} 1" "metrics $table"

[ "$failures" -eq 0 ] && echo "test_halfmade: all checks passed" && exit 0
echo "test_halfmade: $failures check(s) failed"
exit 1
