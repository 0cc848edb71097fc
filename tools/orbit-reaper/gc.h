/* SPDX-License-Identifier: MIT */
/* orbit-reaper --gc: remove the watched fleets nobody has lived in for a while. */
#ifndef ORBIT_REAPER_GC_H
#define ORBIT_REAPER_GC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <orbit/fleet.h>

/* What a pass did to one fleet: collected (rc 0) or refused (rc < 0, someone joined). */
typedef void gc_log_fn_t(const char *fleet, uint64_t empty_ms, int rc);
typedef gc_log_fn_t *gc_log_fn;

struct gc_fleet {
    char name[ORBIT_FLEET_NAME_MAX + 1];
    uint64_t empty_since_ns;     /* CLOCK_MONOTONIC of the first check that found no live member; 0: one lives */
    bool seen;                   /* still there on this pass */
};

struct gc {
    uint64_t after_ns;           /* --gc SECONDS */
    struct gc_fleet *v;
    size_t n, cap;
    /* gc_start's thread: */
    const char *const *names;
    size_t n_names;
    gc_log_fn_t *log;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop, running;
};

/* The check period for --gc SECONDS, in ms. */
int  gc_period_ms(const struct gc *g);
/*
 * One pass over names (the fleets watched; NULL with all: every fleet there
 * is): a fleet with no live member on every pass for after_ns is collected.
 */
void gc_pass(struct gc *g, const char *const *names, size_t n_names, gc_log_fn log);
/*
 * Passes every gc_period_ms on a thread of their own (started with every
 * signal blocked), so a fleet that is slow to look at (every lock is tested;
 * a segment still being created is skipped until the next pass, never waited
 * for) delays collection only, never a death report. 0 or a negated errno. gc_stop ends it after the pass under
 * way and frees what it kept.
 */
int  gc_start(struct gc *g, const char *const *names, size_t n_names, gc_log_fn log);
void gc_stop(struct gc *g);
void gc_free(struct gc *g);

#endif
