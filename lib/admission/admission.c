/* SPDX-License-Identifier: MIT */
/* The admission ledger: segment layout, open/close, capacity, shutdown, waits. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <orbit/uring.h>
#include "adm_layout.h"
#include "uring_internal.h"

static size_t round64(size_t v) { return (v + 63) & ~(size_t)63; }

/* adm_geometry_make's refusals with their reasons, for the caller's own spec. */
static int spec_explain(const struct orbit_admission_spec *spec, const char *call)
{
    if (spec->kind == ORB_FLEET_KIND)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.kind %u is the fleet segment's own", call, spec->kind);
    if (spec->max_domains == 0 || spec->max_domains > ADM_DOMAINS_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.max_domains %u: 1..%u", call, spec->max_domains,
                        ADM_DOMAINS_MAX);
    if (spec->max_claims == 0 || spec->max_claims > ADM_CLAIMS_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.max_claims %u: 1..%u", call, spec->max_claims,
                        ADM_CLAIMS_MAX);
    return orb_fail(-ORBIT_EMALFORMED, "%s: the spec's ledger is larger than %zu bytes", call,
                    (size_t)ADM_TABLE_MAX);
}

int adm_geometry_make(const struct orbit_admission_spec *spec, struct adm_geometry *out)
{
    if (spec->kind == ORB_FLEET_KIND || spec->max_domains == 0 || spec->max_domains > ADM_DOMAINS_MAX ||
        spec->max_claims == 0 || spec->max_claims > ADM_CLAIMS_MAX)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    *out = (struct adm_geometry){
        .layout = ADM_LAYOUT_VERSION,
        .max_domains = spec->max_domains,
        .max_claims = spec->max_claims,
        .record_bytes = (uint32_t)round64(sizeof(struct adm_record) +
                                          sizeof(struct adm_unit) * spec->max_domains),
        .retained_max = spec->retained_max_bytes,
    };
    struct adm_offsets off;
    return adm_offsets(out, &off);
}

int adm_offsets(const struct adm_geometry *g, struct adm_offsets *out)
{
    out->domains = round64(sizeof(struct adm_ledger));
    out->free_stack = out->domains + round64(sizeof(struct adm_domain) * g->max_domains);
    out->records = out->free_stack + round64(sizeof(uint32_t) * g->max_claims);
    out->table_bytes = out->records + (size_t)g->record_bytes * g->max_claims;
    return ORB_SEG_HEADER_BYTES + out->table_bytes <= ADM_TABLE_MAX ? 0 : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
}

/*
 * Serials start at a random point below 2^62 (at least 2^62 remain): a claim
 * of another ledger, or of an earlier ledger of the same name, is then never
 * taken for one of this ledger's (a ledger identity and a counter in one number).
 */
static uint64_t serial_base(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)orb_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
    return (r & ((1ull << 62) - 1)) + 1;
}

/* The creator's initialiser: runs before the segment's ready word is published. */
static int adm_init(struct orb_segment *seg, void *ctx)
{
    const struct adm_geometry *g = ctx;
    struct adm_offsets off;
    adm_offsets(g, &off);
    char *t = orb_seg_table(seg);
    memset(t, 0, off.table_bytes);
    struct adm_ledger *l = (struct adm_ledger *)(void *)t;
    l->next_serial = serial_base();
    l->free_top = g->max_claims;
    uint32_t *stack = (uint32_t *)(void *)(t + off.free_stack);
    /* Slot 0 on top: the first claims take the lowest slots. */
    for (uint32_t i = 0; i < g->max_claims; i++)
        stack[i] = g->max_claims - 1 - i;
    orb_flock_init(&l->lock, &l->lock_sleepers);
    /* A first table epoch, as every table's (the fleet's listing; reset_all moves it on).
     * Relaxed: the segment's ready word, published after this initialiser, releases it. */
    atomic_store_explicit(&orb_seg_hdr(seg)->epoch, orb_next_epoch(0), memory_order_relaxed);
    return 0;
}

static enum adm_park park_from_env(void)
{
#ifdef ORBIT_TEST_HOOKS
    const char *v = getenv("ORBIT_TEST_ADMISSION_PARK_IN_MUTEX");
#else
    const char *v = NULL;   /* a build without -Dtest_hooks reads no ORBIT_TEST_* */
#endif
    if (!v)
        return ADM_PARK_NONE;
    if (strcmp(v, "claim-writing") == 0)
        return ADM_PARK_CLAIM_WRITING;
    if (strcmp(v, "claim-commit") == 0)
        return ADM_PARK_CLAIM_COMMIT;
    if (strcmp(v, "release") == 0)
        return ADM_PARK_RELEASE;
    return ADM_PARK_NONE;
}

