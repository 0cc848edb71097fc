/* SPDX-License-Identifier: MIT */
/*
 * The fleet's tables through the registry of table ops: death dispatch,
 * listing, death accounting and reset. Nothing here knows any table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fleet_internal.h"
#include "guard.h"
#include "table_ops.h"

#define TABLES_MAX 256
#define CACHE_MAX  64

/* ---- listing ------------------------------------------------------------ */

struct table_ref { uint8_t kind, type; uint64_t epoch; };

static int ref_cmp(const void *a, const void *b)
{
    return (int)((const struct table_ref *)a)->kind - (int)((const struct table_ref *)b)->kind;
}

/* Sorted by kind, one entry per kind (a name in both backing directories counts once). */
static int refs_sorted(struct table_ref *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, ref_cmp);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || v[m - 1].kind != v[i].kind)
            v[m++] = v[i];
    return m;
}

static int list_private(struct orbit_fleet *f, struct table_ref *v)
{
    int n = 0;
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++) {
        const struct orb_segment *s = &f->private_tables[i].seg;
        if (f->private_tables[i].refs > 0)
            v[n++] = (struct table_ref){ s->kind, s->table_type, atomic_load(&orb_seg_hdr(s)->epoch) };
    }
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* The fleet's table segments by kind (headers validated, fleet segment left out). */
static int list_tables(struct orbit_fleet *f, struct table_ref *v)
{
    if (f->is_private)
        return refs_sorted(v, list_private(f, v));
    uint64_t present[4];   /* a bit per kind: no allocation, a death report must not fail */
    int rc = orb_fleet_segment_kinds(f->name, present), n = 0;
    if (rc < 0)
        return rc;
    for (unsigned k = 0; k < TABLES_MAX; k++) {
        struct orb_seg_header h;
        if (!(present[k / 64] >> (k % 64) & 1) || k == ORB_FLEET_KIND)
            continue;
        if (orb_segment_peek(f->name, (uint8_t)k, &h, NULL, NULL) != 0) {
            orb_error_forget();   /* not a table we can read: passed over */
            continue;
        }
        v[n++] = (struct table_ref){ h.kind, h.table_type, h.epoch };
    }
    return n;   /* ascending kinds, one each (a name in both backing directories counts once) */
}

int orb_dispatch_node_dead(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    struct table_ref v[TABLES_MAX];
    int n = list_tables(f, v), rc = 0;
    for (int i = 0; i < n; i++) {
        const struct orb_table_ops *ops = orb_table_ops_of(v[i].type);
        void *t;
        if (ops && orb_table_open(ops->kind, f, v[i].kind, &t) != 0)
            orb_error_forget();   /* gone meanwhile: nothing of it to give back */
        else if (ops) {
            int r = ops->node_dead(t, node, incarnation);   /* every table is tried */
            if (r < 0 && rc == 0)
                rc = r;
            orb_table_close(ops->kind, t);
        }
    }
    return rc;
}

ssize_t orbit_fleet_tables(struct orbit_fleet *f, struct orbit_table_info *out, size_t max)
{
    struct table_ref v[TABLES_MAX];
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    int n = list_tables(f, v);
    for (int i = 0; i < n && (size_t)i < max; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].kind = v[i].kind;
        out[i].type = v[i].type;
        out[i].built = orb_table_ops_of(v[i].type) != NULL;
        out[i].epoch = v[i].epoch;
        snprintf(out[i].name, sizeof out[i].name, "%s", orbit_table_type_name(v[i].type));
    }
    return n;
}

int orbit_fleet_reset_tables(struct orbit_fleet *f)
{
    struct table_ref v[TABLES_MAX];
    int refused = orb_enter_fleet(f, __func__);
    if (refused == 0)
        refused = orb_fleet_writable(f, __func__);
    if (refused < 0)
        return refused;
    int n = list_tables(f, v), reset = 0, first_error = 0;
    for (int i = 0; i < n; i++) {
        const struct orb_table_ops *ops = orb_table_ops_of(v[i].type);
        void *t;
        int rc = ops ? orb_table_open(ops->kind, f, v[i].kind, &t) : 0;
        if (ops && rc == 0) {
            rc = ops->reset_all(t);
            orb_table_close(ops->kind, t);
        }
        if (rc < 0 && first_error == 0)
            first_error = rc;
        else if (ops && rc == 0)
            reset++;
    }
    return n < 0 ? n : first_error < 0 ? first_error : reset;
}

