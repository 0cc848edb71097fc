#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""stream_cost.py PROGRAM: the instructions of one small-message round trip.

Runs PROGRAM (stream_cost) under valgrind's callgrind with 2,000 and with
22,000 round trips; the difference over 20,000 is what one round trip costs
(two writes and two reads of one byte, the blocking calls), set-up and
teardown cancelled. Instruction counts do not move with the host, so this is
a design figure, not a timing. Exits 77 (skipped) only when valgrind is not
installed; ./orbit test installs it.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

BOUND = 700   # instructions per round trip (643 with the line copy); the general path alone took 879
LOW, HIGH = 2000, 22000


def instructions(program, rounds, out_dir):
    out = os.path.join(out_dir, f"cg.{rounds}")
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", program, str(rounds)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"stream_cost: {program} {rounds} exited {r.returncode}:\n{r.stderr[-2000:]}")
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m:
        sys.exit(f"stream_cost: no instruction total in callgrind's output:\n{r.stderr[-2000:]}")
    return int(m.group(1))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: stream_cost.py PROGRAM")
    if not shutil.which("valgrind"):
        print("stream_cost: valgrind is not installed: cannot count instructions here")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        low, high = instructions(sys.argv[1], LOW, d), instructions(sys.argv[1], HIGH, d)
    per = (high - low) / (HIGH - LOW)
    print(f"one 1-byte round trip (2 writes, 2 reads): {per:.1f} instructions (bound {BOUND})")
    if per > BOUND:
        sys.exit(f"stream_cost: {per:.1f} instructions per round trip, over the bound of {BOUND}")


if __name__ == "__main__":
    main()
