/* SPDX-License-Identifier: MIT */
/*
 * What a dead incarnation held, counted through the tables' public
 * inspection calls. Table handles are kept per fleet and reopened only when
 * the fleet's set of segments changes (a name count and an inode check per
 * death), so counting costs table walks, not segment mappings.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "reaper_internal.h"
#ifdef ORBIT_WITH_POOL
#include <orbit/pool.h>
#endif
#ifdef ORBIT_WITH_STREAM
#include <orbit/stream.h>
#endif
#ifdef ORBIT_WITH_ADMISSION
#include <orbit/admission.h>
#endif

#define RP_TABLES_MAX 64

struct rp_table {
    uint8_t kind, type;          /* type: enum orb_table_type */
    dev_t dev;
    ino_t ino;
    char path[256];
    void *handle;                /* orbit_pool / orbit_streams / orbit_admission; NULL if not built */
};

struct rp_tables {
    ssize_t listed;              /* orbit_fleet_segments count when built */
    int n;
    struct rp_table t[RP_TABLES_MAX];
};

static void table_close(struct rp_table *t)
{
    switch (t->type) {
#ifdef ORBIT_WITH_POOL
    case ORB_TABLE_POOL: orbit_pool_close(t->handle); break;
#endif
#ifdef ORBIT_WITH_STREAM
    case ORB_TABLE_STREAMS: orbit_streams_close(t->handle); break;
#endif
#ifdef ORBIT_WITH_ADMISSION
    case ORB_TABLE_ADMISSION: orbit_admission_close(t->handle); break;
#endif
    default: break;
    }
    t->handle = NULL;
}

void rp_tables_free(struct rp_tables *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        table_close(&c->t[i]);
    free(c);
}

/* Open the table behind one segment through the observer fleet (NULL: not built in). */
static void *table_open(struct orbit_fleet *f, uint8_t kind, uint8_t type)
{
    void *h = NULL;
    switch (type) {
#ifdef ORBIT_WITH_POOL
    case ORB_TABLE_POOL: if (orbit_pool_open_existing(f, kind, (struct orbit_pool **)&h) != 0) h = NULL; break;
#endif
#ifdef ORBIT_WITH_STREAM
    case ORB_TABLE_STREAMS: if (orbit_streams_open_existing(f, kind, (struct orbit_streams **)&h) != 0) h = NULL; break;
#endif
#ifdef ORBIT_WITH_ADMISSION
    case ORB_TABLE_ADMISSION: if (orbit_admission_open_existing(f, kind, (struct orbit_admission **)&h) != 0) h = NULL; break;
#endif
    default: (void)f; (void)kind; break;
    }
    return h;
}

