/* SPDX-License-Identifier: MIT */
/*
 * What every table handle is before it is a pool, streams, an arena or a
 * ledger: its fleet, its segment, who it is (node, incarnation, fork
 * generation), its readiness descriptor, its wait statistics and shared
 * counters. Written once here; a table's handle begins with
 *
 *     struct orbit_pool {
 *         ORB_TABLE_BASE;          the fields below, by name (p->fleet, p->seg, ...)
 *         ...the table's own fields
 *     };
 *
 * and hands &p->base to these calls. The table's own files form floors above
 * it: layout and handle, then its operations, then death/reset/account ops.
 */
#ifndef ORB_CORE_TABLE_BASE_H
#define ORB_CORE_TABLE_BASE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "counters.h"
#include "segment.h"
#include "tally.h"
#include "wait.h"

struct orbit_fleet;

#define ORB_TABLE_BASE_FIELDS                                                              \
    struct orbit_fleet *fleet;                                                             \
    struct orb_segment seg;                                                                \
    uint8_t  kind;                                                                         \
    bool     observer;           /* no node: creates nothing, counts nothing */            \
    uint16_t node;               /* ORBIT_NODE_NONE for observers */                       \
    uint32_t fork_generation;    /* the fleet handle's: another is a fork child's (guard.h) */ \
    uint64_t incarnation;                                                                  \
    pthread_mutex_t lock;        /* readiness_fd */                                        \
    int readiness_fd;            /* the node doorbell's eventfd, or -1 */                  \
    _Alignas(64) struct orb_wait_stats stats;   /* written by every thread: a line of its own */ \
    struct orb_ctr_ref ctr;      /* shared counters (counters.h) */                        \
    struct orb_tally tally       /* the handle's own counts, per thread (tally.h) */

struct orb_table_base {
    ORB_TABLE_BASE_FIELDS;
};

/* The base by name and its fields by theirs: one layout (a union of a struct and its copy). */
#define ORB_TABLE_BASE                                                                     \
    union {                                                                                \
        struct orb_table_base base;                                                        \
        struct { ORB_TABLE_BASE_FIELDS; };                                                 \
    }

static inline bool orb_is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static inline size_t orb_align_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* A handle for fleet f, zeroed but for the base; NULL without memory. Free with orb_table_free. */
void *orb_table_alloc(size_t bytes, struct orbit_fleet *f);
/* The segment is mapped and checked: the handle's kind and counters follow it. */
void orb_table_bound(struct orb_table_base *b);
/* Close the readiness descriptor, the counters and the segment, free the handle. */
void orb_table_free(struct orb_table_base *b);

/*
 * Open the existing segment of kind for a table of type whose geometry is
 * geometry_len bytes, and copy its geometry out: 0; -ORBIT_EGEOMETRY (another
 * table type or geometry size); the open's error. The table still checks the
 * geometry's values (they come from another process).
 */
int orb_table_open_existing(struct orb_table_base *b, uint8_t kind, uint8_t type, void *geometry,
                            size_t geometry_len);

/* What the base needs of a table type to open an existing segment of it for any caller. */
struct orb_table_kind {
    uint8_t type;                  /* the segment header's table_type */
    size_t handle_bytes;           /* sizeof the table's handle (it begins with ORB_TABLE_BASE) */
    size_t geometry_len;           /* sizeof its geometry */
    /* After the handle is allocated: the table's own fields that need no segment. NULL: none. */
    void (*prepare)(struct orb_table_base *b);
    /* The segment is mapped and its geometry copied out: check the values (they come from
     * another process) into the table's layout (at most ORB_TABLE_LAYOUT_MAX bytes), then bind
     * the handle to it. check: 0, -ORBIT_EGEOMETRY or -ORBIT_ECORRUPT. */
    int  (*check)(const struct orb_segment *seg, const void *geometry, void *layout);
    void (*bind)(struct orb_table_base *b, const void *geometry, const void *layout);
    /* Instead of check and bind, for a table whose binding can fail. */
    int  (*attach)(struct orb_table_base *b, const void *geometry);
};
#define ORB_TABLE_LAYOUT_MAX 256u

/*
 * orbit_*_open_existing for every table: the entry checks (call names the API),
 * then a handle of k's type over the existing segment of kind, in *out. 0, or
 * the open's or attach's error with nothing left behind.
 */
int orb_table_open_existing_as(const struct orb_table_kind *k, struct orbit_fleet *f, uint8_t kind,
                               void **out, const char *call);

/*
 * orbit_*_open's second half for a table with check and bind: a handle over
 * the segment req names (created or opened with the same geometry), bound to
 * the layout the caller computed. Nothing of the member's lane is pre-faulted
 * here: the table populates what it starts using (orb_table_populate). 0 and
 * *out, or the error with nothing left behind.
 */
int orb_table_create(const struct orb_table_kind *k, struct orbit_fleet *f, struct orb_seg_request *req,
                     const void *layout, void **out);

/* The creator's initialiser of tables whose new segment reads zero: a first epoch. */
int orb_table_init_epoch(struct orb_segment *seg, void *ctx);

/*
 * Pre-fault [off, off + len) of the segment for writing, as this member
 * starts using it (a stream's rings, a run of arena slots): pages that exist
 * before anything is published there, so no later touch can SIGBUS on a full
 * mount. 0, or -ENOMEM with the sentence (what, the bytes asked and the
 * mount's room) for orbit_last_error, which names the running call.
 * Anonymous (PRIVATE) memory needs none.
 */
int orb_table_populate(struct orb_table_base *b, size_t off, size_t len, const char *what);

/*
 * The node doorbell's eventfd for this handle, made once: fd; -ORBIT_EBUSY
 * for a second call, -ORBIT_ENOTOWNER for an observer. call names the API.
 */
int orb_table_readiness(struct orb_table_base *b, const char *call);
/* The same for a handle that is not a segment's (exchanges): its own lock and descriptor slot. */
int orb_node_readiness(struct orbit_fleet *f, bool observer, pthread_mutex_t *lock, int *fd_slot,
                       const char *call);

#endif
