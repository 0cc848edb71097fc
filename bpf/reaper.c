/* SPDX-License-Identifier: MIT */
/* liborbit-reaper: watched fleets, identity checks, handing deaths to the fleets' workers, the event loop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include "reaper_internal.h"

#define RP_INTERVAL_DEFAULT 100
#define RP_EPOLL_BATCH      64

/* ---- small helpers -------------------------------------------------------- */

uint64_t rp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *orbit_reaper_backend_name(enum orbit_reaper_backend b)
{
    switch (b) {
    case ORBIT_REAPER_AUTO:  return "auto";
    case ORBIT_REAPER_BPF:   return "bpf";
    case ORBIT_REAPER_PIDFD: return "pidfd";
    }
    return "unknown";
}

int rp_queue_push(struct orbit_reaper *r, const struct rp_exit *e)
{
    if (r->n_queue == r->cap_queue) {
        size_t cap = r->cap_queue ? r->cap_queue * 2 : 16;
        struct rp_exit *q = realloc(r->queue, cap * sizeof *q);
        if (!q)
            return -ENOMEM;
        r->queue = q;
        r->cap_queue = cap;
    }
    r->queue[r->n_queue++] = *e;
    return 0;
}

bool rp_life_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    /* 0: the kernel let the life's lock go (or the record moved on); -ORBIT_ETIMEDOUT: it lives. */
    return orbit_fleet_wait_node_death(f, node, incarnation, 0) == 0;
}

uint64_t rp_pidns_self(void)
{
    struct stat st;
    char self[32];
    ssize_t n = readlink("/proc/self", self, sizeof self - 1);
    if (n <= 0 || stat("/proc/self/ns/pid", &st) != 0)
        return 0;
    self[n] = 0;
    /* A /proc of another pid namespace names other processes by our pids: trust none of it. */
    return atoi(self) == (int)getpid() ? (uint64_t)st.st_ino : 0;
}

/* One node record, read consistently (false while it keeps changing). */
static bool read_record(struct orbit_fleet *f, uint16_t node, struct rp_snap *s)
{
    struct orbit_node_snapshot ns;
    if (orbit_fleet_node_snapshot(f, node, &ns) != 0)
        return false;
    *s = (struct rp_snap){ .state = ns.state, .pid = ns.pid, .start_time = ns.start_time,
                           .incarnation = ns.incarnation, .joins = ns.joins };
    return true;
}

static bool same_life(const struct rp_snap *a, const struct rp_snap *b)
{
    return a->pid == b->pid && a->start_time == b->start_time &&
           a->incarnation == b->incarnation && a->joins == b->joins;
}

/* ---- watching one member ------------------------------------------------- */

static bool tgid_watched(struct orbit_reaper *r, int32_t pid)
{
    for (size_t i = 0; i < r->n_fleets; i++) {
        struct rp_fleet *rf = r->fleets[i];
        for (uint32_t n = 0; rf->f && n < rf->capacity; n++)
            if (rf->nodes[n].watched && rf->nodes[n].via == RP_VIA_BPF && rf->nodes[n].seen.pid == pid)
                return true;
    }
    return false;
}

void rp_unwatch(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node)
{
    struct rp_watch *w = &rf->nodes[node];
    if (!w->watched)
        return;
    w->watched = false;
    r->stats.watched--;
    if (w->pidfd >= 0) {
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, w->pidfd, NULL);
        close(w->pidfd);
        w->pidfd = -1;
    }
    if (w->via == RP_VIA_BPF && !tgid_watched(r, w->seen.pid))
        rp_bpf_unwatch(r, w->seen.pid);
    if (w->via == RP_VIA_TOKEN)
        rp_token_cancel(r, rf, node, w);
    w->via = RP_VIA_NONE;
}

static void queue_found_dead(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node,
                             const struct rp_snap *s)
{
    struct rp_exit e = { .kind = RP_FOUND_DEAD, .fleet_id = rf->id, .node = node, .seen = *s,
                         .status = -1, .detected_ns = rp_now_ns() };
    rp_queue_push(r, &e);
}

