#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python admission claim+release pairs/s beside multiprocessing doing the same bookkeeping.

    claim_bench.py [--pairs 9] [--seconds 0.3] [--procs 1] [--orbit-bench PATH] [--json]

Each pair runs, back to back and in alternating order, N processes (--procs)
that for --seconds each do claim+release pairs with:

  orbit       `with adm.claim(demand): pass`, a 2-domain Demand built once
  orbit-dict  the same with a dict of units ({1: 1, 2: 1}) built per call
  mp-lock     multiprocessing.Lock over shared arrays doing the ledger's
              bookkeeping: both domains checked against their capacity and
              charged, a serial taken, the claim recorded in a slot; release
              checks the record and gives the units back
  mp-sem      multiprocessing.BoundedSemaphore acquire/release: one domain,
              no record (the least a Python budget does)
  C           orbit-bench admission --procs N --domains 2 (the same claim in
              C, through the library alone), when orbit-bench is found

and prints each side's median pairs/s, the median [min-max] of the per-pair
ratios orbit/mp-lock and orbit/mp-sem, and the binding's overhead per call
over C: (1/orbit - 1/C) / 2 per pair, median [min-max]. Absolute figures on a
shared VM move a lot; compare only figures taken side by side.
"""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import time

import orbit

D1, D2 = 1, 2
SLOTS = 4096


def orbit_loop(name, seconds, start, use_dict):
    with orbit.Fleet.join(name, capacity=64) as fleet, fleet.admission() as adm:
        demand = orbit.Demand({D1: 1, D2: 1})
        units = {D1: 1, D2: 1}
        n = 0
        while time.monotonic() < start:
            pass
        end = start + seconds
        if use_dict:
            while time.monotonic() < end:
                for _ in range(100):
                    with adm.claim(units):
                        pass
                n += 100
        else:
            while time.monotonic() < end:
                for _ in range(100):
                    with adm.claim(demand):
                        pass
                n += 100
        return n


class Ledger:
    """The admission ledger's bookkeeping with multiprocessing: a lock over shared arrays."""

    def __init__(self, capacity):
        self.lock = mp.Lock()
        self.used = mp.RawArray("q", 2)
        self.cap = mp.RawArray("q", [capacity, capacity])
        self.serial = mp.RawValue("q", 0)
        self.slots = mp.RawArray("q", SLOTS)

    def claim(self):
        with self.lock:
            used, cap = self.used, self.cap
            if used[0] + 1 > cap[0] or used[1] + 1 > cap[1]:
                return None                      # DEFERRED
            used[0] += 1
            used[1] += 1
            self.serial.value += 1
            serial = self.serial.value
            slot = serial % SLOTS
            self.slots[slot] = serial
            return serial

    def release(self, serial):
        with self.lock:
            slot = serial % SLOTS
            if self.slots[slot] != serial:
                raise RuntimeError("not a live claim")
            self.slots[slot] = 0
            self.used[0] -= 1
            self.used[1] -= 1


def lock_loop(ledger, seconds, start):
    n = 0
    while time.monotonic() < start:
        pass
    end = start + seconds
    while time.monotonic() < end:
        for _ in range(100):
            ledger.release(ledger.claim())
        n += 100
    return n


def sem_loop(sem, seconds, start):
    n = 0
    while time.monotonic() < start:
        pass
    end = start + seconds
    while time.monotonic() < end:
        for _ in range(100):
            sem.acquire()
            sem.release()
        n += 100
    return n


def in_processes(procs, body):
    """body(start) in procs forked processes at once; total pairs per second."""
    start = time.monotonic() + 0.05
    pipes = []
    for _ in range(procs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 1
            try:
                os.write(w, b"%d" % body(start))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        pipes.append((pid, r))
    total = 0
    for pid, r in pipes:
        total += int(os.read(r, 64) or b"0")
        os.close(r)
        os.waitpid(pid, 0)
    return total


def c_rate(bench, procs, seconds):
    out = subprocess.run([bench, "admission", "--procs", str(procs), "--domains", "2", "--seconds", str(seconds),
                          "--pairs", "1", "--json"], capture_output=True, text=True, check=True).stdout
    for r in json.loads(out)["results"]:
        if r["processes"] == procs:
            return r["orbit_pairs_per_s"]["median"]
    raise RuntimeError("orbit-bench gave no figure for %d processes" % procs)


def spread(values):
    return "%.3g [%.3g-%.3g]" % (statistics.median(values), min(values), max(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=0.3)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--orbit-bench", default=shutil.which("orbit-bench"))
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    name = "bench-py-claim-%d" % os.getpid()
    with orbit.Fleet.join(name, capacity=64) as fleet, fleet.admission() as adm:
        adm.set_capacity(D1, 1 << 40)
        adm.set_capacity(D2, 1 << 40)
    ledger, sem = Ledger(1 << 40), mp.BoundedSemaphore(1 << 30)
    T = opts.seconds
    sides = {
        "orbit": lambda: in_processes(opts.procs, lambda s: orbit_loop(name, T, s, False)) / T,
        "orbit-dict": lambda: in_processes(opts.procs, lambda s: orbit_loop(name, T, s, True)) / T,
        "mp-lock": lambda: in_processes(opts.procs, lambda s: lock_loop(ledger, T, s)) / T,
        "mp-sem": lambda: in_processes(opts.procs, lambda s: sem_loop(sem, T, s)) / T,
    }
    if opts.orbit_bench:
        sides["C"] = lambda: c_rate(opts.orbit_bench, opts.procs, T)
    rates = {k: [] for k in sides}
    try:
        for i in range(opts.pairs):
            for k in (list(sides) if i % 2 == 0 else list(reversed(sides))):   # alternate the order
                rates[k].append(sides[k]())
    finally:
        orbit.unlink(name)
    pairs = range(opts.pairs)
    result = {
        "procs": opts.procs, "pairs": opts.pairs, "seconds": T, "load": os.getloadavg(),
        "pairs_per_s": {k: statistics.median(v) for k, v in rates.items()},
        "orbit_over_mp_lock": [rates["orbit"][i] / rates["mp-lock"][i] for i in pairs],
        "orbit_over_mp_sem": [rates["orbit"][i] / rates["mp-sem"][i] for i in pairs],
        "orbit_dict_over_mp_lock": [rates["orbit-dict"][i] / rates["mp-lock"][i] for i in pairs],
    }
    if "C" in rates:
        result["overhead_ns_per_call"] = [(1e9 / rates["orbit"][i] - 1e9 / rates["C"][i]) / 2 for i in pairs]
    if opts.json:
        print(json.dumps(result))
        return 0
    print("%d process(es), %d pairs of %.2f s runs, load %.2f %.2f %.2f" %
          ((opts.procs, opts.pairs, T) + tuple(result["load"])))
    for k, v in result["pairs_per_s"].items():
        print("  %-10s %12.0f claim+release pairs/s (median)" % (k, v))
    print("  orbit / mp-lock   %s" % spread(result["orbit_over_mp_lock"]))
    print("  orbit / mp-sem    %s" % spread(result["orbit_over_mp_sem"]))
    print("  orbit-dict / mp-lock %s" % spread(result["orbit_dict_over_mp_lock"]))
    if "overhead_ns_per_call" in result:
        print("  binding overhead over C, ns per call: %s" % spread(result["overhead_ns_per_call"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
