/* SPDX-License-Identifier: MIT */
/* try_claim: the documented checks in order, then an all-or-nothing commit. */
#include "adm_layout.h"

/* Argument checks that need no ledger: non-NULL, units > 0, no domain twice. */
static int check_vector(const struct orbit_units *v, size_t n, uint32_t max_domains)
{
    if (n == 0)
        return 0;
    if (!v || n > max_domains)
        return -ORBIT_EMALFORMED;
    for (size_t i = 0; i < n; i++) {
        if (v[i].units == 0)
            return -ORBIT_EMALFORMED;
        for (size_t j = 0; j < i; j++)
            if (v[j].domain == v[i].domain)
                return -ORBIT_EMALFORMED;
    }
    return 0;
}

static int check_demand(const struct orbit_admission *a, const struct orbit_demand *d)
{
    if (d->n_claim == 0)
        return -ORBIT_EMALFORMED;
    int rc = check_vector(d->claim, d->n_claim, a->geo.max_domains);
    if (rc == 0)
        rc = check_vector(d->fit, d->n_fit, a->geo.max_domains);
    if (rc < 0 || d->retained_bytes == 0)
        return rc;
    /* The fee must be the complete claim: a smaller one would under-count retention. */
    uint64_t sum = 0;
    for (size_t i = 0; i < d->n_claim; i++)
        if (__builtin_add_overflow(sum, d->claim[i].units, &sum))
            return -ORBIT_EMALFORMED;
    return sum == d->retained_bytes ? 0 : -ORBIT_EMALFORMED;
}

/* A domain's index: the handle's hint when it still names the id, else a scan. */
static int64_t find_domain(struct orbit_admission *a, uint32_t id)
{
    uint32_t *hint = &a->hint[id & (ADM_HINTS - 1)];
    /* Domains are never removed or moved: a hint that checks out is the index (n_domains bounded). */
    if (*hint != 0 && *hint - 1 < a->ledger->n_domains && a->domains[*hint - 1].id == id)
        return *hint - 1;
    int64_t i = adm_domain_find(a, id);
    if (i >= 0)
        *hint = (uint32_t)i + 1;
    return i;
}

static void set_blocker(const struct orbit_admission *a, const struct adm_want *w,
                        struct orbit_admit_result *out)
{
    const struct adm_domain *dom = &a->domains[w->index];
    out->blocker_domain = dom->id;
    out->blocker_maximum = dom->capacity;
    out->blocker_free = dom->used <= dom->capacity ? dom->capacity - dom->used : 0;
}

/* What one pass over the demand found; indexes into want, SIZE_MAX for none. */
struct adm_plan {
    size_t rejected;        /* first claim, then fit, entry above its domain's capacity */
    size_t blocked;         /* first claim entry whose domain is over capacity or too full for it */
    bool overused;          /* that domain's used is above its capacity (a broken invariant) */
    bool epoch_spent;       /* a claimed domain's availability epoch cannot advance at release */
};

/* Resolves every entry into want and finds the first refusal of each kind. */
static int plan(struct orbit_admission *a, const struct orbit_demand *d, struct adm_want *want,
                struct adm_plan *p)
{
    size_t nc = d->n_claim, n = nc + d->n_fit;
    *p = (struct adm_plan){ SIZE_MAX, SIZE_MAX, false, false };
    for (size_t i = 0; i < n; i++) {
        const struct orbit_units *u = i < nc ? &d->claim[i] : &d->fit[i - nc];
        int64_t idx = find_domain(a, u->domain);
        if (idx < 0)
            return -ORBIT_EMALFORMED;
        want[i] = (struct adm_want){ (uint32_t)idx, u->units };
        const struct adm_domain *dom = &a->domains[idx];
        uint64_t cap = dom->capacity, used = dom->used;
        if (u->units > cap && p->rejected == SIZE_MAX)
            p->rejected = i;
        if (i >= nc)
            continue;
        if (p->blocked == SIZE_MAX && (used > cap || u->units > cap - used)) {
            p->blocked = i;
            p->overused = used > cap;
        }
        p->epoch_spent |= dom->availability_epoch == UINT64_MAX;
    }
    return 0;
}

