# SPDX-License-Identifier: MIT
"""liborbit through ctypes: loading the library, its structures, its calls.

Private to the package: the public modules wrap everything here. Every call
is made through ctypes.CDLL, which releases the GIL for the whole foreign
call, so a thread blocked in an orbit wait never stops the others.

The library is found as a user who installed it would find it:
ORBIT_LIBRARY (a path to liborbit.so.0) when set, else the soname through
the dynamic loader (its cache, LD_LIBRARY_PATH), else
ctypes.util.find_library("orbit").
"""

import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int32, c_int64, c_size_t,
                    c_ssize_t, c_uint, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

SONAME = "liborbit.so.0"


def _load():
    explicit = os.environ.get("ORBIT_LIBRARY")
    tried = []
    for name in [explicit] if explicit else [SONAME, None]:
        if name is None:   # the fallback runs ldconfig or the compiler: only when the soname failed
            name = ctypes.util.find_library("orbit")
            if not name:
                break
        try:
            return ctypes.CDLL(name, use_errno=True), name
        except OSError as e:
            tried.append(str(e))
    raise ImportError("orbit: cannot load liborbit (%s); install liborbit0, or set ORBIT_LIBRARY to the "
                      "path of liborbit.so.0" % "; ".join(tried))


lib, path = _load()

# ---- value types (lib/include/orbit/*.h) ---------------------------------

orbit_id = c_uint64
NODE_NONE = 0xffff
FLEET_NAME_MAX = 64
COUNTERS_MAX = 14
RECLAIM_BUCKETS = 12
TABLE_NAME_MAX = 15


class Struct(Structure):
    """A C struct; fields in declaration order, C alignment."""

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % (f[0], getattr(self, f[0])) for f in self._fields_))


class FleetOpts(Struct):
    _fields_ = [("capacity", c_uint16), ("node", c_int32), ("incarnation", c_uint64), ("backing", c_int),
                ("mode", c_uint32), ("gid", c_int64), ("generation", c_uint32), ("resv32", c_uint32),
                ("resv", c_uint64 * 3)]


class ObserveOpts(Struct):
    _fields_ = [("ready_wait_ms", c_int32), ("flags", c_uint32), ("resv", c_uint64 * 4)]


class NodeInfo(Struct):
    _fields_ = [("node", c_uint16), ("state", c_int), ("pid", c_int32), ("start_time", c_uint64),
                ("incarnation", c_uint64), ("alive", c_bool), ("pid_namespace", c_uint64),
                ("resv", c_uint64 * 1)]


class GenerationInfo(Struct):
    _fields_ = [("generation", c_uint32), ("name", c_char * 65), ("readable", c_bool), ("capacity", c_uint16),
                ("live_members", c_int32), ("library_version", c_uint32), ("layouts", c_uint32 * 8),
                ("backing", c_int), ("resv", c_uint64 * 4)]


class SegmentInfo(Struct):
    _fields_ = [("kind", c_uint8), ("backing", c_int), ("size", c_uint64), ("epoch", c_uint64),
                ("path", c_char * 256), ("resident", c_uint64), ("resv", c_uint64 * 1)]


class TableInfo(Struct):
    _fields_ = [("kind", c_uint8), ("type", c_uint8), ("built", c_bool), ("name", c_char * (TABLE_NAME_MAX + 1)),
                ("epoch", c_uint64), ("resv", c_uint64 * 4)]


class Reclaim(Struct):
    _fields_ = [("tables", c_uint32), ("pool_resources", c_uint32), ("pool_units", c_uint64),
                ("pool_leases", c_uint64), ("pool_creating", c_uint64), ("stream_sides", c_uint32),
                ("stream_unread", c_uint64), ("admission_claims", c_uint32), ("admission_units", c_uint64),
                ("arena_chunks", c_uint32), ("arena_bytes", c_uint64), ("pool_reserved", c_uint64),
                ("resv", c_uint64 * 5)]


class Counters(Struct):
    _fields_ = [("kind", c_uint8), ("node", c_uint16), ("slots", c_uint32), ("value", c_uint64 * COUNTERS_MAX),
                ("resv", c_uint64 * 4)]


class DeathCounters(Struct):
    _fields_ = [("deaths_reported", c_uint64), ("leaves", c_uint64), ("reclaim_ns_sum", c_uint64),
                ("reclaim_bound_ns", c_uint64 * RECLAIM_BUCKETS), ("reclaim_le", c_uint64 * RECLAIM_BUCKETS),
                ("resv", c_uint64 * 4)]