/* A backend's exit event that came before the kernel let the lock go, once the lock is gone. */
static void queue_hinted_exit(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, const struct rp_watch *w)
{
    struct rp_exit e = { .kind = RP_EXIT_NODE, .fleet_id = rf->id, .node = node, .seen = w->seen,
                         .status = w->hint_status, .exit_ns = w->hint_exit_ns, .detected_ns = rp_now_ns() };
    rp_queue_push(r, &e);
}

void rp_watched_via(struct orbit_reaper *r, struct rp_watch *w, enum rp_via via)
{
    w->watched = true;
    w->via = via;
    r->stats.watched++;
}

/*
 * Watch through the token: the kernel-held lock of the life, from any pid
 * namespace. Over already: queued as found dead (the queue confirms it).
 * Without the token ring the lock is tested on each re-read instead.
 */
static void watch_token(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node)
{
    struct rp_watch *w = &rf->nodes[node];
    int rc = rp_token_arm(r, rf, node, w);
    if (rc == 0 && !w->watched)
        rp_watched_via(r, w, RP_VIA_TOKEN);
    else if (rc > 0 || rp_life_over(rf->f, node, w->seen.incarnation)) {
        if (w->hinted)
            queue_hinted_exit(r, rf, node, w);   /* over by now: the backend's event, handed on */
        else
            queue_found_dead(r, rf, node, &w->seen);
    } else if (!r->token && !w->watched) {
        rp_watched_via(r, w, RP_VIA_TOKEN);   /* no token ring (io_uring refused): tested on each re-read */
    }
}

/* The kernel filter is armed before the probe, so an exit in between is caught by one or the other. */
static bool watch_bpf(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node)
{
    struct rp_watch *w = &rf->nodes[node];
    if (rp_bpf_watch(r, w->seen.pid) < 0)
        return false;   /* the map is full: the token watches it */
    rp_watched_via(r, w, RP_VIA_BPF);
    if (rp_member_alive(w->seen.pid, w->seen.start_time))
        return true;
    rp_unwatch(r, rf, node);   /* not seen, or already exiting (the filter came too late) */
    return false;
}

/*
 * Start watching a LIVE record. The backend only for a member of the
 * reaper's own pid namespace that /proc shows with the recorded start time;
 * every other one (and any the backend cannot take) through the token.
 */
static void watch(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, const struct rp_snap *s,
                  uint64_t pidns)
{
    struct rp_watch *w = &rf->nodes[node];
    w->seen = *s;
    w->pidfd = -1;
    w->via = RP_VIA_NONE;
    w->hinted = false;
    w->lockless_ns = 0;
    bool visible = r->pidns != 0 && pidns == r->pidns;
    if (visible && r->backend == ORBIT_REAPER_BPF && watch_bpf(r, rf, node))
        return;
    if (visible && r->backend == ORBIT_REAPER_PIDFD && rp_pidfd_watch(r, rf, node))
        return;
    watch_token(r, rf, node);
}

/*
 * Is that life's death with the fleet's worker already? Asked of the life
 * handed off, never of the watch's: the worker frees the node before the
 * event loop hears of it, so a re-read may watch the node's next life first.
 */
static bool reporting(const struct rp_watch *w, const struct rp_snap *s)
{
    return w->reporting && same_life(&w->reported, s);
}

/* A report cut short (its reporter gone, or our own try deferred): the fleet's worker finishes it. */
static void resume_report(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, const struct rp_snap *s)
{
    struct rp_job job = { .node = node, .seen = *s, .status = -1, .detected_ns = rp_now_ns() };
    rp_report(r, rf, &job);   /* merged into the node's pending report, if any */
}

