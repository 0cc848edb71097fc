/* SPDX-License-Identifier: MIT */
/*
 * A handle's process-local counts (what orbit_*_stats return), exact and with
 * no locked instruction on the path that counts.
 *
 * Each thread that counts through a handle gets a cell of its own in the
 * handle's tally and adds to it with a plain load and store (its cell has
 * one writer); a read sums the cells under the tally's lock. A thread that
 * ends gives its cells back, counts and all, and the next thread to count
 * takes one over, so the sum never drops and thread churn adds no cells. A
 * thread finds its cell through thread-local storage (two ways per tally,
 * keyed by the tally's id, unique in the process: a destroyed tally's entries
 * never match a later one at the same address). Cells go with the tally.
 *
 * A locked add on a line of one's own costs about 12 TSC ticks on an AMD EPYC
 * guest, as much as a small stream write's whole fast path: orbit_*_stats
 * counted that way on every read, write, chunk and event.
 */
#ifndef ORB_CORE_TALLY_H
#define ORB_CORE_TALLY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "fastpath.h"

#define ORB_TALLY_MAX 10u     /* counts per tally */

struct orb_tally_cell {
    _Atomic uint64_t v[ORB_TALLY_MAX];      /* written by its owner thread alone */
    const void *owner;                      /* the counting thread (orb_tally_me), NULL: free */
    struct orb_tally_cell *next;
};

struct orb_tally {
    /* The first thread to count here: its cell without a table lookup (set under lock by
     * that thread, cleared when it ends). */
    _Atomic(const void *) fast_owner;
    struct orb_tally_cell *fast_cell;
    pthread_mutex_t lock;                   /* cells and their owners */
    struct orb_tally_cell *cells;
    struct orb_tally_cell spare;            /* threads that got no cell (no memory): atomic adds */
    uint64_t id;
    struct orb_tally *next_live;            /* the process's tallies (tally.c) */
};

struct orb_tally_entry { uint64_t id; struct orb_tally_cell *cell; };
#define ORB_TALLY_WAYS 8u
extern __thread struct orb_tally_entry orb_tally_tls[ORB_TALLY_WAYS]
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* A byte per thread: its address names the thread (a cell's owner, fast_owner). */
extern __thread char orb_tally_me __attribute__((tls_model("initial-exec"), visibility("hidden")));

void orb_tally_init(struct orb_tally *t);
/* At the handle's close: no thread counts through it any more. */
void orb_tally_destroy(struct orb_tally *t);
/* out[i] = the sum of count i over every cell, for i < n. */
void orb_tally_read(struct orb_tally *t, uint64_t *out, unsigned n);
/* The first count of this thread through t: its cell found, made or taken over (tally.c). */
void orb_tally_add_slow(struct orb_tally *t, unsigned i, uint64_t n) __attribute__((visibility("hidden")));

static inline void orb_tally_cell_add(struct orb_tally_cell *c, unsigned i, uint64_t n)
{
    atomic_store_explicit(&c->v[i], atomic_load_explicit(&c->v[i], memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Count n of count i (< ORB_TALLY_MAX) for the calling thread: for the handle's first
 * thread a compare, a load and a store; for others a thread-local lookup first. */
static inline void orb_tally_add(struct orb_tally *t, unsigned i, uint64_t n)
{
    if (orb_likely(atomic_load_explicit(&t->fast_owner, memory_order_relaxed) == &orb_tally_me)) {
        orb_tally_cell_add(t->fast_cell, i, n);
        return;
    }
    unsigned w = (unsigned)t->id % ORB_TALLY_WAYS;
    if (orb_tally_tls[w].id == t->id)
        orb_tally_cell_add(orb_tally_tls[w].cell, i, n);
    else if (orb_tally_tls[w ^ 1u].id == t->id)
        orb_tally_cell_add(orb_tally_tls[w ^ 1u].cell, i, n);
    else
        orb_tally_add_slow(t, i, n);
}

#endif
