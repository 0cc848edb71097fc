/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: where a request runs (dispatch.c). The pool says, for
 * the backend's key: one of our idle upstreams (a local lease), another
 * worker's (a remote lease: relayed through a stream, rstream.c), a unit of
 * the creation budget (dial a new upstream), or wait; a waiting request
 * queues, in order, and the queue is swept when capacity comes back. The
 * dispatcher stands between a request's owner (the client) and the source of
 * its response: it tries a failed request again where it may, and tells the
 * owner only what is final.
 */
#ifndef ORBIT_RELAY_DISPATCH_H
#define ORBIT_RELAY_DISPATCH_H

#include "rstream.h"
#include "share.h"
#include "upstream.h"

#define DISP_RETRIES      8   /* attempts of one request before 502 */
#define DISP_OWN_WAIT_MIN 8   /* own upstreams, all busy, that a request waits for rather than borrow */

struct disp_req;

/* What the request's owner hears. */
struct disp_ops {
    void (*piece)(struct disp_req *r, const char *p, size_t n, bool interim);
    /* The response ended whole (r->sink.close: the owner's connection closes after it). */
    void (*done)(struct disp_req *r);
    /* The request failed for good: status 502, 503 or 504 when nothing of a response went
     * to the owner (then it answers the status; r->sink.close as for done), 0 when part of
     * one did (its connection is cut). */
    void (*failed)(struct disp_req *r, int status);
    /* A body that streams: the next piece may come (disp_body). */
    void (*more)(struct disp_req *r);
    /* The owner's socket failed while the upstream wrote into it (splice). */
    void (*broken)(struct disp_req *r, int err);
};

enum disp_where { DISP_NONE, DISP_QUEUED, DISP_CREATE, DISP_LOCAL, DISP_REMOTE };

/* A request as the dispatcher holds it; the owner embeds it and fills job, local_only and ops. */
struct disp_req {
    struct sink sink;               /* what its source sees (the dispatcher's); sink.conn: the owner's socket */
    const struct disp_ops *ops;     /* the owner's */
    struct up_job job;
    bool local_only;                /* a body that streams, or one too long for a peer: our upstreams only */
    enum disp_where where;
    struct upstream *up;            /* DISP_LOCAL, DISP_CREATE */
    struct rstream *rs;             /* DISP_REMOTE */
    int retries;
    struct disp *d;                 /* its dispatcher, from disp_start on */
    struct disp_req *qnext, *qprev; /* the wait queue */
};

struct disp {
    struct loop *l;
    struct loop_kind wait_kind;     /* the FUTEX_WAIT on the key's capacity */
    struct loop_obj wait;
    struct share *share;
    struct up_set *ups;
    struct rs_set *rss;
    struct orbit_pool *pool;
    struct orbit_fleet *fleet;
    orbit_key key;
    struct orbit_limits limits;
    struct orbit_policy policy;
    struct disp_req *qhead, *qtail; /* the wait queue (FIFO) */
    bool pool_armed;
    bool decided_own;               /* the last acquire's WAIT was the wait for our own */
    bool wait_own;                  /* ... and so the queue's head waits for our own upstreams */
    bool sweeping;
};

/* 0, or -ENOMEM (the capacity wait could not join the loop). */
int  disp_init(struct disp *d, struct loop *l, struct share *share, struct up_set *ups, struct rs_set *rss,
               struct orbit_pool *pool, struct orbit_fleet *fleet, orbit_key key);
/* The upstreams' hooks: a creation ended, capacity came back (ctx: the dispatcher). */
extern const struct up_hooks disp_up_hooks;
/* A request begins (its owner set r->sink.conn, ops, job, local_only). */
void disp_start(struct disp *d, struct disp_req *r);
/* The owner took the piece handed to it. */
void disp_drained(struct disp *d, struct disp_req *r);
/* The next piece of a body that streams to the request's upstream. */
void disp_body(struct disp *d, struct disp_req *r, const char *p, size_t n, bool more);
/* A body that streams cannot go on: the upstream goes, the request ends (nothing more is told). */
void disp_cut(struct disp *d, struct disp_req *r);
/* The owner is gone: the request is dropped wherever it is (abort: its upstream cannot be
 * reused, a body was streaming to it). */
void disp_cancel(struct disp *d, struct disp_req *r, bool abort);
/* Everything that waits on the pool key goes again: queued requests, and remote ones
 * whose owner has not answered. */
void disp_sweep(struct disp *d);

#endif
