/* SPDX-License-Identifier: MIT */
/*
 * One thread per watched fleet: it alone opens the fleet (an observer that
 * never waits for a half-made segment), re-reads its node table, watches its
 * members, tests their locks and confirms their deaths; the event loop only
 * leaves messages in its inbox. Whatever the fleet holds, a slow lock list, a
 * forged record or a segment still being created, costs this thread its time
 * and no other fleet any.
 *
 * Its watches and handles come out of the reaper's budget (reaper_budget.c).
 * A fleet that would break a bound, or that cannot be read, is quarantined:
 * it gives its descriptors and table mappings back, its thread tests every
 * member's lock on each re-read (every RP_QUARANTINE_SCAN_MS at most, a
 * tenth of a CPU at most) and its worker reports at most a tenth of a CPU's
 * worth; it is reviewed every RP_REVIEW_MS until it fits again. Never a lower
 * priority: a thread starved of the CPU while it holds the process's mapping
 * lock (a page fault) would stall every other fleet's report behind it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "reaper_fleet.h"
#include "reaper_probe.h"
#include "reaper_thread.h"

#define RP_LOCK_MS          10      /* members tested by lock: this often (the interval, when shorter) */
#define RP_HINT_MS          1       /* a member a backend saw exit, its lock still held: this often... */
#define RP_HINT_FOR_NS      (2000 * 1000000LL)   /* ...for this long */
#define RP_LOCK_MEMBERS_MAX 256     /* members of one fleet tested by lock on the short period */
#define RP_REVIEW_MS        10000   /* a quarantined fleet is looked at again this often */
#define RP_BACKSTOP_MS      500     /* every watched life's lock is looked at this often */
#define RP_LOCKLESS_NS      (500 * 1000000LL)
#define RP_BUSY_FAULT_NS    (1000 * 1000000LL)   /* a fleet still being created this long is a fault */
#define RP_ATTACH_BACKOFF_MAX_MS 30000
#define RP_SEG_NODE_BYTES   4096    /* a fleet segment may map this much per node... */
#define RP_SEG_FIXED_BYTES  (4ll << 20)   /* ...and this much besides */
#define RP_SEGMENTS_MAX     512     /* 256 kinds in two backing directories */
#define RP_QUARANTINE_DEATHS 64     /* deaths a quarantined fleet has with its worker at most... */
#define RP_QUARANTINE_SCAN_MS 100   /* ...and re-reads no more often than this */
#define RP_RESUME_AFTER_MS  100     /* a node mid-way this long goes to the worker to finish */
#define RP_TO_LOCK          (-1)    /* confirm: not over yet, its lock is tested from now on */

static int64_t now_ns(void) { return (int64_t)rp_now_ns(); }
static int64_t ms_ns(int64_t ms) { return ms * 1000000; }

/* Is that life of the node over as the kernel says (its lock released, or the record moved on)? */
static bool life_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    /* 0: the kernel let the life's lock go (or the record moved on); -ORBIT_ETIMEDOUT: it lives. */
    return orbit_fleet_wait_node_death(f, node, incarnation, 0) == 0;
}

/*
 * One node record, read consistently (false while it keeps changing). Any
 * other failure is the fleet's fault: rf->fault says which, and the re-read
 * puts it in quarantine.
 */
static bool read_record(struct rp_fleet *rf, uint16_t node, struct rp_snap *s)
{
    struct orbit_node_snapshot ns;
    int rc = orbit_fleet_node_snapshot(rf->f, node, &ns);
    if (rc != 0 && rc != -ORBIT_EAGAIN && !rf->fault)
        rf->fault = rc;
    if (rc != 0)
        return false;
    *s = (struct rp_snap){ .state = ns.state, .pid = ns.pid, .start_time = ns.start_time,
                           .incarnation = ns.incarnation, .joins = ns.joins, .pidns = ns.pid_namespace };
    return true;
}

/*
 * Is that life's death with the fleet's worker already? Asked of the life
 * handed off, never of the watch's: the worker frees the node before the
 * event loop hears of it, so a re-read may watch the node's next life first.
 */
static bool reporting(const struct rp_watch *w, const struct rp_snap *s)
{
    return w->reporting && rp_same_life(&w->reported, s);
}

static bool quarantined(const struct rp_fleet *rf)
{
    return atomic_load(&rf->quarantine) != RP_Q_NONE;
}

static int interval_ms(const struct rp_fleet *rf)
{
    return atomic_load(&rf->hub->interval_ms);
}

static void push_exit(struct rp_fleet *rf, const struct rp_exit *e)
{
    if (rf->n_queue == rf->cap_queue) {
        size_t cap = rf->cap_queue ? rf->cap_queue * 2 : 16;
        struct rp_exit *q = realloc(rf->queue, cap * sizeof *q);
        if (!q)
            return;   /* found again by the next re-read */
        rf->queue = q;
        rf->cap_queue = cap;
    }
    rf->queue[rf->n_queue++] = *e;
}

static void queue_found_dead(struct rp_fleet *rf, uint16_t node, const struct rp_snap *s)
{
    struct rp_exit e = { .kind = RP_FOUND_DEAD, .fleet_id = rf->id, .node = node, .seen = *s,
                         .status = -1, .detected_ns = rp_now_ns() };
    push_exit(rf, &e);
}

/* A backend's exit event that came before the kernel let the lock go, once the lock is gone. */
static void queue_hinted_exit(struct rp_fleet *rf, uint16_t node, const struct rp_watch *w)
{
    struct rp_exit e = { .kind = RP_EXIT_NODE, .fleet_id = rf->id, .node = node, .seen = w->seen,
                         .status = w->hint_status, .exit_ns = w->hint_exit_ns, .detected_ns = rp_now_ns() };
    push_exit(rf, &e);
}

