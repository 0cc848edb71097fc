/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: requests relayed through orbit streams to the worker
 * owning the upstream (the requester's side; ostream.c is the owner's).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/uring.h>
#include "rstream.h"

static void rs_unlink(struct rs_set *s, struct rstream *rs)
{
    if (rs->prev) rs->prev->next = rs->next; else s->list = rs->next;
    if (rs->next) rs->next->prev = rs->prev;
    s->n--;
}

static void rs_end(struct rs_set *s, struct rstream *rs, bool reset)
{
    if (rs->wait_armed)
        loop_cancel(s->l, &rs->o, PEER_OP_WAIT);
    if (reset)
        orbit_endpoint_reset(rs->ep);
    orbit_endpoint_close(rs->ep);
    rs->ep = NULL;
    rs_unlink(s, rs);
    loop_obj_kill(s->l, &rs->o);
}

static void rs_fail(struct rs_set *s, struct rstream *rs, bool retryable)
{
    struct sink *sink = rs->sink;
    rs->sink = NULL;
    /* Sent again only if the owner cannot have sent it, or it may be sent twice. */
    bool again = retryable && rs->body_bytes == 0 && (rs->phase == RS_WRITE || rs->refused || rs->idempotent);
    enum sink_fail how = again ? SINK_RETRY : rs->body_bytes ? SINK_CUT
                         : rs->timed_out ? SINK_TIMEOUT : SINK_BAD_GATEWAY;
    rs_end(s, rs, true);
    if (sink)
        sink->ops->failed(sink, how);
}

void rs_abandon(struct rs_set *s, struct rstream *rs)
{
    rs->sink = NULL;
    rs_fail(s, rs, false);
}

static void rs_step(struct rs_set *s, struct rstream *rs);

