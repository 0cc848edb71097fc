# SPDX-License-Identifier: MIT
"""Admission: a fleet-wide ledger of capacity domains with all-or-nothing claims.

Domains are arbitrary 32-bit ids (upstream connections, bytes of a cache,
worker slots), each with a capacity set once by anyone
(Admission.set_capacity). A claim takes units from one or more domains at
once, or nothing:

    with adm.claim({UPSTREAM: 1, MEMORY: 4096}, timeout=2):   # exceptions
        ... use the budget ...                                # released on exit

    r = adm.try_claim({UPSTREAM: 1})                          # results
    if r.outcome is Outcome.CLAIMED:
        with r.claim: ...
    elif r.outcome is Outcome.DEFERRED: ...                   # try later

Outcomes: CLAIMED (units charged), DEFERRED (does not fit now: a release
may make room; the waits wait for one), REJECTED (can never fit: above a
domain's capacity), SKIPPED (a retained claim refused by the retention
policy). claim() raises Deferred (its timeout passed), Rejected or Skipped;
try_claim() returns the AdmitResult whatever the outcome. A member killed
-9 gives its claims back when its death is reported.
"""

import ctypes
import enum
import errno
from ctypes import byref, c_uint64
from typing import NamedTuple

from . import _lib
from ._util import Deadline, Table, fetch, timeout_ms, uint, wait
from .errors import Deferred, Rejected, Skipped, check, error, malformed

_ETIMEDOUT = errno.ETIMEDOUT
# The claim+release path: bound once, and without argtypes (_lib.bare): its arguments are
# ctypes objects already (the handle as a c_void_p, byref pointers), so ctypes converts nothing.
_AdmitResult = _lib.AdmitResult
_CLAIM_OFFSET = _lib.AdmitResult.claim.offset
_try_claim = _lib.bare("orbit_admission_try_claim", ctypes.c_int)
_release = _lib.bare("orbit_admission_release", ctypes.c_int)


class Outcome(enum.IntEnum):
    """What try_claim decided (enum orbit_admit)."""
    CLAIMED = 0
    DEFERRED = 1
    SKIPPED = 2
    REJECTED = 3


_SKIPS = ("none", "disabled", "capacity")


def _units(pairs, call, what):
    items = list(pairs.items() if isinstance(pairs, dict) else pairs)
    arr = (_lib.Units * len(items))()
    for i, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) != 2:
            raise malformed(call, "%s entry %r is not a (domain, units) pair" % (what, item))
        arr[i].domain = uint(item[0], 32, call, "domain")
        arr[i].units = uint(item[1], 64, call, "units")
    return arr, len(items)


class Demand:
    """A claim vector built once and claimed many times (a dict of units works as well).

    units: {domain: units} (or (domain, units) pairs), charged now, all or
    nothing; fit: units that must fit under each domain's capacity but are
    not charged; retained_bytes: 0 for an ordinary claim, else the claim's
    sum (a retained claim).
    """

    __slots__ = ("_c", "_ref", "_keep", "units", "fit", "retained_bytes")

    def __init__(self, units, fit=(), retained_bytes=0):
        call = "Demand"
        claim, n_claim = _units(units, call, "units")
        fit_arr, n_fit = _units(fit, call, "fit")
        self._keep = (claim, fit_arr)
        self._c = _lib.Demand(ctypes.cast(claim, ctypes.POINTER(_lib.Units)), n_claim,
                              ctypes.cast(fit_arr, ctypes.POINTER(_lib.Units)), n_fit,
                              uint(retained_bytes, 64, call, "retained_bytes"))
        self._ref = byref(self._c)
        self.units = dict(units) if isinstance(units, dict) else dict(list(units))
        self.fit = dict(fit) if isinstance(fit, dict) else dict(list(fit))
        self.retained_bytes = retained_bytes

    def __repr__(self):
        return "Demand(%r, fit=%r, retained_bytes=%d)" % (self.units, self.fit, self.retained_bytes)


