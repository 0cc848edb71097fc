# SPDX-License-Identifier: MIT
"""Admission from Python processes: the budget holds fleet-wide, a killed worker's share comes back."""

import asyncio
import time
import unittest

import orbit
import orbit.aio
from support import WAIT_S, FleetCase, claimer_waits, until

UPSTREAM = 1
MEMORY = 2


def max_overlap(intervals):
    """The most intervals [t1, t2] open at one instant."""
    events = sorted([(t1, 1) for t1, _ in intervals] + [(t2, -1) for _, t2 in intervals])
    most = now = 0
    for _, step in events:   # at equal times a close (-1) sorts first: touching is not overlapping
        now += step
        most = max(most, now)
    return most


class TestBudget(FleetCase):
    tag = "adm"

    def test_claims_from_several_workers_never_exceed_the_budget(self):
        budget, workers, rounds = 3, 5, 12
        f = self.join()
        adm = f.admission()
        adm.set_capacity(UPSTREAM, budget)
        procs = [self.worker("claims", UPSTREAM, rounds, 4) for _ in range(workers)]
        intervals = []
        for p in procs:
            p.line("node")
            while True:
                line = p.line()
                if line == "done":
                    break
                _, t1, t2 = line.split()
                intervals.append((int(t1), int(t2)))
            self.assertEqual(p.wait(), 0)
        self.assertEqual(len(intervals), workers * rounds)
        most = max_overlap(intervals)
        # Each interval lies inside its claim's life, so more than the budget at once means the
        # ledger over-admitted; fewer than two means the workers never competed.
        self.assertLessEqual(most, budget)
        self.assertGreaterEqual(most, 2, "the workers never held claims at once: the test proved nothing")
        self.assertEqual(adm.domains()[0].used, 0)
        self.assertEqual(adm.claims(), [])

    def test_a_killed_worker_gives_back_its_claims_and_leases(self):
        f = self.join()
        adm, pool = f.admission(), f.pool()
        adm.set_capacity(UPSTREAM, 4)
        key = orbit.Key(0x5eed, 0)
        rid = pool.register(key, 2)
        holder = self.worker("hold", UPSTREAM, 3, key.lo)
        _, node, inc = holder.line("node").split()
        node, inc = int(node), int(inc)
        holder.line("held")
        self.assertEqual(adm.domains()[0].used, 3)
        self.assertEqual(pool.candidates(key)[0].reserved, 1)
        held = f.account(node, inc)
        self.assertEqual((held.admission_claims, held.admission_units, held.pool_reserved), (1, 3, 1))
        self.assertEqual([(i.state, i.node) for i in pool.leases(rid)], [("pending", node)])

        waiter = self.worker("wait-claim", UPSTREAM, 2)   # DEFERRED: only 1 unit is free
        waiter.line("node")
        until(lambda: claimer_waits(adm), "the second worker parks for a release")
        deaths_before = f.death_counters().deaths_reported
        holder.kill9()
        f.wait_node_death(node, inc, timeout=WAIT_S)      # no reaper: the kernel's lock tells
        self.assertEqual([n.state for n in f.nodes() if n.node == node], ["dead"])
        self.assertEqual(f.reap(), 1)
        self.assertEqual(waiter.line(), "claimed")        # its share went to the deferred claimer
        self.assertEqual(waiter.wait(), 0)
        self.assertEqual(pool.candidates(key)[0].reserved, 0)
        self.assertEqual(pool.leases(rid), [])
        self.assertEqual(adm.domains()[0].used, 0)
        self.assertEqual(f.death_counters().deaths_reported, deaths_before + 1)
        self.assertNotIn(node, [n.node for n in f.nodes()])


