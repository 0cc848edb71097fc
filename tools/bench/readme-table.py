#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerate README.md's measured table from orbit-bench --json.

    tools/bench/readme-table.py [--bench PATH] [--json-dir DIR] [--write README.md]

Runs `orbit-bench stream|exchange|pool|admission --json` and the stream and
exchange --scale sweeps, every one paired (--pairs, default 9: orbit and its
baseline back to back, the order alternating), or reads DIR/<name>.json from an
earlier run (names stream, exchange, pool, admission, stream-scale,
exchange-scale: --json-dir). Prints the markdown table: each side's median over
the pairs, and each ratio as the median of the per-pair ratios with its
[min-max] spread; a last line names the host, its floor and the load. With
--write it replaces the table between the README's bench-table markers. Every
figure comes from the JSON; nothing is typed by hand. Run it on a quiet host:
the load average it prints says whether it was."""
import argparse
import json
import os
import re
import subprocess
import sys

SUBS = {
    "stream": [],
    "exchange": ["--no-relay"],
    "pool": ["--scale"],
    "admission": ["--scale"],
    "stream-scale": ["--scale"],
    "exchange-scale": ["--scale", "--bytes", "256M"],
}
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"


def load(args, sub):
    if args.json_dir:
        path = os.path.join(args.json_dir, f"{sub}.json")
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    cmd = sub.split("-")[0]
    out = subprocess.run([args.bench, cmd, *SUBS[sub], "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def mops(v):
    return f"{v / 1e6:.1f} M"


def med(side):
    """A measured side's median over the pairs."""
    return side["median"]


def ratio(r, unit="×"):
    """A paired ratio: its median with the [min–max] spread of the pairs."""
    return f"{r['median']:.2f}{unit} [{r['min']:.2f}–{r['max']:.2f}]"


def stream_rows(d):
    rows = []
    pp = d.get("pingpong_64")
    if pp and pp["orbit"]["ok"]:
        us = {k: med(pp[k]["p50_ns"]) / 1000 for k in ("orbit", "pipe", "socketpair")}
        rows.append(("64-byte ping-pong p50, 2 processes (`orbit-bench stream`)", f"{us['orbit']:.1f} µs",
                     f"pipe {us['pipe']:.0f} µs ({ratio(pp['orbit_p50_speedup_vs_pipe'])}), "
                     f"socketpair {us['socketpair']:.0f} µs ({ratio(pp['orbit_p50_speedup_vs_socketpair'])})"))
    runs = [r for r in d.get("orbit", []) if r.get("ok") and int(r["chunk"]) == 65536]
    base = {int(b["chunk"]): b for b in d.get("baselines", [])}.get(65536)
    if runs and base:
        best = max(runs, key=lambda r: med(r["gbps"]))
        rows.append((f"one-way stream, 64 KiB chunks, {best['ring'] >> 10} KiB ring, {best['mode']}",
                     f"{med(best['gbps']):.1f} GB/s",
                     f"socketpair {med(base['socketpair_gbps']):.1f} GB/s ({ratio(best['ratio']['socketpair'])}), "
                     f"pipe (1 MiB) {med(base['pipe_1m_gbps']):.1f} GB/s ({ratio(best['ratio']['pipe_1m'])})"))
    parks = [med(r["parks_per_ringful"]) for r in d.get("orbit", []) if r.get("ok")]
    if parks:
        rows.append(("parks per ring-ful, bulk transfer (medians)", f"{min(parks):.3g}–{max(parks):.3g}", "—"))
    return rows


def exchange_rows(d):
    rows = []
    # The event loop first: the thread row says "the same with a thread per exchange".
    for r in sorted(d.get("roundtrip", []), key=lambda r: r["model"] != "loop"):
        if r["concurrency"] != 8 or int(r["body"]) != 65536 or int(r["chunk"]) != 65536:
            continue
        what = ("exchange round trips, 64 KiB bodies in 64 KiB chunks, 8 in flight, one event loop per process "
                "(`orbit-bench exchange`)" if r["model"] == "loop" else
                "the same with a thread per exchange (16 threads)")
        rows.append((what, f"{med(r['exchange_gbps']):.1f} GB/s",
                     f"socketpair {med(r['socketpair_gbps']):.1f} GB/s ({ratio(r['exchange_over_socketpair'])})"))
    return rows


