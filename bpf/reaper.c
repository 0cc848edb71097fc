/* SPDX-License-Identifier: MIT */
/*
 * liborbit-reaper: the handle and its event loop. The loop reads the backend
 * (through its ops: backend.h), the workers' results and the fleets' notices,
 * and routes each event to the fleet it is about; the fleets' threads
 * (reaper_fleet.c) do the rest. It never maps a segment or tests a lock
 * itself: no fleet can make it wait.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include "hub.h"
#include "reaper_fleet.h"

/* The event loop's epoll tags. */
#define RP_TAG_TIMER   (~0ull)
#define RP_TAG_BACKEND (~0ull - 1)
#define RP_TAG_DONE    (~0ull - 2)   /* workers' results, fleets' notices (reaper_report.c) */

#define RP_INTERVAL_DEFAULT 100
#define RP_EPOLL_BATCH      64
#define RP_PARKED_RETRY_MS  5000   /* a fleet the budget had no room for is tried again after this */
#define RP_SYNC_WAIT_MS     2000   /* watch, watch_all and rescan wait this long for the fleets' threads */

/*
 * The handle: the event loop's own state, and what it shares with the
 * fleets' threads (hub). The fleets' list, the callbacks and the settings
 * are under lock.
 */
struct orbit_reaper {
    pthread_mutex_t lock;
    struct rp_hub hub;
    char note[640];
    int epfd, timerfd;
    bool all;
    uint32_t next_fleet_id;
    struct rp_fleet **fleets;
    size_t n_fleets, cap_fleets;
    orbit_reaper_death_fn on_death;
    void *ctx;
    orbit_reaper_deferral_fn on_deferral;
    void *deferral_ctx;
    orbit_reaper_quarantine_fn on_quarantine;
    void *quarantine_ctx;
};

/* ---- small helpers -------------------------------------------------------- */

const char *orbit_reaper_backend_name(enum orbit_reaper_backend b)
{
    switch (b) {
    case ORBIT_REAPER_AUTO:  return "auto";
    case ORBIT_REAPER_BPF:   return "bpf";
    case ORBIT_REAPER_PIDFD: return "pidfd";
    }
    return "unknown";
}

const char *orbit_reaper_quarantine_reason_name(enum orbit_reaper_quarantine_reason why)
{
    switch (why) {
    case ORBIT_REAPER_QUARANTINE_DESCRIPTORS: return "descriptors";
    case ORBIT_REAPER_QUARANTINE_MAPPED:      return "mapped";
    case ORBIT_REAPER_QUARANTINE_MEMBERS:     return "members";
    case ORBIT_REAPER_QUARANTINE_FAULT:       return "fault";
    case ORBIT_REAPER_QUARANTINE_THREADS:     return "threads";
    }
    return "unknown";
}

/* The reaper's pid namespace, when its /proc is of that namespace (else 0: nothing is visible). */
static uint64_t pidns_self(void)
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

/* ---- the fleets' list (under r->lock), sorted by name ------------------------ */

