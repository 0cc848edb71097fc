#!/usr/bin/env bash
# The Rust stream benchmark (orbit/examples/stream_bench.rs), built in release
# mode against an installed liborbit and run beside the C path:
#   bench.sh PREFIX [stream_bench options: --bytes MiB --pairs N --rounds N --multi-thread]
# e.g. bench.sh build-prefix/root --pairs 9
# Installs nothing; cargo's target directory is build-rust/ beside this tree's builds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(cd "$1" && pwd); shift
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
pcdir=$(dirname "$(find "$prefix" -name orbit.pc | head -1)")
export PKG_CONFIG_PATH=$pcdir
export LD_LIBRARY_PATH=$(pkg-config --variable=libdir orbit)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/../../build-rust/target}
cd "$here"
"$cargo" build --quiet --offline --release -p orbit --features tokio --example stream_bench
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$CARGO_TARGET_DIR/release/examples/stream_bench" --c-bench "$prefix/bin/orbit-bench" "$@"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
