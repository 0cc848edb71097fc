/* SPDX-License-Identifier: MIT */
/* A resource's tenancy: register, drain, unregister, and the close a death report finishes. */
#include "resource.h"

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
int pool_resource_finish_close(struct orbit_pool *p, uint64_t index, uint32_t closing)
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
 * to the death report, which finishes it (pool_resource_finish_close is idempotent).
 */
int pool_resource_close(struct orbit_pool *p, uint64_t index, uint32_t w)
{
    struct pool_resource *r = pool_res_at(p, index);
    uint32_t gen = RES_GEN(w);
    do {
        if (RES_GEN(w) != gen || !RES_IN_USE(w))
            return -ORBIT_ESTALE;
        /* The state CAS carries the generation: exactly one closer ends this tenancy. */
    } while (!atomic_compare_exchange_weak(&r->state, &w, RES_WORD(gen, RES_CLOSING)));
    return pool_resource_finish_close(p, index, RES_WORD(gen, RES_CLOSING));
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
        rc = pool_resource_close(p, index, w);
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
