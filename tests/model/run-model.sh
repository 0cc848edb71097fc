#!/usr/bin/env bash
# Model-check the wake protocol with spin: the real protocol has no invalid end
# state (no lost wakeup); a deliberately broken waker must be caught.
set -euo pipefail
command -v spin >/dev/null || { echo "SKIP: spin is not installed"; exit 77; }
model=$(cd "$(dirname "$0")" && pwd)/wake.pml
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
check() {   # check NAME [spin -D flags]: prints the error count
    local name=$1; shift
    mkdir -p "$work/$name"; cd "$work/$name"
    spin -a "$@" "$model" >/dev/null
    gcc -O2 -w -o pan pan.c
    ./pan -m100000 > out.txt 2>&1 || true
    awk '/errors:/{print $NF}' out.txt
}
ok=$(check correct)
broken=$(check broken -DBROKEN)
one_bump=$(check one-bump -DONE_BUMP)
echo "wake protocol: errors=$ok; broken variants: no bump errors=$broken, one bump errors=$one_bump"
[ "$ok" = "0" ] && [ "$broken" != "0" ] && [ "$one_bump" != "0" ]