/* The member's pid namespace, read with the node list once per re-read that needs it. */
static uint64_t member_pidns(struct rp_fleet *rf, ssize_t *n_info, const struct rp_snap *s, uint16_t node)
{
    if (*n_info < 0)
        *n_info = orbit_fleet_nodes(rf->f, rf->info, rf->capacity);
    for (ssize_t i = 0; i < *n_info && i < rf->capacity; i++)
        if (rf->info[i].node == node)   /* the same incarnation: the namespace is that life's */
            return rf->info[i].incarnation == s->incarnation ? rf->info[i].pid_namespace : 0;
    return 0;
}

#define RP_LOCKLESS_NS (500 * 1000000LL)

/* Whether that life still holds its kernel lock, by the node list read once per re-read. */
static bool member_alive(struct rp_fleet *rf, ssize_t *n_info, const struct rp_snap *s, uint16_t node)
{
    if (*n_info < 0)
        *n_info = orbit_fleet_nodes(rf->f, rf->info, rf->capacity);
    for (ssize_t i = 0; i < *n_info && i < rf->capacity; i++)
        if (rf->info[i].node == node)
            return rf->info[i].incarnation != s->incarnation || rf->info[i].alive;
    return true;   /* not listed: no life of it to end */
}

/* Bring one fleet's watches in step with its node table. */
static void rescan_fleet(struct orbit_reaper *r, struct rp_fleet *rf)
{
    ssize_t n_info = -1;
    for (uint32_t n = 0; n < rf->capacity; n++) {
        struct rp_watch *w = &rf->nodes[n];
        struct rp_snap s;
        if (!read_record(rf->f, (uint16_t)n, &s))
            continue;   /* changing under us: next time */
        /* Mid-way (joining or being reported): the worker finishes it if whoever was at it is gone. */
        if (s.state != ORBIT_NODE_FREE && s.state != ORBIT_NODE_LIVE)
            resume_report(r, rf, (uint16_t)n, &s);
        bool live = s.state == ORBIT_NODE_LIVE;
        if (w->watched && (!live || !same_life(&w->seen, &s)))
            rp_unwatch(r, rf, (uint16_t)n);
        if (live && !w->watched && !reporting(w, &s))
            watch(r, rf, (uint16_t)n, &s, member_pidns(rf, &n_info, &s, (uint16_t)n));
        else if (live && w->watched && w->via == RP_VIA_TOKEN && !w->token_armed)
            watch_token(r, rf, (uint16_t)n);   /* an arming that failed, or a spurious wake */
        /* Whatever the backend said or missed, a watched life whose lock stays gone for
         * RP_LOCKLESS_NS (its backend reports within milliseconds) is a death to confirm. */
        bool lockless = live && w->watched && !reporting(w, &s) && !member_alive(rf, &n_info, &s, (uint16_t)n);
        int64_t now = lockless ? rp_now_ns() : 0;
        if (lockless && w->lockless_ns && now - w->lockless_ns >= RP_LOCKLESS_NS)
            queue_found_dead(r, rf, (uint16_t)n, &s);
        w->lockless_ns = lockless ? (w->lockless_ns ? w->lockless_ns : now) : 0;
    }
}

/* ---- fleets --------------------------------------------------------------- */

static void detach_fleet(struct orbit_reaper *r, struct rp_fleet *rf)
{
    if (!rf->f)
        return;
    for (uint32_t n = 0; n < rf->capacity; n++)
        rp_unwatch(r, rf, (uint16_t)n);
    free(rf->nodes);
    rf->nodes = NULL;
    free(rf->info);
    rf->info = NULL;
    rp_worker_detach(r, rf);   /* the worker leaves the fleet handle after its try under way */
    rf->f = NULL;
    rf->capacity = 0;
    r->stats.fleets--;
}

