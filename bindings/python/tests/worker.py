# SPDX-License-Identifier: MIT
"""A Python member of a test fleet, one process per run (started by support.FleetCase.worker).

    worker.py claims FLEET DOMAIN ROUNDS HOLD_MS   claim 1 unit ROUNDS times, hold it HOLD_MS;
                                                   print "interval T1 T2" (monotonic ns) per hold
    worker.py hold FLEET DOMAIN UNITS KEY_LO       claim UNITS and reserve a unit of the resource
                                                   under Key(KEY_LO, 0); print "held NODE INC", sleep
    worker.py wait-claim FLEET DOMAIN UNITS        claim UNITS, waiting through DEFERRED; "claimed"
    worker.py async-claim FLEET DOMAIN UNITS       the same with claim_async; "claimed RING|THREAD"
    worker.py lease FLEET KEY_LO                   reserve_wait on the key; "lease HEX"; wait for a line
    worker.py echo FLEET KIND BUFFER_BYTES         take one offer on that streams table, echo it (asyncio)

Every wait is bounded by support.WAIT_S. Exit 0 when done; a traceback and exit 1 otherwise.
"""

import asyncio
import os
import sys
import time

import orbit

WAIT_S = 20


def say(*words):
    print(*words, flush=True)


def member(fleet_name):
    f = orbit.Fleet.join(fleet_name, capacity=16)
    say("node", f.node, f.incarnation)
    return f


def claims(f, domain, rounds, hold_ms):
    adm = f.admission()
    lines = []
    for _ in range(int(rounds)):
        with adm.claim({int(domain): 1}, timeout=WAIT_S):
            t1 = time.monotonic_ns()
            time.sleep(int(hold_ms) / 1000)
            t2 = time.monotonic_ns()
        lines.append("interval %d %d" % (t1, t2))
    say("\n".join(lines))
    say("done")


def hold(f, domain, units, key_lo):
    adm = f.admission()
    claim = adm.claim({int(domain): int(units)}, timeout=WAIT_S)
    pool = f.pool()
    lease = pool.reserve_wait(orbit.Key(int(key_lo), 0), timeout=WAIT_S)
    say("held", claim.serial, lease.fence)
    sys.stdin.readline()   # killed -9 here


def wait_claim(f, domain, units):
    adm = f.admission()
    with adm.claim({int(domain): int(units)}, timeout=WAIT_S):
        say("claimed")


def async_claim(f, domain, units):
    adm = f.admission()

    async def run():
        claim = await adm.claim_async({int(domain): int(units)}, timeout=WAIT_S)
        ring = orbit.aio.reactor().ring
        with claim:
            say("claimed", "RING" if ring else "THREAD")
    asyncio.run(run())


def lease(f, key_lo):
    pool = f.pool()
    got = pool.reserve_wait(orbit.Key(int(key_lo), 0), timeout=WAIT_S)
    say("lease", bytes(got).hex())
    sys.stdin.readline()


def echo(f, kind, buffer_bytes):
    streams = f.streams(kind=int(kind), buffer_bytes=int(buffer_bytes))

    async def run():
        ticket = await streams.wait_offer_async(timeout=WAIT_S)
        with streams.open(ticket) as ep:
            total = 0
            while True:
                data = await ep.read_async(65536, timeout=WAIT_S)
                if not data:
                    break
                await ep.write_async(data, timeout=WAIT_S)
                total += len(data)
            ep.finish()
            ep.wait_peer_closed(WAIT_S)   # the reader drains before this side closes
        say("echoed", total)
    asyncio.run(run())


MODES = {"claims": claims, "hold": hold, "wait-claim": wait_claim, "async-claim": async_claim, "lease": lease,
         "echo": echo}

if __name__ == "__main__":
    mode, fleet_name, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    with member(fleet_name) as fleet:
        MODES[mode](fleet, *args)
    os._exit(0)
