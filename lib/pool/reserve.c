/* SPDX-License-Identifier: MIT */
/*
 * Reservations: the ring of 16 pending entries a reserve takes a unit in,
 * the folds of completed (DONE) entries, and orbit_pool_reserve.
 */
#include "resource.h"

/* Entry of the first free one at or after fence + 1 (mod 16): its fence is fence + 1 + skip. */
static ORB_HOT uint32_t ring_skip(uint64_t fence, uint32_t bits)
{
    uint32_t from = (uint32_t)((fence + 1) % POOL_PENDING);
    if (!(bits & (1u << from)))
        return 0;   /* the common case: the next entry is free */
    uint32_t rot = ((bits >> from) | (bits << (POOL_PENDING - from))) & 0xffffu;
    return (uint32_t)__builtin_ctz(~rot & 0xffffu);
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
