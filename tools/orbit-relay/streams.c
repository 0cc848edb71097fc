/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: requests relayed through orbit streams to the worker owning the upstream. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <orbit/uring.h>
#include <stddef.h>
#include "worker.h"

/* ---- waiting on an endpoint --------------------------------------------- */

/*
 * After a try_* call said EAGAIN: arm a FUTEX_WAIT on the direction (futex
 * mode) and return 1, or return 0 when it is ready already (try again now).
 * In readiness mode nothing is armed: the streams eventfd covers every
 * endpoint whose last try_* said EAGAIN, and the object is stepped again when
 * it fires. -1: the wait cannot be armed (the next try_* will say why not).
 */
static int ep_wait(struct worker *w, struct loop_obj *o, struct orbit_endpoint *ep, bool write, size_t need,
                   bool *armed)
{
    if (!w->loop.futex)
        return 1;
    if (*armed)
        return 1;
    struct io_uring_sqe *sqe = loop_sqe(&w->loop);
    int r = write ? orbit_endpoint_prep_wait_writable_exact(ep, need, sqe)
                  : orbit_endpoint_prep_wait_readable_exact(ep, need, sqe);
    /* Not armed: the prep left a NOP, whose completion is ignored. */
    io_uring_sqe_set_data64(sqe, r == 0 ? loop_ud(o, OP_EP_WAIT) : 0);
    if (r != 0)
        return r == 1 ? 0 : -1;
    o->pending++;
    *armed = true;
    STAT_ADD(w->st, futex_waits, 1);
    return 1;
}

/* ---- requester streams (side A) ----------------------------------------- */

void relay_frame_encode(char out[48], const struct orbit_lease *l, uint32_t req_len, uint16_t flags)
{
    uint32_t magic = RELAY_FRAME_MAGIC;
    uint16_t holder = l->holder, pad = 0;
    memset(out, 0, 48);
    memcpy(out, &magic, 4);
    memcpy(out + 4, &req_len, 4);
    memcpy(out + 8, &l->id, 8);
    memcpy(out + 16, &l->fence, 8);
    memcpy(out + 24, &l->holder_incarnation, 8);
    memcpy(out + 32, &l->epoch, 8);
    memcpy(out + 40, &holder, 2);
    memcpy(out + 42, &pad, 2);
    memcpy(out + 44, &flags, 2);
}

int relay_frame_decode(const char in[48], struct orbit_lease *l, uint32_t *req_len, uint16_t *flags)
{
    uint32_t magic;
    memcpy(&magic, in, 4);
    if (magic != RELAY_FRAME_MAGIC)
        return -1;
    memcpy(req_len, in + 4, 4);
    memcpy(&l->id, in + 8, 8);
    memcpy(&l->fence, in + 16, 8);
    memcpy(&l->holder_incarnation, in + 24, 8);
    memcpy(&l->epoch, in + 32, 8);
    memcpy(&l->holder, in + 40, 2);
    memcpy(flags, in + 44, 2);
    return 0;
}

static void rs_unlink(struct worker *w, struct rstream *rs)
{
    if (rs->prev) rs->prev->next = rs->next; else w->rs_list = rs->next;
    if (rs->next) rs->next->prev = rs->prev;
    w->n_rs--;
}

static void rs_end(struct worker *w, struct rstream *rs, bool reset)
{
    if (rs->wait_armed)
        loop_cancel(&w->loop, &rs->o, OP_EP_WAIT);
    if (reset)
        orbit_endpoint_reset(rs->ep);
    orbit_endpoint_close(rs->ep);
    rs->ep = NULL;
    rs_unlink(w, rs);
    loop_obj_kill(&w->loop, &rs->o);
}

void rs_fail(struct worker *w, struct rstream *rs, bool retryable)
{
    struct client *c = rs->c;
    rs->c = NULL;
    /* Sent again only if the owner cannot have sent it, or it may be sent twice. */
    bool again = retryable && rs->body_bytes == 0 && (rs->phase == RS_WRITE || rs->refused || (c && c->idempotent));
    rs_end(w, rs, true);
    if (c)
        client_job_failed(w, c, again);
}

