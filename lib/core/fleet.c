/* SPDX-License-Identifier: MIT */
/* The fleet: its segment of node records, joining, leaving, liveness and reaping. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include "fleet_internal.h"
#include "generation.h"
#include "life.h"
#include "lock.h"
#include "table_ops.h"
#include "error_internal.h"
#include "guard.h"
#include "guard_sigbus.h"

#define NODE_REAPING 3u   /* internal state: one reporter is ending this node */
#define REPORT_WAIT_MS (ORB_LOCK_BOUND_MS + 1000)   /* a mover's step: a report's table locks, bounded */

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

static int fleet_init(struct orb_segment *seg, void *ctx)
{
    const struct orb_fleet_geometry *g = ctx;
    char *t = orb_seg_table(seg);
    memset(t, 0, orb_fleet_counters_offset(g->capacity));
    orb_ctr_region_init(t + orb_fleet_counters_offset(g->capacity), g->capacity);
    return 0;
}

/* Point the handle at the counters region; its slot count is checked against the capacity. */
static int bind_counters(struct orbit_fleet *f)
{
    size_t off = orb_fleet_counters_offset(f->capacity);
    if (ORB_SEG_HEADER_BYTES + orb_fleet_table_bytes(f->capacity) > f->seg.mapped)
        return orb_fail(-ORBIT_ECORRUPT, "fleet '%s': the segment is too short for its counters", f->name);
    char *region = (char *)orb_seg_table(&f->seg) + off;
    struct orb_ctr_header *h = (struct orb_ctr_header *)region;
    if (h->slot_count != orb_ctr_slot_count(f->capacity))
        return orb_fail(-ORBIT_ECORRUPT, "fleet '%s': the counters region is garbled", f->name);
    f->ctr = h;
    f->ctr_totals = (struct orb_ctr_totals *)(region + ORB_CTR_HEADER_BYTES);
    f->ctr_slots = (struct orb_ctr_slot *)(region + ORB_CTR_HEADER_BYTES + ORB_CTR_KINDS * sizeof(struct orb_ctr_totals));
    f->ctr_slot_count = h->slot_count;
    return 0;
}

static int map_fleet(struct orbit_fleet *f, enum orbit_backing backing)
{
    struct orb_fleet_geometry geom = { f->capacity, sizeof(struct orb_node_record), ORB_FLEET_LAYOUT_VERSION,
                                       orb_ctr_slot_count(f->capacity), ORB_CTR_VALUES, 0, { 0 } };
    orb_gen_geometry(&geom, f->generation);
    size_t bytes = ORB_SEG_HEADER_BYTES + orb_fleet_table_bytes(f->capacity);
    struct orb_seg_request req = {
        .fleet = f->is_private ? NULL : f->name, .kind = ORB_FLEET_KIND,
        .table_type = ORB_TABLE_FLEET, .fleet_capacity = f->capacity,
        .geometry = &geom, .geometry_len = sizeof geom, .table_bytes = bytes,
        .geometry_names = (const char *const[]){ "capacity", "node record bytes", "layout version", NULL },
        .populate_bytes = bytes, .backing = backing, .mode = f->mode, .gid = f->gid,
        .init = fleet_init, .ctx = &geom,
    };
    int rc = orb_segment_open(&req, &f->seg);
    if (rc == -ENOMEM)
        rc = orb_room_fail_create(rc, &req);
    if (rc == 0) {
        f->nodes = orb_seg_table(&f->seg);
        rc = bind_counters(f);
    }
    return rc;
}


