#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Health check of a fleet: exit 0 when healthy, 1 (with the reasons on stdout) when not.

    python3 examples/python/healthcheck.py FLEET [--min-free UNITS]
"""
import argparse, sys
import orbit

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("fleet")
ap.add_argument("--min-free", type=int, default=1, help="least free units every admission domain must have")
args = ap.parse_args()
problems = []
with orbit.Fleet.observe(args.fleet) as fleet:      # reads only: claims no node
    problems += ["node %d (pid %d) died and is not reported: orbitctl reap %s" % (n.node, n.pid, args.fleet)
                 for n in fleet.nodes() if n.state == "dead"]
    if any(t.name == "admission" for t in fleet.tables()):
        with fleet.admission(existing=True) as adm:
            problems += ["admission ledger poisoned: " + adm.info().poison_reason] if adm.poisoned else []
            problems += ["domain %d: %d of %d free" % (d.domain, d.free, d.capacity)
                         for d in adm.domains() if d.free < args.min_free]
print("\n".join(problems) or "healthy")
sys.exit(1 if problems else 0)
