/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: its fair share of the upstream budget (share.c), from
 * the fleet's counters: how many workers run, and whether one of them waits
 * with fewer upstreams than its share.
 */
#ifndef ORBIT_RELAY_SHARE_H
#define ORBIT_RELAY_SHARE_H

#include "relay.h"

struct share {
    const struct relay_opts *o;
    struct relay_stats *stats;       /* the whole fleet's counters */
    struct relay_worker_stats *st;   /* this worker's */
    int n_running;                   /* running workers, counted at each tick */
};

/* Counts the running workers (at each tick). */
void share_count(struct share *s);
/* The budget over the running workers, rounded up. */
int  share_fair(const struct share *s);
/* Another running worker waits with fewer upstreams than its share. */
bool share_others_starving(const struct share *s);

#endif
