#!/usr/bin/env bash
# A short live tour of the foundation: processes in a named fleet on huge pages
# wake each other through futex words and io_uring waits, beside the kernel's
# own objects. (The demo fleet, tools/orbit-relay/demo.sh, replaces this.)
set -euo pipefail
build=${1:-build}
echo "orbit tour: wake latency between two processes, orbit vs the kernel alternatives"
"$build/tools/orbit-bench" wake --oneway 500 --rtt 5000
echo
echo "fleets on this host now:"
"$build/tools/orbitctl" ls
