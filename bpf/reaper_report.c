/* SPDX-License-Identifier: MIT */
/*
 * Each watched fleet's death reports on a worker thread of its own: a report
 * that waits on a table lock (orbit_fleet_node_dead blocks up to the lock's
 * bound, then fails and leaves the node reserved) holds up that fleet only.
 * A failed try is deferred and tried again after a backoff. The worker
 * starts at its fleet's first report and lasts until the fleet is detached;
 * results go back to the event loop through a list and an eventfd in its
 * epoll set, so callbacks still run in the thread calling orbit_reaper_process.
 *
 * Test hook: ORBIT_TEST_REAPER_DELAY_MS=N (read when a fleet is attached)
 * makes each try wait N ms after it was taken and before its report runs,
 * so a test can order the event loop's steps around a report under way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "reaper_account.h"
#include "reaper_clock.h"
#include "reaper_report.h"
#include "reaper_thread.h"

#define RP_BACKOFF_FIRST_MS 100u
#define RP_BACKOFF_MAX_MS   1000u

/* Everything but f and name is under rep->lock. */
struct rp_worker {
    struct rp_reports *rep;
    struct orbit_fleet *f;      /* shared with the event loop while attached; ours once detached */
    uint32_t fleet_id;
    char name[ORBIT_FLEET_NAME_MAX + 1];
    pthread_cond_t wake;        /* a new report, or stop */
    pthread_t thread;
    bool running;               /* the thread is in its loop */
    bool joinable;              /* a thread was started and not joined */
    bool stop;                  /* detached or closing: end after the try under way */
    struct rp_job *jobs;
    size_t n_jobs, cap_jobs;
    uint64_t next_id;           /* of the next job listed */
    unsigned delay_ms;          /* ORBIT_TEST_REAPER_DELAY_MS: each try waits first */
    bool paced;                 /* a quarantined fleet's: after each try, idle RP_PACE_QUARANTINE times as long */
    uint64_t idle_until_ns;     /* paced: no try before */
};

/* A worker whose thread has ended (or is joined here): its fleet handle is left with it. */
static void worker_free(struct rp_worker *w)
{
    if (w->joinable)
        pthread_join(w->thread, NULL);
    orbit_fleet_leave(w->f);
    pthread_cond_destroy(&w->wake);
    free(w->jobs);
    free(w);
}

/* ---- results, for the event loop ---------------------------------------- */

/* rep->lock held. Out of memory drops a deferral notice or a finished death's callback only. */
static void post_result(struct rp_worker *w, const struct rp_job *job, int error)
{
    struct rp_reports *rep = w->rep;
    if (rep->n_results == rep->cap_results) {
        size_t cap = rep->cap_results ? rep->cap_results * 2 : 16;
        struct rp_result *v = realloc(rep->results, cap * sizeof *v);
        if (!v)
            return;
        rep->results = v;
        rep->cap_results = cap;
    }
    struct rp_result *res = &rep->results[rep->n_results++];
    res->fleet_id = w->fleet_id;
    memcpy(res->fleet, w->name, sizeof res->fleet);
    res->job = *job;
    res->error = error;
    res->at_ns = rp_now_ns();
    uint64_t one = 1;
    /* Level-triggered: the count stays until the event loop reads it, so no post is missed. */
    if (write(rep->donefd, &one, sizeof one) < 0) {
        /* EAGAIN: the counter is saturated, and so already readable. */
    }
}

/* Workers that ended after their fleet was detached: join them and leave their fleets. */
static void reap_retired(struct rp_reports *rep)
{
    pthread_mutex_lock(&rep->lock);   /* fleets' threads retire workers: never read unlocked */
    for (size_t i = 0; i < rep->n_retired;) {
        struct rp_worker *w = rep->retired[i];
        if (w->running) {
            i++;
            continue;
        }
        rep->retired[i] = rep->retired[--rep->n_retired];
        pthread_mutex_unlock(&rep->lock);
        worker_free(w);
        pthread_mutex_lock(&rep->lock);
    }
    pthread_mutex_unlock(&rep->lock);
}

