# SPDX-License-Identifier: MIT
"""asyncio: orbit's waits as awaitables, with no thread per wait.

Each event loop gets one reactor, made on first use:

- Stream reads, writes and offers, and pool capacity, wait on the table's
  readiness descriptor (Streams.fileno(), Pool.fileno()) through
  loop.add_reader: the library signals it when something this process
  tried and found not ready changes. One descriptor per table handle serves
  every endpoint and key of that handle.
- Admission waits and deaths have no readiness descriptor: they wait in one
  io_uring per loop (orbit's prep calls fill FUTEX_WAIT entries on the
  ledger's change word and on the member's life), whose completions signal
  an eventfd the loop reads. Waits for the same thing share one entry.
  Where the kernel lacks io_uring futex operations (Linux < 6.7) or
  io_uring is refused (seccomp), they wait in the loop's default executor
  instead: one thread per ledger epoch or life waited on, not per waiter.

The methods ending in _async on Endpoint, Streams, Pool, Admission and Fleet
call these. Cancelling a waiting task leaves nothing armed: a shared entry
is cancelled when its last waiter goes. A table handle used here is closed
on the loop's thread (close() removes its descriptor from the loop).
"""

import asyncio
import ctypes
import errno
import itertools
import time
import weakref

from . import _lib
from ._util import SLICE_MS, Deadline, uint
from .admission import AdmitResult, Claim, Outcome
from .errors import STREAMS, TimedOutError, check, error, malformed
from .streams import _readable_buffer, _writable_buffer

_reactors = weakref.WeakKeyDictionary()


def reactor():
    """The running loop's reactor (made on first use)."""
    loop = asyncio.get_running_loop()
    r = _reactors.get(loop)
    if r is None:
        r = _reactors[loop] = _Reactor(loop)
    return r


class _Shared:
    """One armed wait that several futures share."""

    __slots__ = ("key", "futures", "token", "done", "abandoned")

    def __init__(self, key):
        self.key, self.futures, self.token, self.done, self.abandoned = key, set(), None, False, False


