#!/usr/bin/env bash
# What a user gets from `meson install`: programs built against the prefix
# through pkg-config alone (C11 and C++17, -Wall -Wextra -Werror), the
# installed tools started from the prefix without LD_LIBRARY_PATH (orbit-reaper
# exactly as its systemd unit starts it), and examples/ built and run.
#   check-install.sh PREFIX SOURCE_DIR
set -uo pipefail
prefix=$1 src=$2
unset LD_LIBRARY_PATH
passed=0 failed=0
ok()   { echo "ok   $*"; passed=$((passed + 1)); }
bad()  { echo "FAIL $*"; failed=$((failed + 1)); }

pcdir=$(dirname "$(find "$prefix" -name orbit.pc | head -1)")
[ -f "$pcdir/orbit.pc" ] || { echo "check-install: no orbit.pc under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH=$pcdir
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
version=$(pkg-config --modversion orbit)
libdir=$(pkg-config --variable=libdir orbit)
rpath="-Wl,-rpath,$libdir"

# 1. Consumers, through pkg-config alone. The table headers are strict C11;
# <orbit/uring.h> includes <liburing.h>, which needs POSIX (gnu11 or _GNU_SOURCE).
if printf '#include <orbit/orbit.h>\n#include <orbit/reaper.h>\nint main(void) { return 0; }\n' |
   cc -std=c11 -pedantic -Wall -Wextra -Werror $(pkg-config --cflags orbit) -x c - -o "$work/strict" 2> "$work/strict.log"; then
    ok "<orbit/orbit.h> and <orbit/reaper.h> compile as strict C11 (-pedantic)"
else
    bad "<orbit/orbit.h> under -std=c11 -pedantic:"; head -20 "$work/strict.log"
fi
# orbit.h brings the io_uring calls wherever liburing's headers can compile (POSIX 2008).
umbrella='#include <orbit/orbit.h>\nint main(void) { return orbit_uring_futex_supported() ? 0 : 0; }\n'
for std in "-std=gnu11" "-std=c11 -D_POSIX_C_SOURCE=200809L"; do
    if printf "$umbrella" | cc $std -Wall -Wextra -Werror $(pkg-config --cflags orbit) -x c - \
           -o "$work/umbrella" $(pkg-config --libs orbit) $rpath 2> "$work/umbrella.log"; then
        ok "<orbit/orbit.h> declares the io_uring calls ($std)"
    else
        bad "<orbit/orbit.h> lacks the io_uring calls ($std):"; head -10 "$work/umbrella.log"
    fi
done
if cc -std=gnu11 -Wall -Wextra -Werror -DEXPECT_VERSION="\"$version\"" $(pkg-config --cflags orbit orbit-reaper) \
      "$src/tests/install/consumer.c" -o "$work/consumer" $(pkg-config --libs orbit orbit-reaper) $rpath \
      2> "$work/cc.log"; then
    if out=$("$work/consumer" 2>&1); then ok "C (gnu11) consumer builds and runs: $out"; else bad "C consumer: $out"; fi
else
    bad "C consumer does not build:"; cat "$work/cc.log"
fi
if c++ -std=c++17 -Wall -Wextra -Werror $(pkg-config --cflags orbit orbit-reaper) \
      "$src/tests/install/consumer.cpp" -o "$work/consumer++" $(pkg-config --libs orbit orbit-reaper) $rpath \
      2> "$work/cxx.log"; then
    if out=$("$work/consumer++" 2>&1); then ok "C++17 consumer builds and runs: $out"; else bad "C++17 consumer: $out"; fi
else
    bad "C++17 consumer does not build:"; cat "$work/cxx.log"
fi

# The test hooks (ORBIT_TEST_*: a process stops itself inside a protocol window) are
# compiled in only with -Dtest_hooks=true: nothing installed names them, and the consumer,
# which creates a stream, runs through with the stream's hook asked for.
hooked=""
for f in $(find "$prefix" -type f \( -name '*.so*' -o -path '*/bin/*' \)); do
    grep -q "ORBIT_TEST_" "$f" 2>/dev/null && hooked="$hooked $f"
done
if [ -z "$hooked" ]; then ok "no installed library or tool reads ORBIT_TEST_*"
else bad "installed files read ORBIT_TEST_*:$hooked"; fi
if [ -x "$work/consumer" ]; then
    ORBIT_TEST_STREAM_PARK=installing ORBIT_TEST_POOL_PARK=register \
        ORBIT_TEST_ADMISSION_PARK_IN_MUTEX=claim-commit timeout -s KILL 10 "$work/consumer" > "$work/hooks.out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then ok "the installed library ignores ORBIT_TEST_STREAM_PARK (the consumer ran through)"
    else bad "the consumer with ORBIT_TEST_STREAM_PARK=installing: exit $rc (137: it stopped itself)"; fi
fi

# 2. The installed tools start from the prefix.
for tool in orbitctl orbit-bench orbit-relay; do
    if "$prefix/bin/$tool" --help > "$work/$tool.out" 2>&1; then ok "$tool --help from $prefix/bin"
    else bad "$tool --help: $(head -3 "$work/$tool.out")"; fi
done
unit=$(find "$prefix" -name orbit-reaper.service | head -1)
exec_start=$(sed -n 's/^ExecStart=//p' "$unit" | tail -1)
if [ -z "$exec_start" ]; then
    bad "no ExecStart in ${unit:-the installed orbit-reaper.service}"
else
    # Started as systemd starts it; it must be up and answering SIGTERM with a clean stop.
    $exec_start > "$work/reaper.out" 2>&1 &
    pid=$!
    for _ in $(seq 50); do grep -q '"event":"start"' "$work/reaper.out" 2>/dev/null && break; sleep 0.1; done
    kill -TERM "$pid" 2>/dev/null; wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ] && grep -q '"event":"start"' "$work/reaper.out"; then ok "orbit-reaper as its unit starts it: $exec_start"
    else bad "orbit-reaper ($exec_start) exit $rc: $(head -3 "$work/reaper.out")"; fi