/* Identify one segment file: its inode and its table type (from the header). */
static bool table_identify(struct rp_table *t)
{
    struct orb_seg_header h;
    struct stat st;
    int fd = open(t->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = fstat(fd, &st) == 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
              h.magic == ORB_SEG_MAGIC;
    close(fd);
    if (ok) {
        t->dev = st.st_dev;
        t->ino = st.st_ino;
        t->type = h.table_type;
    }
    return ok && h.table_type != ORB_TABLE_FLEET;
}

static void tables_build(struct orbit_fleet *f, struct rp_tables *c)
{
    struct orbit_segment_info info[RP_TABLES_MAX];
    for (int i = 0; i < c->n; i++)
        table_close(&c->t[i]);
    c->n = 0;
    c->listed = orbit_fleet_segments(orbit_fleet_name(f), info, RP_TABLES_MAX);
    for (ssize_t i = 0; i < c->listed && i < RP_TABLES_MAX; i++) {
        struct rp_table *t = &c->t[c->n];
        memset(t, 0, sizeof *t);
        t->kind = info[i].kind;
        memcpy(t->path, info[i].path, sizeof t->path);
        if (info[i].kind == ORB_FLEET_KIND || !table_identify(t))
            continue;
        t->handle = table_open(f, t->kind, t->type);
        c->n++;
    }
}

/* Still the same segments? A count of names (no mapping) and one stat per table. */
static bool tables_current(struct orbit_fleet *f, const struct rp_tables *c)
{
    if (orbit_fleet_segments(orbit_fleet_name(f), NULL, 0) != c->listed)
        return false;
    for (int i = 0; i < c->n; i++) {
        struct stat st;
        if (stat(c->t[i].path, &st) != 0 || st.st_dev != c->t[i].dev || st.st_ino != c->t[i].ino)
            return false;
    }
    return true;
}

static struct rp_tables *tables_get(struct orbit_fleet *f, struct rp_tables **cache)
{
    if (!*cache && !(*cache = calloc(1, sizeof **cache)))
        return NULL;
    if ((*cache)->listed == 0 || !tables_current(f, *cache))
        tables_build(f, *cache);
    return *cache;
}

struct acct {
    uint16_t node;
    uint64_t incarnation;
    struct orbit_reaper_reclaim *out;
};

#ifdef ORBIT_WITH_POOL
static void count_key(struct orbit_pool *p, orbit_key key, struct acct *a)
{
    ssize_t n = orbit_pool_candidates(p, key, NULL, 0);
    struct orbit_candidate *c = n > 0 ? calloc((size_t)n, sizeof *c) : NULL;
    if (!c)
        return;
    ssize_t got = orbit_pool_candidates(p, key, c, (size_t)n);
    for (ssize_t i = 0; i < got && i < n; i++) {
        if (c[i].owner != a->node || c[i].owner_incarnation != a->incarnation)
            continue;
        a->out->pool_resources++;
        a->out->pool_units += c[i].capacity;
        a->out->pool_leases += (uint64_t)c[i].reserved + c[i].active;
    }
    free(c);
}

/* Walks the live keys: sums creating, and counts the node's resources when a is set. */
static uint64_t pool_walk(struct orbit_pool *p, struct acct *a)
{
    uint64_t creating = 0;
    ssize_t n = orbit_pool_keys(p, NULL, 0);
    struct orbit_pool_key_info *k = n > 0 ? calloc((size_t)n, sizeof *k) : NULL;
    if (!k)
        return 0;
    ssize_t got = orbit_pool_keys(p, k, (size_t)n);
    for (ssize_t i = 0; i < got && i < n; i++) {
        creating += k[i].creating;
        if (a)
            count_key(p, k[i].key, a);
    }
    free(k);
    return creating;
}
#endif

#ifdef ORBIT_WITH_STREAM
static void count_streams(struct orbit_streams *s, struct acct *a)
{
    ssize_t n = orbit_streams_list(s, NULL, 0);
    struct orbit_stream_info *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    if (!v)
        return;
    ssize_t got = orbit_streams_list(s, v, (size_t)n);
    for (ssize_t i = 0; i < got && i < n; i++)
        for (int side = 0; side < 2; side++) {
            if (v[i].side[side].state != ORBIT_SIDE_CLAIMED || v[i].side[side].node != a->node ||
                v[i].side[side].incarnation != a->incarnation)
                continue;
            a->out->stream_sides++;
            /* Side A reads dir[1] (B -> A), side B reads dir[0]. */
            a->out->stream_unread += v[i].dir[side == 0 ? 1 : 0].queued;
        }
    free(v);
}
#endif

#ifdef ORBIT_WITH_ADMISSION
static void count_claims(struct orbit_admission *adm, struct acct *a)
{
    ssize_t n = orbit_admission_claims(adm, NULL, 0);
    struct orbit_claim_info *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    if (!v)
        return;
    ssize_t got = orbit_admission_claims(adm, v, (size_t)n);
    for (ssize_t i = 0; i < got && i < n; i++) {
        if (v[i].claim.node != a->node || v[i].claim.incarnation != a->incarnation)
            continue;
        a->out->admission_claims++;
        struct orbit_units u[64];
        ssize_t nu = orbit_admission_claim_units(adm, &v[i].claim, u, 64);
        for (ssize_t j = 0; j < nu && j < 64; j++)
            a->out->admission_units += u[j].units;
    }
    free(v);
}
#endif

static void account_table(struct rp_table *t, struct acct *a, uint64_t *creating)
{
    if (!t->handle)
        return;
    switch (t->type) {
#ifdef ORBIT_WITH_POOL
    case ORB_TABLE_POOL: *creating += pool_walk(t->handle, a); break;
#endif
#ifdef ORBIT_WITH_STREAM
    case ORB_TABLE_STREAMS: count_streams(t->handle, a); break;
#endif
#ifdef ORBIT_WITH_ADMISSION
    case ORB_TABLE_ADMISSION: count_claims(t->handle, a); break;
#endif
    default: (void)a; (void)creating; break;
    }
}

void rp_account(struct orbit_fleet *f, struct rp_tables **cache, uint16_t node, uint64_t incarnation,
                struct orbit_reaper_reclaim *out, uint64_t *creating)
{
    memset(out, 0, sizeof *out);
    *creating = 0;
    struct rp_tables *c = tables_get(f, cache);
    if (!c)
        return;
    struct acct a = { .node = node, .incarnation = incarnation, .out = out };
    out->tables = (uint32_t)c->n;
    for (int i = 0; i < c->n; i++)
        account_table(&c->t[i], &a, creating);
}

uint64_t rp_pool_creating(struct rp_tables *c)
{
    uint64_t creating = 0;
#ifdef ORBIT_WITH_POOL
    for (int i = 0; c && i < c->n; i++)
        if (c->t[i].type == ORB_TABLE_POOL && c->t[i].handle)
            creating += pool_walk(c->t[i].handle, NULL);
#else
    (void)c;
#endif
    return creating;
}
