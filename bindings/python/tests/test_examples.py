# SPDX-License-Identifier: MIT
"""examples/python/ run as a user runs them, with the installed package."""

import os
import subprocess
import sys
import unittest

import orbit
from support import HERE, WAIT_S, FleetCase

EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "examples", "python"))


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script)] + list(args), capture_output=True,
                          text=True, timeout=60)


class TestExamples(FleetCase):
    tag = "ex"

    def test_prefork_server_shares_the_budget_and_survives_a_kill(self):
        out = run("prefork_server.py", "--workers", "3", "--requests", "300")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("prefork_server: ok", out.stdout)
        self.assertRegex(out.stdout, r"it gave back [1-9]\d* claim\(s\) and \d+ connection\(s\) \(now 0 and 0\)")
        self.assertIn("300 requests answered", out.stdout)

    def test_healthcheck(self):
        f = self.join()
        adm = f.admission()
        adm.set_capacity(1, 2)
        out = run("healthcheck.py", self.name)
        self.assertEqual((out.returncode, out.stdout), (0, "healthy\n"), out.stderr)
        claim = adm.claim({1: 2})
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                                 # a member that dies without leaving
            try:
                g = orbit.Fleet.join(self.name, capacity=16)
                os.write(w, b"%d %d" % (g.node, g.incarnation))
            finally:
                os._exit(0)
        os.close(w)
        node, inc = map(int, os.read(r, 64).split())
        os.close(r)
        os.waitpid(pid, 0)
        f.wait_node_death(node, inc, timeout=WAIT_S)
        out = run("healthcheck.py", self.name, "--min-free", "1")
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("node %d" % node, out.stdout)
        self.assertIn("domain 1: 0 of 2 free", out.stdout)
        claim.release()
        f.reap()
        self.assertEqual(run("healthcheck.py", self.name).stdout, "healthy\n")


if __name__ == "__main__":
    unittest.main()