class Claim:
    """A granted claim: units charged until release() (exactly once; a context manager).

    Plain data any process of the fleet may release: bytes(claim) is the C
    struct orbit_claim, Claim.from_bytes(admission, data) reads it back.
    """

    __slots__ = ("_adm", "_r", "_ref", "_done")
    SIZE = ctypes.sizeof(_lib.Claim)   # len(bytes(claim))

    def __init__(self, adm, r, ref):
        # r holds the claim (an AdmitResult, or a Claim struct); ref points at it for the calls.
        self._adm, self._r, self._ref, self._done = adm, r, ref, False

    @classmethod
    def _of(cls, adm, result):
        return cls(adm, result, byref(result, _CLAIM_OFFSET))

    @property
    def _s(self):
        r = self._r
        return r.claim if r.__class__ is _AdmitResult else r

    serial = property(lambda self: self._s.serial, doc="Never reused by this ledger.")
    node = property(lambda self: self._s.node, doc="The claimer's node.")
    incarnation = property(lambda self: self._s.incarnation, doc="The claimer's incarnation.")
    retained_bytes = property(lambda self: self._s.retained_bytes, doc="0 for an ordinary claim.")
    released = property(lambda self: self._s.released, doc="True once released (by this object).")

    def release(self):
        """Give the units back and wake deferred claimers. NotReservedError when the claim is
        not live any more (released before, or given back by a death report)."""
        adm = self._adm
        if adm._h is None:
            adm._handle()                # raises: the ledger handle is closed
        rc = _release(adm._hv, self._ref)
        if rc < 0:
            raise error(-rc)
        self._done = True

    def units(self):
        """{domain: units} the live claim charges."""
        adm = self._adm._handle()
        s = self._s
        got = fetch(lambda buf, n: _lib.orbit_admission_claim_units(adm, byref(s), buf, n), _lib.Units, 8)
        return {u.domain: u.units for u in got}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self._done:
            self.release()

    def __bytes__(self):
        return bytes(self._s)

    @classmethod
    def from_bytes(cls, admission, data):
        """A claim another process sent (bytes(claim)), to release through admission."""
        data = bytes(data)
        if len(data) != cls.SIZE:
            raise malformed("Claim.from_bytes", "%d bytes, not %d" % (len(data), cls.SIZE))
        if not isinstance(admission, Admission):
            raise malformed("Claim.from_bytes", "%r is not an orbit.Admission" % (admission,))
        s = _lib.Claim.from_buffer_copy(data)
        return cls(admission, s, byref(s))

    def __repr__(self):
        return "Claim(serial=%d, node=%d%s)" % (self.serial, self.node, ", released" if self.released else "")


class AdmitResult:
    """What try_claim decided: outcome (Outcome), claim (a Claim when CLAIMED, else None),
    release_epoch (the change epoch: DEFERRED waits past it), and for DEFERRED and REJECTED
    the first blocking domain with its free units and capacity. True when CLAIMED."""

    __slots__ = ("outcome", "claim", "release_epoch", "blocker_domain", "blocker_free", "blocker_maximum",
                 "skip", "retained_now", "retained_max")

    def __init__(self, adm, r):
        self.outcome = Outcome(r.outcome)
        self.claim = Claim._of(adm, r) if r.outcome == 0 else None
        self.release_epoch = r.release_epoch
        self.blocker_domain, self.blocker_free, self.blocker_maximum = (r.blocker_domain, r.blocker_free,
                                                                        r.blocker_maximum)
        self.skip = _SKIPS[r.skip] if 0 <= r.skip < len(_SKIPS) else r.skip
        self.retained_now, self.retained_max = r.retained_now, r.retained_max

    def __bool__(self):
        return self.outcome is Outcome.CLAIMED

    def __repr__(self):
        if self.claim is not None:
            return "AdmitResult(CLAIMED, %r)" % (self.claim,)
        return "AdmitResult(%s, domain %d free %d of %d)" % (self.outcome.name, self.blocker_domain,
                                                            self.blocker_free, self.blocker_maximum)

    def refusal(self):
        """The exception for this outcome (Deferred, Rejected, Skipped); None when CLAIMED."""
        if self.outcome is Outcome.CLAIMED:
            return None
        cls = {Outcome.DEFERRED: Deferred, Outcome.REJECTED: Rejected, Outcome.SKIPPED: Skipped}[self.outcome]
        if self.outcome is Outcome.SKIPPED:
            why = "retention %s (retained %d of %d bytes)" % (self.skip, self.retained_now, self.retained_max)
        else:
            why = "domain %d has %d free of %d" % (self.blocker_domain, self.blocker_free, self.blocker_maximum)
        return cls(self, "Admission.claim: %s: %s" % (self.outcome.name, why))


class Domain(NamedTuple):
    """One capacity domain: its capacity, units in use, and availability epoch."""
    domain: int
    capacity: int
    used: int
    availability_epoch: int

    @property
    def free(self):
        """Units free to claim now."""
        return max(0, self.capacity - self.used)


class ClaimInfo(NamedTuple):
    """A live claim, for tools: serial, node and incarnation of its claimer, units, domains."""
    serial: int
    node: int
    incarnation: int
    retained_bytes: int
    n_units: int