/* ---- the inbox (both sides) ---------------------------------------------------- */

void rp_fleet_post(struct rp_fleet *rf, const struct rp_msg *m)
{
    pthread_mutex_lock(&rf->mu);
    if (rf->n_inbox == rf->cap_inbox) {
        size_t cap = rf->cap_inbox ? rf->cap_inbox * 2 : 16;
        struct rp_msg *v = realloc(rf->inbox, cap * sizeof *v);
        if (v) {
            rf->inbox = v;
            rf->cap_inbox = cap;
        }
    }
    if (rf->n_inbox < rf->cap_inbox)
        rf->inbox[rf->n_inbox++] = *m;
    else
        rf->pokes |= RP_POKE_KICK;   /* out of memory: a re-read finds what the message said */
    pthread_cond_broadcast(&rf->cond);
    pthread_mutex_unlock(&rf->mu);
}

void rp_fleet_poke(struct rp_fleet *rf, unsigned what)
{
    pthread_mutex_lock(&rf->mu);
    rf->pokes |= what;
    pthread_cond_broadcast(&rf->cond);
    pthread_mutex_unlock(&rf->mu);
}

/* ---- the budget's side of a fleet ----------------------------------------------- */

static uid_t owner_of(const struct rp_fleet *rf)
{
    int64_t o = atomic_load(&rf->owner);
    return o < 0 ? (uid_t)0 : (uid_t)o;
}

/* Quarantine notice for the callback (released: it fits again). */
static void notice(struct rp_fleet *rf, enum rp_quarantine why, bool released, int64_t bound, int64_t wanted,
                   int error, const char *detail)
{
    struct rp_notice n = { .q = {
        .reason = (enum orbit_reaper_quarantine_reason)why, .released = released,
        .owner = atomic_load(&rf->owner), .wanted = (uint64_t)(wanted < 0 ? 0 : wanted),
        .bound = (uint64_t)(bound < 0 ? 0 : bound), .error = error,
    } };
    snprintf(n.fleet, sizeof n.fleet, "%s", rf->name);
    snprintf(n.detail, sizeof n.detail, "%s", detail);
    rp_notice_post(&rf->hub->reports, &n);
}

static void detach(struct rp_fleet *rf);

/*
 * Put the fleet in quarantine (once: a fleet already there stays with its
 * first reason). It is detached and, unless it could not be read at all,
 * attached again at once without its watches and table handles.
 */
static void quarantine(struct rp_fleet *rf, enum rp_quarantine why, int64_t bound, int64_t wanted, int error,
                       const char *detail)
{
    struct rp_hub *h = rf->hub;
    int none = RP_Q_NONE;
    if (!atomic_compare_exchange_strong(&rf->quarantine, &none, (int)why))
        return;
    atomic_fetch_add(&h->counts.quarantines, 1);
    atomic_fetch_add(&h->counts.quarantined, 1);
    rf->fault = error;
    notice(rf, why, false, bound, wanted, error, detail);
    detach(rf);
    rf->next_attach_ns = why == RP_Q_FAULT ? rf->next_attach_ns : 0;
    rf->next_review_ns = now_ns() + ms_ns(RP_REVIEW_MS);
}

static void release(struct rp_fleet *rf, const char *detail)
{
    int was = atomic_exchange(&rf->quarantine, RP_Q_NONE);
    if (was == RP_Q_NONE)
        return;
    atomic_fetch_sub(&rf->hub->counts.quarantined, 1);
    notice(rf, (enum rp_quarantine)was, true, 0, 0, 0, detail);
}

static void budget_refused(struct rp_fleet *rf, int why, int64_t bound, int64_t wanted, const char *what)
{
    char detail[160];
    snprintf(detail, sizeof detail, "%s would hold %lld %s; the bound is %lld", what, (long long)wanted,
             why == RP_Q_MAPPED ? "bytes mapped" : why == RP_Q_THREADS ? "threads" : "descriptors",
             (long long)bound);
    quarantine(rf, (enum rp_quarantine)why, bound, wanted, 0, detail);
}

/* One more descriptor for a watch: false (and quarantined) when a bound refuses it. */
static bool take_fd(struct rp_fleet *rf)
{
    struct rp_cost one = { .fds = 1 };
    int64_t bound, wanted;
    int why = rp_budget_take(&rf->hub->budget, &rf->held, owner_of(rf), &one, &bound, &wanted);
    if (why)
        budget_refused(rf, why, bound, wanted, "a pidfd for every member seen");
    return why == 0;
}

static void give_fd(struct rp_fleet *rf)
{
    struct rp_cost one = { .fds = 1 };
    rp_budget_give(&rf->hub->budget, &rf->held, owner_of(rf), &one);
}

/* ---- watching one member ------------------------------------------------- */

static void watched_via(struct rp_fleet *rf, struct rp_watch *w, enum rp_via via)
{
    w->watched = true;
    w->via = via;
    atomic_fetch_add(&rf->watched, 1);
    atomic_fetch_add(&rf->hub->counts.watched, 1);
}

