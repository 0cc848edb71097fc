/* SPDX-License-Identifier: MIT */
/*
 * Resource slots: register, unregister, drain, reserve, accept, complete,
 * reconcile, candidates, owners, death and reset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

static uint32_t next_gen(uint32_t gen) { return gen % POOL_GEN_MAX + 1; }

/* A free slot of this node's lane, taken out of EMPTY/CLOSED by CAS; rotates from the cursor. */
static int lane_take(struct orbit_pool *p, uint32_t *slot, uint32_t *word)
{
    struct pool_lane *lane = &p->lanes[p->node];
    uint32_t start = atomic_load(&lane->cursor);
    for (uint32_t n = 0; n < p->geo.lane_capacity; n++) {
        uint32_t s = (start + n) & p->lane_mask;
        struct pool_resource *r = pool_res_at(p, (uint64_t)p->node * p->geo.lane_capacity + s);
        uint32_t w = atomic_load(&r->state);
        if (RES_STATE(w) != RES_EMPTY && RES_STATE(w) != RES_CLOSED)
            continue;
        if (atomic_load(&r->uses) >= p->geo.generation_limit) {
            atomic_compare_exchange_strong(&r->state, &w, RES_WORD(RES_GEN(w), RES_EXHAUSTED));
            continue;
        }
        /* The CAS is the claim: one allocator moves the slot out of EMPTY/CLOSED. */
        if (!atomic_compare_exchange_strong(&r->state, &w, RES_WORD(RES_GEN(w), RES_ALLOCATING)))
            continue;
        atomic_store(&r->owner_incarnation, p->incarnation);   /* first: node_dead can find it */
        atomic_store(&lane->cursor, (s + 1) & p->lane_mask);
        *slot = s;
        *word = w;
        return 0;
    }
    return orb_fail(-ORBIT_EFULL, "node %u's lane is full: its %u resource slots are registered, closing or "
                    "spent (generation_limit)", p->node, p->geo.lane_capacity);
}

static void resource_fill(struct orbit_pool *p, struct pool_resource *r, uint32_t gen, orbit_key key,
                          uint32_t key_index, uint32_t capacity)
{
    atomic_fetch_add(&r->uses, 1);
    atomic_store(&r->owner_node, p->node);
    atomic_store(&r->capacity, capacity);
    atomic_store(&r->key_lo, key.lo);
    atomic_store(&r->key_hi, key.hi);
    atomic_store(&r->key_index, key_index);
    atomic_store(&r->last_reserve_ms, 0);
    for (unsigned b = 0; b < POOL_PENDING; b++) {
        atomic_store(&r->pending[b].fence, 0);
        atomic_store(&r->pending[b].since, 0);
        atomic_store(&r->pending[b].holder, 0);
        atomic_store(&r->pending[b].released, 0);
    }
    /* A new tag: CASes prepared against the previous tenancy fail from here on. */
    atomic_store(&r->units, units_make(gen_tag(gen), 0, 0));
}

int orbit_pool_register(struct orbit_pool *p, orbit_key key, uint32_t capacity, orbit_id *out)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (capacity == 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: capacity 0: a resource has 1 or more units", __func__);
    if (p->observer)
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer's pool registers nothing (join as a member)",
                        __func__);
    uint32_t ki, slot = 0, w = 0;
    rc = pool_key_hold(p, key, &ki);
    if (rc < 0)
        return rc;
    if ((rc = lane_take(p, &slot, &w)) < 0) {
        pool_key_release(p, ki);
        return rc;
    }
    uint64_t index = (uint64_t)p->node * p->geo.lane_capacity + slot;
    struct pool_resource *r = pool_res_at(p, index);
    struct pool_keyop op;
    if ((rc = pool_keyop_begin(p, p->node, ki, INTENT_REGISTER, index, &op)) < 0) {
        atomic_store(&r->state, w);   /* ours since lane_take's CAS: back as it was */
        pool_key_release(p, ki);
        return rc;
    }
    uint32_t gen = next_gen(RES_GEN(w));
    resource_fill(p, r, gen, key, ki, capacity);
    /* The resource's own pin and its count come before anyone sees it LIVE; the member bit
     * last: a set bit proves both are in (resource_uncount takes them out once). Under the
     * op lock with an intent: a register cut short is settled by whoever takes the lock. */
    pool_key_pin_held(p, ki);
    pool_counts_add(&pool_key_at(p, ki)->counts, 1, 0);
    pool_park_here(p, POOL_PARK_REGISTER);
    atomic_fetch_or(&pool_key_members(p, ki)[index / 64], 1ull << (index % 64));
    pool_keyop_end(p, &op);
    /* Release: every field above is visible to a reader that sees LIVE in this generation. */
    atomic_store_explicit(&r->state, RES_WORD(gen, RES_LIVE), memory_order_release);
    pool_key_changed(p, ki);
    pool_key_release(p, ki);
    *out = orbit_id_make(p->kind, p->node, gen, slot);
    return 0;
}

/*
 * Take the slot out of its key once: whoever clears its member bit (the closer,
 * or a reporter finishing a dead closer's close) drops the live count and the
 * reference. -ORBIT_ECORRUPT for a key index out of range (no key is touched).
 */
static int resource_uncount(struct orbit_pool *p, uint64_t index)
{
    uint32_t ki = atomic_load(&pool_res_at(p, index)->key_index);   /* still this tenancy's */
    if (ki > p->key_mask)
        return -ORBIT_ECORRUPT;
    _Atomic uint64_t *word = &pool_key_members(p, ki)[index / 64];
    uint64_t bit = 1ull << (index % 64);
    if (!(atomic_load(word) & bit))
        return 0;   /* taken out already, or never put in */
    /* The lane's node, or its reporter: either acts for that node, with its intent entries. */
    struct pool_keyop op;
    int rc = pool_keyop_begin(p, (uint16_t)(index / p->geo.lane_capacity), ki, INTENT_UNCOUNT, index, &op);
    if (rc < 0)
        return rc;
    /* The bit first: whoever clears it takes the count and the pin out (a settle finishes). */
    bool ours = atomic_fetch_and(word, ~bit) & bit;
    if (ours) {
        pool_park_here(p, POOL_PARK_UNCOUNT);
        pool_counts_add(&pool_key_at(p, ki)->counts, -1, 0);
        pool_key_unpin_locked(p, ki);
    }
    pool_keyop_end(p, &op);
    if (ours)
        pool_key_changed(p, ki);   /* a slot reclaimed meanwhile only sees a spurious change */
    return 0;
}

/* CLOSING -> CLOSED (or EXHAUSTED): the key no longer names the slot when an allocator can take it. */
static int resource_finish_close(struct orbit_pool *p, uint64_t index, uint32_t closing)
{
    struct pool_resource *r = pool_res_at(p, index);
    uint32_t gen = RES_GEN(closing);
    /* Same tag, no units: a late complete of this tenancy finds nothing to give back. */
    atomic_store(&r->units, units_make(gen_tag(gen), 0, 0));
    int rc = resource_uncount(p, index);
    unsigned next = atomic_load(&r->uses) >= p->geo.generation_limit ? RES_EXHAUSTED : RES_CLOSED;
    /* Release, by CAS: of two finishers (a reporter and another) one moves it. */
    atomic_compare_exchange_strong_explicit(&r->state, &closing, RES_WORD(gen, next),
                                            memory_order_release, memory_order_relaxed);
    return rc;
}

