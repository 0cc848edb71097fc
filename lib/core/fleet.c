/* SPDX-License-Identifier: MIT */
/* The fleet: its segment of node records, joining, leaving, liveness and reaping. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fleet_internal.h"
#include "table_ops.h"

#define NODE_REAPING 3u   /* internal state: one reporter is ending this node */

const char *orbit_backing_name(enum orbit_backing b)
{
    switch (b) {
    case ORBIT_BACKING_AUTO:    return "auto";
    case ORBIT_BACKING_HUGETLB: return "hugetlb";
    case ORBIT_BACKING_SHM:     return "shm";
    case ORBIT_BACKING_PRIVATE: return "private";
    }
    return "unknown";
}

uint64_t orb_next_epoch(uint64_t previous)
{
    uint64_t now = orb_wall_ms();
    return now > previous ? now : previous + 1;
}

bool orb_node_alive(int32_t pid, uint64_t start_time)
{
    if (pid <= 0)
        return false;
    uint64_t now = orb_proc_start_time(pid);
    return now != 0 && now == start_time;
}

static int fleet_init(struct orb_segment *seg, void *ctx)
{
    (void)ctx;
    memset(orb_seg_table(seg), 0, seg->mapped - ORB_SEG_HEADER_BYTES);
    return 0;
}

static int map_fleet(struct orbit_fleet *f, enum orbit_backing backing)
{
    struct orb_fleet_geometry geom = { f->capacity, sizeof(struct orb_node_record) };
    size_t bytes = ORB_SEG_HEADER_BYTES + (size_t)f->capacity * sizeof(struct orb_node_record);
    struct orb_seg_request req = {
        .fleet = f->is_private ? NULL : f->name, .kind = ORB_FLEET_KIND,
        .table_type = ORB_TABLE_FLEET, .fleet_capacity = f->capacity,
        .geometry = &geom, .geometry_len = sizeof geom, .table_bytes = bytes,
        .populate_bytes = bytes, .backing = backing, .mode = f->mode, .gid = f->gid,
        .init = fleet_init,
    };
    int rc = orb_segment_open(&req, &f->seg);
    if (rc == 0)
        f->nodes = orb_seg_table(&f->seg);
    return rc;
}

static uint64_t derived_incarnation(int32_t pid, uint64_t start_time)
{
    /* Unique per process life: no two lives share both pid and start tick. */
    return (start_time << 22) ^ (uint64_t)(uint32_t)pid ^ 0x8000000000000000ull;
}

/* ---- the owner word: one process at a time moves a node through JOINING or REAPING ---- */

static uint64_t owner_self(void)
{
    static _Atomic uint64_t cached;
    uint32_t pid = (uint32_t)getpid();
    uint64_t word = atomic_load_explicit(&cached, memory_order_relaxed);
    if (word >> 32 == pid)
        return word;   /* a forked child computes its own */
    word = (uint64_t)pid << 32 | (uint32_t)orb_proc_start_time((int)pid);
    atomic_store_explicit(&cached, word, memory_order_relaxed);
    return word;
}

static bool owner_alive(uint64_t word)
{
    uint64_t start = orb_proc_start_time((int)(uint32_t)(word >> 32));
    return start != 0 && (uint32_t)start == (uint32_t)word;
}

/*
 * Take the node's owner word: free, or left by a process that is gone (its
 * step is ours to finish). false: a live process (or another thread of ours)
 * is mid-way and finishes it.
 */
static bool take_owner(struct orb_node_record *rec, uint64_t me)
{
    uint64_t cur = atomic_load_explicit(&rec->owner, memory_order_acquire);
    for (;;) {
        if (cur == me || (cur != 0 && owner_alive(cur)))
            return false;
        /* Acquire: what the gone owner wrote before it died is visible to its successor. */
        if (atomic_compare_exchange_weak_explicit(&rec->owner, &cur, me, memory_order_acquire,
                                                  memory_order_acquire))
            return true;
    }
}

static void drop_owner(struct orb_node_record *rec, uint64_t me)
{
    /* Release: the node's new state is visible before another may take the word. */
    atomic_compare_exchange_strong_explicit(&rec->owner, &me, 0, memory_order_release,
                                            memory_order_relaxed);
}

