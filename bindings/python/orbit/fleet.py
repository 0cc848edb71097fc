# SPDX-License-Identifier: MIT
"""Fleets: joining, observing, nodes, deaths, and what a fleet holds.

A fleet is a named set of up to 4096 cooperating processes on one host. A
process joins it (Fleet.join), claims a node and carries an incarnation; an
operator's tool observes it (Fleet.observe) without claiming one. The tables
(pool, streams, admission) are opened through the fleet handle and closed
with it.
"""

import ctypes
from ctypes import byref, c_void_p
from typing import NamedTuple, Optional

from . import _lib
from ._util import Deadline, Handle, cstr, fetch, sint, uint, wait
from .errors import OPENING, NotSupportedError, check, malformed

BACKINGS = ("auto", "hugetlb", "shm", "private")


class Id(int):
    """An orbit_id: kind:8 | node:16 | counter:40 (counter = generation:24 | slot:16).

    An int whose str() is the C text form "kind:node:counter"; Id.parse reads
    that form or "0x" + hex, as orbit_id_parse does.
    """

    __slots__ = ()

    @property
    def kind(self):
        """The table kind the id belongs to."""
        return self >> 56

    @property
    def node(self):
        """The node (lane) the object lives in."""
        return (self >> 40) & 0xffff

    @property
    def counter(self):
        """generation:24 | slot:16."""
        return self & 0xffffffffff

    @property
    def generation(self):
        """The slot's tenancy (0 is never live)."""
        return (self >> 16) & 0xffffff

    @property
    def slot(self):
        """The slot in its lane."""
        return self & 0xffff

    def __str__(self):
        buf = ctypes.create_string_buffer(32)
        check(_lib.orbit_id_format(self, buf, 32))
        return buf.value.decode()

    def __repr__(self):
        return "Id('%s')" % self

    @classmethod
    def parse(cls, text):
        """An Id from "kind:node:counter" or "0x..."; MalformedError for anything else."""
        out = _lib.orbit_id()
        check(_lib.orbit_id_parse(cstr(text, "Id.parse", "text"), byref(out)))
        return cls(out.value)


class Node(NamedTuple):
    """One claimed node of a fleet, as orbit_fleet_nodes reads it.

    state: "alive" (its process holds its kernel lock), "dead" (gone, death
    not reported yet), "joining" (a joiner or a death report is moving it).
    holds: what that life holds in every table (Holdings), when asked for.
    """
    node: int
    state: str
    pid: int
    start_time: int
    incarnation: int
    alive: bool
    pid_namespace: int
    holds: Optional["Holdings"] = None


class Holdings(NamedTuple):
    """What one life holds in a fleet's tables: what its death gives back (orbit_fleet_account)."""
    tables: int
    pool_resources: int
    pool_units: int
    pool_leases: int
    pool_creating: int
    stream_sides: int
    stream_unread: int
    admission_claims: int
    admission_units: int
    arena_chunks: int
    arena_bytes: int
    pool_reserved: int


class Table(NamedTuple):
    """One table segment of a fleet: kind, table type and its name ("pool", "streams", ...)."""
    kind: int
    type: int
    name: str
    built: bool
    epoch: int


class Segment(NamedTuple):
    """One segment file of a fleet (orbitctl ls): what it holds, its backing and its memory."""
    kind: int
    table: str
    backing: str
    size: int
    resident: int
    epoch: int
    path: str


class FleetSummary(NamedTuple):
    """A fleet on this host (orbitctl ls): live members (None when unknown, then error says why)."""
    name: str
    live_members: Optional[int]
    error: Optional[str]
    segments: list


class Counter(NamedTuple):
    """One counter of a table: its name (orbit_counter_name), help text and value."""
    name: str
    help: str
    value: int


class Counters(dict):
    """A table's counters, name -> value, for a node or the fleet's totals (node None).

    entries() gives each with its help text, in the library's order.
    """

    def __init__(self, kind, type_, node, slots, entries):
        super().__init__((c.name, c.value) for c in entries)
        self.kind, self.type, self.node, self.slots, self._entries = kind, type_, node, slots, entries

    def entries(self):
        """[Counter(name, help, value)] in counter-index order."""
        return list(self._entries)

    def help(self, name):
        """The counter's one-sentence description."""
        for c in self._entries:
            if c.name == name:
                return c.help
        raise KeyError(name)


