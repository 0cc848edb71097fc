#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerate README.md's measured tables from orbit-bench --json, run after run.

    tools/bench/readme-table.py [--runs N] [--pairs N] [--bench PATH] [--json-dir DIR]
                                [--figures FILE] [--write README.md | --check]

Runs every bench the table draws on (stream, exchange, pool --scale, admission
--scale, stream --scale, exchange --scale, transfer) --runs times (default 5,
at least 5), alternating their order from one round to the next, each run
paired inside (--pairs: orbit and its baseline back to back, the order
alternating). A figure is then the median of the runs with the [min-max]
spread of the runs: each run gives its side's median over its pairs and the
median of its per-pair ratios. --json-dir DIR keeps every run's JSON as
DIR/round-K/NAME.json and reads a run from there when it exists, so a table
can be written again without running anything.

The figures are kept per CPU vendor (the host's CPU model names it: AMD,
Intel, other) in --figures (default docs/bench-figures.json, beside the
README), with the host, the date and the runs; the README gets one section a
vendor ever seen, each naming its host. A vendor's figures are replaced only
by a new measurement on that vendor. A ratio kept from an earlier
measurement of this vendor that the new runs cannot reproduce (outside their
[min-max] spread) does not stay: --write replaces it and says so on stderr;
--check writes nothing and exits 1 naming every such claim. Run it on a
quiet host: each section prints the highest load average its runs saw."""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

BENCHES = {
    "stream": ["stream"],
    "exchange": ["exchange", "--no-relay"],
    "pool": ["pool", "--scale"],
    "admission": ["admission", "--scale"],
    "stream-scale": ["stream", "--scale"],
    "exchange-scale": ["exchange", "--scale", "--bytes", "256M"],
    "transfer": ["transfer"],
}
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
MIN_RUNS = 5
VENDORS = ("AMD", "Intel", "other")


# ---- rows: what one run's JSON says ----------------------------------------------------

def med(side):
    """A measured side's median over one run's pairs."""
    return side["median"]


def alt(name, value, unit, r):
    """A baseline beside orbit: its figure, and the run's median per-pair ratio (orbit over it)."""
    return {"name": name, "value": value, "unit": unit, "ratio": r["median"] if r else None}


def row(key, what, value, unit, alts):
    return {"key": key, "what": what, "value": value, "unit": unit, "alts": alts}


def stream_rows(d):
    rows = []
    pp = d.get("pingpong_64")
    if pp and pp["orbit"]["ok"]:
        us = {k: med(pp[k]["p50_ns"]) / 1000 for k in ("orbit", "pipe", "socketpair")}
        # A latency: the ratio is how many times orbit's p50 the baseline's is.
        rows.append(row("stream.pingpong64", "64-byte ping-pong p50, 2 processes (`orbit-bench stream`)",
                        us["orbit"], "µs", [alt("pipe", us["pipe"], "µs", pp["orbit_p50_speedup_vs_pipe"]),
                                            alt("socketpair", us["socketpair"], "µs",
                                                pp["orbit_p50_speedup_vs_socketpair"])]))
    runs = [r for r in d.get("orbit", []) if r.get("ok") and int(r["chunk"]) == 65536 and r["mode"] == "blocking"]
    base = {int(b["chunk"]): b for b in d.get("baselines", [])}.get(65536)
    for r in runs if base else []:
        rows.append(row(f"stream.oneway64k.{r['ring']}.{r['mode']}",
                        f"one-way stream, 64 KiB chunks, {int(r['ring']) >> 10} KiB ring, {r['mode']}",
                        med(r["gbps"]), "GB/s",
                        [alt("socketpair", med(base["socketpair_gbps"]), "GB/s", r["ratio"]["socketpair"]),
                         alt("pipe (1 MiB)", med(base["pipe_1m_gbps"]), "GB/s", r["ratio"]["pipe_1m"])]))
    return rows


def exchange_rows(d):
    rows = []
    for r in d.get("roundtrip", []):
        if r["concurrency"] != 8 or int(r["body"]) != 65536 or int(r["chunk"]) != 65536:
            continue
        what = ("exchange round trips, 64 KiB bodies in 64 KiB chunks, 8 in flight, one event loop per process "
                "(`orbit-bench exchange`)" if r["model"] == "loop" else
                "exchange round trips, 64 KiB bodies, 8 in flight, a thread per exchange (16 threads)")
        rows.append(row(f"exchange.rt64k.{r['model']}", what, med(r["exchange_gbps"]), "GB/s",
                        [alt("socketpair", med(r["socketpair_gbps"]), "GB/s", r["exchange_over_socketpair"])]))
    return rows


def pool_rows(d):
    rows = []
    for r in d["results"]:
        n = r["processes"]
        where = "" if n == 1 else (", one key" if r["shared_key"] else ", distinct keys")
        rows.append(row(f"pool.{r['scenario']}",
                        f"pool reserve→accept→complete, {n} process{'es' if n > 1 else ''}{where} (`orbit-bench pool`)",
                        med(r["orbit_ops_per_s"]) / 1e6, "M ops/s",
                        [alt("process-shared mutex", med(r["mutex_ops_per_s"]) / 1e6, "M ops/s",
                             r["orbit_over_mutex"])]))
    return rows


