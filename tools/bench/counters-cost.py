#!/usr/bin/env python3
"""counters-cost.py - what the shared-memory counters cost, in paired runs.

    tools/bench/counters-cost.py [--bench PATH] [--pairs N] [--json] BENCH [BENCH ARGS...]

Runs `orbit-bench BENCH --json --pairs 1 ARGS` N times with the counters off
(ORBIT_COUNTERS=off) and N times on, back to back, the order alternating, and
prints for every orbit figure the median of the per-pair ratios on/off with
its min and max, and the cost: how much slower the counted run was (for rates,
1 - on/off; for times, on/off - 1). Baseline figures (mutex, pipe, ...) are
left out: they do not count.

On a VM whose host moves the vCPUs, two runs of the same binary differ by
tens of percent, so a few-percent cost hides in the spread. --instructions
runs the bench once each way under valgrind's callgrind instead (needs
valgrind) and prints the instructions executed by each process, on and off:
deterministic, and the counted work is the difference.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def leaves(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            key = k
            if isinstance(node.get("scenario"), str) and k != "scenario":
                key = node["scenario"] + "." + k
            yield from leaves(v, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = v.get("scenario") or v.get("name") or v.get("transport") if isinstance(v, dict) else None
            yield from leaves(v, f"{path}[{label or i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, float(node)


def orbit_figures(doc):
    out = {}
    for path, value in leaves(doc.get("results", doc)):
        last = path.split(".")[-1]
        if "orbit" in path and "_over_" not in path and last == "median" and value > 0:
            out[path] = value
    return out


def run(bench, args, off):
    env = dict(os.environ)
    if off:
        env["ORBIT_COUNTERS"] = "off"
    else:
        env.pop("ORBIT_COUNTERS", None)
    p = subprocess.run([bench] + args[:1] + ["--json", "--pairs", "1"] + args[1:], env=env,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"counters-cost: {' '.join(args)} failed: {p.stderr.strip()}")
    return orbit_figures(json.loads(p.stdout))


def callgrind_totals(bench, args, off):
    import glob
    import re
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ)
        if off:
            env["ORBIT_COUNTERS"] = "off"
        else:
            env.pop("ORBIT_COUNTERS", None)
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={d}/cg.%p",
               bench] + args[:1] + ["--pairs", "1"] + args[1:]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            sys.exit(f"counters-cost: valgrind {' '.join(args)} failed: {p.stderr.strip()[-400:]}")
        totals = []
        for f in glob.glob(f"{d}/cg.*"):
            with open(f) as fh:
                m = re.search(r"^totals: (\d+)", fh.read(), re.M)
            if m:
                totals.append(int(m.group(1)))
        return sorted(totals, reverse=True)


def instructions(a):
    off = callgrind_totals(a.bench, a.args, True)
    on = callgrind_totals(a.bench, a.args, False)
    rows = [{"process": i, "off": o, "on": n, "on_over_off": n / o} for i, (o, n) in enumerate(zip(off, on))]
    if a.json:
        print(json.dumps({"bench": a.args[0], "instructions": rows}))
        return
    print(f"instructions per process (largest first), counters off / on: orbit-bench {' '.join(a.args)}")
    for r in rows:
        print(f"  {r['off']:>14,} {r['on']:>14,}  on/off {r['on_over_off']:.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "../../build/tools/bench/orbit-bench"))
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under callgrind, once each way, instead of timing")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if not a.args:
        ap.error("name a bench: pool, stream, admission, ...")
    if a.pairs < 1 or a.pairs > 100:
        ap.error("--pairs: 1..100")
    if a.instructions:
        return instructions(a)
    ratios = {}
    for i in range(a.pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        got = {off: run(a.bench, a.args, off) for off in order}
        for k, on in got[False].items():
            off = got[True].get(k)
            if off:
                ratios.setdefault(k, []).append(on / off)
    rows = []
    for k, r in sorted(ratios.items()):
        med = statistics.median(r)
        timed = any(t in k for t in ("_ns", "_us", "latency", "rtt"))
        cost = (med - 1) if timed else (1 - med)
        rows.append({"figure": k, "on_over_off": med, "min": min(r), "max": max(r), "pairs": len(r),
                     "cost_percent": 100 * cost})
    if a.json:
        print(json.dumps({"bench": a.args[0], "pairs": a.pairs, "figures": rows}))
        return
    print(f"counters on / off, {a.pairs} alternating pairs: orbit-bench {' '.join(a.args)}")
    for row in rows:
        print(f"  {row['figure']:<60} {row['on_over_off']:.3f} [{row['min']:.3f}-{row['max']:.3f}]"
              f"  cost {row['cost_percent']:+.1f} %")


if __name__ == "__main__":
    main()