/* Pre-commit checks: every one that fails is a broken invariant or an exhausted counter. */
static enum adm_poison precheck(const struct orbit_admission *a, const struct adm_plan *p, uint64_t fee)
{
    const struct adm_ledger *l = a->ledger;
    if (l->next_serial == 0 || l->next_serial == UINT64_MAX)
        return ADM_POISON_SERIAL;
    uint64_t e = atomic_load_explicit(&l->change_epoch, memory_order_relaxed);
    /* The change epoch must be able to advance once for every release, this one included. */
    if (e > UINT64_MAX - (uint64_t)l->live_claims - 1)
        return ADM_POISON_EPOCH;
    uint64_t sum;
    if (__builtin_add_overflow(l->retained_bytes, fee, &sum) || sum > a->geo.retained_max)
        return ADM_POISON_RETAINED;
    /* used + units <= capacity was proven by plan; the release must advance the domains' epochs. */
    if (p->epoch_spent)
        return ADM_POISON_EPOCH;
    uint32_t slot = a->free_stack[l->free_top - 1];
    if (slot >= a->geo.max_claims ||
        atomic_load_explicit(&adm_record(a, slot)->state, memory_order_relaxed) != ADM_REC_FREE)
        return ADM_POISON_LAYOUT;
    return ADM_OK;
}

/* Claim-table room: 0, -ORBIT_EFULL, or -1 when the counts disagree (poison). */
static int table_room(const struct orbit_admission *a)
{
    const struct adm_ledger *l = a->ledger;
    if (l->free_top > a->geo.max_claims || l->live_claims != a->geo.max_claims - l->free_top)
        return -1;
    return l->free_top == 0 ? -ORBIT_EFULL : 0;
}