class TestOutcomes(FleetCase):
    tag = "out"

    def test_results_or_exceptions_by_the_callers_choice(self):
        f = self.join()
        adm = f.admission()
        adm.set_capacity(UPSTREAM, 2)
        adm.set_capacity(MEMORY, 1000)
        claim = adm.claim({UPSTREAM: 2, MEMORY: 10}, timeout=0)
        self.assertEqual(claim.units(), {UPSTREAM: 2, MEMORY: 10})
        r = adm.try_claim({UPSTREAM: 1})
        self.assertIs(r.outcome, orbit.Outcome.DEFERRED)
        self.assertFalse(r)
        self.assertEqual((r.blocker_domain, r.blocker_free, r.blocker_maximum), (UPSTREAM, 0, 2))
        self.assertIsInstance(r.refusal(), orbit.Deferred)
        t0 = time.monotonic()
        with self.assertRaises(orbit.Deferred) as cm:
            adm.claim({UPSTREAM: 1}, timeout=0.2)
        self.assertGreaterEqual(time.monotonic() - t0, 0.19)
        self.assertIs(cm.exception.result.outcome, orbit.Outcome.DEFERRED)
        self.assertIn("DEFERRED", str(cm.exception))
        r = adm.try_claim({UPSTREAM: 3})
        self.assertIs(r.outcome, orbit.Outcome.REJECTED)
        with self.assertRaises(orbit.Rejected):
            adm.claim({UPSTREAM: 3})                    # never fits: no waiting, whatever the timeout
        r = adm.try_claim({MEMORY: 10}, retained_bytes=10)
        self.assertIs(r.outcome, orbit.Outcome.SKIPPED)   # retention is disabled in this ledger
        with self.assertRaises(orbit.Skipped):
            adm.claim({MEMORY: 10}, retained_bytes=10)
        self.assertIsInstance(cm.exception, orbit.Error)
        with claim:
            pass
        self.assertTrue(claim.released)
        with adm.claim(orbit.Demand({UPSTREAM: 1}, fit={MEMORY: 1000})) as c:
            self.assertEqual(c.units(), {UPSTREAM: 1})
        self.assertEqual(adm.info().live_claims, 0)

    def test_a_claim_released_by_another_process_handle(self):
        f = self.join()
        adm = f.admission()
        adm.set_capacity(UPSTREAM, 1)
        claim = adm.claim({UPSTREAM: 1})
        other = f.admission()   # a second handle: as another process would hold it
        orbit.Claim.from_bytes(other, bytes(claim)).release()
        self.assertEqual(adm.domains()[0].used, 0)
        with self.assertRaises(orbit.NotReservedError):
            claim.release()

    def test_claim_async_through_the_ring_and_through_threads(self):
        f = self.join()
        adm = f.admission()
        adm.set_capacity(UPSTREAM, 1)
        for env, want in (({}, "RING" if orbit.uring_futex_supported() else "THREAD"),
                          ({"ORBIT_DISABLE_URING_FUTEX": "1"}, "THREAD")):
            with self.subTest(env=env):
                held = adm.claim({UPSTREAM: 1})
                w = self.worker("async-claim", UPSTREAM, 1, env=env)
                w.line("node")
                until(lambda: claimer_waits(adm), "the worker parks for a release")
                held.release()
                self.assertEqual(w.line(), "claimed " + want)
                self.assertEqual(w.wait(), 0)

    def test_claim_async_cancelled_leaves_nothing_armed(self):
        f = self.join()
        adm = f.admission()
        adm.set_capacity(UPSTREAM, 1)

        async def run():
            held = adm.claim({UPSTREAM: 1})
            task = asyncio.get_running_loop().create_task(adm.claim_async({UPSTREAM: 1}))
            await asyncio.sleep(0.05)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            r = orbit.aio.reactor()
            self.assertEqual((r.shared, r.by_token), ({}, {}))
            with self.assertRaises(orbit.Deferred):
                await adm.claim_async({UPSTREAM: 1}, timeout=0.05)
            self.assertEqual((r.shared, r.by_token), ({}, {}))
            held.release()
            with await adm.claim_async({UPSTREAM: 1}, timeout=1):
                pass
        asyncio.run(run())
        self.assertEqual(adm.info().live_claims, 0)


if __name__ == "__main__":
    unittest.main()