struct rp_result *rp_results_take(struct rp_reports *rep, size_t *n, size_t *cap)
{
    uint64_t count;
    pthread_mutex_lock(&rep->lock);
    if (read(rep->donefd, &count, sizeof count) < 0) {
        /* EAGAIN: nothing posted since the last read. */
    }
    struct rp_result *v = rep->results;
    *n = rep->n_results;
    *cap = rep->cap_results;
    rep->results = rep->spare_results;
    rep->cap_results = rep->cap_spare_results;
    rep->n_results = 0;
    rep->spare_results = NULL;
    rep->cap_spare_results = 0;
    pthread_mutex_unlock(&rep->lock);
    reap_retired(rep);
    return v;
}

void rp_results_done(struct rp_reports *rep, struct rp_result *v, size_t cap)
{
    pthread_mutex_lock(&rep->lock);
    if (!rep->spare_results) {
        rep->spare_results = v;
        rep->cap_spare_results = cap;
        v = NULL;
    }
    pthread_mutex_unlock(&rep->lock);
    free(v);
}

void rp_notice_post(struct rp_reports *rep, const struct rp_notice *n)
{
    pthread_mutex_lock(&rep->lock);
    if (rep->n_notices == rep->cap_notices) {
        size_t cap = rep->cap_notices ? rep->cap_notices * 2 : 8;
        struct rp_notice *v = realloc(rep->notices, cap * sizeof *v);
        if (v) {
            rep->notices = v;
            rep->cap_notices = cap;
        }
    }
    if (rep->n_notices < rep->cap_notices) {   /* out of memory drops a notice, never a death */
        rep->notices[rep->n_notices++] = *n;
        uint64_t one = 1;
        if (write(rep->donefd, &one, sizeof one) < 0) {
            /* EAGAIN: the counter is saturated, and so already readable. */
        }
    }
    pthread_mutex_unlock(&rep->lock);
}

struct rp_notice *rp_notices_take(struct rp_reports *rep, size_t *n)
{
    pthread_mutex_lock(&rep->lock);
    struct rp_notice *v = rep->notices;
    *n = rep->n_notices;
    rep->notices = NULL;
    rep->n_notices = rep->cap_notices = 0;
    pthread_mutex_unlock(&rep->lock);
    return v;
}

/* ---- one try ---------------------------------------------------------------- */

/* rep->lock held: the job listed under that id, or NULL. */
static struct rp_job *job_by_id(struct rp_worker *w, uint64_t id)
{
    for (size_t i = 0; i < w->n_jobs; i++)
        if (w->jobs[i].id == id)
            return &w->jobs[i];
    return NULL;
}

/*
 * rep->lock held: the listed job a new one for node goes into, or NULL when it
 * needs one of its own. Any job of the node covers a resumed report (every try
 * finishes a report cut short first); a death is covered by the same life's
 * death, or merges into a resumed report; another life's death is its own job.
 */
static struct rp_job *job_covering(struct rp_worker *w, const struct rp_job *job)
{
    struct rp_job *resumed = NULL;
    for (size_t i = 0; i < w->n_jobs; i++) {
        struct rp_job *have = &w->jobs[i];
        if (have->node != job->node)
            continue;
        if (!job->death || (have->death && rp_same_life(&have->seen, &job->seen)))
            return have;
        if (!have->death)
            resumed = have;
    }
    return resumed;
}

/* rep->lock held: the earliest job not tried yet or due again, or NULL when there is none. */
static struct rp_job *next_job(struct rp_worker *w)
{
    struct rp_job *best = NULL;
    for (size_t i = 0; i < w->n_jobs; i++)
        if (!best || w->jobs[i].due_ns < best->due_ns)
            best = &w->jobs[i];
    return best;
}