static void unwatch(struct rp_fleet *rf, uint16_t node)
{
    struct rp_hub *h = rf->hub;
    struct rp_watch *w = &rf->nodes[node];
    if (!w->watched)
        return;
    w->watched = false;
    atomic_fetch_sub(&rf->watched, 1);
    atomic_fetch_sub(&h->counts.watched, 1);
    if (w->via == RP_VIA_PIDFD) {
        h->ops->unwatch(h->be, rp_member_key(rf->id, node));
        give_fd(rf);
    }
    if (w->via == RP_VIA_BPF)
        rp_tgid_unwatch(&h->tgids, rf->id, w->seen.pid);
    w->via = RP_VIA_NONE;
}

/* By its life's lock, tested by this thread (no thread, descriptor or mapping of its own). */
static void watch_lock(struct rp_fleet *rf, uint16_t node)
{
    struct rp_watch *w = &rf->nodes[node];
    if (life_over(rf->f, node, w->seen.incarnation)) {
        if (w->hinted)
            queue_hinted_exit(rf, node, w);   /* over by now: the backend's event, handed on */
        else
            queue_found_dead(rf, node, &w->seen);
        return;
    }
    if (!w->watched)
        watched_via(rf, w, RP_VIA_LOCK);
}

/* The kernel filter is armed before the probe, so an exit in between is caught by one or the other. */
static bool watch_bpf(struct rp_fleet *rf, uint16_t node)
{
    struct rp_watch *w = &rf->nodes[node];
    if (rp_tgid_watch(&rf->hub->tgids, rf->id, w->seen.pid) < 0)
        return false;   /* the map is full: its lock is tested instead */
    watched_via(rf, w, RP_VIA_BPF);
    if (rp_member_alive(w->seen.pid, w->seen.start_time))
        return true;
    unwatch(rf, node);   /* not seen, or already exiting (the filter came too late) */
    return false;
}

/* A pidfd of its own (one descriptor of the budget), pinned to the recorded process or refused. */
static bool watch_pidfd(struct rp_fleet *rf, uint16_t node)
{
    struct rp_hub *h = rf->hub;
    struct rp_watch *w = &rf->nodes[node];
    if (!take_fd(rf))
        return false;   /* quarantined: nothing of this fleet is watched any more */
    if (h->ops->watch(h->be, rp_member_key(rf->id, node), w->seen.pid, w->seen.start_time) == 0) {
        watched_via(rf, w, RP_VIA_PIDFD);
        return true;
    }
    give_fd(rf);
    return false;
}

static bool visible(const struct rp_fleet *rf, const struct rp_snap *s)
{
    return rf->hub->pidns != 0 && s->pidns == rf->hub->pidns;
}

/*
 * Start watching a LIVE record. The backend only for a member of the
 * reaper's own pid namespace that /proc shows with the recorded start time;
 * every other one (and any the backend cannot take) by its lock.
 */
static void watch(struct rp_fleet *rf, uint16_t node, const struct rp_snap *s)
{
    struct rp_watch *w = &rf->nodes[node];
    w->seen = *s;
    w->via = RP_VIA_NONE;
    w->hinted = false;
    w->lockless_ns = 0;
    bool seen = visible(rf, s);
    if (seen && rf->hub->backend == ORBIT_REAPER_BPF && watch_bpf(rf, node))
        return;
    if (seen && rf->hub->backend == ORBIT_REAPER_PIDFD && (watch_pidfd(rf, node) || !rf->f))
        return;   /* watched, or the fleet was just quarantined */
    watch_lock(rf, node);
}

/* ---- reclaiming ----------------------------------------------------------- */

/* A report cut short (its reporter gone, or our own try deferred): the fleet's worker finishes it. */
static void resume_report(struct rp_fleet *rf, uint16_t node, const struct rp_snap *s)
{
    struct rp_job job = { .node = node, .seen = *s, .status = -1, .detected_ns = rp_now_ns() };
    rp_report(&rf->hub->reports, rf->worker, &job);   /* merged into the node's pending report, if any */
}

/*
 * A node mid-way (a joiner claiming it, a reporter ending its life): its mover
 * finishes in milliseconds, unless it died at it. Only a node found so, in the
 * same claim, for RP_RESUME_AFTER_MS goes to the worker to finish: a try for a
 * live mover would only wait for it, up to seconds, ahead of real deaths.
 */
static void midway(struct rp_fleet *rf, uint16_t node, const struct rp_snap *s, int64_t now)
{
    struct rp_watch *w = &rf->nodes[node];
    bool midway = s->state != ORBIT_NODE_FREE && s->state != ORBIT_NODE_LIVE;
    if (!midway || !w->midway_ns || w->midway_joins != s->joins) {
        w->midway_ns = midway ? now : 0;
        w->midway_joins = s->joins;
    } else if (now - w->midway_ns >= ms_ns(RP_RESUME_AFTER_MS)) {
        resume_report(rf, node, s);
    }
}

/* A confirmed death goes to the fleet's worker; the watch ends, and the life is not watched again. */
static int hand_off(struct rp_fleet *rf, uint16_t node, const struct rp_snap *s, const struct rp_exit *e)
{
    struct rp_job job = {
        .node = node, .account = rf->account && (atomic_load(&rf->hub->flags) & ORBIT_REAPER_ACCOUNT),
        .death = true, .seen = *s, .status = e->status, .exit_ns = e->exit_ns, .detected_ns = e->detected_ns,
        .source = e->kind == RP_FOUND_DEAD ? ORBIT_REAPER_FOUND_DEAD : ORBIT_REAPER_EXIT_EVENT,
    };
    if (rp_report(&rf->hub->reports, rf->worker, &job) < 0)
        return 0;   /* no thread or memory: the next re-read finds it dead again */
    struct rp_watch *w = &rf->nodes[node];
    unwatch(rf, node);
    w->reporting = true;
    w->reported = *s;
    return 1;
}

