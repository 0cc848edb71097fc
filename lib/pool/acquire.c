/* SPDX-License-Identifier: MIT */
/* acquire: snapshot, ask a policy, reserve or claim; the built-in policies. */
#include <stdlib.h>
#include <string.h>
#include "pool_layout.h"

#define SNAPSHOT_STACK 32

static uint64_t cand_used(const struct orbit_candidate *c) { return (uint64_t)c->reserved + c->active; }
static uint64_t cand_free(const struct orbit_candidate *c)
{
    return cand_used(c) >= c->capacity ? 0 : c->capacity - cand_used(c);
}
static bool usable(const struct orbit_candidate *c) { return c->state == ORBIT_LIVE && cand_free(c) > 0; }

static struct orbit_decision decide(enum orbit_decision_kind kind, orbit_id reuse)
{
    return (struct orbit_decision){ .kind = kind, .reuse = reuse, .reason = 0 };
}

static struct orbit_decision create_or_wait(uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    return decide((uint64_t)live + creating < l->max_live ? ORBIT_DECIDE_CREATE : ORBIT_DECIDE_WAIT, 0);
}

/* Less used first, then less recently reserved. */
static bool lighter(const struct orbit_candidate *a, const struct orbit_candidate *b)
{
    return cand_used(a) != cand_used(b) ? cand_used(a) < cand_used(b) : a->last_reserve_ms < b->last_reserve_ms;
}

static struct orbit_decision local_first(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                         uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    (void)ctx, (void)key;
    const struct orbit_candidate *local = NULL, *remote = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!usable(&c[i]))
            continue;
        const struct orbit_candidate **best = c[i].local ? &local : &remote;
        if (!*best || lighter(&c[i], *best))
            *best = &c[i];
    }
    if (local || remote)
        return decide(ORBIT_DECIDE_REUSE, (local ? local : remote)->id);
    return create_or_wait(live, creating, l);
}

static struct orbit_decision local_only(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                        uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    (void)ctx, (void)key;
    const struct orbit_candidate *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (c[i].local && usable(&c[i]) && (!best || cand_used(&c[i]) < cand_used(best)))
            best = &c[i];
    if (best)
        return decide(ORBIT_DECIDE_REUSE, best->id);
    return create_or_wait(live, creating, l);
}

/* Most free units, then least recently reserved, then local, then table order. */
static bool roomier(const struct orbit_candidate *a, const struct orbit_candidate *b)
{
    if (cand_free(a) != cand_free(b))
        return cand_free(a) > cand_free(b);
    if (a->last_reserve_ms != b->last_reserve_ms)
        return a->last_reserve_ms < b->last_reserve_ms;
    return a->local && !b->local;
}

static struct orbit_decision least_loaded(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                          uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    (void)ctx, (void)key;
    const struct orbit_candidate *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (usable(&c[i]) && (!best || roomier(&c[i], best)))
            best = &c[i];
    if (best)
        return decide(ORBIT_DECIDE_REUSE, best->id);
    return create_or_wait(live, creating, l);
}

const struct orbit_policy orbit_policy_local_first = { local_first, NULL };
const struct orbit_policy orbit_policy_local_only = { local_only, NULL };
const struct orbit_policy orbit_policy_least_loaded = { least_loaded, NULL };