static size_t name_lower(struct orbit_reaper *r, const char *name)
{
    size_t lo = 0, hi = r->n_fleets;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(r->fleets[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct rp_fleet *find_fleet_name(struct orbit_reaper *r, const char *name)
{
    size_t i = name_lower(r, name);
    return i < r->n_fleets && strcmp(r->fleets[i]->name, name) == 0 ? r->fleets[i] : NULL;
}

static struct rp_fleet *find_fleet_id(struct orbit_reaper *r, uint32_t id)
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
    rf->hub = &r->hub;
    rf->id = r->next_fleet_id++;
    snprintf(rf->name, sizeof rf->name, "%s", name);
    atomic_store(&rf->from_all, from_all);
    atomic_store(&rf->owner, -1);
    pthread_mutex_init(&rf->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* the thread's due times are rp_now_ns */
    pthread_cond_init(&rf->cond, &ca);
    pthread_condattr_destroy(&ca);
    size_t i = name_lower(r, name);
    memmove(&r->fleets[i + 1], &r->fleets[i], (r->n_fleets - i) * sizeof *r->fleets);
    r->fleets[i] = rf;
    r->n_fleets++;
    *out = rf;
    return 0;
}

static void free_fleet(struct rp_fleet *rf)
{
    pthread_cond_destroy(&rf->cond);
    pthread_mutex_destroy(&rf->mu);
    free(rf->inbox);
    free(rf->taken);
    free(rf);
}

/* Its thread is joined (or never ran). */
static void remove_fleet(struct orbit_reaper *r, size_t i)
{
    struct rp_fleet *rf = r->fleets[i];
    memmove(&r->fleets[i], &r->fleets[i + 1], (r->n_fleets - i - 1) * sizeof *r->fleets);
    r->n_fleets--;
    free_fleet(rf);
}

/* Stop and join its thread, if it runs: at most the step under way. */
static void stop_fleet(struct rp_fleet *rf)
{
    if (!rf->running)
        return;
    rp_fleet_poke(rf, RP_POKE_STOP);
    rp_fleet_join(rf);
    rf->running = false;
}

/* A fleet without a thread gets one when the budget has room for it. */
static void start_fleet(struct orbit_reaper *r, struct rp_fleet *rf, int64_t now)
{
    if (rf->running || now < rf->start_after_ns || !rp_budget_room(&r->hub.budget, atomic_load(&rf->owner)))
        return;
    pthread_mutex_lock(&rf->mu);
    rf->ended = rf->gone = rf->parked = false;
    rf->pokes = 0;
    rf->tried = false;
    pthread_mutex_unlock(&rf->mu);
    if (rp_fleet_start(rf) == 0)
        rf->running = true;
    else
        rf->start_after_ns = now + (int64_t)RP_PARKED_RETRY_MS * 1000000;
}

/* Threads that ended: joined; a gone fleet leaves the list, a parked one is started again later. */
static void follow_fleets(struct orbit_reaper *r)
{
    int64_t now = (int64_t)rp_now_ns();
    for (size_t i = 0; i < r->n_fleets;) {
        struct rp_fleet *rf = r->fleets[i];
        pthread_mutex_lock(&rf->mu);
        bool ended = rf->ended, gone = rf->gone;
        pthread_mutex_unlock(&rf->mu);
        if (rf->running && ended) {
            rp_fleet_join(rf);
            rf->running = false;
            rf->start_after_ns = now + (int64_t)RP_PARKED_RETRY_MS * 1000000;
            if (gone && atomic_load(&rf->from_all)) {
                remove_fleet(r, i);
                continue;
            }
        }
        start_fleet(r, rf, now);
        i++;
    }
}

/* Is listed "web@N", a later generation of a fleet watched by name ("web")? */
static bool generation_of_named(struct orbit_reaper *r, const char *listed)
{
    const char *at = strchr(listed, '@');
    for (size_t i = 0; at && i < r->n_fleets; i++)
        if (!atomic_load(&r->fleets[i]->from_all) && strlen(r->fleets[i]->name) == (size_t)(at - listed) &&
            strncmp(r->fleets[i]->name, listed, (size_t)(at - listed)) == 0)
            return true;
    return false;
}

/* Fleets created since (watch_all), or the later generations of the fleets named. */
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

/* Ask every fleet's thread to re-read (RP_POKE_KICK or NUDGE); returns the scans each had done before. */
static uint64_t *kick_all(struct orbit_reaper *r, unsigned how)
{
    uint64_t *before = calloc(r->n_fleets ? r->n_fleets : 1, sizeof *before);
    for (size_t i = 0; i < r->n_fleets; i++) {
        struct rp_fleet *rf = r->fleets[i];
        pthread_mutex_lock(&rf->mu);
        if (before)
            before[i] = rf->scans_begun;   /* a re-read under way may have read before the kick */
        pthread_mutex_unlock(&rf->mu);
        if (rf->running && !(how == RP_POKE_NUDGE && atomic_load(&rf->quarantine) != RP_Q_NONE))
            rp_fleet_poke(rf, how == RP_POKE_NUDGE ? RP_POKE_KICK : how);   /* quarantine: at its own pace */
    }
    return before;
}

/* Wait (bounded) until every running fleet's thread finished a re-read begun after before, or ended. */
static void wait_scans(struct orbit_reaper *r, const uint64_t *before)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += RP_SYNC_WAIT_MS / 1000;
    for (size_t i = 0; before && i < r->n_fleets; i++) {
        struct rp_fleet *rf = r->fleets[i];
        if (!rf->running)
            continue;
        pthread_mutex_lock(&rf->mu);
        while (rf->scans <= before[i] && !rf->ended && !(rf->tried && rf->attach_rc < 0) &&
               pthread_cond_timedwait(&rf->cond, &rf->mu, &until) == 0) {}
        pthread_mutex_unlock(&rf->mu);
    }
}

static uint32_t watched_total(struct orbit_reaper *r)
{
    uint32_t n = 0;
    for (size_t i = 0; i < r->n_fleets; i++)
        n += atomic_load(&r->fleets[i]->watched);
    return n;
}

/* ---- events --------------------------------------------------------------- */

/* A per-tgid backend's exit names (tgid, start time) of our namespace: to every fleet watching the tgid. */
static void route_tgid(struct orbit_reaper *r, const struct rp_exit *e)
{
    uint32_t ids[64];
    size_t n = rp_tgid_fleets(&r->hub.tgids, (int32_t)e->tgid, ids, 64);
    if (n == 0)
        atomic_fetch_add(&r->hub.counts.ignored, 1);
    for (size_t i = 0; i < n; i++) {
        struct rp_fleet *rf = find_fleet_id(r, ids[i]);
        struct rp_msg m = { .kind = RP_MSG_TGID, .exit = *e };
        if (rf)
            rp_fleet_post(rf, &m);
    }
}

/* A per-member backend's exit names its key: the fleet and node it was watched for. */
static void route_member(struct orbit_reaper *r, const struct rp_exit *e, uint64_t key)
{
    struct rp_fleet *rf = find_fleet_id(r, rp_member_key_fleet(key));
    struct rp_msg m = { .kind = RP_MSG_PIDFD, .node = rp_member_key_node(key), .exit = *e };
    if (rf)
        rp_fleet_post(rf, &m);
}

/* Everything the backend has to say, routed; returns true when it lost exits. */
static bool read_backend(struct orbit_reaper *r)
{
    struct rp_event evs[RP_EPOLL_BATCH];
    uint64_t lost_total = 0;
    int n;
    do {
        uint64_t lost = 0;
        n = r->hub.ops->next(r->hub.be, evs, RP_EPOLL_BATCH, &lost);
        lost_total += lost;
        uint64_t now = rp_now_ns();
        for (int i = 0; i < n; i++) {
            struct rp_exit e = { .kind = RP_EXIT_TGID, .tgid = (uint32_t)evs[i].pid,
                                 .start_ticks = evs[i].start_time, .status = evs[i].status,
                                 .exit_ns = evs[i].exit_ns, .detected_ns = now };
            atomic_fetch_add(&r->hub.counts.events, 1);
            if (r->hub.ops->per_tgid)
                route_tgid(r, &e);
            else
                route_member(r, &e, evs[i].key);
        }
    } while (n == RP_EPOLL_BATCH);
    atomic_fetch_add(&r->hub.counts.drops, lost_total);
    return lost_total != 0;
}

/* Events were lost: every fleet tests its BPF-watched members once. */
static void sweep_all(struct orbit_reaper *r)
{
    for (size_t i = 0; i < r->n_fleets; i++)
        if (r->fleets[i]->running)
            rp_fleet_poke(r->fleets[i], RP_POKE_SWEEP);
}

/* ---- the workers' results and the fleets' notices ------------------------------ */

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

/* A finished report: its fleet watches the node's next life; a death is counted and reported. */
static int deliver_finished(struct orbit_reaper *r, const struct rp_result *res)
{
    const struct rp_job *j = &res->job;
    struct rp_fleet *rf = find_fleet_id(r, res->fleet_id);
    struct rp_msg m = { .kind = RP_MSG_DONE, .node = j->node, .life = j->seen };
    if (rf)
        rp_fleet_post(rf, &m);
    if (!j->death)
        return 0;
    struct orbit_reaper_death d = {
        .fleet = res->fleet, .node = j->node, .pid = j->seen.pid, .start_time = j->seen.start_time,
        .incarnation = j->seen.incarnation, .status = j->status, .backend = r->hub.backend,
        .source = j->source, .exit_ns = j->exit_ns, .detected_ns = j->detected_ns,
        .reclaimed_ns = res->at_ns, .accounted = j->accounted, .reclaimed = j->reclaimed,
        .attempts = j->attempts,
    };
    atomic_fetch_add(&r->hub.counts.deaths, 1);
    if (r->on_death)
        r->on_death(r->ctx, &d);
    return 1;
}

static void deliver_notices(struct orbit_reaper *r)
{
    size_t n;
    struct rp_notice *v = rp_notices_take(&r->hub.reports, &n);
    for (size_t i = 0; i < n; i++) {
        v[i].q.fleet = v[i].fleet;
        v[i].q.detail = v[i].detail;
        if (r->on_quarantine)
            r->on_quarantine(r->quarantine_ctx, &v[i].q);
    }
    free(v);
}

static int deliver_results(struct orbit_reaper *r)
{
    size_t n, cap;
    struct rp_result *v = rp_results_take(&r->hub.reports, &n, &cap);
    int handled = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].error)
            deliver_deferral(r, &v[i]);
        else
            handled += deliver_finished(r, &v[i]);
    }
    rp_results_done(&r->hub.reports, v, cap);
    deliver_notices(r);
    return handled;
}