/* Owner byte held on a JOINING node: take the life's lock byte, then publish the life. */
static int publish_node(struct orbit_fleet *f, struct orb_node_record *rec)
{
    uint64_t joins = atomic_load(&rec->joins) + 1;
    struct orb_deadline d = orb_deadline_in(1000);
    int rc = 0;
    /* The lock comes first: a prober never finds a LIVE record without its life's lock. */
    while (!f->is_private && (rc = orb_life_hold(f, f->node, joins)) == -EAGAIN && !orb_deadline_passed(&d))
        sched_yield();   /* a watcher of an ended life holds the byte for an instant */
    if (rc < 0)
        return rc == -EAGAIN ? -ORBIT_ECLAIMED : rc;
    f->joins = joins;
    atomic_store_explicit(&rec->pid, (int32_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&rec->start_time, orb_proc_start_time(getpid()), memory_order_relaxed);
    atomic_store_explicit(&rec->incarnation, f->incarnation, memory_order_relaxed);
    atomic_store_explicit(&rec->pidns, orb_pidns_self(), memory_order_relaxed);
    atomic_store_explicit(&rec->joins, joins, memory_order_relaxed);
    /* Release: pid, start time, incarnation and joins are visible before the node reads LIVE. */
    atomic_store_explicit(&rec->state, ORBIT_NODE_LIVE, memory_order_release);
    return 0;
}

/*
 * Owner byte held, the node not LIVE: its record stops naming the life that
 * ended there, before the node reads JOINING (release, after this). A JOINING
 * record is a claim, and a reader must never take a dead life's incarnation
 * left in it for that life still holding the node; the joiner's own is
 * written as it publishes.
 */
static void forget_life(struct orb_node_record *rec)
{
    atomic_store_explicit(&rec->incarnation, 0, memory_order_relaxed);
}

/*
 * Owner byte held: move the node to REAPING for the life to end and say which,
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
    /* Owner byte held, no joiner can change the life; only its holder's leave (to FREE) races. */
    if (!atomic_compare_exchange_strong(&rec->state, &state, NODE_REAPING))
        return false;
    *ending = cur;
    return true;
}

/* How the dead process named itself in bounded-lock words: a lock it died holding is ours to take. */
static uint64_t lock_identity(const struct orb_node_record *rec)
{
    return orb_lock_identity((uint32_t)atomic_load(&rec->pid), atomic_load(&rec->start_time),
                             atomic_load(&rec->pidns));
}

/* Wake every node's doorbell sleepers (orb_wait_kick): part of a death report. */
static void kick_doorbells(struct orbit_fleet *f)
{
    for (uint32_t i = 0; i < f->capacity; i++)
        orb_wait_kick(&f->nodes[i].doorbell);
}

/*
 * Report the node's life dead on every table, resumably: the owner byte says
 * who is reporting, and a report whose reporter is gone is finished by the next
 * one to take the byte. then: the state the node is left in (FREE, or JOINING
 * for a joiner taking it). leaving: the life is the caller's own, ending by
 * orbit_fleet_leave (counted as a leave; its locks are this process's, never
 * taken over). Returns 1 when this call ran a report, 0 when there was none
 * to run, or the dispatch's error: the node stays REAPING then, for a later
 * report to finish. The owner byte is still held.
 */
static int run_report(struct orbit_fleet *f, uint16_t node, uint64_t inc, bool any, uint32_t then,
                      bool leaving)
{
    struct orb_node_record *rec = &f->nodes[node];
    uint64_t ending;
    if (!start_report(rec, inc, any, &ending))
        return 0;
    if (!leaving)
        orb_lock_set_dead(lock_identity(rec));
    int64_t began = orb_now_ns();
    int rc = orb_dispatch_node_dead(f, node, ending);
    /* The dead may have rung a doorbell and died before its wake went out. */
    kick_doorbells(f);
    orb_lock_set_dead(0);
    if (rc < 0)
        return rc;
    orb_ctr_fold_life(f, node, ending);   /* before the node can be claimed: its counts join the totals */
    if (leaving)
        orb_ctr_note_leave(f);
    else
        orb_ctr_note_death(f, (uint64_t)(orb_now_ns() - began));
    if (then == ORBIT_NODE_JOINING)
        forget_life(rec);
    /* Tables are clean of that incarnation before the node can be claimed again. */
    atomic_store_explicit(&rec->state, then, memory_order_release);
    orb_wait_kick(&rec->life_end);   /* death waiters of that life, wherever they sleep */
    return 1;
}