/*
 * End the tenancy word w names: 0, -ORBIT_ESTALE when someone else ended it
 * first, -ORBIT_ECORRUPT when it ended but named no valid key. CLOSING keeps
 * the slot out of reach of allocators until the key no longer refers to it:
 * only then is it CLOSED and reusable. A closer that dies in CLOSING leaves it
 * to the death report, which finishes it (resource_finish_close is idempotent).
 */
static int resource_close(struct orbit_pool *p, uint64_t index, uint32_t w)
{
    struct pool_resource *r = pool_res_at(p, index);
    uint32_t gen = RES_GEN(w);
    do {
        if (RES_GEN(w) != gen || !RES_IN_USE(w))
            return -ORBIT_ESTALE;
        /* The state CAS carries the generation: exactly one closer ends this tenancy. */
    } while (!atomic_compare_exchange_weak(&r->state, &w, RES_WORD(gen, RES_CLOSING)));
    return resource_finish_close(p, index, RES_WORD(gen, RES_CLOSING));
}

int orbit_pool_unregister(struct orbit_pool *p, orbit_id id)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    struct pool_resource *r;
    uint64_t index;
    uint32_t w;
    rc = owned(p, id, &r, &index, &w);
    if (rc == 0)
        rc = resource_close(p, index, w);
    return rc < 0 ? pool_id_refused(p, rc, id) : rc;
}

int orbit_pool_drain(struct orbit_pool *p, orbit_id id)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    struct pool_resource *r;
    uint64_t index;
    uint32_t w;
    rc = owned(p, id, &r, &index, &w);
    if (rc < 0)
        return pool_id_refused(p, rc, id);
    uint32_t gen = RES_GEN(w);
    for (;;) {
        if (RES_GEN(w) != gen || !RES_IN_USE(w))
            return pool_id_refused(p, -ORBIT_ESTALE, id);
        if (RES_STATE(w) == RES_DRAINING)
            return 0;
        /* The CAS carries the generation: a later tenant is never drained by an old id. */
        if (atomic_compare_exchange_weak(&r->state, &w, RES_WORD(gen, RES_DRAINING)))
            return 0;
    }
}

/* ---- reservations ---- */

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
static bool hot_cas(struct pool_resource *r, struct hot *seen, struct hot next)
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

/* Entry of the first free one at or after fence + 1 (mod 16): its fence is fence + 1 + skip. */
static ORB_HOT uint32_t ring_skip(uint64_t fence, uint32_t bits)
{
    uint32_t from = (uint32_t)((fence + 1) % POOL_PENDING);
    if (!(bits & (1u << from)))
        return 0;   /* the common case: the next entry is free */
    uint32_t rot = ((bits >> from) | (bits << (POOL_PENDING - from))) & 0xffffu;
    return (uint32_t)__builtin_ctz(~rot & 0xffffu);
}

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

/* The entry the next fence lands in (*next: that fence), POOL_PENDING when every entry is busy. */
static ORB_HOT uint32_t free_entry(struct pool_resource *r, uint64_t fence, uint32_t busy, uint64_t *next)
{
    for (uint32_t b;; busy |= 1u << b) {
        if (busy == 0xffff)
            return POOL_PENDING;
        *next = fence + 1 + ring_skip(fence, busy);
        b = (uint32_t)(*next % POOL_PENDING);
        /* A free entry still showing a fence is being wiped by the accept that freed it, or
         * folded and not yet released: skipped until it is (acquire, after the pair: a 0 or
         * a release seen here is that wipe or release, or later). */
        uint64_t e = atomic_load_explicit(&r->pending[b].fence, memory_order_acquire);
        if (e == 0 || (entry_held(e) && entry_released(r, b, e)))
            return b;
    }
}

static bool fold_done(struct pool_resource *r, uint32_t gen);

/*
 * One CAS takes a unit and pending entry *fence % 16 (and, with the pair, the
 * fence), and folds the DONE entries it saw (*done: their bits cleared, for
 * the caller to release); returns the entry.
 */
static ORB_HOT int take_unit(struct pool_resource *r, uint32_t gen, uint64_t *fence, struct folded *done)
{
    uint64_t capacity = atomic_load_explicit(&r->capacity, memory_order_relaxed);
    bool held = holds_entries(capacity);
    struct hot h = hot_load(r), next;
    uint32_t b;
    for (;;) {
        if (units_tag(h.units) != gen_tag(gen))
            return -ORBIT_ESTALE;
        uint32_t active_held = 0;
        done->bits = 0;
        if (held && units_bits(h.units))
            held_entries(r, units_bits(h.units), &active_held, done);
        /* DONE entries count as free: this CAS clears their bits, judged on the pair it replaces. */
        uint64_t kept = h.units & ~((uint64_t)done->bits << 32);
        if ((uint64_t)units_reserved(kept) + units_active(kept) >= capacity || h.fence >= FENCE_MAX)
            return -ORBIT_EBUSY;
        b = free_entry(r, h.fence, units_bits(h.units), &next.fence);
        if (b == POOL_PENDING) {
            if (!done->bits)
                return -ORBIT_EBUSY;
            fold_done(r, gen);   /* every entry busy, some DONE: fold them alone, then look again */
            h = hot_load(r);
            continue;
        }
        next.units = kept | (1ull << (32 + b));
        /* Capacity, entry and fence checked on the pair the CAS replaces: never over-admits. */
        if (hot_cas(r, &h, next))
            break;
    }
    *fence = next.fence;
    return (int)b;
}

/*
 * take_unit's common case on the held path: at most one entry set, and the
 * next fence's entry free. The same checks on the same pair as take_unit, so
 * either it takes the unit by the same CAS, or nothing was written and
 * take_unit decides (a refusal, a busier ring, a lost race). Returns the
 * entry (*fence its fence; *fold_b the entry it folded, POOL_PENDING for
 * none, *fold_f the fence that entry showed), or -1: take_unit's turn.
 */
