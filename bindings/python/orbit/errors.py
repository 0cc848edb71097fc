# SPDX-License-Identifier: MIT
"""orbit's errors: one class per ORBIT_E* code, all under orbit.Error.

A C call that fails returns a negated ORBIT_E* code (an errno value); the
binding raises the class named after it, carrying the code (``errno``), the
C name (``code_name``, "ORBIT_ESTALE") and the library's sentence
(``sentence``: orbit_last_error(), or orbit_strerror() when the call said
nothing more). Arguments the C types cannot hold (a negative count, a name
with a NUL byte) are refused before any call, with MalformedError, so a bad
argument changes nothing.

Where Python has a matching built-in exception the class derives from it
too: TimedOutError is a TimeoutError, MalformedError a ValueError and a
TypeError, WouldBlockError a BlockingIOError, ResetError a
ConnectionResetError, PeerGoneError a BrokenPipeError, NotOwnerError a
PermissionError, NotFoundError a FileNotFoundError. orbit.Error itself is an
OSError (the codes are errno values).

Admission refusals are not error codes but outcomes; Admission.claim raises
them as Deferred, Rejected and Skipped (all Refused, all orbit.Error) when
the caller asks for exceptions rather than results.
"""

import errno as _errno

from . import _lib


class Error(OSError):
    """Every error orbit raises: errno is the code, sentence the library's words."""

    code_name = None

    def __init__(self, code, sentence=""):
        super().__init__(code, sentence)
        self.sentence = sentence

    def __str__(self):
        name = self.code_name or _errno.errorcode.get(self.errno, str(self.errno))
        return "%s [%s]" % (self.sentence, name) if self.sentence else name


# One class per ORBIT_E* code, in the order of <orbit/error.h>; errno is the code.

class StaleError(Error):
    """The id or ticket names an ended slot, generation or epoch."""
    code_name, code = "ORBIT_ESTALE", _errno.ESTALE


class BusyError(Error):
    """No capacity left on that resource."""
    code_name, code = "ORBIT_EBUSY", _errno.EBUSY


class DrainingError(Error):
    """The resource is draining: no new leases (pool calls; ESHUTDOWN is ClosedError elsewhere)."""
    code_name, code = "ORBIT_EDRAINING", _errno.ESHUTDOWN


class NotOwnerError(Error, PermissionError):
    """Only the owner may do this (or an observer tried to create)."""
    code_name, code = "ORBIT_ENOTOWNER", _errno.EPERM


class NotReservedError(Error):
    """Not a live, unaccepted reservation, or not a live claim."""
    code_name, code = "ORBIT_ENOTRESERVED", _errno.ENOENT


class BudgetError(Error):
    """The key's creation budget is spent."""
    code_name, code = "ORBIT_EBUDGET", _errno.EDQUOT


class KeyFullError(Error):
    """Every key (or domain) slot is taken."""
    code_name, code = "ORBIT_EKEYFULL", _errno.ENOSPC


class FullError(Error):
    """This node's lane, the fleet or the claim table is full."""
    code_name, code = "ORBIT_EFULL", _errno.EMFILE


class PayloadFullError(Error):
    """The payload arena has no run that large."""
    code_name, code = "ORBIT_EPAYLOADFULL", _errno.ENOBUFS


class TooLargeError(Error):
    """A frame, chunk or text larger than the ring, lane or buffer."""
    code_name, code = "ORBIT_ETOOLARGE", _errno.EMSGSIZE


class MalformedError(Error, ValueError, TypeError):
    """Not an id, ticket or spec, or a bad argument; nothing was changed."""
    code_name, code = "ORBIT_EMALFORMED", _errno.EINVAL


class ClaimedError(Error):
    """That stream side or node is already held."""
    code_name, code = "ORBIT_ECLAIMED", _errno.EALREADY


class ClosedError(Error):
    """This write half was finished or reset (stream calls; ESHUTDOWN is DrainingError in the pool)."""
    code_name, code = "ORBIT_ECLOSED", _errno.ESHUTDOWN


class ResetError(Error, ConnectionResetError):
    """The peer reset the direction (or died)."""
    code_name, code = "ORBIT_ERESET", _errno.ECONNRESET


class PeerGoneError(Error, BrokenPipeError):
    """The peer's reader is gone."""
    code_name, code = "ORBIT_EPEERGONE", _errno.EPIPE


class WouldBlockError(Error, BlockingIOError):
    """The call would block; try again."""
    code_name, code = "ORBIT_EAGAIN", _errno.EAGAIN


class TimedOutError(Error, TimeoutError):
    """A timed call found nothing by its deadline."""
    code_name, code = "ORBIT_ETIMEDOUT", _errno.ETIMEDOUT


