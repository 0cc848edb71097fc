# SPDX-License-Identifier: MIT
"""Every counter and gauge `orbitctl metrics` prints, as Python objects.

metrics(names) reads the fleets as observers (no node is claimed) and
returns Family objects: a metric family's name, type ("counter", "gauge",
"histogram"), help text and samples (suffix, labels, value), with the same
names, help texts, labels and values as `orbitctl metrics` and
orbit-reaper --metrics, in the same order; exposition() writes them in the
Prometheus text format 0.0.4, byte for byte as orbitctl does. A custom
exporter or a health check is a few lines:

    for fam in orbit.metrics(["web"]):
        for s in fam.samples:
            print(fam.name + s.suffix, s.labels, s.value)

Counter names and help texts come from the library (orbit_counter_name,
orbit_counter_help); the gauges are read from the tables as orbitctl reads
them (docs/operations.md, "Monitoring", lists every metric). A test compares
this module's output with orbitctl's for the same fleet.
"""

import re
import time
from typing import NamedTuple

from . import _lib
from .errors import Error, GeometryError
from .fleet import Fleet, fleet_names

COMMON_COUNTERS = 5   # counter indices every table type shares (parks, wakes, ...): orbit_table_..._total
LIST_MAX = 65536


class Sample(NamedTuple):
    """One sample: the family's name plus suffix ("", "_bucket", "_sum", "_count"), labels
    as (name, value) pairs in order, and the value (an int, or a float for ratios and seconds)."""
    suffix: str
    labels: tuple
    value: object


class Family:
    """A metric family: name, type, help text and its samples in order."""

    __slots__ = ("name", "type", "help", "samples")

    def __init__(self, name, type_, help_):
        self.name, self.type, self.help, self.samples = name, type_, help_, []

    def __repr__(self):
        return "<Family %s %s, %d samples>" % (self.name, self.type, len(self.samples))

    def value(self, **labels):
        """The value of the one sample whose labels include these (KeyError if none or several)."""
        want = set(labels.items())
        found = [s.value for s in self.samples if want <= set(s.labels)]
        if len(found) != 1:
            raise KeyError("%s%r: %d samples match" % (self.name, labels, len(found)))
        return found[0]


class _Collector:
    """Families in the order of first use, as the C writer gathers them (tools/common/prom.c)."""

    def __init__(self):
        self.families = {}

    def add(self, name, type_, help_, labels, value, suffix=""):
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = Family(name, type_, help_)
        fam.samples.append(Sample(suffix, tuple(labels), value))

    def gauge(self, name, help_, labels, value):
        self.add(name, "gauge", help_, labels, value)


def _name_part(s):
    return re.sub(r"[^a-z0-9]", "_", s.lower())


def _counter_metric(table, index, counter, per_node):
    t = _name_part("table" if index < COMMON_COUNTERS else table)
    if counter.startswith(t + "_"):
        counter = counter[len(t) + 1:]   # streams' "streams_created": orbit_streams_created_total
    c = _name_part(counter[6:]) + "_bytes" if counter.startswith("bytes_") else _name_part(counter)
    return "orbit_%s_%s%s_total" % (t, "node_" if per_node else "", c)


_PER_NODE_HELP = (" Per node: its lives not yet ended (their counts move into the fleet's total when the death "
                  "or leave is reported).")


def _table_counters(p, f, table, node, labels):
    counters = f.counters(table, node)
    for i, c in enumerate(counters.entries()):
        p.add(_counter_metric(table.name, i, c.name, node is not None), "counter",
              c.help + (_PER_NODE_HELP if node is not None else ""), labels, c.value)