static void publish_node(struct orbit_fleet *f, struct orb_node_record *rec)
{
    atomic_store_explicit(&rec->pid, (int32_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&rec->start_time, orb_proc_start_time(getpid()), memory_order_relaxed);
    atomic_store_explicit(&rec->incarnation, f->incarnation, memory_order_relaxed);
    atomic_fetch_add_explicit(&rec->joins, 1, memory_order_relaxed);
    /* Release: pid, start time and incarnation are visible before the node reads LIVE. */
    atomic_store_explicit(&rec->state, ORBIT_NODE_LIVE, memory_order_release);
    drop_owner(rec, owner_self());
}

/*
 * Owner word held: move the node to REAPING for the life to end and say which,
 * or false when there is nothing to end. A report cut short (REAPING) is
 * resumed whatever incarnation was asked; a joiner that died before publishing
 * (JOINING) held nothing in any table, so the node goes straight back to FREE.
 * any: end a LIVE node's life whatever its incarnation (the caller judged it).
 */
static bool start_report(struct orb_node_record *rec, uint64_t inc, bool any, uint64_t *ending)
{
    uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
    uint64_t cur = atomic_load(&rec->incarnation);
    if (state == NODE_REAPING) {
        *ending = cur;
        return true;
    }
    if (state == ORBIT_NODE_JOINING) {
        atomic_store_explicit(&rec->state, ORBIT_NODE_FREE, memory_order_release);
        return false;
    }
    if (state != ORBIT_NODE_LIVE || (!any && cur != inc))
        return false;
    /* Owner held, no joiner can change the life; only its holder's leave (to FREE) races. */
    if (!atomic_compare_exchange_strong(&rec->state, &state, NODE_REAPING))
        return false;
    *ending = cur;
    return true;
}

/*
 * Report the node's life dead on every table, resumably: the owner word says
 * who is reporting, and a report whose reporter is gone is finished by the next
 * one to take the word. then: the state the node is left in (FREE, or JOINING
 * for a joiner taking it). Returns 1 when this call ran a report, 0 when there
 * was none to run, or the dispatch's error: the node stays REAPING then, for a
 * later report to finish. The owner word is still held (drop_owner or
 * publish_node gives it up).
 */
static int run_report(struct orbit_fleet *f, uint16_t node, uint64_t inc, bool any, uint32_t then)
{
    struct orb_node_record *rec = &f->nodes[node];
    uint64_t ending;
    if (!start_report(rec, inc, any, &ending))
        return 0;
    int rc = orb_dispatch_node_dead(f, node, ending);
    if (rc < 0)
        return rc;
    /* Tables are clean of that incarnation before the node can be claimed again. */
    atomic_store_explicit(&rec->state, then, memory_order_release);
    return 1;
}

/* Owner word held on a node that is not LIVE: make it ours (JOINING), or false. */
static bool take_node(struct orbit_fleet *f, uint16_t node)
{
    struct orb_node_record *rec = &f->nodes[node];
    uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
    /* JOINING under a gone owner: its joiner died before publishing, holding nothing. */
    if (state == ORBIT_NODE_FREE || state == ORBIT_NODE_JOINING)
        return atomic_compare_exchange_strong(&rec->state, &state, ORBIT_NODE_JOINING);
    return state == NODE_REAPING && run_report(f, node, 0, true, ORBIT_NODE_JOINING) == 1;
}

/* The first node that is free, or whose joiner or reporter died mid-way (finished first). */
static int claim_any(struct orbit_fleet *f)
{
    uint64_t me = owner_self();
    for (uint32_t i = 0; i < f->capacity; i++) {
        struct orb_node_record *rec = &f->nodes[i];
        if (atomic_load_explicit(&rec->state, memory_order_acquire) == ORBIT_NODE_LIVE ||
            !take_owner(rec, me))
            continue;
        if (take_node(f, (uint16_t)i)) {
            f->node = (uint16_t)i;
            return 0;
        }
        drop_owner(rec, me);
    }
    return -ORBIT_EFULL;
}

static bool state_known(uint32_t state)
{
    return state == ORBIT_NODE_FREE || state == ORBIT_NODE_JOINING || state == ORBIT_NODE_LIVE ||
           state == NODE_REAPING;
}

/* Owner word held: move the node to JOINING for us, ending a dead holder's share first. */
static int take_exact(struct orbit_fleet *f, uint16_t node)
{
    struct orb_node_record *rec = &f->nodes[node];
    for (;;) {
        uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
        int32_t pid = atomic_load(&rec->pid);
        bool ours = pid == (int32_t)getpid();
        if (!state_known(state))
            return -ORBIT_ECORRUPT;   /* a garbled record: never spin on it */
        if (state == ORBIT_NODE_FREE || state == ORBIT_NODE_JOINING || (state == ORBIT_NODE_LIVE && ours)) {
            /* Owner held: only a holder's leave (LIVE -> FREE) can move the state meanwhile. */
            if (atomic_compare_exchange_strong(&rec->state, &state, ORBIT_NODE_JOINING))
                return 0;
            continue;
        }
        if (state == ORBIT_NODE_LIVE && orb_node_alive(pid, atomic_load(&rec->start_time)))
            return -ORBIT_ECLAIMED;
        int rc = run_report(f, node, 0, true, ORBIT_NODE_JOINING);
        if (rc != 0)
            return rc < 0 ? rc : 0;   /* 0: the holder left meanwhile; look again */
    }
}

/* Claim exactly this node; a dead holder's share (or a report cut short) is ended first. */
static int claim_exact(struct orbit_fleet *f, uint16_t node)
{
    struct orb_node_record *rec = &f->nodes[node];
    uint64_t me = owner_self();
    if (!take_owner(rec, me))
        return -ORBIT_ECLAIMED;   /* another joiner or reporter is mid-way */
    int rc = take_exact(f, node);
    if (rc < 0) {
        drop_owner(rec, me);
        return rc;
    }
    f->node = node;
    return 0;
}

static int check_opts(const char *name, const struct orbit_fleet_opts *o)
{
    if (o->capacity < 1 || o->capacity > ORBIT_FLEET_CAPACITY_MAX)
        return -ORBIT_EMALFORMED;
    if (o->node < -1 || (o->node >= 0 && o->node >= (int32_t)o->capacity))
        return -ORBIT_EMALFORMED;
    if ((o->mode & 0007) || o->mode > 0777 || o->backing > ORBIT_BACKING_PRIVATE)
        return -ORBIT_EMALFORMED;
    if (o->gid < -1 || o->gid > 4294967294LL)   /* (gid_t)-1 means "no change" to chown */
        return -ORBIT_EMALFORMED;
    if (name && !orb_fleet_name_valid(name))
        return -ORBIT_EMALFORMED;
    return 0;
}

static struct orbit_fleet *fleet_alloc(const char *name)
{
    struct orbit_fleet *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    pthread_mutex_init(&f->lock, NULL);
    f->is_private = name == NULL;
    if (name)
        snprintf(f->name, sizeof f->name, "%s", name);
    f->node = ORBIT_NODE_NONE;
    f->gid = -1;
    return f;
}

int orbit_fleet_join(const char *name, const struct orbit_fleet_opts *opts, struct orbit_fleet **out)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    if (opts)
        o = *opts;
    if (!out)
        return -ORBIT_EMALFORMED;
    int rc = check_opts(name, &o);
    if (rc < 0)
        return rc;
    struct orbit_fleet *f = fleet_alloc(name);
    if (!f)
        return -ENOMEM;
    f->capacity = o.capacity;
    f->want_backing = name ? o.backing : ORBIT_BACKING_PRIVATE;
    f->mode = o.mode;
    f->gid = o.gid;
    if ((rc = map_fleet(f, f->want_backing)) < 0) {
        free(f);
        return rc;
    }
    int32_t pid = (int32_t)getpid();
    f->incarnation = o.incarnation ? o.incarnation : derived_incarnation(pid, orb_proc_start_time(pid));
    rc = o.node < 0 ? claim_any(f) : claim_exact(f, (uint16_t)o.node);
    if (rc < 0) {
        orb_segment_close(&f->seg);
        free(f);
        return rc;
    }
    publish_node(f, &f->nodes[f->node]);
    *out = f;
    return 0;
}