class Key(Struct):
    _fields_ = [("lo", c_uint64), ("hi", c_uint64)]


class PoolSpec(Struct):
    _fields_ = [("kind", c_uint8), ("key_capacity", c_uint32), ("lane_capacity", c_uint32),
                ("generation_limit", c_uint32), ("resv", c_uint64 * 4)]


class Candidate(Struct):
    _fields_ = [("id", orbit_id), ("owner", c_uint16), ("owner_incarnation", c_uint64), ("local", c_bool),
                ("state", c_int), ("capacity", c_uint32), ("reserved", c_uint32), ("active", c_uint32),
                ("last_reserve_ms", c_uint64)]


class Lease(Struct):
    _fields_ = [("id", orbit_id), ("fence", c_uint64), ("holder", c_uint16), ("holder_incarnation", c_uint64),
                ("epoch", c_uint64)]


class Execution(Struct):
    _fields_ = [("pool", c_void_p), ("lease", Lease), ("done", c_bool)]


class Permit(Struct):
    _fields_ = [("pool", c_void_p), ("key_index", c_uint32), ("done", c_bool)]


class Owner(Struct):
    _fields_ = [("node", c_uint16), ("incarnation", c_uint64)]


class Limits(Struct):
    _fields_ = [("max_live", c_uint32), ("attempts", c_uint32)]


class Policy(Struct):
    _fields_ = [("decide", c_void_p), ("ctx", c_void_p)]


class Plan(Struct):
    _fields_ = [("kind", c_int), ("lease", Lease), ("permit", Permit), ("version", c_uint32), ("reason", c_int)]


class PoolStats(Struct):
    _fields_ = [("parks", c_uint64), ("wakes", c_uint64), ("doorbells", c_uint64), ("key_inserts", c_uint64),
                ("key_reclaims", c_uint64), ("key_sweeps", c_uint64), ("resv", c_uint64 * 6)]


class PoolKeyInfo(Struct):
    _fields_ = [("key", Key), ("index", c_uint32), ("live", c_uint32), ("creating", c_uint32), ("refs", c_uint32),
                ("version", c_uint32), ("watchers", c_uint32), ("resv", c_uint64 * 2)]


class LeaseInfo(Struct):
    _fields_ = [("fence", c_uint64), ("state", c_int), ("node", c_uint16), ("incarnation", c_uint64),
                ("reserved_ms", c_uint64), ("resv", c_uint64 * 4)]


class PoolKeyNode(Struct):
    _fields_ = [("node", c_uint16), ("waits", c_uint32), ("creating", c_uint32), ("watching", c_bool),
                ("resv", c_uint64 * 2)]


class StreamSpec(Struct):
    _fields_ = [("kind", c_uint8), ("lane_capacity", c_uint32), ("buffer_bytes", c_uint32),
                ("generation_limit", c_uint32), ("resv", c_uint64 * 4)]


class Ticket(Struct):
    _fields_ = [("id", orbit_id), ("side", c_int), ("epoch", c_uint64)]


class StreamSide(Struct):
    _fields_ = [("state", c_int), ("node", c_uint16), ("incarnation", c_uint64)]


class StreamDir(Struct):
    _fields_ = [("queued", c_uint64), ("flags", c_uint32)]


class StreamInfo(Struct):
    _fields_ = [("id", orbit_id), ("side", StreamSide * 2), ("dir", StreamDir * 2), ("resv", c_uint64 * 2)]


class StreamRing(Struct):
    _fields_ = [("capacity", c_uint32), ("queued", c_uint32), ("flags", c_uint32), ("reader_waits", c_bool),
                ("writer_waits", c_bool), ("reader_need", c_uint32), ("writer_need", c_uint32),
                ("resv", c_uint64 * 2)]


class StreamStats(Struct):
    _fields_ = [("bytes_written", c_uint64), ("bytes_read", c_uint64), ("parks", c_uint64), ("wakes", c_uint64),
                ("doorbells", c_uint64), ("resv", c_uint64 * 6)]


class AdmissionSpec(Struct):
    _fields_ = [("kind", c_uint8), ("max_domains", c_uint32), ("max_claims", c_uint32),
                ("retained_max_bytes", c_uint64), ("resv", c_uint64 * 4)]


class Units(Struct):
    _fields_ = [("domain", c_uint32), ("units", c_uint64)]


