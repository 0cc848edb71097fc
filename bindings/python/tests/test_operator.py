# SPDX-License-Identifier: MIT
"""The operator's API: fleets, nodes and holders, and every metric orbitctl metrics prints."""

import re
import subprocess
import unittest

import orbit
from support import WAIT_S, FleetCase, tool

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$")
AGE = "orbit_pool_pending_reserve_age_seconds"


def parse(text):
    """({sample name with labels: value text}, [HELP and TYPE lines], sample names in order)."""
    samples, meta, order = {}, [], []
    for line in text.splitlines():
        if line.startswith("#"):
            meta.append(line)
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        samples[m.group(1)] = m.group(2)
        order.append(m.group(1))
    return samples, meta, order


class TestOperator(FleetCase):
    tag = "ops"

    def busy_fleet(self):
        """A fleet with something in every table, and a dead member not reported yet."""
        f = self.join()
        adm, pool, streams = f.admission(), f.pool(), f.streams()
        adm.set_capacity(1, 8)
        adm.set_capacity(7, 1000)
        self.claims = [adm.claim({1: 2, 7: 100}), adm.claim({7: 5})]
        key = orbit.Key(0xa9e, 0)
        rid = pool.register(key, 4)
        self.execution = pool.accept(pool.reserve(rid))
        pool.register(orbit.Key(0xb0b, 1), 1)
        a, ticket = streams.create()
        self.b = streams.open(ticket)
        a.write_all(b"q" * 5000)
        self.a = a
        dead = self.worker("hold", 1, 3, key.lo)
        _, node, inc = dead.line("node").split()
        dead.line("held")
        dead.kill9()
        f.wait_node_death(int(node), int(inc), timeout=WAIT_S)
        return f, adm, pool, streams, int(node), rid

    def test_counters_and_gauges_equal_orbitctl_metrics(self):
        f, adm, pool, streams, dead, _ = self.busy_fleet()
        ours = orbit.exposition(orbit.metrics([self.name]))
        theirs = subprocess.run([tool("orbitctl"), "metrics", self.name], capture_output=True, text=True,
                                check=True).stdout
        again = orbit.exposition(orbit.metrics([self.name]))
        o, o_meta, o_order = parse(ours)
        t, t_meta, t_order = parse(theirs)
        self.assertEqual(o_meta, t_meta)            # every family, HELP text and TYPE, in order
        self.assertEqual(o_order, t_order)          # every sample, labels and all, in order
        for name, value in t.items():
            if name.startswith(AGE):                # a pending reservation's age grows by the ms
                self.assertLess(abs(float(o[name]) - float(value)), 2.0)
                self.assertGreater(float(value), 0)
            else:
                self.assertEqual(o[name], value, name)
        self.assertEqual(parse(again)[2], o_order)   # nothing moved while orbitctl read
        # Values this test knows, read back through the objects.
        fams = {fam.name: fam for fam in orbit.metrics([self.name])}
        fl = {"fleet": self.name}
        self.assertEqual(fams["orbit_fleet_node_up"].value(node=str(dead), **fl), 0)
        self.assertEqual(fams["orbit_fleet_nodes"].value(state="dead", **fl), 1)
        self.assertEqual(fams["orbit_admission_live_claims"].value(**fl), 3)
        self.assertEqual(fams["orbit_admission_domain_used_units"].value(domain="1", **fl), 5)
        self.assertEqual(fams["orbit_pool_active_units"].value(**fl), 1)
        self.assertEqual(fams["orbit_pool_reserved_units"].value(**fl), 1)
        self.assertEqual(fams["orbit_streams_queued_bytes"].value(table="streams", **fl), 5000)
        self.assertEqual(fams["orbit_pool_reservations_total"].value(**fl), 2)
        self.assertIn("Reservations", fams["orbit_pool_reservations_total"].help)
        self.assertEqual(fams["orbit_fleet_up"].value(**fl), 1)
        self.assertEqual([fam.name for fam in f.metrics()], [fam.name for fam in fams.values()])

    def test_observe_bounds_its_wait_for_a_creator(self):
        self.join()
        with orbit.Fleet.observe(self.name, ready_wait_ms=0) as obs:   # what metrics() opens with
            self.assertIsNone(obs.node)
        with self.assertRaises(orbit.MalformedError):
            orbit.Fleet.observe(self.name, ready_wait_ms=-2)
        with self.assertRaises(orbit.NotFoundError):
            orbit.Fleet.observe(self.name + "x", ready_wait_ms=0)

    def test_fleets_nodes_and_holders(self):
        f, adm, pool, streams, dead, rid = self.busy_fleet()
        mine = [s for s in orbit.fleets() if s.name == self.name]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0].live_members, 1)
        self.assertEqual(sorted(s.table for s in mine[0].segments), ["admission", "fleet", "pool", "streams"])
        with orbit.Fleet.observe(self.name) as obs:
            self.assertIsNone(obs.node)
            nodes = {n.node: n for n in obs.nodes(holds=True)}
            self.assertEqual(nodes[f.node].state, "alive")
            self.assertEqual(nodes[dead].state, "dead")
            self.assertEqual((nodes[dead].holds.admission_claims, nodes[dead].holds.pool_reserved), (1, 1))
            self.assertEqual(nodes[f.node].holds.stream_sides, 2)
            opool = obs.pool(existing=True)
            self.assertEqual(sorted((i.state, i.node) for i in opool.leases(rid)),
                             [("active", f.node), ("pending", dead)])
            self.assertEqual(sorted(c.node for c in obs.admission(existing=True).claims()), [f.node, f.node, dead])
            self.assertEqual(obs.counters(247)["reservations"], 2)
            totals = obs.counters(247)
            self.assertEqual(totals.help("reservations"), orbit.counter_names(totals.type)[5][1])
            with self.assertRaises(orbit.NotOwnerError):
                opool.register(orbit.Key(1, 1), 1)     # an observer creates nothing
            self.assertEqual(obs.reap(), 1)
            self.assertEqual([n.node for n in obs.nodes()], [f.node])
        self.assertEqual(f.death_counters().deaths_reported, 1)


if __name__ == "__main__":
    unittest.main()
