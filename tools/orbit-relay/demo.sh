#!/usr/bin/env bash
# The demo fleet, as `./orbit demo` runs it:
#   tools/orbit-relay/demo.sh BUILD_DIR [orbit-relay --demo options...]
# Builds orbit-relay and orbit-reaper in BUILD_DIR if needed, then runs the
# backend, the reaper (BPF when it loads, else pidfd; without it the relay's
# supervisor reclaims the dead itself), a relay fleet and a load run with one
# worker killed midway, and prints the checked summary. Exit status 0 only if
# every request not in flight on the killed worker succeeded and the fleet's
# tables came back clean.
set -euo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
relay=$build/tools/orbit-relay/orbit-relay
reaper=$build/bpf/orbit-reaper

if [ -f "$build/build.ninja" ]; then
    ninja -C "$build" tools/orbit-relay/orbit-relay >/dev/null
    ninja -C "$build" bpf/orbit-reaper >/dev/null 2>&1 || true
fi
if [ ! -x "$relay" ]; then
    echo "demo: $relay is not built (configure $build with -Dwith_pool=true -Dwith_stream=true)" >&2
    exit 1
fi
args=()
if [ -x "$reaper" ]; then
    args+=(--reaper "$reaper")
else
    echo "demo: no orbit-reaper in $build: the relay's supervisor reclaims dead workers itself"
fi
exec "$relay" --demo "${args[@]}" "$@"