/* Without rep->lock: count what it held (first try only), then report it. */
static int try_report(struct rp_worker *w, struct rp_job *job)
{
    if (job->account && job->attempts == 0) {
        rp_account(w->f, job->node, job->seen.incarnation, &job->reclaimed);
        job->accounted = true;
    }
    job->attempts++;
    /* A resumed report names no life: a record seen mid-join may already show the joiner's
     * incarnation, and incarnation 0 (never a life's) resumes REAPING or frees a dead
     * joiner's node without ever matching the life published since. */
    return orbit_fleet_node_dead(w->f, job->node, job->death ? job->seen.incarnation : 0);
}

/* rep->lock held: settle the job after a try (finished, or deferred with the next backoff). */
static void settle(struct rp_worker *w, const struct rp_job *tried, int rc)
{
    struct rp_job *job = job_by_id(w, tried->id);
    if (job->merges != tried->merges) {
        /* A death merged in while it ran: that try named no life, the death's report is still owed. */
        job->due_ns = 0;
        return;
    }
    job->attempts = tried->attempts;
    job->accounted = job->accounted || tried->accounted;
    if (tried->accounted)
        job->reclaimed = tried->reclaimed;
    if (rc == 0) {
        post_result(w, job, 0);
        *job = w->jobs[--w->n_jobs];
        return;
    }
    job->backoff_ms = job->backoff_ms ? job->backoff_ms * 2 : RP_BACKOFF_FIRST_MS;
    if (job->backoff_ms > RP_BACKOFF_MAX_MS)
        job->backoff_ms = RP_BACKOFF_MAX_MS;
    job->due_ns = rp_now_ns() + (uint64_t)job->backoff_ms * 1000000ull;
    post_result(w, job, rc);
}

static struct timespec abs_time(uint64_t ns)
{
    return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };
}

/*
 * The worker: due reports one at a time, sleeping until the next is due, and
 * for the next report when none is left; it ends when its fleet is detached.
 * (Kept, not made anew per death: a thread starting allocates, and a process
 * that forks meanwhile may leave the child an allocator lock nobody holds.)
 */
static void *worker_main(void *arg)
{
    struct rp_worker *w = arg;
    struct rp_reports *rep = w->rep;
    pthread_mutex_lock(&rep->lock);
    struct rp_job *job;
    while (!w->stop) {
        if (!(job = next_job(w))) {
            pthread_cond_wait(&w->wake, &rep->lock);
            continue;
        }
        uint64_t now = rp_now_ns(), due = job->due_ns > w->idle_until_ns ? job->due_ns : w->idle_until_ns;
        if (due > now) {
            struct timespec until = abs_time(due);
            pthread_cond_timedwait(&w->wake, &rep->lock, &until);
            continue;
        }
        struct rp_job tried = *job;   /* the entry stays listed while it runs: later reports merge */
        pthread_mutex_unlock(&rep->lock);
        if (w->delay_ms) {
            struct timespec pause = { (time_t)(w->delay_ms / 1000), (long)(w->delay_ms % 1000) * 1000000L };
            nanosleep(&pause, NULL);
        }
        int rc = try_report(w, &tried);
        pthread_mutex_lock(&rep->lock);
        settle(w, &tried, rc);
        if (w->paced)   /* a quarantined fleet's reports take at most a tenth of a CPU */
            w->idle_until_ns = rp_now_ns() + RP_PACE_QUARANTINE * (rp_now_ns() - now);
    }
    w->running = false;
    pthread_mutex_unlock(&rep->lock);
    return NULL;
}

/* ---- the fleet's thread's side ----------------------------------------------------- */

struct rp_worker *rp_worker_new(struct rp_reports *rep, struct orbit_fleet *f, uint32_t fleet_id,
                                const char *name, bool paced)
{
    struct rp_worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* due times are rp_now_ns */
    int rc = pthread_cond_init(&w->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(w);
        return NULL;
    }
    w->rep = rep;
    w->f = f;
    w->paced = paced;
#ifdef ORBIT_TEST_HOOKS
    const char *delay = getenv("ORBIT_TEST_REAPER_DELAY_MS");
#else
    const char *delay = NULL;   /* a build without -Dtest_hooks reads no ORBIT_TEST_* */
#endif
    w->delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) % 60000u : 0;
    w->fleet_id = fleet_id;
    snprintf(w->name, sizeof w->name, "%s", name);
    return w;
}

