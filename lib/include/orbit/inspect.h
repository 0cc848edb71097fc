/* SPDX-License-Identifier: MIT */
/*
 * orbit/inspect.h — for tools and supervisors: a fleet's tables, what a
 * death gives back, resetting every table, node records, process identity.
 *
 * Every table module built into this library (pool, streams, admission,
 * arena) answers these calls for its segments; a segment of a table type
 * this build does not have is listed with built = false and left alone.
 */
#ifndef ORBIT_INSPECT_H
#define ORBIT_INSPECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <orbit/fleet.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORBIT_TABLE_NAME_MAX 15

/* One table segment of a fleet. */
struct orbit_table_info {
    uint8_t  kind;                           /* the segment's kind */
    uint8_t  type;                           /* the table type its header records */
    bool     built;                          /* this library has that table's module */
    char     name[ORBIT_TABLE_NAME_MAX + 1]; /* orbit_table_type_name(type) */
    uint64_t epoch;                          /* the table's epoch (reset_all starts a new one) */
    uint64_t resv[4];                        /* zero */
};

/*
 * orbit_fleet_tables - the fleet's table segments (not the fleet segment),
 * in kind order. Fills up to max; returns how many there are (may exceed
 * max), or -ORBIT_EMALFORMED.
 */
ssize_t orbit_fleet_tables(struct orbit_fleet *, struct orbit_table_info *out, size_t max);

/* "fleet", "pool", "streams", "admission", "arena" (types this build has); else "unknown". */
const char *orbit_table_type_name(unsigned type);

/* What one life holds in a fleet's tables: what its death gives back. */
struct orbit_reclaim {
    uint32_t tables;             /* table segments counted */
    uint32_t pool_resources;     /* resources it owns */
    uint64_t pool_units;         /* their capacity */
    uint64_t pool_leases;        /* reservations and active leases on them */
    uint64_t pool_creating;      /* creation claims its node holds */
    uint32_t stream_sides;       /* stream sides it holds */
    uint64_t stream_unread;      /* bytes queued towards it */
    uint32_t admission_claims;   /* live admission claims */
    uint64_t admission_units;    /* their units, summed over domains */
    uint32_t arena_chunks;       /* arena runs it reserved, committed unread, or is reading */
    uint64_t arena_bytes;        /* slot bytes those runs occupy */
    uint64_t pool_reserved;      /* unaccepted reservations it holds on resources of other lives */
    uint64_t resv[5];            /* zero */
};

/*
 * orbit_fleet_account - count what (node, incarnation) holds in every table
 * of the fleet, as node_dead would give it back (call it just before
 * orbit_fleet_node_dead). A racy snapshot: tables are not locked. Table
 * handles are kept in the fleet handle between calls and reopened when the
 * fleet's segments change. 0, or -ORBIT_EMALFORMED.
 */
int orbit_fleet_account(struct orbit_fleet *, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);

/*
 * orbit_fleet_reset_tables - reset_all on every table of the fleet (a new
 * epoch; every lease, side, claim and chunk of before reads stale). For a
 * quiescent fleet only: the caller checks that no member is alive. Tables
 * of types this build lacks are left alone. Returns how many tables were
 * reset, or the first negative code met (every table is still tried).
 */
int orbit_fleet_reset_tables(struct orbit_fleet *);

/* One node record, read consistently, with no liveness probe. */
struct orbit_node_snapshot {
    uint16_t node;
    enum orbit_node_state state; /* a node being reported dead reads JOINING */
    int32_t  pid;
    uint64_t start_time;         /* orbit_process_start_time of the member */
    uint64_t incarnation;
    uint64_t joins;              /* times the node was claimed: tells two claims apart */
    uint64_t pid_namespace;      /* inode of the member's pid namespace (pid is in it); 0 unknown */
    uint64_t resv[3];            /* zero */
};

/*
 * orbit_fleet_node_snapshot - 0; -ORBIT_EAGAIN when the record kept changing
 * under the read (try again); -ORBIT_EMALFORMED for node >= capacity;
 * -ORBIT_ECORRUPT when the fleet file shrank under it; -ORBIT_EFORKED for a
 * parent's handle in a fork child.
 */
