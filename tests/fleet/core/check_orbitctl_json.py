#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check_orbitctl_json.py SCHEMA WHAT FILE EXPECT

Validate orbitctl --json output FILE (WHAT: show, ls, reap or node-dead)
against the $defs/WHAT of SCHEMA (docs/orbitctl-show.schema.json) with
python3-jsonschema, then check it against EXPECT, a JSON object naming the
workload the test ran (see check_show, check_reap, check_subset). Prints
every failure; exit 0 when there are none, 1 otherwise."""
import json
import sys

import jsonschema

failures = []


def fail(msg):
    failures.append(msg)


def validate(schema, what, doc):
    sub = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/" + what}
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    for err in sorted(cls(sub).iter_errors(doc), key=lambda e: list(e.absolute_path)):
        if err.context:   # a oneOf/anyOf: the branch that came closest says why
            err = jsonschema.exceptions.best_match(err.context)
        fail("schema: %s at /%s" % (err.message[:300], "/".join(str(p) for p in err.absolute_path)))


def check_subset(want, got, where):
    """Every field of want is in got with the same value (objects recursively)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            fail("%s: want an object, got %r" % (where, got))
            return
        for k, v in want.items():
            if k not in got:
                fail("%s.%s: missing" % (where, k))
            else:
                check_subset(v, got[k], where + "." + k)
    elif want != got:
        fail("%s: want %r, got %r" % (where, want, got))


def tables(doc, type_):
    return [t for t in doc["tables"] if t.get("type") == type_]


def count_by_node(pairs):
    out = {}
    for node, n in pairs:
        out[str(node)] = out.get(str(node), 0) + n
    return out


def check_nodes(doc, exp):
    nodes = {str(n["node"]): n for n in doc["nodes"]}
    for n in exp.get("dead", []):
        if nodes.get(str(n), {}).get("state") != "dead":
            fail("node %s: want state dead, got %r" % (n, nodes.get(str(n))))
    for n in exp.get("alive", []):
        if nodes.get(str(n), {}).get("state") != "alive":
            fail("node %s: want state alive, got %r" % (n, nodes.get(str(n))))
    for n in exp.get("absent", []):
        if str(n) in nodes:
            fail("node %s: listed after its report: %r" % (n, nodes[str(n)]))
    dead = sorted(n["node"] for n in doc["nodes"] if n["state"] == "dead")
    if "dead" in exp and dead != sorted(exp["dead"]):
        fail("dead nodes: want %r, got %r" % (exp["dead"], dead))
    for n, pid in exp.get("pids", {}).items():
        if n in nodes and nodes[n]["pid"] != pid:
            fail("node %s: pid %r, want %r" % (n, nodes[n]["pid"], pid))
    for n, inc in exp.get("incarnations", {}).items():
        if n in nodes and nodes[n]["incarnation"] != inc:
            fail("node %s: incarnation %r, want %r" % (n, nodes[n]["incarnation"], inc))
    for n, owes in exp.get("owes", {}).items():
        check_subset(owes, nodes.get(n, {}).get("holds"), "nodes[%s].holds" % n)


def check_members(doc, exp):
    """Every member a table names carries the pid and state of its node's record."""
    nodes = {(n["node"], n["incarnation"]): n for n in doc["nodes"]}

    def walk(v, where):
        if isinstance(v, dict):
            if set(v) == {"node", "incarnation", "pid", "state"}:
                rec = nodes.get((v["node"], v["incarnation"]))
                want = (rec["pid"], rec["state"]) if rec else (None, "gone")
                if (v["pid"], v["state"]) != want:
                    fail("%s: member %r, its record says %r" % (where, v, want))
            for k, x in v.items():
                walk(x, where + "." + k)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, "%s[%d]" % (where, i))

    walk(doc["tables"], "tables")