int orbit_fleet_observe(const char *name, struct orbit_fleet **out)
{
    if (!out || !orb_fleet_name_valid(name))
        return -ORBIT_EMALFORMED;
    struct orbit_fleet *f = fleet_alloc(name);
    if (!f)
        return -ENOMEM;
    int rc = orb_segment_open_existing(name, ORB_FLEET_KIND, &f->seg);
    if (rc == 0 && orb_seg_hdr(&f->seg)->table_type != ORB_TABLE_FLEET)
        rc = -ORBIT_ECORRUPT;
    uint16_t capacity = rc == 0 ? orb_seg_hdr(&f->seg)->fleet_capacity : 0;
    if (rc == 0 && (capacity < 1 || capacity > ORBIT_FLEET_CAPACITY_MAX ||
                    ORB_SEG_HEADER_BYTES + (size_t)capacity * sizeof(struct orb_node_record) > f->seg.mapped))
        rc = -ORBIT_ECORRUPT;   /* the capacity is read from shared memory: bound it */
    if (rc < 0) {
        orb_segment_close(&f->seg);
        free(f);
        return rc;
    }
    f->observer = true;
    f->capacity = capacity;
    f->nodes = orb_seg_table(&f->seg);
    f->want_backing = f->seg.backing;
    *out = f;
    return 0;
}