/* Is the node still held by exactly that life? Only then may it be ended. */
static bool still_held(struct rp_fleet *rf, uint16_t node, const struct rp_snap *seen, struct rp_snap *now)
{
    return rf->f && node < rf->capacity && read_record(rf, node, now) &&
           now->state == ORBIT_NODE_LIVE && rp_same_life(seen, now);
}

/*
 * Something says the life may be over: only the kernel's lock decides. Over,
 * and the record still that LIVE life when read after the lock (a member that
 * leaves frees its record before it lets the lock go; a joiner takes the lock
 * before it publishes LIVE): a death. Not over: a backend saw the exit before
 * the kernel let the lock go (the BPF tracepoint fires before the files are
 * closed), a pid that names someone else, or a stale event: its lock is
 * tested from here on (every RP_HINT_MS while the hint is fresh). Returns
 * deaths handed off (1), 0 for an event about no watched life, RP_TO_LOCK.
 */
static int confirm(struct rp_fleet *rf, uint16_t node, const struct rp_exit *e)
{
    struct rp_watch *w = &rf->nodes[node];
    struct rp_snap now;
    bool over = life_over(rf->f, node, e->seen.incarnation);
    if (!still_held(rf, node, &e->seen, &now) || reporting(w, &now))
        return 0;
    if (over)
        return hand_off(rf, node, &now, e);
    if (quarantined(rf))
        return RP_TO_LOCK;   /* every member's lock is tested on each re-read */
    if (e->kind != RP_FOUND_DEAD && e->exit_ns) {
        w->hinted = true;   /* the lock's report keeps what the backend saw */
        w->hint_status = e->status;
        w->hint_exit_ns = e->exit_ns;
    }
    if (w->watched && w->via != RP_VIA_LOCK)
        unwatch(rf, node);
    if (!w->watched) {
        w->seen = now;
        watch_lock(rf, node);
    }
    return RP_TO_LOCK;
}

/* A BPF report names (tgid, start time) of the reaper's namespace: every node of ours watched that way. */
static void handle_tgid(struct rp_fleet *rf, const struct rp_exit *e)
{
    int handled = 0;
    bool to_lock = false;
    for (uint32_t n = 0; rf->f && n < rf->capacity; n++) {
        struct rp_watch *w = &rf->nodes[n];
        if (!w->watched || w->via != RP_VIA_BPF || w->seen.pid != (int32_t)e->tgid ||
            w->seen.start_time != e->start_ticks)
            continue;
        struct rp_exit one = *e;
        one.kind = RP_EXIT_NODE;
        one.fleet_id = rf->id;
        one.node = (uint16_t)n;
        one.seen = w->seen;
        int rc = confirm(rf, (uint16_t)n, &one);
        handled += rc > 0 ? rc : 0;
        to_lock = to_lock || rc == RP_TO_LOCK;
    }
    if (!handled && !to_lock)
        atomic_fetch_add(&rf->hub->counts.ignored, 1);
}

/* Confirms the queued exits (handlers may queue more: a watch that finds its member dead). */
static void drain_queue(struct rp_fleet *rf)
{
    for (size_t i = 0; i < rf->n_queue && rf->f; i++) {
        struct rp_exit e = rf->queue[i];
        if (e.node >= rf->capacity)
            continue;
        int n = confirm(rf, e.node, &e);
        if (n == 0 && e.kind != RP_FOUND_DEAD)
            atomic_fetch_add(&rf->hub->counts.ignored, 1);   /* about no watched life */
    }
    rf->n_queue = 0;
}

/* ---- re-reading ------------------------------------------------------------ */

/* Members a fresh re-read would test by lock: lives of another pid namespace. Over the bound: quarantined. */
static bool lock_members_fit(struct rp_fleet *rf)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < rf->capacity; i++) {
        struct rp_snap s;
        if (read_record(rf, (uint16_t)i, &s) && s.state == ORBIT_NODE_LIVE && !visible(rf, &s))
            n++;
    }
    if (n <= RP_LOCK_MEMBERS_MAX)
        return true;
    char detail[160];
    snprintf(detail, sizeof detail, "%u members of other pid namespaces to test by lock; the bound is %u",
             n, RP_LOCK_MEMBERS_MAX);
    quarantine(rf, RP_Q_MEMBERS, RP_LOCK_MEMBERS_MAX, n, 0, detail);
    return false;
}

/*
 * Quarantine: every LIVE life whose lock is gone is a death to confirm;
 * nothing is watched. No more than RP_QUARANTINE_DEATHS with the worker at a
 * time: a fleet that makes lives die by the thousand gets its reports at the
 * worker's pace, and its backlog stays bounded.
 */
static void scan_quarantined(struct rp_fleet *rf)
{
    uint32_t found = 0;
    for (uint32_t n = 0; n < rf->capacity; n++)
        found += rf->nodes[n].reporting;
    for (uint32_t n = 0; rf->f && n < rf->capacity && found < RP_QUARANTINE_DEATHS; n++) {
        struct rp_snap s;
        if (!read_record(rf, (uint16_t)n, &s))
            continue;
        midway(rf, (uint16_t)n, &s, now_ns());
        if (s.state == ORBIT_NODE_LIVE && !reporting(&rf->nodes[n], &s) &&
                   life_over(rf->f, (uint16_t)n, s.incarnation)) {
            queue_found_dead(rf, (uint16_t)n, &s);
            found++;
        }
    }
}

/*
 * A watched life whose lock stays gone for RP_LOCKLESS_NS (its backend reports
 * within milliseconds) is a death to confirm, whatever the backend said or missed.
 */
