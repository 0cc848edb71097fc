# SPDX-License-Identifier: MIT
"""The pool from Python: leases between processes, waits for a unit, the asyncio form."""

import asyncio
import pickle
import subprocess
import unittest

import orbit
import orbit.aio
from orbit import _lib
from support import FleetCase, build_c


class TestPool(FleetCase):
    tag = "pool"

    def test_a_lease_taken_in_one_process_is_accepted_in_another(self):
        f = self.join()
        pool = f.pool()
        key = orbit.Key(0x1ea5e, 0)   # the worker reserves under Key(lo, 0)
        rid = pool.register(key, 1)
        first = self.worker("lease", key.lo)
        first.line("node")
        lease = orbit.Lease.from_bytes(bytes.fromhex(first.line("lease").split()[1]))
        self.assertEqual(lease.id, rid)
        c = pool.candidates(key)[0]
        self.assertEqual((c.reserved, c.active, c.local), (1, 0, True))

        second = self.worker("lease", key.lo)   # waits in reserve_wait: no unit is free
        second.line("node")
        with pool.accept(lease) as ex:
            self.assertEqual((pool.candidates(key)[0].reserved, pool.candidates(key)[0].active), (0, 1))
            with self.assertRaises(orbit.NotReservedError):
                pool.accept(lease)               # once per fence
        self.assertTrue(ex.done)
        later = orbit.Lease.from_bytes(bytes.fromhex(second.line("lease").split()[1]))
        self.assertGreater(later.fence, lease.fence)
        pool.accept(later).complete()
        for p in (first, second):
            p.send("done")
            self.assertEqual(p.wait(), 0)
        self.assertEqual(pickle.loads(pickle.dumps(lease)), lease)

    def test_reserve_wait_times_out_then_gets_the_unit_back(self):
        f = self.join()
        pool = f.pool()
        key = orbit.Key(1, 1)
        pool.register(key, 1)
        lease = pool.reserve_wait(key, timeout=1)
        with self.assertRaises(orbit.TimedOutError):
            pool.reserve_wait(key, timeout=0.05)
        with self.assertRaises(orbit.BusyError):
            pool.reserve(lease.id)
        pool.accept(lease).complete()
        self.assertEqual(pool.reserve_wait(key, timeout=0).fence, lease.fence + 1)

    def test_reserve_wait_async_wakes_on_the_readiness_descriptor(self):
        f = self.join()
        pool = f.pool()
        key = orbit.Key(2, 2)
        pool.register(key, 1)

        async def run():
            held = pool.accept(pool.reserve_wait(key, timeout=1))
            task = asyncio.get_running_loop().create_task(pool.reserve_wait_async(key, timeout=5))
            await asyncio.sleep(0.05)
            self.assertFalse(task.done())
            held.complete()
            lease = await task
            self.assertEqual(pool.candidates(key)[0].reserved, 1)
            pool.accept(lease).complete()
            with self.assertRaises(orbit.TimedOutError):
                held = pool.accept(pool.reserve_wait(key, timeout=1))
                await pool.reserve_wait_async(key, timeout=0.05)
            held.complete()
        asyncio.run(run())

    def test_creation_budget_and_plans(self):
        f = self.join()
        pool = f.pool()
        key = orbit.Key(3, 3)
        plan = pool.acquire(key, max_live=1)
        self.assertEqual(plan.kind, "create")
        with plan.permit:
            self.assertEqual(pool.budget(key), (0, 1))
            with self.assertRaises(orbit.BudgetError):
                pool.claim_create(key, 1)
            rid = pool.register(key, 2)
        self.assertTrue(plan.permit.done)
        self.assertEqual(pool.acquire(key, max_live=1).kind, "local_reuse")
        pool.drain(rid)
        with self.assertRaises(orbit.DrainingError):
            pool.reserve(rid)
        self.assertEqual(pool.acquire(key, max_live=1).kind, "wait")
        pool.unregister(rid)
        with self.assertRaises(orbit.StaleError):
            pool.reserve(rid)


class TestKeys(unittest.TestCase):
    def test_keys_from_strings_are_the_c_librarys(self):
        words = ["", "upstream:10.0.0.7:80", "\u00fcber " * 40]
        if not _lib.has("orbit_key_from_string"):
            with self.assertRaises(orbit.NotSupportedError):
                orbit.Key.from_string("upstream")
            self.skipTest("this liborbit has no orbit_key_from_string")
        c = subprocess.run([build_c("key_peer.c")] + words, capture_output=True, text=True,
                           check=True).stdout.splitlines()
        self.assertEqual([str(orbit.Key.from_string(w)) for w in words], c)
        self.assertEqual([orbit.Key.from_bytes(w.encode()) for w in words], [orbit.Key.from_string(w) for w in words])
        k = orbit.Key.from_string("x")
        self.assertEqual(orbit.Key.from_digest(k.digest()), k)


if __name__ == "__main__":
    unittest.main()
