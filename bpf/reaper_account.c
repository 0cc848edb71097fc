/* SPDX-License-Identifier: MIT */
/*
 * What a dead incarnation held: liborbit counts it (orbit_fleet_account, with
 * table handles kept in the observer fleet handle between deaths); the report
 * carries the same fields.
 */
#include <string.h>
#include <orbit/inspect.h>
#include "reaper_account.h"

void rp_account(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, struct orbit_reaper_reclaim *out)
{
    struct orbit_reclaim r;
    memset(out, 0, sizeof *out);
    if (orbit_fleet_account(f, node, incarnation, &r) < 0)
        return;
    *out = (struct orbit_reaper_reclaim){
        .tables = r.tables, .pool_resources = r.pool_resources, .pool_units = r.pool_units,
        .pool_leases = r.pool_leases, .pool_creating = r.pool_creating, .stream_sides = r.stream_sides,
        .stream_unread = r.stream_unread, .admission_claims = r.admission_claims,
        .admission_units = r.admission_units, .arena_chunks = r.arena_chunks, .arena_bytes = r.arena_bytes,
    };
}
