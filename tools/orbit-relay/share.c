/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: fair shares of the budget. Local-first alone lets one
 * worker keep every upstream it dialled: it re-leases each one the moment it
 * completes, before a waiting peer is even scheduled. So a worker holds at
 * most its share of the budget (budget over running workers, rounded up)
 * while another worker waits with less than its share: it dials no more
 * (dispatch.c), and gives back a surplus upstream when one comes free
 * (upstream.c). The counters in the relay's shared stats say who waits.
 */
#include "share.h"

void share_count(struct share *s)
{
    int n = 1;
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        struct relay_worker_stats *o = &s->stats->w[i];
        if (o != s->st && STAT_GET(o, state) == SLOT_RUNNING)
            n++;
    }
    s->n_running = n;
}

int share_fair(const struct share *s)
{
    int n = s->n_running > 0 ? s->n_running : 1;
    return (s->o->upstreams + n - 1) / n;
}

bool share_others_starving(const struct share *s)
{
    uint64_t share = (uint64_t)share_fair(s);
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        struct relay_worker_stats *o = &s->stats->w[i];
        if (o != s->st && STAT_GET(o, state) == SLOT_RUNNING && STAT_GET(o, queued) > 0 &&
            STAT_GET(o, upstreams_open) < share)
            return true;
    }
    return false;
}