class Demand(Struct):
    _fields_ = [("claim", POINTER(Units)), ("n_claim", c_size_t), ("fit", POINTER(Units)), ("n_fit", c_size_t),
                ("retained_bytes", c_uint64)]


class Claim(Struct):
    _fields_ = [("serial", c_uint64), ("node", c_uint16), ("retained_bytes", c_uint64), ("released", c_bool),
                ("slot", c_uint32), ("incarnation", c_uint64)]


class AdmitResult(Struct):
    _fields_ = [("outcome", c_int), ("claim", Claim), ("release_epoch", c_uint64), ("blocker_domain", c_uint32),
                ("blocker_free", c_uint64), ("blocker_maximum", c_uint64), ("skip", c_int),
                ("retained_now", c_uint64), ("retained_max", c_uint64)]


class DomainInfo(Struct):
    _fields_ = [("domain", c_uint32), ("capacity", c_uint64), ("used", c_uint64),
                ("availability_epoch", c_uint64), ("resv", c_uint64 * 2)]


class ClaimInfo(Struct):
    _fields_ = [("claim", Claim), ("n_units", c_uint32), ("resv", c_uint64 * 2)]


class AdmissionInfo(Struct):
    _fields_ = [("spec", AdmissionSpec), ("n_domains", c_uint32), ("live_claims", c_uint32),
                ("next_serial", c_uint64), ("retained_bytes", c_uint64), ("change_epoch", c_uint64),
                ("repairs", c_uint64), ("shutdown", c_bool), ("poisoned", c_bool), ("poison_reason", c_char_p),
                ("resv", c_uint64 * 4)]


class AdmissionStats(Struct):
    _fields_ = [("parks", c_uint64), ("wakes", c_uint64), ("resv", c_uint64 * 6)]


class AdmissionWaiting(Struct):
    _fields_ = [("parked", c_bool), ("epoch_wanted", c_uint64), ("change_epoch", c_uint64),
                ("resv", c_uint64 * 4)]


class ArenaSpec(Struct):
    _fields_ = [("kind", c_uint8), ("slot_bytes", c_uint32), ("slots_per_lane", c_uint32), ("resv", c_uint64 * 4)]


class ArenaLaneInfo(Struct):
    _fields_ = [("node", c_uint16), ("free", c_uint32), ("reserved", c_uint32), ("live", c_uint32),
                ("reading", c_uint32), ("reclaiming", c_uint32), ("chunks", c_uint32), ("resv", c_uint64 * 2)]


# Every struct above, by its C name: tests/test_abi.py compares each field's offset and each
# size with what the C compiler says (tests/c_helper.c layout).
STRUCTS = {
    "orbit_fleet_opts": FleetOpts, "orbit_observe_opts": ObserveOpts, "orbit_generation_info": GenerationInfo, "orbit_node_info": NodeInfo, "orbit_segment_info": SegmentInfo,
    "orbit_table_info": TableInfo, "orbit_reclaim": Reclaim, "orbit_counters": Counters,
    "orbit_death_counters": DeathCounters, "orbit_key": Key, "orbit_pool_spec": PoolSpec,
    "orbit_candidate": Candidate, "orbit_lease": Lease, "orbit_execution": Execution, "orbit_permit": Permit,
    "orbit_owner": Owner, "orbit_limits": Limits, "orbit_policy": Policy, "orbit_plan": Plan,
    "orbit_pool_stats": PoolStats, "orbit_pool_key_info": PoolKeyInfo, "orbit_lease_info": LeaseInfo,
    "orbit_pool_key_node": PoolKeyNode, "orbit_stream_spec": StreamSpec, "orbit_ticket": Ticket,
    "orbit_stream_info": StreamInfo, "orbit_stream_ring": StreamRing, "orbit_stream_stats": StreamStats,
    "orbit_admission_spec": AdmissionSpec, "orbit_units": Units, "orbit_demand": Demand, "orbit_claim": Claim,
    "orbit_admit_result": AdmitResult, "orbit_domain_info": DomainInfo, "orbit_claim_info": ClaimInfo,
    "orbit_admission_info": AdmissionInfo, "orbit_admission_stats": AdmissionStats,
    "orbit_admission_waiting": AdmissionWaiting, "orbit_arena_spec": ArenaSpec,
    "orbit_arena_lane_info": ArenaLaneInfo,
}

# ---- calls ----------------------------------------------------------------

_h = c_void_p            # an opaque handle
_hp = POINTER(c_void_p)  # where a call writes one


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