static void backstop(struct rp_fleet *rf, uint16_t n, const struct rp_snap *s, int64_t now)
{
    struct rp_watch *w = &rf->nodes[n];
    bool lockless = life_over(rf->f, n, s->incarnation);
    if (lockless && w->lockless_ns && now - w->lockless_ns >= RP_LOCKLESS_NS)
        queue_found_dead(rf, n, s);
    w->lockless_ns = lockless ? (w->lockless_ns ? w->lockless_ns : now) : 0;
}

/* Bring the fleet's watches in step with its node table. */
static void scan_watched(struct rp_fleet *rf, bool with_backstop)
{
    if (!lock_members_fit(rf))
        return;
    int64_t now = now_ns();
    for (uint32_t n = 0; rf->f && n < rf->capacity; n++) {
        struct rp_watch *w = &rf->nodes[n];
        struct rp_snap s;
        if (!read_record(rf, (uint16_t)n, &s))
            continue;   /* changing under us: next time */
        midway(rf, (uint16_t)n, &s, now);   /* the worker finishes a step whoever was at it left */
        bool live = s.state == ORBIT_NODE_LIVE;
        if (w->watched && (!live || !rp_same_life(&w->seen, &s)))
            unwatch(rf, (uint16_t)n);
        if (live && !w->watched && !reporting(w, &s))
            watch(rf, (uint16_t)n, &s);
        if (rf->f && with_backstop && live && w->watched && w->via != RP_VIA_LOCK && !reporting(w, &s))
            backstop(rf, (uint16_t)n, &s, now);
    }
}

/* The members tested by lock: every one whose lock is gone is a death to confirm. */
static void poll_locks(struct rp_fleet *rf)
{
    for (uint32_t n = 0; rf->f && n < rf->capacity; n++) {
        struct rp_watch *w = &rf->nodes[n];
        if (!w->watched || w->via != RP_VIA_LOCK || !life_over(rf->f, (uint16_t)n, w->seen.incarnation))
            continue;
        if (w->hinted)
            queue_hinted_exit(rf, (uint16_t)n, w);
        else
            queue_found_dead(rf, (uint16_t)n, &w->seen);
    }
}

/* When the members tested by lock are looked at next: soon while a backend's exit is fresh. */
static int64_t next_poll(struct rp_fleet *rf)
{
    bool any = false, fresh = false;
    int64_t now = now_ns();
    for (uint32_t n = 0; n < rf->capacity; n++) {
        const struct rp_watch *w = &rf->nodes[n];
        if (!w->watched || w->via != RP_VIA_LOCK)
            continue;
        any = true;
        fresh = fresh || (w->hinted && now - (int64_t)w->hint_exit_ns < RP_HINT_FOR_NS);
    }
    if (!any)
        return INT64_MAX;
    int64_t period = ms_ns(fresh ? RP_HINT_MS : interval_ms(rf) < RP_LOCK_MS ? interval_ms(rf) : RP_LOCK_MS);
    int64_t cost = RP_PACE * (int64_t)rf->poll_cost_ns;   /* a slow lock list: this thread paces itself */
    return rf->last_poll_ns + (period > cost ? period : cost);
}

/* ---- attaching --------------------------------------------------------------- */

struct rp_layout {
    uid_t owner;
    int64_t seg_bytes;          /* the fleet segment */
    int64_t tables, table_bytes;
    bool found;
};

/* The fleet's segments as listed (no mapping): the fleet segment's owner and size, its tables. */
static struct rp_layout layout(struct rp_fleet *rf, struct orbit_fleet *f)
{
    struct rp_layout l = { 0 };
    if (!rf->segs)   /* once per fleet, kept: a quarantined fleet's reviews allocate nothing */
        rf->segs = calloc(RP_SEGMENTS_MAX, sizeof *rf->segs);
    struct orbit_segment_info *v = rf->segs;
    ssize_t n = v ? orbit_fleet_segments(rf->name, v, RP_SEGMENTS_MAX) : 0;
    enum orbit_backing b = orbit_fleet_backing(f);
    for (ssize_t i = 0; i < n && i < RP_SEGMENTS_MAX; i++) {
        struct stat st;
        if (v[i].kind != 255) {
            l.tables++;
            l.table_bytes += (int64_t)v[i].size;
        } else if (v[i].backing == b && !l.found && stat(v[i].path, &st) == 0) {
            l.owner = st.st_uid;
            l.seg_bytes = (int64_t)st.st_size;
            l.found = true;
        }
    }
    return l;
}

static void post_attach(struct rp_fleet *rf, int rc)
{
    pthread_mutex_lock(&rf->mu);
    rf->tried = true;
    rf->attach_rc = rc;
    pthread_cond_broadcast(&rf->cond);
    pthread_mutex_unlock(&rf->mu);
}

enum rp_attach { RP_ATTACHED, RP_NOT_YET, RP_GONE, RP_PARKED };

/* A fault: the next attach after a backoff that doubles from 1 s to RP_ATTACH_BACKOFF_MAX_MS. */
static void back_off(struct rp_fleet *rf)
{
    uint32_t b = rf->attach_backoff_ms ? rf->attach_backoff_ms * 2 : 1000;
    rf->attach_backoff_ms = b > RP_ATTACH_BACKOFF_MAX_MS ? RP_ATTACH_BACKOFF_MAX_MS : b;
    rf->next_attach_ns = now_ns() + ms_ns(rf->attach_backoff_ms);
}