static void handle_prepare(struct orb_table_base *b)
{
    ((struct orbit_admission *)b)->park = park_from_env();
}

/* The geometry of a mapped segment (another process's, or ours as made): one this build
 * would have made from its own spec, and a layout that fits the segment. */
static int geometry_check(const struct orb_segment *seg, const void *geometry, void *layout)
{
    const struct adm_geometry *stored = geometry;
    struct adm_offsets *off = layout;
    const struct orb_seg_header *h = orb_seg_hdr(seg);
    struct orbit_admission_spec spec = { .kind = h->kind, .max_domains = stored->max_domains,
                                         .max_claims = stored->max_claims,
                                         .retained_max_bytes = stored->retained_max };
    struct adm_geometry g;
    if (adm_geometry_make(&spec, &g) < 0 || memcmp(&g, stored, sizeof g) != 0)
        return orb_fail_text(-ORBIT_EGEOMETRY, "the ledger's geometry fails its checks (garbled, or another orbit version)");
    adm_offsets(&g, off);
    if (h->table_bytes != ORB_SEG_HEADER_BYTES + off->table_bytes ||
        seg->mapped < ORB_SEG_HEADER_BYTES + off->table_bytes)
        return orb_fail_text(-ORBIT_ECORRUPT, "the ledger's shared values failed a bounds check");
    return 0;
}

_Static_assert(sizeof(struct adm_offsets) <= ORB_TABLE_LAYOUT_MAX, "the base holds the layout");

static void handle_bind(struct orb_table_base *b, const void *geometry, const void *layout)
{
    struct orbit_admission *a = (struct orbit_admission *)b;
    const struct adm_offsets *off = layout;
    char *t = orb_seg_table(&a->seg);
    a->geo = *(const struct adm_geometry *)geometry;
    a->ledger = (struct adm_ledger *)(void *)t;
    a->domains = (struct adm_domain *)(void *)(t + off->domains);
    a->free_stack = (uint32_t *)(void *)(t + off->free_stack);
    a->records = (unsigned char *)(t + off->records);
}

/* The handle's own scratch, sized by the ledger's domains (used only under its mutex). */
static int handle_ready(struct orb_table_base *b)
{
    struct orbit_admission *a = (struct orbit_admission *)b;
    a->scratch = calloc(a->geo.max_domains, sizeof(uint64_t));
    a->want = calloc(2 * (size_t)a->geo.max_domains, sizeof *a->want);
    if (!a->scratch || !a->want)
        return orb_fail(-ENOMEM, "out of memory for a ledger handle's scratch (%u domains)", a->geo.max_domains);
    return 0;
}

static void handle_release(struct orb_table_base *b)
{
    struct orbit_admission *a = (struct orbit_admission *)b;
    free(a->scratch);
    free(a->want);
}

const struct orb_table_kind adm_kind = {
    .type = ORB_TABLE_ADMISSION, .handle_bytes = sizeof(struct orbit_admission),
    .geometry_len = sizeof(struct adm_geometry), .prepare = handle_prepare, .check = geometry_check,
    .bind = handle_bind, .ready = handle_ready, .release = handle_release,
};
int orbit_admission_open(struct orbit_fleet *f, const struct orbit_admission_spec *spec,
                         struct orbit_admission **out)
{
    static const struct orbit_admission_spec dflt = ORBIT_ADMISSION_SPEC_DEFAULT;
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    struct adm_geometry g;
    if (spec && (rc = orb_check_resv(spec->resv, sizeof spec->resv / sizeof spec->resv[0], __func__,
                                     "ORBIT_ADMISSION_SPEC_DEFAULT")) < 0)
        return rc;
    if (adm_geometry_make(spec ? spec : &dflt, &g) < 0)
        return spec_explain(spec ? spec : &dflt, __func__);
    struct adm_offsets off;
    adm_offsets(&g, &off);
    struct orb_seg_request req = {
        .kind = (spec ? spec : &dflt)->kind,
        .table_type = ORB_TABLE_ADMISSION,
        .geometry = &g,
        .geometry_len = sizeof g,
        .geometry_names = (const char *const[]){ "layout version", "max_domains", "max_claims", "record bytes",
                                                 "retained_max_bytes", "retained_max_bytes (high half)", NULL },
        .table_bytes = ORB_SEG_HEADER_BYTES + off.table_bytes,
        .populate_bytes = ORB_SEG_HEADER_BYTES + off.table_bytes,
        .init = adm_init,
        .ctx = &g,
    };
    return orb_table_create(&adm_kind, f, &req, (void **)out);
}