_SIGNATURES = {
    # error.h, version.h
    "orbit_strerror": (c_char_p, c_int),
    "orbit_last_error": (c_char_p,),
    "orbit_version_string": (c_char_p,),
    # fleet.h
    "orbit_id_format": (c_int, orbit_id, c_char_p, c_size_t),
    "orbit_id_parse": (c_int, c_char_p, POINTER(orbit_id)),
    "orbit_fleet_join": (c_int, c_char_p, POINTER(FleetOpts), _hp),
    "orbit_fleet_observe": (c_int, c_char_p, _hp),
    "orbit_fleet_observe_opts": (c_int, c_char_p, POINTER(ObserveOpts), _hp),
    "orbit_fleet_leave": (None, _h),
    "orbit_fleet_node": (c_uint16, _h),
    "orbit_fleet_incarnation": (c_uint64, _h),
    "orbit_fleet_capacity": (c_uint16, _h),
    "orbit_fleet_backing": (c_int, _h),
    "orbit_fleet_name": (c_char_p, _h),
    "orbit_fleet_reap": (c_int, _h),
    "orbit_fleet_wait_node_death": (c_int, _h, c_uint16, c_uint64, c_int),
    "orbit_fleet_prep_wait_node_death": (c_int, _h, c_uint16, c_uint64, c_void_p),
    "orbit_fleet_live_members": (c_ssize_t, c_char_p),
    "orbit_fleet_collect": (c_int, c_char_p),
    "orbit_fleet_unlink": (c_int, c_char_p),
    "orbit_fleet_nodes": (c_ssize_t, _h, POINTER(NodeInfo), c_size_t),
    "orbit_fleet_node_dead": (c_int, _h, c_uint16, c_uint64),
    "orbit_fleet_segments": (c_ssize_t, c_char_p, POINTER(SegmentInfo), c_size_t),
    "orbit_fleet_list": (c_ssize_t, c_void_p, c_size_t),
    "orbit_fleet_generations": (c_ssize_t, c_char_p, c_void_p, c_size_t),
    "orbit_backing_name": (c_char_p, c_int),
    "orbit_set_spin_ns": (None, c_uint32),
    "orbit_spin_ns": (c_uint32,),
    # inspect.h
    "orbit_fleet_tables": (c_ssize_t, _h, POINTER(TableInfo), c_size_t),
    "orbit_table_type_name": (c_char_p, c_uint),
    "orbit_fleet_account": (c_int, _h, c_uint16, c_uint64, POINTER(Reclaim)),
    "orbit_fleet_replaced": (c_int, _h),
    "orbit_fleet_counters": (c_int, _h, c_uint8, c_uint16, POINTER(Counters)),
    "orbit_counter_name": (c_char_p, c_uint, c_uint),
    "orbit_counter_help": (c_char_p, c_uint, c_uint),
    "orbit_fleet_death_counters": (c_int, _h, POINTER(DeathCounters)),
    # uring.h (no liburing needed for these)
    "orbit_uring_futex_supported": (c_bool,),
    "orbit_uring_futex_status": (c_char_p,),
    "orbit_readiness_drain": (c_int, c_int),
    # pool.h
    "orbit_pool_open": (c_int, _h, POINTER(PoolSpec), _hp),
    "orbit_pool_open_existing": (c_int, _h, c_uint8, _hp),
    "orbit_pool_close": (None, _h),
    "orbit_pool_register": (c_int, _h, Key, c_uint32, POINTER(orbit_id)),
    "orbit_pool_unregister": (c_int, _h, orbit_id),
    "orbit_pool_drain": (c_int, _h, orbit_id),
    "orbit_pool_reconcile": (c_int, _h, orbit_id, c_uint32, c_uint64),
    "orbit_pool_candidates": (c_ssize_t, _h, Key, POINTER(Candidate), c_size_t),
    "orbit_pool_reserve": (c_int, _h, orbit_id, POINTER(Lease)),
    "orbit_pool_accept": (c_int, _h, POINTER(Lease), POINTER(Execution)),
    "orbit_execution_complete": (None, POINTER(Execution)),
    "orbit_pool_is_current": (c_bool, _h, POINTER(Lease)),
    "orbit_pool_claim_create": (c_int, _h, Key, c_uint32, POINTER(Permit)),
    "orbit_permit_finish": (None, POINTER(Permit)),
    "orbit_pool_budget": (None, _h, Key, POINTER(c_uint32), POINTER(c_uint32)),
    "orbit_pool_version": (c_int, _h, Key, POINTER(c_uint32)),
    "orbit_pool_wait_capacity": (c_int, _h, Key, c_uint32, c_int, POINTER(c_uint32)),
    "orbit_pool_acquire": (c_int, _h, Key, POINTER(Limits), POINTER(Policy), POINTER(Plan)),
    "orbit_pool_owners": (c_ssize_t, _h, POINTER(Owner), c_size_t),
    "orbit_pool_node_dead": (None, _h, c_uint16, c_uint64),
    "orbit_pool_reset_all": (None, _h),
    "orbit_pool_epoch": (c_uint64, _h),
    "orbit_pool_watch": (c_int, _h, Key),
    "orbit_pool_watch_since": (c_int, _h, Key, c_uint32),
    "orbit_pool_readiness": (c_int, _h),
    "orbit_pool_kind": (c_uint8, _h),
    "orbit_pool_node": (c_uint16, _h),
    "orbit_pool_spec_of": (None, _h, POINTER(PoolSpec)),
    "orbit_pool_stats": (None, _h, POINTER(PoolStats)),
    "orbit_pool_keys": (c_ssize_t, _h, POINTER(PoolKeyInfo), c_size_t),
    "orbit_key_format": (c_int, Key, c_char_p, c_size_t),
    "orbit_key_from_bytes": (Key, c_char_p, c_size_t),
    "orbit_key_from_string": (Key, c_char_p),
    "orbit_pool_leases": (c_ssize_t, _h, orbit_id, POINTER(LeaseInfo), c_size_t),
    "orbit_pool_key_nodes": (c_ssize_t, _h, Key, POINTER(PoolKeyNode), c_size_t),
    # stream.h
    "orbit_ticket_format": (c_int, POINTER(Ticket), c_char_p, c_size_t),
    "orbit_ticket_parse": (c_int, c_char_p, POINTER(Ticket)),
    "orbit_streams_open": (c_int, _h, POINTER(StreamSpec), _hp),
    "orbit_streams_open_existing": (c_int, _h, c_uint8, _hp),
    "orbit_streams_close": (None, _h),
    "orbit_streams_epoch": (c_uint64, _h),
    "orbit_streams_create": (c_int, _h, _hp, POINTER(Ticket)),
    "orbit_streams_open_ticket": (c_int, _h, POINTER(Ticket), _hp),
    "orbit_streams_is_live": (c_bool, _h, orbit_id),
    "orbit_streams_offer": (c_int, _h, POINTER(Ticket), c_uint16),
    "orbit_streams_take_offer": (c_int, _h, POINTER(Ticket)),
    "orbit_streams_wait_offer": (c_int, _h, c_int, POINTER(Ticket)),
    "orbit_streams_owners": (c_ssize_t, _h, POINTER(Owner), c_size_t),
    "orbit_streams_node_dead": (None, _h, c_uint16, c_uint64),
    "orbit_streams_supersede": (None, _h),
    "orbit_streams_reset_all": (None, _h),
    "orbit_streams_readiness": (c_int, _h),
    "orbit_streams_stats": (None, _h, POINTER(StreamStats)),
    "orbit_streams_list": (c_ssize_t, _h, POINTER(StreamInfo), c_size_t),
    "orbit_streams_kind": (c_uint8, _h),
    "orbit_streams_spec": (c_int, _h, POINTER(StreamSpec)),
    "orbit_streams_rings": (c_int, _h, orbit_id, POINTER(StreamRing)),
    "orbit_endpoint_id": (orbit_id, _h),
    "orbit_endpoint_side": (c_int, _h),
    "orbit_endpoint_peer": (c_int, _h, POINTER(Owner)),
    "orbit_endpoint_try_read": (c_ssize_t, _h, c_void_p, c_size_t),
    "orbit_endpoint_try_read_exact": (c_int, _h, c_void_p, c_size_t),
    "orbit_endpoint_read": (c_ssize_t, _h, c_void_p, c_size_t, c_int),
    "orbit_endpoint_read_exact": (c_int, _h, c_void_p, c_size_t, c_int),
    "orbit_endpoint_try_write": (c_ssize_t, _h, c_void_p, c_size_t),
    "orbit_endpoint_try_write_exact": (c_int, _h, c_void_p, c_size_t),
    "orbit_endpoint_write": (c_ssize_t, _h, c_void_p, c_size_t, c_int),
    "orbit_endpoint_write_exact": (c_int, _h, c_void_p, c_size_t, c_int),
    "orbit_endpoint_wait_readable": (c_int, _h, c_int),
    "orbit_endpoint_wait_writable": (c_int, _h, c_int),
    "orbit_endpoint_finish": (c_int, _h),
    "orbit_endpoint_reset": (None, _h),
    "orbit_endpoint_stop_reading": (None, _h),
    "orbit_endpoint_rearm": (c_int, _h),
    "orbit_endpoint_close": (None, _h),
    "orbit_endpoint_peer_closed": (c_int, _h),
    "orbit_endpoint_wait_peer_closed": (c_int, _h, c_int),
    # admission.h
    "orbit_admission_open": (c_int, _h, POINTER(AdmissionSpec), _hp),
    "orbit_admission_open_existing": (c_int, _h, c_uint8, _hp),
    "orbit_admission_close": (None, _h),
    "orbit_admission_set_capacity": (c_int, _h, c_uint32, c_uint64),
    "orbit_admission_try_claim": (c_int, _h, POINTER(Demand), POINTER(AdmitResult)),
    "orbit_admission_release": (c_int, _h, POINTER(Claim)),
    "orbit_admission_wait": (c_int, _h, c_uint64, c_int, POINTER(c_uint64)),
    "orbit_admission_prep_wait": (c_int, _h, c_uint64, c_void_p),
    "orbit_admission_shutdown": (c_int, _h),
    "orbit_admission_node_dead": (None, _h, c_uint16, c_uint64),
    "orbit_admission_reset_all": (c_int, _h),
    "orbit_admission_retained_bytes": (c_uint64, _h),
    "orbit_admission_domains": (c_ssize_t, _h, POINTER(DomainInfo), c_size_t),
    "orbit_admission_poisoned": (c_bool, _h),
    "orbit_admission_epoch": (c_uint64, _h),
    "orbit_admission_claims": (c_ssize_t, _h, POINTER(ClaimInfo), c_size_t),
    "orbit_admission_claim_units": (c_ssize_t, _h, POINTER(Claim), POINTER(Units), c_size_t),
    "orbit_admission_info": (c_int, _h, POINTER(AdmissionInfo)),
    "orbit_admission_stats": (None, _h, POINTER(AdmissionStats)),
    "orbit_admission_waiting": (c_int, _h, POINTER(AdmissionWaiting)),
    # exchange.h: the arena, for its gauges
    "orbit_arena_open_existing": (c_int, _h, c_uint8, _hp),
    "orbit_arena_close": (None, _h),
    "orbit_arena_spec": (c_int, _h, POINTER(ArenaSpec)),
    "orbit_arena_lanes": (c_ssize_t, _h, POINTER(ArenaLaneInfo), c_size_t),
}

