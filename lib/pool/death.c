/* SPDX-License-Identifier: MIT */
/* The pool's top floor: reset, and the table ops the core calls (death: resource.c's pool_node_dead). */
#include "pool_layout.h"
#include "core/table_ops.h"

/*
 * Quiescent owner boot: every key, resource, claim and hold is cleared and a
 * new epoch starts. Generations and fences continue, so an id or lease from
 * before never names a later tenant; waiters are woken to re-check.
 */
void orbit_pool_reset_all(struct orbit_pool *p)
{
    if (pool_enter(p, __func__) < 0)
        return;
    bool locked = pool_key_lock(p) == 0;
    pool_resources_reset(p);
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
}

/* ---- the pool's table ops ---------------------------------------------- */

static int ops_open(struct orbit_fleet *f, uint8_t kind, void **out)
{
    struct orbit_pool *p = NULL;
    int rc = orbit_pool_open_existing(f, kind, &p);
    *out = p;
    return rc;
}
static void ops_close(void *t) { orbit_pool_close(t); }
static int ops_node_dead(void *t, uint16_t node, uint64_t inc) { return pool_node_dead(t, node, inc); }
static int ops_reset_all(void *t) { orbit_pool_reset_all(t); return 0; }

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
    .type = ORB_TABLE_POOL, .name = "pool", .open_existing = ops_open, .close = ops_close,
    .layout = POOL_LAYOUT_VERSION,
    .node_dead = ops_node_dead, .reset_all = ops_reset_all, .account = pool_account,
    .counters = pool_counters, .counter_count = POOL_CTR_END - ORB_CTR_TABLE_FIRST,
};
ORB_TABLE_REGISTER(pool_ops);