def check_pool(doc, exp):
    leases = [l for t in tables(doc, "pool") for k in t["keys"] for r in k["resources"] for l in r["leases"]]
    for state in ("pending", "active"):
        if state in exp:
            got = count_by_node((l["holder"]["node"], 1) for l in leases if l["state"] == state and l["holder"])
            if got != exp[state]:
                fail("%s leases by node: want %r, got %r" % (state, exp[state], got))
    for l in leases:
        if l["holder"] and (l["reserved_ms"] is None or int(l["age_ms"]) > 600000):
            fail("lease %r: no reserve time, or an age past the test's life" % l)
    if "key_waiters" in exp:
        got = sorted(w["member"]["node"] for t in tables(doc, "pool") for k in t["keys"] for w in k["waiters"]
                     if w["waits"] > 0)
        if got != sorted(exp["key_waiters"]):
            fail("key waiters: want %r, got %r" % (exp["key_waiters"], got))


def check_streams(doc, exp):
    streams = [s for t in tables(doc, "streams") for s in t["streams"]]
    if "queued" in exp:
        lane0 = [s for s in streams if s["id"].split(":")[1] == "0"]
        got = [[d["queued"] for d in s["directions"]] for s in lane0]
        if got != [exp["queued"]]:
            fail("queued in the owner's stream: want %r, got %r" % ([exp["queued"]], got))
    if "stream_readers_waiting" in exp:
        got = sum(d["reader_waits"] for s in streams for d in s["directions"])
        if got != exp["stream_readers_waiting"]:
            fail("waiting stream readers: want %r, got %r" % (exp["stream_readers_waiting"], got))


def check_admission_arena(doc, exp):
    if "claims" in exp:
        got = count_by_node((c["holder"]["node"], sum(int(u["units"]) for u in c["units"]))
                            for t in tables(doc, "admission") for c in t["claims"])
        if got != exp["claims"]:
            fail("admission units by holder: want %r, got %r" % (exp["claims"], got))
    if "admission_waits" in exp:
        got = [t["waiting"] and t["waiting"]["waits"] for t in tables(doc, "admission")]
        if got != [exp["admission_waits"]]:
            fail("admission waiting: want %r, got %r" % ([exp["admission_waits"]], got))
    if "arena_chunks" in exp:
        got = count_by_node((c["producer"]["node"], 1) for t in tables(doc, "arena") for c in t["chunks"])
        if got != exp["arena_chunks"]:
            fail("arena chunks by producer: want %r, got %r" % (exp["arena_chunks"], got))


def check_show(doc, exp):
    if sorted(t["type"] for t in doc["tables"]) != ["admission", "arena", "pool", "streams"]:
        fail("tables: %r" % [t.get("type") for t in doc["tables"]])
    check_nodes(doc, exp)
    check_members(doc, exp)
    check_pool(doc, exp)
    check_streams(doc, exp)
    check_admission_arena(doc, exp)


def check_reap(doc, exp):
    if doc["reported"] != exp["reported"]:
        fail("reported: want %r, got %r" % (exp["reported"], doc["reported"]))
    got = {str(n["node"]): n["reclaimed"] for n in doc["nodes"]}
    if sorted(got) != sorted(exp["nodes"]):
        fail("reported nodes: want %r, got %r" % (sorted(exp["nodes"]), sorted(got)))
    for n, want in exp["nodes"].items():
        check_subset(want, got.get(n, {}), "nodes[%s].reclaimed" % n)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    schema_path, what, path, expect = sys.argv[1:]
    schema = json.load(open(schema_path))
    doc = json.load(open(path))
    exp = json.loads(expect)
    validate(schema, what, doc)
    if not failures:
        {"show": check_show, "reap": check_reap}.get(what, lambda d, e: check_subset(e, d, what))(doc, exp)
    for f in failures:
        print("check_orbitctl_json: %s: %s" % (what, f))
    if failures:
        print("check_orbitctl_json: the document was: %s" % json.dumps(doc)[:4000])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
