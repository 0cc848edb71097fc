/* SPDX-License-Identifier: MIT */
/*
 * One description per kind of table: how the core reaches a table it does not
 * know. Each table module registers its ops once, in its top file (the one
 * with its death and reset calls, above everything else of the table):
 *
 *     static const struct orb_table_ops pool_ops = { .kind = &pool_kind, ... };
 *     ORB_TABLE_REGISTER(pool_ops);
 *
 * Every object of the library is linked (the shared library, and whole for
 * the internal static one), so every table built in is registered.
 * The linker gathers the entries into the section orb_tables; the core walks
 * __start_orb_tables .. __stop_orb_tables.
 */
#ifndef ORB_CORE_TABLE_OPS_H
#define ORB_CORE_TABLE_OPS_H

#include <stdint.h>
#include <orbit/inspect.h>
#include "table_base.h"

/* One counter a table keeps (counters.h): a Prometheus-style name without the _total, a sentence. */
struct orb_counter_def {
    const char *name;
    const char *help;
};

/*
 * The ops contract. Every op returns what the core needs to know, as an int:
 * 0, or a negative code the core acts on. The installed headers' per-table
 * calls (orbit_pool_node_dead, orbit_streams_node_dead, orbit_arena_node_dead,
 * orbit_admission_node_dead, and orbit_pool_/streams_/arena_reset_all) keep
 * the void they were published with (the ABI: add, never change a
 * signature); each is its table's op behind the entry check, with the
 * outcome dropped. A caller that needs the outcome of a death report calls
 * orbit_fleet_node_dead, which returns the first table's error.
 */
struct orb_table_ops {
    const struct orb_table_kind *kind;   /* its type, and how the core opens one (table_base.h) */
    const char *name;             /* "pool", "streams", ... (at most ORBIT_TABLE_NAME_MAX bytes) */
    uint32_t layout;              /* the layout version its segments are made at (orbit_layout_version) */
    /* A confirmed death of (node, incarnation): give back its share, wake its waiters.
     * 0, or a negative code when the share could not be given back yet (a lock held
     * past its bound): the fleet keeps the node REAPING for a later report. */
    int  (*node_dead)(void *table, uint16_t node, uint64_t incarnation);
    /* Quiescent owner boot: a new epoch, everything free. 0 or a negative code. */
    int  (*reset_all)(void *table);
    /* Add what (node, incarnation) holds to out (the fields of this table). */
    void (*account)(void *table, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);
    /* Its own counters, at ORB_CTR_TABLE_FIRST.. (at most ORB_CTR_VALUES - ORB_CTR_TABLE_FIRST). */
    const struct orb_counter_def *counters;
    unsigned counter_count;
};

#if defined(__has_attribute)
#if __has_attribute(retain)
#define ORB_RETAIN retain,
#endif
#endif
#ifndef ORB_RETAIN
#define ORB_RETAIN
#endif

#define ORB_TABLE_REGISTER(ops)                                                          \
    __attribute__((used, ORB_RETAIN section("orb_tables"), aligned(sizeof(void *))))     \
    static const struct orb_table_ops *const orb_table_entry_##ops = &(ops)

/* The registered ops for a table type, or NULL when this build has no such table. */
const struct orb_table_ops *orb_table_ops_of(uint8_t type);

/* Free the table handles orbit_fleet_account keeps in the fleet handle. */
struct orbit_fleet;
void orb_table_cache_free(struct orbit_fleet *f);

#endif