class DeathCounters(NamedTuple):
    """The fleet's death reports and leaves, and how long reports took to give back.

    buckets: [(bound_ns or None for +Inf, reports that took at most that)].
    """
    deaths_reported: int
    leaves: int
    reclaim_ns_sum: int
    buckets: list


def _node_state(ni):
    if ni.state == 1:
        return "joining"
    if ni.state != 2:
        return "free"
    return "alive" if ni.alive else "dead"


def counter_names(table_type):
    """[(name, help)] of every counter a table type has (orbit_counter_name, orbit_counter_help)."""
    out = []
    for i in range(_lib.COUNTERS_MAX):
        name = _lib.orbit_counter_name(table_type, i)
        if name is None:
            break
        out.append((name.decode(), _lib.text(_lib.orbit_counter_help(table_type, i)) or name.decode()))
    return out


class Fleet(Handle):
    """A fleet handle: a member's (Fleet.join) or an observer's (Fleet.observe).

    Use it as a context manager: leaving closes every table opened through
    it, then leaves the fleet (a member's node is given back). A handle
    belongs to the process that made it: after fork, join again in the
    child (the parent's handle raises ForkedError there).
    """

    _what = "fleet"

    def _release(self, h):
        _lib.orbit_fleet_leave(h)

    @classmethod
    def join(cls, name, *, capacity=64, node=None, incarnation=0, backing="auto", mode=0, gid=None,
             generation=0):
        """Join (creating if needed) the fleet called name and claim a node.

        name: 1-64 bytes of [A-Za-z0-9_.-], or None for a fleet private to
        this process. capacity: nodes, 1..4096, fixed by whoever creates the
        fleet (another value is GeometryError). node: claim exactly this node
        (a role a replacement inherits), else the first free one.
        incarnation: 0 for a random one. backing: "auto", "hugetlb", "shm" or
        "private". gid: share the segments with that group (mode 0660);
        mode may narrow the permissions, never to world access.
        generation: 0 joins the newest generation of this library's layouts
        (starting one only on a layout change), GENERATION_NEW a new one, a
        number exactly that one (one of other layouts is GeometryError).
        Errors: MalformedError, GeometryError, FullError, ClaimedError,
        AccessError, OutOfMemoryError, CorruptError.
        """
        call = "Fleet.join"
        opts = _lib.FleetOpts(
            capacity=uint(capacity, 16, call, "capacity"),
            node=-1 if node is None else sint(node, 32, call, "node"),
            incarnation=uint(incarnation, 64, call, "incarnation"),
            backing=_backing(backing, call), mode=uint(mode, 32, call, "mode"),
            gid=-1 if gid is None else sint(gid, 64, call, "gid"),
            generation=uint(generation, 32, call, "generation"))
        h = c_void_p()
        check(_lib.orbit_fleet_join(None if name is None else cstr(name, call, "name"), byref(opts), byref(h)))
        return cls(h.value, None)

    @classmethod
    def observe(cls, name, ready_wait_ms=None):
        """Open an existing fleet without claiming a node (tools, supervisors, exporters).

        Tables opened through it inspect and report deaths but create
        nothing. NotFoundError when there is no such fleet. ready_wait_ms
        bounds the wait for a segment its creator has not finished (None:
        the library's 10 s; 0: WouldBlockError at once, as an exporter that
        must not stall on a half-made fleet wants; needs liborbit 0.2).
        """
        call = "Fleet.observe"
        h = c_void_p()
        if ready_wait_ms is None:
            check(_lib.orbit_fleet_observe(cstr(name, call, "name"), byref(h)), OPENING)
            return cls(h.value, None)
        if not _lib.has("orbit_fleet_observe_opts"):
            raise NotSupportedError("%s: ready_wait_ms needs liborbit 0.2 (orbit_fleet_observe_opts)" % call)
        opts = _lib.ObserveOpts(ready_wait_ms=sint(ready_wait_ms, 32, call, "ready_wait_ms"))
        check(_lib.orbit_fleet_observe_opts(cstr(name, call, "name"), byref(opts), byref(h)), OPENING)
        return cls(h.value, None)

    def leave(self):
        """Close every table opened through this handle, then leave (same as close())."""
        self.close()

    # ---- identity ----

    @property
    def name(self):
        """The fleet's name ("" for a private fleet)."""
        return _lib.orbit_fleet_name(self._handle()).decode()

    @property
    def node(self):
        """This member's node; None for an observer."""
        n = _lib.orbit_fleet_node(self._handle())
        return None if n == _lib.NODE_NONE else n

    @property
    def incarnation(self):
        """This member's incarnation (0 for an observer)."""
        return _lib.orbit_fleet_incarnation(self._handle())

    @property
    def capacity(self):
        """Nodes the fleet has room for."""
        return _lib.orbit_fleet_capacity(self._handle())

    @property
    def backing(self):
        """Where its segments live: "hugetlb", "shm" or "private"."""
        return _lib.text(_lib.orbit_backing_name(_lib.orbit_fleet_backing(self._handle())))

    @property
    def observer(self):
        """True for a handle made by observe (no node)."""
        return self.node is None

    def replaced(self):
        """True when the fleet file this handle maps is no longer the one under its name."""
        return check(_lib.orbit_fleet_replaced(self._handle())) == 1

    def __repr__(self):
        if self.closed:
            return "<orbit.Fleet closed>"
        return "<orbit.Fleet %r node %s of %d>" % (self.name, self.node, self.capacity)

    # ---- tables ----

    def pool(self, *, kind=247, key_capacity=256, lane_capacity=256, generation_limit=0, existing=False):
        """Open (creating if needed) the pool of that kind; existing=True opens it with the
        geometry its segment records (observers, tools). Every member must pass the same
        geometry (else GeometryError)."""
        from .pool import Pool
        return Pool._open(self, existing, kind, key_capacity=key_capacity, lane_capacity=lane_capacity,
                          generation_limit=generation_limit)

    def streams(self, *, kind=246, lane_capacity=256, buffer_bytes=65536, generation_limit=0, existing=False):
        """Open (creating if needed) the streams table of that kind (ring bytes per direction:
        buffer_bytes, a power of two); existing=True takes the geometry from the segment."""
        from .streams import Streams
        return Streams._open(self, existing, kind, lane_capacity=lane_capacity, buffer_bytes=buffer_bytes,
                             generation_limit=generation_limit)

    def admission(self, *, kind=245, max_domains=16, max_claims=4096, retained_max_bytes=0, existing=False):
        """Open (creating if needed) the admission ledger of that kind; a new ledger has no
        domains (Admission.set_capacity). existing=True takes the spec from the segment."""
        from .admission import Admission
        return Admission._open(self, existing, kind, max_domains=max_domains, max_claims=max_claims,
                               retained_max_bytes=retained_max_bytes)

    # ---- deaths ----

    def reap(self):
        """One liveness sweep: report every dead node on every table; returns how many."""
        return check(_lib.orbit_fleet_reap(self._handle()))

    def node_dead(self, node, incarnation):
        """Report one confirmed death of (node, incarnation): its share of every table comes back."""
        call = "Fleet.node_dead"
        check(_lib.orbit_fleet_node_dead(self._handle(), uint(node, 16, call, "node"),
                                         uint(incarnation, 64, call, "incarnation")))

    def wait_node_death(self, node, incarnation, timeout=None):
        """Wait until that incarnation of node is dead (its process gone, it left, or the node
        was taken by another life); returns at once if it is already. Needs no reaper: the
        kernel releases the member's lock. TimedOutError after timeout seconds (0: look
        once). It reports nothing: call reap() or node_dead() next. The GIL is released."""
        call = "Fleet.wait_node_death"
        h, node, inc = self._handle(), uint(node, 16, call, "node"), uint(incarnation, 64, call, "incarnation")
        wait(Deadline(timeout, call), lambda ms: _lib.orbit_fleet_wait_node_death(h, node, inc, ms))

    async def wait_node_death_async(self, node, incarnation, timeout=None):
        """wait_node_death for asyncio: the event loop's ring waits (see orbit.aio)."""
        from . import aio
        return await aio.wait_node_death(self, node, incarnation, timeout)

    # ---- inspection ----

    def nodes(self, holds=False):
        """Every claimed node (Node); holds=True adds what each life holds (orbit_fleet_account)."""
        h = self._handle()
        nodes = fetch(lambda buf, n: _lib.orbit_fleet_nodes(h, buf, n), _lib.NodeInfo, 64)
        out = []
        for ni in nodes:
            held = self.account(ni.node, ni.incarnation) if holds else None
            out.append(Node(ni.node, _node_state(ni), ni.pid, ni.start_time, ni.incarnation, ni.alive,
                            ni.pid_namespace, held))
        return out

    def account(self, node, incarnation):
        """What (node, incarnation) holds in every table: what its death would give back."""
        call = "Fleet.account"
        r = _lib.Reclaim()
        check(_lib.orbit_fleet_account(self._handle(), uint(node, 16, call, "node"),
                                       uint(incarnation, 64, call, "incarnation"), byref(r)))
        return Holdings(*(getattr(r, f) for f in Holdings._fields))

    def tables(self):
        """The fleet's table segments in kind order (Table)."""
        h = self._handle()
        return [Table(t.kind, t.type, t.name.decode(), t.built, t.epoch)
                for t in fetch(lambda buf, n: _lib.orbit_fleet_tables(h, buf, n), _lib.TableInfo)]

    def counters(self, table, node=None):
        """The counters of a table (a Table, or its kind) for node, or the fleet's totals
        (node None: every life, ended or not). Returns Counters (name -> value)."""
        call = "Fleet.counters"
        if not isinstance(table, Table):
            kind = uint(table, 8, call, "kind")
            table = next((t for t in self.tables() if t.kind == kind), None)
            if table is None:
                raise malformed(call, "the fleet has no table of kind %d" % kind)
        c = _lib.Counters()
        check(_lib.orbit_fleet_counters(self._handle(), table.kind,
                                        _lib.NODE_NONE if node is None else uint(node, 16, call, "node"), byref(c)))
        entries = [Counter(name, help_, c.value[i]) for i, (name, help_) in enumerate(counter_names(table.type))]
        return Counters(table.kind, table.type, node, c.slots, entries)

    def death_counters(self):
        """Deaths reported, leaves, and the reclaim-time histogram (DeathCounters)."""
        d = _lib.DeathCounters()
        check(_lib.orbit_fleet_death_counters(self._handle(), byref(d)))
        buckets = [(None if d.reclaim_bound_ns[i] == 2**64 - 1 else d.reclaim_bound_ns[i], d.reclaim_le[i])
                   for i in range(_lib.RECLAIM_BUCKETS)]
        return DeathCounters(d.deaths_reported, d.leaves, d.reclaim_ns_sum, buckets)

    def metrics(self):
        """Every counter and gauge orbitctl metrics prints for this fleet, as Family objects."""
        from .metrics import fleet_families
        return fleet_families(self)


