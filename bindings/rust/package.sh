#!/usr/bin/env bash
# A .crate per crate, each verified offline (cargo builds it from the packaged
# sources), for a downstream to vendor:
#   package.sh OUT_DIR [CACHE_DIR]
# Needs an installed liborbit that pkg-config finds (set PKG_CONFIG_PATH).
# orbit depends on orbit-sys by version, so orbit is verified against a copy
# of Debian's registry with the just-packaged orbit-sys added to it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
cache=${2:-$out/cache}
cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
export CARGO_TARGET_DIR=$cache/package-target
cd "$here"
registry=$(mktemp -d); trap 'rm -rf "$registry"' EXIT
"$cargo" package --offline --allow-dirty -p orbit-sys
sys_crate=$(ls -t "$CARGO_TARGET_DIR"/package/orbit-sys-*.crate | head -1)
for c in /usr/share/cargo/registry/*; do ln -s "$c" "$registry/"; done
tar -C "$registry" -xzf "$sys_crate"
echo '{"files":{},"package":null}' > "$registry/$(basename "$sys_crate" .crate)/.cargo-checksum.json"
"$cargo" package --offline --allow-dirty -p orbit --config "source.debian.directory=\"$registry\""
cp "$sys_crate" "$(ls -t "$CARGO_TARGET_DIR"/package/orbit-0*.crate | head -1)" "$out/"
ls -1 "$out"/*.crate