/* Owner byte held on a node that is not LIVE: make it ours (JOINING), or false. */
static bool take_node(struct orbit_fleet *f, uint16_t node)
{
    struct orb_node_record *rec = &f->nodes[node];
    uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
    /* JOINING under a gone owner: its joiner died before publishing, holding nothing. */
    if (state == ORBIT_NODE_FREE || state == ORBIT_NODE_JOINING) {
        forget_life(rec);   /* not LIVE, owner byte held: nobody else writes the record */
        return atomic_compare_exchange_strong(&rec->state, &state, ORBIT_NODE_JOINING);
    }
    return state == NODE_REAPING && run_report(f, node, 0, true, ORBIT_NODE_JOINING, false) == 1;
}

/* The first node that is free, or whose joiner or reporter died mid-way (finished first). */
static int claim_any(struct orbit_fleet *f)
{
    for (uint32_t i = 0; i < f->capacity; i++) {
        if (atomic_load_explicit(&f->nodes[i].state, memory_order_acquire) == ORBIT_NODE_LIVE ||
            !orb_owner_take(f, (uint16_t)i))
            continue;
        if (take_node(f, (uint16_t)i)) {
            f->node = (uint16_t)i;
            return 0;
        }
        orb_owner_drop(f, (uint16_t)i);
    }
    return orb_fail(-ORBIT_EFULL, "orbit_fleet_join: fleet '%s': all %u nodes are taken", f->name,
                    (unsigned)f->capacity);
}

static bool state_known(uint32_t state)
{
    return state == ORBIT_NODE_FREE || state == ORBIT_NODE_JOINING || state == ORBIT_NODE_LIVE ||
           state == NODE_REAPING;
}

/* Owner byte held: move the node to JOINING for us, ending a dead holder's share first. */
static int take_exact(struct orbit_fleet *f, uint16_t node)
{
    struct orb_node_record *rec = &f->nodes[node];
    for (;;) {
        uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
        if (!state_known(state))
            return orb_fail(-ORBIT_ECORRUPT, "orbit_fleet_join: node %u's record is garbled", node);
        if (state == ORBIT_NODE_FREE || state == ORBIT_NODE_JOINING) {
            forget_life(rec);
            /* Owner held: only a holder's leave (LIVE -> FREE) can move the state meanwhile. */
            if (atomic_compare_exchange_strong(&rec->state, &state, ORBIT_NODE_JOINING))
                return 0;
            continue;
        }
        if (state == ORBIT_NODE_LIVE && orb_life_held_here(f, node))
            return orb_fail(-ORBIT_ECLAIMED, "orbit_fleet_join: node %u is held by this process already", node);
        if (state == ORBIT_NODE_LIVE && orb_node_alive(f, node))
            return orb_fail(-ORBIT_ECLAIMED, "orbit_fleet_join: node %u is held by a live process (pid %d "
                            "in its namespace)", node, (int)atomic_load(&rec->pid));
        int rc = run_report(f, node, 0, true, ORBIT_NODE_JOINING, false);
        if (rc != 0)
            return rc < 0 ? rc : 0;   /* 0: the holder left meanwhile; look again */
    }
}

/* Claim exactly this node; a dead holder's share (or a report cut short) is ended first. */
static int claim_exact(struct orbit_fleet *f, uint16_t node)
{
    if (!orb_owner_take(f, node))
        return orb_fail(-ORBIT_ECLAIMED, "orbit_fleet_join: node %u: another joiner or reporter is moving "
                        "it", node);
    int rc = take_exact(f, node);
    if (rc < 0) {
        orb_owner_drop(f, node);
        return rc;
    }
    f->node = node;
    return 0;
}