/* Candidates into *buf (the stack buffer, or a heap one grown to fit); returns the count. */
static ssize_t snapshot(struct orbit_pool *p, orbit_key key, struct orbit_candidate **buf, size_t *cap,
                        struct orbit_candidate *stack)
{
    for (;;) {
        ssize_t n = orbit_pool_candidates(p, key, *buf, *cap);
        if (n < 0 || (size_t)n <= *cap)
            return n;
        struct orbit_candidate *grown = realloc(*buf == stack ? NULL : *buf, (size_t)n * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        *buf = grown;
        *cap = (size_t)n;
    }
}

/* A snapshot, the key's budget, the policy's decision: one look at the key. */
struct look {
    struct orbit_pool *p;
    orbit_key key;
    const struct orbit_policy *policy;
    struct orbit_limits lim;
    struct orbit_candidate stack[SNAPSHOT_STACK], *buf;
    size_t cap;
};

static int look(struct look *lk, struct orbit_decision *d)
{
    ssize_t n = snapshot(lk->p, lk->key, &lk->buf, &lk->cap, lk->stack);
    if (n < 0)
        return (int)n;
    uint32_t live, creating;
    orbit_pool_budget(lk->p, lk->key, &live, &creating);
    *d = lk->policy->decide(lk->policy->ctx, lk->key, lk->buf, (size_t)n, live, creating, &lk->lim);
    return 0;
}

static int plan_wait(struct orbit_plan *out, uint32_t version)
{
    out->kind = ORBIT_PLAN_WAIT;
    out->version = version;
    return 1;
}

/*
 * A WAIT decided: the version, then one more look. 1 = a WAIT plan (the look
 * still says WAIT), 0 = *d is the look's other decision, < 0 an error.
 */
static int version_then_look(struct look *lk, uint32_t *version, struct orbit_decision *d, struct orbit_plan *out)
{
    pool_park_here(lk->p, POOL_PARK_ACQUIRE_WAIT);
    /* The version's seq_cst CAS (watched) before the look's seq_cst loads: a unit freed after
     * it is seen by the look, or its changer sees watched == changes and moves the version. */
    int rc = orbit_pool_version(lk->p, lk->key, version);
    if (rc == 0)
        rc = look(lk, d);
    if (rc < 0)
        return rc;
    return d->kind == ORBIT_DECIDE_WAIT ? plan_wait(out, *version) : 0;
}

/* One decision other than WAIT carried out: 1 = plan made, 0 = lost race (retry), < 0 an error. */
static int carry_out(struct look *lk, struct orbit_decision d, struct orbit_plan *out)
{
    int rc;
    switch (d.kind) {
    case ORBIT_DECIDE_REUSE:
        rc = orbit_pool_reserve(lk->p, d.reuse, &out->lease);
        if (rc == -ORBIT_EBUSY || rc == -ORBIT_ESTALE || rc == -ORBIT_EDRAINING)
            return 0;
        if (rc < 0)
            return rc;
        out->kind = orbit_id_node(d.reuse) == lk->p->node ? ORBIT_PLAN_LOCAL_REUSE : ORBIT_PLAN_REMOTE_REUSE;
        return 1;
    case ORBIT_DECIDE_CREATE:
        rc = orbit_pool_claim_create(lk->p, lk->key, lk->lim.max_live, &out->permit);
        if (rc == -ORBIT_EBUDGET)
            return 0;
        if (rc < 0)
            return rc;
        out->kind = ORBIT_PLAN_CREATE;
        return 1;
    case ORBIT_DECIDE_REJECT:
        out->kind = ORBIT_PLAN_REJECT;
        out->reason = d.reason;
        return 1;
    case ORBIT_DECIDE_WAIT:
        break;
    }
    return -ORBIT_EMALFORMED;
}

/* One attempt: 1 = plan made, 0 = lost race, < 0 an error. */
static int attempt(struct look *lk, struct orbit_plan *out)
{
    struct orbit_decision d;
    uint32_t version;
    int rc = look(lk, &d);
    if (rc == 0 && d.kind == ORBIT_DECIDE_WAIT)
        rc = version_then_look(lk, &version, &d, out);
    return rc != 0 ? rc : carry_out(lk, d, out);
}

/* Every attempt lost its race: WAIT, with the same last look as a WAIT decided. */
static int after_lost_races(struct look *lk, struct orbit_plan *out)
{
    struct orbit_decision d;
    uint32_t version;
    int rc = version_then_look(lk, &version, &d, out);
    if (rc == 0)
        rc = carry_out(lk, d, out);
    /* Lost again after the version: the winner's release (or the drain's close) moves it on. */
    return rc == 0 ? plan_wait(out, version) : rc;
}

int orbit_pool_acquire(struct orbit_pool *p, orbit_key key, const struct orbit_limits *limits,
                       const struct orbit_policy *policy, struct orbit_plan *out)
{
    struct look lk;   /* not zeroed: its stack buffer is only read where a snapshot wrote it */
    lk.lim = (struct orbit_limits)ORBIT_LIMITS_DEFAULT;
    if (limits)
        lk.lim = *limits;
    lk.policy = policy ? policy : &orbit_policy_local_first;
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (!out || !lk.policy->decide)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__, out ? "policy->decide" : "out");
    memset(out, 0, sizeof *out);
    lk.p = p, lk.key = key, lk.buf = lk.stack, lk.cap = SNAPSHOT_STACK;
    for (uint32_t n = 0; n < (lk.lim.attempts ? lk.lim.attempts : 1) && rc == 0; n++)
        rc = attempt(&lk, out);
    if (rc == 0)
        rc = after_lost_races(&lk, out);
    if (lk.buf != lk.stack)
        free(lk.buf);
    return rc < 0 ? rc : 0;
}