int orbit_admission_open_existing(struct orbit_fleet *f, uint8_t kind, struct orbit_admission **out)
{
    return orb_table_open_existing_as(&adm_kind, f, kind, (void **)out, __func__);
}

/* Unmaps and frees; never touches the ledger (a fork child may close the parent's handle). */
void orbit_admission_close(struct orbit_admission *a)
{
    orb_error_clear();
    orb_table_close(&adm_kind, a ? &a->base : NULL);
}

/* ---- capacity and shutdown --------------------------------------------- */

int64_t adm_domain_find(const struct orbit_admission *a, uint32_t id)
{
    for (uint32_t i = 0; i < a->ledger->n_domains; i++)
        if (a->domains[i].id == id)
            return i;
    return -1;
}

static int add_domain(struct orbit_admission *a, uint32_t id, uint64_t capacity)
{
    struct adm_ledger *l = a->ledger;
    if (l->n_domains >= a->geo.max_domains)
        return orb_fail_text(-ORBIT_EKEYFULL, "every domain slot is taken (max_domains)");
    a->domains[l->n_domains] = (struct adm_domain){ .id = id, .capacity = capacity };
    /* The entry is whole before n_domains covers it: a crash here leaves it unseen. */
    atomic_signal_fence(memory_order_seq_cst);
    l->n_domains++;
    return 0;
}

static int set_capacity_locked(struct orbit_admission *a, uint32_t id, uint64_t capacity)
{
    if (adm_is_poisoned(a))
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    if (a->ledger->n_domains > a->geo.max_domains) {
        adm_poison(a, ADM_POISON_LAYOUT);
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    int64_t i = adm_domain_find(a, id);
    if (i < 0)
        return add_domain(a, id, capacity);
    struct adm_domain *dom = &a->domains[i];
    if (capacity < dom->used)
        return -ORBIT_EBUSY;
    if (capacity <= dom->capacity) {
        dom->capacity = capacity;
        return 0;
    }
    /* Growth: deferred claimers on this domain may fit now. */
    if (dom->availability_epoch == UINT64_MAX) {
        adm_poison(a, ADM_POISON_EPOCH);
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    if (!adm_advance_epoch(a))
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    dom->capacity = capacity;
    dom->availability_epoch++;
    orb_wait_signal(&a->ledger->change, &a->stats);
    return 0;
}

int orbit_admission_set_capacity(struct orbit_admission *a, uint32_t domain, uint64_t capacity)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    int rc = adm_lock(a, false);
    if (rc < 0)
        return rc;
    rc = set_capacity_locked(a, domain, capacity);
    adm_unlock(a);
    if (rc == -ORBIT_EBUSY)
        return orb_fail(rc, "%s: domain %u: capacity %llu is below the units claimed now", __func__, domain,
                        (unsigned long long)capacity);
    if (rc == -ORBIT_EKEYFULL)
        return orb_fail(rc, "%s: domain %u is new and all %u domains are set up", __func__, domain,
                        a->geo.max_domains);
    return rc;
}

int orbit_admission_shutdown(struct orbit_admission *a)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    int rc = adm_lock(a, false);
    if (rc < 0)
        return rc;
    struct adm_ledger *l = a->ledger;
    if (adm_is_poisoned(a))
        rc = orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    else if (!atomic_load_explicit(&l->closed, memory_order_relaxed)) {
        atomic_store_explicit(&l->closed, 1, memory_order_relaxed);
        /* Deferred claimers wake and learn from try_claim that admission closed. */
        if (adm_advance_epoch(a))
            orb_wait_signal(&l->change, &a->stats);
        else
            rc = orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    }
    adm_unlock(a);
    return rc;
}

/* ---- waits --------------------------------------------------------------- */

struct adm_wait_ctx { struct orbit_admission *a; uint64_t since; };

/* The spinning check: reads only. */
static int epoch_passed(void *p)
{
    const struct adm_wait_ctx *c = p;
    if (adm_is_poisoned(c->a))
        return orb_fail_text(-ORBIT_EPOISONED, "the ledger is poisoned (fail-closed): orbitctl show names why; stop the members and orbitctl reset");
    /* Acquire pairs with the epoch's release store: the change behind it is visible. */
    return atomic_load_explicit(&c->a->ledger->change_epoch, memory_order_acquire) > c->since;
}

/* Raises epoch_wanted to want; false when hostile writes keep it moving. */
static bool want_epoch(struct adm_ledger *l, uint64_t want)
{
    uint64_t cur = atomic_load_explicit(&l->epoch_wanted, memory_order_relaxed);
    for (int tries = 0; cur < want; tries++)
        if (tries == 64 || atomic_compare_exchange_weak_explicit(&l->epoch_wanted, &cur, want,
                                                                 memory_order_relaxed, memory_order_relaxed))
            return tries < 64;
    return true;
}