def pool_rows(d):
    rows = []
    for r in d["results"]:
        n = r["processes"]
        where = "" if n == 1 else (", one key" if r["shared_key"] else ", distinct keys")
        rows.append((f"pool reserve→accept→complete, {n} process{'es' if n > 1 else ''}{where} (`orbit-bench pool`)",
                     f"{mops(med(r['orbit_ops_per_s']))} ops/s",
                     f"process-shared mutex {mops(med(r['mutex_ops_per_s']))} ops/s ({ratio(r['orbit_over_mutex'])})"))
    return rows


def admission_rows(d):
    rows = []
    for r in d["results"]:
        n = r["processes"]
        semop = f", SysV semop {mops(med(r['semop_pairs_per_s']))}" if r.get("semop_pairs_per_s") else ""
        rows.append((f"admission claim+release, {d['domains']} domains, {n} process{'es' if n > 1 else ''} "
                     "(`orbit-bench admission`)", f"{mops(med(r['orbit_pairs_per_s']))} pairs/s",
                     f"robust mutex {mops(med(r['pthread_mutex_pairs_per_s']))} ({ratio(r['orbit_over_mutex'])})"
                     f"{semop}"))
    return rows


def stream_scale_rows(d):
    return [(f"64-byte ping-pong, {r['pairs']} pair{'s' if r['pairs'] > 1 else ''} at once "
             f"(`orbit-bench stream --scale`)", f"{med(r['orbit_rt_per_s']) / 1e3:.0f} k round trips/s",
             f"socketpair {med(r['socketpair_rt_per_s']) / 1e3:.0f} k ({ratio(r['orbit_over_socketpair'])})")
            for r in d["results"]]


def exchange_scale_rows(d):
    return [(f"exchange round trips, 64 KiB bodies, {r['pairs']} client/server pair{'s' if r['pairs'] > 1 else ''} "
             "at once (`orbit-bench exchange --scale`)", f"{med(r['exchange_gbps']):.1f} GB/s",
             f"socketpair {med(r['socketpair_gbps']):.1f} GB/s ({ratio(r['exchange_over_socketpair'])})")
            for r in d["results"]]


def host_line(docs):
    """Where the figures were taken: the first report's host, the floor's range, the highest load."""
    if not docs:
        return ""
    h = docs[0]["host"]
    floors = [d["floor"]["median_ns"] for d in docs]
    load = max(max(d["host"]["loadavg_begin"][0], d["host"]["loadavg_end"][0]) for d in docs)
    return (f"\n\nMeasured on {h['cpu_model']}, kernel {h['kernel']}, CPUs {h['cpus_allowed']}; busy-poll floor "
            f"{min(floors):.0f}–{max(floors):.0f} ns; highest 1-minute load average {load:.2f}; "
            f"{docs[0]['pairs']} pairs per figure, ratios as median [min–max] of the per-pair ratios.")


def table(args):
    rows, docs = [], []
    for sub, fn in (("stream", stream_rows), ("exchange", exchange_rows), ("pool", pool_rows),
                    ("admission", admission_rows), ("stream-scale", stream_scale_rows),
                    ("exchange-scale", exchange_scale_rows)):
        d = load(args, sub)
        if d is not None:
            rows += fn(d)
            docs.append(d)
    lines = ["| what | orbit | alternative (same run) |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + host_line(docs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/tools/bench/orbit-bench", help="the orbit-bench binary")
    p.add_argument("--json-dir", help="read DIR/<subcommand>.json instead of running the bench")
    p.add_argument("--write", metavar="README", help="replace the table between the bench-table markers")
    args = p.parse_args()
    text = table(args)
    if not args.write:
        print(text)
        return 0
    with open(args.write, encoding="utf-8") as f:
        readme = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        print(f"readme-table: {args.write} has no {BEGIN} ... {END} section", file=sys.stderr)
        return 2
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", readme, count=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
