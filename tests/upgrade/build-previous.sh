#!/bin/sh
# build-previous.sh SOURCE COMMIT OUT MEMBER_C CC
#
# The previous release of liborbit for test_roll: COMMIT of SOURCE's git history,
# exported with git archive and built with meson into OUT (only the library; kept
# across runs: OUT/built-COMMIT marks a finished build), then MEMBER_C compiled
# against it as OUT/upgrade_member (every run: the member's source is this tree's).
# Exit 77 when SOURCE is not a git checkout (nothing to build the release from).
set -eu
src=$1 commit=$2 out=$3 member=$4 cc=$5
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    echo "build-previous: $src is not a git checkout: no previous release to build" >&2
    exit 77
fi
if [ ! -e "$out/built-$commit" ]; then
    if ! git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "build-previous: commit $commit is not in $src's history (a shallow clone? git fetch --unshallow)" >&2
        exit 1
    fi
    rm -rf "$out"
    mkdir -p "$out/src"
    git -C "$src" archive --format=tar "$commit" | tar -x -C "$out/src"
    meson setup "$out/build" "$out/src" -Dtests=false -Dbpf=disabled -Dbuildtype=debugoptimized \
        > "$out/setup.log" 2>&1 || { tail -20 "$out/setup.log" >&2; exit 1; }
    ninja -C "$out/build" liborbit.so.0.1.0 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log" >&2; exit 1; }
    touch "$out/built-$commit"
fi
"$cc" -std=gnu11 -O1 -Wall -Werror -D_GNU_SOURCE -I"$out/src/lib/include" -I"$out/build/lib/include" \
    -o "$out/upgrade_member" "$member" -L"$out/build" -lorbit -luring -lpthread -Wl,--disable-new-dtags,-rpath,"$out/build"
