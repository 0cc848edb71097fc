# SPDX-License-Identifier: MIT
"""Arguments into C types, deadlines, and the handle base every wrapper shares."""

import ctypes
import errno as _errno
import math
import time
import weakref

from . import _lib
from .errors import OPENING, check, malformed

INT_MAX = 2**31 - 1

# A blocking call with no timeout waits in slices of this many ms, so signal handlers
# (KeyboardInterrupt) run between them; each slice is one call with its own wait.
SLICE_MS = 200


def uint(value, bits, call, what):
    """value as an unsigned C integer of bits bits, or MalformedError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise malformed(call, "%s %r is not an integer" % (what, value))
    if not 0 <= value < 1 << bits:
        raise malformed(call, "%s %d is outside 0..%d" % (what, value, (1 << bits) - 1))
    return value


def sint(value, bits, call, what):
    """value as a signed C integer of bits bits, or MalformedError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise malformed(call, "%s %r is not an integer" % (what, value))
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise malformed(call, "%s %d does not fit a %d-bit integer" % (what, value, bits))
    return value


def cstr(value, call, what):
    """A str (or bytes) as a C string: no NUL inside, which C would cut the name at."""
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    if not isinstance(value, bytes):
        raise malformed(call, "%s %r is not a string" % (what, value))
    if b"\0" in value:
        raise malformed(call, "%s %r holds a NUL byte" % (what, value))
    return value


def timeout_ms(timeout, call):
    """Seconds (None or math.inf: forever, 0: look once) as the C timeout_ms (-1 forever)."""
    if timeout is None:
        return -1
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise malformed(call, "timeout %r is not None or a number of seconds >= 0" % (timeout,))
    return -1 if timeout == math.inf else min(INT_MAX, math.ceil(timeout * 1000))


class Deadline:
    """One deadline over a whole call, handed to C in slices of at most SLICE_MS."""

    __slots__ = ("end",)

    def __init__(self, timeout, call):
        ms = timeout_ms(timeout, call)
        self.end = None if ms < 0 else time.monotonic() + ms / 1000

    def slice_ms(self):
        """The next slice's timeout_ms: 0 once the deadline passed (the C call looks once)."""
        if self.end is None:
            return SLICE_MS
        left = self.end - time.monotonic()
        return 0 if left <= 0 else min(SLICE_MS, math.ceil(left * 1000))

    def again(self, rc):
        """Whether a slice that timed out (rc) should be followed by another."""
        return rc == -_errno.ETIMEDOUT and (self.end is None or time.monotonic() < self.end)


def wait(deadline, call_slice, family=None):
    """Run call_slice(timeout_ms) until it returns anything but a slice's timeout; check it."""
    while True:
        rc = call_slice(deadline.slice_ms())
        if not deadline.again(rc):
            return check(rc, family)


class Handle:
    """A C handle with an owner: closing it closes what was opened through it first.

    A handle keeps its parent alive (a table keeps its fleet, an endpoint its
    streams), and the parent closes its children before itself, so the C rule
    "close every table before leaving the fleet" holds whatever order Python
    collects them in. A closed handle refuses every call with MalformedError.
    Use each handle from one thread while it closes: close() must not run
    beside another call on the same handle.
    """

    _what = "handle"

    def __init__(self, h, parent):
        self._h = h
        self._parent = parent
        self._children = weakref.WeakSet()
        if parent is not None:
            parent._children.add(self)

    def _handle(self):
        h = self._h
        if h is None:
            raise malformed(type(self).__name__, "this %s is closed" % self._what)
        return h

    @property
    def closed(self):
        """True once close() ran."""
        return self._h is None

    def close(self):
        """Close what was opened through this handle, then the handle itself. Idempotent."""
        if self._h is None:
            return
        for child in list(self._children):
            child.close()
        h, self._h = self._h, None
        self._release(h)

    def _release(self, h):
        raise NotImplementedError

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:   # interpreter shutdown: the library may be gone already
            pass


class Table(Handle):
    """A table handle of a fleet, opened by kind: created with a spec, or existing (the
    geometry its segment records). Subclasses name their C calls' prefix (_name) and spec
    struct (_spec). A readiness descriptor (Pool, Streams) is made on first use; the event
    loops watching it (orbit.aio) are told before it closes with the handle."""

    _name = _spec = None

    def __init__(self, h, parent):
        super().__init__(h, parent)
        self._fd = None
        self._reactors = None

    @classmethod
    def _open(cls, fleet, existing, kind, **geometry):
        call = "Fleet." + cls._name
        kind = uint(kind, 8, call, "kind")
        h = ctypes.c_void_p()
        if existing:
            rc = getattr(_lib, "orbit_%s_open_existing" % cls._name)(fleet._handle(), kind, ctypes.byref(h))
        else:
            spec = cls._spec(kind=kind, **{n: uint(v, 8 * getattr(cls._spec, n).size, call, n)
                                           for n, v in geometry.items()})
            rc = getattr(_lib, "orbit_%s_open" % cls._name)(fleet._handle(), ctypes.byref(spec), ctypes.byref(h))
        check(rc, OPENING)
        return cls(h.value, fleet)

    def _release(self, h):
        for r in list(self._reactors or ()):
            r.forget_fd(self._fd)
        getattr(_lib, "orbit_%s_close" % self._name)(h)


def fetch(call, struct, first=16):
    """Call call(buf, max) until it fits: the C "fills up to max, returns how many" idiom."""
    n = first
    while True:
        buf = (struct * n)()
        got = check(call(buf, n))
        if got <= n:
            return buf[:got]
        n = got + 16   # more came meanwhile: room for them and a few more


def text_of(fmt_call, size, *args):
    """A C formatter's text: fmt_call(*args, buf, size)."""
    buf = ctypes.create_string_buffer(size)
    check(fmt_call(*args, buf, size))
    return buf.value.decode()
