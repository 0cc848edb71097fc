# SPDX-License-Identifier: MIT
"""What the Python suite shares: unique fleet names, worker processes, the C helpers.

The suite tests the package as a user installed it: tests/run.sh installs it
with pip into a scratch virtual environment over /usr/bin/python3 and points
ORBIT_LIBRARY, PATH and PKG_CONFIG_PATH at an installed orbit prefix. Every
process a test starts is stopped by its pid; every fleet it makes is
unlinked.
"""

import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import orbit

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
WAIT_S = 20                      # no wait in the suite is longer
_names = itertools.count()
_built = {}


def fleet_name(tag):
    """A fleet name unique to this run: other engineers' suites share /dev/shm."""
    return "t-py-%s-%d-%d" % (tag, os.getpid(), next(_names))


def tool(name):
    """A program the runner put on PATH (orbitctl, cc, pkg-config); the test fails without it."""
    path = shutil.which(name)
    if path is None:
        raise AssertionError("%s is not on PATH: run the suite through bindings/python/tests/run.sh" % name)
    return path


def build_c(source):
    """Compile tests/SOURCE against the installed orbit (pkg-config) once per run; its path."""
    if source in _built:
        return _built[source]
    out_dir = tempfile.mkdtemp(prefix="orbit-py-c-")
    exe = os.path.join(out_dir, os.path.splitext(os.path.basename(source))[0])
    flags = subprocess.run([tool("pkg-config"), "--cflags", "--libs", "orbit"], check=True,
                           capture_output=True, text=True).stdout.split()
    libdir = subprocess.run([tool("pkg-config"), "--variable=libdir", "orbit"], check=True,
                            capture_output=True, text=True).stdout.strip()
    src = source if os.path.isabs(source) else os.path.join(HERE, source)
    subprocess.run([tool("cc"), "-std=gnu11", "-Wall", "-Wextra", "-Werror", src, "-o", exe,
                    "-Wl,-rpath," + libdir] + flags, check=True)
    _built[source] = exe
    return exe


class Proc:
    """A child process with line-based stdout, stopped by pid when the test ends."""

    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.PIPE, env=env)
        self._buf = b""

    @property
    def pid(self):
        return self.p.pid

    def line(self, prefix=None, timeout=WAIT_S):
        """The next stdout line (starting with prefix, when given), within timeout seconds."""
        end = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while True:
            while b"\n" in self._buf:
                text, self._buf = self._buf.split(b"\n", 1)
                text = text.decode()
                if prefix is None or text.startswith(prefix):
                    return text
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError("no line%s from pid %d within %ss" %
                                     (" " + prefix if prefix else "", self.pid, timeout))
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError("pid %d ended (exit %s) before a line%s" %
                                     (self.pid, self.p.wait(), " " + prefix if prefix else ""))
            self._buf += chunk

    def send(self, text):
        self.p.stdin.write(text.encode() + b"\n")
        self.p.stdin.flush()

    def kill9(self):
        os.kill(self.pid, signal.SIGKILL)
        self.p.wait(WAIT_S)

    def wait(self, timeout=WAIT_S):
        """Its exit status; the test fails if it runs longer than timeout."""
        return self.p.wait(timeout)

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.p.wait(WAIT_S)
        for f in (self.p.stdout, self.p.stdin):
            try:
                f.close()
            except OSError:
                pass


def until(predicate, what, timeout=WAIT_S):
    """Poll predicate() every ms until it holds; the test fails after timeout seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("%s: not within %ss" % (what, timeout))
        time.sleep(0.001)


def claimer_waits(adm):
    """Whether a claimer is parked on the ledger for a release (orbit_admission_waiting)."""
    w = adm.waiting()
    return w.parked and w.epoch_wanted > w.change_epoch


class FleetCase(unittest.TestCase):
    """A test with its own fleet name, processes stopped and the fleet unlinked at the end."""

    tag = "case"

    def setUp(self):
        self.name = fleet_name(self.tag)
        self.procs = []
        self.addCleanup(self._clean)

    def _clean(self):
        for p in self.procs:
            p.stop()
        try:
            orbit.unlink(self.name)
        except orbit.NotFoundError:
            pass

    def worker(self, *args, env=None):
        """A Python worker process (tests/worker.py MODE FLEET ARGS...)."""
        p = Proc([sys.executable, WORKER, args[0], self.name] + [str(a) for a in args[1:]],
                 env=dict(os.environ, **(env or {})))
        self.procs.append(p)
        return p

    def c_peer(self, *args):
        """The C member (tests/c_peer.c) in this fleet."""
        p = Proc([build_c("c_peer.c"), self.name] + [str(a) for a in args])
        self.procs.append(p)
        return p

    def join(self, **kw):
        """This process as a member of the test's fleet."""
        kw.setdefault("capacity", 16)
        f = orbit.Fleet.join(self.name, **kw)
        self.addCleanup(f.close)
        return f
