#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Smoke test of orbit-bench: every subcommand runs briefly with --json, exits 0,
reports its host and floor, a positive median for every transport it measured, and
leaves no segment behind; bad input is refused with one line. No figure is compared with a threshold (speed is for the bench, not for
tests); a run that failed reports 0."""
import ctypes
import errno
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

BENCH = sys.argv[1]   # then the subcommands this build has
SHORT = {
    "wake": ["--oneway", "20", "--rtt", "200", "--pairs", "2"],
    "stream": ["--bytes", "4", "--rounds", "200", "--pairs", "2"],
    "pool": ["--ops", "20000", "--pairs", "2"],
    "admission": ["--seconds", "0.02", "--pairs", "2"],
    "exchange": ["--bytes", "2M", "--relay-bytes", "2M", "--pairs", "1"],
    "transfer": ["--bytes", "4M", "--pairs", "2"],
}
RUNS = [[sub, *SHORT[sub]] for sub in sys.argv[2:]]
# Latency benches pinned, on two CPUs and both sides on one.
PINNED = {"wake": [["--cpus", "0,0"]], "stream": [["--cpus", "0,0"]]}
RUNS += [[sub, *SHORT[sub], *extra] for sub in sys.argv[2:] for extra in PINNED.get(sub, [])]
# Scaling runs: an explicit process count and the sweep over this host's CPUs.
SCALING = {"pool": [["--procs", "3"], ["--scale"]], "admission": [["--procs", "3"], ["--scale"]],
           "stream": [["--procs", "2"], ["--scale"]], "exchange": [["--procs", "2"], ["--scale"]]}
RUNS += [[sub, *SHORT[sub], *extra] for sub in sys.argv[2:] for extra in SCALING.get(sub, [])]
# A bad number is refused with one line on stderr and exit 2, before anything runs.
BAD_NUMBERS = {"pool": ["--ops", "-5"], "admission": ["--seconds", "-1"], "stream": ["--rounds", "1x"],
               "wake": ["--rtt", "0"], "exchange": ["--bytes", "-4M"], "transfer": ["--bytes", "512K"]}
# Other bad input, refused the same way: pairs out of range, a CPU not ours, an unwritable plot.
BAD_INPUT = [["wake", "--pairs", "0"], ["stream", "--pairs", "101"], ["wake", "--cpus", "0,4095"],
             ["stream", "--cpus", "1"], ["wake", "--plot", "/nonexistent-dir/x.svg"],
             ["pool", "--plot", "x.svg"], ["wake", "--hist", "/proc/self/status"], ["report", "--pairs", "x"],
             ["report", "--out", "/nonexistent-dir/r.html"], ["report", "extra"]]
# Long runs interrupted by SIGTERM: the bench removes its segments and exits 128 + 15.
LONG = {"pool": ["--ops", "1000000000000"], "admission": ["--seconds", "60"],
        "wake": ["--oneway", "10000000"]}


COUNTS = re.compile(r"parks|sleeps")   # may be 0
MEASURED = re.compile(r"^(median|median_ns|p50|count)$")
# 64-bit integers (byte and op counts, nanoseconds, sizes) are JSON strings of digits,
# so readers that hold numbers as doubles do not round them.
WIDE = re.compile(r"^(p50|p99|p999|bytes|bytes_per_run|bytes_per_pair|ops_per_process|chunk|body)$")
HIST_WIDE = re.compile(r"^(count|min|p50|p90|p99|p999|p9999|max)$")   # in a histogram (ns)
# Every report says where it ran and how its pairs went.
REPORT_KEYS = {"host": ["cpu_model", "kernel", "cpus_allowed", "hugepages_total", "loadavg_begin", "loadavg_end",
                        "others_runnable", "steal_fraction"],
               "floor": ["kind", "cpus", "median_ns", "min_ns", "max_ns", "per_pair_ns", "flagged_pairs"]}


def report_keys(doc, args):
    """The host and floor objects, and a floor figure per pair."""
    bad = [f"{k}.{f} missing" for k, fields in REPORT_KEYS.items() for f in fields if f not in doc.get(k, {})]
    pairs = int(args[args.index("--pairs") + 1]) if "--pairs" in args else 9
    if doc.get("pairs") != pairs:
        bad.append(f"pairs = {doc.get('pairs')}, not {pairs}")
    if len(doc.get("floor", {}).get("per_pair_ns", [])) != pairs:
        bad.append("floor.per_pair_ns has not one figure per pair")
    return bad


def figure(value):
    """A JSON number, or a 64-bit integer printed as a string; None for anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    return None