class _Reactor:
    def __init__(self, loop):
        self.loop = loop
        self.fds = {}            # readiness descriptor -> futures waiting for it
        self.ring = None         # the io_uring; False once it proved unavailable
        self.shared = {}         # key -> _Shared
        self.by_token = {}       # user_data -> _Shared
        self.tokens = itertools.count(1)

    # ---- readiness descriptors ----

    def wait_fd(self, owner):
        """A future resolved the next time owner's readiness descriptor turns readable."""
        fd = owner.fileno()
        waiters = self.fds.get(fd)
        if waiters is None:
            waiters = self.fds[fd] = set()
            self.loop.add_reader(fd, self._fd_ready, fd)
            if owner._reactors is None:
                owner._reactors = weakref.WeakSet()
            owner._reactors.add(self)
        fut = self.loop.create_future()
        waiters.add(fut)
        fut.add_done_callback(waiters.discard)
        return fut

    def _fd_ready(self, fd):
        rc = _lib.orbit_readiness_drain(fd)
        for fut in list(self.fds.get(fd, ())):
            if fut.done():
                continue
            if rc < 0:
                fut.set_exception(error(-rc))
            else:
                fut.set_result(None)

    def forget_fd(self, fd):
        """The handle owning fd closes: stop watching it; its waiters see the handle closed."""
        waiters = self.fds.pop(fd, None)
        if waiters is None:
            return
        self.loop.remove_reader(fd)
        for fut in list(waiters):
            if not fut.done():
                fut.set_exception(malformed("orbit.aio", "the table handle was closed while a task waited"))

    # ---- waits with no descriptor: the ring, or a thread where there is no ring ----

    def _the_ring(self):
        if self.ring is None:
            self.ring = False
            if _lib.orbit_uring_futex_supported():
                from ._uring import Ring
                try:
                    self.ring = Ring()
                    self.loop.add_reader(self.ring.fd, self._ring_ready)
                    weakref.finalize(self.loop, self.ring.close)
                except OSError:
                    self.ring = False   # io_uring refused (seccomp, io_uring_disabled): threads
        return self.ring

    def wait_prep(self, key, prep, blocking):
        """A future resolved when the shared word behind key moves: prep(sqe) is the orbit prep
        call (0 armed, 1 ready now, < 0 an error), blocking(ms) the same wait for a thread."""
        s = self.shared.get(key)
        if s is None:
            s = self.shared[key] = _Shared(key)
            self._arm(s, prep, blocking)
        fut = self.loop.create_future()
        s.futures.add(fut)
        fut.add_done_callback(lambda f, s=s: self._dropped(s, f))
        return fut

    def _arm(self, s, prep, blocking):
        ring = self._the_ring()
        if ring:
            token = next(self.tokens)
            rc = ring.prep(prep, token)
            if rc == 0:
                s.token = token
                self.by_token[token] = s
                return
            if rc != -errno.EOPNOTSUPP:
                self.loop.call_soon(self._wake, s, rc if rc < 0 else 0)
                return
            self.ring = False   # no futex ops in this kernel after all
        self.loop.run_in_executor(None, self._block, s, blocking).add_done_callback(
            lambda f, s=s: self._wake(s, f.result() if not f.cancelled() and f.exception() is None else 0))

    @staticmethod
    def _block(s, blocking):
        while not s.abandoned:
            rc = blocking(SLICE_MS)
            if rc != -errno.ETIMEDOUT:
                return rc
        return 0

    def _ring_ready(self):
        for token, res in self.ring.reap():
            s = self.by_token.pop(token, None)
            if s is not None:
                self._wake(s, 0)   # woken, value moved (-EAGAIN) or anything else: the waiters look again

    def _wake(self, s, rc):
        if s.done:
            return
        s.done = True
        if self.shared.get(s.key) is s:
            del self.shared[s.key]
        for fut in list(s.futures):
            if not fut.done():
                if rc < 0:
                    fut.set_exception(error(-rc))
                else:
                    fut.set_result(None)

    def _dropped(self, s, fut):
        s.futures.discard(fut)
        if s.futures or s.done:
            return
        # The last waiter went (cancelled, timed out): nothing stays armed for it.
        s.done = s.abandoned = True
        if self.shared.get(s.key) is s:
            del self.shared[s.key]
        if s.token is not None and self.by_token.pop(s.token, None) is s and self.ring:
            self.ring.cancel(s.token)


async def _within(fut, deadline, call):
    """Await fut until the deadline; TimedOutError (and fut cancelled) after it."""
    if deadline.end is None:
        return await fut
    left = deadline.end - time.monotonic()
    if left <= 0:
        fut.cancel()
        raise TimedOutError(errno.ETIMEDOUT, "%s: timed out" % call)
    try:
        return await asyncio.wait_for(fut, left)
    except asyncio.TimeoutError:
        raise TimedOutError(errno.ETIMEDOUT, "%s: timed out" % call) from None


async def readiness(table, timeout=None):
    """Wait until a Streams or Pool handle's readiness descriptor turns readable, and drain it.
    The building block of the waits below: try, find nothing to do, then await this."""
    deadline = Deadline(timeout, "aio.readiness")
    await _within(reactor().wait_fd(table), deadline, "aio.readiness")


# ---- streams ----

async def readinto(ep, b, timeout=None):
    """Endpoint.readinto, awaiting the readiness descriptor instead of blocking."""
    call = "Endpoint.readinto_async"
    deadline, r = Deadline(ep._timeout(timeout), call), reactor()
    buf, n = _writable_buffer(b, call)
    ep.fileno()   # the descriptor exists before the first try, so no change goes unseen
    while True:
        got = _lib.orbit_endpoint_try_read(ep._handle(), buf, n)
        if got != -errno.EAGAIN:
            return check(got, STREAMS)
        await _within(r.wait_fd(ep.streams), deadline, call)


async def read(ep, size, timeout=None):
    """Endpoint.read for asyncio: up to size bytes once any are queued; b"" at a clean end."""
    buf = bytearray(uint(size, 63, "Endpoint.read_async", "size"))
    got = await readinto(ep, buf, timeout)
    return bytes(buf[:got])


