# SPDX-License-Identifier: MIT
"""The pool: resources one process owns and any process of the fleet may lease.

The owner registers a resource (an upstream connection, a worker slot) under
a Key with a capacity. Any member reads the candidates for the key, reserves
a unit (one compare-and-swap: a Lease, or BusyError), and brings the lease
to the owner; the owner accepts it (an Execution) and completing the
execution gives the unit back and wakes the key's waiters:

    lease = pool.reserve_wait(key, timeout=5)     # any member
    ... send bytes(lease) to the owner ...
    with pool.accept(Lease.from_bytes(data)):     # the owner
        ... the work ...                          # completes on exit

A member killed -9 gives back the unaccepted reservations it held and the
resources it owned when its death is reported (reap, or orbit-reaper).
"""

import ctypes
import errno
from ctypes import byref, c_uint32
from typing import NamedTuple, Optional

from . import _lib
from ._util import Deadline, Table, cstr, fetch, text_of, uint, wait
from .errors import POOL, NotSupportedError, check, malformed
from .fleet import Id

POLICIES = ("local_first", "local_only", "least_loaded")


class Key(NamedTuple):
    """A pool key: a 128-bit digest of what a resource is good for.

    Key.from_string("upstream:10.0.0.7:80") (or from_bytes) is the library's
    digest (orbit_key_from_string: XXH3-128), the key a C or Rust member
    derives from the same bytes. Key.from_digest(16 bytes) takes a digest of
    your own (lo is the first 8 bytes, little-endian), Key(lo, hi) the two
    halves. str() is the library's text form, "key:" + 32 hex digits.
    """
    lo: int
    hi: int

    @classmethod
    def from_bytes(cls, data):
        """The library's key of these bytes (orbit_key_from_bytes), the same in every process
        and language. NotSupportedError from a liborbit older than that call."""
        data = bytes(data)
        return cls._of(_key_call("orbit_key_from_bytes", "Key.from_bytes")(data, len(data)))

    @classmethod
    def from_string(cls, text):
        """The library's key of a string's UTF-8 bytes (orbit_key_from_string)."""
        raw = cstr(text, "Key.from_string", "text")
        return cls._of(_key_call("orbit_key_from_string", "Key.from_string")(raw))

    @classmethod
    def from_digest(cls, data):
        """A key from exactly 16 bytes of your own digest: lo the first 8 (little-endian), hi
        the last 8 (digest() gives them back)."""
        data = bytes(data)
        if len(data) != 16:
            raise malformed("Key.from_digest", "%d bytes, not 16" % len(data))
        return cls(int.from_bytes(data[:8], "little"), int.from_bytes(data[8:], "little"))

    def digest(self):
        """The 16 bytes from_digest reads."""
        return self.lo.to_bytes(8, "little") + self.hi.to_bytes(8, "little")

    @classmethod
    def _of(cls, k):
        return cls(k.lo, k.hi)

    def __str__(self):
        return text_of(_lib.orbit_key_format, 40, _key(self, "Key"))


def _key_call(name, call):
    if not _lib.has(name):
        raise NotSupportedError(errno.EOPNOTSUPP, "%s: %s lacks %s (a newer liborbit has it)" %
                                (call, _lib.path, name))
    return getattr(_lib, name)


def _key(key, call):
    if not isinstance(key, Key):
        raise malformed(call, "key %r is not an orbit.Key" % (key,))
    return _lib.Key(uint(key.lo, 64, call, "key.lo"), uint(key.hi, 64, call, "key.hi"))


class Candidate(NamedTuple):
    """A resource usable for a key, as the fleet sees it now (a snapshot, never a reservation)."""
    id: Id
    owner: int
    owner_incarnation: int
    local: bool
    state: str          # "live" or "draining"
    capacity: int
    reserved: int
    active: int
    last_reserve_ms: int


class Lease:
    """Reserved capacity on one resource: plain data the holder hands to the owner.

    bytes(lease) is the C struct orbit_lease, so a C owner reads it as it
    is; Lease.from_bytes reads one back (pickling does the same).
    """

    __slots__ = ("_s",)
    SIZE = ctypes.sizeof(_lib.Lease)   # len(bytes(lease))

    def __init__(self, struct):
        self._s = struct

    id = property(lambda self: Id(self._s.id), doc="The resource's id.")
    fence = property(lambda self: self._s.fence, doc="Strictly increasing per resource slot.")
    holder = property(lambda self: self._s.holder, doc="The reserver's node.")
    holder_incarnation = property(lambda self: self._s.holder_incarnation, doc="The reserver's incarnation.")
    epoch = property(lambda self: self._s.epoch, doc="The pool epoch it was taken in.")

    def __bytes__(self):
        return bytes(self._s)

    @classmethod
    def from_bytes(cls, data):
        """A lease from the bytes of a C struct orbit_lease (bytes(lease))."""
        data = bytes(data)
        if len(data) != cls.SIZE:
            raise malformed("Lease.from_bytes", "%d bytes, not %d" % (len(data), cls.SIZE))
        return cls(_lib.Lease.from_buffer_copy(data))

    def __reduce__(self):
        return (Lease.from_bytes, (bytes(self),))

    def _fields(self):
        s = self._s
        return (s.id, s.fence, s.holder, s.holder_incarnation, s.epoch)

    def __eq__(self, other):
        return isinstance(other, Lease) and self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        return "Lease(id=%s, fence=%d, holder=%d)" % (self.id, self.fence, self.holder)


