#!/usr/bin/env bash
# Instructions per admission claim+release pair (callgrind: deterministic, whatever the
# host's load): the Python binding with a Demand and with a dict, multiprocessing doing
# the same bookkeeping under a Lock, a BoundedSemaphore, and the same claim in C. Each
# runs at 1000 and 11000 pairs; the difference over 10000 is one pair's count.
#   claim_instructions.sh          (orbit importable, liborbit and pkg-config's orbit found)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
libdir=$(pkg-config --variable=libdir orbit)
cc -std=c11 -O2 $(pkg-config --cflags orbit) "$here/claim_loop.c" -o "$work/claim_loop" \
    -Wl,-rpath,"$libdir" $(pkg-config --libs orbit)
count() {   # count N COMMAND...: instructions callgrind collected
    local n=$1; shift
    valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$@" 2>&1 | awk '/Collected :/ {print $4}'
}
per_pair() {   # per_pair COMMAND... (N is appended)
    local a b
    a=$(count 1000 "$@" 1000); b=$(count 11000 "$@" 11000)
    echo $(( (b - a) / 10000 ))
}
c=$(per_pair "$work/claim_loop")
printf '%-26s %7s instructions per claim+release pair\n' "C (liborbit)" "$c"
for mode in orbit dict mp-lock mp-sem; do
    n=$(PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH} per_pair "$python" "$here/claim_ir.py" "$mode")
    printf '%-26s %7s instructions per claim+release pair\n' "Python $mode" "$n"
done
