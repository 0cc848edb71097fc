/* SPDX-License-Identifier: MIT */
/*
 * Counters in the fleet segment: what every member did, readable from outside
 * and kept past the member's death.
 *
 * The fleet segment holds, after its node records:
 *   orb_ctr_header             the fold lock and its sequence, the fleet's death counters
 *   totals[256] x 128 B        per table kind: the counts of slots folded (ended lives)
 *                              and the overflow line, counted with atomic adds
 *   slots[slot_count] x 128 B  one writer each: a thread of one life counting one table
 *
 * Writes: a thread counts into its own slot (claimed once per table handle and
 * thread, kept in thread-local storage) with plain relaxed loads and stores,
 * no locked instruction, on lines no other process writes. A slot is tagged
 * with its table kind, node and incarnation; when a thread ends or a handle
 * closes its slot is ORPHAN, adopted by the next thread of the same life.
 * When every slot is taken, counts go to the kind's overflow line (atomic
 * adds): still counted in the totals, under no node.
 *
 * Folds: a death report (and a leave) moves the slots of the ended life into
 * their kind's totals, so totals never go backwards. A fold runs under the fold
 * lock with a redo record (old totals, the slot's values): whoever recovers the
 * lock from a folder that died finishes its fold exactly once. Readers take no
 * lock: they read between two equal, even values of the fold sequence.
 */
#ifndef ORB_CORE_COUNTERS_H
#define ORB_CORE_COUNTERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "fastpath.h"
#include "lock.h"

#define ORB_CTR_VALUES      14u     /* counters per slot: 5 every table has, the rest the table's own */
#define ORB_CTR_KINDS       256u
#define ORB_CTR_RECLAIM_BUCKETS 12u

/* Counters every table has, at these indices; a table's own start at ORB_CTR_TABLE_FIRST. */
enum {
    ORB_CTR_PARKS = 0,        /* waiters that slept in the kernel */
    ORB_CTR_WAKES,            /* FUTEX_WAKEs issued */
    ORB_CTR_DOORBELLS,        /* node doorbells rung */
    ORB_CTR_URING_ARMED,      /* io_uring FUTEX_WAIT SQEs prepared */
    ORB_CTR_URING_READY,      /* io_uring preps that found the wait already satisfied */
    ORB_CTR_TABLE_FIRST
};

enum { ORB_SLOT_FREE = 0, ORB_SLOT_CLAIMING = 1, ORB_SLOT_HELD = 2, ORB_SLOT_ORPHAN = 3 };
#define ORB_SLOT_TAG(state, kind, node) ((uint64_t)(state) | (uint64_t)(kind) << 8 | (uint64_t)(node) << 16)
#define ORB_SLOT_STATE(t)   ((unsigned)((t) & 0xff))
#define ORB_SLOT_KIND(t)    ((uint8_t)((t) >> 8))
#define ORB_SLOT_NODE(t)    ((uint16_t)((t) >> 16))

struct orb_ctr_slot {              /* 128 bytes: two lines, so the adjacent-line prefetch stays ours */
    _Atomic uint64_t tag;          /* ORB_SLOT_TAG(state, kind, node) */
    _Atomic uint64_t incarnation;  /* the life counting here */
    _Atomic uint64_t v[ORB_CTR_VALUES];
};
_Static_assert(sizeof(struct orb_ctr_slot) == 128, "a slot is two cache lines");

struct orb_ctr_totals {            /* per kind: folded counts, then the overflow line */
    _Atomic uint64_t folded[ORB_CTR_VALUES];
    _Atomic uint64_t pad0[2];
    _Atomic uint64_t overflow[ORB_CTR_VALUES];
    _Atomic uint64_t pad1[2];
};
_Static_assert(sizeof(struct orb_ctr_totals) == 256, "totals are four lines");

struct orb_ctr_redo {              /* a fold in progress: replayed by whoever recovers the lock */
    _Atomic uint32_t active;
    _Atomic uint32_t slot;
    _Atomic uint64_t old[ORB_CTR_VALUES];
    _Atomic uint64_t add[ORB_CTR_VALUES];
};

struct orb_ctr_header {
    struct orb_lock fold_lock;     /* folds; bounded, a dead folder's fold is finished by the next */
    _Atomic uint64_t fold_seq;     /* odd while a fold moves counts */
    uint32_t slot_count;           /* written at creation; checked against the geometry */
    uint32_t pad0;
    _Atomic uint64_t reclaim_ns_sum;                  /* time those reports took to give back */
    _Atomic uint64_t reclaim_le[ORB_CTR_RECLAIM_BUCKETS];   /* reports that took at most bucket i */
    _Atomic uint64_t leaves;                          /* lives ended by orbit_fleet_leave */
    uint8_t pad1[16];
    struct orb_ctr_redo redo;
};