static ORB_HOT int take_next(struct pool_resource *r, uint32_t gen, uint64_t *fence, uint32_t *fold_b, uint64_t *fold_f)
{
    uint64_t capacity = atomic_load_explicit(&r->capacity, memory_order_relaxed);
    struct hot h = hot_load(r);
    uint32_t bits = units_bits(h.units);
    if (!holds_entries(capacity) || units_tag(h.units) != gen_tag(gen) || (bits & (bits - 1)) ||
        h.fence >= FENCE_MAX)
        return -1;
    uint64_t kept = h.units;
    *fold_b = POOL_PENDING;
    if (bits) {
        /* held_entries for one bit: acquire loads after the pair, as there. */
        uint32_t d = (uint32_t)__builtin_ctz(bits);
        uint64_t e = atomic_load_explicit(&r->pending[d].fence, memory_order_acquire);
        if (entry_held(e) && !entry_released(r, d, e) &&
            atomic_load_explicit(&r->pending[d].since, memory_order_acquire) == ((e & ~ENTRY_HELD) | SINCE_DONE)) {
            *fold_b = d;
            *fold_f = e & ~ENTRY_HELD;
            kept &= ~(1ull << (32 + d));
        }
    }
    uint32_t b = (uint32_t)((h.fence + 1) % POOL_PENDING);
    /* At most one bit set (checked above): what is reserved is that bit, unless folded. */
    if ((uint64_t)(units_bits(kept) != 0) + units_active(kept) >= capacity || (bits & (1u << b)))
        return -1;
    /* free_entry's test of the next entry (acquire, after the pair). */
    uint64_t e = atomic_load_explicit(&r->pending[b].fence, memory_order_acquire);
    if (e != 0 && !(entry_held(e) && entry_released(r, b, e)))
        return -1;
    /* Capacity, entry and fence checked on the pair the CAS replaces: never over-admits. */
    if (!hot_cas(r, &h, (struct hot){ kept | (1ull << (32 + b)), h.fence + 1 }))
        return -1;
    *fence = h.fence + 1;
    return (int)b;
}

/* Clear entry b's bit in tenancy gen; whether this call cleared it. */
static bool give_back(struct pool_resource *r, uint32_t gen, uint32_t b)
{
    uint64_t u = atomic_load(&r->units), bit = 1ull << (32 + b);
    do {
        if (units_tag(u) != gen_tag(gen) || !(u & bit))
            return false;   /* the tenancy ended: its units were voided already */
    } while (!atomic_compare_exchange_weak(&r->units, &u, u & ~bit));
    return true;
}

/* Why a call on resource id was refused with rc, for orbit_last_error; returns rc. */
ORB_COLD int pool_id_refused(const struct orbit_pool *p, int rc, orbit_id id)
{
    char text[ORBIT_ID_TEXT_MAX];
    snprintf(text, sizeof text, "%u:%u:%llu", (unsigned)orbit_id_kind(id), (unsigned)orbit_id_node(id),
             (unsigned long long)orbit_id_counter(id));
    switch (-rc) {
    case ORBIT_EBUSY:
        return orb_fail_text(rc, "every unit of the resource is reserved or active, or 16 reservations wait "
                                 "for its owner to accept them");
    case ORBIT_EMALFORMED:
        return orb_fail(rc, "id %s is not a resource of this pool (kind %u, %u nodes, %u slots a lane, "
                        "generation 1 or more)", text, p->kind, p->geo.fleet_capacity, p->geo.lane_capacity);
    case ORBIT_ESTALE:
        return orb_fail(rc, "resource %s: no such live resource (unregistered, its owner died or left, the "
                        "pool was reset, or never registered)", text);
    case ORBIT_ENOTOWNER:
        return orb_fail(rc, "resource %s is node %u's; this handle is node %u%s", text, orbit_id_node(id),
                        p->node, p->observer ? " (an observer)" : "");
    case ORBIT_EDRAINING:
        return orb_fail(rc, "resource %s is draining: it takes no new reservations", text);
    default:
        return orb_fail(rc, "resource %s: %s", text, orbit_strerror(rc));
    }
}

static ORB_COLD int reserve_refused(struct orbit_pool *p, int rc, orbit_id id)
{
    orb_count(&p->ctr, rc == -ORBIT_EBUSY ? POOL_CTR_BUSY : POOL_CTR_STALE, 1);
    return pool_id_refused(p, rc, id);
}

/* The state word w is not LIVE in generation gen: the tenancy ended, or it drains. */
static ORB_COLD int reserve_state_refused(struct orbit_pool *p, uint32_t w, uint32_t gen, orbit_id id)
{
    bool draining = RES_GEN(w) == gen && RES_STATE(w) == RES_DRAINING;
    return reserve_refused(p, draining ? -ORBIT_EDRAINING : -ORBIT_ESTALE, id);
}

/* The slot ended between the state check and the CAS: the unit taken in entry b is void. */
static ORB_COLD int reserve_voided(struct orbit_pool *p, struct pool_resource *r, uint32_t gen, uint32_t b, orbit_id id)
{
    give_back(r, gen, b);
    return reserve_refused(p, -ORBIT_ESTALE, id);
}

/* take_unit and its folds' release, for what take_next leaves: the general ring. */
static ORB_NOINLINE int reserve_take(struct orbit_pool *p, struct pool_resource *r, uint32_t gen,
                                                  uint64_t *fence)
{
    struct folded folded;
    int b = take_unit(r, gen, fence, &folded);
    if (b >= 0 && folded.bits) {
        pool_park_here(p, POOL_PARK_FOLD);
        release_folded(r, &folded);
    }
    return b;
}

static ORB_COLD int reserve_no_out(void)
{
    return orb_fail(-ORBIT_EMALFORMED, "orbit_pool_reserve: out is NULL");
}

int orbit_pool_reserve(struct orbit_pool *p, orbit_id id, struct orbit_lease *out)
{
    int rc = pool_enter(p, __func__);
    if (orb_unlikely(rc < 0))
        return rc;
    if (orb_unlikely(!out))
        return reserve_no_out();
    /* First, while little is live across the call: stamps age in ms, and a tick's error (or
     * a few ns early) is in the noise; before the CAS, which would hold the clock's loads back. */
    uint64_t now = orb_wall_ms_coarse();
    struct pool_resource *r;
    uint64_t index, fence;
    rc = locate(p, id, &r, &index);
    if (orb_unlikely(rc < 0))
        return pool_id_refused(p, rc, id);
    uint32_t gen = orbit_id_generation(id);
    /* One compare for the common case; the refusal sorts out which. */
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    if (orb_unlikely(w != RES_WORD(gen, RES_LIVE)))
        return reserve_state_refused(p, w, gen, id);
    uint32_t fold_b;
    uint64_t fold_f = 0;
    int b = take_next(r, gen, &fence, &fold_b, &fold_f);
    if (orb_likely(b >= 0) && fold_b < POOL_PENDING) {
        pool_park_here(p, POOL_PARK_FOLD);
        /* Release: as release_folded, the entry's wipe and fold before a reserver takes it. */
        atomic_store_explicit(&r->pending[fold_b].released, fold_f, memory_order_release);
    } else if (orb_unlikely(b < 0)) {
        b = reserve_take(p, r, gen, &fence);
        if (b < 0)
            return reserve_refused(p, b, id);
    }
    /* The slot may have ended between the state check and the CAS: then the unit is void
     * (draining since is fine: the reservation was taken while it was live). */
    w = atomic_load(&r->state);
    if (orb_unlikely(w != RES_WORD(gen, RES_LIVE)) && (RES_GEN(w) != gen || !RES_IN_USE(w)))
        return reserve_voided(p, r, gen, (uint32_t)b, id);
    /* Entry b is ours by its bit: stamp it with our node, name our incarnation, then publish
     * the fence (release: a reader that acquires f sees f's stamp and holder). */
    struct pool_pending *e = &r->pending[b];
    atomic_store_explicit(&e->since, (now ? now : 1) | p->stamp_node, memory_order_relaxed);
    atomic_store_explicit(&e->holder, p->incarnation, memory_order_relaxed);
    atomic_store_explicit(&e->fence, fence, memory_order_release);
    atomic_store_explicit(&r->last_reserve_ms, now, memory_order_relaxed);
    orb_count(&p->ctr, POOL_CTR_RESERVATIONS, 1);
    *out = (struct orbit_lease){ .id = id, .fence = fence, .holder = p->node,
                                 .holder_incarnation = p->incarnation, .epoch = pool_epoch_now(p) };
    return 0;
}

