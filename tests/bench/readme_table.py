#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/bench/readme-table.py on canned runs (nothing is benchmarked): fewer than
five runs are refused; a figure is the median of the runs with their [min-max];
ratios whose runs fall on both sides of 1 claim nothing; each vendor seen keeps
a section naming its host; a stored ratio the new runs do not reproduce is
replaced by --write (said on stderr) and fails --check."""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = sys.argv[1]
README = "intro\n<!-- bench-table:begin -->\nold table: 9.99x the mutex\n<!-- bench-table:end -->\nrest\n"


def side(v):
    return {"median": v, "min": v, "max": v, "best": v, "per_pair": [v]}


def ratio(v):
    return {"median": v, "min": v, "max": v, "pairs": 1, "best_of": v}


def pool_doc(cpu, rnd, ratio_1p):
    """One run of `orbit-bench pool --scale --json` as the script reads it."""
    host = {"cpu_model": cpu, "kernel": "6.1", "cpus_allowed": "0-1", "loadavg_begin": [0.5, 0, 0],
            "loadavg_end": [0.25 * rnd, 0, 0]}
    results = [{"scenario": "1p", "processes": 1, "shared_key": True, "orbit_ops_per_s": side(40e6 + rnd * 1e6),
                "mutex_ops_per_s": side(20e6), "orbit_over_mutex": ratio(ratio_1p)},
               {"scenario": "2p_one_key", "processes": 2, "shared_key": True, "orbit_ops_per_s": side(30e6),
                "mutex_ops_per_s": side(30e6), "orbit_over_mutex": ratio(0.9 + 0.05 * rnd)}]
    return {"host": host, "floor": {"median_ns": 100 + rnd}, "pairs": 3, "results": results}


def write_runs(d, cpu, ratios):
    for rnd, r in enumerate(ratios):
        os.makedirs(os.path.join(d, f"round-{rnd}"), exist_ok=True)
        with open(os.path.join(d, f"round-{rnd}", "pool.json"), "w", encoding="utf-8") as f:
            json.dump(pool_doc(cpu, rnd, r), f)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, "--only", "pool", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def main():
    bad = []
    with tempfile.TemporaryDirectory() as t:
        readme, figures = os.path.join(t, "README.md"), os.path.join(t, "figures.json")
        with open(readme, "w", encoding="utf-8") as f:
            f.write(README)
        amd, intel = os.path.join(t, "amd"), os.path.join(t, "intel")
        write_runs(amd, "AMD EPYC 7B13", [1.5, 1.7, 1.6, 1.8, 1.4])
        write_runs(intel, "Intel(R) Xeon(R) Platinum", [2.0, 2.1, 1.9, 2.2, 2.05])

        r = run("--runs", "4", "--json-dir", amd, "--figures", figures, "--write", readme)
        if r.returncode != 2 or "at least 5" not in r.stderr:
            bad.append(f"--runs 4 not refused: exit {r.returncode}, {r.stderr!r}")

        r = run("--json-dir", amd, "--figures", figures, "--write", readme)
        text = open(readme, encoding="utf-8").read()
        if r.returncode != 0:
            bad.append(f"--write (AMD): exit {r.returncode}: {r.stderr}")
        if "9.99x" in text or not text.startswith("intro\n") or not text.endswith("rest\n"):
            bad.append("the old table stayed, or text outside the markers moved")
        if "### AMD: AMD EPYC 7B13" not in text or "median of 5 runs" not in text:
            bad.append("no AMD section naming its host and its runs")
        if "1.60× [1.40–1.80]" not in text:
            bad.append("the 1-process ratio is not the runs' median with their [min-max]")
        if "1.00× [0.90–1.10] (runs either side of 1: no difference claimed)" not in text:
            bad.append("a ratio whose runs straddle 1 still claims a difference")

        r = run("--json-dir", intel, "--figures", figures, "--write", readme)
        text = open(readme, encoding="utf-8").read()
        if r.returncode != 0 or "### AMD: AMD EPYC 7B13" not in text or "### Intel: Intel(R) Xeon(R)" not in text:
            bad.append("an Intel run did not keep the AMD section beside its own")

        # The AMD figures again, from runs that no longer reproduce 1.60x.
        slower = os.path.join(t, "amd-slower")
        write_runs(slower, "AMD EPYC 7B13", [1.1, 1.2, 1.15, 1.05, 1.2])
        r = run("--json-dir", slower, "--figures", figures, "--check")
        if r.returncode != 1 or "1.60× stated" not in r.stderr:
            bad.append(f"--check kept an unreproduced claim: exit {r.returncode}, {r.stderr!r}")
        if "1.60× [1.40–1.80]" not in open(readme, encoding="utf-8").read():
            bad.append("--check wrote the README")
        r = run("--json-dir", slower, "--figures", figures, "--write", readme)
        text = open(readme, encoding="utf-8").read()
        if r.returncode != 0 or "1.60×" in text or "1.15× [1.05–1.20]" not in text or "replaced" not in r.stderr:
            bad.append(f"--write kept the unreproduced claim, or did not say so: {r.stderr!r}")
        r = run("--json-dir", slower, "--figures", figures, "--check")
        if r.returncode != 0:
            bad.append(f"--check fails on figures it just wrote: {r.stderr!r}")
    for b in bad:
        print("FAIL " + b)
    print("ok" if not bad else f"{len(bad)} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
