/* SPDX-License-Identifier: MIT */
/* Creation budgets, key versions, waits (futex and io_uring) and the readiness fd. */
#include <orbit/uring.h>
#include "pool_layout.h"
#include "core/readiness.h"
#include "uring_internal.h"

int orbit_pool_claim_create(struct orbit_pool *p, orbit_key key, uint32_t max_live, struct orbit_permit *out)
{
    int rc = pool_enter(p, __func__);
    if (!out)
        return rc < 0 ? rc : orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    *out = (struct orbit_permit){ .done = true };   /* finishing a refused permit is a no-op */
    if (rc < 0)
        return rc;
    if (p->observer)
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer's pool creates nothing (join as a member)",
                        __func__);
    uint32_t ki;
    rc = pool_key_hold(p, key, &ki);
    if (rc < 0)
        return rc;
    struct pool_key *k = pool_key_at(p, ki);
    struct pool_keyop op;
    if ((rc = pool_keyop_begin(p, p->node, ki, INTENT_CLAIM, 0, &op)) < 0) {
        pool_key_release(p, ki);
        return rc;
    }
    /* live + creating under max_live, checked and counted under the op lock; the intent
     * lets a settle match creating to the claim row if we die between the two. */
    uint64_t c = atomic_load(&k->counts);
    if ((uint64_t)pool_hi(c) + pool_lo(c) >= max_live) {
        pool_keyop_end(p, &op);
        pool_key_release(p, ki);
        return orb_fail(-ORBIT_EBUDGET, "the key has %u live and %u being created, max_live %u", pool_hi(c),
                        pool_lo(c), max_live);
    }
    pool_counts_add(&k->counts, 0, 1);
    pool_park_here(p, POOL_PARK_CLAIM);
    /* The hold stays with the permit; the claim row lets node_dead return both. */
    atomic_fetch_add(pool_claims(p, p->node, ki), 1);
    pool_keyop_end(p, &op);
    orb_count(&p->ctr, POOL_CTR_CREATION_CLAIMS, 1);
    *out = (struct orbit_permit){ .pool = p, .key_index = ki, .done = false };
    return 0;
}

/* In a fork child the parent's permit gives nothing back: its claim stays the parent's. */
void orbit_permit_finish(struct orbit_permit *pm)
{
    orb_error_clear();
    if (!pm || pm->done || !pm->pool || !orb_handle_ours(pm->pool->fork_generation))
        return;
    pm->done = true;
    struct orbit_pool *p = pm->pool;
    uint32_t ki = pm->key_index;
    if (ki > p->key_mask || p->observer)
        return;
    struct pool_keyop op;
    if (pool_keyop_begin(p, p->node, ki, INTENT_FINISH, 0, &op) < 0)
        return;   /* a forged lock word: the claim stays until reset_all */
    /* Row, then count, under the op lock: a settle matches them if we die between. */
    _Atomic uint32_t *claims = pool_claims(p, p->node, ki);
    uint32_t v = atomic_load(claims);
    if (v == 0) {
        pool_keyop_end(p, &op);
        return;   /* node_dead or a reset returned this claim already */
    }
    atomic_store(claims, v - 1);
    pool_park_here(p, POOL_PARK_FINISH);
    pool_counts_add(&pool_key_at(p, ki)->counts, 0, -1);
    pool_keyop_end(p, &op);
    pool_key_changed(p, ki);
    pool_key_release(p, ki);
}

void orbit_pool_budget(struct orbit_pool *p, orbit_key key, uint32_t *live, uint32_t *creating)
{
    uint64_t c = 0;
    uint32_t ki;
    if (pool_enter(p, __func__) == 0 && pool_key_peek(p, key, &ki) == 0)
        c = atomic_load(&pool_key_at(p, ki)->counts);
    if (live)
        *live = pool_hi(c);
    if (creating)
        *creating = pool_lo(c);
}

int orbit_pool_version(struct orbit_pool *p, orbit_key key, uint32_t *out)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    uint32_t ki;
    rc = pool_key_hold(p, key, &ki);
    if (rc < 0)
        return rc;
    *out = pool_key_version(pool_key_at(p, ki));
    pool_key_release(p, ki);
    return 0;
}

struct capacity_wait {
    struct pool_key *key;
    uint32_t since;
    uint64_t tag;          /* with check_tag: a reclaimed slot counts as a change */
    bool check_tag;
};