class _Guard:
    """A unit held until its end call (idempotent); a context manager that ends it."""

    __slots__ = ("_s", "_pool")

    def __init__(self, pool, struct):
        self._pool, self._s = pool, struct

    @property
    def done(self):
        """True once ended."""
        return self._s.done

    def _end(self, end):
        self._pool._handle()   # the struct points into the pool handle: not after it closed
        end(byref(self._s))

    def __enter__(self):
        return self


class Execution(_Guard):
    """The owner's guard over one accepted lease: complete() gives the unit back (idempotent).

    A context manager: leaving the with block completes it.
    """

    __slots__ = ()

    @property
    def lease(self):
        """The lease it accepted."""
        return Lease(_lib.Lease.from_buffer_copy(self._s.lease))

    def complete(self):
        """Give the unit back and wake the key's waiters. Idempotent."""
        self._end(_lib.orbit_execution_complete)

    def __exit__(self, *exc):
        self.complete()


class Permit(_Guard):
    """One unit of a key's creation budget (claim_create): finish() gives it back (idempotent).

    Finish it once the resource is registered (or creating failed): a context manager.
    """

    __slots__ = ()

    def finish(self):
        """Give the budget unit back. Idempotent."""
        self._end(_lib.orbit_permit_finish)

    def __exit__(self, *exc):
        self.finish()


class Plan(NamedTuple):
    """One acquire decision: kind is "local_reuse" or "remote_reuse" (lease holds a
    reservation), "create" (permit holds a creation unit: create, register, finish), "wait"
    (wait past version: wait_capacity) or "reject" (reason)."""
    kind: str
    lease: Optional[Lease]
    permit: Optional[Permit]
    version: int
    reason: int


_PLANS = ("local_reuse", "remote_reuse", "create", "wait", "reject")


class LeaseInfo(NamedTuple):
    """A unit a resource has given out: a reservation ("pending") or an accepted lease ("active")."""
    fence: int
    state: str
    node: Optional[int]
    incarnation: int
    reserved_ms: int


class KeyInfo(NamedTuple):
    """One live key: its resources' counts, holders, change count and watchers."""
    key: Key
    index: int
    live: int
    creating: int
    refs: int
    version: int
    watchers: int


class KeyNode(NamedTuple):
    """A node with a stake in a key: waits, creation permits, and whether it watches."""
    node: int
    waits: int
    creating: int
    watching: bool


class PoolStats(NamedTuple):
    """This handle's counters since it was opened."""
    parks: int
    wakes: int
    doorbells: int
    key_inserts: int
    key_reclaims: int
    key_sweeps: int