def _backing(value, call):
    if value not in BACKINGS:
        raise malformed(call, "backing %r is not one of %s" % (value, ", ".join(BACKINGS)))
    return BACKINGS.index(value)


# ---- the host ----

def fleet_names():
    """Names of the fleets on this host (fleet segments found), sorted as the library lists them."""
    row = ctypes.c_char * (_lib.FLEET_NAME_MAX + 1)
    return [r.value.decode() for r in fetch(lambda buf, n: _lib.orbit_fleet_list(buf, n), row, 64)]


def live_members(name):
    """How many members of the fleet are alive now; NotFoundError when there is no such fleet."""
    return check(_lib.orbit_fleet_live_members(cstr(name, "live_members", "name")), OPENING)


def segments(name):
    """The fleet's segment files (Segment), as orbitctl ls lists them."""
    name_b = cstr(name, "segments", "name")
    kinds = {}
    try:
        with Fleet.observe(name) as f:
            kinds = {t.kind: t.name for t in f.tables()}
    except OSError:
        pass   # an unreadable fleet still lists its files
    return [Segment(s.kind, kinds.get(s.kind, "fleet" if s.kind == 255 else "unknown"),
                    _lib.text(_lib.orbit_backing_name(s.backing)), s.size, s.resident, s.epoch, s.path.decode())
            for s in fetch(lambda buf, n: _lib.orbit_fleet_segments(name_b, buf, n), _lib.SegmentInfo)]


def fleets():
    """Every fleet on this host with its live members and segments (orbitctl ls). A fleet that
    cannot be read is listed with live_members None and error saying why."""
    out = []
    for name in fleet_names():
        live, why, segs = None, None, []
        try:
            live = live_members(name)
            segs = segments(name)
        except OSError as e:
            why = str(e)
        out.append(FleetSummary(name, live, why, segs))
    return out


def collect(name):
    """Remove the fleet if nobody lives in it (orbitctl gc); BusyError when someone does."""
    check(_lib.orbit_fleet_collect(cstr(name, "collect", "name")), OPENING)


def unlink(name):
    """Remove every segment of the fleet, whoever lives in it; NotFoundError when there was none."""
    check(_lib.orbit_fleet_unlink(cstr(name, "unlink", "name")), OPENING)
