/* SPDX-License-Identifier: MIT */
/*
 * A resource slot as the pool's files share it: finding the slot an id
 * names, its units and fence read or swapped as one pair, and its pending
 * entries (held, done, released). The hot calls (reserve.c, accept.c) inline
 * all of it (design.md §11, "Fast paths").
 */
#ifndef ORB_POOL_RESOURCE_H
#define ORB_POOL_RESOURCE_H

#include "pool_layout.h"

/* Whether node's lane has been pre-faulted: other lanes are never touched. */
static ORB_HOT bool lane_ready(const struct orbit_pool *p, uint32_t node)
{
    return node < p->geo.fleet_capacity &&
           atomic_load_explicit(&p->lanes[node].populated, memory_order_acquire) != 0;
}

#define ID_GEN_BITS 0xffffff0000ull   /* orbit_id_generation's field: 0 is no generation */

/* An id of this pool names a slot inside the table; bounds come from the handle. */
static ORB_HOT int locate(struct orbit_pool *p, orbit_id id, struct pool_resource **r, uint64_t *index)
{
    /* The common case, a slot of our own lane (pre-faulted at open): kind and node in one
     * compare, the slot below the lane's capacity, a generation. */
    uint32_t slot = orbit_id_slot(id);
    if (orb_likely((uint32_t)(id >> 40) == p->own_hi && slot <= p->lane_mask && (id & ID_GEN_BITS))) {
        *index = (uint64_t)p->node * p->geo.lane_capacity + slot;
        *r = p->own_lane + slot;
        return 0;
    }
    if (orbit_id_kind(id) != p->kind || orbit_id_node(id) >= p->geo.fleet_capacity ||
        orbit_id_slot(id) >= p->geo.lane_capacity || orbit_id_generation(id) == 0)
        return -ORBIT_EMALFORMED;
    if (!lane_ready(p, orbit_id_node(id)))
        return -ORBIT_ESTALE;   /* nothing was ever registered in that lane */
    *index = (uint64_t)orbit_id_node(id) * p->geo.lane_capacity + orbit_id_slot(id);
    *r = pool_res_at(p, *index);
    return 0;
}

/* Live in the id's generation and owned by this handle's node and incarnation. */
static ORB_HOT int owned(struct orbit_pool *p, orbit_id id, struct pool_resource **r, uint64_t *index, uint32_t *word)
{
    int rc = locate(p, id, r, index);
    if (rc < 0)
        return rc;
    uint32_t w = atomic_load_explicit(&(*r)->state, memory_order_acquire);
    if (RES_GEN(w) != orbit_id_generation(id) || !RES_IN_USE(w))
        return -ORBIT_ESTALE;
    if (p->observer || orbit_id_node(id) != p->node ||
        atomic_load(&(*r)->owner_incarnation) != p->incarnation)
        return -ORBIT_ENOTOWNER;
    *word = w;
    return 0;
}

#define FENCE_MAX (1ull << 61)   /* past it no fence is given: f|HELD and f|DONE stay distinct */

/* A resource's units and fence, read or swapped as one pair. */
struct hot { uint64_t units, fence; };

static ORB_HOT struct hot hot_load(struct pool_resource *r)
{
    /* Two loads may tear: a torn pair only makes the CAS that names it fail. */
    return (struct hot){ atomic_load_explicit(&r->units, memory_order_acquire),
                         atomic_load_explicit(&r->fence, memory_order_acquire) };
}

#if POOL_PAIR_CAS && defined(__x86_64__)
/* One 16-byte CAS (lock cmpxchg16b, a full barrier); on failure *seen is the pair it found,
 * read atomically. In asm: the builtin moves the 128-bit operands through the stack. */
static ORB_HOT bool hot_cas(struct pool_resource *r, struct hot *seen, struct hot next)
{
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*(volatile unsigned __int128 *)(void *)&r->units),
                           "+a"(seen->units), "+d"(seen->fence)
                         : "b"(next.units), "c"(next.fence)
                         : "memory");
    return ok;
}
#elif POOL_PAIR_CAS
/* One 16-byte CAS (a full barrier); on failure *seen is the pair read again. */
static ORB_HOT bool hot_cas(struct pool_resource *r, struct hot *seen, struct hot next)
{
    typedef unsigned __int128 u128;
    if (__sync_bool_compare_and_swap((u128 *)(void *)&r->units, ((u128)seen->fence << 64) | seen->units,
                                     ((u128)next.fence << 64) | next.units))
        return true;
    *seen = hot_load(r);
    return false;
}
#else
/*
 * Without a 16-byte CAS, only take_unit swaps the pair: the fence first (a
 * fence lost to a failed unit CAS is only skipped), then the unit; every
 * accept then goes through its entry's CAS.
 */