def _fleet_nodes(p, f, fl, nodes):
    by_state = {"live": 0, "joining": 0, "dead": 0}
    for n in nodes:
        state = "joining" if n.state == "joining" else "live" if n.alive else "dead"
        by_state[state] += 1
        nl = fl + [("node", str(n.node))]
        p.gauge("orbit_fleet_node_up", "1 while the node's member process is alive, 0 once it died and is not "
                "reported yet (claimed nodes only).", nl, 1 if n.alive else 0)
        p.gauge("orbit_fleet_node_pid", "The pid of the node's member, in its own pid namespace.", nl,
                max(n.pid, 0))
    for state, count in by_state.items():
        p.gauge("orbit_fleet_nodes", "Claimed nodes by state: live (alive), joining, dead (its process is gone "
                "and no death report has freed it yet).", fl + [("state", state)], count)
    p.gauge("orbit_fleet_live_members", "Members whose process is alive.", fl, by_state["live"])
    p.gauge("orbit_fleet_capacity_nodes", "Nodes the fleet has room for.", fl, f.capacity)


def _fleet_deaths(p, f, fl):
    d = f.death_counters()
    p.add("orbit_fleet_deaths_reported_total", "counter", "Member lives ended by a death report (orbit-reaper, "
          "orbitctl reap or node-dead, orbit_fleet_reap).", fl, d.deaths_reported)
    p.add("orbit_fleet_leaves_total", "counter", "Member lives ended by orbit_fleet_leave.", fl, d.leaves)
    help_ = "Time a death report took to give back the dead life's share of every table."
    for bound, count in d.buckets:
        le = "+Inf" if bound is None else "%.9g" % (bound / 1e9)
        p.add("orbit_fleet_reclaim_seconds", "histogram", help_, fl + [("le", le)], count, "_bucket")
    p.add("orbit_fleet_reclaim_seconds", "histogram", help_, fl, d.reclaim_ns_sum / 1e9, "_sum")
    p.add("orbit_fleet_reclaim_seconds", "histogram", help_, fl, d.deaths_reported, "_count")


def _pool_gauges(p, f, kind, labels):
    with f.pool(kind=kind, existing=True) as pool:
        keys = pool.keys()
        now = int(time.time() * 1000)
        res = cap = reserved = active = draining = age = 0
        for k in keys:
            for c in pool.candidates(k.key)[:LIST_MAX]:
                res += 1
                cap += c.capacity
                reserved += c.reserved
                active += c.active
                draining += c.state == "draining"
                if c.reserved and c.last_reserve_ms and c.last_reserve_ms <= now:
                    age = max(age, now - c.last_reserve_ms)
    p.gauge("orbit_pool_keys", "Live keys in the pool's key table.", labels, len(keys))
    p.gauge("orbit_pool_resources", "Registered resources (all keys).", labels, res)
    p.gauge("orbit_pool_draining_resources", "Resources draining (no new leases).", labels, draining)
    p.gauge("orbit_pool_capacity_units", "Units of capacity over every resource.", labels, cap)
    p.gauge("orbit_pool_reserved_units", "Units reserved and not yet accepted (pending).", labels, reserved)
    p.gauge("orbit_pool_active_units", "Units accepted into executions.", labels, active)
    p.gauge("orbit_pool_pending_reserve_age_seconds", "Over resources with units reserved: the longest time since "
            "one's last reserve (its oldest pending reservation is at least this old); 0 when nothing is pending.",
            labels, age / 1000.0)


def _stream_gauges(p, f, kind, labels):
    with f.streams(kind=kind, existing=True) as s:
        ring = s.buffer_bytes
        live = s.list()[:LIST_MAX]
    queued = full = fill = 0
    for st in live:
        for q in st.queued:
            q = min(q, ring)
            queued += q
            full += q == ring
            fill = max(fill, q)
    p.gauge("orbit_streams_live", "Live streams (either side held).", labels, len(live))
    p.gauge("orbit_streams_queued_bytes", "Bytes written and not yet read, over every ring.", labels, queued)
    p.gauge("orbit_streams_full_rings", "Stream directions whose ring is full (the writer must wait).", labels, full)
    p.gauge("orbit_streams_ring_capacity_bytes", "Bytes one direction's ring holds.", labels, ring)
    p.gauge("orbit_streams_ring_fill_max_ratio", "The fullest ring's fill, 0 to 1.", labels,
            fill / ring if ring else 0.0)


