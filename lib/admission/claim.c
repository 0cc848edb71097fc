/* SPDX-License-Identifier: MIT */
/* try_claim: the documented checks in order, then an all-or-nothing commit. */
#include "adm_layout.h"

#define BAD_DEMAND(...) orb_fail(-ORBIT_EMALFORMED, "orbit_admission_try_claim: " __VA_ARGS__)

/* Argument checks that need no ledger: non-NULL, units > 0, no domain twice. */
static int check_vector(const struct orbit_units *v, size_t n, uint32_t max_domains, const char *which)
{
    if (n == 0)
        return 0;
    if (!v)
        return BAD_DEMAND("demand.%s is NULL with %zu entries", which, n);
    if (n > max_domains)
        return BAD_DEMAND("demand.%s has %zu entries: at most max_domains (%u)", which, n, max_domains);
    for (size_t i = 0; i < n; i++) {
        if (v[i].units == 0)
            return BAD_DEMAND("demand.%s[%zu] (domain %u) asks 0 units: 1 or more", which, i, v[i].domain);
        for (size_t j = 0; j < i; j++)
            if (v[j].domain == v[i].domain)
                return BAD_DEMAND("demand.%s names domain %u twice", which, v[i].domain);
    }
    return 0;
}

/* check_vector's verdict on a claim of one or two entries, without the call: true only where
 * it would return 0 (anything else goes to check_vector, which names what is wrong). */
static inline bool claim_small_ok(const struct orbit_units *v, size_t n, uint32_t max_domains)
{
    if (!v || n > 2 || n > max_domains || v[0].units == 0)
        return false;
    return n == 1 || (v[1].units != 0 && v[1].domain != v[0].domain);
}

static int check_demand(const struct orbit_admission *a, const struct orbit_demand *d)
{
    if (d->n_claim == 0)
        return BAD_DEMAND("demand.n_claim is 0: a claim takes units of at least one domain");
    int rc = claim_small_ok(d->claim, d->n_claim, a->geo.max_domains)
                 ? 0 : check_vector(d->claim, d->n_claim, a->geo.max_domains, "claim");
    if (rc == 0 && d->n_fit)   /* most demands have no fit entries: no call */
        rc = check_vector(d->fit, d->n_fit, a->geo.max_domains, "fit");
    if (rc < 0 || d->retained_bytes == 0)
        return rc;
    /* The fee must be the complete claim: a smaller one would under-count retention. */
    uint64_t sum = 0;
    for (size_t i = 0; i < d->n_claim; i++)
        if (__builtin_add_overflow(sum, d->claim[i].units, &sum))
            return BAD_DEMAND("demand.claim's units overflow 64 bits");
    if (sum != d->retained_bytes)
        return BAD_DEMAND("demand.retained_bytes %llu: 0 or the claim's sum (%llu)",
                          (unsigned long long)d->retained_bytes, (unsigned long long)sum);
    return 0;
}