class GeometryError(Error):
    """The segment exists with another geometry, table type or version."""
    code_name, code = "ORBIT_EGEOMETRY", _errno.EPROTO


class CorruptError(Error):
    """A value in shared memory failed a bounds check (or a lock was held past its bound)."""
    code_name, code = "ORBIT_ECORRUPT", _errno.EBADMSG


class PoisonedError(Error):
    """The admission ledger is poisoned (fail-closed)."""
    code_name, code = "ORBIT_EPOISONED", _errno.ENOTRECOVERABLE


class ClosedAdmissionError(Error):
    """The admission ledger is shut down: no new claims."""
    code_name, code = "ORBIT_ECLOSEDADM", _errno.ECANCELED


class NotSupportedError(Error):
    """This kernel or build lacks the feature."""
    code_name, code = "ORBIT_ENOTSUP", _errno.EOPNOTSUPP


class ForkedError(Error):
    """The handle belongs to the parent process: join again in the forked child."""
    code_name, code = "ORBIT_EFORKED", _errno.ECHILD


# errno values the library passes through from the system (opening, permissions, memory).
class NotFoundError(Error, FileNotFoundError):
    """No such fleet or table (opening, observing, listing)."""
    code_name, code = "ENOENT", _errno.ENOENT


class AccessError(Error, PermissionError):
    """Permissions: the segment is not this user's or its group's, or no member could have made it."""
    code_name, code = "EACCES", _errno.EACCES


class OutOfMemoryError(Error):
    """No memory: no huge pages for a HUGETLB segment, or no memory for a lane."""
    code_name, code = "ENOMEM", _errno.ENOMEM


_CODES = [StaleError, BusyError, DrainingError, NotOwnerError, NotReservedError, BudgetError, KeyFullError,
          FullError, PayloadFullError, TooLargeError, MalformedError, ClaimedError, ClosedError, ResetError,
          PeerGoneError, WouldBlockError, TimedOutError, GeometryError, CorruptError, PoisonedError,
          ClosedAdmissionError, NotSupportedError, ForkedError]
_BY_CODE = {}
for _c in _CODES + [AccessError, OutOfMemoryError]:
    _BY_CODE.setdefault(_c.code, _c)   # ESHUTDOWN: DrainingError first; the families below say which

# What a shared value means in a call family: ESHUTDOWN is DRAINING in the pool, CLOSED in
# streams; ENOENT is "no such fleet or table" when opening, NOTRESERVED elsewhere.
POOL = {_errno.ESHUTDOWN: DrainingError}
STREAMS = {_errno.ESHUTDOWN: ClosedError}
OPENING = {_errno.ENOENT: NotFoundError}


class Refused(Error):
    """An admission claim that was not granted; result is the AdmitResult."""

    def __init__(self, result, sentence):
        super().__init__(0, sentence)
        self.result = result

    def __reduce__(self):
        return (type(self), (self.result, self.sentence))


class Deferred(Refused):
    """The claim did not fit before the deadline (DEFERRED): releases may make room."""
    code_name = "ORBIT_ADMIT_DEFERRED"


class Rejected(Refused):
    """The claim can never fit (REJECTED): a demand above a domain's capacity."""
    code_name = "ORBIT_ADMIT_REJECTED"


class Skipped(Refused):
    """A retained claim refused by the retention policy (SKIPPED): never wait for it."""
    code_name = "ORBIT_ADMIT_SKIPPED"


for _c in [Error, NotFoundError, Refused, Deferred, Rejected, Skipped] + _CODES + [AccessError, OutOfMemoryError]:
    _c.__module__ = "orbit"   # as the package exports them: orbit.StaleError in tracebacks


def error(code, family=None, sentence=None):
    """The exception for a negated return -code, with the sentence the library left."""
    cls = (family and family.get(code)) or _BY_CODE.get(code, Error)
    if sentence is None:
        sentence = _lib.text(_lib.orbit_last_error()) or _lib.text(_lib.orbit_strerror(code))
    return cls(code, sentence)


def check(rc, family=None):
    """rc if it is not negative; else raise the error it names."""
    if rc >= 0:
        return rc
    raise error(-rc, family)


def malformed(call, what):
    """A bad argument refused before any C call: MalformedError naming the call and the value."""
    return MalformedError(_errno.EINVAL, "%s: %s" % (call, what))


__all__ = ["Error", "Refused", "Deferred", "Rejected", "Skipped", "NotFoundError", "AccessError",
           "OutOfMemoryError"] + [c.__name__ for c in _CODES]