def _admission_gauges(p, f, kind, labels):
    with f.admission(kind=kind, existing=True) as a:
        domains = a.domains()
        info = a.info()
    p.gauge("orbit_admission_live_claims", "Claims held now.", labels, info.live_claims)
    p.gauge("orbit_admission_max_claims", "Claims the ledger has room for.", labels, info.max_claims)
    p.gauge("orbit_admission_retained_bytes", "Bytes held by retained claims.", labels, info.retained_bytes)
    p.gauge("orbit_admission_poisoned", "1 when the ledger is fail-closed (poisoned).", labels, int(info.poisoned))
    for d in domains:
        dl = labels + [("domain", str(d.domain))]
        p.gauge("orbit_admission_domain_capacity_units", "A domain's capacity.", dl, d.capacity)
        p.gauge("orbit_admission_domain_used_units", "Units of the domain held by live claims.", dl, d.used)
        p.gauge("orbit_admission_domain_free_units", "Units of the domain free to claim.", dl, d.free)


def _arena_gauges(p, f, kind, labels):
    from ctypes import byref, c_void_p
    from ._util import fetch
    from .errors import OPENING, check
    h = c_void_p()
    check(_lib.orbit_arena_open_existing(f._handle(), kind, byref(h)), OPENING)
    try:
        spec = _lib.ArenaSpec()
        check(_lib.orbit_arena_spec(h, byref(spec)))
        lanes = fetch(lambda buf, n: _lib.orbit_arena_lanes(h, buf, n), _lib.ArenaLaneInfo)
    finally:
        _lib.orbit_arena_close(h)
    p.gauge("orbit_arena_lane_capacity_slots", "Slots in each node's lane.", labels, spec.slots_per_lane)
    p.gauge("orbit_arena_slot_bytes", "Bytes in one slot.", labels, spec.slot_bytes)
    p.gauge("orbit_arena_lanes_in_use", "Lanes with any slot in use.", labels, len(lanes))
    for li in lanes:
        nl = labels + [("node", str(li.node))]
        for state in ("free", "reserved", "live", "reading", "reclaiming"):
            p.gauge("orbit_arena_lane_slots", "Slots of a node's lane by state (lanes with any slot in use).",
                    nl + [("state", state)], getattr(li, state))
        p.gauge("orbit_arena_lane_chunks", "Runs of a node's lane that are not free.", nl, li.chunks)


_GAUGES = {"pool": _pool_gauges, "streams": _stream_gauges, "admission": _admission_gauges, "arena": _arena_gauges}


def _fleet(p, f, fl):
    errors = 0
    try:
        nodes = f.nodes()
        _fleet_nodes(p, f, fl, nodes)
    except Error:
        nodes, errors = [], errors + 1
    try:
        _fleet_deaths(p, f, fl)
    except Error:
        errors += 1
    try:
        tables = f.tables()
    except Error:
        tables, errors = [], errors + 1
    for t in tables:
        if not t.built or _lib.orbit_counter_name(t.type, 0) is None:
            continue   # a table type this library lacks: nothing to read it with
        tl = fl + [("table", t.name), ("kind", str(t.kind))]
        for node in [None] + [n.node for n in nodes]:
            try:
                _table_counters(p, f, t, node, tl if node is None else tl + [("node", str(node))])
            except Error:
                errors += 1
        gauges = _GAUGES.get(t.name)
        if gauges is not None and _lib.has("orbit_%s_open_existing" % t.name):
            try:
                gauges(p, f, t.kind, tl)
            except Error:
                errors += 1
    p.gauge("orbit_fleet_read_errors", "Reads of this fleet that failed during this scrape (their series are "
            "missing from it).", fl, errors)


