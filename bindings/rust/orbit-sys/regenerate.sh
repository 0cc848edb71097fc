#!/usr/bin/env bash
# Regenerates src/bindings.rs from the installed headers with Debian's bindgen.
# Run it after a public call is added to lib/include/orbit/ (and installed):
#   PKG_CONFIG_PATH=PREFIX/lib/x86_64-linux-gnu/pkgconfig ./regenerate.sh [OUT]
# OUT defaults to src/bindings.rs; tests/regenerate.rs writes elsewhere and diffs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/src/bindings.rs}
command -v bindgen >/dev/null || { echo "regenerate.sh: bindgen missing (apt-get install bindgen)" >&2; exit 1; }
# One formatter, whatever toolchain is first on PATH: Debian's rustfmt (package rustfmt).
export RUSTFMT=${RUSTFMT:-/usr/bin/rustfmt}
[ -x "$RUSTFMT" ] || { echo "regenerate.sh: $RUSTFMT missing (apt-get install rustfmt)" >&2; exit 1; }
inc=$(pkg-config --variable=includedir orbit) || { echo "regenerate.sh: pkg-config finds no orbit" >&2; exit 1; }
# Every installed header: orbit.h (with uring.h, under _GNU_SOURCE) and reaper.h.
printf '#include <orbit/orbit.h>\n#include <orbit/uring.h>\n#include <orbit/reaper.h>\n' > "$out.h"
trap 'rm -f "$out.h"' EXIT
# liburing's types stay opaque here (src/lib.rs declares them): the orbit calls
# only take pointers to them. Enums are plain integer constants: a value C
# hands back is never an invalid Rust enum.
bindgen "$out.h" \
    --allowlist-function 'orbit_.*' --allowlist-type 'orbit_.*' --allowlist-var 'ORBIT_.*' --allowlist-var 'orbit_.*' \
    --blocklist-type 'io_uring.*' \
    --size_t-is-usize --no-layout-tests --no-prepend-enum-name --with-derive-default --with-derive-eq --no-partialeq orbit_policy \
    --default-macro-constant-type signed --rust-target 1.47 \
    -o "$out" -- -I"$inc" -D_GNU_SOURCE
