/* SPDX-License-Identifier: MIT */
/* orbit-reaper --gc: remove the watched fleets nobody has lived in for a while. */
#ifndef ORBIT_REAPER_GC_H
#define ORBIT_REAPER_GC_H

#include <stdint.h>
#include <orbit/fleet.h>

struct gc_fleet {
    char name[ORBIT_FLEET_NAME_MAX + 1];
    uint64_t empty_since_ns;     /* CLOCK_MONOTONIC of the first check that found no live member; 0: one lives */
    bool seen;                   /* still there on this pass */
};

struct gc {
    uint64_t after_ns;           /* --gc SECONDS */
    struct gc_fleet *v;
    size_t n, cap;
};

/* What a pass did to one fleet: collected (rc 0) or refused (rc < 0, someone joined). */
typedef void (*gc_log_fn)(const char *fleet, uint64_t empty_ms, int rc);

/* The check period for --gc SECONDS, in ms. */
int  gc_period_ms(const struct gc *g);
/*
 * One pass over names (the fleets watched; NULL with all: every fleet there
 * is): a fleet with no live member on every pass for after_ns is collected.
 */
void gc_pass(struct gc *g, const char *const *names, size_t n_names, gc_log_fn log);
void gc_free(struct gc *g);

#endif
