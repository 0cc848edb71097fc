#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cost.py PROGRAM PATH BOUND: the instructions of one operation of a hot path.

Runs `PROGRAM PATH ROUNDS` under valgrind's callgrind with 2,000 and with
12,000 rounds; the difference over 10,000 is what one operation costs, set-up
and teardown cancelled (the caller's loop and checks included). Instruction
counts do not move with the host or its load, so this is a design figure,
not a timing: it fails when an operation costs more than BOUND. Exits 77
(skipped) only when valgrind is not installed; ./orbit test installs it.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LOW, HIGH = 2000, 12000


def instructions(cmd, rounds, out_dir):
    out = os.path.join(out_dir, f"cg.{rounds}")
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd, str(rounds)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"cost: {' '.join(cmd)} {rounds} exited {r.returncode}:\n{r.stderr[-2000:]}")
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m:
        sys.exit(f"cost: no instruction total in callgrind's output:\n{r.stderr[-2000:]}")
    return int(m.group(1))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: cost.py PROGRAM PATH BOUND")
    program, path, bound = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if not shutil.which("valgrind"):
        print("cost: valgrind is not installed: cannot count instructions here")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        low = instructions([program, path], LOW, d)
        high = instructions([program, path], HIGH, d)
    per = (high - low) / (HIGH - LOW)
    print(f"{path}: {per:.1f} instructions per operation (bound {bound:g})")
    if per > bound:
        sys.exit(f"cost: {path} costs {per:.1f} instructions per operation, over the bound of {bound:g}")


if __name__ == "__main__":
    main()
