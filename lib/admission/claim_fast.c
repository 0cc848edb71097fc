/* SPDX-License-Identifier: MIT */
/* try_claim: the claim most callers make in one pass under the lock; anything else to claim.c. */
#include "admission/lock.h"   /* and adm_layout.h */

/* The fast path's record: the header and both units (one line), WRITING until complete. */
static inline void fast_record(struct orbit_admission *a, struct adm_record *r, uint64_t serial, uint16_t nc,
                               struct adm_unit u0, struct adm_unit u1)
{
    /* WRITING first: a holder that dies before LIVE leaves a record repair refuses to trust. */
    atomic_store_explicit(&r->state, ADM_REC_WRITING, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    r->node = a->node;
    r->n_units = nc;
    r->incarnation = a->incarnation;
    r->serial = serial;
    r->retained_bytes = 0;
    adm_park_here(a, ADM_PARK_CLAIM_WRITING);
    r->units[0] = u0;
    r->units[1] = u1;   /* inside the record even for one unit: record_bytes >= 64 */
    /* Release: the record's fields are complete before it counts as live. */
    atomic_store_explicit(&r->state, ADM_REC_LIVE, memory_order_release);
}

/* The claim the fast path takes: one or two entries resolved by the handle's hints (process
 * memory), and what the commit hands back for the result. */
struct fast_claim {
    bool two;
    uint32_t id0, id1, h0, h1;   /* h: the hinted index, below max_domains */
    uint64_t u0, u1;             /* one entry: the second is 0 units of the first's domain */
    uint32_t slot;
    uint64_t serial, epoch, retained;
};

/* Resolves d (one or two claim entries, no fit, no fee: claim_small_ok) by the hints. false: a
 * hint misses (decide() resolves it). 0 (no hint) wraps to UINT32_MAX: a miss. */
static inline bool fast_resolve(const struct orbit_admission *a, const struct orbit_demand *d,
                                struct fast_claim *f)
{
    const struct orbit_units *c = d->claim;
    f->two = d->n_claim == 2;
    f->id0 = c[0].domain;
    f->u0 = c[0].units;
    f->id1 = f->two ? c[1].domain : f->id0;
    f->u1 = f->two ? c[1].units : 0;
    f->h0 = a->hint[f->id0 & (ADM_HINTS - 1)] - 1;
    f->h1 = a->hint[f->id1 & (ADM_HINTS - 1)] - 1;
    return (f->h0 < a->geo.max_domains) & (f->h1 < a->geo.max_domains) & !(f->two & (f->h0 == f->h1));
}

/*
 * The claim most callers make, judged and committed in one pass under the
 * lock: its domains are the ones the hints name (domains never move: a
 * hint whose entry still holds the id is its index), each has room, and a
 * record waits on this node's own free list. Every check decide() makes
 * for such a claim is here, so passing them all is its CLAIMED. 1: some
 * check did not pass, nothing changed: decide() judges it in the
 * documented order (and poisons what is broken).
 */
static inline int claim_fast(struct orbit_admission *a, struct fast_claim *f)
{
    struct adm_ledger *l = a->ledger;
    struct adm_domain *d0 = &a->domains[f->h0], *d1 = &a->domains[f->h1];
    uint32_t n = l->n_domains, live = l->live_claims;
    uint64_t serial = l->next_serial, e = atomic_load_explicit(&l->change_epoch, memory_order_relaxed);
    /* n above max_domains fails both (h < max_domains): decide() poisons it. The serial and the
     * change epoch must be able to advance (each release moves the epoch). */
    if (atomic_load_explicit(&l->poisoned, memory_order_relaxed) ||
        atomic_load_explicit(&l->closed, memory_order_relaxed) || f->h0 >= n || f->h1 >= n ||
        d0->id != f->id0 || d1->id != f->id1 ||
        adm_claim_troubled(d0->capacity, d0->used, d0->availability_epoch, f->u0) ||
        adm_claim_troubled(d1->capacity, d1->used, d1->availability_epoch, f->u1) ||
        serial - 1 >= UINT64_MAX - 1 || live >= a->geo.max_claims || e > UINT64_MAX - (uint64_t)live - 1)
        return 1;
    /* The record last: the pop is the first change, and nothing after it can refuse. */
    uint32_t slot = adm_list_pop(a, &a->lanes[a->node].free_head);
    if (slot == ADM_NO_SLOT)
        slot = adm_list_pop(a, &l->spare_head);
    if (slot >= a->geo.max_claims)
        return 1;   /* both empty (decide() takes another node's) or broken (decide() poisons) */
    /* The serial is spent before any record carries it: a crash never lets it be reused. */
    l->next_serial = serial + 1;
    fast_record(a, adm_record(a, slot), serial, (uint16_t)(1 + f->two),
                (struct adm_unit){ .domain_index = f->h0, .units = f->u0 },
                (struct adm_unit){ .domain_index = f->h1, .units = f->u1 });
    d0->used += f->u0;
    adm_park_here(a, ADM_PARK_CLAIM_COMMIT);
    d1->used += f->u1;
    l->live_claims = live + 1;
    f->slot = slot;
    f->serial = serial;
    f->epoch = e;
    f->retained = l->retained_bytes;
    return 0;
}

/* The fast path's CLAIMED result (the handle's and the caller's memory only). */
static inline void fast_result(const struct orbit_admission *a, const struct fast_claim *f,
                               struct orbit_admit_result *out)
{
    out->outcome = ORBIT_ADMIT_CLAIMED;
    out->claim = (struct orbit_claim){ .serial = f->serial, .node = a->node, .retained_bytes = 0,
                                       .released = false, .slot = f->slot, .incarnation = a->incarnation };
    out->release_epoch = f->epoch;
    out->blocker_domain = 0;
    out->blocker_free = out->blocker_maximum = 0;
    out->skip = ORBIT_SKIP_NONE;
    out->retained_now = f->retained;
    out->retained_max = a->geo.retained_max;
}

int orbit_admission_try_claim(struct orbit_admission *a, const struct orbit_demand *d,
                              struct orbit_admit_result *out)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!d || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__, d ? "out" : "demand");
    /* The common demand needs no other argument check: claim_small_ok is check_demand's verdict. */
    bool fast = adm_claim_small_ok(d->claim, d->n_claim, a->geo.max_domains) && d->n_fit == 0 &&
                d->retained_bytes == 0;
    int rc = fast ? 0 : adm_check_demand(a, d);
    if (rc < 0)
        return rc;
    if (a->observer)
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer claims nothing (join as a member)", __func__);
    if (!fast)
        return adm_claim_decided(a, d, out, false);
    if ((rc = adm_lock(a, false)) < 0)
        return rc;
    /* Resolved and answered under the lock: what runs between a give and this process's next
     * take is short, so a waiter elsewhere less often takes the lock (and its lines) at
     * every call of a process that claims and releases in a row (design.md §8). */
    struct fast_claim f;
    if (!fast_resolve(a, d, &f) || claim_fast(a, &f) != 0)
        return adm_claim_decided(a, d, out, true);
    fast_result(a, &f, out);
    orb_count(&a->ctr, ADM_CTR_CLAIMS, 1);
    adm_unlock(a);
    return 0;
}
