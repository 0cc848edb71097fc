#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Smoke test of orbit-bench: every subcommand runs briefly with --json, exits 0 and
reports a positive figure for every transport it measured. No figure is compared with a
threshold (speed is for the bench, not for tests); a run that failed reports 0."""
import json
import re
import subprocess
import sys

BENCH = sys.argv[1]   # then the subcommands this build has
SHORT = {
    "wake": ["--oneway", "50", "--rtt", "200"],
    "stream": ["--bytes", "8", "--rounds", "200", "--repeat", "1"],
    "pool": ["--ops", "20000"],
    "admission": ["--seconds", "0.05"],
    "exchange": ["--bytes", "4M", "--relay-bytes", "4M"],
}
RUNS = [[sub, *SHORT[sub]] for sub in sys.argv[2:]]


MEASURED = re.compile(r"gbps|per_s|^p50$")


def positive_numbers(node, path, bad):
    """Collect every measured figure (GB/s, per second, a median) that is not positive,
    and every "ok" that is not true."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            if key == "ok" and value is not True:
                bad.append(f"{here} = {value}")
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                if MEASURED.search(key) and value <= 0:
                    bad.append(f"{here} = {value}")
            else:
                positive_numbers(value, here, bad)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            positive_numbers(value, f"{path}[{i}]", bad)


failed = False
for args in RUNS:
    name = " ".join(args)
    try:
        proc = subprocess.run([BENCH, *args, "--json"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as err:
        print(f"FAIL orbit-bench {name}: still running after {err.timeout} s\n{err.stderr or ''}")
        failed = True
        continue
    if proc.returncode != 0:
        print(f"FAIL orbit-bench {name}: exit {proc.returncode}\n{proc.stderr}")
        failed = True
        continue
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as err:
        print(f"FAIL orbit-bench {name}: not JSON ({err}):\n{proc.stdout[:400]}")
        failed = True
        continue
    bad = []
    positive_numbers(doc, args[0], bad)
    if proc.stderr.strip():
        bad.append("stderr: " + proc.stderr.strip())
    if bad:
        print(f"FAIL orbit-bench {name}:\n  " + "\n  ".join(bad))
        failed = True
    else:
        print(f"ok   orbit-bench {name}")
sys.exit(1 if failed else 0)