static int attach_fleet(struct orbit_reaper *r, struct rp_fleet *rf)
{
    struct orbit_fleet *f;
    int rc = orbit_fleet_observe(rf->name, &f);
    if (rc < 0)
        return rc;
    uint16_t capacity = orbit_fleet_capacity(f);
    rf->nodes = calloc(capacity, sizeof *rf->nodes);
    rf->info = calloc(capacity, sizeof *rf->info);
    if (!rf->nodes || !rf->info) {
        free(rf->nodes);
        free(rf->info);
        rf->nodes = NULL;
        rf->info = NULL;
        orbit_fleet_leave(f);
        return -ENOMEM;
    }
    for (uint32_t n = 0; n < capacity; n++)
        rf->nodes[n].pidfd = -1;
    rf->f = f;
    if ((rc = rp_worker_attach(r, rf)) < 0) {
        free(rf->nodes);
        free(rf->info);
        rf->nodes = NULL;
        rf->info = NULL;
        rf->f = NULL;
        orbit_fleet_leave(f);
        return rc;
    }
    rf->capacity = capacity;
    r->stats.fleets++;
    return 0;
}

/* Is the mapped fleet segment still the file under its name? */
static bool fleet_current(struct rp_fleet *rf)
{
    return orbit_fleet_replaced(rf->f) == 0;
}

static struct rp_fleet *find_fleet_name(struct orbit_reaper *r, const char *name)
{
    for (size_t i = 0; i < r->n_fleets; i++)
        if (strcmp(r->fleets[i]->name, name) == 0)
            return r->fleets[i];
    return NULL;
}

struct rp_fleet *rp_find_fleet_id(struct orbit_reaper *r, uint32_t id)
{
    for (size_t i = 0; i < r->n_fleets; i++)
        if (r->fleets[i]->id == id)
            return r->fleets[i];
    return NULL;
}