def admission_rows(d):
    rows = []
    for r in d["results"]:
        n = r["processes"]
        alts = [alt("robust mutex", med(r["pthread_mutex_pairs_per_s"]) / 1e6, "M pairs/s", r["orbit_over_mutex"])]
        rows.append(row(f"admission.{n}p", f"admission claim+release, {d['domains']} domains, {n} "
                        f"process{'es' if n > 1 else ''} (`orbit-bench admission`)",
                        med(r["orbit_pairs_per_s"]) / 1e6, "M pairs/s", alts))
    return rows


def stream_scale_rows(d):
    return [row(f"stream.scale.{r['pairs']}", f"64-byte ping-pong, {r['pairs']} pair{'s' if r['pairs'] > 1 else ''} "
                "at once (`orbit-bench stream --scale`)", med(r["orbit_rt_per_s"]) / 1e3, "k round trips/s",
                [alt("socketpair", med(r["socketpair_rt_per_s"]) / 1e3, "k round trips/s",
                     r["orbit_over_socketpair"])])
            for r in d["results"]]


def exchange_scale_rows(d):
    return [row(f"exchange.scale.{r['pairs']}", f"exchange round trips, 64 KiB bodies, {r['pairs']} client/server "
                f"pair{'s' if r['pairs'] > 1 else ''} at once (`orbit-bench exchange --scale`)",
                med(r["exchange_gbps"]), "GB/s",
                [alt("socketpair", med(r["socketpair_gbps"]), "GB/s", r["exchange_over_socketpair"])])
            for r in d["results"]]


def transfer_rows(d):
    rows, ring = [], {}
    for r in d["results"]:
        if r["transport"] == "zero_copy_ring":
            ring[r["case"]] = med(r["gbps"])
    for r in d["results"]:
        if r["transport"] == "zero_copy_ring":
            continue
        size = int(r["message_bytes"])
        size_text = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        rows.append(row(f"transfer.{r['case']}.{r['transport']}.{r['wait']}",
                        f"{size_text} messages one way, every byte read, {r['transport']} ({r['wait']}) "
                        "(`orbit-bench transfer`)", med(r["gbps"]), "GB/s",
                        [alt("zero-copy slot ring", ring.get(r["case"], 0), "GB/s", r["over_zero_copy_ring"])]))
    return rows


ROWS = {"stream": stream_rows, "exchange": exchange_rows, "pool": pool_rows, "admission": admission_rows,
        "stream-scale": stream_scale_rows, "exchange-scale": exchange_scale_rows, "transfer": transfer_rows}


# ---- runs ------------------------------------------------------------------------------

def run_bench(args, name, rnd):
    """One run of one bench: from --json-dir when it is there, else run (and keep it there)."""
    path = os.path.join(args.json_dir, f"round-{rnd}", f"{name}.json") if args.json_dir else None
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    cmd = [args.bench, *BENCHES[name], "--json"] + (["--pairs", str(args.pairs)] if args.pairs else [])
    print(f"readme-table: round {rnd + 1}/{args.runs}: {' '.join(cmd[1:])}", file=sys.stderr)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"readme-table: {' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    doc = json.loads(out.stdout)
    if path:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
    return doc


def measure(args):
    """Every bench --runs times, the order alternating between rounds: (rows by key, docs)."""
    names = [n for n in BENCHES if n in args.only] if args.only else list(BENCHES)
    per_key, order, docs = {}, [], []
    for rnd in range(args.runs):
        for name in names if rnd % 2 == 0 else reversed(names):
            doc = run_bench(args, name, rnd)
            docs.append(doc)
            for r in ROWS[name](doc):
                if r["key"] not in per_key:
                    per_key[r["key"]] = []
                    order.append((names.index(name), len(order), r["key"]))
                per_key[r["key"]].append(r)
    keys = [k for _, _, k in sorted(order)]
    return {k: aggregate(per_key[k]) for k in keys}, docs


