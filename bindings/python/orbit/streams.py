# SPDX-License-Identifier: MIT
"""Streams: bounded duplex byte rings between two processes of a fleet.

One side creates a stream (side A) and gets a Ticket naming side B; it
offers the ticket to a node, or passes its text any other way. Whoever opens
the ticket holds side B. Each direction is a ring: bytes arrive in order, a
writer waits while its ring is full and a reader while it is empty.

    ep, ticket = streams.create()
    streams.offer(ticket, peer_node)          # the peer: streams.wait_offer()
    ep.write_all(b"hello", timeout=5)         #           streams.open(ticket)
    ep.finish()                               # FIN: the peer reads b"" after the data

Endpoint is an io.RawIOBase: io.BufferedReader(ep) and friends work. For
event loops, Streams.fileno() (also Endpoint.fileno()) is the table's
readiness descriptor; orbit.aio awaits it.
"""

import ctypes
import errno
import io
from ctypes import byref, c_void_p
from typing import NamedTuple

from . import _lib
from ._util import Deadline, Handle, Table, cstr, fetch, text_of, uint, wait
from .errors import STREAMS, TooLargeError, check, malformed
from .fleet import Id

_SIDES = ("a", "b")
_EAGAIN = errno.EAGAIN


class Ticket(NamedTuple):
    """Names one side of a stream: the stream's Id, its side ("a" or "b") and the epoch.

    str() is the C text form "<kind>:<node>:<counter>/<a|b>/<epoch>";
    Ticket.parse reads it, so a ticket travels as text to any process (a C
    one included).
    """
    id: Id
    side: str
    epoch: int

    def _c(self, call):
        if self.side not in _SIDES:
            raise malformed(call, "side %r is not 'a' or 'b'" % (self.side,))
        return _lib.Ticket(uint(self.id, 64, call, "id"), _SIDES.index(self.side), uint(self.epoch, 64, call, "epoch"))

    def __str__(self):
        return text_of(_lib.orbit_ticket_format, 64, byref(self._c("Ticket")))

    @classmethod
    def parse(cls, text):
        """A Ticket from its text form; MalformedError for anything else."""
        t = _lib.Ticket()
        check(_lib.orbit_ticket_parse(cstr(text, "Ticket.parse", "text"), byref(t)))
        return cls._of(t)

    @classmethod
    def _of(cls, t):
        return cls(Id(t.id), _SIDES[t.side], t.epoch)


def _ticket(value, call):
    if isinstance(value, Ticket):
        return value._c(call)
    if isinstance(value, (str, bytes)):
        return Ticket.parse(value)._c(call)
    raise malformed(call, "%r is not an orbit.Ticket or its text" % (value,))


class StreamSide(NamedTuple):
    """Who holds one side: state ("free", "claimed", "released", "dead"), node, incarnation."""
    state: str
    node: int
    incarnation: int


class StreamInfo(NamedTuple):
    """A live stream: its sides and, per direction (A->B, B->A), bytes queued and flags."""
    id: Id
    sides: tuple
    queued: tuple
    flags: tuple


class Ring(NamedTuple):
    """One direction's ring now: capacity, queued bytes, flags, and whether its reader or
    writer waits (a hint: a waiter that gave up leaves its mark until the next wake)."""
    capacity: int
    queued: int
    flags: int
    reader_waits: bool
    writer_waits: bool
    reader_need: int
    writer_need: int


class StreamStats(NamedTuple):
    """This handle's counters since it was opened."""
    bytes_written: int
    bytes_read: int
    parks: int
    wakes: int
    doorbells: int


FIN, RESET, READER_GONE, CLOSE_WATCH = 1, 2, 4, 8
_SIDE_STATES = ("free", "claimed", "released", "dead")