static int add_fleet(struct orbit_reaper *r, const char *name, bool from_all, struct rp_fleet **out)
{
    if (r->n_fleets == r->cap_fleets) {
        size_t cap = r->cap_fleets ? r->cap_fleets * 2 : 8;
        struct rp_fleet **v = realloc(r->fleets, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        r->fleets = v;
        r->cap_fleets = cap;
    }
    struct rp_fleet *rf = calloc(1, sizeof *rf);
    if (!rf)
        return -ENOMEM;
    rf->id = r->next_fleet_id++;
    snprintf(rf->name, sizeof rf->name, "%s", name);
    rf->from_all = from_all;
    r->fleets[r->n_fleets++] = rf;
    *out = rf;
    return 0;
}

static void remove_fleet(struct orbit_reaper *r, size_t i)
{
    detach_fleet(r, r->fleets[i]);
    free(r->fleets[i]);
    r->fleets[i] = r->fleets[--r->n_fleets];
}

/* Is listed "web@N", a later generation of a fleet watched by name ("web")? */
static bool generation_of_named(struct orbit_reaper *r, const char *listed)
{
    const char *at = strchr(listed, '@');
    for (size_t i = 0; at && i < r->n_fleets; i++)
        if (!r->fleets[i]->from_all && strlen(r->fleets[i]->name) == (size_t)(at - listed) &&
            strncmp(r->fleets[i]->name, listed, (size_t)(at - listed)) == 0)
            return true;
    return false;
}

/* Pick up fleets created since (watch_all), or the later generations of the fleets named. */
static void discover_fleets(struct orbit_reaper *r)
{
    char (*names)[ORBIT_FLEET_NAME_MAX + 1] = NULL;
    ssize_t n = orbit_fleet_list(NULL, 0);
    if (n <= 0 || !(names = calloc((size_t)n, sizeof *names)))
        return;
    ssize_t got = orbit_fleet_list(names, (size_t)n);
    for (ssize_t i = 0; i < got && i < n; i++) {
        struct rp_fleet *rf;
        if (!find_fleet_name(r, names[i]) && (r->all || generation_of_named(r, names[i])))
            add_fleet(r, names[i], true, &rf);   /* from_all: dropped when it is gone */
    }
    free(names);
}

/* Timer work: follow fleets that were removed, recreated or created. */
static void refresh_fleets(struct orbit_reaper *r)
{
    discover_fleets(r);
    for (size_t i = 0; i < r->n_fleets;) {
        struct rp_fleet *rf = r->fleets[i];
        if (rf->f && !fleet_current(rf))
            detach_fleet(r, rf);
        if (!rf->f && attach_fleet(r, rf) < 0 && rf->from_all) {
            remove_fleet(r, i);
            continue;
        }
        i++;
    }
}

static void rescan_all(struct orbit_reaper *r)
{
    r->stats.rescans++;
    for (size_t i = 0; i < r->n_fleets; i++)
        if (r->fleets[i]->f)
            rescan_fleet(r, r->fleets[i]);
}

/* ---- reclaiming ----------------------------------------------------------- */

/* A confirmed death goes to its fleet's worker; the watch ends, and the life is not watched again. */
static int hand_off(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node,
                    const struct rp_snap *s, const struct rp_exit *e)
{
    struct rp_job job = {
        .node = node, .death = true, .account = r->on_death && (r->flags & ORBIT_REAPER_ACCOUNT),
        .seen = *s, .status = e->status, .exit_ns = e->exit_ns, .detected_ns = e->detected_ns,
        .source = e->kind == RP_FOUND_DEAD ? ORBIT_REAPER_FOUND_DEAD : ORBIT_REAPER_EXIT_EVENT,
    };
    if (rp_report(r, rf, &job) < 0)
        return 0;   /* no thread or memory: the next re-read finds it dead again */
    struct rp_watch *w = &rf->nodes[node];
    rp_unwatch(r, rf, node);
    w->reporting = true;
    w->reported = *s;
    return 1;
}

/* Is the node still held by exactly that life? Only then may it be ended. */
static bool still_held(struct rp_fleet *rf, uint16_t node, const struct rp_snap *seen, struct rp_snap *now)
{
    return rf->f && node < rf->capacity && read_record(rf->f, node, now) &&
           now->state == ORBIT_NODE_LIVE && same_life(seen, now);
}

/*
 * Something says the life may be over: only the kernel's lock decides. Over,
 * and the record still that LIVE life when read after the lock (a member that
 * leaves frees its record before it lets the lock go; a joiner takes the lock
 * before it publishes LIVE): a death. Not over: a backend saw the exit before
 * the kernel let the lock go (the BPF tracepoint fires before the files are
 * closed), a pid that names someone else, or a spurious wake: the token
 * watches the life from here on. Returns deaths handed off (1), 0 for an
 * event about no watched life, RP_TO_TOKEN when the token took it over.
 */
#define RP_TO_TOKEN (-1)

static int confirm(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, const struct rp_exit *e)
{
    struct rp_watch *w = &rf->nodes[node];
    struct rp_snap now;
    bool over = rp_life_over(rf->f, node, e->seen.incarnation);
    if (!still_held(rf, node, &e->seen, &now) || reporting(w, &now))
        return 0;
    if (over)
        return hand_off(r, rf, node, &now, e);
    if (e->kind != RP_FOUND_DEAD && e->exit_ns) {
        w->hinted = true;   /* the token's report keeps what the backend saw */
        w->hint_status = e->status;
        w->hint_exit_ns = e->exit_ns;
    }
    if (w->watched && w->via != RP_VIA_TOKEN)
        rp_unwatch(r, rf, node);
    if (!w->watched)
        w->seen = now;
    if (!w->watched || !w->token_armed)
        watch_token(r, rf, node);
    return RP_TO_TOKEN;
}

/* A BPF report names (tgid, start time) of the reaper's namespace: every node it watches that way. */
static int handle_tgid(struct orbit_reaper *r, const struct rp_exit *e)
{
    int handled = 0;
    bool to_token = false;
    for (size_t i = 0; i < r->n_fleets; i++) {
        struct rp_fleet *rf = r->fleets[i];
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
            int rc = confirm(r, rf, (uint16_t)n, &one);
            handled += rc > 0 ? rc : 0;
            to_token = to_token || rc == RP_TO_TOKEN;
        }
    }
    return handled ? handled : to_token ? RP_TO_TOKEN : 0;
}