fi

# 3. examples/, copied out of the tree and built against the prefix with only PKG_CONFIG_PATH
#    set: the Makefile takes the library's directory from pkg-config (no LDFLAGS, no LD_LIBRARY_PATH).
if [ -f "$src/examples/Makefile" ]; then
    cp -r "$src/examples" "$work/examples"
    if make -s -C "$work/examples" > "$work/ex-build.log" 2>&1; then
        ok "examples build against the prefix"
        for env in "" "ORBIT_DISABLE_URING_FUTEX=1" "ORBIT_HUGETLB_DIR="; do
            if env $env make -s -C "$work/examples" run > "$work/ex-run.log" 2>&1; then
                ok "examples run and exit 0${env:+ ($env)}"
            else
                bad "examples run${env:+ ($env)}:"; tail -20 "$work/ex-run.log"
            fi
        done
        # A container's /dev/shm: a tmpfs of 64 MiB of its own (Docker's default --shm-size).
        "$src/tests/fleet/core/small_shm.sh" 64m make -s -C "$work/examples" run > "$work/ex-shm.log" 2>&1
        case $? in
            0)  ok "examples run and exit 0 in a 64 MiB /dev/shm of their own" ;;
            77) echo "skip examples in a 64 MiB /dev/shm: $(tail -1 "$work/ex-shm.log")" ;;
            *)  bad "examples in a 64 MiB /dev/shm:"; tail -20 "$work/ex-shm.log" ;;
        esac
    else
        bad "examples build:"; tail -20 "$work/ex-build.log"
    fi
    if make -s -C "$src/examples" check-readme > "$work/readme.log" 2>&1; then ok "README's API snippet is examples/stream.c's excerpt"
    else bad "README snippet: $(cat "$work/readme.log")"; fi
else
    bad "no examples/Makefile"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
