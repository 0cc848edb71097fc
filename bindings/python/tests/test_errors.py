# SPDX-License-Identifier: MIT
"""Every bad argument raises a named orbit.Error with the library's sentence, and changes nothing."""

import errno
import os
import unittest

import orbit
from support import FleetCase

UP = 1


class TestBadArguments(FleetCase):
    tag = "bad"

    def state(self, f, adm, pool, streams, key):
        """Everything a bad call could have changed, as the fleet sees it."""
        return (f.nodes(), adm.domains(), adm.claims(), adm.info(), pool.keys(), pool.candidates(key),
                streams.list(), [t[:4] for t in f.tables()],
                sorted(n for n in orbit.fleet_names() if n.startswith(self.name)))

    def test_every_bad_argument_raises_a_named_error_and_changes_nothing(self):
        f = self.join()
        adm, pool, streams = f.admission(), f.pool(), f.streams()
        adm.set_capacity(UP, 2)
        claim = adm.claim({UP: 1})
        key = orbit.Key(5, 5)
        rid = pool.register(key, 1)
        lease = pool.reserve(rid)
        done = pool.reserve(pool.register(orbit.Key(6, 6), 1))
        pool.accept(done).complete()
        a, ticket = streams.create()
        b = streams.open(ticket)
        other = orbit.Fleet.join(None)            # a private fleet: its handles belong elsewhere
        self.addCleanup(other.close)
        other_adm = other.admission()
        other_adm.set_capacity(UP, 1)
        foreign_claim = other_adm.claim({UP: 1})
        M, NR, TL = orbit.MalformedError, orbit.NotReservedError, orbit.TooLargeError
        cases = [
            # fleets
            (M, lambda: orbit.Fleet.join("bad name")),
            (M, lambda: orbit.Fleet.join(self.name + "\0x")),
            (M, lambda: orbit.Fleet.join(self.name, capacity=0)),
            (M, lambda: orbit.Fleet.join(self.name, capacity=5000)),
            (M, lambda: orbit.Fleet.join(self.name, capacity=-1)),
            (M, lambda: orbit.Fleet.join(self.name, capacity="16")),
            (M, lambda: orbit.Fleet.join(self.name, capacity=16, node=99)),
            (M, lambda: orbit.Fleet.join(self.name, capacity=16, backing="disk")),
            (M, lambda: orbit.Fleet.join(self.name, capacity=16, mode=0o666)),
            (M, lambda: orbit.Fleet.join(self.name, capacity=16, gid=-5)),
            (orbit.GeometryError, lambda: orbit.Fleet.join(self.name, capacity=8)),
            (orbit.ClaimedError, lambda: orbit.Fleet.join(self.name, capacity=16, node=f.node)),
            (orbit.NotFoundError, lambda: orbit.Fleet.observe(self.name + "-none")),
            (orbit.NotFoundError, lambda: orbit.live_members(self.name + "-none")),
            (M, lambda: f.wait_node_death(f.node, f.incarnation, timeout=0)),   # its own life
            (M, lambda: f.wait_node_death(99, 1, timeout=0)),
            (M, lambda: f.wait_node_death(1, 1, timeout=-1)),
            (M, lambda: f.wait_node_death(1, 1, timeout="soon")),
            (M, lambda: f.wait_node_death(1, 1, timeout=float("nan"))),
            (M, lambda: f.node_dead(99, 1)),
            (M, lambda: f.counters(99)),
            (M, lambda: orbit.Id.parse("1:2")),
            (M, lambda: orbit.Id.parse("256:0:0")),
            # admission
            (M, lambda: adm.set_capacity(-1, 1)),
            (orbit.BusyError, lambda: adm.set_capacity(UP, 0)),   # below the units in use
            (M, lambda: adm.claim({})),
            (M, lambda: adm.claim({99: 1})),
            (M, lambda: adm.claim({UP: 0})),
            (M, lambda: adm.claim({UP: -1})),
            (M, lambda: adm.claim([(UP, 1), (UP, 1)])),
            (M, lambda: adm.claim([UP])),
            (M, lambda: adm.claim({UP: 1}, timeout=-2)),
            (M, lambda: adm.try_claim({UP: 1}, retained_bytes=5)),   # not the claim's sum
            (M, lambda: adm.release("claim")),
            (NR, lambda: adm.release(orbit.Claim.from_bytes(adm, bytes(foreign_claim)))),
            (M, lambda: orbit.Claim.from_bytes(adm, b"short")),
            (M, lambda: adm.wait(-1)),
            (M, lambda: f.admission(max_domains=0, kind=99)),
            (orbit.GeometryError, lambda: f.admission(max_domains=32)),
            # pool
            (M, lambda: pool.register(key, 0)),
            (M, lambda: pool.register("key", 1)),
            (M, lambda: pool.register(orbit.Key(-1, 0), 1)),
            (M, lambda: pool.reserve(12345)),                 # not an id of this pool
            (orbit.BusyError, lambda: pool.reserve(rid)),
            (NR, lambda: pool.accept(done)),                  # accepted and completed already
            (M, lambda: pool.accept("lease")),
            (M, lambda: orbit.Lease.from_bytes(b"x")),
            (M, lambda: pool.wait_capacity(key, -1)),
            (M, lambda: pool.acquire(key, policy="best")),
            (M, lambda: pool.reconcile(rid, 0, grace=-1)),
            (M, lambda: pool.unregister(2**64)),
            (M, lambda: f.pool(key_capacity=3, kind=98)),     # not a power of two
            (orbit.GeometryError, lambda: f.pool(key_capacity=512)),
            (M, lambda: orbit.Key.from_digest(b"short")),
            (M, lambda: orbit.Key.from_string("a\0b")),
            # streams
            (M, lambda: streams.open("garbage")),
            (orbit.ClaimedError, lambda: streams.open(ticket)),
            (M, lambda: streams.open(orbit.Ticket(ticket.id, "c", ticket.epoch))),
            (M, lambda: streams.offer(ticket, -1)),
            (M, lambda: streams.offer(ticket, 99)),
            (M, lambda: orbit.Ticket.parse("1:2:3/x/4")),
            (M, lambda: a.write("text, not bytes")),
            (M, lambda: b.readinto(b"read-only")),
            (M, lambda: b.read_exact(-1)),
            (TL, lambda: b.read_exact(2 ** 40)),
            (TL, lambda: a.write_exact(b"x" * (2 ** 17))),
            (M, lambda: a.rearm() if b.side == "a" else b.rearm()),   # side B cannot rearm
            (M, lambda: f.streams(buffer_bytes=1000, kind=97)),
            (orbit.GeometryError, lambda: f.streams(buffer_bytes=4096)),
            (M, lambda: orbit.set_spin_ns(-1)),
        ]
        before = self.state(f, adm, pool, streams, key)
        for want, call in cases:
            with self.subTest(line=call.__code__.co_firstlineno):
                with self.assertRaises(want) as cm:
                    call()
                e = cm.exception
                self.assertIsInstance(e, orbit.Error)
                self.assertTrue(e.sentence, "no sentence")
                self.assertEqual(str(e).rsplit("[", 1)[1], want.code_name + "]")
                self.assertEqual(self.state(f, adm, pool, streams, key), before, "%s changed something" % e)
        self.assertEqual(orbit.MalformedError.code_name, "ORBIT_EMALFORMED")
        self.assertTrue(issubclass(orbit.MalformedError, ValueError) and issubclass(orbit.MalformedError, TypeError))
        self.assertTrue(issubclass(orbit.TimedOutError, TimeoutError))
        self.assertEqual(orbit.TimedOutError(errno.ETIMEDOUT, "x").errno, errno.ETIMEDOUT)
        claim.release()
        pool.accept(lease).complete()

    def test_sentences_come_from_the_library(self):
        with self.assertRaises(orbit.MalformedError) as cm:
            orbit.Fleet.join("bad name")
        self.assertIn("orbit_fleet_join: name 'bad name'", cm.exception.sentence)

    def test_closed_handles_refuse_every_call(self):
        f = self.join()
        adm = f.admission()
        streams = f.streams()
        ep, _ = streams.create()
        f.close()                                 # closes the tables and the endpoint first
        self.assertTrue(adm.closed and streams.closed and ep.closed)
        for call in (lambda: adm.set_capacity(1, 1), lambda: streams.create(), lambda: ep.write(b"x"),
                     lambda: f.nodes(), lambda: f.pool()):
            with self.assertRaises(orbit.MalformedError):
                call()

    def test_a_parents_handle_in_a_forked_child_is_refused(self):
        f = self.join()
        adm = f.admission()
        adm.set_capacity(UP, 1)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: report by exit status only
            code = 1
            try:
                try:
                    adm.claim({UP: 1}, timeout=0)
                except orbit.ForkedError:
                    with orbit.Fleet.join(self.name, capacity=16) as mine, mine.admission() as a:
                        with a.claim({UP: 1}, timeout=0):
                            code = 0
            finally:
                os._exit(code)
        os.close(w)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(adm.domains()[0].used, 0)


if __name__ == "__main__":
    unittest.main()