static int check_opts(const char *name, const struct orbit_fleet_opts *o)
{
    const char *call = "orbit_fleet_join";
    if (o->capacity < 1 || o->capacity > ORBIT_FLEET_CAPACITY_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: capacity %u: a fleet has 1..%d nodes", call,
                        (unsigned)o->capacity, ORBIT_FLEET_CAPACITY_MAX);
    if (o->node < -1 || (o->node >= 0 && o->node >= (int32_t)o->capacity))
        return orb_fail(-ORBIT_EMALFORMED, "%s: node %d: -1 (any) or 0..%u", call, (int)o->node,
                        (unsigned)o->capacity - 1u);
    if ((o->mode & 0007) || o->mode > 0777)
        return orb_fail(-ORBIT_EMALFORMED, "%s: mode %#o: segments are never world-accessible and "
                        "mode has only permission bits", call, (unsigned)o->mode);
    if (o->mode && (o->mode & 0600) != 0600)
        return orb_fail(-ORBIT_EMALFORMED, "%s: mode %#o: the owner's members map segments read-write "
                        "(0600 at least)", call, (unsigned)o->mode);
    if (o->backing > ORBIT_BACKING_PRIVATE)
        return orb_fail(-ORBIT_EMALFORMED, "%s: backing %d is not an enum orbit_backing", call, (int)o->backing);
    if (o->gid < -1 || o->gid > 4294967294LL)   /* (gid_t)-1 means "no change" to chown */
        return orb_fail(-ORBIT_EMALFORMED, "%s: gid %lld: -1 or 0..4294967294", call, (long long)o->gid);
    int rc = orb_check_resv(o->resv, sizeof o->resv / sizeof o->resv[0], call, "ORBIT_FLEET_OPTS_DEFAULT");
    if (rc < 0)
        return rc;
    if (name && !orb_fleet_name_valid(name))
        return orb_fail(-ORBIT_EMALFORMED, "%s: name '%.80s': 1-64 bytes of letters, digits, '_', '.' and '-'",
                        call, name);
    return 0;
}

static struct orbit_fleet *fleet_alloc(const char *name, uint32_t capacity)
{
    struct orbit_fleet *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->owner_busy = calloc((capacity + 63) / 64, sizeof *f->owner_busy);
    if (!f->owner_busy) {
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->lock, NULL);
    f->is_private = name == NULL;
    if (name)
        snprintf(f->name, sizeof f->name, "%s", name);
    f->node = ORBIT_NODE_NONE;
    f->gid = -1;
    f->ready_wait_ms = -1;
    f->seg.fd = -1;
    f->seg.guard = -1;
    f->life_fd = -1;
    f->fork_generation = atomic_load(&orb_fork_generation);
    return f;
}

/* The mapping's file once more, for the locks (life.h): 0 or a negative code. */
static int open_life(struct orbit_fleet *f)
{
    return orb_life_open(f);   /* registered from its first instant: fork closes it in a child */
}

static void close_fleet_file(struct orbit_fleet *f)
{
    orb_life_close(f);   /* every lock of this handle goes with it */
    orb_segment_close(&f->seg);
}

static void fleet_free(struct orbit_fleet *f)
{
    close_fleet_file(f);
    pthread_mutex_destroy(&f->lock);
    free(f->owner_busy);
    free(f);
}

/* Map the fleet and, for a named one, enter its gate on a file still under its name. */
static int open_gated(struct orbit_fleet *f)
{
    for (int attempt = 0;; attempt++) {
        int rc = map_fleet(f, f->want_backing);
        if (rc < 0 || f->is_private)
            return rc;
        if ((rc = open_life(f)) == 0)
            rc = orb_gate_enter(f);
        /* A collector unlinked the file between our open and the gate: open the new one. */
        if (rc == 0 && orbit_fleet_replaced(f) == 1 && attempt < 8) {
            close_fleet_file(f);
            continue;
        }
        if (rc < 0)
            close_fleet_file(f);
        return rc;
    }
}