/* Entry b is taken: wipe it, then move its unit to active in one CAS (which frees the entry). */
static int entry_to_active(struct pool_resource *r, uint32_t gen, uint32_t b)
{
    /* Plain stores: the CAS below is a full barrier, so both land before the entry is free. */
    atomic_store_explicit(&r->pending[b].since, 0, memory_order_relaxed);
    atomic_store_explicit(&r->pending[b].fence, 0, memory_order_relaxed);
    uint64_t u = atomic_load(&r->units), bit = 1ull << (32 + b);
    do {
        if (units_tag(u) != gen_tag(gen))
            return -ORBIT_ESTALE;
        if (!(u & bit))
            return -ORBIT_ENOTRESERVED;
        if (units_active(u) == UINT32_MAX)
            return -ORBIT_EBUSY;
    } while (!atomic_compare_exchange_weak(&r->units, &u, (u & ~bit) + 1));
    return 0;
}

/*
 * A lapped lease (16 or more fences old): entry b may have been freed and
 * retaken since, so the entry's own CAS proves it still holds this fence, and
 * excludes the agers and any other accept of it.
 */
static int accept_lapped(struct pool_resource *r, uint32_t gen, uint64_t fence, uint32_t b)
{
    uint64_t f = fence;
    if (!atomic_compare_exchange_strong(&r->pending[b].fence, &f, FENCE_TAKEN))
        return -ORBIT_ENOTRESERVED;
    return entry_to_active(r, gen, b);
}

/*
 * The held path: the entry's CAS f -> f|HELD is the exactly-once step (only
 * f's reserver published f; aging takes it by CAS too). The bit stays, so
 * the unit stays counted. Read after the CAS (a full barrier): the pair still
 * carries the tenancy and the bit, or the unit was voided (a close).
 */
static ORB_HOT int accept_held(struct pool_resource *r, uint32_t gen, uint64_t fence)
{
    uint32_t b = (uint32_t)(fence % POOL_PENDING);
    uint64_t f = fence;
    if (!atomic_compare_exchange_strong(&r->pending[b].fence, &f, fence | ENTRY_HELD))
        return -ORBIT_ENOTRESERVED;   /* skipped, aged, accepted already, or not yet published */
    uint64_t u = atomic_load(&r->units);
    if (units_tag(u) != gen_tag(gen))
        return -ORBIT_ESTALE;
    return u & (1ull << (32 + b)) ? 0 : -ORBIT_ENOTRESERVED;
}

/*
 * Move the lease's unit to active. Fence f lives in entry f % 16, and no
 * other fence can land there before the pair's fence reaches f + 16: while it
 * is below, a set bit is f's own, and one pair CAS (bit off, active up) is the
 * exactly-once step. The entry is checked first (a fence that was skipped is
 * never reserved) and wiped after: a reserver takes the entry only once it
 * reads 0 there, so a later holder never shows f.
 */
static ORB_NOINLINE int accept_counted(struct pool_resource *r, uint32_t gen, uint64_t fence)
{
    uint32_t b = (uint32_t)(fence % POOL_PENDING);
    uint64_t bit = 1ull << (32 + b);
    struct pool_pending *e = &r->pending[b];
    struct hot h = hot_load(r);
    if (atomic_load_explicit(&e->fence, memory_order_relaxed) != fence)
        return -ORBIT_ENOTRESERVED;   /* skipped, taken by an ager, or accepted already */
    for (;;) {
        if (units_tag(h.units) != gen_tag(gen))
            return -ORBIT_ESTALE;
        if (!(h.units & bit) || fence > h.fence)
            return -ORBIT_ENOTRESERVED;
        if (!POOL_PAIR_CAS || h.fence - fence >= POOL_PENDING)
            return accept_lapped(r, gen, fence, b);
        if (units_active(h.units) == UINT32_MAX)
            return -ORBIT_EBUSY;
        if (hot_cas(r, &h, (struct hot){ (h.units & ~bit) + 1, h.fence }))
            break;
    }
    /* The entry is free but not yet reusable: the stamp first, then the fence (release). */
    atomic_store_explicit(&e->since, 0, memory_order_relaxed);
    atomic_store_explicit(&e->fence, 0, memory_order_release);
    return 0;
}

/* The held path inline, the counted one (capacity above 16, or no pair CAS) out of line. */
static ORB_HOT int accept_unit(struct pool_resource *r, uint32_t gen, uint64_t fence)
{
    if (fence == 0 || fence >= FENCE_MAX)
        return -ORBIT_ENOTRESERVED;
    if (orb_likely(holds_entries(atomic_load_explicit(&r->capacity, memory_order_relaxed))))
        return accept_held(r, gen, fence);
    return accept_counted(r, gen, fence);
}

/* accept's checks in their documented order, then the unit: the refusals' path. */
static ORB_COLD int accept_lease(struct orbit_pool *p, const struct orbit_lease *lease)
{
    struct pool_resource *r;
    uint64_t index;
    uint32_t w;
    int rc = owned(p, lease->id, &r, &index, &w);
    if (rc == 0 && lease->epoch != pool_epoch_now(p))
        rc = -ORBIT_ESTALE;
    if (rc < 0)
        return rc;
    if (RES_STATE(w) != RES_LIVE)
        return -ORBIT_EDRAINING;
    return accept_unit(r, orbit_id_generation(lease->id), lease->fence);
}

/*
 * The common case of accept_lease, the same checks as one conjunction: a slot
 * of our own lane (only the owner accepts), LIVE in the lease's generation,
 * our incarnation's, this epoch's lease. Anything else takes accept_lease,
 * which sorts out the refusal (nothing was written yet).
 */