async def write_all(ep, b, timeout=None):
    """Every byte of b, writing what fits and awaiting room; returns len(b)."""
    call = "Endpoint.write_async"
    deadline, r = Deadline(ep._timeout(timeout), call), reactor()
    data, n = _readable_buffer(b, call)
    base = ctypes.cast(data, ctypes.c_void_p).value if n else 0
    ep.fileno()
    done = 0
    while done < n:
        got = _lib.orbit_endpoint_try_write(ep._handle(), base + done, n - done)
        if got == -errno.EAGAIN:
            await _within(r.wait_fd(ep.streams), deadline, call)
            continue
        done += check(got, STREAMS)
    return n


async def wait_peer_closed(ep, timeout=None):
    """Until the reader of ep's writes has gone (stopped, closed, reset, died): a writer that
    finished waits for it before closing, so the reader drains every byte first."""
    call = "Endpoint.wait_peer_closed_async"
    deadline, r = Deadline(ep._timeout(timeout), call), reactor()
    ep.fileno()
    while not ep.peer_closed():   # 0 also asks for the doorbell on the reader's departure
        await _within(r.wait_fd(ep.streams), deadline, call)


async def wait_offer(streams, timeout=None):
    """The next offer to this node (a Ticket), awaiting the readiness descriptor."""
    call = "Streams.wait_offer_async"
    deadline, r = Deadline(timeout, call), reactor()
    streams.fileno()
    while True:
        t = streams.take_offer()
        if t is not None:
            return t
        await _within(r.wait_fd(streams), deadline, call)


# ---- pool ----

async def reserve_wait(pool, key, timeout=None, policy="local_first"):
    """Pool.reserve_wait for asyncio: watch the key from the version the plan read, await the
    pool's readiness descriptor, try again."""
    call = "Pool.reserve_wait_async"
    deadline, r = Deadline(timeout, call), reactor()
    pool.fileno()
    while True:
        plan = pool.acquire(key, max_live=0, policy=policy)
        if plan.lease is not None:
            return plan.lease
        pool.watch(key, since=plan.version)   # rings at once if the key moved past the version
        await _within(r.wait_fd(pool), deadline, call)


# ---- admission and deaths: the ring ----

async def claim(adm, demand, timeout=None):
    """Admission.claim for asyncio: DEFERRED awaits the ledger's change epoch in the ring."""
    call = "Admission.claim_async"
    deadline, r = Deadline(timeout, call), reactor()
    while True:
        h = adm._handle()
        res = adm._try(demand)
        if res.outcome == Outcome.CLAIMED:
            return Claim._of(adm, res)
        if res.outcome != Outcome.DEFERRED:
            raise AdmitResult(adm, res).refusal()
        since = res.release_epoch
        fut = r.wait_prep(("admission", h, since),
                          lambda sqe: _lib.orbit_admission_prep_wait(h, since, sqe),
                          lambda ms: _lib.orbit_admission_wait(h, since, ms, None))
        try:
            await _within(fut, deadline, call)
        except TimedOutError:
            raise AdmitResult(adm, res).refusal() from None


async def wait_node_death(fleet, node, incarnation, timeout=None):
    """Fleet.wait_node_death for asyncio: the member's life waited on in the ring."""
    call = "Fleet.wait_node_death_async"
    node, inc = uint(node, 16, call, "node"), uint(incarnation, 64, call, "incarnation")
    deadline, r = Deadline(timeout, call), reactor()
    while True:
        h = fleet._handle()
        rc = _lib.orbit_fleet_wait_node_death(h, node, inc, 0)   # looks once, starts nothing
        if rc != -errno.ETIMEDOUT:
            check(rc)
            return
        fut = r.wait_prep(("death", h, node, inc),
                          lambda sqe: _lib.orbit_fleet_prep_wait_node_death(h, node, inc, sqe),
                          lambda ms: _lib.orbit_fleet_wait_node_death(h, node, inc, ms))
        await _within(fut, deadline, call)