int orbit_fleet_join(const char *name, const struct orbit_fleet_opts *opts, struct orbit_fleet **out)
{
    orb_error_clear();
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    if (opts)
        o = *opts;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "orbit_fleet_join: out is NULL");
    int rc = check_opts(name, &o);
    if (rc < 0)
        return rc;
    struct orbit_fleet *f = fleet_alloc(name, o.capacity);
    if (!f)
        return -ENOMEM;
    f->capacity = o.capacity;
    f->want_backing = name ? o.backing : ORBIT_BACKING_PRIVATE;
    f->mode = o.mode;
    f->gid = o.gid;
    if ((rc = orb_gen_join_open(f, name, &o, open_gated)) < 0) {
        fleet_free(f);
        return rc;
    }
    f->incarnation = o.incarnation ? o.incarnation : orb_life_incarnation();
    rc = o.node < 0 ? claim_any(f) : claim_exact(f, (uint16_t)o.node);
    if (rc == 0 && (rc = publish_node(f, &f->nodes[f->node])) < 0)
        atomic_store_explicit(&f->nodes[f->node].state, ORBIT_NODE_FREE, memory_order_release);
    if (f->node != ORBIT_NODE_NONE)
        orb_owner_drop(f, f->node);
    if (!f->is_private)
        orb_gate_leave(f);
    if (rc < 0) {
        fleet_free(f);
        return rc;
    }
    orb_life_register(f);
    orb_guard_bind(f->seg.guard, &f->fork_generation);   /* after the register set the generation */
    *out = f;
    return 0;
}

int orb_fleet_writable(const struct orbit_fleet *f, const char *call)
{
    if (!f->seg.read_only)
        return 0;
    return orb_fail(-EACCES, "%s: fleet '%s' is observed read-only (this user may read its segments, not "
                    "write them)", call, f->name);
}

static int check_observed(struct orbit_fleet *f, const char *name, const char *call)
{
    struct orb_seg_header *h = orb_seg_hdr(&f->seg);
    if (h->table_type != ORB_TABLE_FLEET)
        return orb_fail(-ORBIT_ECORRUPT, "%s: '%s': the fleet segment holds another table", call, name);
    uint16_t capacity = h->fleet_capacity;
    /* The capacity is read from shared memory: bound it. */
    if (capacity < 1 || capacity > ORBIT_FLEET_CAPACITY_MAX ||
        ORB_SEG_HEADER_BYTES + orb_fleet_table_bytes(capacity) > f->seg.mapped)
        return orb_fail(-ORBIT_ECORRUPT, "%s: '%s': capacity %u does not fit the segment", call,
                        name, (unsigned)capacity);
    int rc = orb_gen_check_observed(h, name, &f->generation, call);
    if (rc < 0)
        return rc;
    f->capacity = capacity;
    return bind_counters(f);
}

static int check_observe_opts(const struct orbit_observe_opts *o)
{
    const char *call = "orbit_fleet_observe_opts";
    if (o->ready_wait_ms < -1 || o->ready_wait_ms > ORBIT_OBSERVE_WAIT_MAX_MS)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ready_wait_ms %d: -1 (the default bound) or 0..%d", call,
                        (int)o->ready_wait_ms, ORBIT_OBSERVE_WAIT_MAX_MS);
    if (o->flags)
        return orb_fail(-ORBIT_EMALFORMED, "%s: flags %#x: no flag is defined", call, (unsigned)o->flags);
    return orb_check_resv(o->resv, sizeof o->resv / sizeof o->resv[0], call, "ORBIT_OBSERVE_OPTS_DEFAULT");
}

int orbit_fleet_observe_opts(const char *name, const struct orbit_observe_opts *opts, struct orbit_fleet **out)
{
    static const struct orbit_observe_opts dflt = ORBIT_OBSERVE_OPTS_DEFAULT;
    const char *call = opts ? "orbit_fleet_observe_opts" : "orbit_fleet_observe";
    orb_error_enter(call);   /* a failed open's sentence (it names the file) goes under this name */
    if (!out || !orb_fleet_name_valid(name))
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s", call, out ? "name: 1-64 bytes of letters, "
                        "digits, '_', '.' and '-'" : "out is NULL");
    int rc = opts ? check_observe_opts(opts) : 0;
    if (rc < 0)
        return rc;
    const struct orbit_observe_opts *o = opts ? opts : &dflt;
    struct orbit_fleet *f = fleet_alloc(name, ORBIT_FLEET_CAPACITY_MAX);
    if (!f)
        return -ENOMEM;
    f->ready_wait_ms = o->ready_wait_ms;   /* every table opened through this handle waits as long */
    rc = orb_segment_open_existing_within(name, ORB_FLEET_KIND, f->ready_wait_ms, false, &f->seg);
    if (rc == -EACCES) {   /* read access only (a 0640 fleet's group): a read-only view */
        orb_error_enter(call);
        rc = orb_segment_open_existing_within(name, ORB_FLEET_KIND, f->ready_wait_ms, true, &f->seg);
    }
    if (rc == 0)
        rc = check_observed(f, name, call);
    f->observer = true;
    if (rc == 0) {
        f->nodes = orb_seg_table(&f->seg);   /* before open_life lists the handle: its records are read */
        rc = open_life(f);
    }
    if (rc < 0) {
        fleet_free(f);
        return rc;
    }
    f->want_backing = f->seg.backing;
    orb_life_register(f);
    orb_guard_bind(f->seg.guard, &f->fork_generation);   /* after the register set the generation */
    *out = f;
    return 0;
}

