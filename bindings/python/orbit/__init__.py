# SPDX-License-Identifier: MIT
"""orbit: process fleets on one Linux host, from Python.

The worker processes of one server (a pre-fork web server, Celery workers,
an inference engine's processes) share, in shared memory and with no
server in between:

- a pool of leasable resources (Fleet.pool: register, candidates, reserve,
  accept, reserve_wait),
- an admission ledger of capacity domains with all-or-nothing claims
  (Fleet.admission: claim, try_claim),
- streams, bounded duplex byte rings between two processes
  (Fleet.streams: create, offer, wait_offer, open; Endpoint read/write),

and a member killed -9 leaks nothing: once its death is reported
(Fleet.reap, or orbit-reaper) its claims, reservations, resources and
stream sides come back. Fleet.wait_node_death learns of a death with no
reaper at all.

    import orbit
    UPSTREAM = 1
    with orbit.Fleet.join("web") as fleet, fleet.admission() as adm:
        adm.set_capacity(UPSTREAM, 64)           # the fleet's connection budget
        with adm.claim({UPSTREAM: 1}, timeout=2):
            ...                                  # at most 64 at once, fleet-wide

Every blocking call takes a timeout in seconds (None waits for as long as
it takes, 0 looks once), releases the GIL while it waits and raises
TimedOutError when the time is up. Errors are orbit.Error subclasses named
after the library's ORBIT_E* codes (StaleError, BusyError, ...), carrying
orbit_last_error()'s sentence. Handles are context managers; a handle
belongs to the process that made it (after fork, join again in the child).

For operators: orbit.fleets() lists the fleets on this host,
Fleet.observe(name) opens one without joining, nodes() shows each member's
state and holdings, and orbit.metrics() returns every counter and gauge
`orbitctl metrics` prints, with the same names and help texts.

asyncio: the *_async methods (Endpoint.read_async, Admission.claim_async,
Pool.reserve_wait_async, Streams.wait_offer_async,
Fleet.wait_node_death_async) wait through the event loop, with no thread
per wait (orbit.aio).

The library is liborbit.so.0 (Debian: liborbit0), found by the dynamic
loader, or at the path in ORBIT_LIBRARY. See docs/python.md.
"""

from . import _lib
from .admission import AdmitResult, Admission, Claim, ClaimInfo, Demand, Domain, LedgerInfo, Outcome, Waiting
from .errors import *  # noqa: F401,F403 - the exception classes
from .errors import __all__ as _error_names
from .fleet import (Counter, Counters, DeathCounters, Fleet, FleetSummary, Holdings, Id, Node, Segment, Table,
                    collect, counter_names, fleet_names, fleets, live_members, segments, unlink)
from .metrics import Family, Sample, exposition, metrics
from .pool import (Candidate, Execution, Key, KeyInfo, KeyNode, Lease, LeaseInfo, Permit, Plan, Pool,
                   PoolStats)
from .streams import Endpoint, Ring, StreamInfo, StreamSide, StreamStats, Streams, Ticket

__version__ = "0.1.0"

GENERATION_AUTO = 0
"""Fleet.join(generation=...): the newest generation of this library's layouts (the default)."""
GENERATION_NEW = 0xFFFFFFFF
"""Fleet.join(generation=...): a new generation beside the others."""


def library_version():
    """The version of the liborbit.so this process loaded ("MAJOR.MINOR.PATCH")."""
    return _lib.orbit_version_string().decode()


def library_path():
    """Where liborbit was loaded from (ORBIT_LIBRARY, the soname, or what find_library found)."""
    return _lib.path


def uring_futex_supported():
    """Whether io_uring futex operations work here (the asyncio waits without a descriptor use them)."""
    return bool(_lib.orbit_uring_futex_supported())


def uring_futex_status():
    """Why io_uring futex waits are or are not in use, as one sentence for logs
    (orbit_uring_futex_status; None from a liborbit that lacks it)."""
    return _lib.text(_lib.orbit_uring_futex_status()) if _lib.has("orbit_uring_futex_status") else None


def set_spin_ns(ns):
    """Spin budget before a wait parks in the kernel, process-wide (default 2000, 0 disables)."""
    from ._util import uint
    _lib.orbit_set_spin_ns(uint(ns, 32, "set_spin_ns", "ns"))


def spin_ns():
    """The spin budget in effect (ORBIT_SPIN_NS at first use, or set_spin_ns)."""
    return _lib.orbit_spin_ns()


__all__ = ["Fleet", "Pool", "Streams", "Endpoint", "Admission", "Key", "Id", "Lease", "Execution", "Permit",
           "Plan", "Ticket", "Claim", "Demand", "AdmitResult", "Outcome", "Node", "Holdings", "Table", "Segment",
           "FleetSummary", "Counter", "Counters", "DeathCounters", "Candidate", "KeyInfo", "KeyNode", "LeaseInfo",
           "PoolStats", "StreamInfo", "StreamSide", "StreamStats", "Ring", "Domain", "ClaimInfo", "LedgerInfo",
           "Waiting", "Family", "Sample", "fleets", "fleet_names", "segments", "live_members", "collect", "unlink",
           "counter_names", "metrics", "exposition", "library_version", "library_path", "uring_futex_supported",
           "uring_futex_status", "GENERATION_AUTO", "GENERATION_NEW",
           "set_spin_ns", "spin_ns"] + _error_names