void rs_start(struct worker *w, struct client *c, const struct orbit_lease *lease)
{
    struct rstream *rs = calloc(1, sizeof *rs);
    struct orbit_endpoint *ep = NULL;
    int rc = rs ? loop_obj_add(&w->loop, &rs->o, &w->k_rstream) : -ENOMEM;
    if (rc == 0 && !(rs->frame = malloc(48 + c->req_len)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = orbit_streams_create(w->streams, &ep, &rs->ticket);
    if (rc < 0) {
        /* The lease is abandoned: its owner's reconcile ages it out. */
        if (rs && rs->o.gen && !rs->o.dead)
            loop_obj_kill(&w->loop, &rs->o);
        else
            free(rs);
        client_error(w, c, 503, "Service Unavailable", false);
        return;
    }
    STAT_ADD(w->st, streams, 1);
    STAT_ADD(w->st, remote_leases, 1);
    rs->ep = ep;
    rs->c = c;
    rs->lease = *lease;
    rs->phase = RS_WRITE;
    rs->started = w->loop.now;
    uint16_t flags = (uint16_t)((c->head_method ? RELAY_F_HEAD : 0) | (c->idempotent ? RELAY_F_IDEMPOTENT : 0) |
                                (c->http10 ? RELAY_F_HTTP10 : 0) | (c->keepalive ? RELAY_F_KEEPALIVE : 0));
    relay_frame_encode(rs->frame, lease, (uint32_t)c->req_len, flags);
    memcpy(rs->frame + 48, c->req, c->req_len);
    rs->wlen = 48 + c->req_len;
    rs->next = w->rs_list;
    rs->prev = NULL;
    if (w->rs_list)
        w->rs_list->prev = rs;
    w->rs_list = rs;
    w->n_rs++;
    c->state = C_REMOTE;
    c->rs = rs;
    rs_step(w, rs);
}

/* The owner's status frame: 1 read (the body follows), 0 not there yet, -1 the request
 * failed (handled: tried again, or answered). */
static int rs_read_status(struct worker *w, struct rstream *rs)
{
    char st[16];
    int r = orbit_endpoint_try_read_exact(rs->ep, st, sizeof st);
    if (r == -ORBIT_EAGAIN)
        return 0;
    uint32_t magic, flags;
    int32_t status;
    memcpy(&magic, st, 4);
    memcpy(&status, st + 4, 4);
    memcpy(&flags, st + 8, 4);
    if (r < 0 || magic != RELAY_STATUS_MAGIC || status != 0) {
        /* Refused before sending: try again; failed after sending or gone: maybe. */
        bool answered = r == 0 && magic == RELAY_STATUS_MAGIC;
        rs->refused = answered && status < 0;
        if (answered && status == RELAY_STATUS_TIMEOUT && rs->c)
            rs->c->fail_status = 504;
        rs_fail(w, rs, !answered || status < 0);
        return -1;
    }
    if (rs->c && (flags & RELAY_S_CLOSE))
        rs->c->keepalive = false;
    rs->phase = RS_BODY;
    return 1;
}

/* Writes the frame and the request, then the status, then relays the body. */
void rs_step(struct worker *w, struct rstream *rs)
{
    for (int spins = 0; spins < 64; spins++) {
        ssize_t n;
        int r;
        switch (rs->phase) {
        case RS_WRITE:
            n = orbit_endpoint_try_write(rs->ep, rs->frame + rs->woff, rs->wlen - rs->woff);
            if (n == -ORBIT_EAGAIN) {
                r = ep_wait(w, &rs->o, rs->ep, true, 1, &rs->wait_armed);
                if (r != 0) {
                    if (r < 0) rs_fail(w, rs, true);
                    return;
                }
                continue;
            }
            if (n < 0) {
                rs_fail(w, rs, true);
                return;
            }
            rs->woff += (size_t)n;
            if (!rs->offered) {
                /* Offered once the lease is in the ring: the owner finds it there. */
                int rc = orbit_streams_offer(w->streams, &rs->ticket, orbit_id_node(rs->lease.id));
                if (rc < 0) {
                    rs_fail(w, rs, true);
                    return;
                }
                rs->offered = true;
            }
            if (rs->woff == rs->wlen) {
                orbit_endpoint_finish(rs->ep);
                rs->phase = RS_STATUS;
            }
            break;
        case RS_STATUS:
            r = rs_read_status(w, rs);
            if (r < 0)
                return;
            if (r == 0) {
                r = ep_wait(w, &rs->o, rs->ep, false, 16, &rs->wait_armed);
                if (r != 0) {
                    if (r < 0) rs_fail(w, rs, true);
                    return;
                }
            }
            break;
        case RS_BODY:
            if (!rs->c) {
                rs_end(w, rs, true);
                return;
            }
            if (rs->c->conn.send_armed)
                return;   /* the client send's completion steps us again */
            n = orbit_endpoint_try_read(rs->ep, rs->out, sizeof rs->out);
            if (n == -ORBIT_EAGAIN) {
                r = ep_wait(w, &rs->o, rs->ep, false, 1, &rs->wait_armed);
                if (r != 0) {
                    if (r < 0) rs_fail(w, rs, false);
                    return;
                }
                continue;
            }
            if (n < 0) {
                rs_fail(w, rs, true);
                return;
            }
            if (n == 0) {   /* FIN: the whole response is here */
                struct client *c = rs->c;
                rs->c = NULL;
                rs_end(w, rs, false);
                client_resp_done(w, c);
                return;
            }
            rs->body_bytes += (size_t)n;
            client_send(w, rs->c, rs->out, (size_t)n);
            return;
        }
    }
    /* Ready yet never progressing: give up on this stream rather than spin. */
    rs_fail(w, rs, true);
}

/* Requests whose owner vanished before answering (their lease is no longer current),
 * or that the owner never answered (its response timeout and 5 s more: 504). */
void rs_check_leases(struct worker *w)
{
    int64_t now = relay_now_ns();
    struct rstream *rs = w->rs_list, *next;
    for (; rs; rs = next) {
        next = rs->next;
        if (rs->phase == RS_BODY)
            continue;
        if (now - rs->started > ((int64_t)w->o->response_timeout_ms + 5000) * 1000000) {
            if (rs->c && rs->phase == RS_STATUS)
                rs->c->fail_status = 504;
            rs_fail(w, rs, rs->phase == RS_WRITE);
        } else if (!orbit_pool_is_current(w->pool, &rs->lease)) {
            /* An owner that let the upstream go wrote its answer first: it decides. */
            int r = rs->phase == RS_STATUS ? rs_read_status(w, rs) : 0;
            if (r == 0)
                rs_fail(w, rs, true);
            else if (r > 0)
                rs_step(w, rs);
        }
    }
}

/* ---- owner streams (side B) --------------------------------------------- */

static void os_end(struct worker *w, struct ostream *os, bool reset)
{
    if (os->wait_armed)
        loop_cancel(&w->loop, &os->o, OP_EP_WAIT);
    if (reset)
        orbit_endpoint_reset(os->ep);
    else
        orbit_endpoint_finish(os->ep);
    orbit_endpoint_close(os->ep);
    os->ep = NULL;
    os->phase = OS_CLOSING;
    if (os->prev) os->prev->next = os->next; else w->os_list = os->next;
    if (os->next) os->next->prev = os->prev;
    w->n_os--;
    loop_obj_kill(&w->loop, &os->o);
}

static void os_set_status(struct ostream *os, int32_t status, uint32_t flags)
{
    uint32_t magic = RELAY_STATUS_MAGIC;
    memset(os->status_frame, 0, sizeof os->status_frame);
    memcpy(os->status_frame, &magic, 4);
    memcpy(os->status_frame + 4, &status, 4);
    memcpy(os->status_frame + 8, &flags, 4);
    os->status_sent = true;
}

/* Pushes wbuf into the stream; when all is in, tells whoever waits for it. */
void os_write_step(struct worker *w, struct ostream *os)
{
    for (int spins = 0; spins < 64 && os->writing; spins++) {
        if (os->peer_gone) {
            os->woff = os->wlen;
        } else if (os->woff < os->wlen) {
            ssize_t n = orbit_endpoint_try_write(os->ep, os->wbuf + os->woff, os->wlen - os->woff);
            if (n == -ORBIT_EAGAIN) {
                int r = ep_wait(w, &os->o, os->ep, true, 1, &os->wait_armed);
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
            up_drained(&w->ups, os->up);
        else
            os_end(w, os, false);
        return;
    }
    if (os->writing) {
        os->peer_gone = true;
        os_write_step(w, os);
    }
}

static void os_write(struct worker *w, struct ostream *os, const char *p, size_t n)
{
    os->wbuf = p;
    os->wlen = n;
    os->woff = 0;
    os->writing = true;
    os_write_step(w, os);
}

/* Refuses the request with status (retryable for the requester), then closes. */
static void os_refuse(struct worker *w, struct ostream *os, int32_t status)
{
    STAT_ADD(w->st, refused, 1);
    os->phase = OS_CLOSING;
    os_set_status(os, status, 0);
    os_write(w, os, os->status_frame, sizeof os->status_frame);
}

/* ---- the owner stream as the upstream's sink ---------------------------- */

static struct ostream *os_of(struct sink *k)
{
    return (struct ostream *)(void *)((char *)k - offsetof(struct ostream, sink));
}

static void os_deliver(struct sink *k, const char *p, size_t n, bool interim)
{
    struct ostream *os = os_of(k);
    struct worker *w = WORKER_OF(&os->o, k_ostream);
    (void)interim;   /* the requester's worker passes interim heads on as it reads them */
    if (!os->status_sent && !os->peer_gone) {
        os_set_status(os, 0, k->close ? RELAY_S_CLOSE : 0);
        /* 16 bytes into a direction nobody wrote yet: always fits. */
        if (orbit_endpoint_try_write_exact(os->ep, os->status_frame, sizeof os->status_frame) < 0)
            os->peer_gone = true;
    }
    os_write(w, os, p, n);
}

static void os_job_done(struct sink *k)
{
    struct ostream *os = os_of(k);
    struct worker *w = WORKER_OF(&os->o, k_ostream);
    STAT_SUB(w->st, serving_remote, 1);
    STAT_ADD(w->st, served_remote, 1);
    os->up = NULL;
    os_end(w, os, false);
}

static void os_job_failed(struct sink *k, enum sink_fail how)
{
    struct ostream *os = os_of(k);
    struct worker *w = WORKER_OF(&os->o, k_ostream);
    STAT_SUB(w->st, serving_remote, 1);
    os->up = NULL;
    if (!os->status_sent)
        os_refuse(w, os, how == SINK_RETRY ? -ORBIT_ERESET : how == SINK_TIMEOUT ? RELAY_STATUS_TIMEOUT
                                                                                 : RELAY_STATUS_SENT);
    else
        os_end(w, os, true);
}

/* Its answer goes into the stream before the upstream leaves the pool: the requester
 * reads it there once it sees the lease end (rs_check_leases). */
static const struct sink_ops os_sink_ops = {
    .piece = os_deliver, .done = os_job_done, .failed = os_job_failed, .answer_first = true,
};

/* The request is in: accept the lease it carries and run it on that upstream. */
static void os_run(struct worker *w, struct ostream *os)
{
    os->phase = OS_RUN;
    STAT_ADD(w->st, serving_remote, 1);
    struct up_job job = { .req = os->req, .req_len = os->req_len, .head_req = os->flags & RELAY_F_HEAD,
                          .idempotent = os->flags & RELAY_F_IDEMPOTENT, .http10 = os->flags & RELAY_F_HTTP10,
                          .keepalive = os->flags & RELAY_F_KEEPALIVE };
    int rc = up_run_lease(&w->ups, &os->lease, &os->sink, &job);
    if (rc < 0) {
        STAT_SUB(w->st, serving_remote, 1);
        os_refuse(w, os, rc);
        return;
    }
    os->up = up_by_id(&w->ups, os->lease.id);
}

void os_step(struct worker *w, struct ostream *os)
{
    for (int spins = 0; spins < 64; spins++) {
        int r;
        ssize_t n;
        switch (os->phase) {
        case OS_HEAD: {
            uint32_t req_len;
            r = orbit_endpoint_try_read_exact(os->ep, os->head, sizeof os->head);
            if (r == -ORBIT_EAGAIN) {
                r = ep_wait(w, &os->o, os->ep, false, sizeof os->head, &os->wait_armed);
                if (r > 0)
                    return;
                if (r == 0)
                    continue;
            }
            if (r < 0 || relay_frame_decode(os->head, &os->lease, &req_len, &os->flags) < 0 ||
                req_len > relay_buffered_max(w->o) || !(os->req = malloc(req_len ? req_len : 1)) ||
                orbit_id_node(os->lease.id) != orbit_fleet_node(w->fleet)) {
                os_end(w, os, true);   /* the requester died, or this is not a relay stream */
                return;
            }
            os->req_len = req_len;
            os->req_got = 0;
            os->phase = OS_REQ;
            break;
        }
        case OS_REQ:
            if (os->req_got == os->req_len) {
                os_run(w, os);
                return;
            }
            n = orbit_endpoint_try_read(os->ep, os->req + os->req_got, os->req_len - os->req_got);
            if (n == -ORBIT_EAGAIN) {
                r = ep_wait(w, &os->o, os->ep, false, 1, &os->wait_armed);
                if (r > 0)
                    return;
                if (r == 0)
                    continue;
                n = -ORBIT_ECORRUPT;
            }
            if (n <= 0) {
                os_end(w, os, true);
                return;
            }
            os->req_got += (size_t)n;
            break;
        case OS_RUN:
        case OS_CLOSING:
            if (os->writing)
                os_write_step(w, os);
            return;
        }
    }
    os_end(w, os, true);
}

static void os_start(struct worker *w, const struct orbit_ticket *t)
{
    struct ostream *os = calloc(1, sizeof *os);
    if (!os || loop_obj_add(&w->loop, &os->o, &w->k_ostream) < 0) {
        free(os);
        return;   /* the requester's lease check or its timeout retries elsewhere */
    }
    if (orbit_streams_open_ticket(w->streams, t, &os->ep) < 0) {
        loop_obj_kill(&w->loop, &os->o);
        return;
    }
    os->phase = OS_HEAD;
    os->sink.ops = &os_sink_ops;
    os->next = w->os_list;
    if (w->os_list)
        w->os_list->prev = os;
    w->os_list = os;
    w->n_os++;
    os_step(w, os);
}

/* A stopping worker takes them too: each carries a lease granted before its upstreams
 * drained (up_stop), and once they are served it has nothing more to take. */
void take_offers(struct worker *w)
{
    struct orbit_ticket t;
    while (orbit_streams_take_offer(w->streams, &t) == 0)
        os_start(w, &t);
}

/*
 * Keep a FUTEX_WAIT on our offers word in the ring. Offers that arrive while
 * arming are taken here; if they keep coming (or the prep fails) it gives up
 * for now and the tick tries again, so offers are never left unwatched.
 */
void arm_offer_wait(struct worker *w)
{
    for (int i = 0; i < 8 && w->loop.futex && !w->offer_armed; i++) {
        struct io_uring_sqe *sqe = loop_sqe(&w->loop);
        int r = orbit_streams_prep_wait_offer(w->streams, sqe);
        /* Not armed: the prep left a NOP, whose completion is ignored. */
        io_uring_sqe_set_data64(sqe, r == 0 ? loop_ud(&w->offers_obj, OP_OFFER_WAIT) : 0);
        if (r == 0) {
            w->offer_armed = true;
            STAT_ADD(w->st, futex_waits, 1);
            return;
        }
        if (r < 0)
            return;
        take_offers(w);
    }
}