int orbit_fleet_observe(const char *name, struct orbit_fleet **out)
{
    return orbit_fleet_observe_opts(name, NULL, out);
}

/*
 * A leave is our own life's report: every table gives back what this life
 * holds (unaccepted reservations on others' resources, stream sides, claims,
 * arena chunks) exactly as a death report would, its counts are folded, and
 * the node is freed, all before our life lock goes (a prober never sees a
 * LIVE record of ours without it). A report that cannot finish (the owner
 * byte held past the bound, or a table lock) leaves the node to the next
 * report: once the lock goes, the record is a dead life's.
 */
static void leave_report(struct orbit_fleet *f, struct orb_node_record *rec)
{
    struct orb_deadline d = orb_deadline_in(REPORT_WAIT_MS);
    bool owner = orb_owner_take(f, f->node);
    while (!owner && !orb_deadline_passed(&d)) {   /* a sweep judging us lets go in a moment */
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
        owner = orb_owner_take(f, f->node);
    }
    int rc = 0;
    if (owner) {
        rc = run_report(f, f->node, f->incarnation, false, ORBIT_NODE_FREE, true);
        orb_owner_drop(f, f->node);
    }
    orb_life_drop(f, f->node, f->joins);
    if (rc != 1)   /* no report woke them: the lock went, death waiters find the life over */
        orb_wait_kick(&rec->life_end);
}

void orbit_fleet_leave(struct orbit_fleet *f)
{
    if (!f)
        return;
    orb_error_clear();
    bool ours = orb_fleet_usable(f, "orbit_fleet_leave") == 0;   /* a fork child only unmaps */
    struct orb_node_record *rec = orb_fleet_record(f, f->node);
    if (ours)
        orb_ctr_fleet_gone(f);   /* handles still open on f count nothing more */
    if (ours && rec && !f->observer && atomic_load(&rec->incarnation) == f->incarnation)
        leave_report(f, rec);
    orb_life_unregister(f);
    orb_table_cache_free(f);   /* table closes in a fork child free memory only */
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++)
        if (f->private_tables[i].refs > 0)
            orb_segment_close(&f->private_tables[i].seg);
    fleet_free(f);
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
    if (stats) {
        atomic_fetch_add_explicit(&stats->doorbells, 1, memory_order_relaxed);
        if (stats->ctr)
            orb_count(stats->ctr, ORB_CTR_DOORBELLS, 1);
    }
}

ssize_t orbit_fleet_nodes(struct orbit_fleet *f, struct orbit_node_info *out, size_t max)
{
    int rc = orb_enter_fleet(f, "orbit_fleet_nodes");
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "orbit_fleet_nodes: out is NULL with max %zu", max);
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
            ni->pid_namespace = atomic_load(&rec->pidns);
            ni->alive = state == ORBIT_NODE_LIVE && orb_node_alive(f, (uint16_t)i);
        }
        n++;
    }
    return (ssize_t)n;
}

/* run_report under the owner byte: 1 ran, 0 nothing to run, or the dispatch's error. */

/* Does the node still owe that life's report (LIVE with it, or REAPING)? */
static bool report_owed(struct orb_node_record *rec, uint64_t inc)
{
    uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
    return state == NODE_REAPING || (state == ORBIT_NODE_LIVE && atomic_load(&rec->incarnation) == inc);
}

