/* SPDX-License-Identifier: MIT */
/*
 * What the conformance suite asks of a table, through the public API only: one
 * description per table (tables.c), run by every case of test_conformance.c,
 * as iceoryx2's conformance tests run every implementation of a trait.
 */
#ifndef ORBIT_CONFORMANCE_TABLES_H
#define ORBIT_CONFORMANCE_TABLES_H

#include <stdbool.h>
#include <stdint.h>
#include <orbit/orbit.h>

#define CT_CAPACITY 4   /* the fleets' capacity: nodes 0 (the test) and 1 (a member it kills) */

/* Which spec an open asks for: the one every process uses, the same kind with another
 * geometry, one with a field out of range, one with a reserved word set. */
enum ct_spec { CT_SPEC, CT_OTHER, CT_BAD, CT_RESV };

struct ct_table {
    const char *name;        /* the type orbit_fleet_tables names its segment by */
    const char *open_call;   /* the call orbit_last_error names when an open is refused */
    uint8_t kind;            /* its segment's kind (a table of tables: its arena's) */
    unsigned segments;       /* segments one open makes */
    int  (*open)(struct orbit_fleet *, enum ct_spec, void **out);
    /* NULL for a table of tables (exchanges): its parts open as streams and an arena. */
    int  (*open_existing)(struct orbit_fleet *, uint8_t kind, void **out);
    void (*close)(void *);
    uint64_t (*epoch)(void *);   /* the table's own epoch call; NULL: none */
    int  (*readiness)(void *);   /* NULL: the table has no readiness descriptor */
    /* Take something of the table as this handle's member (a resource, a side, a chunk,
     * a claim); 0. What it took stays taken until drop, a reset or a death report. */
    int  (*hold)(void *);
    /* Let go of what hold took, in this process (after a reset: handles read stale). */
    void (*drop)(void);
    /* How many things node holds, as any handle of the fleet sees them. */
    long (*held)(void *, uint16_t node);
    /* The part of orbit_fleet_account that counts what hold took. */
    uint64_t (*accounted)(const struct orbit_reclaim *);
    /* The table's own calls of the death and reset contract (void in the installed headers). */
    void (*node_dead)(void *, uint16_t node, uint64_t incarnation);
    void (*reset_all)(void *);
    /* A call that enters the table with valid arguments: -ORBIT_EFORKED in a fork child. */
    int  (*forked_call)(void *);
};

extern const struct ct_table ct_tables[];
extern const unsigned ct_table_count;

#endif
