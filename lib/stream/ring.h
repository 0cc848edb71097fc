/* SPDX-License-Identifier: MIT */
/*
 * The byte rings' shared steps (private to lib/stream): a direction's
 * publications with their wake tests, the refusals, the waits and the
 * sentences. ring.c copies through them; span.c hands the ring out in place.
 */
#ifndef ORB_STREAM_RING_H
#define ORB_STREAM_RING_H

#include "stream_layout.h"

static inline uint64_t clamp_need(uint64_t need, uint64_t cap) { return need == 0 ? 1 : need > cap ? cap : need; }
static inline uint64_t free_space(uint64_t cap, uint64_t used) { return used >= cap ? 0 : cap - used; }

/* Publish [from, to). True when a reader waits and this lifts what is queued across
 * its need (need 1: the ring was empty). */
static inline bool publish_head(struct orbit_endpoint *ep, uint64_t from, uint64_t to)
{
    struct stream_dir *d = ep->wr;
    /* seq_cst store, then seq_cst loads: a reader arms parked (or a watch) and states
     * its need before its last check, so either that check sees `to` or we see it
     * waiting. Nobody waiting: the reader's line is not even read. */
    atomic_store_explicit(&d->head, to, memory_order_seq_cst);
    if (!stream_dir_waiting(d, WATCH_READER))
        return false;
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_seq_cst);
    uint64_t need = clamp_need(atomic_load_explicit(&d->reader_need, memory_order_seq_cst),
                               ep->s->buffer_bytes);
    uint64_t before = from >= tail ? from - tail : 0, after = to >= tail ? to - tail : 0;
    return before < need && after >= need;
}

/* Publish consumption up to `to`. True when a writer waits and free space crossed
 * its need. */
static inline bool publish_tail(struct orbit_endpoint *ep, uint64_t from, uint64_t to)
{
    struct stream_dir *d = ep->rd;
    uint64_t cap = ep->s->buffer_bytes;
    /* The mirror of publish_head: either the writer's room check sees `to`, or we
     * see it waiting with the need it stated before that check. */
    atomic_store_explicit(&d->tail, to, memory_order_seq_cst);
    if (!stream_dir_waiting(d, WATCH_WRITER))
        return false;
    uint64_t head = atomic_load_explicit(&d->head, memory_order_seq_cst);
    uint64_t need = clamp_need(atomic_load_explicit(&d->writer_need, memory_order_seq_cst), cap);
    return free_space(cap, head - from) < need && free_space(cap, head - to) >= need;
}

/* Why this end may not write now: 0, or -ORBIT_ESTALE, -ORBIT_ECLOSED, -ORBIT_ERESET, -ORBIT_EPEERGONE. */
static inline int stream_write_refusal(const struct orbit_endpoint *ep)
{
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    if (ep->write_shut)
        return -ORBIT_ECLOSED;
    uint32_t flags = atomic_load_explicit(&ep->wr->flags, memory_order_acquire);
    if (flags & DIR_RESET)
        return -ORBIT_ERESET;
    if (flags & DIR_FIN)
        return -ORBIT_ECLOSED;
    if (flags & DIR_READER_GONE)
        return -ORBIT_EPEERGONE;
    return 0;
}

/* Waits for need queued bytes (need 0: one) or an end; 0, or the wait's error. */
int  stream_wait_data(struct orbit_endpoint *ep, uint32_t need, const struct orb_deadline *deadline);
/* Waits for need free bytes (need 0: one) or an end; 0, or the wait's error. */
int  stream_wait_room(struct orbit_endpoint *ep, uint32_t need, const struct orb_deadline *deadline);
/* After -ORBIT_EAGAIN from a try: ask for the doorbell (then look once more). */
void stream_watch(struct stream_dir *d, uint32_t bit);
/* Why a read (a write) or its wait failed with rc, for orbit_last_error; returns rc. */
int  stream_read_said(int rc, const struct orbit_endpoint *ep, size_t len, int timeout_ms) ORB_COLD;
int  stream_write_said(int rc, const struct orbit_endpoint *ep, size_t len, int timeout_ms) ORB_COLD;

#endif
