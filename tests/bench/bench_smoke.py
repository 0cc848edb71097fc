#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Smoke test of orbit-bench: every subcommand runs briefly with --json, exits 0,
reports a positive figure for every transport it measured and leaves no segment
behind. No figure is compared with a threshold (speed is for the bench, not for
tests); a run that failed reports 0."""
import glob
import json
import os
import re
import signal
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


TIMEOUT_S = int(os.environ.get("BENCH_SMOKE_TIMEOUT_S", "120"))


def segment_dirs():
    """/dev/shm and every hugetlbfs mount: where fleets keep their segments."""
    dirs = ["/dev/shm"]
    with open("/proc/mounts", encoding="utf-8") as mounts:
        dirs += [line.split()[1] for line in mounts if line.split()[2:3] == ["hugetlbfs"]]
    return dirs


def remove_leftovers(pid):
    """Delete the segments of the bench process pid's fleet (bench-<sub>-<pid>); return
    their names."""
    left = []
    for d in segment_dirs():
        for path in glob.glob(os.path.join(d, f"orbit.bench-*-{pid}.*")):
            left.append(os.path.basename(path))
            os.unlink(path)
    return left


def run(args):
    """Run one subcommand with --json; (returncode, stdout, stderr), returncode None on a
    timeout. Its own process group: on a timeout the bench's forked children are killed
    too, so the pipes they hold close."""
    proc = subprocess.Popen([BENCH, *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, errs = proc.communicate(timeout=TIMEOUT_S)
        left = remove_leftovers(proc.pid)
        if left and proc.returncode == 0:
            errs += "segments left behind: " + " ".join(left)
        return proc.returncode, out, errs
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, errs = proc.communicate()
        remove_leftovers(proc.pid)   # they would hold huge pages the next suites need
        return None, out, errs


def check(args):
    """The failures of one subcommand's run, as lines (empty: it passed)."""
    code, out, errs = run(args)
    if code is None:
        return [f"still running after {TIMEOUT_S} s, killed", errs]
    if code != 0:
        return [f"exit {code}", errs]
    try:
        doc = json.loads(out)
    except json.JSONDecodeError as err:
        return [f"not JSON ({err})", out[:400]]
    bad = []
    positive_numbers(doc, args[0], bad)
    if errs.strip():
        bad.append("stderr: " + errs.strip())
    return bad


failed = False
for args in RUNS:
    bad = check(args)
    name = " ".join(args)
    if bad:
        print(f"FAIL orbit-bench {name}:\n  " + "\n  ".join(bad))
        failed = True
    else:
        print(f"ok   orbit-bench {name}")
sys.exit(1 if failed else 0)