static int handle_exit(struct orbit_reaper *r, struct rp_exit *e)
{
    if (e->kind == RP_EXIT_TGID)
        return handle_tgid(r, e);
    struct rp_fleet *rf = rp_find_fleet_id(r, e->fleet_id);
    if (!rf || !rf->f || e->node >= rf->capacity)
        return 0;
    return confirm(r, rf, e->node, e);
}

/* Hands the queued deaths to their fleets' workers; returns how many. */
static int drain_queue(struct orbit_reaper *r)
{
    int handled = 0;
    /* Handlers may queue more (a watch that finds its member dead): loop by index. */
    for (size_t i = 0; i < r->n_queue; i++) {
        struct rp_exit e = r->queue[i];
        int n = handle_exit(r, &e);
        if (n == 0 && e.kind != RP_FOUND_DEAD)
            r->stats.ignored++;   /* about no watched life; one the token took over is not ignored */
        handled += n > 0 ? n : 0;
    }
    r->n_queue = 0;
    return handled;
}

/* ---- the workers' results ---------------------------------------------------- */

static void deliver_deferral(struct orbit_reaper *r, const struct rp_result *res)
{
    const struct rp_job *j = &res->job;
    struct orbit_reaper_deferral d = {
        .fleet = res->fleet, .node = j->node, .pid = j->seen.pid, .start_time = j->seen.start_time,
        .incarnation = j->seen.incarnation, .death = j->death, .error = res->error,
        .attempts = j->attempts, .retry_ms = j->backoff_ms, .detected_ns = j->detected_ns,
        .deferred_ns = res->at_ns,
    };
    if (r->on_deferral)
        r->on_deferral(r->deferral_ctx, &d);
}

/* A finished report; a death among them is counted and reported. Returns deaths handled. */
static int deliver_finished(struct orbit_reaper *r, const struct rp_result *res)
{
    const struct rp_job *j = &res->job;
    struct rp_fleet *rf = rp_find_fleet_id(r, res->fleet_id);
    if (rf && rf->f && j->node < rf->capacity && reporting(&rf->nodes[j->node], &j->seen))
        rf->nodes[j->node].reporting = false;   /* the node is freed: its next life is watched */
    if (!j->death)
        return 0;
    struct orbit_reaper_death d = {
        .fleet = res->fleet, .node = j->node, .pid = j->seen.pid, .start_time = j->seen.start_time,
        .incarnation = j->seen.incarnation, .status = j->status, .backend = r->backend,
        .source = j->source, .exit_ns = j->exit_ns, .detected_ns = j->detected_ns,
        .reclaimed_ns = res->at_ns, .accounted = j->accounted, .reclaimed = j->reclaimed,
        .attempts = j->attempts,
    };
    r->stats.deaths++;
    if (r->on_death)
        r->on_death(r->ctx, &d);
    return 1;
}

static int deliver_results(struct orbit_reaper *r)
{
    size_t n;
    struct rp_result *v = rp_results_take(r, &n);
    int handled = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].error)
            deliver_deferral(r, &v[i]);
        else
            handled += deliver_finished(r, &v[i]);
    }
    free(v);
    return handled;
}

/* ---- events --------------------------------------------------------------- */

