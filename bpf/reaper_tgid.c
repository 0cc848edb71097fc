/* SPDX-License-Identifier: MIT */
/* Which fleets watch a tgid through a per-tgid backend: one kernel filter entry, many fleets. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "reaper_tgid.h"

struct rp_tgid { int32_t tgid; uint32_t fleet_id; uint32_t count; };

void rp_tgids_init(struct rp_tgids *t, const struct rp_backend_ops *ops, struct rp_backend *be)
{
    pthread_mutex_init(&t->mu, NULL);
    t->ops = ops;
    t->be = be;
}

void rp_tgids_free(struct rp_tgids *t)
{
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
    pthread_mutex_destroy(&t->mu);
}

/* mu held: where (tgid, fleet_id) is, or would go. */
static size_t tgid_lower(const struct rp_tgids *t, int32_t tgid, uint32_t fleet_id)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct rp_tgid *e = &t->v[mid];
        if (e->tgid < tgid || (e->tgid == tgid && e->fleet_id < fleet_id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int tgids_grow(struct rp_tgids *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct rp_tgid *v = realloc(t->v, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    t->v = v;
    t->cap = cap;
    return 0;
}

/* mu held: is tgid listed at none of i's neighbours (the run that i starts or would start is empty)? */
static bool alone_at(const struct rp_tgids *t, size_t i, int32_t tgid)
{
    return (i == t->n || t->v[i].tgid != tgid) && (i == 0 || t->v[i - 1].tgid != tgid);
}

int rp_tgid_watch(struct rp_tgids *t, uint32_t fleet_id, int32_t tgid)
{
    pthread_mutex_lock(&t->mu);
    size_t i = tgid_lower(t, tgid, fleet_id);
    bool first = alone_at(t, i, tgid);
    int rc = 0;
    if (i < t->n && t->v[i].tgid == tgid && t->v[i].fleet_id == fleet_id) {
        t->v[i].count++;
    } else if (t->n == t->cap && (rc = tgids_grow(t)) < 0) {
        /* out of memory: its lock is tested instead */
    } else if ((rc = first ? t->ops->watch(t->be, (uint64_t)tgid, tgid, 0) : 0) == 0) {
        memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
        t->v[i] = (struct rp_tgid){ tgid, fleet_id, 1 };
        t->n++;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void rp_tgid_unwatch(struct rp_tgids *t, uint32_t fleet_id, int32_t tgid)
{
    pthread_mutex_lock(&t->mu);
    size_t i = tgid_lower(t, tgid, fleet_id);
    if (i < t->n && t->v[i].tgid == tgid && t->v[i].fleet_id == fleet_id && --t->v[i].count == 0) {
        memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
        t->n--;
        if (alone_at(t, i, tgid))
            t->ops->unwatch(t->be, (uint64_t)tgid);   /* no fleet watches it any more: out of the kernel's filter */
    }
    pthread_mutex_unlock(&t->mu);
}

size_t rp_tgid_fleets(struct rp_tgids *t, int32_t tgid, uint32_t *ids, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = tgid_lower(t, tgid, 0); i < t->n && t->v[i].tgid == tgid && n < max; i++)
        ids[n++] = t->v[i].fleet_id;
    pthread_mutex_unlock(&t->mu);
    return n;
}
