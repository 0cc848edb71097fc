/* SPDX-License-Identifier: MIT */
/* orbitctl: the show context, members by node, ages, what a death gives back. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>
#include <orbit/orbit.h>
#include "ctl.h"
#include "tool.h"

int ctl_ctx_open(struct ctl_ctx *c, struct orbit_fleet *f, bool json, FILE *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *c = (struct ctl_ctx){ .f = f, .json = json, .out = out,
                           .now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u };
    c->nodes = calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof *c->nodes);
    if (!c->nodes)
        return -ENOMEM;
    ssize_t n = orbit_fleet_nodes(f, c->nodes, ORBIT_FLEET_CAPACITY_MAX);
    if (n < 0) {
        free(c->nodes);
        c->nodes = NULL;
        return (int)n;
    }
    c->n_nodes = (size_t)n < ORBIT_FLEET_CAPACITY_MAX ? (size_t)n : ORBIT_FLEET_CAPACITY_MAX;
    return 0;
}

void ctl_ctx_close(struct ctl_ctx *c)
{
    free(c->nodes);
    c->nodes = NULL;
    c->n_nodes = 0;
}

const struct orbit_node_info *ctl_node(const struct ctl_ctx *c, uint16_t node)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].node == node)
            return &c->nodes[i];
    return NULL;
}

const char *ctl_node_state(const struct orbit_node_info *ni)
{
    if (ni->state == ORBIT_NODE_JOINING)
        return "joining";
    if (ni->state != ORBIT_NODE_LIVE)
        return "free";
    return ni->alive ? "alive" : "dead";
}

const char *ctl_life_state(const struct ctl_ctx *c, uint16_t node, uint64_t incarnation)
{
    const struct orbit_node_info *ni = ctl_node(c, node);
    return ni && ni->incarnation == incarnation ? ctl_node_state(ni) : "gone";
}

const char *ctl_age(char *buf, size_t len, uint64_t ms)
{
    if (ms < 1000)
        snprintf(buf, len, "%" PRIu64 " ms", ms);
    else if (ms < 60000)
        snprintf(buf, len, "%.1f s", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, len, "%" PRIu64 " min %" PRIu64 " s", ms / 60000, ms % 60000 / 1000);
    else if (ms < 86400000)
        snprintf(buf, len, "%.1f h", (double)ms / 3600000.0);
    else
        snprintf(buf, len, "%" PRIu64 " d", ms / 86400000);
    return buf;
}

uint64_t ctl_age_ms(const struct ctl_ctx *c, uint64_t then_ms)
{
    return then_ms < c->now_ms ? c->now_ms - then_ms : 0;
}

void ctl_json_member(const struct ctl_ctx *c, uint16_t node, uint64_t incarnation, bool any_life)
{
    const struct orbit_node_info *ni = ctl_node(c, node);
    if (ni && any_life && incarnation == 0)
        incarnation = ni->incarnation;
    bool same = ni && ni->incarnation == incarnation;
    fprintf(c->out, "{\"node\":%u,\"incarnation\":\"%" PRIu64 "\",\"pid\":", node, incarnation);
    if (same)
        fprintf(c->out, "%" PRId32, ni->pid);
    else
        fputs("null", c->out);
    fprintf(c->out, ",\"state\":\"%s\"}", same ? ctl_node_state(ni) : "gone");
}

void ctl_text_member(const struct ctl_ctx *c, uint16_t node, uint64_t incarnation)
{
    const struct orbit_node_info *ni = ctl_node(c, node);
    if (ni && ni->incarnation == incarnation)
        fprintf(c->out, "node %u pid %" PRId32 " (%s)", node, ni->pid, ctl_node_state(ni));
    else
        fprintf(c->out, "node %u (gone)", node);
}

bool ctl_reclaim_empty(const struct orbit_reclaim *r)
{
    return !r->pool_resources && !r->pool_leases && !r->pool_reserved && !r->pool_creating && !r->stream_sides &&
           !r->stream_unread && !r->admission_claims && !r->admission_units && !r->arena_chunks &&
           !r->arena_bytes;
}

void ctl_json_reclaim(FILE *out, const struct orbit_reclaim *r)
{
    fprintf(out, "{\"tables\":%" PRIu32 ",\"pool_resources\":%" PRIu32 ",\"pool_units\":\"%" PRIu64 "\""
                 ",\"pool_leases\":\"%" PRIu64 "\",\"pool_reserved\":\"%" PRIu64 "\",\"pool_creating\":\"%" PRIu64 "\",\"stream_sides\":%" PRIu32
                 ",\"stream_unread\":\"%" PRIu64 "\",\"admission_claims\":%" PRIu32
                 ",\"admission_units\":\"%" PRIu64 "\",\"arena_chunks\":%" PRIu32 ",\"arena_bytes\":\"%" PRIu64
                 "\"}",
            r->tables, r->pool_resources, r->pool_units, r->pool_leases, r->pool_reserved, r->pool_creating,
            r->stream_sides,
            r->stream_unread, r->admission_claims, r->admission_units, r->arena_chunks, r->arena_bytes);
}

static const char *s_(uint64_t n) { return n == 1 ? "" : "s"; }

void ctl_text_reclaim(FILE *out, const struct orbit_reclaim *r)
{
    if (ctl_reclaim_empty(r)) {
        fputs("nothing held", out);
        return;
    }
    fprintf(out, "pool %" PRIu32 " resource%s (%" PRIu64 " unit%s, %" PRIu64 " lease%s on them), %" PRIu64
                 " reservation%s on others', %" PRIu64 " creation claim%s; streams %" PRIu32 " side%s, %" PRIu64 " unread byte%s; admission %"
                 PRIu32 " claim%s (%" PRIu64 " unit%s); arena %" PRIu32 " chunk%s (%" PRIu64 " byte%s)",
            r->pool_resources, s_(r->pool_resources), r->pool_units, s_(r->pool_units), r->pool_leases,
            s_(r->pool_leases), r->pool_reserved, s_(r->pool_reserved), r->pool_creating, s_(r->pool_creating), r->stream_sides, s_(r->stream_sides),
            r->stream_unread, s_(r->stream_unread), r->admission_claims, s_(r->admission_claims),
            r->admission_units, s_(r->admission_units), r->arena_chunks, s_(r->arena_chunks), r->arena_bytes,
            s_(r->arena_bytes));
}

uint64_t ctl_table_epoch(const struct ctl_ctx *c, uint8_t kind)
{
    struct orbit_table_info t[64];
    ssize_t n = orbit_fleet_tables(c->f, t, 64);
    for (ssize_t i = 0; i < n && i < 64; i++)
        if (t[i].kind == kind)
            return t[i].epoch;
    return 0;
}

void ctl_json_table_head(const struct ctl_ctx *c, const char *type, uint8_t kind, uint64_t epoch)
{
    fprintf(c->out, "{\"type\":\"%s\",\"kind\":%u,\"epoch\":\"%" PRIu64 "\"", type, (unsigned)kind, epoch);
}

int ctl_show_with(int (*section)(const struct ctl_ctx *, uint8_t), struct orbit_fleet *f, uint8_t kind,
                  bool json, FILE *out)
{
    struct ctl_ctx c;
    int rc = ctl_ctx_open(&c, f, json, out);
    if (rc == 0)
        rc = section(&c, kind);
    ctl_ctx_close(&c);
    return rc;
}
