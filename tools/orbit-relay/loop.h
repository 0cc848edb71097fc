/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: the ring loop, a worker's bottom floor. One io_uring
 * (ring.c: its features, each with a fallback where the kernel refuses it,
 * the provided buffers that multishot receives fill, the one call that
 * submits and waits) and the objects with operations in flight (loop_obj.c):
 * a completion's user_data names an object, its generation and an
 * operation, and goes to the object's kind. The floors above define the
 * kinds; the loop names none of them.
 */
#ifndef ORBIT_RELAY_LOOP_H
#define ORBIT_RELAY_LOOP_H

#include "relay.h"

#define LOOP_BR_ENTRIES 1024       /* provided buffers for the multishot receives */
#define LOOP_BR_SIZE    4096       /* ... each this long (a bundle takes several) */
#define LOOP_BGID       1          /* their group */
/* A receive that fills several provided buffers (Linux 6.10; not in liburing 2.3). */
#define LOOP_RECVSEND_BUNDLE (1U << 4)

/* The ring's features; --stats shows them (loop_feature_name). */
#define WF_SINGLE_ISSUER    (1u << 0)
#define WF_DEFER_TASKRUN    (1u << 1)
#define WF_REG_RING         (1u << 2)
#define WF_MULTISHOT_ACCEPT (1u << 3)
#define WF_MULTISHOT_RECV   (1u << 4)
#define WF_BUNDLE           (1u << 5)
#define WF_DIRECT           (1u << 6)
#define WF_ZC               (1u << 7)
#define WF_BATCH            (1u << 8)
#define WF_FUTEX            (1u << 9)
#define WF_LINK             (1u << 10)
#define WF_SEND_WAIT        (1u << 11)
#define WF_QUIET_WAIT       (1u << 12)
#define WF_PIN              (1u << 13)
#define WF_SPLICE           (1u << 14)
#define WF_YIELD            (1u << 15)
#define WF_OPT_IN           (WF_ZC | WF_BATCH | WF_YIELD)   /* off unless asked for */

struct loop_obj;

/* What a kind of object does; the floor that defines the kind embeds it in its own
 * context, and finds that again from o->kind. */
struct loop_kind {
    /* A completion of one of the object's operations (op: the kind's own, 1..255), dead
     * objects' too (loop_cqe_dead says so, and settles them). */
    void (*on_cqe)(struct loop_obj *o, unsigned op, int res, uint32_t flags);
    /* Housekeeping, at each tick, for each live object (loop_tick), or NULL. */
    void (*on_tick)(struct loop_obj *o, int64_t now);
    /* Frees a dead object with nothing in flight, or NULL: never freed (a worker's own). */
    void (*free)(struct loop_obj *o);
};

/* Every object with operations in flight: freed once dead and nothing is pending. */
struct loop_obj {
    uint32_t idx, gen;
    int pending;
    bool dead;
    const struct loop_kind *kind;
};

struct loop {
    const struct relay_opts *o;
    struct relay_worker_stats *st;  /* this worker's counters */
    struct io_uring ring;
    int64_t now;                    /* CLOCK_MONOTONIC as the current batch of completions began */
    bool stopping;                  /* the worker stops: every floor finishes what it holds, takes nothing new */
    bool futex;                     /* io_uring FUTEX_WAIT available (else readiness descriptors) */
    unsigned features, features_off;
    /* waits (ring.c) */
    bool batch_checked;
    unsigned batch_nr, batch_us;    /* a batched wait's completions and min-wait */
    unsigned sends_queued;          /* sends queued since the last enter: their completions come at it */
    unsigned wait_nr, wait_sends;   /* the last wait's depth, and the sends' completions in it */
    unsigned batch_depth;           /* a batched wait's depth, as the last waits taught it (loop_waited) */
    /* provided buffers */
    struct io_uring_buf_ring *br;
    char *br_bufs;
    uint16_t *br_bid_at, *br_pos_of;
    bool br_registered;
    /* objects (loop_obj.c) */
    struct loop_obj **objs;
    uint32_t *gens, n_objs, cap_objs, *free_idx, n_free;
    struct loop_obj **grave;
    uint32_t n_grave, cap_grave;
};

/* ---- the ring (ring.c) ---------------------------------------------------- */

/* The ring with the features the kernel has and the environment leaves on; 0 or -errno. */
int  loop_open(struct loop *l);
/* The buffers and the ring gone (loop_close). */
void loop_ring_exit(struct loop *l);
/* Submits what is queued and waits for completions (a batched wait's depth, or one). */
int  loop_enter(struct loop *l);
/* The features in use into the worker's counters (--stats). */
void loop_publish(struct loop *l);
/* The i-th feature's name and bit, NULL past the last. */
const char *loop_feature_name(unsigned i, unsigned *bit);
/* An SQE, submitting once if the SQ is full. */
struct io_uring_sqe *loop_sqe(struct loop *l);
/* Provided buffers: one back to the ring, the k-th of a bundle, a buffer's bytes, and
 * every buffer a completion of res bytes carries back (its reader is gone). */
void loop_buf_put(struct loop *l, uint16_t bid);
uint16_t loop_buf_nth(struct loop *l, uint16_t bid, unsigned k);
char *loop_buf_addr(struct loop *l, uint16_t bid);
void loop_buf_drop(struct loop *l, uint32_t flags, int res);
/* After reaping seen completions: what a batched wait's depth learns from them. */
void loop_waited(struct loop *l, unsigned seen);

/* ---- objects (loop_obj.c) ----------------------------------------------------- */

uint64_t loop_ud(const struct loop_obj *o, unsigned op);
/* o joins the loop as a kind's object; 0 or -ENOMEM. */
int  loop_obj_add(struct loop *l, struct loop_obj *o, const struct loop_kind *kind);
/* o takes no more operations; it is freed once none is in flight. */
void loop_obj_kill(struct loop *l, struct loop_obj *o);
/* An SQE for op on o, its user_data set, counted in flight. */
struct io_uring_sqe *loop_obj_sqe(struct loop *l, struct loop_obj *o, unsigned op);
/* Cancels o's op in flight (its own completion says how it ended). */
void loop_cancel(struct loop *l, struct loop_obj *o, unsigned op);
/* In a kind's on_cqe: true when o is dead (the completion's buffers went back, and o
 * is freed once nothing more is in flight): the kind does nothing more with it. */
bool loop_cqe_dead(struct loop *l, struct loop_obj *o, int res, uint32_t flags);
/* Every completion that is in goes to its object's kind. */
void loop_reap(struct loop *l);
/* Each live object's on_tick. */
void loop_tick(struct loop *l, int64_t now);
/* The dead objects of this turn are freed (after every completion of it was read). */
void loop_settle(struct loop *l);
/* The ring and every object, live or dead, gone (the worker exits). */
void loop_close(struct loop *l);

#endif
