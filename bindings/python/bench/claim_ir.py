# SPDX-License-Identifier: MIT
"""N admission claim+release pairs from Python, one way each (claim_instructions.sh counts them).

    claim_ir.py orbit|dict|mp-lock|mp-sem N
"""
import multiprocessing as mp
import os
import sys

import orbit
from claim_bench import D1, D2, Ledger

mode, n = sys.argv[1], int(sys.argv[2])
name = "t-py-ir-%d" % os.getpid()
with orbit.Fleet.join(name, capacity=4, backing="shm") as f, f.admission() as adm:
    adm.set_capacity(D1, 1 << 40)
    adm.set_capacity(D2, 1 << 40)
    demand, units = orbit.Demand({D1: 1, D2: 1}), {D1: 1, D2: 1}
    ledger, sem = Ledger(1 << 40), mp.BoundedSemaphore(1 << 30)
    if mode == "orbit":
        for _ in range(n):
            with adm.claim(demand):
                pass
    elif mode == "dict":
        for _ in range(n):
            with adm.claim(units):
                pass
    elif mode == "mp-lock":
        for _ in range(n):
            ledger.release(ledger.claim())
    elif mode == "mp-sem":
        for _ in range(n):
            sem.acquire()
            sem.release()
    else:
        sys.exit("claim_ir.py: no mode %r" % mode)
orbit.unlink(name)