static ORB_HOT int accept_checked(struct orbit_pool *p, const struct orbit_lease *lease)
{
    orbit_id id = lease->id;
    uint32_t slot = orbit_id_slot(id), gen = orbit_id_generation(id);
    if (orb_unlikely((uint32_t)(id >> 40) != p->own_hi || slot > p->lane_mask))
        return accept_lease(p, lease);
    struct pool_resource *r = p->own_lane + slot;
    /* Acquire: a LIVE word of this generation shows its tenancy's fields (capacity, owner). */
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    if (orb_unlikely(gen == 0 || w != RES_WORD(gen, RES_LIVE) ||
                         atomic_load_explicit(&r->owner_incarnation, memory_order_relaxed) != p->incarnation ||
                         lease->epoch != pool_epoch_now(p)))
        return accept_lease(p, lease);
    return accept_unit(r, gen, lease->fence);
}

/* Why accept refused a lease, for orbit_last_error; *out is a done execution. */
static ORB_COLD int accept_refused(int rc, const struct orbit_lease *lease, struct orbit_execution *out)
{
    *out = (struct orbit_execution){ .done = true };   /* completing a refused one is a no-op */
    switch (-rc) {
    case ORBIT_ENOTRESERVED:
        return orb_fail(rc, "orbit_pool_accept: lease fence %llu: not an unaccepted reservation "
                        "(accepted already, aged out by reconcile, or never reserved)",
                        (unsigned long long)lease->fence);
    case ORBIT_ESTALE:
        return orb_fail(rc, "orbit_pool_accept: lease of id %#llx: the resource's tenancy or the pool's "
                        "epoch has ended since the reserve", (unsigned long long)lease->id);
    case ORBIT_ENOTOWNER:
        return orb_fail(rc, "orbit_pool_accept: lease of id %#llx: only the resource's owner accepts",
                        (unsigned long long)lease->id);
    case ORBIT_EDRAINING:
        return orb_fail(rc, "orbit_pool_accept: lease of id %#llx: the resource is draining or closing",
                        (unsigned long long)lease->id);
    case ORBIT_EMALFORMED:
        return orb_fail(rc, "orbit_pool_accept: lease id %#llx is not an id of this pool",
                        (unsigned long long)lease->id);
    default:
        return rc;
    }
}

/* A refused handle, or a NULL out or lease: *out (if any) a done execution. */
static ORB_COLD int accept_entry_refused(int rc, const struct orbit_lease *lease, struct orbit_execution *out)
{
    if (!out)
        return rc < 0 ? rc : orb_fail(-ORBIT_EMALFORMED, "orbit_pool_accept: out is NULL");
    *out = (struct orbit_execution){ .done = true };
    if (rc < 0)
        return rc;
    (void)lease;
    return orb_fail(-ORBIT_EMALFORMED, "orbit_pool_accept: lease is NULL");
}

int orbit_pool_accept(struct orbit_pool *p, const struct orbit_lease *lease, struct orbit_execution *out)
{
    int rc = pool_enter(p, __func__);
    if (orb_unlikely(rc < 0) || orb_unlikely(!out) || orb_unlikely(!lease))
        return accept_entry_refused(rc, lease, out);
    rc = accept_checked(p, lease);
    if (orb_unlikely(rc < 0))
        return accept_refused(rc, lease, out);
    *out = (struct orbit_execution){ .pool = p, .lease = *lease, .done = false };
    orb_count(&p->ctr, POOL_CTR_ACCEPTS, 1);
    return 0;
}

/* In a fork child the parent's execution gives nothing back: its unit stays the parent's. */
void orbit_execution_complete(struct orbit_execution *ex)
{
    orb_error_clear();
    if (!ex || ex->done || !ex->pool || !orb_handle_ours(ex->pool->fork_generation))
        return;
    ex->done = true;
    struct orbit_pool *p = ex->pool;
    orb_count(&p->ctr, POOL_CTR_COMPLETIONS, 1);
    struct pool_resource *r;
    uint64_t index;
    if (locate(p, ex->lease.id, &r, &index) < 0 || ex->lease.epoch != pool_epoch_now(p))
        return;
    uint32_t gen = orbit_id_generation(ex->lease.id);
    if (RES_GEN(atomic_load(&r->state)) != gen)
        return;
    uint64_t fence = ex->lease.fence;
    struct pool_pending *e = &r->pending[fence % POOL_PENDING];
    /* Capacity first (the state's line, fixed for the tenancy): above 16 nothing is held. */
    if (holds_entries(atomic_load_explicit(&r->capacity, memory_order_relaxed)) && fence < FENCE_MAX &&
        atomic_load_explicit(&e->fence, memory_order_relaxed) == (fence | ENTRY_HELD)) {
        /* Our entry (only our accept wrote f|HELD): DONE by a release store, the execution's
         * work before it; a reserver folds it. Retaken since, the DONE matches nobody. */
        atomic_store_explicit(&e->since, fence | SINCE_DONE, memory_order_release);
        pool_key_changed_after_store(p, atomic_load_explicit(&r->key_index, memory_order_relaxed));
        return;
    }
    uint64_t u = atomic_load(&r->units);
    do {
        /* Only this tenancy's units: a reinstalled slot has nothing of ours to give back. */
        if (units_tag(u) != gen_tag(gen) || units_active(u) == 0)
            return;
    } while (!atomic_compare_exchange_weak(&r->units, &u, u - 1));
    pool_key_changed_after_rmw(p, atomic_load(&r->key_index));
}

bool orbit_pool_is_current(struct orbit_pool *p, const struct orbit_lease *lease)
{
    struct pool_resource *r;
    uint64_t index;
    if (pool_enter(p, __func__) < 0 || !lease || locate(p, lease->id, &r, &index) < 0 ||
        lease->epoch != pool_epoch_now(p))
        return false;
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    return RES_GEN(w) == orbit_id_generation(lease->id) && RES_IN_USE(w);
}

/* The entries an aging pass took, with their fences and the pair's fence before it began. */
struct aged { uint32_t bits; bool held; uint64_t pair_fence; uint64_t fence[POOL_PENDING]; };

/*
 * Age the pending entries older than grace. An entry with its bit set but no
 * stamp belongs to a reserver mid-way (or one that died there): it is stamped
 * now and ages like the rest; grace 0 ages it at once.
 */