/* Write the record, then charge the domains. Order matters for repair (see lock.c). */
static void commit(struct orbit_admission *a, const struct adm_want *claim, size_t nc, uint64_t fee,
                   struct orbit_claim *out)
{
    struct adm_ledger *l = a->ledger;
    uint64_t serial = l->next_serial;
    /* The serial is spent before any record carries it: a crash never lets it be reused. */
    l->next_serial = serial + 1;
    uint32_t slot = a->free_stack[--l->free_top];
    struct adm_record *r = adm_record(a, slot);
    /* WRITING first: a holder that dies before LIVE leaves a record repair refuses to trust. */
    atomic_store_explicit(&r->state, ADM_REC_WRITING, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    r->node = a->fleet->node;
    r->incarnation = a->fleet->incarnation;
    r->serial = serial;
    r->retained_bytes = fee;
    r->n_units = (uint32_t)nc;
    adm_park_here(a, ADM_PARK_CLAIM_WRITING);
    for (size_t i = 0; i < nc; i++)
        r->units[i] = (struct adm_unit){ .domain_index = claim[i].index, .units = claim[i].units };
    /* Release: the record's fields are complete before it counts as live. */
    atomic_store_explicit(&r->state, ADM_REC_LIVE, memory_order_release);
    for (size_t i = 0; i < nc; i++) {
        a->domains[claim[i].index].used += claim[i].units;
        if (i == 0)
            adm_park_here(a, ADM_PARK_CLAIM_COMMIT);
    }
    l->retained_bytes += fee;
    l->live_claims++;
    *out = (struct orbit_claim){ .serial = serial, .node = r->node, .retained_bytes = fee,
                                 .released = false, .slot = slot, .incarnation = r->incarnation };
}

/* SKIPPED when the retained cap cannot take the fee: 1 skipped, 0 fits, -1 over the cap already. */
static int retained_skip(const struct orbit_admission *a, uint64_t fee, struct orbit_admit_result *out)
{
    uint64_t now = a->ledger->retained_bytes;
    if (fee == 0)
        return 0;
    if (now > a->geo.retained_max)
        return -1;
    if (fee <= a->geo.retained_max - now)
        return 0;
    out->outcome = ORBIT_ADMIT_SKIPPED;
    out->skip = ORBIT_SKIP_CAPACITY;
    return 1;
}

/* The ledger's own state is broken: poison it, naming the retained total when that is what broke. */
static int poison_usage(struct orbit_admission *a)
{
    adm_poison(a, a->ledger->retained_bytes > a->geo.retained_max ? ADM_POISON_RETAINED : ADM_POISON_USAGE);
    return -ORBIT_EPOISONED;
}

/* REJECTED, DEFERRED or SKIPPED for the cap: 1 decided, 0 go on, or -ORBIT_EPOISONED. */
static int refuse(struct orbit_admission *a, const struct orbit_demand *d, const struct adm_want *want,
                  const struct adm_plan *p, struct orbit_admit_result *out)
{
    if (p->rejected != SIZE_MAX) {
        out->outcome = ORBIT_ADMIT_REJECTED;
        set_blocker(a, &want[p->rejected], out);
        return 1;
    }
    if (p->blocked != SIZE_MAX) {
        if (p->overused)
            return poison_usage(a);
        out->outcome = ORBIT_ADMIT_DEFERRED;
        set_blocker(a, &want[p->blocked], out);
        return 1;
    }
    int r = retained_skip(a, d->retained_bytes, out);
    return r >= 0 ? r : poison_usage(a);
}

/* The checks after the lock, in the order admission.h documents. Returns 0 with out filled, or an error. */
static int decide(struct orbit_admission *a, const struct orbit_demand *d, struct adm_want *want,
                  struct orbit_admit_result *out)
{
    struct adm_ledger *l = a->ledger;
    if (adm_is_poisoned(a))
        return -ORBIT_EPOISONED;
    if (atomic_load_explicit(&l->closed, memory_order_relaxed))
        return -ORBIT_ECLOSEDADM;
    out->release_epoch = atomic_load_explicit(&l->change_epoch, memory_order_relaxed);
    out->retained_now = l->retained_bytes;
    out->retained_max = a->geo.retained_max;
    if (d->retained_bytes != 0 && a->geo.retained_max == 0) {
        out->outcome = ORBIT_ADMIT_SKIPPED;
        out->skip = ORBIT_SKIP_DISABLED;
        return 0;
    }
    if (l->n_domains > a->geo.max_domains) {
        adm_poison(a, ADM_POISON_LAYOUT);
        return -ORBIT_EPOISONED;
    }
    struct adm_plan p;
    if (plan(a, d, want, &p) < 0)
        return -ORBIT_EMALFORMED;
    int rc = refuse(a, d, want, &p, out);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if ((rc = table_room(a)) == -ORBIT_EFULL)
        return rc;
    enum adm_poison why = rc < 0 ? ADM_POISON_LAYOUT : precheck(a, &p, d->retained_bytes);
    if (why != ADM_OK) {
        adm_poison(a, why);
        return -ORBIT_EPOISONED;
    }
    commit(a, want, d->n_claim, d->retained_bytes, &out->claim);
    out->outcome = ORBIT_ADMIT_CLAIMED;
    return 0;
}

/* Every field zero (field by field: cheaper than a memset call of the whole struct). */
static void clear_result(struct orbit_admit_result *out)
{
    out->outcome = ORBIT_ADMIT_CLAIMED;
    out->claim = (struct orbit_claim){ 0 };
    out->release_epoch = 0;
    out->blocker_domain = 0;
    out->blocker_free = out->blocker_maximum = 0;
    out->skip = ORBIT_SKIP_NONE;
    out->retained_now = out->retained_max = 0;
}

int orbit_admission_try_claim(struct orbit_admission *a, const struct orbit_demand *d,
                              struct orbit_admit_result *out)
{
    if (!a || !d || !out)
        return -ORBIT_EMALFORMED;
    int rc = check_demand(a, d);
    if (rc < 0)
        return rc;
    if (a->fleet->observer)
        return -ORBIT_ENOTOWNER;
    clear_result(out);
    if ((rc = adm_lock(a, false)) < 0)
        return rc;
    /* a->want holds 2 * max_domains entries: claim and fit are at most max_domains each. */
    rc = decide(a, d, a->want, out);
    adm_unlock(a);
    return rc;
}