/* ---- death accounting ---------------------------------------------------- */

struct cached_table {
    const struct orb_table_ops *ops;
    void *t;
    dev_t dev;
    ino_t ino;
    char path[256];
};

/* Table handles of a named fleet, kept between accountings (under f->lock). */
struct orb_table_cache {
    ssize_t listed;              /* orbit_fleet_segments count when built */
    int n;
    struct cached_table t[CACHE_MAX];
};

static void cache_clear(struct orb_table_cache *c)
{
    for (int i = 0; i < c->n; i++)
        orb_table_close(c->t[i].ops->kind, c->t[i].t);
    c->n = 0;
}

/* Fork-safe: each table's close in a fork child only unmaps and frees. */
void orb_table_cache_free(struct orbit_fleet *f)
{
    if (!f->table_cache)
        return;
    cache_clear(f->table_cache);
    free(f->table_cache);
    f->table_cache = NULL;
}

/*
 * Open one segment's table; its inode is taken first, so a later swap shows.
 * False when a table still being created was not waited for (the handle's
 * bound): the cache is built again next time.
 */
static bool cache_add(struct orbit_fleet *f, struct orb_table_cache *c, const struct orbit_segment_info *si)
{
    struct orb_seg_header h;
    struct stat st;
    struct cached_table *e = &c->t[c->n];
    if (si->kind == ORB_FLEET_KIND || stat(si->path, &st) != 0 ||
        orb_segment_peek(f->name, si->kind, &h, NULL, NULL) != 0 || !(e->ops = orb_table_ops_of(h.table_type))) {
        orb_error_forget();   /* a table that cannot be opened is left out */
        return true;
    }
    int rc = orb_table_open(e->ops->kind, f, si->kind, &e->t);
    if (rc != 0) {
        orb_error_forget();   /* left out; one still being created is looked at again next time */
        return rc != -ORBIT_EAGAIN;
    }
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    snprintf(e->path, sizeof e->path, "%s", si->path);
    c->n++;
    return true;
}

static void cache_build(struct orbit_fleet *f, struct orb_table_cache *c)
{
    struct orbit_segment_info info[CACHE_MAX];
    cache_clear(c);
    ssize_t listed = orbit_fleet_segments(f->name, info, CACHE_MAX);
    bool whole = true;
    for (ssize_t i = 0; i < listed && i < CACHE_MAX; i++)
        whole = cache_add(f, c, &info[i]) && whole;
    c->listed = whole ? listed : -1;
}

/* Still the same segments? A count of names (no mapping) and one stat per table. */
static bool cache_current(struct orbit_fleet *f, const struct orb_table_cache *c)
{
    if (c->listed <= 0 || orbit_fleet_segments(f->name, NULL, 0) != c->listed)
        return false;
    for (int i = 0; i < c->n; i++) {
        struct stat st;
        if (stat(c->t[i].path, &st) != 0 || st.st_dev != c->t[i].dev || st.st_ino != c->t[i].ino)
            return false;
    }
    return true;
}

static void account_private(struct orbit_fleet *f, uint16_t node, uint64_t inc, struct orbit_reclaim *out)
{
    struct table_ref v[TABLES_MAX];
    int n = list_tables(f, v);
    for (int i = 0; i < n; i++) {
        const struct orb_table_ops *ops = orb_table_ops_of(v[i].type);
        void *t;
        if (ops && orb_table_open(ops->kind, f, v[i].kind, &t) != 0)
            orb_error_forget();   /* gone meanwhile: nothing of it to give back */
        else if (ops) {
            ops->account(t, node, inc, out);
            orb_table_close(ops->kind, t);
            out->tables++;
        }
    }
}

int orbit_fleet_account(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out)
{
    int refused = orb_enter_fleet(f, __func__);
    if (refused < 0)
        return refused;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    memset(out, 0, sizeof *out);
    if (f->is_private) {
        account_private(f, node, incarnation, out);
        return 0;
    }
    pthread_mutex_lock(&f->lock);
    if (!f->table_cache)
        f->table_cache = calloc(1, sizeof *f->table_cache);
    struct orb_table_cache *c = f->table_cache;
    if (c && !cache_current(f, c))
        cache_build(f, c);
    for (int i = 0; c && i < c->n; i++) {
        c->t[i].ops->account(c->t[i].t, node, incarnation, out);
        out->tables++;
    }
    pthread_mutex_unlock(&f->lock);
    return c ? 0 : -ENOMEM;
}