static void age_entries(struct pool_resource *r, uint64_t grace_ms, struct aged *a)
{
    uint64_t now = orb_wall_ms_coarse();   /* the clock the stamps were taken with */
    /* The pair's fence first: a lease already lapped then can no longer be accepted by the pair. */
    a->pair_fence = atomic_load(&r->fence);
    a->bits = 0;
    uint32_t bits = units_bits(atomic_load(&r->units));
    for (uint32_t b = 0; b < POOL_PENDING; b++) {
        struct pool_pending *e = &r->pending[b];
        uint64_t f = atomic_load(&e->fence), since = atomic_load(&e->since);
        if (!(bits & (1u << b))) {
            /* Free but showing a fence (a late stamp, a wipe cut short, a fold whose folder died
             * before its release): reserves skip it until it reads 0. The CAS names the fence,
             * so a holder that took it since keeps its own. A released one is free as it is. */
            if (f != 0 && f != FENCE_TAKEN && !(entry_held(f) && entry_released(r, b, f))) {
                atomic_store(&e->since, 0);   /* clobbering a new holder's stamp only delays its aging */
                atomic_compare_exchange_strong(&e->fence, &f, 0);
            }
            continue;
        }
        /* Being freed, or accepted (a held entry is reconcile's, not aging's). One showing a
         * released fence is a new holder's before its publish: aged like an unpublished one. */
        if (f == FENCE_TAKEN || (entry_held(f) && !entry_released(r, b, f)))
            continue;
        /* Unstamped, or a late complete's DONE over the stamp: stamped now, naming no holder
         * (a death report leaves such an entry to aging). */
        if ((since == 0 || (since & SINCE_DONE)) && grace_ms != 0) {
            atomic_compare_exchange_strong(&e->since, &since, now);
            continue;
        }
        /* Stamps are clock ticks (coarse): grace 0 ages at once, whatever the tick says. */
        uint64_t at = since_ms(since);
        if (grace_ms != 0 && since != 0 && (now <= at || now - at <= grace_ms))
            continue;
        /* Taking the fence excludes an accept through the entry: one of the two frees it. */
        if (!atomic_compare_exchange_strong(&e->fence, &f, FENCE_TAKEN))
            continue;
        /* Wiped while its bit is still set, by CAS: an accept by the pair may have freed it and
         * wiped it meanwhile, and a reserver taken it since. */
        atomic_store(&e->since, 0);
        uint64_t taken = FENCE_TAKEN;
        atomic_compare_exchange_strong(&e->fence, &taken, 0);
        a->bits |= 1u << b;
        a->fence[b] = f;
    }
}

/*
 * The aged bits the reconcile CAS may clear at pair fence `now`. A young lease
 * (fewer than 16 fences old when aging began) may have been accepted by the
 * pair meanwhile and its entry retaken: its bit is cleared only while no
 * fence can have landed there since (an unpublished one, fence 0: only while
 * no fence was given at all). A bit left set is aged again later.
 */
static uint32_t aged_clearable(const struct aged *a, uint64_t now)
{
    if (!POOL_PAIR_CAS || a->held)
        return a->bits;   /* every accept goes through the entry */
    uint32_t out = 0;
    for (uint32_t b = 0; b < POOL_PENDING; b++) {
        uint64_t f = a->fence[b];
        if (!(a->bits & (1u << b)))
            continue;
        if (f == 0 ? now == a->pair_fence : (a->pair_fence - f >= POOL_PENDING || now - f < POOL_PENDING))
            out |= 1u << b;
    }
    return out;
}

/*
 * The held entries under the owner's count: DONE ones are folded; ACTIVE ones
 * are kept while active covers them (*counted = active - held), otherwise all
 * reclaimed (*counted = active: their executions complete by the counted path,
 * or, caught mid-complete, leave a unit for the next reconcile). Returns the
 * bits kept; *cleared the held entries whose bits go.
 */
static uint32_t reconcile_held(struct pool_resource *r, uint32_t bits, uint32_t *counted, uint32_t *cleared)
{
    uint32_t held;
    struct folded done;
    held_entries(r, bits, &held, &done);
    *cleared = done.bits;
    if (bits_count(held) <= *counted)
        *counted -= bits_count(held);
    else
        *cleared |= held;
    return bits & ~*cleared;
}

/* Wipe held entries whose bits the reconcile CAS cleared, by CAS: an ager may have wiped one
 * meanwhile and a reserver taken it since. */
static void wipe_reclaimed(struct pool_resource *r, uint32_t cleared)
{
    for (; cleared; cleared &= cleared - 1) {
        _Atomic uint64_t *e = &r->pending[__builtin_ctz(cleared)].fence;
        uint64_t f = atomic_load(e);
        if (entry_held(f))
            atomic_compare_exchange_strong(e, &f, 0);
    }
}

int orbit_pool_reconcile(struct orbit_pool *p, orbit_id id, uint32_t active, uint64_t grace_ms)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    struct pool_resource *r;
    uint64_t index;
    uint32_t w;
    rc = owned(p, id, &r, &index, &w);
    if (rc < 0)
        return pool_id_refused(p, rc, id);
    if (active > atomic_load(&r->capacity))   /* more active than it can hold: not the owner's truth */
        return orb_fail(-ORBIT_EMALFORMED, "active %u is more than the resource's capacity %llu", active,
                        (unsigned long long)atomic_load(&r->capacity));
    uint32_t gen = RES_GEN(w);
    struct aged a;
    a.held = holds_entries(atomic_load(&r->capacity));
    age_entries(r, grace_ms, &a);
    struct hot h = hot_load(r);
    uint64_t next;
    uint32_t cleared = 0;
    bool freed;
    for (;;) {
        if (units_tag(h.units) != gen_tag(gen))
            return pool_id_refused(p, -ORBIT_ESTALE, id);
        uint32_t bits = units_bits(h.units) & ~aged_clearable(&a, h.fence), counted = active;
        if (a.held)
            bits = reconcile_held(r, bits, &counted, &cleared);
        next = units_make(gen, bits, counted);
        /* Held entries count in both pairs' bits: the new pair's active field is counted. */
        freed = units_reserved(next) + (uint64_t)counted < units_reserved(h.units) + (uint64_t)units_active(h.units);
        /* One CAS frees the aged entries' bits and states the owner's active count; the pair
         * CAS also proves the fence the bits were judged at. */
        if (POOL_PAIR_CAS ? hot_cas(r, &h, (struct hot){ next, h.fence })
                          : atomic_compare_exchange_weak(&r->units, &h.units, next))
            break;
    }
    wipe_reclaimed(r, cleared);
    if (freed)
        orb_count(&p->ctr, POOL_CTR_RECLAIMED, units_reserved(h.units) + (uint64_t)units_active(h.units) -
                                                   units_reserved(next) - (uint64_t)units_active(next));
    if (freed)   /* units came back: waiters on the key re-check */
        pool_key_changed(p, atomic_load(&r->key_index));
    return 0;
}

/* ---- snapshots ---- */

static bool candidate_at(struct orbit_pool *p, uint64_t index, orbit_key key, struct orbit_candidate *c)
{
    struct pool_resource *r = pool_res_at(p, index);
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    if (!RES_IN_USE(w) || atomic_load(&r->key_lo) != key.lo || atomic_load(&r->key_hi) != key.hi)
        return false;
    uint64_t u = atomic_load(&r->units);
    if (units_tag(u) != gen_tag(RES_GEN(w)))
        return false;   /* changed tenancy between the two loads */
    uint32_t held = 0;   /* accepted leases in their entries: active; DONE ones: free */
    struct folded done = { .bits = 0 };
    if (units_bits(u))
        held_entries(r, units_bits(u), &held, &done);
    uint16_t node = (uint16_t)(index / p->geo.lane_capacity);
    *c = (struct orbit_candidate){
        .id = orbit_id_make(p->kind, node, RES_GEN(w), (uint32_t)(index & p->lane_mask)),
        .owner = node, .owner_incarnation = atomic_load(&r->owner_incarnation),
        .local = node == p->node, .state = RES_STATE(w) == RES_LIVE ? ORBIT_LIVE : ORBIT_DRAINING,
        .capacity = atomic_load(&r->capacity), .reserved = bits_count(units_bits(u) & ~(held | done.bits)),
        .active = units_active(u) + bits_count(held), .last_reserve_ms = atomic_load(&r->last_reserve_ms) };
    return true;
}