class Streams(Table):
    """A streams table of a fleet (Fleet.streams). Thread-safe on a shared handle."""

    _what, _name, _spec = "streams table", "streams", _lib.StreamSpec

    def __init__(self, h, parent):
        super().__init__(h, parent)
        s = _lib.StreamSpec()
        check(_lib.orbit_streams_spec(h, byref(s)))
        self.buffer_bytes = s.buffer_bytes   # bytes one direction's ring holds

    @property
    def kind(self):
        """The table's segment kind."""
        return _lib.orbit_streams_kind(self._handle())

    @property
    def epoch(self):
        """The epoch every ticket minted now carries."""
        return _lib.orbit_streams_epoch(self._handle())

    def create(self):
        """A new stream in this node's lane: (Endpoint of side A, Ticket of side B). FullError."""
        ep, t = c_void_p(), _lib.Ticket()
        check(_lib.orbit_streams_create(self._handle(), byref(ep), byref(t)), STREAMS)
        return Endpoint(ep.value, self), Ticket._of(t)

    def open(self, ticket):
        """Hold the side a ticket (or its text) names: an Endpoint. ClaimedError when that side is
        or was held, StaleError when the stream ended or the epoch moved on."""
        t = _ticket(ticket, "Streams.open")
        ep = c_void_p()
        check(_lib.orbit_streams_open_ticket(self._handle(), byref(t), byref(ep)), STREAMS)
        return Endpoint(ep.value, self)

    def offer(self, ticket, to_node):
        """Offer the stream to node to_node: one of its threads in wait_offer takes it."""
        call = "Streams.offer"
        t = _ticket(ticket, call)
        check(_lib.orbit_streams_offer(self._handle(), byref(t), uint(to_node, 16, call, "to_node")), STREAMS)

    def take_offer(self):
        """The next offer made to this node (a side-B Ticket), or None when there is none."""
        t = _lib.Ticket()
        rc = _lib.orbit_streams_take_offer(self._handle(), byref(t))
        if rc == -_EAGAIN:
            return None
        check(rc, STREAMS)
        return Ticket._of(t)

    def wait_offer(self, timeout=None):
        """Wait for an offer to this node (GIL released); TimedOutError after timeout seconds."""
        call = "Streams.wait_offer"
        h, t = self._handle(), _lib.Ticket()
        wait(Deadline(timeout, call), lambda ms: _lib.orbit_streams_wait_offer(h, ms, byref(t)), STREAMS)
        return Ticket._of(t)

    async def wait_offer_async(self, timeout=None):
        """wait_offer for asyncio, over the readiness descriptor (see orbit.aio)."""
        from . import aio
        return await aio.wait_offer(self, timeout)

    def is_live(self, stream):
        """Whether the Id names a live stream now."""
        return _lib.orbit_streams_is_live(self._handle(), uint(stream, 64, "Streams.is_live", "id"))

    # ---- readiness ----

    def fileno(self):
        """The table's readiness descriptor: readable when an offer is made to this node, or
        something changed on an endpoint whose last try_* call found nothing to do.
        Edge-triggered: drain_readiness(), then retry. Made on first use (a change before
        that is not signalled: call fileno() before the try_* calls it is to report on), one
        per handle, closed with it."""
        if self._fd is None:
            self._fd = check(_lib.orbit_streams_readiness(self._handle()), STREAMS)
        return self._fd

    def drain_readiness(self):
        """Reset the readiness descriptor after it turned readable (then retry the try_* calls)."""
        check(_lib.orbit_readiness_drain(self.fileno()))

    # ---- inspection and recovery ----

    def list(self):
        """Every live stream (StreamInfo): who holds each side, bytes queued each way."""
        h = self._handle()
        return [StreamInfo(Id(s.id), tuple(StreamSide(_SIDE_STATES[x.state], x.node, x.incarnation) for x in s.side),
                           (s.dir[0].queued, s.dir[1].queued), (s.dir[0].flags, s.dir[1].flags))
                for s in fetch(lambda buf, n: _lib.orbit_streams_list(h, buf, n), _lib.StreamInfo)]

    def rings(self, stream):
        """Both directions of a live stream (A->B, B->A) as Ring snapshots."""
        out = (_lib.StreamRing * 2)()
        check(_lib.orbit_streams_rings(self._handle(), uint(stream, 64, "Streams.rings", "id"), out), STREAMS)
        return tuple(Ring(r.capacity, r.queued, r.flags, r.reader_waits, r.writer_waits, r.reader_need,
                          r.writer_need) for r in out)

    def owners(self):
        """Every (node, incarnation) holding a side of a live stream."""
        h = self._handle()
        return [(o.node, o.incarnation)
                for o in fetch(lambda buf, n: _lib.orbit_streams_owners(h, buf, n), _lib.Owner)]

    def stats(self):
        """This handle's counters since it was opened (StreamStats)."""
        s = _lib.StreamStats()
        _lib.orbit_streams_stats(self._handle(), byref(s))
        return StreamStats(s.bytes_written, s.bytes_read, s.parks, s.wakes, s.doorbells)

    def node_dead(self, node, incarnation):
        """A confirmed death, on this table only: every side that life held ends."""
        call = "Streams.node_dead"
        _lib.orbit_streams_node_dead(self._handle(), uint(node, 16, call, "node"),
                                     uint(incarnation, 64, call, "incarnation"))

    def supersede(self):
        """This process took over its node: end every side another life of the node held."""
        _lib.orbit_streams_supersede(self._handle())

    def reset_all(self):
        """A new epoch, every slot empty: a quiescent fleet's owner boot only."""
        _lib.orbit_streams_reset_all(self._handle())