class Pool(Table):
    """A pool table of a fleet (Fleet.pool). Calls are thread-safe on a shared handle."""

    _what, _name, _spec = "pool", "pool", _lib.PoolSpec

    @property
    def kind(self):
        """The pool's segment kind."""
        return _lib.orbit_pool_kind(self._handle())

    @property
    def epoch(self):
        """The pool's epoch: leases of another epoch are stale."""
        return _lib.orbit_pool_epoch(self._handle())

    @property
    def spec(self):
        """(kind, key_capacity, lane_capacity, generation_limit) in effect."""
        s = _lib.PoolSpec()
        _lib.orbit_pool_spec_of(self._handle(), byref(s))
        return (s.kind, s.key_capacity, s.lane_capacity, s.generation_limit)

    # ---- owners ----

    def register(self, key, capacity=1):
        """Make a resource this node owns visible under key with capacity concurrent leases
        (1: exclusive); returns its Id. KeyFullError, FullError, NotOwnerError (observer)."""
        call = "Pool.register"
        out = _lib.orbit_id()
        check(_lib.orbit_pool_register(self._handle(), _key(key, call), uint(capacity, 32, call, "capacity"),
                                       byref(out)), POOL)
        return Id(out.value)

    def unregister(self, resource):
        """End a resource this node owns: its outstanding leases become stale."""
        check(_lib.orbit_pool_unregister(self._handle(), uint(resource, 64, "Pool.unregister", "id")), POOL)

    def drain(self, resource):
        """Refuse new leases on a resource this node owns (DrainingError); running work finishes."""
        check(_lib.orbit_pool_drain(self._handle(), uint(resource, 64, "Pool.drain", "id")), POOL)

    def reconcile(self, resource, active, grace=0.0):
        """The owner's truth: active units in use now; reservations older than grace seconds
        that nobody brought to the owner are aged out."""
        call = "Pool.reconcile"
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace >= 0:
            raise malformed(call, "grace %r is not a number of seconds >= 0" % (grace,))
        check(_lib.orbit_pool_reconcile(self._handle(), uint(resource, 64, call, "id"),
                                        uint(active, 32, call, "active"), int(grace * 1000)), POOL)

    def accept(self, lease):
        """Take a lease a caller brought (owner only): the unit moves from reserved to active,
        once per fence. Returns an Execution; complete it (or leave its with block).
        NotReservedError when accepted already, aged out or never reserved."""
        if not isinstance(lease, Lease):
            raise malformed("Pool.accept", "%r is not an orbit.Lease" % (lease,))
        ex = _lib.Execution()
        check(_lib.orbit_pool_accept(self._handle(), byref(lease._s), byref(ex)), POOL)
        return Execution(self, ex)

    # ---- users ----

    def candidates(self, key):
        """Every resource registered under key (Candidate), in table order."""
        h, k = self._handle(), _key(key, "Pool.candidates")
        return [Candidate(Id(c.id), c.owner, c.owner_incarnation, c.local, "draining" if c.state else "live",
                          c.capacity, c.reserved, c.active, c.last_reserve_ms)
                for c in fetch(lambda buf, n: _lib.orbit_pool_candidates(h, k, buf, n), _lib.Candidate)]

    def reserve(self, resource):
        """Reserve one unit of resource (an Id): a Lease, or BusyError (no free unit),
        StaleError (ended), DrainingError. Nothing waits: see reserve_wait."""
        out = _lib.Lease()
        check(_lib.orbit_pool_reserve(self._handle(), uint(resource, 64, "Pool.reserve", "id"), byref(out)), POOL)
        return Lease(out)

    def is_current(self, lease):
        """Whether the lease's resource is still live in its generation and epoch."""
        if not isinstance(lease, Lease):
            raise malformed("Pool.is_current", "%r is not an orbit.Lease" % (lease,))
        return _lib.orbit_pool_is_current(self._handle(), byref(lease._s))

    def acquire(self, key, *, max_live=1, attempts=4, policy="local_first"):
        """One decision for key (Plan): the policy picks a candidate and reserves it, or asks
        to create one within max_live live-or-creating resources fleet-wide, or to wait."""
        call = "Pool.acquire"
        if policy not in POLICIES:
            raise malformed(call, "policy %r is not one of %s" % (policy, ", ".join(POLICIES)))
        limits = _lib.Limits(uint(max_live, 32, call, "max_live"), uint(attempts, 32, call, "attempts"))
        plan = _lib.Plan()
        check(_lib.orbit_pool_acquire(self._handle(), _key(key, call), byref(limits), _lib.policy(policy),
                                      byref(plan)), POOL)
        kind = _PLANS[plan.kind]
        lease = Lease(_lib.Lease.from_buffer_copy(plan.lease)) if kind.endswith("reuse") else None
        permit = Permit(self, _lib.Permit.from_buffer_copy(plan.permit)) if kind == "create" else None
        return Plan(kind, lease, permit, plan.version, plan.reason)

    def reserve_wait(self, key, timeout=None, *, policy="local_first"):
        """A Lease on a resource registered under key, waiting (GIL released) until a unit is
        free: the policy picks the candidate (local first, least used). TimedOutError after
        timeout seconds. Creates nothing: register resources with register()."""
        call = "Pool.reserve_wait"
        deadline = Deadline(timeout, call)
        h, k = self._handle(), _key(key, call)
        while True:
            plan = self.acquire(key, max_live=0, policy=policy)
            if plan.lease is not None:
                return plan.lease
            now = c_uint32()
            wait(deadline, lambda ms: _lib.orbit_pool_wait_capacity(h, k, plan.version, ms, byref(now)), POOL)

    async def reserve_wait_async(self, key, timeout=None, *, policy="local_first"):
        """reserve_wait for asyncio, over the pool's readiness descriptor (see orbit.aio)."""
        from . import aio
        return await aio.reserve_wait(self, key, timeout, policy)

    def claim_create(self, key, max_live):
        """One unit of key's creation budget (live plus in-progress stay under max_live
        fleet-wide): a Permit to finish once the resource is registered. BudgetError."""
        call = "Pool.claim_create"
        out = _lib.Permit()
        check(_lib.orbit_pool_claim_create(self._handle(), _key(key, call), uint(max_live, 32, call, "max_live"),
                                           byref(out)), POOL)
        return Permit(self, out)

    def budget(self, key):
        """(live, creating): the key's live resources and creations in progress."""
        live, creating = c_uint32(), c_uint32()
        _lib.orbit_pool_budget(self._handle(), _key(key, "Pool.budget"), byref(live), byref(creating))
        return live.value, creating.value

    def version(self, key):
        """The key's change count, what wait_capacity waits past."""
        out = c_uint32()
        check(_lib.orbit_pool_version(self._handle(), _key(key, "Pool.version"), byref(out)), POOL)
        return out.value

    def wait_capacity(self, key, since, timeout=None):
        """Wait until the key's change count differs from since (a release, an unregister, a
        finished claim); returns the new count. A change may be spurious: re-check."""
        call = "Pool.wait_capacity"
        h, k, since = self._handle(), _key(key, call), uint(since, 32, call, "since")
        now = c_uint32()
        wait(Deadline(timeout, call), lambda ms: _lib.orbit_pool_wait_capacity(h, k, since, ms, byref(now)), POOL)
        return now.value

    # ---- readiness, for event loops ----

    def fileno(self):
        """The pool's readiness descriptor: readable when a watched key changed (watch).
        Edge-triggered: drain_readiness(), then retry. Made on first use, one per handle,
        closed with it."""
        if self._fd is None:
            self._fd = check(_lib.orbit_pool_readiness(self._handle()), POOL)
        return self._fd

    def watch(self, key, since=None):
        """Ring this node's doorbell (fileno() turns readable) on the key's next change;
        with since, at once if the key already moved past it. One-shot: re-arm before each wait.
        Makes the readiness descriptor first if there is none, so the ring is not missed."""
        call = "Pool.watch"
        self.fileno()
        if since is None:
            check(_lib.orbit_pool_watch(self._handle(), _key(key, call)), POOL)
        else:
            check(_lib.orbit_pool_watch_since(self._handle(), _key(key, call), uint(since, 32, call, "since")),
                  POOL)

    def drain_readiness(self):
        """Reset the readiness descriptor after it turned readable (then retry)."""
        check(_lib.orbit_readiness_drain(self.fileno()))

    # ---- inspection and recovery ----

    def leases(self, resource):
        """The reservations and accepted leases a resource has out (LeaseInfo): who holds what."""
        h, rid = self._handle(), uint(resource, 64, "Pool.leases", "id")
        return [LeaseInfo(i.fence, "pending" if i.state == 1 else "active",
                          None if i.node == _lib.NODE_NONE else i.node, i.incarnation, i.reserved_ms)
                for i in fetch(lambda buf, n: _lib.orbit_pool_leases(h, rid, buf, n), _lib.LeaseInfo)]

    def keys(self):
        """Every live key (KeyInfo), in table order."""
        h = self._handle()
        return [KeyInfo(Key(i.key.lo, i.key.hi), i.index, i.live, i.creating, i.refs, i.version, i.watchers)
                for i in fetch(lambda buf, n: _lib.orbit_pool_keys(h, buf, n), _lib.PoolKeyInfo)]

    def key_nodes(self, key):
        """Every node that waits on, creates for or watches key (KeyNode)."""
        h, k = self._handle(), _key(key, "Pool.key_nodes")
        return [KeyNode(i.node, i.waits, i.creating, i.watching)
                for i in fetch(lambda buf, n: _lib.orbit_pool_key_nodes(h, k, buf, n), _lib.PoolKeyNode)]

    def owners(self):
        """Every (node, incarnation) that owns a resource here."""
        h = self._handle()
        return [(o.node, o.incarnation) for o in fetch(lambda buf, n: _lib.orbit_pool_owners(h, buf, n), _lib.Owner)]

    def stats(self):
        """This handle's counters since it was opened (PoolStats)."""
        s = _lib.PoolStats()
        _lib.orbit_pool_stats(self._handle(), byref(s))
        return PoolStats(*(getattr(s, f) for f in PoolStats._fields))

    def node_dead(self, node, incarnation):
        """A confirmed death, on this table only (Fleet.node_dead does every table)."""
        call = "Pool.node_dead"
        _lib.orbit_pool_node_dead(self._handle(), uint(node, 16, call, "node"),
                                  uint(incarnation, 64, call, "incarnation"))

    def reset_all(self):
        """Empty the table and start a new epoch: a quiescent fleet's owner boot only."""
        _lib.orbit_pool_reset_all(self._handle())
