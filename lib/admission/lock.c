/* SPDX-License-Identifier: MIT */
/* The ledger mutex: locking, poisoning, and repair after a holder died inside it. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include "admission/lock.h"   /* and adm_layout.h */

void adm_poison(struct orbit_admission *a, enum adm_poison why)
{
    struct adm_ledger *l = a->ledger;
    uint32_t none = ADM_OK;
    /* First reason wins; release so a lock-free reader that sees it sees what led to it. */
    atomic_compare_exchange_strong_explicit(&l->poisoned, &none, (uint32_t)why,
                                            memory_order_release, memory_order_relaxed);
    /* Waiters re-check their predicate and return -ORBIT_EPOISONED. */
    orb_wait_signal(&l->change, &a->stats);
}

void adm_park_stop(void)
{
    raise(SIGSTOP);
}

bool adm_advance_epoch(struct orbit_admission *a)
{
    struct adm_ledger *l = a->ledger;
    uint64_t e = atomic_load_explicit(&l->change_epoch, memory_order_relaxed);
    /* Every live claim must still be able to advance it once when released. */
    if (e > UINT64_MAX - (uint64_t)l->live_claims - 1) {
        adm_poison(a, ADM_POISON_EPOCH);
        return false;
    }
    /* Release: a waiter that reads the new epoch also sees the ledger change behind it. */
    atomic_store_explicit(&l->change_epoch, e + 1, memory_order_release);
    return true;
}

int adm_lock_slow(struct orbit_admission *a, int rc, bool inspect)
{
    if (rc == ORB_LOCK_TAKEN)
        return 0;
    if (rc == ORB_LOCK_RECOVERED) {
        /* The holder died mid-update: rebuild what can be proven, poison what cannot. */
        adm_repair(a);
        return 0;
    }
    if (rc == -ORBIT_ETIMEDOUT)
        return inspect ? -ORBIT_ETIMEDOUT : -ORBIT_ECORRUPT;
    /* Not a word any holder writes: nobody can say who holds the ledger. */
    adm_poison(a, ADM_POISON_MUTEX);
    /* Poisoned, nothing mutates it any more: inspection reads it unlocked, for diagnosis. */
    return inspect ? ADM_INSPECT_UNLOCKED : -ORBIT_EPOISONED;
}

void adm_inspect_done(struct orbit_admission *a, int locked)
{
    if (locked == 0)
        adm_unlock(a);
}

/*
 * The release's wake (adm_wake_wanted decides, after the give). A waiter
 * about to sleep raises epoch_wanted to the epoch it wants and fences every
 * giver (admission.c): either its epoch_wanted is visible here, or it reads
 * the new epoch and does not sleep. Kick, not signal: the parked flag may
 * have been taken by an earlier waker this sleeper's word had already counted.
 */
void adm_wake(struct orbit_admission *a)
{
    orb_wait_kick(&a->ledger->change);
    atomic_fetch_add_explicit(&a->stats.wakes, 1, memory_order_relaxed);
}

/* ---- repair ------------------------------------------------------------- */

/* Checks one live record and adds it into the per-domain sums. false: poison. */
static bool repair_count(struct orbit_admission *a, const struct adm_record *r, uint64_t *retained)
{
    struct adm_ledger *l = a->ledger;
    if (r->n_units == 0 || r->n_units > a->geo.max_domains || r->serial == 0 ||
        r->serial >= l->next_serial)
        return false;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < r->n_units; i++) {
        const struct adm_unit *u = &r->units[i];
        if (u->domain_index >= l->n_domains || u->units == 0)
            return false;
        if (__builtin_add_overflow(a->scratch[u->domain_index], u->units, &a->scratch[u->domain_index]) ||
            __builtin_add_overflow(sum, u->units, &sum))
            return false;
    }
    if (r->retained_bytes != 0 && r->retained_bytes != sum)
        return false;
    return !__builtin_add_overflow(*retained, r->retained_bytes, retained);
}

/* Pass 1: checks every record and sums the live ones (nothing written). */
static enum adm_poison repair_sum(struct orbit_admission *a, uint64_t *retained, uint32_t *live)
{
    memset(a->scratch, 0, sizeof(uint64_t) * a->geo.max_domains);
    for (uint32_t s = 0; s < a->geo.max_claims; s++) {
        const struct adm_record *r = adm_record(a, s);
        uint32_t state = atomic_load_explicit(&r->state, memory_order_relaxed);
        if (state == ADM_REC_WRITING)
            return ADM_POISON_HALF_WRITTEN;
        if (state == ADM_REC_LIVE && !repair_count(a, r, retained))
            return ADM_POISON_RECORD;
        if (state != ADM_REC_LIVE && state != ADM_REC_FREE && state != ADM_REC_RELEASING)
            return ADM_POISON_LAYOUT;
        *live += state == ADM_REC_LIVE;
    }
    for (uint32_t d = 0; d < a->ledger->n_domains; d++)
        if (a->scratch[d] > a->domains[d].capacity)
            return ADM_POISON_USAGE;
    return *retained > a->geo.retained_max ? ADM_POISON_RETAINED : ADM_OK;
}

/* Recomputes used, retained bytes, live count and the free lists from the records. */
static enum adm_poison repair_recount(struct orbit_admission *a)
{
    struct adm_ledger *l = a->ledger;
    if (l->n_domains > a->geo.max_domains)
        return ADM_POISON_LAYOUT;
    uint64_t retained = 0;
    uint32_t live = 0;
    enum adm_poison why = repair_sum(a, &retained, &live);
    if (why != ADM_OK)
        return why;
    /* Pass 2: a release cut short is finished here (its units are not in the sums), and a
     * record taken off a list by a holder that died before writing it goes back on one. */
    adm_lists_rebuild(a);
    for (uint32_t d = 0; d < l->n_domains; d++)
        a->domains[d].used = a->scratch[d];
    l->retained_bytes = retained;
    l->live_claims = live;
    return ADM_OK;
}

void adm_repair(struct orbit_admission *a)
{
    struct adm_ledger *l = a->ledger;
    l->repairs++;
    if (adm_is_poisoned(a))
        return;
    enum adm_poison why = repair_recount(a);
    if (why != ADM_OK) {
        adm_poison(a, why);
        return;
    }
    /* Units may have come free (a cut-short release): publish it like a release. */
    for (uint32_t d = 0; d < l->n_domains; d++) {
        if (a->domains[d].availability_epoch == UINT64_MAX) {
            adm_poison(a, ADM_POISON_EPOCH);
            return;
        }
        a->domains[d].availability_epoch++;
    }
    if (adm_advance_epoch(a))
        orb_wait_signal(&l->change, &a->stats);
}
