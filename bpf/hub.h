/* SPDX-License-Identifier: MIT */
/*
 * What the event loop (reaper.c) shares with every fleet's thread
 * (reaper_fleet.c): the backend, the settings they read, the counts they
 * move, and the budget, reports and tgid index they all use. The event
 * loop's own state (its fleets, callbacks and descriptors) stays in
 * reaper.c; a fleet's thread sees this and its own fleet only.
 *
 * Locks, in the order they may nest: the event loop's lock (reaper.c), a
 * fleet's inbox (rf->mu: held briefly by both sides), reports.lock,
 * budget.mu, tgids.mu, the backend's own. A fleet's thread never takes the
 * event loop's lock.
 */
#ifndef ORB_REAPER_HUB_H
#define ORB_REAPER_HUB_H

#include <stdatomic.h>
#include <stdint.h>
#include <orbit/reaper.h>
#include "backend.h"
#include "reaper_budget.h"
#include "reaper_report.h"
#include "reaper_tgid.h"

/* The reaper's own counts (orbit_reaper_stats): atomics, moved by any thread. */
struct rp_counts {
    _Atomic uint64_t events, deaths, ignored, drops, rescans, quarantines;
    _Atomic uint32_t fleets, watched, quarantined;
};

struct rp_hub {
    const struct rp_backend_ops *ops;   /* the backend, called only through its ops; set at open */
    struct rp_backend *be;
    enum orbit_reaper_backend backend;  /* ops->kind */
    uint64_t pidns;             /* the reaper's pid namespace inode; 0: no member counts as visible */
    _Atomic int interval_ms;
    _Atomic unsigned flags;     /* orbit_reaper_on_death's */
    struct rp_counts counts;
    struct rp_budget budget;
    struct rp_reports reports;
    struct rp_tgids tgids;      /* which fleets watch a tgid, when the backend is per tgid */
};

#endif
