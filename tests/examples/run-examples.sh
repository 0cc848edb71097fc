#!/usr/bin/env bash
# Runs every example of this build (example_NAME in DIR) and checks each exits 0.
# Where io_uring is refused (a seccomp filter, kernel.io_uring_disabled) the library
# falls back and every example but uring_loop must still pass; uring_loop, which is
# about an io_uring ring, must exit 1 saying io_uring is refused and why.
#   run-examples.sh DIR [CHECK]
set -uo pipefail
dir=$1
failed=0
# CHECK (seccomp-no-uring --check) exits 0 where io_uring_setup is refused.
refused=0
if [ -n "${2:-}" ] && "$2" --check; then refused=1; fi
echo "io_uring $([ $refused -eq 1 ] && echo refused || echo allowed) here"
for x in hello lease stream exchange session admission peer_death uring_loop; do
    out=$(timeout 60 "$dir/example_$x" 2>&1); rc=$?
    if [ "$x" = uring_loop ] && [ $refused -eq 1 ]; then
        if [ $rc -eq 1 ] && grep -q 'io_uring is refused here' <<<"$out" &&
           grep -qE 'seccomp filter|kernel\.io_uring_disabled = [12]' <<<"$out"; then
            echo "ok   $x says why io_uring is refused: $(tail -1 <<<"$out")"
        else
            echo "FAIL $x (exit $rc) does not say why io_uring is refused:"; sed 's/^/     /' <<<"$out"; failed=1
        fi
        continue
    fi
    if [ $rc -eq 0 ]; then
        echo "ok   $x: $(tail -1 <<<"$out")"
    else
        echo "FAIL $x (exit $rc):"; sed 's/^/     /' <<<"$out"; failed=1
    fi
done
exit $failed