/*
 * The check before a sleep. A release wakes only a waiter that wants its
 * epoch (adm_wake_wanted, after its give), so: publish the wanted epoch,
 * order it before every give to come, then look again. A give by exchange
 * is ordered with our RMW on the lock word (acq_rel); a give by a plain
 * store with the membarrier in orb_lock_fence_others. Either the release
 * reads our epoch_wanted, or we read its epoch.
 */
static int epoch_passed_armed(void *p)
{
    const struct adm_wait_ctx *c = p;
    struct adm_ledger *l = c->a->ledger;
    int r = epoch_passed(p);
    if (r != 0)
        return r;
    if (!want_epoch(l, c->since == UINT64_MAX ? UINT64_MAX : c->since + 1))
        return 1;   /* cannot register: return as if woken, the caller looks again */
    atomic_fetch_or_explicit(&l->lock.word, 0, memory_order_acq_rel);
    orb_lock_fence_others();
    return epoch_passed(p);
}

int orbit_admission_wait(struct orbit_admission *a, uint64_t since_epoch, int timeout_ms, uint64_t *now)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    if (!a) {
        if (now)
            *now = 0;
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    }
    struct adm_wait_ctx ctx = { a, since_epoch };
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    orb_count(&a->ctr, ADM_CTR_WAITS, 1);
    int rc = epoch_passed(&ctx);
    if (rc == 0)
        rc = orb_deadline_passed(&deadline) ? -ETIMEDOUT : orb_wait_spin(epoch_passed, &ctx, &a->spin, &deadline);
    if (rc == 0)
        rc = orb_wait_park_until(&a->ledger->change, epoch_passed_armed, &ctx, &deadline, &a->spin, &a->stats);
    if (now)
        *now = atomic_load_explicit(&a->ledger->change_epoch, memory_order_acquire);
    if (rc == -ETIMEDOUT || rc == -ORBIT_ETIMEDOUT)
        return orb_fail(-ORBIT_ETIMEDOUT, "no release or capacity change moved the ledger past epoch %llu "
                        "within %d ms", (unsigned long long)since_epoch, timeout_ms);
    return rc > 0 ? 0 : rc;
}

int orbit_admission_prep_wait(struct orbit_admission *a, uint64_t since_epoch, struct io_uring_sqe *sqe)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!a || !sqe)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum"));
    struct adm_wait_ctx ctx = { a, since_epoch };
    return orb_uring_prep_wait(&a->ledger->change, epoch_passed_armed, &ctx, sqe, &a->stats);
}

/* ---- inspection ---------------------------------------------------------- */

bool orbit_admission_poisoned(struct orbit_admission *a)
{
    if (adm_enter(a, __func__) < 0)
        return false;
    return a && adm_is_poisoned(a);
}

uint64_t orbit_admission_epoch(struct orbit_admission *a)
{
    if (adm_enter(a, __func__) < 0)
        return 0;
    return a ? atomic_load_explicit(&a->ledger->change_epoch, memory_order_acquire) : 0;
}

uint64_t orbit_admission_retained_bytes(struct orbit_admission *a)
{
    if (adm_enter(a, __func__) < 0)
        return 0;
    int rc = a ? adm_lock(a, true) : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    if (rc < 0)
        return 0;
    uint64_t v = a->ledger->retained_bytes;
    adm_inspect_done(a, rc);
    return v;
}

ssize_t orbit_admission_domains(struct orbit_admission *a, struct orbit_domain_info *out, size_t max)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a || (max && !out))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    int rc = adm_lock(a, true);
    if (rc < 0)
        return rc;
    uint32_t n = a->ledger->n_domains;
    if (n > a->geo.max_domains)
        n = a->geo.max_domains;   /* bounds first; try_claim poisons on it */
    for (uint32_t i = 0; i < n && i < max; i++) {
        const struct adm_domain *d = &a->domains[i];
        out[i] = (struct orbit_domain_info){ .domain = d->id, .capacity = d->capacity, .used = d->used,
                                             .availability_epoch = d->availability_epoch };
    }
    adm_inspect_done(a, rc);
    return n;
}

static struct orbit_claim claim_of(const struct orbit_admission *a, uint32_t slot)
{
    const struct adm_record *r = adm_record(a, slot);
    return (struct orbit_claim){ .serial = r->serial, .node = r->node, .retained_bytes = r->retained_bytes,
                                 .released = false, .slot = slot, .incarnation = r->incarnation };
}