ssize_t orbit_pool_candidates(struct orbit_pool *p, orbit_key key, struct orbit_candidate *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    uint32_t ki;
    if (pool_key_peek(p, key, &ki) < 0)
        return 0;
    _Atomic uint64_t *members = pool_key_members(p, ki);
    size_t n = 0;
    for (uint32_t wi = 0; wi < p->member_words; wi++) {
        for (uint64_t bits = atomic_load(&members[wi]); bits; bits &= bits - 1) {
            uint64_t index = (uint64_t)wi * 64 + (uint64_t)__builtin_ctzll(bits);
            struct orbit_candidate c;
            /* A member bit is shared data: only an index inside a populated lane is read. */
            if (index >= p->total_resources || !lane_ready(p, (uint32_t)(index / p->geo.lane_capacity)) ||
                !candidate_at(p, index, key, &c))
                continue;
            if (n < max)
                out[n] = c;
            n++;
        }
    }
    return (ssize_t)n;
}

/* Fold the DONE entries of a tenancy by a pair CAS with the same fence (no reserve came
 * between: no entry was retaken), then release them; whether there were any. */
static bool fold_done(struct pool_resource *r, uint32_t gen)
{
    struct hot h = hot_load(r);
    uint32_t held;
    struct folded done;
    do {
        if (units_tag(h.units) != gen_tag(gen) || !units_bits(h.units))
            return false;
        held_entries(r, units_bits(h.units), &held, &done);
        if (!done.bits)
            return false;
    } while (!hot_cas(r, &h, (struct hot){ h.units & ~((uint64_t)done.bits << 32), h.fence }));
    release_folded(r, &done);
    return true;
}