/* The membership timer: fleets that came, ended or may start; their threads re-read on their own. */
static void timer_event(struct orbit_reaper *r)
{
    uint64_t ticks;
    if (read(r->timerfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
        return;
    atomic_fetch_add(&r->hub.counts.rescans, 1);
    discover_fleets(r);
    follow_fleets(r);
}

/* Everything read from one epoll_wait; returns deaths handled. */
static int dispatch(struct orbit_reaper *r, struct epoll_event *evs, int n)
{
    bool swept = false;
    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag == RP_TAG_TIMER)
            timer_event(r);
        else if (tag == RP_TAG_BACKEND)
            swept |= read_backend(r);
        /* RP_TAG_DONE: results are taken below, whatever woke us */
    }
    if (swept)
        sweep_all(r);
    return deliver_results(r);
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
    free(kick_all(r, RP_POKE_NUDGE));   /* re-read on entry, as ever: the fleets' threads, paced */
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
    int ms = atomic_load(&r->hub.interval_ms);
    struct itimerspec its = { .it_interval = { ms / 1000, (long)(ms % 1000) * 1000000L } };
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

/* The workers' lists, their eventfd in the epoll set. */
static int open_reports(struct orbit_reaper *r)
{
    int rc = rp_reports_open(&r->hub.reports);
    if (rc < 0)
        return rc;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = RP_TAG_DONE };
    return epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->hub.reports.donefd, &ev) == 0 ? 0 : -errno;
}

