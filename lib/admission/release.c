/* SPDX-License-Identifier: MIT */
/* Release exactly once, and node_dead: give a record's units back and wake waiters. */
#include "adm_layout.h"

/* When a live record may be released for this claim (every field agrees). false: poison. */
static bool record_releasable(const struct orbit_admission *a, const struct adm_record *r, uint32_t n_units)
{
    const struct adm_ledger *l = a->ledger;
    const struct adm_domain *doms = a->domains;
    uint32_t n_domains = l->n_domains;
    if (n_units == 0 || n_units > a->geo.max_domains || n_domains > a->geo.max_domains)
        return false;
    uint64_t sum = 0, fee = r->retained_bytes, retained = l->retained_bytes;
    const struct adm_unit *ru = r->units;
    bool bad = false;
    for (uint32_t i = 0; i < n_units; i++) {
        struct adm_unit u = ru[i];
        if (u.domain_index >= n_domains)
            return false;
        const struct adm_domain *dom = &doms[u.domain_index];
        bad |= (u.units == 0) | __builtin_add_overflow(sum, u.units, &sum) | (dom->used < u.units) |
               (dom->availability_epoch == UINT64_MAX);
    }
    if (bad)
        return false;
    if ((fee != 0 && fee != sum) || retained < fee || retained > a->geo.retained_max)
        return false;
    return l->live_claims > 0 && l->free_top < a->geo.max_claims &&
           atomic_load_explicit(&l->change_epoch, memory_order_relaxed) != UINT64_MAX;
}

int adm_release_record(struct orbit_admission *a, uint32_t slot)
{
    struct adm_ledger *l = a->ledger;
    struct adm_domain *doms = a->domains;
    struct adm_record *r = adm_record(a, slot);
    uint32_t n_units = r->n_units;
    if (!record_releasable(a, r, n_units)) {
        adm_poison(a, ADM_POISON_RECORD);
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    /* RELEASING before any unit goes back: repair then counts the record as gone. */
    atomic_store_explicit(&r->state, ADM_REC_RELEASING, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    const struct adm_unit *ru = r->units;
    for (uint32_t i = 0; i < n_units; i++) {
        struct adm_unit u = ru[i];
        struct adm_domain *dom = &doms[u.domain_index];
        dom->used -= u.units;
        dom->availability_epoch++;
        if (i == 0)
            adm_park_here(a, ADM_PARK_RELEASE);
    }
    l->retained_bytes -= r->retained_bytes;
    l->live_claims--;
    r->serial = 0;
    atomic_store_explicit(&r->state, ADM_REC_FREE, memory_order_relaxed);
    a->free_stack[l->free_top++] = slot;
    uint64_t e = atomic_load_explicit(&l->change_epoch, memory_order_relaxed);
    /* Release: a waiter that sees the new epoch also sees the units given back. */
    atomic_store_explicit(&l->change_epoch, e + 1, memory_order_release);
    return 0;
}

/* The live record a claim names, or NULL when it is not live (forged or released). */
static struct adm_record *claim_record(struct orbit_admission *a, const struct orbit_claim *c)
{
    if (c->slot >= a->geo.max_claims || c->serial == 0)
        return NULL;
    struct adm_record *r = adm_record(a, c->slot);
    if (atomic_load_explicit(&r->state, memory_order_relaxed) != ADM_REC_LIVE || r->serial != c->serial)
        return NULL;
    return r;
}

static int release_locked(struct orbit_admission *a, const struct orbit_claim *c)
{
    if (adm_is_poisoned(a))
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    struct adm_record *r = claim_record(a, c);
    if (!r)
        return orb_fail_text(-ORBIT_ENOTRESERVED, "that claim is not live: released before, or given back by a death report");
    /* Same serial, other owner or fee: the claim or the ledger is wrong, and we cannot tell which. */
    if (r->node != c->node || r->incarnation != c->incarnation || r->retained_bytes != c->retained_bytes) {
        adm_poison(a, ADM_POISON_RECORD);
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    return adm_release_record(a, c->slot);
}

int orbit_admission_release(struct orbit_admission *a, struct orbit_claim *c)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!c)
        return orb_fail(-ORBIT_EMALFORMED, "%s: claim is NULL", __func__);
    if (c->released)
        return orb_fail(-ORBIT_ENOTRESERVED, "%s: claim serial %llu was released already", __func__,
                        (unsigned long long)c->serial);
    int rc = adm_lock(a, false);
    if (rc < 0)
        return rc;
    rc = release_locked(a, c);
    uint64_t epoch = atomic_load_explicit(&a->ledger->change_epoch, memory_order_relaxed);
    adm_unlock(a);
    if (rc == 0) {
        c->released = true;
        orb_count(&a->ctr, ADM_CTR_RELEASES, 1);
        adm_wake_wanted(a, epoch);   /* after the give: see adm_wake */
    }
    return rc;
}

/* 0, or the lock's error when a live holder kept it past the bound (the fleet retries
 * later). A poisoned ledger is fail-closed: its claims are gone with it, nothing to retry. */
int adm_node_dead(struct orbit_admission *a, uint16_t node, uint64_t incarnation)
{
    if (!a)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    int rc = adm_lock(a, false);
    if (rc < 0)
        return rc == -ORBIT_EPOISONED ? 0 : rc;
    for (uint32_t s = 0; s < a->geo.max_claims && !adm_is_poisoned(a); s++) {
        struct adm_record *r = adm_record(a, s);
        if (atomic_load_explicit(&r->state, memory_order_relaxed) != ADM_REC_LIVE ||
            r->node != node || r->incarnation != incarnation)
            continue;
        adm_release_record(a, s);
    }
    /* One wake covers every release above (each advanced the epoch), and is sent even
     * with none: the dead may have died mid-wake on this word. */
    orb_wait_kick(&a->ledger->change);
    adm_unlock(a);
    return 0;
}

void orbit_admission_node_dead(struct orbit_admission *a, uint16_t node, uint64_t incarnation)
{
    if (adm_enter(a, __func__) < 0)
        return;
    (void)adm_node_dead(a, node, incarnation);
}

int orbit_admission_reset_all(struct orbit_admission *a)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    int rc = adm_lock(a, true);   /* bounded: a tool must not hang on a stopped holder */
    if (rc < 0)
        return rc;
    for (uint32_t s = 0; s < a->geo.max_claims && !adm_is_poisoned(a); s++)
        if (atomic_load_explicit(&adm_record(a, s)->state, memory_order_relaxed) == ADM_REC_LIVE)
            adm_release_record(a, s);
    struct orb_seg_header *h = orb_seg_hdr(&a->seg);
    atomic_store(&h->epoch, orb_next_epoch(atomic_load(&h->epoch)));
    /* Each release advanced the change epoch; one kick wakes every waiter to re-check. */
    orb_wait_kick(&a->ledger->change);
    rc = adm_is_poisoned(a) ? -ORBIT_EPOISONED : 0;
    adm_unlock(a);
    return rc;
}