int rs_start(struct rs_set *s, const struct orbit_lease *lease, const struct up_job *job, struct sink *sink,
             struct rstream **out)
{
    struct rstream *rs = calloc(1, sizeof *rs);
    struct orbit_endpoint *ep = NULL;
    int rc = rs ? loop_obj_add(s->l, &rs->o, &s->kind) : -ENOMEM;
    if (rc == 0 && !(rs->frame = malloc(PEER_FRAME_LEN + job->req_len)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = orbit_streams_create(s->streams, &ep, &rs->ticket);
    if (rc < 0) {
        if (rs && rs->o.gen && !rs->o.dead)
            loop_obj_kill(s->l, &rs->o);
        else
            free(rs);
        return rc;
    }
    STAT_ADD(s->l->st, streams, 1);
    STAT_ADD(s->l->st, remote_leases, 1);
    rs->ep = ep;
    rs->sink = sink;
    rs->lease = *lease;
    rs->phase = RS_WRITE;
    rs->started = s->l->now;
    rs->idempotent = job->idempotent;
    uint16_t flags = (uint16_t)((job->head_req ? PEER_F_HEAD : 0) | (job->idempotent ? PEER_F_IDEMPOTENT : 0) |
                                (job->http10 ? PEER_F_HTTP10 : 0) | (job->keepalive ? PEER_F_KEEPALIVE : 0));
    peer_frame_encode(rs->frame, lease, (uint32_t)job->req_len, flags);
    memcpy(rs->frame + PEER_FRAME_LEN, job->req, job->req_len);
    rs->wlen = PEER_FRAME_LEN + job->req_len;
    rs->next = s->list;
    rs->prev = NULL;
    if (s->list)
        s->list->prev = rs;
    s->list = rs;
    s->n++;
    *out = rs;
    rs_step(s, rs);
    return 0;
}

/* The owner's status frame: 1 read (the body follows), 0 not there yet, -1 the request
 * failed (handled: tried again, or answered). */
static int rs_read_status(struct rs_set *s, struct rstream *rs)
{
    char st[PEER_STATUS_LEN];
    int r = orbit_endpoint_try_read_exact(rs->ep, st, sizeof st);
    if (r == -ORBIT_EAGAIN)
        return 0;
    int32_t status = 0;
    uint32_t flags = 0;
    bool answered = r == 0 && peer_status_decode(st, &status, &flags) == 0;
    if (!answered || status != 0) {
        /* Refused before sending: try again; failed after sending or gone: maybe. */
        rs->refused = answered && status < 0;
        rs->timed_out = answered && status == PEER_STATUS_TIMEOUT;
        rs_fail(s, rs, !answered || status < 0);
        return -1;
    }
    if (rs->sink && (flags & PEER_S_CLOSE))
        rs->sink->close = true;
    rs->phase = RS_BODY;
    return 1;
}

/* The frame and the request go into the stream, and the stream is offered to the owner. */
static int rs_write(struct rs_set *s, struct rstream *rs)
{
    ssize_t n = orbit_endpoint_try_write(rs->ep, rs->frame + rs->woff, rs->wlen - rs->woff);
    if (n == -ORBIT_EAGAIN) {
        int r = peer_wait(s->l, &rs->o, rs->ep, true, 1, &rs->wait_armed);
        if (r < 0)
            rs_fail(s, rs, true);
        return r != 0 ? -1 : 0;
    }
    if (n < 0) {
        rs_fail(s, rs, true);
        return -1;
    }
    rs->woff += (size_t)n;
    if (!rs->offered) {
        /* Offered once the lease is in the ring: the owner finds it there. */
        if (orbit_streams_offer(s->streams, &rs->ticket, orbit_id_node(rs->lease.id)) < 0) {
            rs_fail(s, rs, true);
            return -1;
        }
        rs->offered = true;
    }
    if (rs->woff == rs->wlen) {
        orbit_endpoint_finish(rs->ep);
        rs->phase = RS_STATUS;
    }
    return 0;
}

/* The next piece of the response to the sink: 0 handed (or waiting), -1 done with the stream. */
static int rs_body(struct rs_set *s, struct rstream *rs, bool *again)
{
    *again = false;
    if (!rs->sink) {
        rs_end(s, rs, true);
        return -1;
    }
    if (rs->handing)
        return -1;   /* the sink's rs_drained steps us again */
    ssize_t n = orbit_endpoint_try_read(rs->ep, rs->out, sizeof rs->out);
    if (n == -ORBIT_EAGAIN) {
        int r = peer_wait(s->l, &rs->o, rs->ep, false, 1, &rs->wait_armed);
        if (r < 0)
            rs_fail(s, rs, false);
        *again = r == 0;
        return -1;
    }
    if (n < 0) {
        rs_fail(s, rs, true);
        return -1;
    }
    struct sink *sink = rs->sink;
    if (n == 0) {   /* FIN: the whole response is here */
        rs->sink = NULL;
        rs_end(s, rs, false);
        sink->ops->done(sink);
        return -1;
    }
    rs->body_bytes += (size_t)n;
    rs->handing = true;
    sink->ops->piece(sink, rs->out, (size_t)n, false);
    return -1;
}

/* Writes the frame and the request, then reads the status, then relays the body. */
static void rs_step(struct rs_set *s, struct rstream *rs)
{
    for (int spins = 0; spins < 64; spins++) {
        int r;
        bool again;
        switch (rs->phase) {
        case RS_WRITE:
            if (rs_write(s, rs) < 0)
                return;
            break;
        case RS_STATUS:
            r = rs_read_status(s, rs);
            if (r < 0)
                return;
            if (r == 0) {
                r = peer_wait(s->l, &rs->o, rs->ep, false, PEER_STATUS_LEN, &rs->wait_armed);
                if (r != 0) {
                    if (r < 0)
                        rs_fail(s, rs, true);
                    return;
                }
            }
            break;
        case RS_BODY:
            rs_body(s, rs, &again);
            if (!again)
                return;
            break;
        }
    }
    /* Ready yet never progressing: give up on this stream rather than spin. */
    rs_fail(s, rs, true);
}

void rs_drained(struct rs_set *s, struct rstream *rs)
{
    rs->handing = false;
    rs_step(s, rs);
}

/* Requests whose owner vanished before answering (their lease is no longer current),
 * or that the owner never answered (its response timeout and 5 s more: 504). */
void rs_check_leases(struct rs_set *s)
{
    int64_t now = relay_now_ns();
    struct rstream *rs = s->list, *next;
    for (; rs; rs = next) {
        next = rs->next;
        if (rs->phase == RS_BODY)
            continue;
        if (now - rs->started > ((int64_t)s->l->o->response_timeout_ms + 5000) * 1000000) {
            rs->timed_out = rs->phase == RS_STATUS;
            rs_fail(s, rs, rs->phase == RS_WRITE);
        } else if (!orbit_pool_is_current(s->pool, &rs->lease)) {
            /* An owner that let the upstream go wrote its answer first: it decides. */
            int r = rs->phase == RS_STATUS ? rs_read_status(s, rs) : 0;
            if (r == 0)
                rs_fail(s, rs, true);
            else if (r > 0)
                rs_step(s, rs);
        }
    }
}

bool rs_waiting(const struct rs_set *s)
{
    for (const struct rstream *rs = s->list; rs; rs = rs->next)
        if (rs->phase != RS_BODY)
            return true;
    return false;
}

void rs_poke_all(struct rs_set *s)
{
    struct rstream *rs, *next;
    for (rs = s->list; rs; rs = next) {
        next = rs->next;
        if (!(rs->phase == RS_BODY && rs->handing))
            rs_step(s, rs);
    }
}

void rs_close_all(struct rs_set *s)
{
    for (struct rstream *rs = s->list; rs; rs = rs->next)
        orbit_endpoint_close(rs->ep);
}

/* ---- the loop's kind ------------------------------------------------------ */

static void rs_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct rs_set *s = (struct rs_set *)(void *)((char *)o->kind - offsetof(struct rs_set, kind));
    if (loop_cqe_dead(s->l, o, res, flags) || op != PEER_OP_WAIT)
        return;
    ((struct rstream *)o)->wait_armed = false;
    rs_step(s, (struct rstream *)o);
}

static void rs_free(struct loop_obj *o)
{
    free(((struct rstream *)o)->frame);
    free(o);
}

void rs_set_init(struct rs_set *s, struct loop *l, struct orbit_streams *streams, struct orbit_pool *pool)
{
    *s = (struct rs_set){ .l = l, .kind = { rs_on_cqe, NULL, rs_free }, .streams = streams, .pool = pool };
}