/* Open ops's backend and put its descriptor in the epoll set. */
static int open_backend(struct orbit_reaper *r, const struct rp_backend_ops *ops, char *why, size_t why_len)
{
    struct rp_backend *be;
    int rc = ops->open(&be, why, why_len);
    if (rc < 0)
        return rc;
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = RP_TAG_BACKEND };
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, ops->fd(be), &ev) != 0) {
        rc = -errno;
        snprintf(why, why_len, "epoll: %s", strerror(errno));
        ops->close(be);
        return rc;
    }
    r->hub.ops = ops;
    r->hub.be = be;
    r->hub.backend = ops->kind;
    rp_tgids_init(&r->hub.tgids, ops, be);
    return 0;
}

static int pick_backend(struct orbit_reaper *r, enum orbit_reaper_backend want)
{
    char why[384] = "";
    if (want == ORBIT_REAPER_PIDFD)
        return open_backend(r, &rp_pidfd_backend, why, sizeof why);
    int rc = open_backend(r, &rp_bpf_backend, why, sizeof why);
    if (rc == 0 || want == ORBIT_REAPER_BPF)
        return rc;
    snprintf(r->note, sizeof r->note, "BPF backend unavailable (%s): using pidfd", why);
    return open_backend(r, &rp_pidfd_backend, why, sizeof why);
}

