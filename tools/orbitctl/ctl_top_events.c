/* SPDX-License-Identifier: MIT */
/* orbitctl top: what changed between two samples — deaths seen, reports made, nodes reclaimed. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "ctl_top.h"

/* Appends ", N what" when n is not 0; returns the new length (bounded by len). */
static size_t put_count(char *buf, size_t at, size_t len, uint64_t n, const char *one, const char *many)
{
    if (n == 0 || at >= len)
        return at;
    int w = snprintf(buf + at, len - at, "%s%" PRIu64 " %s", at ? ", " : "", n, n == 1 ? one : many);
    return w < 0 ? at : at + (size_t)w < len ? at + (size_t)w : len - 1;
}

void top_holds_text(const struct orbit_reclaim *r, char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return;
    buf[0] = '\0';
    at = put_count(buf, at, len, r->pool_leases, "lease", "leases");
    at = put_count(buf, at, len, r->pool_resources, "resource", "resources");
    at = put_count(buf, at, len, r->pool_reserved, "reservation", "reservations");
    at = put_count(buf, at, len, r->pool_creating, "creating", "creating");
    at = put_count(buf, at, len, r->stream_sides, "side", "sides");
    at = put_count(buf, at, len, r->stream_unread, "B unread", "B unread");
    at = put_count(buf, at, len, r->admission_claims, "claim", "claims");
    at = put_count(buf, at, len, r->admission_units, "unit", "units");
    at = put_count(buf, at, len, r->arena_chunks, "chunk", "chunks");
    if (at == 0)
        snprintf(buf, len, "nothing");
}

static void note(struct top_history *h, time_t at, const char *fmt, ...)
{
    memmove(&h->ev[1], &h->ev[0], (TOP_EVENTS - 1) * sizeof h->ev[0]);
    h->ev[0].at = at;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->ev[0].text, sizeof h->ev[0].text, fmt, ap);
    va_end(ap);
    if (h->n < TOP_EVENTS)
        h->n++;
}

static const struct top_node *find(const struct top_sample *s, const struct orbit_node_info *ni)
{
    for (size_t i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].info.node == ni->node && s->nodes[i].info.incarnation == ni->incarnation)
            return &s->nodes[i];
    return NULL;
}

static bool is_dead(const struct orbit_node_info *ni) { return ni->state == ORBIT_NODE_LIVE && !ni->alive; }

/* Nodes that died since prev, and lives of prev that ended. */
static void note_nodes(struct top_history *h, const struct top_sample *prev, const struct top_sample *cur)
{
    char holds[160];
    for (size_t i = 0; i < cur->n_nodes; i++) {
        const struct top_node *now = &cur->nodes[i], *was = find(prev, &now->info);
        if (was && !is_dead(&was->info) && is_dead(&now->info))
            note(h, cur->wall, "node %u pid %d died (not yet reported)", now->info.node, now->info.pid);
    }
    for (size_t i = 0; i < prev->n_nodes; i++) {
        const struct top_node *was = &prev->nodes[i];
        if (find(cur, &was->info))
            continue;
        if (was->have_holds) {
            top_holds_text(&was->holds, holds, sizeof holds);
            note(h, cur->wall, "node %u pid %d reclaimed: %s", was->info.node, was->info.pid, holds);
        } else {
            note(h, cur->wall, "node %u pid %d ended (left, or reported dead)", was->info.node, was->info.pid);
        }
    }
}

void top_history_note(struct top_history *h, const struct top_sample *prev, const struct top_sample *cur)
{
    if (!prev)
        return;
    if (prev->n_nodes < TOP_NODES && cur->n_nodes < TOP_NODES)   /* else a node may just be unread */
        note_nodes(h, prev, cur);
    if (prev->deaths_rc || cur->deaths_rc)
        return;
    const struct orbit_death_counters *a = &prev->deaths, *b = &cur->deaths;
    if (b->deaths_reported <= a->deaths_reported)
        return;   /* none, or the fleet was made again: nothing to say */
    uint64_t d = b->deaths_reported - a->deaths_reported;
    if (b->reclaim_ns_sum >= a->reclaim_ns_sum)
        note(h, cur->wall, "%" PRIu64 " death%s reported, reclaimed in %.3f ms on average", d, d == 1 ? "" : "s",
             (double)(b->reclaim_ns_sum - a->reclaim_ns_sum) / (double)d / 1e6);
    else
        note(h, cur->wall, "%" PRIu64 " death%s reported", d, d == 1 ? "" : "s");
}
