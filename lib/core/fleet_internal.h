/* SPDX-License-Identifier: MIT */
/* The fleet as the tables see it: node records, doorbells, table segments. */
#ifndef ORB_CORE_FLEET_INTERNAL_H
#define ORB_CORE_FLEET_INTERNAL_H

#include <pthread.h>
#include <orbit/fleet.h>
#include <orbit/version.h>
#include "counters.h"
#include "segment.h"
#include "wait.h"

/* One record per node in the fleet segment; 64 bytes, one cache line. */
struct orb_node_record {
    _Atomic uint32_t state;        /* enum orbit_node_state */
    _Atomic int32_t  pid;
    _Atomic uint64_t start_time;   /* /proc/<pid>/stat field 22 */
    _Atomic uint64_t incarnation;
    struct orb_waitword doorbell;  /* rung when a watched thing of this node changes */
    _Atomic uint64_t joins;        /* times this node was claimed; a life holds lock byte joins % 64 */
    _Atomic uint64_t pidns;        /* the member's pid namespace (inode; 0 unknown): display, reapers */
    struct orb_waitword life_end;  /* kicked when a life of this node ends (death seen, leave, report) */
    uint8_t pad[8];
};
_Static_assert(sizeof(struct orb_node_record) == 64, "node record is one cache line");

/* Members hold kernel locks on their node's bytes of the fleet file (life.h). */
#define ORB_FLEET_LAYOUT_VERSION 4u   /* 4: the geometry names the generation and its layouts */

/* This library's layouts by ORBIT_LAYOUT_* ([0] the segment header; one it lacks: 0) (version.c). */
void orb_layouts(uint16_t out[ORBIT_LAYOUTS_MAX]);

/* The counters region (counters.h) starts on the page after the node records. */
static inline size_t orb_fleet_counters_offset(uint32_t capacity)
{
    return ((size_t)capacity * sizeof(struct orb_node_record) + 4095u) & ~(size_t)4095u;
}
static inline size_t orb_fleet_table_bytes(uint32_t capacity)
{
    return orb_fleet_counters_offset(capacity) + orb_ctr_region_bytes(capacity);
}

struct orb_fleet_geometry {        /* the fleet segment's geometry */
    uint32_t capacity;
    uint32_t record_bytes;
    uint32_t layout_version;
    uint32_t counter_slots;        /* orb_ctr_slot_count(capacity) */
    uint32_t counter_values;       /* ORB_CTR_VALUES */
    uint32_t generation;           /* 1, or N of the qualified name "fleet@N" (fleet_name.h) */
    uint16_t layouts[ORBIT_LAYOUTS_MAX];   /* every segment of the generation is at these (generation.h) */
};

#define ORB_PRIVATE_TABLES_MAX 32

struct orbit_fleet {
    char name[ORBIT_FLEET_NAME_MAX + 1];   /* "" for PRIVATE */
    bool is_private;
    bool observer;                          /* no node claimed */
    uint16_t capacity;
    uint16_t node;                          /* ORBIT_NODE_NONE for observers */
    uint32_t generation;                    /* name is its qualified name (generation.h) */
    uint64_t incarnation;
    uint64_t joins;                         /* our life: it holds lock byte joins % 64 */
    enum orbit_backing want_backing;        /* what the joiner asked for */
    uint32_t mode;
    int64_t gid;
    int ready_wait_ms;                      /* table opens' wait for a creator (-1: the default bound) */
    struct orb_segment seg;                 /* the fleet segment (kind 255) */
    int life_fd;                            /* the fleet file again, never mapped: our kernel locks */
    struct orb_node_record *nodes;          /* capacity records */
    struct orb_ctr_header *ctr;             /* the counters region (counters.h) */
    struct orb_ctr_totals *ctr_totals;      /* ORB_CTR_KINDS */
    struct orb_ctr_slot *ctr_slots;         /* ctr_slot_count */
    uint32_t ctr_slot_count;
    pthread_mutex_t lock;                   /* guards private_tables and table_cache */
    uint32_t fork_generation;               /* orb_fork_generation when made: another is a fork child's */
    _Atomic uint64_t *owner_busy;           /* a bit per node: a thread of this handle holds its owner byte */
    struct orbit_fleet *next_live;          /* the process's handles (life.c), for fork */
    struct {
        uint8_t kind;
        int refs;
        struct orb_segment seg;
    } private_tables[ORB_PRIVATE_TABLES_MAX];
    struct orb_table_cache *table_cache;    /* orbit_fleet_account's handles (tables.c) */
};

/*
 * Table segments of this fleet. For a named fleet every call maps the named
 * segment; for a PRIVATE fleet the same kind opened twice shares one
 * anonymous mapping (refcounted), so several handles see one table.
 */
int  orb_fleet_table_open(struct orbit_fleet *f, struct orb_seg_request *req, struct orb_segment *out);
int  orb_fleet_table_open_existing(struct orbit_fleet *f, uint8_t kind, struct orb_segment *out);
void orb_fleet_table_close(struct orbit_fleet *f, struct orb_segment *seg);
/* Sets bit k of present[4] for each segment file orbit.<name>.<k> in the backing directories. */
int  orb_fleet_segment_kinds(const char *name, uint64_t present[4]);
/* Calls fn for each "orbit.<name>.<kind>" file in the backing directories (fleet_files.c). */
typedef void orb_segment_fn(void *ctx, const char *dir, const char *name, unsigned kind, enum orbit_backing b);
void orb_fleet_scan_segments(orb_segment_fn *fn, void *ctx);

/* The node's record, or NULL if node >= capacity. */
static inline struct orb_node_record *orb_fleet_record(struct orbit_fleet *f, uint32_t node)
{
    return node < f->capacity ? &f->nodes[node] : (struct orb_node_record *)0;
}

/* Ring a node's doorbell (wake its readiness drivers / doorbell waiters). */
void orb_fleet_ring_doorbell(struct orbit_fleet *f, uint32_t node, struct orb_wait_stats *stats);

/* Is the node's current life alive (its holder keeps its kernel lock)? Our own node: yes (life.c). */
bool orb_node_alive(struct orbit_fleet *f, uint16_t node);
/* node_dead on every table of the fleet through the registered table ops (tables.c); the
 * caller (fleet.c's report) kicks the doorbells after it: the registry calls nothing above. */
int  orb_dispatch_node_dead(struct orbit_fleet *f, uint16_t node, uint64_t incarnation);

/*
 * An observer with read access only (its segments opened O_RDONLY, mapped
 * copy-on-write): calls that would change the fleet for others are -EACCES,
 * named; inspection works. 0 otherwise.
 */
int  orb_fleet_writable(const struct orbit_fleet *f, const char *call);

#endif