class LedgerInfo(NamedTuple):
    """The ledger's state: spec, counts, epochs, repairs, shutdown and poison."""
    kind: int
    max_domains: int
    max_claims: int
    retained_max_bytes: int
    n_domains: int
    live_claims: int
    next_serial: int
    retained_bytes: int
    change_epoch: int
    repairs: int
    shutdown: bool
    poisoned: bool
    poison_reason: str


class Waiting(NamedTuple):
    """Whether a claimer waits for a release: parked, and the epoch it wants (a hint)."""
    parked: bool
    epoch_wanted: int
    change_epoch: int


class Admission(Table):
    """The fleet's admission ledger (Fleet.admission). Thread-safe on a shared handle."""

    _what, _name, _spec = "admission ledger", "admission", _lib.AdmissionSpec

    def __init__(self, h, parent):
        super().__init__(h, parent)
        self._hv = ctypes.c_void_p(h)   # the handle as the claim path passes it
        self._demands = {}

    def set_capacity(self, domain, capacity):
        """Create a domain with that capacity, or change it (growing it wakes deferred
        claimers). BusyError below the units in use, KeyFullError past max_domains."""
        call = "Admission.set_capacity"
        check(_lib.orbit_admission_set_capacity(self._handle(), uint(domain, 32, call, "domain"),
                                                uint(capacity, 64, call, "capacity")))

    def _demand(self, units, fit, retained_bytes):
        """The Demand for these units, built once per distinct vector (a few hundred kept).
        Only vectors of exact ints share an entry: 1.0 == 1, but only Demand may judge 1.0."""
        try:
            pairs = tuple(units.items()) if units.__class__ is dict else tuple(units)
            fits = (tuple(fit.items()) if fit.__class__ is dict else tuple(fit)) if fit else ()
            exact = retained_bytes.__class__ is int
            for p in pairs + fits if fits else pairs:
                if p.__class__ is not tuple or len(p) != 2 or p[0].__class__ is not int \
                        or p[1].__class__ is not int:
                    exact = False
                    break
            key = (pairs, fits, retained_bytes)
            d = self._demands.get(key) if exact else None
        except TypeError:            # unhashable: not a vector of ints; Demand names what is wrong
            return Demand(units, fit, retained_bytes)
        if d is None:
            d = Demand(units, fit, retained_bytes)
            if exact:
                if len(self._demands) >= 256:
                    self._demands.clear()
                self._demands[key] = d
        return d

    def _try(self, demand):
        r = _AdmitResult()
        rc = _try_claim(self._hv, demand._ref, byref(r))
        if rc < 0:
            raise error(-rc)
        return r

    @staticmethod
    def _check_timeout(timeout, call):
        if timeout is not None and (timeout.__class__ not in (int, float) or not timeout >= 0):
            timeout_ms(timeout, call)        # raises: refused before anything is claimed

    def _until(self, demand, timeout, call, r=None):
        """try_claim until CLAIMED or anything but DEFERRED, waiting for releases up to timeout
        (r: the first try's result, when the caller made it)."""
        if r is None:
            self._check_timeout(timeout, call)
            if self._h is None:
                self._handle()               # raises: closed
            r = self._try(demand)
        if r.outcome != 1 or timeout == 0:
            return r
        deadline = Deadline(timeout, call)
        while r.outcome == 1:
            rc = _lib.orbit_admission_wait(self._handle(), r.release_epoch, deadline.slice_ms(), None)
            if rc == -_ETIMEDOUT and not deadline.again(rc):
                return r          # still DEFERRED at the deadline
            if rc != -_ETIMEDOUT:
                check(rc)
            r = self._try(demand)
        return r

    def try_claim(self, units, *, fit=(), retained_bytes=0, timeout=0):
        """Claim units ({domain: units} or a Demand) and return the AdmitResult, whatever the
        outcome: results, not exceptions. With a timeout, DEFERRED waits for releases (GIL
        released) and tries again until then. MalformedError (an unknown or repeated domain,
        0 units), PoisonedError, ClosedAdmissionError, FullError."""
        d = units if units.__class__ is Demand else self._demand(units, fit, retained_bytes)
        return AdmitResult(self, self._until(d, timeout, "Admission.try_claim"))

    def claim(self, units, *, fit=(), retained_bytes=0, timeout=None):
        """Claim units ({domain: units} or a Demand), waiting through DEFERRED for releases up
        to timeout seconds (None: for as long as it takes; 0: one try). Returns a Claim (a
        context manager that releases); raises Deferred (the timeout passed), Rejected (it can
        never fit) or Skipped: exceptions, not results."""
        d = units if units.__class__ is Demand else self._demand(units, fit, retained_bytes)
        if timeout is not None:
            self._check_timeout(timeout, "Admission.claim")
        if self._h is None:
            self._handle()                   # raises: closed
        # The first try inline: a claim that fits takes no deadline, no wait, no other frame.
        r = _AdmitResult()
        rc = _try_claim(self._hv, d._ref, byref(r))
        if rc < 0:
            raise error(-rc)
        if r.outcome == 0:
            return Claim(self, r, byref(r, _CLAIM_OFFSET))
        r = self._until(d, timeout, "Admission.claim", r)
        if r.outcome == 0:
            return Claim._of(self, r)
        raise AdmitResult(self, r).refusal()

    async def claim_async(self, units, *, fit=(), retained_bytes=0, timeout=None):
        """claim for asyncio: DEFERRED waits in the event loop's ring, no thread (see orbit.aio)."""
        from . import aio
        d = units if units.__class__ is Demand else self._demand(units, fit, retained_bytes)
        return await aio.claim(self, d, timeout)

    def release(self, claim):
        """Release a claim (same as claim.release())."""
        if not isinstance(claim, Claim):
            raise malformed("Admission.release", "%r is not an orbit.Claim" % (claim,))
        claim.release()

    def wait(self, since_epoch, timeout=None):
        """Wait until the change epoch passes since_epoch (a release, a death's release,
        capacity growth); returns the epoch now. TimedOutError."""
        call = "Admission.wait"
        h, since, now = self._handle(), uint(since_epoch, 64, call, "since_epoch"), c_uint64()
        wait(Deadline(timeout, call), lambda ms: _lib.orbit_admission_wait(h, since, ms, byref(now)))
        return now.value

    def shutdown(self):
        """No new claims (ClosedAdmissionError); outstanding ones stay valid. Idempotent."""
        check(_lib.orbit_admission_shutdown(self._handle()))

    @property
    def epoch(self):
        """The change epoch now (AdmitResult.release_epoch)."""
        return _lib.orbit_admission_epoch(self._handle())

    @property
    def poisoned(self):
        """True when the ledger is fail-closed."""
        return _lib.orbit_admission_poisoned(self._handle())

    @property
    def retained_bytes(self):
        """Bytes held by live retained claims."""
        return _lib.orbit_admission_retained_bytes(self._handle())

    def domains(self):
        """Every domain (Domain), in set-up order."""
        h = self._handle()
        return [Domain(d.domain, d.capacity, d.used, d.availability_epoch)
                for d in fetch(lambda buf, n: _lib.orbit_admission_domains(h, buf, n), _lib.DomainInfo)]

    def claims(self):
        """Every live claim (ClaimInfo), in slot order: who holds what."""
        h = self._handle()
        return [ClaimInfo(c.claim.serial, c.claim.node, c.claim.incarnation, c.claim.retained_bytes, c.n_units)
                for c in fetch(lambda buf, n: _lib.orbit_admission_claims(h, buf, n), _lib.ClaimInfo, 64)]

    def info(self):
        """The ledger's state (LedgerInfo)."""
        i = _lib.AdmissionInfo()
        check(_lib.orbit_admission_info(self._handle(), byref(i)))
        s = i.spec
        return LedgerInfo(s.kind, s.max_domains, s.max_claims, s.retained_max_bytes, i.n_domains, i.live_claims,
                          i.next_serial, i.retained_bytes, i.change_epoch, i.repairs, i.shutdown, i.poisoned,
                          _lib.text(i.poison_reason) or "")

    def waiting(self):
        """Whether a claimer waits for a release (Waiting; a racy snapshot)."""
        w = _lib.AdmissionWaiting()
        check(_lib.orbit_admission_waiting(self._handle(), byref(w)))
        return Waiting(w.parked, w.epoch_wanted, w.change_epoch)

    def stats(self):
        """This handle's (parks, wakes) since it was opened."""
        s = _lib.AdmissionStats()
        _lib.orbit_admission_stats(self._handle(), byref(s))
        return s.parks, s.wakes

    def node_dead(self, node, incarnation):
        """Release every claim of that node AND incarnation (this table only)."""
        call = "Admission.node_dead"
        _lib.orbit_admission_node_dead(self._handle(), uint(node, 16, call, "node"),
                                       uint(incarnation, 64, call, "incarnation"))

    def reset_all(self):
        """Release every live claim and start a new epoch: a quiescent fleet's owner boot only."""
        check(_lib.orbit_admission_reset_all(self._handle()))