def _writable_buffer(b, call):
    """(ctypes object over b's memory, length) for a writable, contiguous buffer."""
    try:
        mv = memoryview(b).cast("B")
    except TypeError:
        raise malformed(call, "%s is not a contiguous buffer" % type(b).__name__) from None
    if mv.readonly:
        raise malformed(call, "the buffer is read-only")
    n = len(mv)
    return (ctypes.c_char * n).from_buffer(mv) if n else None, n


def _readable_buffer(b, call):
    """(pointer argument, length) for bytes-like data to write."""
    if isinstance(b, bytes):
        return b, len(b)
    try:
        mv = memoryview(b).cast("B")
    except TypeError:
        raise malformed(call, "%s is not a bytes-like object" % type(b).__name__) from None
    n = len(mv)
    if mv.readonly:
        return bytes(mv), n
    return ((ctypes.c_char * n).from_buffer(mv) if n else None), n


class Endpoint(Handle, io.RawIOBase):
    """One side of a stream: read from it, write to it (an io.RawIOBase).

    Blocking calls take a timeout in seconds (None: the endpoint's timeout
    attribute, itself None = forever; 0: look once) and release the GIL.
    read returns b"" at a clean end (the peer finished and everything was
    read); a peer that reset or died raises ResetError, a reader that went
    away raises PeerGoneError on write. The try_* calls never block: they
    return None when there is nothing to do now (then the readiness
    descriptor, fileno(), tells when to retry).
    One reading thread and one writing thread may use an endpoint at once.
    """

    _what = "endpoint"

    def __init__(self, h, streams):
        Handle.__init__(self, h, streams)
        io.RawIOBase.__init__(self)
        self.timeout = None
        self._streams = streams

    def _release(self, h):
        _lib.orbit_endpoint_close(h)

    def close(self):
        """Close the side: an unfinished writer resets, the reader is gone, the side released."""
        Handle.close(self)

    @property
    def closed(self):
        """True once close() ran."""
        return self._h is None

    def __del__(self):
        Handle.__del__(self)

    @property
    def streams(self):
        """The Streams table it belongs to."""
        return self._streams

    @property
    def id(self):
        """The stream's Id."""
        return Id(_lib.orbit_endpoint_id(self._handle()))

    @property
    def side(self):
        """"a" or "b"."""
        return _SIDES[_lib.orbit_endpoint_side(self._handle())]

    def peer(self):
        """(node, incarnation) holding the other side, or None while nobody opened it yet."""
        o = _lib.Owner()
        rc = _lib.orbit_endpoint_peer(self._handle(), byref(o))
        if rc == -_EAGAIN:
            return None
        check(rc, STREAMS)
        return o.node, o.incarnation

    def fileno(self):
        """The streams table's readiness descriptor (shared by every endpoint of the table)."""
        return self._streams.fileno()

    def readable(self):
        """True: an endpoint reads (io.RawIOBase)."""
        return True

    def writable(self):
        """True: an endpoint writes (io.RawIOBase)."""
        return True

    def seekable(self):
        """False: a stream has no positions (io.RawIOBase)."""
        return False

    def _timeout(self, timeout):
        return self.timeout if timeout is None else timeout

    def _frame(self, size, call):
        """A frame size that fits the ring (as the C calls judge it, before memory is taken for it)."""
        n = uint(size, 63, call, "size")
        if n > self._streams.buffer_bytes:
            raise TooLargeError(errno.EMSGSIZE, "%s: a frame of %d bytes exceeds the ring (%d bytes)" %
                                (call, n, self._streams.buffer_bytes))
        return n

    # ---- reads ----

    def readinto(self, b, timeout=None):
        """Read up to len(b) bytes into b, waiting for the first; 0 at a clean end."""
        call = "Endpoint.readinto"
        buf, n = _writable_buffer(b, call)
        h = self._handle()
        return wait(Deadline(self._timeout(timeout), call),
                    lambda ms: _lib.orbit_endpoint_read(h, buf, n, ms), STREAMS)

    def read(self, size=-1, timeout=None):
        """Up to size bytes, waiting for the first (size -1: everything up to the clean end);
        b"" at a clean end."""
        if size is None or size < 0:
            return self.readall(timeout)
        call = "Endpoint.read"
        n = min(uint(size, 63, call, "size"), self._streams.buffer_bytes)   # a ring is all one read finds
        buf = ctypes.create_string_buffer(n)
        h = self._handle()
        got = wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_read(h, buf, n, ms),
                   STREAMS)
        return buf.raw[:got]

    def readall(self, timeout=None):
        """Everything up to the clean end (FIN); timeout bounds the whole call."""
        deadline = Deadline(self._timeout(timeout), "Endpoint.readall")
        parts, h = [], self._handle()
        chunk = ctypes.create_string_buffer(65536)
        while True:
            got = wait(deadline, lambda ms: _lib.orbit_endpoint_read(h, chunk, 65536, ms), STREAMS)
            if got == 0:
                return b"".join(parts)
            parts.append(chunk.raw[:got])

    def read_exact(self, size, timeout=None):
        """Exactly size bytes (a frame), waiting for all of them; TooLargeError above the ring,
        MalformedError when the peer finished before the frame was complete."""
        call = "Endpoint.read_exact"
        n = self._frame(size, call)
        buf = ctypes.create_string_buffer(n)
        h = self._handle()
        wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_read_exact(h, buf, n, ms),
             STREAMS)
        return buf.raw

    def try_read(self, size):
        """What is queued now, up to size bytes: bytes, b"" at a clean end, None when empty."""
        n = min(uint(size, 63, "Endpoint.try_read", "size"), self._streams.buffer_bytes)
        buf = ctypes.create_string_buffer(n)
        got = _lib.orbit_endpoint_try_read(self._handle(), buf, n)
        if got == -_EAGAIN:
            return None
        return buf.raw[:check(got, STREAMS)]

    def try_readinto(self, b):
        """try_read into b: the count, 0 at a clean end, None when empty."""
        buf, n = _writable_buffer(b, "Endpoint.try_readinto")
        got = _lib.orbit_endpoint_try_read(self._handle(), buf, n)
        return None if got == -_EAGAIN else check(got, STREAMS)

    # ---- writes ----

    def write(self, b, timeout=None):
        """Write what fits, waiting for room for at least one byte; returns the count."""
        call = "Endpoint.write"
        data, n = _readable_buffer(b, call)
        h = self._handle()
        return wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_write(h, data, n, ms),
                    STREAMS)

    def write_all(self, b, timeout=None):
        """Write every byte, waiting for room as needed; timeout bounds the whole call. On an
        error or timeout a prefix may already be written: the exception's written attribute
        says how much."""
        call = "Endpoint.write_all"
        data, n = _readable_buffer(b, call)
        deadline, h, done = Deadline(self._timeout(timeout), call), self._handle(), 0
        base = ctypes.cast(data, ctypes.c_void_p).value if n else 0
        while done < n:
            try:
                done += wait(deadline, lambda ms: _lib.orbit_endpoint_write(h, base + done, n - done, ms), STREAMS)
            except OSError as e:
                e.written = done
                raise
        return n

    sendall = write_all

    def write_exact(self, b, timeout=None):
        """Write all of b as one frame, or nothing: waits for room for the whole of it."""
        call = "Endpoint.write_exact"
        data, n = _readable_buffer(b, call)
        h = self._handle()
        wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_write_exact(h, data, n, ms),
             STREAMS)

    def try_write(self, b):
        """Write what fits now: the count, or None when the ring is full."""
        data, n = _readable_buffer(b, "Endpoint.try_write")
        got = _lib.orbit_endpoint_try_write(self._handle(), data, n)
        return None if got == -_EAGAIN else check(got, STREAMS)

    # ---- waits ----

    def wait_readable(self, timeout=None):
        """Wait until a read would make progress or the direction ended."""
        call = "Endpoint.wait_readable"
        h = self._handle()
        wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_wait_readable(h, ms), STREAMS)

    def wait_writable(self, timeout=None):
        """Wait until a write would make progress or the direction ended."""
        call = "Endpoint.wait_writable"
        h = self._handle()
        wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_wait_writable(h, ms), STREAMS)

    def wait_peer_closed(self, timeout=None):
        """Wait until the reader of this side's writes has gone (stopped, closed, reset, died)."""
        call = "Endpoint.wait_peer_closed"
        h = self._handle()
        wait(Deadline(self._timeout(timeout), call), lambda ms: _lib.orbit_endpoint_wait_peer_closed(h, ms),
             STREAMS)

    def peer_closed(self):
        """True if the reader of this side's writes has gone; a clean FIN is not departure."""
        return check(_lib.orbit_endpoint_peer_closed(self._handle()), STREAMS) == 1

    # ---- asyncio ----

    async def read_async(self, size, timeout=None):
        """read for asyncio: waits on the readiness descriptor, no thread (see orbit.aio)."""
        from . import aio
        return await aio.read(self, size, timeout)

    async def readinto_async(self, b, timeout=None):
        """readinto for asyncio."""
        from . import aio
        return await aio.readinto(self, b, timeout)

    async def write_async(self, b, timeout=None):
        """Write every byte of b, for asyncio (as write_all)."""
        from . import aio
        return await aio.write_all(self, b, timeout)

    async def wait_peer_closed_async(self, timeout=None):
        """wait_peer_closed for asyncio."""
        from . import aio
        return await aio.wait_peer_closed(self, timeout)

    # ---- ending ----

    def finish(self):
        """FIN on this side's direction (idempotent): the reader drains, then reads b""."""
        check(_lib.orbit_endpoint_finish(self._handle()), STREAMS)

    def reset(self):
        """RESET: the reader gets ResetError and queued bytes are dropped."""
        _lib.orbit_endpoint_reset(self._handle())

    def stop_reading(self):
        """This side reads no more: the peer's writes fail with PeerGoneError."""
        _lib.orbit_endpoint_stop_reading(self._handle())

    def rearm(self):
        """Side A, after side B closed: clear both directions so the same ticket opens again."""
        check(_lib.orbit_endpoint_rearm(self._handle()), STREAMS)

    def __repr__(self):
        if self.closed:
            return "<orbit.Endpoint closed>"
        return "<orbit.Endpoint %s side %s>" % (self.id, self.side)

