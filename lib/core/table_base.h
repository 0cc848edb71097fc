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

/*
 * What the base needs of a table type: one description per table, the one
 * way every table is created, opened, bound and readied (design.md §11).
 *
 *   prepare   after the handle is allocated: the table's own fields that need
 *             no segment (test hooks, the fleet's capacity). NULL: none.
 *   check     the segment is mapped and its geometry read: check the values
 *             (another process wrote them; the creator's own too, the same
 *             way) into the table's layout (at most ORB_TABLE_LAYOUT_MAX
 *             bytes). 0, -ORBIT_EGEOMETRY or -ORBIT_ECORRUPT.
 *   bind      point the handle into the segment by that layout.
 *   ready     what this member starts using before the handle is handed out
 *             (the pool's lane pre-faulted, the ledger's scratch allocated):
 *             0 or a negative code. NULL: none.
 *   release   free what prepare or ready allocated. NULL: none.
 *
 * After bind the base binds itself (kind, counters, the SIGBUS guard), then
 * ready runs.
 */
struct orb_table_kind {
    uint8_t type;                  /* the segment header's table_type */
    size_t handle_bytes;           /* sizeof the table's handle (it begins with ORB_TABLE_BASE) */
    size_t geometry_len;           /* sizeof its geometry */
    void (*prepare)(struct orb_table_base *b);
    int  (*check)(const struct orb_segment *seg, const void *geometry, void *layout);
    void (*bind)(struct orb_table_base *b, const void *geometry, const void *layout);
    int  (*ready)(struct orb_table_base *b);
    void (*release)(struct orb_table_base *b);
};
#define ORB_TABLE_LAYOUT_MAX 256u

/* A handle for fleet f, zeroed but for the base; NULL without memory. Free with orb_table_free. */
void *orb_table_alloc(size_t bytes, struct orbit_fleet *f);
/* Close the readiness descriptor, the counters and the segment, free the handle. */
void orb_table_free(struct orb_table_base *b);

/*
 * orbit_*_open's second half: a handle over the segment req names (created,
 * or opened when it exists with the same geometry), checked, bound and
 * readied as k says. An observer creates nothing: it opens the existing
 * segment, which must have req's geometry (-ORBIT_EGEOMETRY names what
 * differs). 0 and *out, or the error with nothing left behind.
 */
int orb_table_create(const struct orb_table_kind *k, struct orbit_fleet *f, struct orb_seg_request *req,
                     void **out);

/*
 * orbit_*_open_existing for every table: the entry checks (call names the API),
 * then a handle of k's type over the existing segment of kind, in *out. 0,
 * -ORBIT_EGEOMETRY (another table type or geometry size), or the open's or
 * k's error with nothing left behind.
 */
int orb_table_open_existing_as(const struct orb_table_kind *k, struct orbit_fleet *f, uint8_t kind,
                               void **out, const char *call);

/* The same without the entry checks, for the core's registry (tables.c): the table of
 * kind, opened as this fleet handle may (observers too). */
int orb_table_open(const struct orb_table_kind *k, struct orbit_fleet *f, uint8_t kind, void **out);

/* orbit_*_close for every table: k's release, then orb_table_free. NULL: nothing. */
void orb_table_close(const struct orb_table_kind *k, struct orb_table_base *b);

/* The creator's initialiser of tables whose new segment reads zero: a first epoch. */
int orb_table_init_epoch(struct orb_segment *seg, void *ctx);

/*
 * Pre-fault [off, off + len) of the segment for writing, as this member
 * starts using it (the pool's lane, a stream's rings, a run of arena slots): pages that exist
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

#endif