/* Could not open it: absent (from watch_all: gone; named: attached when it appears), being created,
 * of other layouts, a fault. */
static enum rp_attach attach_failed(struct rp_fleet *rf, int rc)
{
    int64_t now = now_ns();
    if (rc == -ENOENT) {
        rf->next_attach_ns = now + ms_ns(interval_ms(rf));
        return atomic_load(&rf->from_all) ? RP_GONE : RP_NOT_YET;
    }
    if (rc == -ORBIT_EGEOMETRY) {
        /* A generation of other layouts: a reaper of its release watches it, not a fault of it. */
        rf->next_attach_ns = now + ms_ns(RP_ATTACH_BACKOFF_MAX_MS);
        return RP_NOT_YET;
    }
    if (rc == -ORBIT_EAGAIN && !rf->busy_since_ns)
        rf->busy_since_ns = now;
    if (rc != -ORBIT_EAGAIN || now - rf->busy_since_ns >= RP_BUSY_FAULT_NS) {
        char detail[160];
        snprintf(detail, sizeof detail, "%s: %s", rc == -ORBIT_EAGAIN ? "still being created after 1 s" :
                 "cannot be opened", orbit_strerror(rc));
        quarantine(rf, RP_Q_FAULT, 0, 0, rc, detail);
        back_off(rf);
    } else {
        rf->next_attach_ns = now + ms_ns(interval_ms(rf) < 100 ? interval_ms(rf) : 100);
    }
    return RP_NOT_YET;
}

/* The fleet's base cost: its handle, and its table handles when its reports count what they free. */
static int take_base(struct rp_fleet *rf, uint16_t capacity, const struct rp_layout *l)
{
    int64_t bound = 0, wanted = 0;
    int64_t seg_bound = (int64_t)capacity * RP_SEG_NODE_BYTES + RP_SEG_FIXED_BYTES;
    if (l->seg_bytes > seg_bound) {
        char detail[160];
        snprintf(detail, sizeof detail, "its fleet segment maps %lld bytes; %u nodes need at most %lld",
                 (long long)l->seg_bytes, (unsigned)capacity, (long long)seg_bound);
        quarantine(rf, RP_Q_MAPPED, seg_bound, l->seg_bytes, 0, detail);
    }
    bool account = !quarantined(rf) && (atomic_load(&rf->hub->flags) & ORBIT_REAPER_ACCOUNT);
    struct rp_cost c = { .fds = RP_BASE_FDS + (account ? l->tables : 0), .threads = RP_BASE_THREADS,
                         .bytes = l->seg_bytes + (account ? l->table_bytes : 0) };
    int why = rp_budget_take(&rf->hub->budget, &rf->held, l->owner, &c, &bound, &wanted);
    if (why && account) {
        budget_refused(rf, why, bound, wanted, "its handle and its table handles");
        c = (struct rp_cost){ .fds = RP_BASE_FDS, .threads = RP_BASE_THREADS, .bytes = l->seg_bytes };
        account = false;
        why = rp_budget_take(&rf->hub->budget, &rf->held, l->owner, &c, &bound, &wanted);
    }
    if (why) {
        budget_refused(rf, why, bound, wanted, "its handle");
        return why;
    }
    rf->base = c;
    rf->account = account;
    return 0;
}

/* Open the fleet (never waiting for a segment being created), take its base cost, start its worker. */
static enum rp_attach attach(struct rp_fleet *rf)
{
    struct orbit_observe_opts o = ORBIT_OBSERVE_OPTS_DEFAULT;
    o.ready_wait_ms = 0;   /* a segment still being created is not waited for: looked at again */
    struct orbit_fleet *f;
    int rc = orbit_fleet_observe_opts(rf->name, &o, &f);
    post_attach(rf, rc);
    if (rc < 0)
        return attach_failed(rf, rc);
    rf->busy_since_ns = 0;
    uint16_t capacity = orbit_fleet_capacity(f);
    struct rp_layout l = layout(rf, f);
    atomic_store(&rf->owner, (int64_t)l.owner);
    rc = take_base(rf, capacity, &l);   /* rf->f is not set yet: a quarantine here detaches nothing */
    struct rp_watch *nodes = rc == 0 ? calloc(capacity, sizeof *nodes) : NULL;
    rf->f = f;
    rf->capacity = capacity;
    rf->nodes = nodes;
    rf->worker = nodes ? rp_worker_new(&rf->hub->reports, f, rf->id, rf->name, quarantined(rf)) : NULL;
    if (rf->worker) {
        atomic_store(&rf->attached, true);
        atomic_fetch_add(&rf->hub->counts.fleets, 1);
        rf->next_scan_ns = rf->next_backstop_ns = 0;
        rf->last_poll_ns = 0;
        return RP_ATTACHED;
    }
    free(nodes);
    rf->nodes = NULL;
    rf->f = NULL;
    rf->capacity = 0;
    orbit_fleet_leave(f);
    if (rc == 0)
        rp_budget_give(&rf->hub->budget, &rf->held, l.owner, &rf->base);
    rf->base = (struct rp_cost){ 0 };
    return RP_PARKED;   /* no room (or memory): the event loop starts it again later */
}

static void detach(struct rp_fleet *rf)
{
    if (!rf->f)
        return;
    for (uint32_t n = 0; rf->nodes && n < rf->capacity; n++)
        unwatch(rf, (uint16_t)n);
    free(rf->nodes);
    rf->nodes = NULL;
    rf->n_queue = 0;
    rp_worker_end(&rf->hub->reports, rf->worker);   /* it leaves the fleet handle after its try under way */
    rf->worker = NULL;
    rp_budget_give(&rf->hub->budget, &rf->held, owner_of(rf), &rf->base);
    rf->base = (struct rp_cost){ 0 };
    rf->f = NULL;
    rf->capacity = 0;
    atomic_store(&rf->attached, false);
    atomic_fetch_sub(&rf->hub->counts.fleets, 1);
}

