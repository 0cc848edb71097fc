# SPDX-License-Identifier: MIT
"""Every blocking wait releases the GIL: another thread keeps running Python meanwhile."""

import threading
import time
import unittest

import orbit
from support import FleetCase

WAIT = 0.3


def count_while(blocker):
    """Loop iterations this thread makes while another thread runs blocker() (about WAIT s)."""
    done = threading.Event()
    errors = []

    def run():
        try:
            blocker()
        except BaseException as e:   # the main thread reports it
            errors.append(e)
        finally:
            done.set()
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.02)   # let it enter its wait
    n = 0
    while not done.is_set():
        n += 1
    t.join()
    if errors:
        raise errors[0]
    return n


def timed_out(call):
    def blocker():
        try:
            call()
        except orbit.TimedOutError:
            return
        raise AssertionError("%r did not wait" % call)
    return blocker


class TestGil(FleetCase):
    tag = "gil"

    def test_waits_release_the_gil(self):
        f = self.join()
        other = self.join()                      # a second node of this process, alive throughout
        adm = f.admission()
        adm.set_capacity(1, 1)
        held = adm.claim({1: 1})
        pool = f.pool()
        key = orbit.Key(9, 9)
        pool.accept(pool.reserve(pool.register(key, 1)))
        streams = f.streams()
        _, ticket = streams.create()
        ep = streams.open(ticket)
        waits = {
            "Admission.claim": lambda: adm.claim({1: 1}, timeout=WAIT),
            "Pool.reserve_wait": lambda: pool.reserve_wait(key, timeout=WAIT),
            "Streams.wait_offer": lambda: streams.wait_offer(timeout=WAIT),
            "Endpoint.read": lambda: ep.read(10, timeout=WAIT),
            "Fleet.wait_node_death": lambda: f.wait_node_death(other.node, other.incarnation, timeout=WAIT),
        }
        baseline = count_while(lambda: time.sleep(WAIT))   # time.sleep releases the GIL
        for name, call in waits.items():
            with self.subTest(call=name):
                blocker = (lambda c=call: self.assertRaises(orbit.Deferred, c)) if name == "Admission.claim" \
                    else timed_out(call)
                n = count_while(blocker)
                # Holding the GIL through the wait would leave this thread a few switch intervals
                # per 200 ms slice: a few percent of the baseline.
                self.assertGreater(n, baseline * 0.3, "%s: %d iterations beside it, %d beside a sleep" %
                                   (name, n, baseline))
        held.release()


if __name__ == "__main__":
    unittest.main()