/* The region's slot count and bytes for a fleet of capacity nodes: four writers a node, 64 spare. */
static inline uint32_t orb_ctr_slot_count(uint32_t capacity) { return capacity * 4u + 64u; }
#define ORB_CTR_HEADER_BYTES 512u
static inline size_t orb_ctr_region_bytes(uint32_t capacity)
{
    return ORB_CTR_HEADER_BYTES + ORB_CTR_KINDS * sizeof(struct orb_ctr_totals) +
           (size_t)orb_ctr_slot_count(capacity) * sizeof(struct orb_ctr_slot);
}

/* The region's upper bounds of each reclaim bucket, in nanoseconds (the last is +Inf: UINT64_MAX). */
extern const uint64_t orb_ctr_reclaim_bounds_ns[ORB_CTR_RECLAIM_BUCKETS];

struct orbit_fleet;

/* What a table handle counts through: one per handle, set up at open. */
struct orb_ctr_ref {
    struct orbit_fleet *fleet;
    uint64_t gen;                  /* unique per set-up: a closed ref's thread entries never match */
    uint32_t fork_generation;
    uint8_t kind;
    bool off;                      /* counting refused (ORBIT_COUNTERS=off), or no region */
    bool nodeless;                 /* an observer's handle (death reports): the totals' shared line */
    struct orb_ctr_ref *next;      /* the process's live refs (counters.c) */
    uint32_t owned_count, owned_cap;
    uint32_t *owned;               /* slots claimed through this ref by some thread */
    /* The first thread to count here: its slot without a table lookup (set and cleared
     * under the counters' mutex, by that thread, or when the ref goes off). */
    _Atomic(const void *) fast_thread;
    _Atomic uint64_t *fast_v;
};

/* A thread's cached slot for a ref: direct-mapped by the ref's address. */
struct orb_ctr_tls {
    const struct orb_ctr_ref *ref;
    uint64_t gen;
    _Atomic uint64_t *v;           /* the slot's values, the overflow line, or NULL (count nothing) */
    bool shared;                   /* v is the overflow line: atomic adds */
    uint32_t slot;
};
#define ORB_CTR_TLS_WAYS 8u
extern __thread struct orb_ctr_tls orb_ctr_tls[ORB_CTR_TLS_WAYS]
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* A byte per thread: its address names the thread (ref->fast_thread). */
extern __thread char orb_ctr_me __attribute__((tls_model("initial-exec"), visibility("hidden")));

void orb_ctr_ref_open(struct orb_ctr_ref *r, struct orbit_fleet *f, uint8_t kind);
void orb_ctr_ref_close(struct orb_ctr_ref *r);
/* The slow path of orb_count: claim this thread's slot for r. */
struct orb_ctr_tls *orb_ctr_claim(struct orb_ctr_ref *r, struct orb_ctr_tls *e)
    __attribute__((visibility("hidden")));

/* Two ways per ref: a thread alternating between two handles keeps both slots. */
static inline struct orb_ctr_tls *orb_ctr_entry(struct orb_ctr_ref *r)
{
    unsigned way = (unsigned)(((uintptr_t)r >> 6) % ORB_CTR_TLS_WAYS);
    struct orb_ctr_tls *e = &orb_ctr_tls[way];
    if (orb_likely(e->ref == r && e->gen == r->gen))
        return e;
    struct orb_ctr_tls *e2 = &orb_ctr_tls[way ^ 1u];
    if (e2->ref == r && e2->gen == r->gen)
        return e2;
    return orb_ctr_claim(r, e->ref && e->gen ? e2 : e);
}

/* Count n of counter i for the calling thread (r not NULL). The slot is this thread's alone:
 * for the ref's first thread a compare, a load and a store. */
static inline void orb_count(struct orb_ctr_ref *r, unsigned i, uint64_t n)
{
    if (orb_likely(atomic_load_explicit(&r->fast_thread, memory_order_relaxed) == &orb_ctr_me)) {
        atomic_store_explicit(&r->fast_v[i], atomic_load_explicit(&r->fast_v[i], memory_order_relaxed) + n,
                              memory_order_relaxed);
        return;
    }
    if (r->off)
        return;
    struct orb_ctr_tls *e = orb_ctr_entry(r);
    if (!e->v)
        return;
    if (orb_likely(!e->shared))
        atomic_store_explicit(&e->v[i], atomic_load_explicit(&e->v[i], memory_order_relaxed) + n,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&e->v[i], n, memory_order_relaxed);
}

/* The fold lock, a dead folder's fold finished first: 0 or a negative code (readers of last resort). */
int  orb_ctr_lock(struct orbit_fleet *f);
void orb_ctr_unlock(struct orbit_fleet *f);
/* Fold every slot of (node, incarnation) into the totals; a death report or a leave. */
void orb_ctr_fold_life(struct orbit_fleet *f, uint16_t node, uint64_t incarnation);
/* A death report's figures: one life ended, giving back took ns. */
void orb_ctr_note_death(struct orbit_fleet *f, uint64_t ns);
void orb_ctr_note_leave(struct orbit_fleet *f);
/* Every ref of f counts nothing from now (the fleet handle is going). */
void orb_ctr_fleet_gone(struct orbit_fleet *f);
/* The creator's initialiser for the region. */
void orb_ctr_region_init(void *region, uint32_t capacity);

#endif
