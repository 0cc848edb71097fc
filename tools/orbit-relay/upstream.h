/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: its upstreams (upstream.c). Each is a pool resource
 * (capacity 1) this worker dialled and owns; a request runs on one under a
 * lease (ours, or a peer's that a stream brought), and its response goes to
 * a sink (sink.h). What happens to the pool (a unit back, a creation
 * ended) is told to the floor above through the set's hooks.
 */
#ifndef ORBIT_RELAY_UPSTREAM_H
#define ORBIT_RELAY_UPSTREAM_H

#include "share.h"
#include "up_types.h"

#define UP_GRACE_MS 1000   /* reservations nobody brought age out after this (up_reconcile) */

/* What the floor above hears of the pool through the upstreams. */
struct up_hooks {
    /* A creation for creator (up_create) ended: up joined the pool, or up is NULL
     * (retryable: the connect worked, the pool refused it; timed_out: no answer in time). */
    void (*created)(void *ctx, void *creator, struct upstream *up, bool retryable, bool timed_out);
    /* A unit of the budget came back (or a creation ended): whoever waits on the pool may go. */
    void (*capacity)(void *ctx);
};

struct up_set {
    struct loop *l;
    struct loop_kind kind;          /* its upstreams' */
    struct share *share;
    struct orbit_pool *pool;
    orbit_key key;
    const struct up_hooks *hooks;
    void *ctx;                      /* the hooks' */
    struct upstream *by_slot[UP_LANE];
    struct upstream *idle[UP_LANE]; /* our idle upstreams, the most recently used last */
    int n_idle, n_ups, n_creating;
};

void up_set_init(struct up_set *s, struct loop *l, struct share *share, struct orbit_pool *pool, orbit_key key,
                 const struct up_hooks *hooks, void *ctx);
/* Our most recently used idle upstream, out of the idle list, or NULL. */
struct upstream *up_idle_pop(struct up_set *s);
struct upstream *up_by_id(struct up_set *s, orbit_id id);
/* Accepts a lease on one of our upstreams and runs job on it, the response to sink: 0, or a negative code. */
int  up_run_lease(struct up_set *s, const struct orbit_lease *lease, struct sink *sink, const struct up_job *job);
/* Dials a new upstream under permit for creator (the hooks' created says how it went):
 * 0 and *out, or -ENOMEM (the permit ended). */
int  up_create(struct up_set *s, struct orbit_permit *permit, void *creator, struct upstream **out);
/* Its creator went away while it connects: the new upstream stays ours, idle. */
void up_forget_creator(struct upstream *up);
/* The sink took the piece handed to it: the next one, more bytes, or the end. */
void up_drained(struct up_set *s, struct upstream *up);
/* The sink goes away: the response is read on and dropped (the upstream stays usable). */
void up_release(struct up_set *s, struct upstream *up);
/* The next piece of a streamed request body. */
void up_stream(struct up_set *s, struct upstream *up, const char *p, size_t n, bool more);
/* The request cannot complete (its client left mid-body): the upstream goes. */
void up_abort(struct up_set *s, struct upstream *up);
/* The worker stops: idle upstreams end now, busy ones when their job does. */
void up_stop(struct up_set *s);
/* The worker exits: every upstream is closed, then leaves the pool. */
void up_close_all(struct up_set *s);
/* The owner's truth for each upstream into the pool; reservations nobody brought age out. */
void up_reconcile(struct up_set *s);

#endif