/* A domain's index: the handle's hint when it still names the id, else a scan. n: n_domains, bounded. */
static inline int64_t find_domain(struct orbit_admission *a, const struct adm_domain *doms, uint32_t n,
                                  uint32_t id)
{
    uint32_t *hint = &a->hint[id & (ADM_HINTS - 1)];
    uint32_t h = *hint - 1;   /* 0 (no hint) wraps to UINT32_MAX, never below n */
    /* Domains are never removed or moved: a hint that checks out is the index. */
    if (h < n && doms[h].id == id)
        return h;
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

/* A claim entry the ledger may refuse, or a domain that is broken (over capacity, epoch spent). */
static inline bool claim_troubled(uint64_t cap, uint64_t used, uint64_t epoch, uint64_t units)
{
    return (used > cap) | (units > cap - used) | (epoch == UINT64_MAX);
}

/*
 * Resolves the claim, then fit, entries into want. -ORBIT_EMALFORMED for an
 * unknown domain; 1 when an entry may be refused or a claimed domain is
 * broken (over capacity, availability epoch spent): the ordered checks below
 * then decide; 0 when every claim entry fits its domain's free units and
 * every fit entry its capacity.
 */
static int resolve_scan(struct orbit_admission *a, const struct orbit_demand *d, struct adm_want *want)
{
    const struct adm_domain *doms = a->domains;
    size_t nc = d->n_claim;
    uint32_t n_domains = a->ledger->n_domains;   /* checked against max_domains by the caller */
    bool trouble = false;
    for (size_t i = 0; i < nc + d->n_fit; i++) {
        const struct orbit_units *u = i < nc ? &d->claim[i] : &d->fit[i - nc];
        int64_t idx = find_domain(a, doms, n_domains, u->domain);
        if (idx < 0)
            return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
        want[i] = (struct adm_want){ (uint32_t)idx, u->units };
        const struct adm_domain *dom = &doms[idx];
        if (i >= nc)
            trouble |= u->units > dom->capacity;
        else
            trouble |= claim_troubled(dom->capacity, dom->used, dom->availability_epoch, u->units);
    }
    return trouble;
}

/* resolve_scan for claims without fit entries whose domains the hints know (no call, no branch
 * per entry); anything else goes to resolve_scan. */
static int resolve(struct orbit_admission *a, const struct orbit_demand *d, struct adm_want *want)
{
    const struct adm_domain *doms = a->domains;
    const struct orbit_units *claim = d->claim;
    const uint32_t *hint = a->hint;
    size_t nc = d->n_claim;
    uint32_t n_domains = a->ledger->n_domains;
    bool trouble = false, miss = d->n_fit != 0;
    for (size_t i = 0; i < nc && !miss; i++) {
        uint32_t id = claim[i].domain, h = hint[id & (ADM_HINTS - 1)] - 1;   /* 0 wraps: a miss */
        uint64_t units = claim[i].units;
        if (h >= n_domains || doms[h].id != id) {
            miss = true;
            break;
        }
        want[i] = (struct adm_want){ h, units };
        trouble |= claim_troubled(doms[h].capacity, doms[h].used, doms[h].availability_epoch, units);
    }
    return miss ? resolve_scan(a, d, want) : trouble;
}

/* REJECTED: the first claim, then fit, entry above its domain's capacity. */
static bool find_rejected(const struct orbit_admission *a, const struct adm_want *want, size_t n,
                          struct orbit_admit_result *out)
{
    for (size_t i = 0; i < n; i++) {
        if (want[i].units > a->domains[want[i].index].capacity) {
            out->outcome = ORBIT_ADMIT_REJECTED;
            set_blocker(a, &want[i], out);
            return true;
        }
    }
    return false;
}

/* DEFERRED: the first claim entry above its domain's free units. -1: used > capacity (poison). */
static int find_deferred(const struct orbit_admission *a, const struct adm_want *claim, size_t nc,
                         struct orbit_admit_result *out)
{
    for (size_t i = 0; i < nc; i++) {
        const struct adm_domain *dom = &a->domains[claim[i].index];
        if (dom->used > dom->capacity)
            return -1;
        if (claim[i].units > dom->capacity - dom->used) {
            out->outcome = ORBIT_ADMIT_DEFERRED;
            set_blocker(a, &claim[i], out);
            return 1;
        }
    }
    return 0;
}

/* Pre-commit checks: every one that fails is a broken invariant or an exhausted counter. *slot: the free slot. */
static enum adm_poison precheck(const struct orbit_admission *a, const struct adm_want *claim, size_t nc,
                                bool trouble, uint64_t fee, uint32_t *slot)
{
    const struct adm_ledger *l = a->ledger;
    uint64_t serial = l->next_serial, sum;
    if (serial == 0 || serial == UINT64_MAX)
        return ADM_POISON_SERIAL;
    uint64_t e = atomic_load_explicit(&l->change_epoch, memory_order_relaxed);
    /* The change epoch must be able to advance once for every release, this one included. */
    if (e > UINT64_MAX - (uint64_t)l->live_claims - 1)
        return ADM_POISON_EPOCH;
    if (__builtin_add_overflow(l->retained_bytes, fee, &sum) || sum > a->geo.retained_max)
        return ADM_POISON_RETAINED;
    /* used + units <= capacity was proven by resolve or find_deferred; the release must
     * advance the domains' epochs (resolve found them all below the top unless trouble). */
    for (size_t i = 0; trouble && i < nc; i++)
        if (a->domains[claim[i].index].availability_epoch == UINT64_MAX)
            return ADM_POISON_EPOCH;
    *slot = a->free_stack[l->free_top - 1];   /* table_room proved 0 < free_top <= max_claims */
    if (*slot >= a->geo.max_claims ||
        atomic_load_explicit(&adm_record(a, *slot)->state, memory_order_relaxed) != ADM_REC_FREE)
        return ADM_POISON_LAYOUT;
    return ADM_OK;
}

/* Claim-table room: 0, -ORBIT_EFULL, or -1 when the counts disagree (poison). */
static int table_room(const struct orbit_admission *a)
{
    const struct adm_ledger *l = a->ledger;
    uint32_t top = l->free_top, max = a->geo.max_claims;
    if (top > max || l->live_claims != max - top)
        return -1;
    return top == 0 ? -ORBIT_EFULL : 0;
}

/* Write the record into slot (precheck's), then charge the domains. Order matters for repair (see lock.c). */
static void commit(struct orbit_admission *a, const struct adm_want *claim, size_t nc, uint64_t fee,
                   uint32_t slot, struct orbit_claim *out)
{
    struct adm_ledger *l = a->ledger;
    struct adm_domain *doms = a->domains;
    struct adm_record *r = adm_record(a, slot);
    uint64_t serial = l->next_serial, inc = a->fleet->incarnation;
    uint16_t node = a->fleet->node;
    /* The serial is spent before any record carries it: a crash never lets it be reused. */
    l->next_serial = serial + 1;
    l->free_top--;
    /* WRITING first: a holder that dies before LIVE leaves a record repair refuses to trust. */
    atomic_store_explicit(&r->state, ADM_REC_WRITING, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    r->node = node;
    r->incarnation = inc;
    r->serial = serial;
    r->retained_bytes = fee;
    r->n_units = (uint32_t)nc;
    adm_park_here(a, ADM_PARK_CLAIM_WRITING);
    struct adm_unit *ru = r->units;
    for (size_t i = 0; i < nc; i++) {
        struct adm_want w = claim[i];
        ru[i] = (struct adm_unit){ .domain_index = w.index, .units = w.units };
    }
    /* Release: the record's fields are complete before it counts as live. */
    atomic_store_explicit(&r->state, ADM_REC_LIVE, memory_order_release);
    doms[claim[0].index].used += claim[0].units;   /* nc >= 1 (check_demand) */
    adm_park_here(a, ADM_PARK_CLAIM_COMMIT);
    for (size_t i = 1; i < nc; i++) {
        struct adm_want w = claim[i];
        doms[w.index].used += w.units;
    }
    l->retained_bytes += fee;
    l->live_claims++;
    *out = (struct orbit_claim){ .serial = serial, .node = node, .retained_bytes = fee,
                                 .released = false, .slot = slot, .incarnation = inc };
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
    return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
}

/* REJECTED, DEFERRED or SKIPPED for the cap: 1 decided, 0 go on, or -ORBIT_EPOISONED. */
static int refuse(struct orbit_admission *a, const struct orbit_demand *d, const struct adm_want *want,
                  bool trouble, struct orbit_admit_result *out)
{
    int r = 0;
    if (trouble) {
        if (find_rejected(a, want, d->n_claim + d->n_fit, out))
            return 1;
        r = find_deferred(a, want, d->n_claim, out);
    }
    if (r == 0)
        r = retained_skip(a, d->retained_bytes, out);
    return r >= 0 ? r : poison_usage(a);
}

/* The checks after the lock, in the order admission.h documents. Returns 0 with out filled, or an error. */
static int decide(struct orbit_admission *a, const struct orbit_demand *d, struct adm_want *want,
                  struct orbit_admit_result *out)
{
    struct adm_ledger *l = a->ledger;
    if (adm_is_poisoned(a))
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    if (atomic_load_explicit(&l->closed, memory_order_relaxed))
        return orb_fail_text(-ORBIT_ECLOSEDADM, "the ledger was shut down: no new claims");
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
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    int trouble = resolve(a, d, want);
    if (trouble < 0)
        return trouble;
    int rc = refuse(a, d, want, trouble, out);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if ((rc = table_room(a)) == -ORBIT_EFULL)
        return rc;
    uint32_t slot = 0;
    enum adm_poison why = rc < 0 ? ADM_POISON_LAYOUT : precheck(a, want, d->n_claim, trouble, d->retained_bytes, &slot);
    if (why != ADM_OK) {
        adm_poison(a, why);
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    commit(a, want, d->n_claim, d->retained_bytes, slot, &out->claim);
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
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!d || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__, d ? "out" : "demand");
    int rc = check_demand(a, d);
    if (rc < 0)
        return rc;
    if (a->fleet->observer)
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer claims nothing (join as a member)", __func__);
    clear_result(out);
    if ((rc = adm_lock(a, false)) < 0)
        return rc;
    /* a->want holds 2 * max_domains entries: claim and fit are at most max_domains each. */
    rc = decide(a, d, a->want, out);
    adm_unlock(a);
    if (rc == 0) {
        static const unsigned by_outcome[] = { [ORBIT_ADMIT_CLAIMED] = ADM_CTR_CLAIMS,
            [ORBIT_ADMIT_DEFERRED] = ADM_CTR_DEFERRED, [ORBIT_ADMIT_SKIPPED] = ADM_CTR_SKIPPED,
            [ORBIT_ADMIT_REJECTED] = ADM_CTR_REJECTED };
        if ((unsigned)out->outcome < sizeof by_outcome / sizeof by_outcome[0])
            orb_count(&a->ctr, by_outcome[out->outcome], 1);
    }
    return rc;
}