# Calls of tables a build may leave out (meson -Dwith_pool=false ...), and calls a liborbit.so.0
# of an earlier 0.x may lack (has() says; their wrappers raise NotSupportedError): absent, not
# an import error.
_OPTIONAL_PREFIXES = ("orbit_pool_", "orbit_execution_", "orbit_permit_", "orbit_key_", "orbit_streams_",
                      "orbit_endpoint_", "orbit_ticket_", "orbit_admission_", "orbit_arena_")
_NEWER = {"orbit_uring_futex_status", "orbit_fleet_observe_opts"}

for _name, (_res, *_args) in _SIGNATURES.items():
    try:
        globals()[_name] = _fn(_name, _res, *_args)
    except AttributeError:
        if not _name.startswith(_OPTIONAL_PREFIXES) and _name not in _NEWER:
            raise ImportError("orbit: %s lacks %s: an older liborbit than this package needs" % (path, _name))


def bare(name, restype):
    """Call name with no argtypes, for a hot path whose arguments are ctypes objects already:
    ctypes then converts nothing (argtypes cost a from_param per argument per call, about a
    third of a call's instructions). Pointers must be byref()/pointer objects or c_void_p."""
    f = lib._FuncPtr((name, lib))
    f.restype = restype
    return f


def has(name):
    """Whether the loaded library has call name (tables may be left out of a build)."""
    return name in globals()


def policy(name):
    """The address of a built-in pool policy (orbit_policy_local_first, ...)."""
    return ctypes.byref(Policy.in_dll(lib, "orbit_policy_" + name))


def text(raw):
    """A C string from the library as str (None stays None)."""
    return None if raw is None else raw.decode("utf-8", "replace")