void orbit_fleet_leave(struct orbit_fleet *f)
{
    if (!f)
        return;
    struct orb_node_record *rec = orb_fleet_record(f, f->node);
    if (rec && !f->observer && atomic_load(&rec->incarnation) == f->incarnation &&
        atomic_load(&rec->pid) == (int32_t)getpid()) {
        uint32_t live = ORBIT_NODE_LIVE;
        /* Only our own live claim is released; a reporter that already took it keeps it. */
        atomic_compare_exchange_strong(&rec->state, &live, ORBIT_NODE_FREE);
    }
    orb_table_cache_free(f);
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++)
        if (f->private_tables[i].refs > 0)
            orb_segment_close(&f->private_tables[i].seg);
    orb_segment_close(&f->seg);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

uint16_t orbit_fleet_node(const struct orbit_fleet *f) { return f ? f->node : ORBIT_NODE_NONE; }
uint64_t orbit_fleet_incarnation(const struct orbit_fleet *f) { return f ? f->incarnation : 0; }
uint16_t orbit_fleet_capacity(const struct orbit_fleet *f) { return f ? f->capacity : 0; }
enum orbit_backing orbit_fleet_backing(const struct orbit_fleet *f)
{
    return f ? f->seg.backing : ORBIT_BACKING_AUTO;
}
const char *orbit_fleet_name(const struct orbit_fleet *f) { return f ? f->name : ""; }

void orb_fleet_ring_doorbell(struct orbit_fleet *f, uint32_t node, struct orb_wait_stats *stats)
{
    struct orb_node_record *rec = orb_fleet_record(f, node);
    if (!rec)
        return;
    orb_wait_signal(&rec->doorbell, stats);
    if (stats)
        atomic_fetch_add_explicit(&stats->doorbells, 1, memory_order_relaxed);
}

ssize_t orbit_fleet_nodes(struct orbit_fleet *f, struct orbit_node_info *out, size_t max)
{
    if (!f || (max && !out))
        return -ORBIT_EMALFORMED;
    size_t n = 0;
    for (uint32_t i = 0; i < f->capacity; i++) {
        struct orb_node_record *rec = &f->nodes[i];
        uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
        if (state == ORBIT_NODE_FREE)
            continue;
        if (n < max) {
            struct orbit_node_info *ni = &out[n];
            memset(ni, 0, sizeof *ni);
            ni->node = (uint16_t)i;
            ni->state = state == ORBIT_NODE_LIVE ? ORBIT_NODE_LIVE : ORBIT_NODE_JOINING;
            ni->pid = atomic_load(&rec->pid);
            ni->start_time = atomic_load(&rec->start_time);
            ni->incarnation = atomic_load(&rec->incarnation);
            ni->alive = orb_node_alive(ni->pid, ni->start_time);
        }
        n++;
    }
    return (ssize_t)n;
}