def spread(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": len(v)}


def aggregate(runs):
    """One row over its runs: each figure's median with the runs' [min-max]."""
    first = runs[0]
    alts = []
    for i, a in enumerate(first["alts"]):
        alts.append({"name": a["name"], "unit": a["unit"], "value": spread([r["alts"][i]["value"] for r in runs]),
                     "ratio": spread([r["alts"][i]["ratio"] for r in runs])})
    return {"what": first["what"], "unit": first["unit"], "value": spread([r["value"] for r in runs]), "alts": alts}


def host_of(docs):
    """The host the runs were taken on, its floor range and the highest load they saw."""
    h = docs[0]["host"]
    floors = [d["floor"]["median_ns"] for d in docs if d.get("floor", {}).get("median_ns")]
    load = max(max(d["host"]["loadavg_begin"][0], d["host"]["loadavg_end"][0]) for d in docs)
    return {"cpu_model": h["cpu_model"], "kernel": h["kernel"], "cpus": h["cpus_allowed"],
            "floor_ns": [min(floors), max(floors)] if floors else None, "highest_load": load}


def vendor_of(cpu_model):
    for v in ("AMD", "Intel"):
        if v.lower() in cpu_model.lower():
            return v
    return "other"


# ---- claims: what an earlier measurement of this vendor said -----------------------------

def unreproduced(old, new):
    """The ratios of old (a vendor's stored rows) that the new runs' spread does not hold."""
    bad = []
    for key, o in old.get("rows", {}).items():
        n = new.get(key)
        for i, a in enumerate(o["alts"]):
            was = a.get("ratio")
            now = n["alts"][i]["ratio"] if n and i < len(n["alts"]) else None
            if not was:
                continue
            if not now:
                bad.append(f"{o['what']}: {a['name']} {was['median']:.2f}× is no longer measured")
            elif not now["min"] <= was["median"] <= now["max"]:
                bad.append(f"{o['what']}: {a['name']} {was['median']:.2f}× stated, "
                           f"{now['median']:.2f}× [{now['min']:.2f}–{now['max']:.2f}] over {now['runs']} runs now")
    return bad


# ---- the markdown ----------------------------------------------------------------------

def number(x, unit):
    return f"{x:.0f}" if unit.startswith("k ") or x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def figure(s, unit):
    if not s:
        return "—"
    lo, hi = number(s["min"], unit), number(s["max"], unit)
    return f"{number(s['median'], unit)} {unit} [{lo}–{hi}]"


def ratio(s):
    """A ratio over the runs; one whose runs fall on both sides of 1 claims no difference."""
    if not s:
        return "—"
    text = f"{s['median']:.2f}× [{s['min']:.2f}–{s['max']:.2f}]"
    return text + " (runs either side of 1: no difference claimed)" if s["min"] < 1 < s["max"] else text


def section(vendor, v):
    h = v["host"]
    floor = f"busy-poll floor {h['floor_ns'][0]:.0f}–{h['floor_ns'][1]:.0f} ns; " if h.get("floor_ns") else ""
    lines = [f"### {vendor}: {h['cpu_model']}", "",
             "| what | orbit | alternative: orbit's figure over it |", "|---|---|---|"]
    for r in v["rows"].values():
        alts = "; ".join(f"{a['name']} {figure(a['value'], a['unit'])}: {ratio(a['ratio'])}" for a in r["alts"])
        lines.append(f"| {r['what']} | {figure(r['value'], r['unit'])} | {alts} |")
    lines += ["", f"Measured {v['date']} on {h['cpu_model']}, kernel {h['kernel']}, CPUs {h['cpus']}; {floor}"
              f"highest 1-minute load average {h['highest_load']:.2f}. Each figure is the median of {v['runs']} "
              f"runs taken in alternating order with the [min–max] of the runs; each run pairs orbit with its "
              f"baseline {v['pairs']} times and gives the median of the per-pair ratios (for the latency row, "
              "the baseline's p50 over orbit's)."]
    return "\n".join(lines)


def tables(figures):
    return "\n\n".join(section(v, figures[v]) for v in VENDORS if v in figures)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/tools/bench/orbit-bench", help="the orbit-bench binary")
    p.add_argument("--runs", type=int, default=MIN_RUNS, help=f"runs of every bench (at least {MIN_RUNS})")
    p.add_argument("--pairs", type=int, default=0, help="pairs inside each run (default: the bench's own, 9)")
    p.add_argument("--json-dir", help="keep each run's JSON here, and read a run from here when it exists")
    p.add_argument("--figures", default="docs/bench-figures.json", help="the figures kept per vendor")
    p.add_argument("--only", nargs="+", choices=list(BENCHES), help="these benches alone (a partial table)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="README", help="update --figures and the README's bench-table section")
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 if a kept ratio does not reproduce")
    args = p.parse_args()
    if args.runs < MIN_RUNS:
        p.error(f"--runs {args.runs}: at least {MIN_RUNS} (one run is not a figure)")
    rows, docs = measure(args)
    host = host_of(docs)
    vendor = vendor_of(host["cpu_model"])
    figures = {}
    if os.path.exists(args.figures):
        with open(args.figures, encoding="utf-8") as f:
            figures = json.load(f)
    stale = unreproduced(figures.get(vendor, {}), rows)
    for line in stale:
        print(f"readme-table: not reproduced on {host['cpu_model']}: {line}", file=sys.stderr)
    pairs = args.pairs or docs[0].get("pairs")
    figures[vendor] = {"host": host, "date": datetime.date.today().isoformat(), "runs": args.runs, "pairs": pairs,
                       "rows": rows}
    text = tables(figures)
    if args.check:
        print(text)
        return 1 if stale else 0
    if not args.write:
        print(text)
        return 0
    with open(args.write, encoding="utf-8") as f:
        readme = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        print(f"readme-table: {args.write} has no {BEGIN} ... {END} section", file=sys.stderr)
        return 2
    with open(args.figures, "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", readme, count=1))
    if stale:
        print(f"readme-table: {len(stale)} earlier claim(s) replaced by what this host measured", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