static inline bool hot_cas(struct pool_resource *r, struct hot *seen, struct hot next)
{
    uint64_t f = seen->fence;
    if (!atomic_compare_exchange_strong(&r->fence, &f, next.fence)) {
        *seen = hot_load(r);
        return false;
    }
    if (atomic_compare_exchange_strong(&r->units, &seen->units, next.units))
        return true;
    seen->fence = next.fence;
    return false;
}
#endif

/* Accepted leases keep their entries (the held path): capacity within them, and the pair CAS. */
static ORB_HOT bool holds_entries(uint64_t capacity)
{
    return POOL_PAIR_CAS && capacity <= POOL_PENDING;
}

static ORB_HOT uint32_t bits_count(uint32_t bits) { return units_reserved((uint64_t)bits << 32); }

/* The DONE entries a CAS folds, with the fence each showed: what their release names. */
struct folded { uint32_t bits; uint64_t fence[POOL_PENDING]; };

/* Entry b shows f|HELD for an f already released: a new holder took it and has not published. */
static ORB_HOT bool entry_released(struct pool_resource *r, uint32_t b, uint64_t e)
{
    /* Acquire: pairs with the release that let the new holder take it. */
    return atomic_load_explicit(&r->pending[b].released, memory_order_acquire) == (e & ~ENTRY_HELD);
}

/*
 * Of the set entries in bits: those held by an accepted lease, and those
 * completed (DONE, with their fences). One still showing a released fence is
 * a new holder's before its publish: neither (a pending reservation).
 */
static ORB_HOT void held_entries(struct pool_resource *r, uint32_t bits, uint32_t *held, struct folded *done)
{
    *held = done->bits = 0;
    for (; bits; bits &= bits - 1) {
        uint32_t b = (uint32_t)__builtin_ctz(bits);
        /* Acquire, after the pair: a set bit's entry shows its own holder, or a released fence. */
        uint64_t e = atomic_load_explicit(&r->pending[b].fence, memory_order_acquire);
        if (!entry_held(e) || entry_released(r, b, e))
            continue;
        /* Acquire: a DONE pairs with the completer's release, its execution's work before it. */
        if (atomic_load_explicit(&r->pending[b].since, memory_order_acquire) == ((e & ~ENTRY_HELD) | SINCE_DONE)) {
            done->bits |= 1u << b;
            done->fence[b] = e & ~ENTRY_HELD;
        } else {
            *held |= 1u << b;
        }
    }
}

/*
 * Release the entries this CAS folded: a reserver may take one once its
 * released word names the fence it shows. Only a folder (a reserve, or a
 * waiter's fold) writes an entry's released word, and only with the fence
 * that entry was folded at; fences never repeat in a slot, so a late release
 * can only name a fence the entry no longer shows. The owner wipes by CAS
 * instead: what its reconcile folds, and what a dead folder left.
 */
static ORB_HOT void release_folded(struct pool_resource *r, const struct folded *f)
{
    for (uint32_t bits = f->bits; bits; bits &= bits - 1) {
        uint32_t b = (uint32_t)__builtin_ctz(bits);
        atomic_store_explicit(&r->pending[b].released, f->fence[b], memory_order_release);
    }
}

/* Clear entry b's bit in tenancy gen; whether this call cleared it. */
static inline bool give_back(struct pool_resource *r, uint32_t gen, uint32_t b)
{
    uint64_t u = atomic_load(&r->units), bit = 1ull << (32 + b);
    do {
        if (units_tag(u) != gen_tag(gen) || !(u & bit))
            return false;   /* the tenancy ended: its units were voided already */
    } while (!atomic_compare_exchange_weak(&r->units, &u, u & ~bit));
    return true;
}

/* A tenancy's end (register.c): CLOSING, then CLOSED or EXHAUSTED once its key no longer
 * names it. 0, -ORBIT_ESTALE (ended by someone else first) or -ORBIT_ECORRUPT. */
int pool_resource_close(struct orbit_pool *p, uint64_t index, uint32_t w);
/* CLOSING -> CLOSED (or EXHAUSTED), idempotent: a reporter finishes a dead closer's close. */
int pool_resource_finish_close(struct orbit_pool *p, uint64_t index, uint32_t closing);

#endif
