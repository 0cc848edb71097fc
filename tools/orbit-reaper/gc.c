/* SPDX-License-Identifier: MIT */
/*
 * orbit-reaper --gc SECONDS, on a thread of its own. Each pass asks the kernel-held liveness test how
 * many members of each watched fleet live (orbit_fleet_live_members); a fleet
 * found with none on every pass for SECONDS is removed with
 * orbit_fleet_collect, which takes the fleet's gate alone and refuses if a
 * member lives or a joiner is mid-way: a fleet with a live member is never
 * touched, however the passes fall. Each generation of a fleet is judged on
 * its own: an old one a rolling upgrade left empty goes, whatever its layouts.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gc.h"
#include "observe.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int gc_period_ms(const struct gc *g)
{
    uint64_t ms = g->after_ns / 1000000 / 10;   /* ten looks per period: "continuously" within 10 % */
    return ms < 20 ? 20 : ms > 1000 ? 1000 : (int)ms;
}

static struct gc_fleet *gc_find(struct gc *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->v[i].name, name) == 0)
            return &g->v[i];
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        struct gc_fleet *v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return NULL;
        g->v = v;
        g->cap = cap;
    }
    struct gc_fleet *f = &g->v[g->n++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

static void gc_one(struct gc *g, const char *name, uint64_t now, gc_log_fn log)
{
    struct gc_fleet *f = gc_find(g, name);
    if (!f)
        return;
    f->seen = true;
    /* A segment still being created is not waited for (-ORBIT_EAGAIN: not empty, looked at next pass),
     * so a stop never waits behind a half-made fleet either. */
    ssize_t live = tool_live_members(name, 0);
    if (live != 0) {
        f->empty_since_ns = 0;   /* one lives, or it is gone or not ours to judge */
        return;
    }
    if (!f->empty_since_ns)
        f->empty_since_ns = now;
    if (now - f->empty_since_ns < g->after_ns)
        return;
    int rc = orbit_fleet_collect(name);
    if (rc != -ENOENT)
        log(name, (now - f->empty_since_ns) / 1000000, rc);
    f->empty_since_ns = 0;
}

/* Every fleet there is (--all); NULL when none or out of memory. */
static char (*list_all(size_t *n))[ORBIT_FLEET_NAME_MAX + 1]
{
    ssize_t want = orbit_fleet_list(NULL, 0);
    char (*names)[ORBIT_FLEET_NAME_MAX + 1] = want > 0 ? calloc((size_t)want, sizeof *names) : NULL;
    ssize_t got = names ? orbit_fleet_list(names, (size_t)want) : 0;
    *n = got < 0 ? 0 : got < want ? (size_t)got : (size_t)want;
    return names;
}

/* gc_stop asked for: the pass ends at the next fleet. */
static bool stopping(struct gc *g)
{
    if (!g->running)
        return false;
    pthread_mutex_lock(&g->mu);
    bool stop = g->stop;
    pthread_mutex_unlock(&g->mu);
    return stop;
}

/* Is listed "web@N" a later generation of one of the fleets named ("web")? */
static bool generation_of(const char *listed, const char *const *names, size_t n_names)
{
    const char *at = strchr(listed, '@');
    for (size_t i = 0; at && i < n_names; i++)
        if (strlen(names[i]) == (size_t)(at - listed) && strncmp(names[i], listed, (size_t)(at - listed)) == 0)
            return true;
    return false;
}

void gc_pass(struct gc *g, const char *const *names, size_t n_names, gc_log_fn log)
{
    uint64_t now = now_ns();
    for (size_t i = 0; i < g->n; i++)
        g->v[i].seen = false;
    for (size_t i = 0; names && i < n_names && !stopping(g); i++)
        gc_one(g, names[i], now, log);
    size_t n = 0;   /* every fleet (--all), or the later generations of the ones named */
    char (*all)[ORBIT_FLEET_NAME_MAX + 1] = list_all(&n);
    for (size_t i = 0; i < n && !stopping(g); i++)
        if (!names || generation_of(all[i], names, n_names))
            gc_one(g, all[i], now, log);
    free(all);
    for (size_t i = 0; i < g->n;)   /* fleets no longer there are forgotten */
        if (!g->v[i].seen)
            g->v[i] = g->v[--g->n];
        else
            i++;
}

static void *gc_main(void *arg)
{
    struct gc *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        uint64_t at = now_ns() + (uint64_t)gc_period_ms(g) * 1000000ull;
        struct timespec until = { .tv_sec = (time_t)(at / 1000000000ull), .tv_nsec = (long)(at % 1000000000ull) };
        while (!g->stop && pthread_cond_timedwait(&g->cond, &g->mu, &until) == 0) {}
        if (g->stop)
            break;
        pthread_mutex_unlock(&g->mu);
        gc_pass(g, g->names, g->n_names, g->log);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int gc_start(struct gc *g, const char *const *names, size_t n_names, gc_log_fn log)
{
    g->names = names;
    g->n_names = n_names;
    g->log = log;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cond, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t all, old;
    sigfillset(&all);
    /* A fault's signal stays unblocked: a SIGBUS of a fleet truncated under a pass is liborbit's
     * guard's to answer (blocked, the kernel kills the daemon with it). */
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGSEGV);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* SIGTERM and SIGINT stay the daemon's signalfd's */
    g->running = true;   /* before the thread: its stopping() reads it, and pthread_create orders the two */
    int rc = -pthread_create(&g->thread, NULL, gc_main, g);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        g->running = false;   /* no thread to race with; once one runs, only gc_stop writes it, after the join */
    return rc;
}

void gc_stop(struct gc *g)
{
    if (g->running) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_cond_signal(&g->cond);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
        pthread_cond_destroy(&g->cond);
        pthread_mutex_destroy(&g->mu);
        g->running = false;
    }
    gc_free(g);
}

void gc_free(struct gc *g)
{
    free(g->v);
    g->v = NULL;
    g->n = g->cap = 0;
}
