/* SPDX-License-Identifier: MIT */
/*
 * What one life holds in a payload arena, as node_dead gives it back: runs in
 * its own lane it reserved or committed and nobody reads yet, and runs in any
 * lane it was reading. (Runs of live producers queued to an exchange whose
 * receiver died are returned too, but belong to their producers: not counted.)
 */
#include <stdlib.h>
#include <orbit/inspect.h>
#include "exch_layout.h"

static bool held_by(const struct orbit_chunk_info *c, uint16_t node, uint64_t inc)
{
    if (c->state == ORBIT_CHUNK_READING)   /* as reclaim_reader: a reader with no stamp yet counts */
        return c->reader == (node & 0xfffu) && (c->reader_incarnation == inc || c->reader_incarnation == 0);
    return (c->state == ORBIT_CHUNK_RESERVED || c->state == ORBIT_CHUNK_LIVE) && c->desc.node == node &&
           c->producer_incarnation == inc;
}

void arena_account(void *table, uint16_t node, uint64_t inc, struct orbit_reclaim *out)
{
    struct orbit_arena *a = table;
    ssize_t n = orbit_arena_chunks(a, NULL, 0);
    struct orbit_chunk_info *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    ssize_t got = v ? orbit_arena_chunks(a, v, (size_t)n) : 0;
    for (ssize_t i = 0; i < got && i < n; i++) {
        if (!held_by(&v[i], node, inc))
            continue;
        uint32_t slots = v[i].desc.slot_count;
        if (slots == 0 || slots > a->slots_per_lane - v[i].desc.first_slot)
            slots = 1;   /* not committed yet: node_dead frees its head, the sweep its tail */
        out->arena_chunks++;
        out->arena_bytes += (uint64_t)slots * a->slot_bytes;
    }
    free(v);
}
