# SPDX-License-Identifier: MIT
"""Every blocking wait releases the GIL: another thread keeps running Python meanwhile."""

import threading
import time
import unittest

import orbit
from support import FleetCase

WAIT = 0.3
GAP = 0.1   # a C call that kept the GIL would hold this thread off for a whole 200 ms slice


def longest_gap_while(blocker):
    """The longest time this thread went without running while another thread ran blocker()
    (about WAIT s): a wait that releases the GIL lets it run every few ms."""
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
    last = time.monotonic()   # from before it starts: a wait that kept the GIL would stop us at once
    t.start()
    time.sleep(0.02)          # let it enter its wait (a gap of 20 ms)
    gap = 0.0
    while not done.is_set():
        now = time.monotonic()
        gap, last = max(gap, now - last), now
    t.join()
    if errors:
        raise errors[0]
    return gap


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
        for name, call in waits.items():
            with self.subTest(call=name):
                blocker = (lambda c=call: self.assertRaises(orbit.Deferred, c)) if name == "Admission.claim" \
                    else timed_out(call)
                # A wait that keeps the GIL stops this thread for a whole slice every time; a
                # throttled or descheduled process stops it now and then: the best of 3 tries.
                gaps = []
                while len(gaps) < 3 and (not gaps or gaps[-1] >= GAP):
                    gaps.append(longest_gap_while(blocker))
                self.assertLess(min(gaps), GAP, "%s: this thread stood still for %s ms of a %.0f ms wait" %
                                (name, ", ".join("%.0f" % (g * 1000) for g in gaps), WAIT * 1000))
        held.release()


if __name__ == "__main__":
    unittest.main()
