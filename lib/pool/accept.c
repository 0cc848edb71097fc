/* SPDX-License-Identifier: MIT */
/* Accepting a lease into an execution and completing it: the owner's half of a reservation. */
#include "keys.h"
#include "resource.h"

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