/* The membership timer: follow fleets and members even inside one long process call. */
static void timer_event(struct orbit_reaper *r)
{
    uint64_t ticks;
    if (read(r->timerfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
        return;
    refresh_fleets(r);
    rescan_all(r);
}

/* Everything read from one epoll_wait; returns deaths handled. */
static int dispatch(struct orbit_reaper *r, struct epoll_event *evs, int n)
{
    bool swept = false;
    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag == RP_TAG_TIMER)
            timer_event(r);
        else if (tag == RP_TAG_RING)
            swept |= rp_bpf_consume(r);
        else if (tag == RP_TAG_TOKEN)
            rp_token_consume(r);
        else if (tag != RP_TAG_DONE)   /* results are taken below, whatever woke us */
            rp_pidfd_event(r, tag);
    }
    if (swept) {
        /* Events were lost: probe every watched member once. */
        for (size_t i = 0; i < r->n_fleets; i++)
            for (uint32_t k = 0; r->fleets[i]->f && k < r->fleets[i]->capacity; k++) {
                struct rp_watch *w = &r->fleets[i]->nodes[k];
                if (w->watched && w->via == RP_VIA_BPF && !rp_member_alive(w->seen.pid, w->seen.start_time))
                    queue_found_dead(r, r->fleets[i], (uint16_t)k, &w->seen);
            }
    }
    drain_queue(r);
    int handled = deliver_results(r);
    if (handled)
        rescan_all(r);   /* freed nodes leave the watched set at once */
    return handled;
}

static int remaining_ms(uint64_t deadline_ns, int timeout_ms)
{
    if (timeout_ms < 0)
        return -1;
    uint64_t now = rp_now_ns();
    if (now >= deadline_ns)
        return 0;
    return (int)((deadline_ns - now + 999999) / 1000000);
}

int orbit_reaper_process(struct orbit_reaper *r, int timeout_ms)
{
    if (!r || timeout_ms < -1)
        return -ORBIT_EMALFORMED;
    uint64_t deadline = rp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    pthread_mutex_lock(&r->lock);
    rescan_all(r);
    drain_queue(r);
    int handled = deliver_results(r);
    pthread_mutex_unlock(&r->lock);
    while (handled == 0) {
        struct epoll_event evs[RP_EPOLL_BATCH];
        int wait = remaining_ms(deadline, timeout_ms);
        int n = epoll_wait(r->epfd, evs, RP_EPOLL_BATCH, wait);
        if (n < 0)
            return errno == EINTR ? -EINTR : -errno;
        pthread_mutex_lock(&r->lock);
        handled = dispatch(r, evs, n);
        pthread_mutex_unlock(&r->lock);
        if (wait == 0)
            break;
    }
    return handled;
}

/* ---- the handle ----------------------------------------------------------- */

static int arm_timer(struct orbit_reaper *r)
{
    struct itimerspec its = {
        .it_interval = { r->interval_ms / 1000, (long)(r->interval_ms % 1000) * 1000000L },
    };
    its.it_value = its.it_interval;
    return timerfd_settime(r->timerfd, 0, &its, NULL) == 0 ? 0 : -errno;
}

static int open_fds(struct orbit_reaper *r)
{
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    r->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (r->epfd < 0 || r->timerfd < 0)
        return -errno;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = RP_TAG_TIMER };
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->timerfd, &ev) != 0)
        return -errno;
    return arm_timer(r);
}

static int pick_backend(struct orbit_reaper *r, enum orbit_reaper_backend want)
{
    if (want == ORBIT_REAPER_PIDFD) {
        r->backend = ORBIT_REAPER_PIDFD;
        return 0;
    }
    char why[96] = "";
    r->backend = ORBIT_REAPER_BPF;
    int rc = rp_bpf_open(r, why, sizeof why);
    if (rc == 0 || want == ORBIT_REAPER_BPF)
        return rc;
    r->backend = ORBIT_REAPER_PIDFD;
    snprintf(r->note, sizeof r->note, "BPF backend unavailable (%s): using pidfd", why);
    return 0;
}

/* Members the backend cannot see are watched through the token; without it, on each re-read. */
static void open_token(struct orbit_reaper *r)
{
    char why[384] = "";
    r->pidns = rp_pidns_self();
    if (rp_token_open(r, why, sizeof why) == 0)
        return;
    size_t used = strlen(r->note);
    snprintf(r->note + used, sizeof r->note - used, "%stoken ring unavailable (%s): members the backend "
             "cannot see are tested on each re-read", used ? "; " : "", why);
}

