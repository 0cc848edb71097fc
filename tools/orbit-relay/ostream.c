/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: requests a peer relayed to us, run on our upstreams (the owner's side). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/uring.h>
#include "ostream.h"

static struct os_set *set_of(const struct loop_obj *o)
{
    return (struct os_set *)(void *)((char *)o->kind - offsetof(struct os_set, kind));
}

static void os_end(struct os_set *s, struct ostream *os, bool reset)
{
    if (os->wait_armed)
        loop_cancel(s->l, &os->o, PEER_OP_WAIT);
    if (reset)
        orbit_endpoint_reset(os->ep);
    else
        orbit_endpoint_finish(os->ep);
    orbit_endpoint_close(os->ep);
    os->ep = NULL;
    os->phase = OS_CLOSING;
    if (os->prev) os->prev->next = os->next; else s->list = os->next;
    if (os->next) os->next->prev = os->prev;
    s->n--;
    loop_obj_kill(s->l, &os->o);
}

static void os_set_status(struct ostream *os, int32_t status, uint32_t flags)
{
    peer_status_encode(os->status_frame, status, flags);
    os->status_sent = true;
}

/* Pushes wbuf into the stream; when all is in, tells whoever waits for it. */
static void os_write_step(struct os_set *s, struct ostream *os)
{
    for (int spins = 0; spins < 64 && os->writing; spins++) {
        if (os->peer_gone) {
            os->woff = os->wlen;
        } else if (os->woff < os->wlen) {
            ssize_t n = orbit_endpoint_try_write(os->ep, os->wbuf + os->woff, os->wlen - os->woff);
            if (n == -ORBIT_EAGAIN) {
                int r = peer_wait(s->l, &os->o, os->ep, true, 1, &os->wait_armed);
                if (r > 0)
                    return;
                if (r < 0)
                    os->peer_gone = true;
                continue;
            }
            if (n < 0)
                os->peer_gone = true;   /* the requester left: drain the upstream anyway */
            else
                os->woff += (size_t)n;
            continue;
        }
        os->writing = false;
        if (os->phase == OS_RUN)
            up_drained(s->ups, os->up);
        else
            os_end(s, os, false);
        return;
    }
    if (os->writing) {
        os->peer_gone = true;
        os_write_step(s, os);
    }
}

static void os_write(struct os_set *s, struct ostream *os, const char *p, size_t n)
{
    os->wbuf = p;
    os->wlen = n;
    os->woff = 0;
    os->writing = true;
    os_write_step(s, os);
}

/* Refuses the request with status (retryable for the requester), then closes. */
static void os_refuse(struct os_set *s, struct ostream *os, int32_t status)
{
    STAT_ADD(s->l->st, refused, 1);
    os->phase = OS_CLOSING;
    os_set_status(os, status, 0);
    os_write(s, os, os->status_frame, sizeof os->status_frame);
}

/* ---- the owner stream as the upstream's sink ---------------------------- */

static struct ostream *os_of(struct sink *k)
{
    return (struct ostream *)(void *)((char *)k - offsetof(struct ostream, sink));
}

static void os_deliver(struct sink *k, const char *p, size_t n, bool interim)
{
    struct ostream *os = os_of(k);
    struct os_set *s = set_of(&os->o);
    (void)interim;   /* the requester's worker passes interim heads on as it reads them */
    if (!os->status_sent && !os->peer_gone) {
        os_set_status(os, 0, k->close ? PEER_S_CLOSE : 0);
        /* 16 bytes into a direction nobody wrote yet: always fits. */
        if (orbit_endpoint_try_write_exact(os->ep, os->status_frame, sizeof os->status_frame) < 0)
            os->peer_gone = true;
    }
    os_write(s, os, p, n);
}

static void os_job_done(struct sink *k)
{
    struct ostream *os = os_of(k);
    struct os_set *s = set_of(&os->o);
    STAT_SUB(s->l->st, serving_remote, 1);
    STAT_ADD(s->l->st, served_remote, 1);
    os->up = NULL;
    os_end(s, os, false);
}

static void os_job_failed(struct sink *k, enum sink_fail how)
{
    struct ostream *os = os_of(k);
    struct os_set *s = set_of(&os->o);
    STAT_SUB(s->l->st, serving_remote, 1);
    os->up = NULL;
    if (!os->status_sent)
        os_refuse(s, os, how == SINK_RETRY ? -ORBIT_ERESET : how == SINK_TIMEOUT ? PEER_STATUS_TIMEOUT
                                                                                 : PEER_STATUS_SENT);
    else
        os_end(s, os, true);
}

/* Its answer goes into the stream before the upstream leaves the pool: the requester
 * reads it there once it sees the lease end (rs_check_leases). */
static const struct sink_ops os_sink_ops = {
    .piece = os_deliver, .done = os_job_done, .failed = os_job_failed, .answer_first = true,
};

/* The request is in: accept the lease it carries and run it on that upstream. */
static void os_run(struct os_set *s, struct ostream *os)
{
    os->phase = OS_RUN;
    STAT_ADD(s->l->st, serving_remote, 1);
    struct up_job job = { .req = os->req, .req_len = os->req_len, .head_req = os->flags & PEER_F_HEAD,
                          .idempotent = os->flags & PEER_F_IDEMPOTENT, .http10 = os->flags & PEER_F_HTTP10,
                          .keepalive = os->flags & PEER_F_KEEPALIVE };
    int rc = up_run_lease(s->ups, &os->lease, &os->sink, &job);
    if (rc < 0) {
        STAT_SUB(s->l->st, serving_remote, 1);
        os_refuse(s, os, rc);
        return;
    }
    os->up = up_by_id(s->ups, os->lease.id);
}

static void os_step(struct os_set *s, struct ostream *os)
{
    for (int spins = 0; spins < 64; spins++) {
        int r;
        ssize_t n;
        switch (os->phase) {
        case OS_HEAD: {
            uint32_t req_len;
            r = orbit_endpoint_try_read_exact(os->ep, os->head, sizeof os->head);
            if (r == -ORBIT_EAGAIN) {
                r = peer_wait(s->l, &os->o, os->ep, false, sizeof os->head, &os->wait_armed);
                if (r > 0)
                    return;
                if (r == 0)
                    continue;
            }
            if (r < 0 || peer_frame_decode(os->head, &os->lease, &req_len, &os->flags) < 0 ||
                req_len > relay_buffered_max(s->l->o) || !(os->req = malloc(req_len ? req_len : 1)) ||
                orbit_id_node(os->lease.id) != orbit_fleet_node(s->fleet)) {
                os_end(s, os, true);   /* the requester died, or this is not a relay stream */
                return;
            }
            os->req_len = req_len;
            os->req_got = 0;
            os->phase = OS_REQ;
            break;
        }
        case OS_REQ:
            if (os->req_got == os->req_len) {
                os_run(s, os);
                return;
            }
            n = orbit_endpoint_try_read(os->ep, os->req + os->req_got, os->req_len - os->req_got);
            if (n == -ORBIT_EAGAIN) {
                r = peer_wait(s->l, &os->o, os->ep, false, 1, &os->wait_armed);
                if (r > 0)
                    return;
                if (r == 0)
                    continue;
                n = -ORBIT_ECORRUPT;
            }
            if (n <= 0) {
                os_end(s, os, true);
                return;
            }
            os->req_got += (size_t)n;
            break;
        case OS_RUN:
        case OS_CLOSING:
            if (os->writing)
                os_write_step(s, os);
            return;
        }
    }
    os_end(s, os, true);
}

static void os_start(struct os_set *s, const struct orbit_ticket *t)
{
    struct ostream *os = calloc(1, sizeof *os);
    if (!os || loop_obj_add(s->l, &os->o, &s->kind) < 0) {
        free(os);
        return;   /* the requester's lease check or its timeout retries elsewhere */
    }
    if (orbit_streams_open_ticket(s->streams, t, &os->ep) < 0) {
        loop_obj_kill(s->l, &os->o);
        return;
    }
    os->phase = OS_HEAD;
    os->sink.ops = &os_sink_ops;
    os->next = s->list;
    if (s->list)
        s->list->prev = os;
    s->list = os;
    s->n++;
    os_step(s, os);
}

void os_take_offers(struct os_set *s)
{
    struct orbit_ticket t;
    while (orbit_streams_take_offer(s->streams, &t) == 0)
        os_start(s, &t);
}

/*
 * Keeps a FUTEX_WAIT on our offers word in the ring. Offers that arrive while
 * arming are taken here; if they keep coming (or the prep fails) it gives up
 * for now and the tick tries again, so offers are never left unwatched.
 */
void os_arm_offer_wait(struct os_set *s)
{
    for (int i = 0; i < 8 && s->l->futex && !s->offer_armed; i++) {
        struct io_uring_sqe *sqe = loop_sqe(s->l);
        int r = orbit_streams_prep_wait_offer(s->streams, sqe);
        /* Not armed: the prep left a NOP, whose completion is ignored. */
        io_uring_sqe_set_data64(sqe, r == 0 ? loop_ud(&s->offers, PEER_OP_WAIT) : 0);
        if (r == 0) {
            s->offer_armed = true;
            STAT_ADD(s->l->st, futex_waits, 1);
            return;
        }
        if (r < 0)
            return;
        os_take_offers(s);
    }
}


void os_tick(struct os_set *s)
{
    if (!s->offer_armed) {   /* os_arm_offer_wait gave up for a moment */
        os_take_offers(s);
        os_arm_offer_wait(s);
    }
}

void os_poke_all(struct os_set *s)
{
    struct ostream *os, *next;
    for (os = s->list; os; os = next) {
        next = os->next;
        if (os->phase == OS_HEAD || os->phase == OS_REQ)
            os_step(s, os);
        else if (os->writing)
            os_write_step(s, os);
    }
}

void os_close_all(struct os_set *s)
{
    for (struct ostream *os = s->list; os; os = os->next)
        orbit_endpoint_close(os->ep);
}

/* ---- the loop's kinds ----------------------------------------------------- */

static void os_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct os_set *s = set_of(o);
    if (loop_cqe_dead(s->l, o, res, flags) || op != PEER_OP_WAIT)
        return;
    ((struct ostream *)o)->wait_armed = false;
    os_step(s, (struct ostream *)o);
}

static void os_free(struct loop_obj *o)
{
    free(((struct ostream *)o)->req);
    free(o);
}

static void offers_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct os_set *s = (struct os_set *)(void *)((char *)o - offsetof(struct os_set, offers));
    (void)op; (void)res; (void)flags;
    s->offer_armed = false;
    os_take_offers(s);
    os_arm_offer_wait(s);
}

int os_set_init(struct os_set *s, struct loop *l, struct orbit_streams *streams, struct orbit_fleet *fleet,
                struct up_set *ups)
{
    *s = (struct os_set){ .l = l, .kind = { os_on_cqe, NULL, os_free }, .offers_kind = { offers_on_cqe, NULL, NULL },
                          .streams = streams, .fleet = fleet, .ups = ups };
    return loop_obj_add(l, &s->offers, &s->offers_kind);
}
