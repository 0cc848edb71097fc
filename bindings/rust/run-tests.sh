#!/usr/bin/env bash
# The Rust bindings' suite, against an installed liborbit (what ./orbit test runs):
#   run-tests.sh PREFIX CACHE_DIR
# PREFIX is a `meson install` prefix (pkg-config, the library and orbit-reaper are
# taken from it); CACHE_DIR keeps cargo's target directory between runs, so a
# re-run only rebuilds what changed. Offline: the crates come from Debian's
# librust-*-dev packages (.cargo/config.toml). Prints "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=$1 cache=$2
cargo=${CARGO:-$(command -v cargo || true)}
[ -n "$cargo" ] || { [ -x "$HOME/.cargo/bin/cargo" ] && cargo=$HOME/.cargo/bin/cargo; }
[ -n "$cargo" ] || { echo "run-tests.sh: no cargo (apt-get install cargo)"; echo "0 passed, 1 failed"; exit 1; }
pcdir=$(dirname "$(find "$prefix" -name orbit.pc | head -1)")
[ -f "$pcdir/orbit.pc" ] || { echo "run-tests.sh: no orbit.pc under $prefix"; echo "0 passed, 1 failed"; exit 1; }
export PKG_CONFIG_PATH=$pcdir
export LD_LIBRARY_PATH=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir orbit)
export ORBIT_REAPER=$prefix/bin/orbit-reaper
export CARGO_TARGET_DIR=$cache/target
export CARGO_TERM_COLOR=never
echo "cargo: $("$cargo" --version) ($cargo), rustc: $(${RUSTC:-$(dirname "$cargo")/rustc} --version 2>/dev/null || rustc --version)"
cd "$here"
passed=0 failed=0
# count LABEL LOG: adds libtest's "test result:" lines and the plain "N passed, M failed" ones.
count() {
    local ok bad
    ok=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^passed;?$/) s += $(i-1) } /^[0-9]+ passed, [0-9]+ failed$/ { s += $1 } END { print s + 0 }' "$2")
    bad=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^failed;?$/) s += $(i-1) } /^[0-9]+ passed, [0-9]+ failed$/ { s += $3 } END { print s + 0 }' "$2")
    passed=$((passed + ok)); failed=$((failed + bad))
    echo "  $1: $ok passed, $bad failed ($3 s)"
}
step() {   # step LABEL [ENV=VALUE...] -- CARGO ARGS...
    local label=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    local log; log=$(mktemp) t0=$SECONDS rc=0
    env "${envs[@]}" "$cargo" "$@" > "$log" 2>&1 || rc=$?
    # A step with no test of its own (cargo doc) counts as one test.
    grep -qE "^test result:|^[0-9]+ passed, [0-9]+ failed$" "$log" || [ "$rc" -ne 0 ] || echo "1 passed, 0 failed" >> "$log"
    count "$label" "$log" $((SECONDS - t0))
    if [ "$rc" -ne 0 ]; then
        grep -E "^(error|warning: unused)|panicked|FAILED|failed|differs" "$log" | head -40
        # A build failure or a crash counts once even when no test line says so.
        grep -qE "^test result: FAILED|^[0-9]+ passed, [1-9]" "$log" || failed=$((failed + 1))
    fi
    rm -f "$log"
}
step "cargo test (both crates, tokio feature)" -- test --offline --workspace --features orbit/tokio
step "cargo test, futex(2) fallbacks (async waits without io_uring futex ops)" ORBIT_DISABLE_URING_FUTEX=1 -- \
    test --offline -p orbit --features tokio --lib --test asyncio --test multiprocess
step "examples/hello.rs runs" -- run --quiet --offline -p orbit --example hello
step "cargo doc (every public item documented, no warnings)" RUSTDOCFLAGS=-Dwarnings -- \
    doc --offline --no-deps --workspace --features orbit/tokio
# A .crate per crate, each built again from its packaged sources (offline).
t0=$SECONDS
if out=$(CARGO=$cargo ./package.sh "$cache/crates" "$cache" 2>&1); then
    passed=$((passed + 1)); echo "  cargo package: $(printf '%s\n' "$out" | grep -c '\.crate$') crates in $cache/crates ($((SECONDS - t0)) s)"
else
    failed=$((failed + 1)); echo "  cargo package failed:"; printf '%s\n' "$out" | grep -E "^error" -A5 | head -20
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