/* Take the owner word and run (or resume) the report; true when this call finished one. */
/* run_report under the owner word: 1 ran, 0 nothing to run, or the dispatch's error. */
static int report_node(struct orbit_fleet *f, uint16_t node, uint64_t inc, bool any)
{
    struct orb_node_record *rec = &f->nodes[node];
    uint64_t me = owner_self();
    if (!take_owner(rec, me))
        return 0;   /* a live reporter or joiner is mid-way: it finishes */
    int rc = run_report(f, node, inc, any, ORBIT_NODE_FREE);
    drop_owner(rec, me);
    return rc;
}

int orbit_fleet_node_dead(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    if (!f)
        return -ORBIT_EMALFORMED;
    if (!orb_fleet_record(f, node))
        return -ORBIT_EMALFORMED;
    /* Only the reporter holding the owner word ends the share: a node already freed, or
     * claimed by a later life, is left alone (its tables owe that incarnation nothing). */
    int rc = report_node(f, node, incarnation, false);
    return rc < 0 ? rc : 0;
}

void orb_fleet_kick_doorbells(struct orbit_fleet *f)
{
    for (uint32_t i = 0; i < f->capacity; i++)
        orb_wait_kick(&f->nodes[i].doorbell);
}

int orbit_fleet_reap(struct orbit_fleet *f)
{
    if (!f)
        return -ORBIT_EMALFORMED;
    int reported = 0;
    for (uint32_t i = 0; i < f->capacity; i++) {
        struct orb_node_record *rec = &f->nodes[i];
        if (i == f->node && !f->observer)
            continue;
        uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
        if (state == ORBIT_NODE_FREE)
            continue;
        uint64_t inc = atomic_load(&rec->incarnation);
        if (state == ORBIT_NODE_LIVE &&
            orb_node_alive(atomic_load(&rec->pid), atomic_load(&rec->start_time)))
            continue;
        /* LIVE and gone, or mid-way under an owner that may be gone: the owner word decides. */
        reported += report_node(f, (uint16_t)i, inc, false) == 1;
    }
    return reported;
}

/* ---- table segments ---------------------------------------------------- */

static int private_find(struct orbit_fleet *f, uint8_t kind)
{
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++)
        if (f->private_tables[i].refs > 0 && f->private_tables[i].seg.kind == kind)
            return i;
    return -1;
}

