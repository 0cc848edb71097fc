/* SPDX-License-Identifier: MIT */
/* What one life holds in a pool: its resources, their units and leases, its creation claims. */
#include <stdlib.h>
#include <orbit/inspect.h>
#include "pool_layout.h"

/* Unaccepted reservations (node, inc) holds on resource id: what its death report frees there. */
static uint64_t reserved_by(struct orbit_pool *p, orbit_id id, uint16_t node, uint64_t inc)
{
    struct orbit_lease_info l[2 * POOL_PENDING];
    ssize_t n = orbit_pool_leases(p, id, l, 2 * POOL_PENDING);
    uint64_t mine = 0;
    for (ssize_t i = 0; i < n && i < 2 * POOL_PENDING; i++)
        mine += l[i].state == ORBIT_LEASE_PENDING && l[i].node == node && l[i].incarnation == inc;
    return mine;
}

static void count_key(struct orbit_pool *p, orbit_key key, uint16_t node, uint64_t inc, struct orbit_reclaim *out)
{
    ssize_t n = orbit_pool_candidates(p, key, NULL, 0);
    struct orbit_candidate *c = n > 0 ? calloc((size_t)n, sizeof *c) : NULL;
    if (!c)
        return;
    ssize_t got = orbit_pool_candidates(p, key, c, (size_t)n);
    for (ssize_t i = 0; i < got && i < n; i++) {
        if (c[i].owner != node || c[i].owner_incarnation != inc) {
            out->pool_reserved += reserved_by(p, c[i].id, node, inc);
            continue;
        }
        out->pool_resources++;
        out->pool_units += c[i].capacity;
        out->pool_leases += (uint64_t)c[i].reserved + c[i].active;
    }
    free(c);
}

void pool_account(void *table, uint16_t node, uint64_t inc, struct orbit_reclaim *out)
{
    struct orbit_pool *p = table;
    ssize_t n = orbit_pool_keys(p, NULL, 0);
    struct orbit_pool_key_info *k = n > 0 ? calloc((size_t)n, sizeof *k) : NULL;
    ssize_t got = k ? orbit_pool_keys(p, k, (size_t)n) : 0;
    for (ssize_t i = 0; i < got && i < n; i++)
        count_key(p, k[i].key, node, inc, out);
    free(k);
    if (node >= p->geo.fleet_capacity)
        return;
    /* Claim rows are per node: node_dead returns the whole row of the dead node. */
    for (uint32_t ki = 0; ki < p->geo.key_capacity; ki++)
        out->pool_creating += atomic_load_explicit(pool_claims(p, node, ki), memory_order_relaxed);
}
