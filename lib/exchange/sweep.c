/* SPDX-License-Identifier: MIT */
/*
 * Payload arena: after a death, committed chunks nobody can take any more.
 *
 * A chunk committed to an exchange is LIVE until its receiver consumes it. When the
 * receiver dies, or its control stream ended with the descriptor still queued, no one
 * will: those chunks are found through the control table (the exchange id's kind) and
 * returned. A chunk whose receiving side is still held by a live process is left alone.
 */
#include <stdlib.h>
#include "exch_layout.h"

struct pending { uint32_t lane, slot; uint64_t tag; orbit_id exchange; uint8_t flow; };

static int info_cmp(const void *x, const void *y)
{
    orbit_id a = ((const struct orbit_stream_info *)x)->id, b = ((const struct orbit_stream_info *)y)->id;
    return a < b ? -1 : a > b;
}

/* Committed chunks of exchanges whose control table is `kind`; *n of them. */
static struct pending *collect(struct orbit_arena *a, uint8_t kind, size_t *n)
{
    struct pending *v = NULL;
    size_t cap = 0;
    *n = 0;
    for (uint32_t lane = 0; lane < a->fleet_capacity; lane++) {
        for (uint32_t i = 0; i < a->slots_per_lane; i++) {
            struct arena_slot *s = arena_slot_at(a, lane, i);
            uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
            orbit_id x = atomic_load_explicit(&s->exchange, memory_order_relaxed);
            if (ATAG_STATE(t) != ASLOT_LIVE || x == 0 || orbit_id_kind(x) != kind)
                continue;
            if (*n == cap) {
                size_t grown = cap ? cap * 2 : 32;
                struct pending *p = realloc(v, grown * sizeof *p);
                if (!p)
                    break;
                v = p;
                cap = grown;
            }
            v[(*n)++] = (struct pending){ lane, i, t, x, (uint8_t)atomic_load(&s->flow) };
        }
    }
    return v;
}

/* Whether the receiver of p can still take it. */
static bool deliverable(const struct pending *p, const struct orbit_stream_info *si, size_t n,
                        uint16_t dead_node, uint64_t dead_inc)
{
    struct orbit_stream_info key = { .id = p->exchange };
    const struct orbit_stream_info *f = bsearch(&key, si, n, sizeof *si, info_cmp);
    if (!f)
        return false;   /* the control stream ended: the descriptor went with it */
    unsigned rx = p->flow == ORBIT_FLOW_A_TO_B ? 1 : 0;
    if (f->side[rx].state == ORBIT_SIDE_RELEASED || f->side[rx].state == ORBIT_SIDE_DEAD)
        return false;
    return !(f->side[rx].state == ORBIT_SIDE_CLAIMED && f->side[rx].node == dead_node &&
             f->side[rx].incarnation == dead_inc);
}

static void sweep_kind(struct orbit_arena *a, uint8_t kind, uint16_t node, uint64_t inc)
{
    size_t n;
    struct pending *v = collect(a, kind, &n);
    struct orbit_streams *s = NULL;
    if (n == 0 || orbit_streams_open_existing(a->fleet, kind, &s) < 0) {
        free(v);
        return;
    }
    ssize_t total = orbit_streams_list(s, NULL, 0);
    size_t cap = total > 0 ? (size_t)total + 64 : 1;
    struct orbit_stream_info *si = calloc(cap, sizeof *si);
    ssize_t got = si ? orbit_streams_list(s, si, cap) : -ENOMEM;
    /* A listing that overflowed might miss a live stream: then reclaim nothing. */
    if (got >= 0 && (size_t)got <= cap) {
        qsort(si, (size_t)got, sizeof *si, info_cmp);
        for (size_t k = 0; k < n; k++) {
            if (deliverable(&v[k], si, (size_t)got, node, inc))
                continue;
            uint64_t want = v[k].tag;
            struct arena_slot *h = arena_slot_at(a, v[k].lane, v[k].slot);
            uint32_t count = atomic_load(&h->count);
            /* The CAS arbitrates with a late consume and with the producer's own withdraw. */
            if (atomic_compare_exchange_strong(&h->tag, &want, ATAG(ATAG_GEN(want), ASLOT_RECLAIMING, node))) {
                arena_free_run(a, v[k].lane, v[k].slot, ATAG_GEN(want), count);
                arena_count(a, ARENA_TALLY_RECLAIMED, ARENA_CTR_RECLAIMED, 1);
            }
        }
    }
    free(si);
    orbit_streams_close(s);
    free(v);
}

void arena_sweep_undeliverable(struct orbit_arena *a, uint16_t node, uint64_t inc)
{
    bool kinds[256] = { false };
    for (uint32_t lane = 0; lane < a->fleet_capacity; lane++)
        for (uint32_t i = 0; i < a->slots_per_lane; i++) {
            struct arena_slot *s = arena_slot_at(a, lane, i);
            orbit_id x = atomic_load_explicit(&s->exchange, memory_order_relaxed);
            if (x && ATAG_STATE(atomic_load_explicit(&s->tag, memory_order_relaxed)) == ASLOT_LIVE)
                kinds[orbit_id_kind(x)] = true;
        }
    for (unsigned k = 0; k < 256; k++)
        if (kinds[k] && k != a->kind && k != ORB_FLEET_KIND)
            sweep_kind(a, (uint8_t)k, node, inc);
}