/* A quarantined fleet that fits again (members, descriptors, bytes) is watched as before. */
static void review(struct rp_fleet *rf)
{
    rf->next_review_ns = now_ns() + ms_ns(RP_REVIEW_MS);
    int why = atomic_load(&rf->quarantine);
    if (why == RP_Q_FAULT || !rf->f)
        return;   /* a fault ends with the next attach that reads it */
    uint32_t lock = 0, pidfds = 0;
    for (uint32_t i = 0; i < rf->capacity; i++) {
        struct rp_snap s;
        if (!read_record(rf, (uint16_t)i, &s) || s.state != ORBIT_NODE_LIVE)
            continue;
        lock += !visible(rf, &s);
        pidfds += visible(rf, &s) && rf->hub->backend == ORBIT_REAPER_PIDFD;
    }
    struct rp_layout l = layout(rf, rf->f);
    int64_t seg_bound = (int64_t)rf->capacity * RP_SEG_NODE_BYTES + RP_SEG_FIXED_BYTES;
    bool account = atomic_load(&rf->hub->flags) & ORBIT_REAPER_ACCOUNT;
    /* What it would hold besides what it holds now, tried and given back. */
    struct rp_cost more = { .fds = (account ? l.tables : 0) + pidfds, .bytes = account ? l.table_bytes : 0 };
    int64_t bound, wanted;
    if (lock > RP_LOCK_MEMBERS_MAX || l.seg_bytes > seg_bound ||
        rp_budget_take(&rf->hub->budget, &rf->held, l.owner, &more, &bound, &wanted) != 0)
        return;
    rp_budget_give(&rf->hub->budget, &rf->held, l.owner, &more);
    release(rf, "it fits its bounds again");
    detach(rf);
    rf->next_attach_ns = 0;   /* attached again at once, with its watches */
}

/* ---- the thread ----------------------------------------------------------------- */

struct rp_work { unsigned pokes; struct rp_msg *msgs; size_t n; };

/* Take the inbox (its messages stay valid until the next take); wait until it has something or until due. */
static struct rp_work take_work(struct rp_fleet *rf, int64_t due)
{
    struct rp_work w = { 0 };
    pthread_mutex_lock(&rf->mu);
    while (!rf->pokes && rf->n_inbox == 0 && now_ns() < due) {
        if (due == INT64_MAX) {
            pthread_cond_wait(&rf->cond, &rf->mu);
        } else {
            struct timespec until = { .tv_sec = (time_t)(due / 1000000000), .tv_nsec = (long)(due % 1000000000) };
            pthread_cond_timedwait(&rf->cond, &rf->mu, &until);
        }
    }
    w = (struct rp_work){ rf->pokes, rf->inbox, rf->n_inbox };
    rf->pokes &= RP_POKE_STOP;   /* a stop stays asked for */
    /* Swapped, not freed: in steady state this thread allocates nothing (a process that forks
     * while one of its threads is in the allocator can leave the child a lock nobody holds). */
    struct rp_msg *spare = rf->taken;
    size_t cap = rf->cap_taken;
    rf->taken = rf->inbox;
    rf->cap_taken = rf->cap_inbox;
    rf->inbox = spare;
    rf->cap_inbox = cap;
    rf->n_inbox = 0;
    pthread_mutex_unlock(&rf->mu);
    return w;
}

/* Its pidfd said the member exited: queue the exit, end the watch (a readable pidfd stays readable). */
static void pidfd_fired(struct rp_fleet *rf, uint16_t node, const struct rp_exit *fired)
{
    struct rp_watch *w = &rf->nodes[node];
    /* The event may predate a re-watch: act on it only for the process watched now. */
    if (!w->watched || w->via != RP_VIA_PIDFD || w->seen.pid != (int32_t)fired->tgid ||
        w->seen.start_time != fired->start_ticks)
        return;
    struct rp_exit e = { .kind = RP_EXIT_NODE, .fleet_id = rf->id, .node = node, .seen = w->seen,
                         .status = fired->status, .exit_ns = fired->exit_ns, .detected_ns = rp_now_ns() };
    push_exit(rf, &e);
    unwatch(rf, node);
}

static void handle_msg(struct rp_fleet *rf, const struct rp_msg *m)
{
    if (!rf->f || (m->kind != RP_MSG_TGID && m->node >= rf->capacity))
        return;
    if (m->kind == RP_MSG_PIDFD) {
        pidfd_fired(rf, m->node, &m->exit);
    } else if (m->kind == RP_MSG_TGID) {
        handle_tgid(rf, &m->exit);
    } else if (reporting(&rf->nodes[m->node], &m->life)) {
        rf->nodes[m->node].reporting = false;   /* the node is freed: its next life is watched */
        rf->next_scan_ns = 0;
    }
}

/* Events were lost: every BPF-watched member is probed once. */
static void sweep(struct rp_fleet *rf)
{
    for (uint32_t n = 0; rf->f && n < rf->capacity; n++) {
        struct rp_watch *w = &rf->nodes[n];
        if (w->watched && w->via == RP_VIA_BPF && !rp_member_alive(w->seen.pid, w->seen.start_time))
            queue_found_dead(rf, (uint16_t)n, &w->seen);
    }
}