ssize_t orbit_admission_claims(struct orbit_admission *a, struct orbit_claim_info *out, size_t max)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a || (max && !out))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    int rc = adm_lock(a, true);
    if (rc < 0)
        return rc;
    size_t n = 0;
    for (uint32_t s = 0; s < a->geo.max_claims; s++) {
        const struct adm_record *r = adm_record(a, s);
        if (atomic_load_explicit(&r->state, memory_order_relaxed) != ADM_REC_LIVE)
            continue;
        if (n < max)
            out[n] = (struct orbit_claim_info){ .claim = claim_of(a, s), .n_units = r->n_units };
        n++;
    }
    adm_inspect_done(a, rc);
    return (ssize_t)n;
}

ssize_t orbit_admission_claim_units(struct orbit_admission *a, const struct orbit_claim *c,
                                    struct orbit_units *out, size_t max)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a || !c || (max && !out))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, an empty claim, an unknown domain or one named twice, or a retained fee that is not the claim's sum");
    int rc = adm_lock(a, true);
    if (rc < 0)
        return rc;
    const struct adm_record *r = c->slot < a->geo.max_claims ? adm_record(a, c->slot) : NULL;
    ssize_t n = -ORBIT_ENOTRESERVED;
    if (r && c->serial != 0 && r->serial == c->serial &&
        atomic_load_explicit(&r->state, memory_order_relaxed) == ADM_REC_LIVE) {
        n = r->n_units <= a->geo.max_domains ? (ssize_t)r->n_units : orb_fail_text(-ORBIT_ECORRUPT, "the ledger's shared values failed a bounds check");
        for (ssize_t i = 0; i < n && (size_t)i < max; i++) {
            uint32_t d = r->units[i].domain_index;
            out[i] = (struct orbit_units){ d < a->geo.max_domains ? a->domains[d].id : UINT32_MAX,
                                           r->units[i].units };
        }
    }
    adm_inspect_done(a, rc);
    if (n == -ORBIT_ENOTRESERVED)
        return orb_fail(-ORBIT_ENOTRESERVED, "claim serial %llu (slot %u) is not live: released, or given back "
                        "by a death report", (unsigned long long)c->serial, c->slot);
    return n;
}

static const char *poison_text(uint32_t why)
{
    static const char *const text[] = {
        [ADM_OK] = "",
        [ADM_POISON_SERIAL] = "serial counter exhausted",
        [ADM_POISON_EPOCH] = "epoch exhausted",
        [ADM_POISON_USAGE] = "domain usage above capacity or overflowed",
        [ADM_POISON_RETAINED] = "retained bytes inconsistent with the cap or a release",
        [ADM_POISON_RECORD] = "claim record disagrees with the claim or the ledger",
        [ADM_POISON_HALF_WRITTEN] = "a holder died while writing a claim record",
        [ADM_POISON_LAYOUT] = "a shared index or count failed a bounds check",
        [ADM_POISON_MUTEX] = "ledger lock word forged",
    };
    return why < sizeof text / sizeof text[0] ? text[why] : "unknown poison reason";
}

int orbit_admission_info(struct orbit_admission *a, struct orbit_admission_info *out)
{
    int refused = adm_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    int rc = adm_lock(a, true);
    if (rc < 0)
        return rc;
    const struct adm_ledger *l = a->ledger;
    uint32_t why = atomic_load_explicit(&l->poisoned, memory_order_acquire);
    *out = (struct orbit_admission_info){
        .spec = { .kind = a->seg.kind, .max_domains = a->geo.max_domains,
                  .max_claims = a->geo.max_claims, .retained_max_bytes = a->geo.retained_max },
        .n_domains = l->n_domains, .live_claims = l->live_claims,
        .next_serial = l->next_serial, .retained_bytes = l->retained_bytes,
        .change_epoch = atomic_load_explicit(&l->change_epoch, memory_order_relaxed),
        .repairs = l->repairs,
        .shutdown = atomic_load_explicit(&l->closed, memory_order_relaxed) != 0,
        .poisoned = why != ADM_OK, .poison_reason = poison_text(why),
    };
    adm_inspect_done(a, rc);
    return 0;
}

void orbit_admission_stats(struct orbit_admission *a, struct orbit_admission_stats *out)
{
    if (adm_enter(a, __func__) < 0)
        return;
    if (!a || !out)
        return;
    *out = (struct orbit_admission_stats){
        .parks = atomic_load_explicit(&a->stats.parks, memory_order_relaxed),
        .wakes = atomic_load_explicit(&a->stats.wakes, memory_order_relaxed) };
}