def positive_numbers(node, path, bad):
    """Collect every measured figure (GB/s, per second, a median) that is not positive,
    every 64-bit integer that is not a string, and every "ok" that is not true."""
    if isinstance(node, dict):
        wide = HIST_WIDE if "p9999" in node else WIDE
        for key, value in node.items():
            here = f"{path}.{key}"
            if COUNTS.search(key):
                continue
            if key == "ok" and value is not True:
                bad.append(f"{here} = {value}")
            elif figure(value) is not None:
                if wide.search(key) and not isinstance(value, str):
                    bad.append(f"{here} = {value}: a 64-bit integer, not a JSON string")
                if MEASURED.search(key) and figure(value) <= 0:
                    bad.append(f"{here} = {value}")
            else:
                positive_numbers(value, here, bad)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            positive_numbers(value, f"{path}[{i}]", bad)


def io_uring_refused():
    """Is io_uring_setup refused to this process (a seccomp filter, kernel.io_uring_disabled)?
    io_uring_setup(0, NULL) is EFAULT where it is allowed (425 on every architecture)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(425, 0, None) < 0 and ctypes.get_errno() == errno.EPERM


# Where io_uring is refused, a bench says once on stderr what it skipped and why.
URING_REFUSED = io_uring_refused()
SKIPPED = re.compile(r"^orbit-bench (stream|exchange): .*skipped.*: no io_uring futex waits")

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
    bad = report_keys(doc, args)
    positive_numbers(doc, args[0], bad)
    said = [line for line in errs.strip().splitlines() if not (URING_REFUSED and SKIPPED.match(line))]
    if said:
        bad.append("stderr: " + "\n".join(said))
    return bad


def check_bad_number(sub):
    args = [BENCH, sub, *BAD_NUMBERS[sub]]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 2 or len(lines) != 1 or proc.stdout:
        return [f"{' '.join(args[1:])}: exit {proc.returncode}, stderr {proc.stderr!r}"]
    return []


def check_bad_input(args):
    proc = subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=30, check=False)
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 2 or len(lines) != 1 or not lines[0].startswith("orbit-bench: ") or proc.stdout:
        return [f"{' '.join(args)}: exit {proc.returncode}, stderr {proc.stderr!r}"]
    return []


def check_help_version(sub):
    """SUB --help prints its usage, SUB --version the version; both exit 0 and run nothing."""
    bad = []
    for flag, want in (("--help", f"usage: orbit-bench {sub}"), ("--version", "orbit-bench ")):
        proc = subprocess.run([BENCH, sub, flag], capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0 or not proc.stdout.startswith(want) or proc.stderr:
            bad.append(f"{sub} {flag}: exit {proc.returncode}, stdout {proc.stdout[:60]!r}")
    return bad


def check_sigterm(sub):
    """Interrupt a long run once its fleet exists; nothing may be left behind."""
    proc = subprocess.Popen([BENCH, sub, *LONG[sub]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    pattern = f"orbit.bench-*-{proc.pid}.*"
    for _ in range(500):
        if any(glob.glob(os.path.join(d, pattern)) for d in segment_dirs()):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        remove_leftovers(proc.pid)
        return [f"{sub}: still running 30 s after SIGTERM"]
    time.sleep(0.2)   # children die with their parent (PDEATHSIG)
    left = remove_leftovers(proc.pid)
    bad = [f"{sub}: segments left after SIGTERM: {' '.join(left)}"] if left else []
    if proc.returncode != 128 + signal.SIGTERM:
        bad.append(f"{sub}: exit {proc.returncode} after SIGTERM")
    return bad


failed = False
for args in BAD_INPUT:
    if args[0] in sys.argv[2:] or args[0] == "report":
        bad = check_bad_input(args)
        print(("FAIL " if bad else "ok   ") + "orbit-bench " + " ".join(args) + ": refused" +
              "".join("\n  " + b for b in bad))
        failed = failed or bool(bad)
for sub in [*sys.argv[2:], "report"]:
    bad = check_help_version(sub)
    print(("FAIL " if bad else "ok   ") + f"orbit-bench {sub} --help, --version" + "".join("\n  " + b for b in bad))
    failed = failed or bool(bad)
for sub in sys.argv[2:]:
    bad = check_bad_number(sub) + (check_sigterm(sub) if sub in LONG else [])
    print(("FAIL " if bad else "ok   ") + f"orbit-bench {sub}: bad numbers, SIGTERM" + "".join("\n  " + b for b in bad))
    failed = failed or bool(bad)
for args in RUNS:
    bad = check(args)
    name = " ".join(args)
    if bad:
        print(f"FAIL orbit-bench {name}:\n  " + "\n  ".join(bad))
        failed = True
    else:
        print(f"ok   orbit-bench {name}")
sys.exit(1 if failed else 0)