static int private_open(struct orbit_fleet *f, struct orb_seg_request *req, struct orb_segment *out)
{
    pthread_mutex_lock(&f->lock);
    int rc, i = private_find(f, req->kind);
    if (i >= 0) {
        struct orb_seg_header *h = orb_seg_hdr(&f->private_tables[i].seg);
        bool same = req->table_bytes == h->table_bytes && req->table_type == h->table_type &&
                    req->geometry_len == h->geometry_len &&
                    memcmp(req->geometry, h->geometry, req->geometry_len) == 0;
        rc = same ? 0 : -ORBIT_EGEOMETRY;
    } else {
        for (i = 0; i < ORB_PRIVATE_TABLES_MAX && f->private_tables[i].refs > 0; i++)
            ;
        rc = i < ORB_PRIVATE_TABLES_MAX ? orb_segment_open(req, &f->private_tables[i].seg) : -ORBIT_EFULL;
    }
    if (rc == 0) {
        f->private_tables[i].refs++;
        *out = f->private_tables[i].seg;
        out->created = f->private_tables[i].refs == 1;
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int orb_fleet_table_open(struct orbit_fleet *f, struct orb_seg_request *req, struct orb_segment *out)
{
    req->fleet_capacity = f->capacity;
    req->mode = f->mode;
    req->gid = f->gid;
    if (f->is_private) {
        req->fleet = NULL;
        req->backing = ORBIT_BACKING_PRIVATE;
        return private_open(f, req, out);
    }
    req->fleet = f->name;
    /* Tables follow the fleet: an AUTO fleet that landed on /dev/shm stays there. */
    req->backing = f->want_backing == ORBIT_BACKING_AUTO && f->seg.backing == ORBIT_BACKING_SHM
                       ? ORBIT_BACKING_SHM : f->want_backing;
    if (f->observer)
        req->backing = ORBIT_BACKING_AUTO;
    return orb_segment_open(req, out);
}

int orb_fleet_table_open_existing(struct orbit_fleet *f, uint8_t kind, struct orb_segment *out)
{
    if (f->is_private) {
        pthread_mutex_lock(&f->lock);
        int i = private_find(f, kind);
        if (i >= 0) {
            f->private_tables[i].refs++;
            *out = f->private_tables[i].seg;
            out->created = false;
        }
        pthread_mutex_unlock(&f->lock);
        return i >= 0 ? 0 : -ENOENT;
    }
    int rc = orb_segment_open_existing(f->name, kind, out);
    if (rc == 0 && orb_seg_hdr(out)->fleet_capacity != f->capacity) {
        orb_segment_close(out);
        rc = -ORBIT_EGEOMETRY;
    }
    return rc;
}

void orb_fleet_table_close(struct orbit_fleet *f, struct orb_segment *seg)
{
    if (!seg->base)
        return;
    if (!f->is_private) {
        orb_segment_close(seg);
        return;
    }
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++) {
        if (f->private_tables[i].refs > 0 && f->private_tables[i].seg.base == seg->base &&
            --f->private_tables[i].refs == 0)
            orb_segment_close(&f->private_tables[i].seg);
    }
    pthread_mutex_unlock(&f->lock);
    seg->base = NULL;
}

/* ---- listing and unlinking --------------------------------------------- */

/* The backing directories: hugetlbfs (NULL when there is none) and /dev/shm. */
static void segment_dirs(const char *dirs[2], char hdir[256])
{
    dirs[0] = orb_hugetlb_dir();
    dirs[1] = "/dev/shm";
    if (dirs[0]) {
        snprintf(hdir, 256, "%s", dirs[0]);
        dirs[0] = hdir;
    }
}

/* Calls fn for each "orbit.<fleet>.<kind>" file in the backing directories. */
static void scan_segments(void (*fn)(void *ctx, const char *dir, const char *fleet, unsigned kind,
                                     enum orbit_backing b), void *ctx)
{
    const char *dirs[2];
    char hdir[256];
    segment_dirs(dirs, hdir);
    for (int d = 0; d < 2; d++) {
        if (!dirs[d])
            continue;
        DIR *dir = opendir(dirs[d]);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            const char *n = e->d_name, *dot = strrchr(n, '.');
            if (strncmp(n, "orbit.", 6) != 0 || !dot || dot <= n + 6 || strstr(n, ".tmp."))
                continue;
            char *end;
            unsigned long kind = strtoul(dot + 1, &end, 10);
            if (*end || end == dot + 1 || kind > 255)
                continue;
            char fleet[ORBIT_FLEET_NAME_MAX + 1];
            size_t len = (size_t)(dot - (n + 6));
            if (len > ORBIT_FLEET_NAME_MAX)
                continue;
            memcpy(fleet, n + 6, len);
            fleet[len] = '\0';
            fn(ctx, dirs[d], fleet, (unsigned)kind, d == 0 ? ORBIT_BACKING_HUGETLB : ORBIT_BACKING_SHM);
        }
        closedir(dir);
    }
}

struct seg_collect { const char *fleet; struct orbit_segment_info *out; size_t max, n; };

static void collect_segment(void *ctx, const char *dir, const char *fleet, unsigned kind,
                            enum orbit_backing b)
{
    struct seg_collect *c = ctx;
    if (strcmp(fleet, c->fleet) != 0)
        return;
    if (c->n < c->max) {
        struct orbit_segment_info *si = &c->out[c->n];
        memset(si, 0, sizeof *si);
        si->kind = (uint8_t)kind;
        si->backing = b;
        snprintf(si->path, sizeof si->path, "%s/orbit.%s.%u", dir, fleet, kind);
        struct orb_seg_header h;
        if (orb_segment_peek(fleet, (uint8_t)kind, &h, &si->size, NULL) == 0)
            si->epoch = h.epoch;
    }
    c->n++;
}

ssize_t orbit_fleet_segments(const char *name, struct orbit_segment_info *out, size_t max)
{
    if (!orb_fleet_name_valid(name) || (max && !out))
        return -ORBIT_EMALFORMED;
    struct seg_collect c = { name, out, max, 0 };
    scan_segments(collect_segment, &c);
    return (ssize_t)c.n;
}