_UP_HELP = "1 when the fleet's segments could be opened and read, else 0."


def _generation_info(name):
    """orbit_fleet_generations' entry for exactly this generation's name, or None."""
    if not _lib.has("orbit_fleet_generations"):
        return None
    buf = (_lib.GenerationInfo * 64)()
    n = _lib.orbit_fleet_generations(name.encode(), buf, 64)
    for g in buf[:max(0, min(n, 64))]:
        if g.name.decode() == name:
            return g
    return None


def _generation(p, name, fl, unreadable):
    g = _generation_info(name)
    if g is None:
        return
    v = g.library_version
    version = "%d.%d.%d" % (v >> 16, (v >> 8) & 0xff, v & 0xff) if v else ""
    p.gauge("orbit_fleet_generation_info", "1 for each generation of a fleet: the orbit version that started "
            "it (empty: not recorded) and whether this reader's library reads its layouts.",
            fl + [("version", version), ("readable", "true" if g.readable else "false")], 1)
    if unreadable and g.live_members >= 0:
        p.gauge("orbit_fleet_live_members", "Members whose process is alive.", fl, g.live_members)


def _labels(name):
    """A generation's name, "web" or "web@2": its fleet and generation labels."""
    base, _, gen = name.partition("@")
    return [("fleet", base), ("generation", gen or "1")]


def _one(p, name):
    fl = _labels(name)
    try:
        # As orbitctl: a segment still being created is not waited for (down now, read next time).
        f = Fleet.observe(name, 0 if _lib.has("orbit_fleet_observe_opts") else None)
    except Error as e:
        _generation(p, name, fl, isinstance(e, GeometryError))
        p.gauge("orbit_fleet_up", _UP_HELP, fl, 0)
        return isinstance(e, GeometryError)   # another release's generation: there, not ours to read
    _generation(p, name, fl, False)
    with f:
        p.gauge("orbit_fleet_up", _UP_HELP, fl, 1)
        _fleet(p, f, fl)
    return True


def _generations_of(name):
    """A fleet named: every generation of it; a generation's name ("web@2"): that one."""
    if "@" in name or not _lib.has("orbit_fleet_generations"):
        return [name]
    buf = (_lib.GenerationInfo * 64)()
    n = _lib.orbit_fleet_generations(name.encode(), buf, 64)
    return [g.name.decode() for g in buf[:min(n, 64)]] if n > 0 else [name]


def metrics(names=None):
    """The metric families of the named fleets (None: every fleet on this host), read as
    observers, in orbitctl metrics' order. A fleet that cannot be opened has orbit_fleet_up 0."""
    p = _Collector()
    for name in fleet_names() if names is None else [g for n in names for g in _generations_of(n)]:
        _one(p, name)
    return list(p.families.values())


def fleet_families(fleet):
    """The metric families of one fleet, read through an open handle (Fleet.metrics)."""
    p = _Collector()
    fl = _labels(fleet.name)
    _generation(p, fleet.name, fl, False)
    p.gauge("orbit_fleet_up", _UP_HELP, fl, 1)
    _fleet(p, fleet, fl)
    return list(p.families.values())


def _number(v):
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    s = "%.15g" % v
    return s if float(s) == v else "%.17g" % v


def _escape(s, quote):
    s = s.replace("\\", "\\\\").replace("\n", "\\n")
    return s.replace('"', '\\"') if quote else s


def exposition(families):
    """The families in the Prometheus text format 0.0.4 (what orbitctl metrics prints)."""
    out = []
    for fam in families:
        out.append("# HELP %s %s\n# TYPE %s %s\n" % (fam.name, _escape(fam.help, False), fam.name, fam.type))
        for s in fam.samples:
            labels = ",".join('%s="%s"' % (k, _escape(v, True)) for k, v in s.labels)
            out.append("%s%s%s %s\n" % (fam.name, s.suffix, "{%s}" % labels if labels else "", _number(s.value)))
    return "".join(out)
