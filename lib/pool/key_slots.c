/* SPDX-License-Identifier: MIT */
/*
 * The key table's bottom floor: a key's counts, a reclaimed tenancy becoming
 * a tombstone, and ringing and recounting its watchers. The op-lock intents
 * (intents.c) and the key table's lookups, holds and watches (keys.c) build
 * on these.
 */
#include "pool_layout.h"

bool pool_counts_add(_Atomic uint64_t *counts, int64_t live, int64_t creating)
{
    uint64_t c = atomic_load(counts), next;
    do {
        int64_t l = (int64_t)pool_hi(c) + live, n = (int64_t)pool_lo(c) + creating;
        l = l < 0 ? 0 : l > UINT32_MAX ? UINT32_MAX : l;
        n = n < 0 ? 0 : n > UINT32_MAX ? UINT32_MAX : n;
        next = pool_pack((uint32_t)l, (uint32_t)n);
        if (next == c)
            return false;
    } while (!atomic_compare_exchange_weak(counts, &c, next));
    return true;
}

/*
 * The last reference of tenancy `tag` is gone and REFS_CLOSED is ours: the
 * slot becomes a tombstone. A CAS, not a store: under the key lock an insert
 * may have finished this reclaim already and put a new tenancy here.
 */
void pool_key_reclaim(struct orbit_pool *p, uint32_t i, uint64_t tag)
{
    struct pool_key *k = pool_key_at(p, i);
    if (KEY_TAG_STATE(tag) == KEY_LIVE &&
        atomic_compare_exchange_strong(&k->tag, &tag, KEY_TAG(KEY_TAG_SEQ(tag), KEY_TOMB)))
        atomic_fetch_add_explicit(&p->hdr->tombstones, 1, memory_order_relaxed);
    /* seq_cst tag change, then the parked load: a prep waiter that armed before this either is
     * seen here and woken, or sees the tag change in its own re-check (Dekker pairing). */
    if (atomic_load(&k->wait.parked))
        orb_wait_signal(&k->wait, &p->stats);
    atomic_fetch_add_explicit(&p->key_reclaims, 1, memory_order_relaxed);
}

/* ---- watchers ---- */

void pool_watch_ring(struct orbit_pool *p, uint32_t w, uint64_t bits)
{
    for (uint64_t b = bits; b; b &= b - 1) {
        uint32_t node = w * 64 + (uint32_t)__builtin_ctzll(b);
        if (node < p->geo.fleet_capacity)
            orb_fleet_ring_doorbell(p->fleet, node, &p->stats);
    }
}

/* watch_count = the bits set: exact, as no bit moves without the op lock we hold. */
void pool_watch_recount(struct orbit_pool *p, uint32_t i)
{
    uint32_t n = 0;
    for (uint32_t w = 0; w < p->watch_words; w++)
        n += (uint32_t)__builtin_popcountll(atomic_load(&pool_key_watchers(p, i)[w]));
    atomic_store(&pool_key_at(p, i)->watch_count, n);
}