/* rep->lock held: start the thread unless it runs; the previous one (ended) is joined first. */
static int worker_start(struct rp_worker *w)
{
    if (w->running)
        return 0;
    if (w->joinable)
        pthread_join(w->thread, NULL);   /* it cleared running as its last step: returns at once */
    w->joinable = false;
    int rc = rp_thread_start(&w->thread, worker_main, w);   /* one per attached fleet: a small stack */
    if (rc < 0)
        return rc;
    w->running = w->joinable = true;
    return 0;
}

int rp_report(struct rp_reports *rep, struct rp_worker *w, const struct rp_job *job)
{
    if (!w)
        return -ORBIT_EMALFORMED;
    int rc = 0;
    pthread_mutex_lock(&rep->lock);
    struct rp_job *have = job_covering(w, job);
    if (have && job->death && !have->death) {
        /* A report another left unfinished is now a death to deliver, this life's. */
        have->death = true;
        have->seen = job->seen;
        have->status = job->status;
        have->source = job->source;
        have->exit_ns = job->exit_ns;
        have->detected_ns = job->detected_ns;
        have->account = job->account;
        have->accounted = false;   /* counted for this life, on its first try */
        have->attempts = 0;
        have->backoff_ms = 0;
        have->due_ns = 0;
        have->merges++;
    } else if (!have) {
        if (w->n_jobs == w->cap_jobs) {
            size_t cap = w->cap_jobs ? w->cap_jobs * 2 : 8;
            struct rp_job *v = realloc(w->jobs, cap * sizeof *v);
            rc = v ? 0 : -ENOMEM;
            if (v) {
                w->jobs = v;
                w->cap_jobs = cap;
            }
        }
        if (rc == 0) {
            w->jobs[w->n_jobs] = *job;
            w->jobs[w->n_jobs++].id = ++w->next_id;
        }
    }
    if (rc == 0)
        rc = worker_start(w);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&rep->lock);
    return rc;
}

/* rep->lock held: keep a running worker until it ends; false when out of memory. */
static bool retire(struct rp_reports *rep, struct rp_worker *w)
{
    if (rep->n_retired == rep->cap_retired) {
        size_t cap = rep->cap_retired ? rep->cap_retired * 2 : 4;
        struct rp_worker **v = realloc(rep->retired, cap * sizeof *v);
        if (!v)
            return false;
        rep->retired = v;
        rep->cap_retired = cap;
    }
    rep->retired[rep->n_retired++] = w;
    return true;
}

void rp_worker_end(struct rp_reports *rep, struct rp_worker *w)
{
    pthread_mutex_lock(&rep->lock);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    bool kept = w->running && retire(rep, w);   /* joined by rp_results_take once it ends */
    pthread_mutex_unlock(&rep->lock);
    if (!kept)
        worker_free(w);   /* ended; or, out of memory, waited for here */
}

int rp_reports_open(struct rp_reports *rep)
{
    pthread_mutex_init(&rep->lock, NULL);
    rep->donefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return rep->donefd < 0 ? -errno : 0;
}

/* After every fleet is detached: wait for the retired workers' tries under way. */
void rp_reports_close(struct rp_reports *rep)
{
    pthread_mutex_lock(&rep->lock);
    while (rep->n_retired) {
        struct rp_worker *w = rep->retired[--rep->n_retired];
        pthread_mutex_unlock(&rep->lock);
        worker_free(w);   /* waits for the try under way */
        pthread_mutex_lock(&rep->lock);
    }
    pthread_mutex_unlock(&rep->lock);
    free(rep->retired);
    free(rep->results);
    free(rep->spare_results);
    free(rep->notices);
    if (rep->donefd >= 0)
        close(rep->donefd);
    pthread_mutex_destroy(&rep->lock);
}