struct kind_collect { const char *fleet; uint64_t *present; };

static void collect_kind(void *ctx, const char *dir, const char *fleet, unsigned kind,
                         enum orbit_backing b)
{
    (void)dir; (void)b;
    struct kind_collect *c = ctx;
    if (strcmp(fleet, c->fleet) == 0)
        c->present[kind / 64] |= 1ull << (kind % 64);
}

int orb_fleet_segment_kinds(const char *name, uint64_t present[4])
{
    if (!orb_fleet_name_valid(name) || !present)
        return -ORBIT_EMALFORMED;
    memset(present, 0, 4 * sizeof *present);
    struct kind_collect c = { name, present };
    scan_segments(collect_kind, &c);
    return 0;
}

struct name_collect { char (*names)[ORBIT_FLEET_NAME_MAX + 1]; size_t max, n; };

static void collect_name(void *ctx, const char *dir, const char *fleet, unsigned kind,
                         enum orbit_backing b)
{
    (void)dir; (void)b;
    struct name_collect *c = ctx;
    if (kind != ORB_FLEET_KIND)
        return;
    if (c->n < c->max)
        snprintf(c->names[c->n], ORBIT_FLEET_NAME_MAX + 1, "%s", fleet);
    c->n++;
}

ssize_t orbit_fleet_list(char (*names)[ORBIT_FLEET_NAME_MAX + 1], size_t max)
{
    if (max && !names)
        return -ORBIT_EMALFORMED;
    struct name_collect c = { names, max, 0 };
    scan_segments(collect_name, &c);
    return (ssize_t)c.n;
}

struct unlink_ctx { const char *fleet; int removed; int error; };

static void unlink_one(void *ctx, const char *dir, const char *fleet, unsigned kind, enum orbit_backing b)
{
    (void)b;
    struct unlink_ctx *u = ctx;
    char path[400];
    if (strcmp(fleet, u->fleet) != 0)
        return;
    snprintf(path, sizeof path, "%s/orbit.%s.%u", dir, fleet, kind);
    if (unlink(path) == 0)
        u->removed++;
    else if (errno != ENOENT)
        u->error = -errno;
}

/*
 * A creator builds a segment as "orbit.<fleet>.<kind>.tmp.<pid>.<ns>" and links it into
 * place; one killed before that leaves the file. Removes those whose creator is gone,
 * or is this process (a bench's signal handler unlinking its fleet mid-creation); another
 * live creator's file is its own: it links or removes it. Returns how many.
 */
static int unlink_dead_creations(const char *name)
{
    const char *dirs[2];
    char hdir[256], prefix[ORBIT_FLEET_NAME_MAX + 8];
    int removed = 0;
    segment_dirs(dirs, hdir);
    snprintf(prefix, sizeof prefix, "orbit.%s.", name);
    for (int d = 0; d < 2; d++) {
        DIR *dir = dirs[d] ? opendir(dirs[d]) : NULL;
        struct dirent *e;
        while (dir && (e = readdir(dir)) != NULL) {
            const char *tmp = strstr(e->d_name, ".tmp.");
            if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || !tmp)
                continue;
            long pid = strtol(tmp + 5, NULL, 10);
            if (pid <= 0 || pid > INT32_MAX ||
                (pid != getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)))
                continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
            removed += unlink(path) == 0;
        }
        if (dir)
            closedir(dir);
    }
    return removed;
}

int orbit_fleet_unlink(const char *name)
{
    if (!orb_fleet_name_valid(name))
        return -ORBIT_EMALFORMED;
    struct unlink_ctx u = { name, 0, 0 };
    scan_segments(unlink_one, &u);
    u.removed += unlink_dead_creations(name);
    /* Creation locks are not segments; one a killed creator left behind counts as removed. */
    for (unsigned kind = 0; kind < 256; kind++) {
        char path[300];
        if (orb_segment_lock_path(name, (uint8_t)kind, path, sizeof path) == 0 && unlink(path) == 0)
            u.removed++;
    }
    if (u.error)
        return u.error;
    return u.removed ? 0 : -ENOENT;
}