int orbit_fleet_node_snapshot(struct orbit_fleet *, uint16_t node, struct orbit_node_snapshot *out);

/*
 * orbit_fleet_replaced - 1 when the fleet segment this handle maps is no
 * longer the file under its name (unlinked, or unlinked and created again):
 * reopen to follow it. 0 when it still is (and for PRIVATE fleets); a
 * negated errno when that cannot be checked.
 */
int orbit_fleet_replaced(struct orbit_fleet *);

/*
 * orbit_process_start_time - the start time of process pid (field 22 of
 * /proc/<pid>/stat, clock ticks since boot): with the pid it names one
 * process life. A process counts as gone once it has exited, reaped by its
 * parent or not: a zombie whose every thread has exited is -ESRCH. A leader
 * that called pthread_exit while other threads run is alive.
 * 0; -ESRCH (no such process, or exited); -EACCES or another negated errno
 * when /proc cannot tell (hidepid).
 */
int orbit_process_start_time(int32_t pid, uint64_t *out);

/*
 * orbit_process_exiting - 1 when every thread of process pid has begun
 * exiting (or it is gone): it will never run user code again, though it may
 * not be a zombie yet. 0 when a thread still runs; a negated errno when
 * /proc cannot tell.
 */
int orbit_process_exiting(int32_t pid);

/* ---- counters ---- */

#define ORBIT_COUNTERS_MAX 14

/*
 * What the members of a fleet did in one table, counted in the fleet segment
 * by the process that did it and kept past its death: value[i] is counter i
 * of the table's type (orbit_counter_name). Counters only grow: a life's
 * counts are folded into the fleet's totals when it ends.
 */
struct orbit_counters {
    uint8_t  kind;                       /* the table's kind */
    uint16_t node;                       /* the node asked for, or ORBIT_NODE_NONE: the fleet's totals */
    uint32_t slots;                      /* writer slots read (threads of lives counting in this table) */
    uint64_t value[ORBIT_COUNTERS_MAX];
    uint64_t resv[4];                    /* zero */
};

/*
 * orbit_fleet_counters - the counts of table kind for node (its lives not yet
 * ended, whatever thread counted), or for node ORBIT_NODE_NONE the fleet's
 * totals: every life's counts, ended or not, with those counted when no
 * writer slot was free. A consistent read (no fold is half seen). Works on
 * observer handles. 0; -ORBIT_EMALFORMED (NULL, node >= capacity and not
 * ORBIT_NODE_NONE); -ORBIT_ECORRUPT (a garbled region); -ORBIT_ETIMEDOUT
 * (a fold lock held past its bound).
 */
int orbit_fleet_counters(struct orbit_fleet *, uint8_t kind, uint16_t node, struct orbit_counters *out);

/*
 * orbit_counter_name - counter index of table type (orbit_fleet_tables'
 * type) as a metric name without the unit suffix ("parks", "reservations",
 * "bytes_written"), or NULL past the last counter of that type.
 * orbit_counter_help - its one-sentence description, or NULL.
 */
const char *orbit_counter_name(unsigned type, unsigned index);
const char *orbit_counter_help(unsigned type, unsigned index);

#define ORBIT_RECLAIM_BUCKETS 12

/* The fleet's deaths and leaves, counted in the fleet segment. */
struct orbit_death_counters {
    uint64_t deaths_reported;            /* lives ended by a death report (any reporter) */
    uint64_t leaves;                     /* lives ended by orbit_fleet_leave */
    uint64_t reclaim_ns_sum;             /* time those reports took to give back every table's share */
    uint64_t reclaim_bound_ns[ORBIT_RECLAIM_BUCKETS];   /* bucket upper bounds; the last is UINT64_MAX */
    uint64_t reclaim_le[ORBIT_RECLAIM_BUCKETS];         /* reports that took at most the bound (cumulative) */
    uint64_t resv[4];                    /* zero */
};
/* orbit_fleet_death_counters - 0, or -ORBIT_EMALFORMED for a NULL argument. */
int orbit_fleet_death_counters(struct orbit_fleet *, struct orbit_death_counters *out);

#ifdef __cplusplus
}
#endif
#endif