int orbit_reaper_open(enum orbit_reaper_backend backend, struct orbit_reaper **out)
{
    if (!out || backend > ORBIT_REAPER_PIDFD)
        return -ORBIT_EMALFORMED;
    struct orbit_reaper *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    pthread_mutex_init(&r->lock, NULL);
    r->interval_ms = RP_INTERVAL_DEFAULT;
    r->timerfd = -1;
    r->donefd = -1;
    int rc = open_fds(r);
    if (rc == 0)
        rc = rp_reports_open(r);
    if (rc == 0)
        rc = pick_backend(r, backend);
    if (rc == 0)
        open_token(r);
    if (rc < 0) {
        orbit_reaper_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void orbit_reaper_close(struct orbit_reaper *r)
{
    if (!r)
        return;
    while (r->n_fleets)
        remove_fleet(r, r->n_fleets - 1);
    rp_reports_close(r);   /* joins every worker: none is left running */
    rp_token_close(r);
    if (r->backend == ORBIT_REAPER_BPF)
        rp_bpf_close(r);
    if (r->timerfd >= 0)
        close(r->timerfd);
    if (r->epfd >= 0)
        close(r->epfd);
    free(r->fleets);
    free(r->queue);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

int orbit_reaper_watch(struct orbit_reaper *r, const char *fleet_name)
{
    if (!r || !fleet_name || orbit_fleet_generations(fleet_name, NULL, 0) < 0)
        return -ORBIT_EMALFORMED;   /* a fleet's name, or one generation's ("web@2") */
    pthread_mutex_lock(&r->lock);
    struct rp_fleet *rf = find_fleet_name(r, fleet_name);
    int rc = 0;
    if (rf)
        rf->from_all = false;   /* named explicitly: kept while it is missing */
    else
        rc = add_fleet(r, fleet_name, false, &rf);
    if (rc == 0 && !rf->f) {
        rc = attach_fleet(r, rf);
        if (rc == -ENOENT || (rc == -ORBIT_EGEOMETRY && !strchr(fleet_name, '@')))
            rc = 0;             /* attached when it appears; a generation of other layouts, never */
        else if (rc == 0)
            rescan_fleet(r, rf);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int orbit_reaper_watch_all(struct orbit_reaper *r)
{
    if (!r)
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    r->all = true;
    refresh_fleets(r);
    rescan_all(r);
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int orbit_reaper_fd(struct orbit_reaper *r)
{
    return r ? r->epfd : -ORBIT_EMALFORMED;
}

enum orbit_reaper_backend orbit_reaper_backend(struct orbit_reaper *r)
{
    return r ? r->backend : ORBIT_REAPER_AUTO;
}

const char *orbit_reaper_note(struct orbit_reaper *r)
{
    return r ? r->note : "";
}

int orbit_reaper_set_interval(struct orbit_reaper *r, int interval_ms)
{
    if (!r || interval_ms < 1 || interval_ms > 60000)
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    r->interval_ms = interval_ms;
    int rc = arm_timer(r);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int orbit_reaper_rescan(struct orbit_reaper *r)
{
    if (!r)
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    rescan_all(r);
    int watched = (int)r->stats.watched;
    pthread_mutex_unlock(&r->lock);
    return watched;
}

int orbit_reaper_on_death(struct orbit_reaper *r, orbit_reaper_death_fn fn, void *ctx, unsigned flags)
{
    if (!r || (flags & ~ORBIT_REAPER_ACCOUNT))
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    r->on_death = fn;
    r->ctx = ctx;
    r->flags = flags;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int orbit_reaper_on_deferral(struct orbit_reaper *r, orbit_reaper_deferral_fn fn, void *ctx)
{
    if (!r)
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    r->on_deferral = fn;
    r->deferral_ctx = ctx;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

void orbit_reaper_stats(struct orbit_reaper *r, struct orbit_reaper_stats *out)
{
    if (!r || !out)
        return;
    pthread_mutex_lock(&r->lock);
    *out = r->stats;
    pthread_mutex_unlock(&r->lock);
}