/*
 * orbit_fleet_node_dead's report. Another mover holding the owner byte may be
 * a reporter of this very death (it finishes), or a sweep or joiner that lets
 * go in a moment: either way the report is owed until the record says
 * otherwise, so wait for the byte (bounded) instead of taking its holder's
 * word for it. -ORBIT_EAGAIN when the byte stayed taken past the bound.
 */
static int report_node(struct orbit_fleet *f, uint16_t node, uint64_t inc, bool any)
{
    struct orb_deadline d = orb_deadline_in(REPORT_WAIT_MS);
    while (!orb_owner_take(f, node)) {
        if (!report_owed(&f->nodes[node], inc))
            return 0;   /* finished by whoever held the byte, or a later life's now */
        if (orb_deadline_passed(&d))
            return orb_fail(-ORBIT_EAGAIN, "orbit_fleet_node_dead: node %u: another reporter or joiner has "
                            "held it for %d ms", (unsigned)node, REPORT_WAIT_MS);
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    int rc = run_report(f, node, inc, any, ORBIT_NODE_FREE, false);
    orb_owner_drop(f, node);
    return rc;
}

/*
 * A sweep's report: the life it judged dead (its incarnation and joins) is
 * judged again under the owner byte, where no joiner can publish a new one,
 * so a death seen a moment ago never ends a life that took the node since.
 */
static int reap_node(struct orbit_fleet *f, uint16_t node, uint64_t inc, uint64_t joins)
{
    if (!orb_owner_take(f, node))
        return 0;   /* a live reporter or joiner is mid-way: it finishes */
    struct orb_node_record *rec = &f->nodes[node];
    uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
    bool ended = state != ORBIT_NODE_LIVE || (atomic_load(&rec->joins) == joins && !orb_node_alive(f, node));
    int rc = ended ? run_report(f, node, inc, false, ORBIT_NODE_FREE, false) : 0;
    orb_owner_drop(f, node);
    return rc;
}

int orbit_fleet_node_dead(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    int rc = orb_enter_fleet(f, "orbit_fleet_node_dead");
    if (rc == 0)
        rc = orb_fleet_writable(f, "orbit_fleet_node_dead");
    if (rc < 0)
        return rc;
    if (!orb_fleet_record(f, node))
        return orb_fail(-ORBIT_EMALFORMED, "orbit_fleet_node_dead: node %u: the fleet has %u nodes",
                        (unsigned)node, (unsigned)f->capacity);
    /* Only the reporter holding the owner byte ends the share: a node already freed, or
     * claimed by a later life, is left alone (its tables owe that incarnation nothing). */
    rc = report_node(f, node, incarnation, false);
    return rc < 0 ? rc : 0;
}

int orbit_fleet_reap(struct orbit_fleet *f)
{
    int rc = orb_enter_fleet(f, "orbit_fleet_reap");
    if (rc == 0)
        rc = orb_fleet_writable(f, "orbit_fleet_reap");
    if (rc < 0)
        return rc;
    int reported = 0;
    for (uint32_t i = 0; i < f->capacity; i++) {
        struct orb_node_record *rec = &f->nodes[i];
        if (i == f->node && !f->observer)
            continue;
        uint32_t state = atomic_load_explicit(&rec->state, memory_order_acquire);
        if (state == ORBIT_NODE_FREE)
            continue;
        uint64_t inc = atomic_load(&rec->incarnation), joins = atomic_load(&rec->joins);
        if (state == ORBIT_NODE_LIVE && orb_node_alive(f, (uint16_t)i))
            continue;
        /* LIVE and gone, or mid-way under a mover that may be gone: the owner byte decides. */
        reported += reap_node(f, (uint16_t)i, inc, joins) == 1;
    }
    return reported;
}

int orbit_fleet_wait_node_death(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, int timeout_ms)
{
    int rc = orb_life_check_wait(f, node, incarnation, __func__);
    if (rc == 0)
        rc = orb_check_timeout(timeout_ms, __func__);
    if (rc < 0)
        return rc;
    rc = orb_life_wait_over(f, node, incarnation, timeout_ms);
    return rc == -ETIMEDOUT ? -ORBIT_ETIMEDOUT : rc;
}