int orbit_reaper_open(enum orbit_reaper_backend backend, struct orbit_reaper **out)
{
    if (!out || backend > ORBIT_REAPER_PIDFD)
        return -ORBIT_EMALFORMED;
    struct orbit_reaper *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    pthread_mutex_init(&r->lock, NULL);
    atomic_store(&r->hub.interval_ms, RP_INTERVAL_DEFAULT);
    r->timerfd = -1;
    r->hub.reports.donefd = -1;
    r->hub.pidns = pidns_self();
    rp_budget_init(&r->hub.budget);
    int rc = open_fds(r);
    if (rc == 0)
        rc = open_reports(r);
    if (rc == 0)
        rc = pick_backend(r, backend);
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
    for (size_t i = 0; i < r->n_fleets; i++)   /* all asked first: they end side by side */
        if (r->fleets[i]->running)
            rp_fleet_poke(r->fleets[i], RP_POKE_STOP);
    while (r->n_fleets) {
        stop_fleet(r->fleets[r->n_fleets - 1]);
        remove_fleet(r, r->n_fleets - 1);
    }
    rp_reports_close(&r->hub.reports);   /* joins every worker: none is left running */
    if (r->hub.be) {
        rp_tgids_free(&r->hub.tgids);
        r->hub.ops->close(r->hub.be);   /* after every fleet is stopped: no watch is under way */
    }
    if (r->timerfd >= 0)
        close(r->timerfd);
    if (r->epfd >= 0)
        close(r->epfd);
    rp_budget_free(&r->hub.budget);
    free(r->fleets);
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
        atomic_store(&rf->from_all, false);   /* named explicitly: kept while it is missing */
    else
        rc = add_fleet(r, fleet_name, false, &rf);
    if (rc == 0 && !rf->running) {
        rf->start_after_ns = 0;
        start_fleet(r, rf, (int64_t)rp_now_ns());
        /* Its first attach says whether the fleet exists but cannot be read. */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += RP_SYNC_WAIT_MS / 1000;
        pthread_mutex_lock(&rf->mu);
        while (rf->running && !rf->tried && !rf->ended &&
               pthread_cond_timedwait(&rf->cond, &rf->mu, &until) == 0) {}
        while (rf->running && rf->tried && rf->attach_rc == 0 && rf->scans == 0 && !rf->ended &&
               pthread_cond_timedwait(&rf->cond, &rf->mu, &until) == 0) {}
        int first = rf->tried ? rf->attach_rc : 0;
        pthread_mutex_unlock(&rf->mu);
        /* It exists and cannot be read (tried again later); a generation of other layouts
         * named without its number is left to a reaper of its release. */
        if (first == -ORBIT_ECORRUPT || (first == -ORBIT_EGEOMETRY && strchr(fleet_name, '@')))
            rc = first;
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
    discover_fleets(r);
    follow_fleets(r);
    uint64_t *before = kick_all(r, RP_POKE_KICK);
    wait_scans(r, before);
    free(before);
    pthread_mutex_unlock(&r->lock);
    return 0;
}

int orbit_reaper_fd(struct orbit_reaper *r)
{
    return r ? r->epfd : -ORBIT_EMALFORMED;
}

enum orbit_reaper_backend orbit_reaper_backend(struct orbit_reaper *r)
{
    return r ? r->hub.backend : ORBIT_REAPER_AUTO;
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
    atomic_store(&r->hub.interval_ms, interval_ms);
    int rc = arm_timer(r);
    for (size_t i = 0; i < r->n_fleets; i++)   /* their next re-read follows the new period */
        if (r->fleets[i]->running)
            rp_fleet_poke(r->fleets[i], RP_POKE_KICK);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int orbit_reaper_rescan(struct orbit_reaper *r)
{
    if (!r)
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    uint64_t *before = kick_all(r, RP_POKE_KICK);
    wait_scans(r, before);
    free(before);
    int watched = (int)watched_total(r);
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
    atomic_store(&r->hub.flags, fn ? flags : 0u);
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

int orbit_reaper_on_quarantine(struct orbit_reaper *r, orbit_reaper_quarantine_fn fn, void *ctx)
{
    if (!r)
        return -ORBIT_EMALFORMED;
    pthread_mutex_lock(&r->lock);
    r->on_quarantine = fn;
    r->quarantine_ctx = ctx;
    pthread_mutex_unlock(&r->lock);
    return 0;
}

void orbit_reaper_stats(struct orbit_reaper *r, struct orbit_reaper_stats *out)
{
    if (!r || !out)
        return;
    memset(out, 0, sizeof *out);
    out->events = atomic_load(&r->hub.counts.events);
    out->deaths = atomic_load(&r->hub.counts.deaths);
    out->ignored = atomic_load(&r->hub.counts.ignored);
    out->drops = atomic_load(&r->hub.counts.drops);
    out->rescans = atomic_load(&r->hub.counts.rescans);
    out->fleets = atomic_load(&r->hub.counts.fleets);
    out->watched = atomic_load(&r->hub.counts.watched);
    out->quarantines = atomic_load(&r->hub.counts.quarantines);
    out->quarantined = atomic_load(&r->hub.counts.quarantined);
    rp_budget_descriptors(&r->hub.budget, &out->descriptors, &out->descriptor_budget);
}
