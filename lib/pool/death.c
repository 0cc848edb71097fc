/* SPDX-License-Identifier: MIT */
/* The pool's top floor: death reports, reset, and the table ops the core calls. */
#include "resource.h"
#include "core/table_ops.h"

/* ---- a dead owner's resources ---- */

static void resources_node_dead(struct orbit_pool *p, uint16_t node, uint64_t incarnation)
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
            pool_resource_finish_close(p, index, RES_WORD(RES_GEN(w), RES_CLOSING));
        else if (RES_STATE(w) == RES_CLOSING)
            pool_resource_finish_close(p, index, w);
        else if (RES_IN_USE(w))
            pool_resource_close(p, index, w);
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

/* The unaccepted reservations that incarnation of node holds on every resource: freed. */
static void reservations_node_dead(struct orbit_pool *p, uint16_t node, uint64_t incarnation)
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

/* The pool's death op: -ORBIT_ECORRUPT when an op lock could not be taken (a live member
 * kept it past the bound, or a forged word): the report is to be run again. */
static int pool_node_dead(void *table, uint16_t node, uint64_t incarnation)
{
    struct orbit_pool *p = table;
    if (node >= p->geo.fleet_capacity)
        return -ORBIT_EMALFORMED;
    /* What the node (or a reporter before us) was doing under an op lock, first. */
    int rc = pool_intents_settle_node(p, node);
    resources_node_dead(p, node, incarnation);
    reservations_node_dead(p, node, incarnation);
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
    (void)pool_node_dead(p, node, incarnation);   /* void in the installed header: table_ops.h */
}

static void resources_reset(struct orbit_pool *p)
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


/* ---- reset ---- */

/*
 * Quiescent owner boot: every key, resource, claim and hold is cleared and a
 * new epoch starts. Generations and fences continue, so an id or lease from
 * before never names a later tenant; waiters are woken to re-check.
 */
static int pool_reset_all(void *table)
{
    struct orbit_pool *p = table;
    bool locked = pool_key_lock(p) == 0;
    resources_reset(p);
    size_t rows = (size_t)p->geo.fleet_capacity * p->geo.key_capacity;
    for (size_t i = 0; i < rows; i++) {
        atomic_store_explicit(&p->holds[i], 0, memory_order_relaxed);
        atomic_store_explicit(&p->claims[i], 0, memory_order_relaxed);
    }
    for (uint32_t n = 0; n < p->geo.fleet_capacity; n++)
        atomic_store_explicit(&p->lanes[n].cursor, 0, memory_order_relaxed);
    pool_intents_reset(p);
    struct orb_seg_header *h = orb_seg_hdr(&p->seg);
    atomic_store(&h->epoch, orb_next_epoch(atomic_load(&h->epoch)));
    pool_key_reset_locked(p);   /* last: it wakes every key's waiters */
    if (locked)
        pool_key_unlock(p);
    else   /* a forged or stuck word: the owner boots alone, so the lock starts over free */
        orb_lock_init(&p->hdr->key_lock.l);
    return 0;
}

void orbit_pool_reset_all(struct orbit_pool *p)
{
    if (pool_enter(p, __func__) == 0)
        (void)pool_reset_all(p);
}

/* ---- the pool's table ops ---------------------------------------------- */

static const struct orb_counter_def pool_counters[POOL_CTR_END - ORB_CTR_TABLE_FIRST] = {
    { "reservations", "Reservations made (orbit_pool_reserve that returned a lease)." },
    { "busy_refusals", "Reserves refused because every unit was taken or pending (-ORBIT_EBUSY)." },
    { "stale_refusals", "Reserves refused because the resource's tenancy ended or drains." },
    { "accepts", "Leases accepted into executions." },
    { "completions", "Executions completed." },
    { "reconcile_reclaimed_units", "Units the owner's reconcile gave back (aged reservations, lost executions)." },
    { "creation_claims", "Creation claims granted (orbit_pool_claim_create)." },
};

static const struct orb_table_ops pool_ops = {
    .kind = &pool_kind, .name = "pool", .layout = POOL_LAYOUT_VERSION,
    .node_dead = pool_node_dead, .reset_all = pool_reset_all, .account = pool_account,
    .counters = pool_counters, .counter_count = POOL_CTR_END - ORB_CTR_TABLE_FIRST,
};
ORB_TABLE_REGISTER(pool_ops);
