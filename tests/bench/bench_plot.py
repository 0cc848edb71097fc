#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""orbit-bench's files: --plot writes an SVG that rsvg-convert renders to a PNG that is
not blank (several colours, a fair share of non-white pixels), and --hist writes
HdrHistogram percentile files that parse: values and percentiles never go down,
counts add up to the footer's total and to the samples taken; report writes one
HTML page whose inline charts render and that refers to nothing outside itself.
Formats, not timings.
Skips (77) without rsvg-convert (Debian librsvg2-bin)."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

BENCH = sys.argv[1]
SUBS = sys.argv[2:]
SKIP = 77
ROWS = re.compile(r"^\s*([0-9.]+)\s+([0-9.]+)\s+([0-9]+)(?:\s+([0-9.]+|inf|Infinity))?\s*$")


def png_pixels(path):
    """(width, height, rows of RGBA tuples) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = head[0], head[1], head[2], head[3]
    if depth != 8 or colour not in (2, 6):
        raise ValueError(f"unexpected PNG depth {depth} colour type {colour}")
    bpp = 4 if colour == 6 else 3
    raw, stride, prev, rows = zlib.decompress(idat), width * bpp, bytearray(width * bpp), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + bpp]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def check_svg(svg):
    """Render svg to a PNG beside it; the failures, as lines."""
    if not os.path.getsize(svg):
        return [f"{svg}: empty"]
    png = svg[:-4] + ".png"
    proc = subprocess.run(["rsvg-convert", "-o", png, svg], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return [f"rsvg-convert {svg}: exit {proc.returncode}: {proc.stderr.strip()}"]
    width, height, rows = png_pixels(png)
    colours, inked = set(), 0
    for row in rows:
        for px in row:
            colours.add(px[:3])
            inked += px[:3] != (255, 255, 255)
    bad = []
    if width < 100 or height < 100:
        bad.append(f"{png}: {width}x{height}")
    if len(colours) < 4:
        bad.append(f"{png}: {len(colours)} colours: blank")
    if inked < width * height // 100:
        bad.append(f"{png}: only {inked} non-white pixels")
    return bad


def check_hgrm(path, samples):
    """Rows parse, never go down, the last is percentile 1 with every sample; the footer agrees."""
    rows, footer, bad = [], {}, []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split() != ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]:
        return [f"{path}: no HdrHistogram header"]
    for line in lines[1:]:
        if line.startswith("#["):
            footer.update(dict((k.strip(), float(v)) for k, v in (p.split("=") for p in line[2:-1].split(","))))
        elif line.strip():
            m = ROWS.match(line)
            if not m:
                return [f"{path}: unparsed line {line!r}"]
            rows.append((float(m.group(1)), float(m.group(2)), int(m.group(3))))
    if not rows:
        return [f"{path}: no rows"]
    for (v0, p0, c0), (v1, p1, c1) in zip(rows, rows[1:]):
        if v1 < v0 or p1 < p0 or c1 < c0:
            bad.append(f"{path}: goes down at {v1} {p1} {c1}")
            break
    if rows[-1][1] != 1.0 or rows[-1][2] != samples:
        bad.append(f"{path}: last row {rows[-1]}, not percentile 1 with {samples} samples")
    if footer.get("Total count") != samples or abs(footer.get("Max", -1) - rows[-1][0]) > 0.001:
        bad.append(f"{path}: footer {footer} does not match the rows")
    for key in ("Mean", "StdDeviation", "Buckets", "SubBuckets"):
        if key not in footer:
            bad.append(f"{path}: footer has no {key}")
    return bad


def check_report(out):
    """orbit-bench report --quick: a page with an inline SVG per bench that renders, nothing fetched."""
    page = os.path.join(out, "report.html")
    proc = subprocess.run([BENCH, "report", "--quick", "--pairs", "1", "--out", page, "--json"], capture_output=True,
                          text=True, timeout=300, check=False)
    if proc.returncode != 0:
        return [f"report: exit {proc.returncode}: {proc.stderr.strip()}"]
    doc = json.loads(proc.stdout)
    with open(page, encoding="utf-8") as f:
        html = f.read()
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    bad = [f"report: {s['bench']} exit {s['exit']}" for s in doc["sections"] if s["exit"] != 0]
    if not html.startswith("<!DOCTYPE html>") or len(svgs) != len(doc["sections"]):
        bad.append(f"report: {len(svgs)} inline SVGs for {len(doc['sections'])} benches")
    if re.search(r"<script|\bsrc=|\bhref=|url\(|@import", html):
        bad.append("report: the page refers to something outside itself")
    for i, svg in enumerate(svgs):
        path = os.path.join(out, f"report-{i}.svg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
        bad += check_svg(path)
    return bad


def run(args):
    proc = subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=120, check=False)
    return [] if proc.returncode == 0 else [f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}"]


def main():
    if not shutil.which("rsvg-convert"):
        print("rsvg-convert not found (Debian librsvg2-bin): skipped")
        return SKIP
    out = tempfile.mkdtemp(prefix="orbit-bench-plot-")
    keep = os.environ.get("ORBIT_BENCH_PLOT_KEEP")
    pairs, rtt, oneway = 2, 300, 20
    cases = [("wake", ["wake", "--pairs", str(pairs), "--rtt", str(rtt), "--oneway", str(oneway),
                       "--hist", os.path.join(out, "hist"), "--plot", os.path.join(out, "wake.svg")])]
    if "pool" in SUBS:
        cases.append(("pool", ["pool", "--scale", "--ops", "20000", "--pairs", "2",
                               "--plot", os.path.join(out, "pool.svg")]))
    failed = False
    for name, args in cases:
        bad = run(args)
        bad = bad or check_svg(os.path.join(out, f"{name}.svg"))
        print(("FAIL " if bad else "ok   ") + f"orbit-bench {name} --plot renders" + "".join("\n  " + b for b in bad))
        failed = failed or bool(bad)
    bad = check_report(out)
    print(("FAIL " if bad else "ok   ") + "orbit-bench report: one page, every chart renders" +
          "".join("\n  " + b for b in bad))
    failed = failed or bool(bad)
    hist = os.path.join(out, "hist")
    files = sorted(os.listdir(hist)) if os.path.isdir(hist) else []
    bad = [] if any(f.startswith("wake-pipe-rtt") for f in files) else [f"no wake-pipe-rtt.hgrm in {files}"]
    for f in files:
        bad += check_hgrm(os.path.join(hist, f), pairs * (rtt if "-rtt" in f else oneway))
    print(("FAIL " if bad else "ok   ") + f"orbit-bench wake --hist: {len(files)} .hgrm files parse" +
          "".join("\n  " + b for b in bad))
    failed = failed or bool(bad)
    if keep:
        print(f"files kept in {out}")
    else:
        shutil.rmtree(out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