static int capacity_changed(void *ctx)
{
    struct capacity_wait *c = ctx;
    if (atomic_load(&c->key->wait.changes) != c->since)
        return 1;
    return c->check_tag && atomic_load(&c->key->tag) != c->tag ? 1 : 0;
}

#define UNFENCED_SLICE_MS 10   /* a waiter without membarrier looks again this often */

/*
 * Fold, then park. A waiter whose membarrier was refused (a seccomp filter
 * other members lack) may miss the wake of a completer that skipped its fence:
 * it sleeps in slices and folds after each, so a missed completion costs at
 * most a slice, never the whole timeout.
 */
static int capacity_park(struct orbit_pool *p, uint32_t ki, struct capacity_wait *ctx,
                         const struct orb_deadline *deadline)
{
    bool fenced;
    if (pool_key_fold_after_fence(p, ki, &fenced))
        return 1;
    if (fenced)
        return orb_wait_until(&ctx->key->wait, capacity_changed, ctx, deadline, &p->spin, &p->stats);
    for (;;) {
        struct orb_deadline slice = orb_deadline_in(UNFENCED_SLICE_MS);
        if (!deadline->forever && deadline->at_ns < slice.at_ns)
            slice = *deadline;
        int rc = orb_wait_until(&ctx->key->wait, capacity_changed, ctx, &slice, &p->spin, &p->stats);
        if (rc != -ETIMEDOUT)
            return rc;
        if (pool_key_fold_after_fence(p, ki, &fenced))
            return 1;
        if (orb_deadline_passed(deadline))
            return -ETIMEDOUT;
    }
}

int orbit_pool_wait_capacity(struct orbit_pool *p, orbit_key key, uint32_t since, int timeout_ms, uint32_t *now)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0 || (rc = orb_check_timeout(timeout_ms, __func__)) < 0)
        return rc;
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    uint32_t ki;
    rc = pool_key_hold(p, key, &ki);
    if (rc < 0)
        return rc;
    /* Held for the whole wait: the key cannot be reclaimed under a parked waiter. */
    struct capacity_wait ctx = { .key = pool_key_at(p, ki), .since = since };
    /* since is now the version: a change after this moves the word past it. */
    rc = pool_key_version(ctx.key) != since ? 1 : capacity_park(p, ki, &ctx, &deadline);
    uint32_t seen = pool_key_version(ctx.key);   /* handed out: a later change moves past it */
    pool_key_release(p, ki);
    if (now)
        *now = seen;
    if (rc > 0)
        return 0;
    return rc == -ETIMEDOUT ? orb_fail(-ORBIT_ETIMEDOUT, "the key's capacity did not change past version %u "
                                       "within %d ms", since, timeout_ms) : rc;
}

/*
 * The io_uring form: the SQE waits on the key's change word. No hold can span
 * an SQE, so a reclaim of the key is also a change: the reclaimer signals a
 * parked word, and the tag check catches one that happened before the arm.
 */
int orbit_pool_prep_wait_capacity(struct orbit_pool *p, orbit_key key, uint32_t since, struct io_uring_sqe *sqe)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return orb_uring_prep_result(sqe, rc);
    if (!sqe)
        return orb_fail(-ORBIT_EMALFORMED, "%s: sqe is NULL", __func__);
    uint32_t ki;
    rc = pool_key_hold(p, key, &ki);
    if (rc < 0)
        return orb_uring_prep_result(sqe, rc);
    struct pool_key *k = pool_key_at(p, ki);
    struct capacity_wait ctx = { .key = k, .since = since, .tag = atomic_load(&k->tag), .check_tag = true };
    pool_key_version(k);   /* registered: a change past since moves the word even if unparked */
    bool fenced = true;
    if (orbit_uring_futex_supported() && pool_key_fold_after_fence(p, ki, &fenced))
        rc = orb_uring_prep_result(sqe, 1);   /* a completion folded: a NOP, as for a change */
    else if (!fenced)
        rc = orb_uring_prep_result(sqe, -ORBIT_ENOTSUP);   /* an SQE cannot sleep in slices */
    else
        rc = orb_uring_prep_wait(&k->wait, capacity_changed, &ctx, sqe, &p->stats);
    pool_key_release(p, ki);   /* after the arm: a reclaim from here sees parked and signals */
    return rc;
}

int orbit_pool_readiness(struct orbit_pool *p)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    return orb_table_readiness(&p->base, __func__);
}
