/* SPDX-License-Identifier: MIT */
/* orbitctl reap and node-dead: report deaths, and say what came back, table by table. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/orbit.h>
#include "ctl.h"
#include "observe.h"
#include "tool.h"

static int fail(const char *what, int rc)
{
    fprintf(stderr, "orbitctl: %s: %s\n", what, tool_open_error(rc));
    return 1;
}

static void reclaim_add(struct orbit_reclaim *sum, const struct orbit_reclaim *r)
{
    sum->tables = r->tables > sum->tables ? r->tables : sum->tables;
    sum->pool_resources += r->pool_resources;
    sum->pool_units += r->pool_units;
    sum->pool_leases += r->pool_leases;
    sum->pool_reserved += r->pool_reserved;
    sum->pool_creating += r->pool_creating;
    sum->stream_sides += r->stream_sides;
    sum->stream_unread += r->stream_unread;
    sum->admission_claims += r->admission_claims;
    sum->admission_units += r->admission_units;
    sum->arena_chunks += r->arena_chunks;
    sum->arena_bytes += r->arena_bytes;
}

/* A life the sweep may report: a member whose process is gone, or a node mid-way (a report cut short). */
struct victim { uint16_t node; uint64_t incarnation; int32_t pid; struct orbit_reclaim held; bool reported; };

/* Whether the node no longer carries that life: freed, or claimed by a later one. */
static bool life_ended(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    struct orbit_node_snapshot s;
    int rc = -ORBIT_EAGAIN;
    for (int i = 0; i < 100 && rc == -ORBIT_EAGAIN; i++)
        rc = orbit_fleet_node_snapshot(f, node, &s);
    return rc == 0 && (s.state == ORBIT_NODE_FREE || s.incarnation != incarnation);
}

static size_t victims_of(struct orbit_fleet *f, const struct ctl_ctx *c, struct victim *v)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const struct orbit_node_info *ni = &c->nodes[i];
        if (ni->alive)
            continue;
        v[n] = (struct victim){ .node = ni->node, .incarnation = ni->incarnation, .pid = ni->pid };
        /* Counted before the report: afterwards the tables no longer show it. */
        if (orbit_fleet_account(f, ni->node, ni->incarnation, &v[n].held) < 0)
            v[n].held = (struct orbit_reclaim){ 0 };
        n++;
    }
    return n;
}

static void print_reap(const char *fleet, int reported, const struct victim *v, size_t n, bool json)
{
    struct orbit_reclaim sum = { 0 };
    if (json) {
        printf("{\"fleet\":");
        tool_json_str(stdout, fleet);
        printf(",\"reported\":%d,\"nodes\":[", reported);
    } else {
        printf("%d dead node%s reported in %s\n", reported, reported == 1 ? "" : "s", fleet);
    }
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (!v[i].reported)
            continue;
        reclaim_add(&sum, &v[i].held);
        if (json) {
            printf("%s{\"node\":%u,\"incarnation\":\"%" PRIu64 "\",\"pid\":%" PRId32 ",\"reclaimed\":", first ? "" : ",",
                   v[i].node, v[i].incarnation, v[i].pid);
            ctl_json_reclaim(stdout, &v[i].held);
            putchar('}');
        } else {
            printf("  node %u pid %" PRId32 " incarnation %" PRIu64 ": gave back ", v[i].node, v[i].pid,
                   v[i].incarnation);
            ctl_text_reclaim(stdout, &v[i].held);
            putchar('\n');
        }
        first = false;
    }
    if (json) {
        printf("],\"reclaimed\":");
        ctl_json_reclaim(stdout, &sum);
        printf("}\n");
    }
}

int ctl_cmd_reap(const char *fleet, bool json)
{
    struct orbit_fleet *f;
    /* A table still being created is skipped by the reports (nobody holds anything in it yet), never
     * waited for: each one another user left half-made would add 10 s. */
    int rc = tool_observe(fleet, 0, &f);
    if (rc < 0)
        return fail(fleet, rc);
    struct ctl_ctx c;
    struct victim *v = calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof *v);
    rc = v ? ctl_ctx_open(&c, f, json, stdout) : -ENOMEM;
    if (rc < 0) {
        free(v);
        orbit_fleet_leave(f);
        return fail("reap", rc);
    }
    size_t n = victims_of(f, &c, v);
    rc = orbit_fleet_reap(f);
    for (size_t i = 0; rc >= 0 && i < n; i++)
        v[i].reported = life_ended(f, v[i].node, v[i].incarnation);
    if (rc >= 0)
        print_reap(fleet, rc, v, n, json);
    ctl_ctx_close(&c);
    free(v);
    orbit_fleet_leave(f);
    return rc < 0 ? fail("reap", rc) : 0;
}

static void print_node_dead(const char *fleet, uint16_t node, uint64_t inc, bool carried,
                            const struct orbit_reclaim *before, const struct orbit_reclaim *after, bool json)
{
    if (json) {
        printf("{\"fleet\":");
        tool_json_str(stdout, fleet);
        printf(",\"node\":%u,\"incarnation\":\"%" PRIu64 "\",\"reported\":%s,\"reclaimed\":", node, inc,
               carried ? "true" : "false");
        if (carried)
            ctl_json_reclaim(stdout, before);
        else
            ctl_json_reclaim(stdout, &(struct orbit_reclaim){ .tables = before->tables });
        printf(",\"still_held\":");
        ctl_json_reclaim(stdout, after);
        printf("}\n");
        return;
    }
    if (!carried) {
        printf("node %u does not carry incarnation %" PRIu64 " in %s (free, or a later life): left alone\n", node,
               inc, fleet);
    } else {
        printf("node %u incarnation %" PRIu64 " reported dead on every table of %s\n  gave back ", node, inc, fleet);
        ctl_text_reclaim(stdout, before);
        putchar('\n');
    }
    if (!ctl_reclaim_empty(after)) {
        printf("  still held by that life: ");
        ctl_text_reclaim(stdout, after);
        putchar('\n');
    }
}

int ctl_cmd_node_dead(const char *fleet, uint16_t node, uint64_t inc, bool json)
{
    struct orbit_fleet *f;
    int rc = tool_observe(fleet, 0, &f);   /* as reap: no table being created is waited for */
    if (rc < 0)
        return fail(fleet, rc);
    struct orbit_reclaim before = { 0 }, after = { 0 };
    bool carried = node < orbit_fleet_capacity(f) && !life_ended(f, node, inc);
    if (node < orbit_fleet_capacity(f))
        orbit_fleet_account(f, node, inc, &before);
    rc = orbit_fleet_node_dead(f, node, inc);
    if (rc >= 0)
        orbit_fleet_account(f, node, inc, &after);
    orbit_fleet_leave(f);
    if (rc < 0)
        return fail("node-dead", rc);
    print_node_dead(fleet, node, inc, carried, &before, &after, json);
    return 0;
}