/* A re-read: the watches in step with the node table (or, in quarantine, every lock tested). */
/*
 * The re-read proper. A fleet found replaced, unreadable, or readable again
 * after a fault is detached (and attached again at its time): nothing more
 * to pace then.
 */
static void rescan(struct rp_fleet *rf, int64_t now)
{
    if (rf->f && orbit_fleet_replaced(rf->f) == 1) {
        detach(rf);   /* removed, or made anew: attached again (a new fleet, a fresh look) */
        rf->next_attach_ns = 0;
        return;
    }
    bool with_backstop = now >= rf->next_backstop_ns;
    rf->fault = 0;
    if (quarantined(rf))
        scan_quarantined(rf);
    else
        scan_watched(rf, with_backstop);
    if (rf->f && rf->fault) {
        char detail[160];
        snprintf(detail, sizeof detail, "its node records cannot be read: %s", orbit_strerror(rf->fault));
        int fault = rf->fault;
        quarantine(rf, RP_Q_FAULT, 0, 0, fault, detail);
        detach(rf);   /* in quarantine already for another reason: read again from the start */
        back_off(rf);
        return;
    }
    if (rf->f && atomic_load(&rf->quarantine) == RP_Q_FAULT) {
        release(rf, "it can be read again");
        rf->attach_backoff_ms = 0;
        detach(rf);   /* attached again at once, with its watches */
        rf->next_attach_ns = 0;
        return;
    }
    if (with_backstop)
        rf->next_backstop_ns = now + ms_ns(RP_BACKSTOP_MS);
    int64_t cost = now_ns() - now;
    int64_t period = ms_ns(quarantined(rf) && interval_ms(rf) < RP_QUARANTINE_SCAN_MS ? RP_QUARANTINE_SCAN_MS
                                                                                         : interval_ms(rf));
    cost *= quarantined(rf) ? RP_PACE_QUARANTINE : RP_PACE;
    rf->scan_floor_ns = now + cost;   /* a slow node table or lock list: this thread paces itself */
    rf->next_scan_ns = now + (period > cost ? period : cost);
}

/* A re-read, counted begun and finished: orbit_reaper_rescan waits for one begun after its kick. */
static void scan(struct rp_fleet *rf, int64_t now)
{
    pthread_mutex_lock(&rf->mu);
    rf->scans_begun++;
    pthread_mutex_unlock(&rf->mu);
    rescan(rf, now);
    pthread_mutex_lock(&rf->mu);
    rf->scans++;
    pthread_cond_broadcast(&rf->cond);
    pthread_mutex_unlock(&rf->mu);
}

static int64_t earliest(int64_t a, int64_t b) { return a < b ? a : b; }

/* One turn of the loop, attached. Returns when it wants to run next. */
static int64_t turn(struct rp_fleet *rf, const struct rp_work *w)
{
    int64_t now = now_ns();
    if (w->pokes & RP_POKE_KICK)   /* a re-read asked for: as soon as its pace allows */
        rf->next_scan_ns = earliest(rf->next_scan_ns, rf->scan_floor_ns);
    /* The re-read first, as orbit_reaper_process does on entry: a member that left is not watched
     * by the time its exit is looked at. */
    if (rf->f && now >= rf->next_scan_ns)
        scan(rf, now);
    for (size_t i = 0; i < w->n && rf->f; i++)
        handle_msg(rf, &w->msgs[i]);
    if ((w->pokes & RP_POKE_SWEEP) && rf->f)
        sweep(rf);
    if (rf->f && !quarantined(rf) && now >= next_poll(rf)) {
        poll_locks(rf);
        rf->last_poll_ns = now;
        rf->poll_cost_ns = (uint32_t)(now_ns() - now);
    }
    drain_queue(rf);
    if (rf->f && quarantined(rf) && now_ns() >= rf->next_review_ns)
        review(rf);
    if (!rf->f)
        return rf->next_attach_ns;
    int64_t due = earliest(rf->next_scan_ns, quarantined(rf) ? rf->next_review_ns : next_poll(rf));
    return due;
}

static void *fleet_main(void *arg)
{
    struct rp_fleet *rf = arg;
    int64_t due = 0;
    enum rp_attach end = RP_NOT_YET;
    bool stopped = false;
    while (end != RP_GONE && end != RP_PARKED) {
        struct rp_work w = take_work(rf, due);
        if ((stopped = w.pokes & RP_POKE_STOP))
            break;
        if (!rf->f && ((w.pokes & RP_POKE_KICK) || now_ns() >= rf->next_attach_ns))
            end = attach(rf);
        due = rf->f ? turn(rf, &w) : rf->next_attach_ns;
    }
    detach(rf);
    if (end == RP_GONE && !stopped)
        release(rf, "it is gone");   /* nothing is left to hold in quarantine */
    free(rf->queue);
    rf->queue = NULL;
    free(rf->segs);
    rf->segs = NULL;
    rf->n_queue = rf->cap_queue = 0;
    pthread_mutex_lock(&rf->mu);
    rf->ended = true;
    rf->gone = !stopped && end == RP_GONE;
    rf->parked = !stopped && end == RP_PARKED;
    pthread_cond_broadcast(&rf->cond);
    pthread_mutex_unlock(&rf->mu);
    return NULL;
}

int rp_fleet_start(struct rp_fleet *rf)
{
    rf->next_attach_ns = 0;
    return rp_thread_start(&rf->thread, fleet_main, rf);
}

void rp_fleet_join(struct rp_fleet *rf)
{
    pthread_join(rf->thread, NULL);
}