bool pool_key_fold_after_fence(struct orbit_pool *p, uint32_t i, bool *fenced)
{
    *fenced = true;
    if (i > p->key_mask || !POOL_PAIR_CAS)
        return false;
    /* After the barrier a completer's DONE is visible here, or it read watched == our version
     * (handed out before we came) and bumps the word: the half of pool_key_changed_after_store. */
    *fenced = orb_lock_fence_others();
    struct pool_key *k = pool_key_at(p, i);
    uint64_t lo = atomic_load(&k->key_lo), hi = atomic_load(&k->key_hi);
    _Atomic uint64_t *members = pool_key_members(p, i);
    bool folded = false;
    for (uint32_t wi = 0; wi < p->member_words; wi++) {
        for (uint64_t bits = atomic_load(&members[wi]); bits; bits &= bits - 1) {
            uint64_t index = (uint64_t)wi * 64 + (uint64_t)__builtin_ctzll(bits);
            /* A member bit is shared data: only an index inside a populated lane is read. */
            if (index >= p->total_resources || !lane_ready(p, (uint32_t)(index / p->geo.lane_capacity)))
                continue;
            struct pool_resource *r = pool_res_at(p, index);
            uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
            if (RES_IN_USE(w) && atomic_load(&r->key_lo) == lo && atomic_load(&r->key_hi) == hi &&
                holds_entries(atomic_load(&r->capacity)) && fold_done(r, RES_GEN(w)))
                folded = true;
        }
    }
    return folded;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

ssize_t orbit_pool_owners(struct orbit_pool *p, struct orbit_owner *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    uint64_t *incs = malloc((size_t)p->geo.lane_capacity * sizeof *incs);
    if (!incs)
        return -ENOMEM;
    size_t n = 0;
    for (uint32_t node = 0; node < p->geo.fleet_capacity; node++) {
        if (!lane_ready(p, node))
            continue;
        size_t m = 0;
        for (uint32_t s = 0; s < p->geo.lane_capacity; s++) {
            struct pool_resource *r = pool_res_at(p, (uint64_t)node * p->geo.lane_capacity + s);
            if (RES_IN_USE(atomic_load_explicit(&r->state, memory_order_acquire)))
                incs[m++] = atomic_load(&r->owner_incarnation);
        }
        qsort(incs, m, sizeof *incs, cmp_u64);
        for (size_t i = 0; i < m; i++) {
            if (i && incs[i] == incs[i - 1])
                continue;
            if (n < max)
                out[n] = (struct orbit_owner){ .node = (uint16_t)node, .incarnation = incs[i] };
            n++;
        }
    }
    free(incs);
    return (ssize_t)n;
}

/* ---- death and reset ---- */

void pool_resources_node_dead(struct orbit_pool *p, uint16_t node, uint64_t incarnation)
{
    if (!lane_ready(p, node))
        return;
    for (uint32_t s = 0; s < p->geo.lane_capacity; s++) {
        uint64_t index = (uint64_t)node * p->geo.lane_capacity + s;
        struct pool_resource *r = pool_res_at(p, index);
        uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
        if (atomic_load(&r->owner_incarnation) != incarnation)
            continue;
        /* Died mid-register (a set member bit says the key counted it), or mid-close: finish
         * either; taking the slot out of its key happens once whoever else finishes too. */
        if (RES_STATE(w) == RES_ALLOCATING && atomic_compare_exchange_strong(&r->state, &w,
                                                  RES_WORD(RES_GEN(w), RES_CLOSING)))
            resource_finish_close(p, index, RES_WORD(RES_GEN(w), RES_CLOSING));
        else if (RES_STATE(w) == RES_CLOSING)
            resource_finish_close(p, index, w);
        else if (RES_IN_USE(w))
            resource_close(p, index, w);
    }
}

/* ---- a dead reserver's unaccepted reservations ---- */

/*
 * Wipe an entry this call freed, each word by CAS on what it showed: an ager
 * holding it finishes its own wipe, and a holder of a later tenancy (the slot
 * reinstalled meanwhile) keeps its own words. The stamp first, then the fence
 * (release): a reserver that takes the entry at 0 stamps after the wipe.
 */
static void wipe_dropped(struct pool_pending *e, uint64_t fence, uint64_t since)
{
    /* Fails only on a restamp (aging, a late DONE) or a later holder's stamp: theirs stays. */
    atomic_compare_exchange_strong(&e->since, &since, 0);
    /* Release: the stamp's wipe is visible to the reserver that acquires this 0. */
    atomic_compare_exchange_strong_explicit(&e->fence, &fence, 0, memory_order_release,
                                            memory_order_relaxed);
}

/*
 * Through the entry: its CAS f -> TAKEN excludes every accept that goes
 * through the entry (held, lapped), aging and another reporter, all of which
 * take it by CAS. No young accept can win either: the pair loaded before it
 * showed f lapped with its bit set (or every accept goes through the entry),
 * so the bit is f's. It is cleared before the wipe, while no reserver can
 * take the entry (it shows TAKEN).
 */
static bool drop_taken(struct pool_resource *r, uint32_t gen, uint64_t f, uint32_t b, uint64_t since)
{
    struct pool_pending *e = &r->pending[b];
    uint64_t seen = f;
    if (!atomic_compare_exchange_strong(&e->fence, &seen, FENCE_TAKEN))
        return false;   /* accepted, aged or dropped first */
    /* The bit is f's; TAKEN keeps reservers off the entry until the wipe below. */
    bool freed = give_back(r, gen, b);
    wipe_dropped(e, FENCE_TAKEN, since);
    return freed;
}

/*
 * A young lease (fewer than 16 fences old): while the pair's fence is below
 * f + 16 no other fence can land in entry b, so its set bit is f's and one
 * pair CAS frees it, the step a young accept takes too: one of the two wins.
 * Aging tolerates this as it tolerates that accept. Lapped meanwhile (h is a
 * pair loaded before the entry's CAS, bit set): through the entry.
 */
static bool drop_young(struct pool_resource *r, uint32_t gen, uint64_t f, uint32_t b, uint64_t since,
                       struct hot h)
{
    uint64_t bit = 1ull << (32 + b);
    for (;;) {
        if (units_tag(h.units) != gen_tag(gen) || !(h.units & bit))
            return false;   /* the tenancy ended, or an accept or aging freed it first */
        if (h.fence - f >= POOL_PENDING)
            return drop_taken(r, gen, f, b, since);
        /* One CAS proves both: the fence still below f + 16, and the bit still set. */
        if (hot_cas(r, &h, (struct hot){ h.units & ~bit, h.fence }))
            break;
    }
    /* After the CAS (a full barrier), as an accept wipes: reserves skip it until it reads 0. */
    wipe_dropped(&r->pending[b], f, since);
    return true;
}

/*
 * Entry b of tenancy gen, freed if it is an unaccepted reservation stamped by
 * that incarnation of node; whether its unit came back. Only a published
 * PENDING entry names its holder: one whose reserver died before its publish
 * (fence 0, or a released f|HELD) is left to the owner's aging, as are
 * ACTIVE and DONE entries (accepted leases) and entries being freed.
 */
static bool drop_entry(struct pool_resource *r, uint32_t gen, uint32_t b, uint16_t node, uint64_t inc,
                       bool held)
{
    struct pool_pending *e = &r->pending[b];
    /* Acquire: pairs with f's publish, so the stamp and holder below are f's (they change only
     * when a reserve retakes the entry, after f has left it; the CASes below name f). */
    uint64_t f = atomic_load_explicit(&e->fence, memory_order_acquire);
    if (f == 0 || f >= FENCE_MAX)
        return false;   /* free or unpublished, TAKEN, or f|HELD */
    /* Relaxed, after that acquire: the reserver wrote both before its release. */
    uint64_t since = atomic_load_explicit(&e->since, memory_order_relaxed);
    if (since_node(since) != (uint32_t)node + 1u ||
        atomic_load_explicit(&e->holder, memory_order_relaxed) != inc)
        return false;
    /* The pair after the entry (acquire loads): f was given before it was published. */
    struct hot h = hot_load(r);
    if (units_tag(h.units) != gen_tag(gen) || !(h.units & (1ull << (32 + b))) || f > h.fence)
        return false;
    if (!held && POOL_PAIR_CAS && h.fence - f < POOL_PENDING)
        return drop_young(r, gen, f, b, since, h);
    return drop_taken(r, gen, f, b, since);
}

/* The slot's unaccepted reservations of that incarnation of node: freed; whether any were. */
static bool resource_drop(struct pool_resource *r, uint16_t node, uint64_t inc)
{
    /* Acquire: a LIVE or DRAINING word shows its tenancy's capacity (written before it). */
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    if (!RES_IN_USE(w))
        return false;
    uint32_t gen = RES_GEN(w);
    bool held = holds_entries(atomic_load(&r->capacity));
    /* The units after the state: a tag of another tenancy means the slot moved on; skip it. */
    uint64_t u = atomic_load(&r->units);
    if (units_tag(u) != gen_tag(gen))
        return false;
    bool freed = false;
    for (uint32_t bits = units_bits(u); bits; bits &= bits - 1)
        freed |= drop_entry(r, gen, (uint32_t)__builtin_ctz(bits), node, inc, held);
    return freed;
}

void pool_reservations_node_dead(struct orbit_pool *p, uint16_t node, uint64_t incarnation)
{
    for (uint32_t owner = 0; owner < p->geo.fleet_capacity; owner++) {
        if (!lane_ready(p, owner))
            continue;   /* nothing was ever registered there */
        for (uint32_t s = 0; s < p->geo.lane_capacity; s++) {
            struct pool_resource *r = pool_res_at(p, (uint64_t)owner * p->geo.lane_capacity + s);
            /* Units came back: the key's waiters re-check (an index past the table is ignored). */
            if (resource_drop(r, node, incarnation))
                pool_key_changed(p, atomic_load(&r->key_index));
        }
    }
}

int pool_node_dead(struct orbit_pool *p, uint16_t node, uint64_t incarnation)
{
    if (!p || node >= p->geo.fleet_capacity)
        return -ORBIT_EMALFORMED;
    /* What the node (or a reporter before us) was doing under an op lock, first. */
    int rc = pool_intents_settle_node(p, node);
    pool_resources_node_dead(p, node, incarnation);
    pool_reservations_node_dead(p, node, incarnation);
    int r = pool_key_return_node(p, node);
    /* Any node signals any key: the dead may have died mid-wake on any key's word. */
    for (uint32_t k = 0; k < p->geo.key_capacity; k++)
        orb_wait_kick(&pool_key_at(p, k)->wait);
    return rc < 0 ? rc : r;
}

void orbit_pool_node_dead(struct orbit_pool *p, uint16_t node, uint64_t incarnation)
{
    if (pool_enter(p, __func__) < 0)
        return;
    pool_node_dead(p, node, incarnation);
}

void pool_resources_reset(struct orbit_pool *p)
{
    for (uint32_t node = 0; node < p->geo.fleet_capacity; node++) {
        if (!lane_ready(p, node))
            continue;
        for (uint32_t s = 0; s < p->geo.lane_capacity; s++) {
            struct pool_resource *r = pool_res_at(p, (uint64_t)node * p->geo.lane_capacity + s);
            uint32_t gen = RES_GEN(atomic_load(&r->state));
            atomic_store(&r->uses, 0);
            atomic_store(&r->units, units_make(gen_tag(gen), 0, 0));
            for (unsigned b = 0; b < POOL_PENDING; b++) {
                atomic_store(&r->pending[b].fence, 0);
                atomic_store(&r->pending[b].since, 0);
                atomic_store(&r->pending[b].holder, 0);
                atomic_store(&r->pending[b].released, 0);
            }
            /* Generation kept: an id from before names no later tenant. */
            atomic_store(&r->state, RES_WORD(gen, RES_EMPTY));
        }
    }
}
