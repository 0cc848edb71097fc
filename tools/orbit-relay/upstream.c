/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: upstream connections to the backend, owned by this worker. */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <orbit/uring.h>
#include "httpmsg.h"
#include "worker.h"

/* ---- upstreams: the owner's side ---------------------------------------- */

void up_recv(struct worker *w, struct upstream *up)
{
    size_t room = up_recv_room(w, up);
    up->capped = room < W_UPBUF - up->len;
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &up->o, OP_U_RECV);
    io_uring_prep_recv(sqe, up->fd, up->buf + up->len, room, 0);
}

/* The request goes out; when it is the whole of it, the response's receive is
 * linked behind it (WF_LINK): the kernel retries a short send (MSG_WAITALL),
 * posts no completion for one that succeeds, and cancels the receive after one
 * that fails. So one round, not two, and one completion. */
static void up_send(struct worker *w, struct upstream *up)
{
    bool link = (w->loop.features & WF_LINK) && !up->job.more;
    if (link && io_uring_sq_space_left(&w->loop.ring) < 2)
        io_uring_submit(&w->loop.ring);   /* a chain is never split across two submits */
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &up->o, OP_U_SEND);
    io_uring_prep_send(sqe, up->fd, up->job.req + up->req_off, up->job.req_len - up->req_off,
                       MSG_NOSIGNAL | (link ? MSG_WAITALL : 0));
    if (!link) {
        w->loop.sends_queued++;
        return;
    }
    sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
    up->linked = true;
    up_recv(w, up);
}

/* A completion of a linked pair (up_send): the receive's, with the send's
 * still unseen, means the send succeeded (its completion was skipped). */
void up_link_cqe(struct worker *w, struct upstream *up, enum w_op op)
{
    if (!up->linked)
        return;
    up->linked = false;
    if (op != OP_U_RECV)
        return;   /* the send failed: its own completion says so */
    up->o.pending--;   /* the send's, which posts none */
    up->sent_any = true;
    up->req_off = up->job.req_len;
    up->t_start = w->loop.now;
}

/* ---- the idle list: a request takes the most recently used idle upstream
 * without a snapshot of the key's every candidate ------------------------- */

static void idle_push(struct worker *w, struct upstream *up)
{
    if (up->idle_at >= 0 || w->n_idle >= W_LANE)
        return;
    up->idle_at = w->n_idle;
    w->idle[w->n_idle++] = up;
}

static void idle_remove(struct worker *w, struct upstream *up)
{
    if (up->idle_at < 0)
        return;
    struct upstream *last = w->idle[--w->n_idle];
    w->idle[up->idle_at] = last;
    last->idle_at = up->idle_at;
    up->idle_at = -1;
}

struct upstream *up_idle_pop(struct worker *w)
{
    if (w->n_idle == 0)
        return NULL;
    struct upstream *up = w->idle[w->n_idle - 1];
    idle_remove(w, up);
    return up;
}

/* Starts forwarding one request; the response goes to the sink. */
static void up_start(struct worker *w, struct upstream *up, enum sink_kind sink, void *sink_obj,
                     const struct up_job *job)
{
    idle_remove(w, up);
    up->busy = true;
    up->sink = sink;
    up->sink_obj = sink_obj;
    up->job = *job;
    up->req_off = 0;
    up->sent_any = up->head_done = up->close_client = up->timed_out = up->handing = up->splicing = false;
    up->len = up->hout_len = up->body_len = 0;
    up->delivered = 0;
    up->t_start = w->loop.now;
    up_send(w, up);
}

/* No one reads this response any more: it is drained into the void. */
void up_unsink(struct worker *w, struct upstream *up)
{
    (void)w;
    up->sink = SINK_NONE;
    up->sink_obj = NULL;
}

/* Ends an upstream: closed, then out of the pool. In that order: its unit of the budget
 * goes back once the backend saw the connection end, so the fleet never holds more
 * connections to the backend than the budget, not even while one closes. */
static void up_retire(struct worker *w, struct upstream *up)
{
    idle_remove(w, up);
    if (up->fd >= 0)
        shutdown(up->fd, SHUT_RDWR);
    if (up->registered) {
        orbit_pool_unregister(w->pool, up->id);
        up->registered = false;
        uint32_t slot = orbit_id_slot(up->id);
        if (slot < W_LANE && w->by_slot[slot] == up)
            w->by_slot[slot] = NULL;
        w->n_ups--;
        STAT_SUB(w->st, upstreams_open, 1);
    }
    if (up->fd >= 0) {
        close(up->fd);
        up->fd = -1;
    }
    up_pipe_close(up);
    loop_obj_kill(&w->loop, &up->o);
}

/*
 * The worker stops: its idle upstreams end now, so their share of the budget
 * goes to whoever dials next (a successor's workers, in an upgrade); a busy
 * one takes no new lease, from us or a peer, and ends when its job does
 * (up_job_done). Requests that still come on our connections go to a peer's
 * upstream or a new one, under the same budget.
 */
void up_stop(struct worker *w)
{
    while (w->n_idle > 0)
        up_retire(w, w->idle[w->n_idle - 1]);
    for (uint32_t s = 0; s < W_LANE; s++)
        if (w->by_slot[s] && w->by_slot[s]->registered)
            orbit_pool_drain(w->pool, w->by_slot[s]->id);
}

/* The worker exits: each upstream it still has is closed, then leaves the pool (up_retire's
 * order: the budget never counts fewer connections than are open, while the process ends). */
void up_close_all(struct worker *w)
{
    for (uint32_t s = 0; s < W_LANE; s++)
        if (w->by_slot[s])
            up_retire(w, w->by_slot[s]);
}

/* A request may go again only if no byte of the response went on, and either
 * none of it reached the backend or its method is idempotent. */
void up_fail(struct worker *w, struct upstream *up)
{
    bool retryable = up->delivered == 0 && (!up->sent_any || up->job.idempotent) && !up->timed_out;
    enum sink_kind sink = up->sink;
    void *obj = up->sink_obj;
    if (sink == SINK_OSTREAM) {
        /* Its answer is in the stream before the lease ends: a requester that sees the
         * lease gone reads it there first. */
        ((struct ostream *)obj)->timed_out = up->timed_out;
        os_job_failed(w, obj, retryable);
        sink = SINK_NONE;
    }
    STAT_ADD(w->st, upstream_failures, 1);
    up->broken = true;
    if (up->busy) {
        orbit_execution_complete(&up->exec);
        up->busy = false;
    }
    up_unsink(w, up);
    up_retire(w, up);
    if (sink == SINK_CLIENT) {
        if (up->timed_out)
            ((struct client *)obj)->fail_status = 504;
        client_job_failed(w, obj, retryable);
    }
    sweep(w);   /* the budget has room again */
}

void up_job_done(struct worker *w, struct upstream *up)
{
    enum sink_kind sink = up->sink;
    void *obj = up->sink_obj;
    /* The unit goes back before anyone is told, so our own waiters can take it. */
    orbit_execution_complete(&up->exec);
    up->busy = false;
    up_unsink(w, up);
    if (!up->keepalive || w->loop.stopping || (w->n_ups > fair_share(w) && others_starving(w)))
        up_retire(w, up);   /* closed by the backend, stopping, or more than our share while others wait */
    else
        idle_push(w, up);
    if (sink == SINK_CLIENT) {
        struct client *c = obj;
        c->keepalive = c->keepalive && !up->close_client;
        client_resp_done(w, c);
    } else if (sink == SINK_OSTREAM) {
        os_job_done(w, obj);
    }
    sweep(w);
}

/* The next piece for the sink, the rewritten head, then the body bytes: false
 * when none is left. */
bool up_next_piece(struct upstream *up, const char **p, size_t *n)
{
    if (up->hout_len) {
        *p = up->hout;
        *n = up->hout_len;
        up->hout_len = 0;
    } else if (up->body_len) {
        *p = up->body;
        *n = up->body_len;
        up->body_len = 0;
    } else {
        return false;
    }
    if (up->head_done)
        up->delivered += *n;   /* interim heads alone are not the response */
    return true;
}

/* Hands the sink the next piece. */
static void up_deliver(struct worker *w, struct upstream *up)
{
    const char *p;
    size_t n;
    if (!up_next_piece(up, &p, &n)) {
        up_drained(w, up);
        return;
    }
    up->handing = true;
    switch (up->sink) {
    case SINK_CLIENT:
        if (up->head_done)
            client_send(w, up->sink_obj, p, n);
        else
            client_send_interim(w, up->sink_obj, p, n);
        break;
    case SINK_OSTREAM: os_deliver(w, up->sink_obj, p, n); break;
    default: up_drained(w, up); break;
    }
}

/* The sink took the piece handed to it: the next one, more bytes, or the end. */
void up_drained(struct worker *w, struct upstream *up)
{
    up->handing = false;
    if (up->hout_len || up->body_len) {
        up_deliver(w, up);
        return;
    }
    if (up->splicing) {
        up_splice_drained(w, up);
        return;
    }
    if (!up->head_done) {   /* interim heads went on: the final one (begun in buf, maybe) is to come */
        up_recv(w, up);
        return;
    }
    up->len = 0;
    if (up->head_done && up->msg.complete)
        up_job_done(w, up);
    else
        up_recv(w, up);
}

/*
 * An interim (1xx) head of r bytes at buf: 102, 103 and the like go on to an
 * HTTP/1.1 client without hop-by-hop fields (never to HTTP/1.0, RFC 9110 15.2);
 * 100 is dropped (the relay answered any 100-continue itself). -1 on error.
 */
static int up_interim(struct upstream *up, size_t r)
{
    if (up->msg.h.status != 100 && !up->job.http10) {
        struct hm_rewrite rw = { 0 };
        ssize_t n = hm_msg_rewrite(&up->msg, up->buf, &rw, up->hout + up->hout_len, sizeof up->hout - up->hout_len);
        if (n < 0)
            return -1;
        up->hout_len += (size_t)n;
    }
    memmove(up->buf, up->buf + r, up->len - r);
    up->len -= r;
    return 0;
}

/*
 * The response's heads: interim ones (up_interim) then the final one,
 * rewritten for the client after them in hout: hop-by-hop fields out, its
 * Connection in, a chunked body de-chunked for an HTTP/1.0 client. 101 is
 * never asked for. Returns the final head's length, 0 for more, -1 on error.
 */
static int up_head(struct upstream *up)
{
    for (;;) {
        int r = hm_head_parse(&up->msg, HM_RESPONSE, up->buf, up->len, W_UPHEAD, up->job.head_req);
        if (r <= 0)
            return r == 0 && up->len < W_UPBUF ? 0 : -1;
        if (up->msg.h.status == 101)
            return -1;
        if (up->msg.h.status >= 200)
            break;
        if (up_interim(up, (size_t)r) < 0)
            return -1;
        if (up->len == 0)
            return 0;
    }
    const struct hm_head *h = &up->msg.h;
    bool dechunk = up->job.http10 && h->chunked;
    up->msg.dechunk = dechunk;
    up->keepalive = h->keepalive;
    up->close_client = !up->job.keepalive || h->close_delimited || dechunk;
    struct hm_rewrite rw = { .drop_te = dechunk,
                             .connection = up->close_client ? "close" : up->job.http10 ? "keep-alive" : NULL };
    ssize_t n = hm_msg_rewrite(&up->msg, up->buf, &rw, up->hout + up->hout_len, sizeof up->hout - up->hout_len);
    if (n < 0)
        return -1;
    up->hout_len += (size_t)n;
    up->head_done = true;
    return (int)h->head_len;
}

/* The rewritten head and the body bytes after it go out as one piece (one send):
 * the head moves into buf just before the body when it fits there, else the
 * body joins it in hout. */
static void up_join_head(struct upstream *up, size_t head_len)
{
    if (up->hout_len <= head_len) {
        char *at = up->buf + head_len - up->hout_len;
        memcpy(at, up->hout, up->hout_len);
        up->body = at;
        up->body_len += up->hout_len;
        up->hout_len = 0;
    } else if (up->hout_len + up->body_len <= sizeof up->hout) {
        memcpy(up->hout + up->hout_len, up->body, up->body_len);
        up->hout_len += up->body_len;
        up->body_len = 0;
    }
}

/* EOF from the backend: the end of a close-delimited body, or a failure. */
static void up_on_eof(struct worker *w, struct upstream *up)
{
    if (!up->head_done || hm_eof(&up->msg) < 0) {
        up_fail(w, up);
        return;
    }
    up->keepalive = false;
    up_drained(w, up);
}

void up_on_recv(struct worker *w, struct upstream *up, int res)
{
    if (res < 0 || (res == 0 && !up->busy)) {
        up_fail(w, up);
        return;
    }
    if (res == 0) {
        up_on_eof(w, up);
        return;
    }
    up->len += (size_t)res;
    up->t_start = w->loop.now;   /* the response timeout also bounds each wait for more of it */
    size_t start = 0;
    if (!up->head_done) {
        int r = up_head(up);
        if (r == 0) {
            if (up->hout_len)
                up_deliver(w, up);   /* interim heads go on now, not with the final one */
            else
                up_recv(w, up);
            return;
        }
        if (r < 0) {
            up_fail(w, up);
            return;
        }
        start = (size_t)r;
    }
    up_read_rest_now(w, up, start);
    size_t out;
    ssize_t used = hm_body(&up->msg, up->buf + start, up->len - start, &out);
    if (used < 0) {
        up_fail(w, up);
        return;
    }
    if (up->msg.complete && start + (size_t)used < up->len)
        up->keepalive = false;   /* bytes past the response: out of step, not reused */
    up->body = up->buf + start;
    up->body_len = out;
    if (start)
        up_join_head(up, start);
    if (!up_splice_begin(w, up))
        up_deliver(w, up);
}

void up_on_send(struct worker *w, struct upstream *up, int res, bool linked)
{
    if (linked) {   /* only a failed one completes: a short send that could not go on */
        up->sent_any = res > 0;
        up_fail(w, up);
        return;
    }
    if (res <= 0) {
        up_fail(w, up);
        return;
    }
    up->sent_any = true;
    up->t_start = w->loop.now;   /* the response timeout runs from the request's last byte */
    up->req_off += (size_t)res;
    if (up->req_off < up->job.req_len)
        up_send(w, up);
    else if (up->job.more && up->sink == SINK_CLIENT)
        client_stream_more(w, up->sink_obj);
    else if (up->job.more)
        up_fail(w, up);   /* the client left mid-body: this request cannot end */
    else
        up_recv(w, up);
}

struct upstream *up_by_id(struct worker *w, orbit_id id)
{
    uint32_t slot = orbit_id_slot(id);
    if (slot >= W_LANE || !w->by_slot[slot] || w->by_slot[slot]->id != id)
        return NULL;
    return w->by_slot[slot];
}

/* An idle upstream the backend has not closed (nor written to). */
static bool up_still_open(struct upstream *up)
{
    char b;
    ssize_t r = recv(up->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Out of the pool with no job to report. */
static void up_fail_quiet(struct worker *w, struct upstream *up)
{
    up_unsink(w, up);
    up_fail(w, up);
}

/* Accepts a lease on one of our upstreams and runs the request on it: 0, or a negative code. */
int up_run_lease(struct worker *w, const struct orbit_lease *lease, enum sink_kind sink, void *obj,
                 const struct up_job *job)
{
    struct upstream *up = up_by_id(w, lease->id);
    struct orbit_execution exec;
    int rc = orbit_pool_accept(w->pool, lease, &exec);
    if (rc < 0)
        return rc;
    if (!up || up->busy || up->broken) {   /* cannot happen while the pool counts right */
        orbit_execution_complete(&exec);
        return -ORBIT_EBUSY;
    }
    up->exec = exec;
    if (up->reused && !job->idempotent && !up_still_open(up)) {
        up->busy = true;   /* closed while idle: nothing was sent, the request goes elsewhere */
        up_fail_quiet(w, up);
        return -ORBIT_ERESET;
    }
    up->reused = true;
    up_start(w, up, sink, obj, job);
    return 0;
}

/* up_create zeroes what lies before hout: the buffers must be the struct's tail. */
_Static_assert(offsetof(struct upstream, buf) == offsetof(struct upstream, hout) + W_UPHEAD * 2 + 128 &&
               sizeof(struct upstream) - offsetof(struct upstream, buf) < W_UPBUF + _Alignof(struct upstream),
               "struct upstream must end with hout and buf");

void up_create(struct worker *w, struct client *c, struct orbit_permit *permit)
{
    /* Its buffers (hout, buf: most of its 300 KiB) are written before they are read;
     * zeroing them took most of the CPU time of a request the backend refused. */
    struct upstream *up = malloc(sizeof *up);
    if (up)
        memset(up, 0, offsetof(struct upstream, hout));
    if (!up || loop_obj_add(&w->loop, &up->o, &w->k_upstream) < 0) {
        free(up);
        orbit_permit_finish(permit);
        client_error(w, c, 503, "Service Unavailable", false);
        return;
    }
    up->permit = *permit;
    up->idle_at = -1;
    up->pipe_rd = up->pipe_wr = -1;
    up->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    up->creator = c;
    up->addr = w->o->upstream;
    up->t_start = w->loop.now;
    c->state = C_CREATE;
    c->up = up;
    w->n_creating++;
    int one = 1;
    setsockopt(up->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &up->o, OP_U_CONNECT);
    io_uring_prep_connect(sqe, up->fd, (const struct sockaddr *)&up->addr, sizeof up->addr);
}

void up_on_connect(struct worker *w, struct upstream *up, int res)
{
    struct client *c = up->creator;
    up->creator = NULL;
    w->n_creating--;
    int rc = res;
    if (rc == 0) {
        /* Registered before the permit ends: live + creating never dips below the truth. */
        rc = orbit_pool_register(w->pool, w->key, 1, &up->id);
        if (rc == 0 && orbit_id_slot(up->id) >= W_LANE) {
            orbit_pool_unregister(w->pool, up->id);
            rc = -ORBIT_ECORRUPT;
        }
    }
    orbit_permit_finish(&up->permit);
    if (rc < 0) {
        STAT_ADD(w->st, upstream_failures, 1);
        up_retire(w, up);
        if (c && up->timed_out)
            c->fail_status = 504;
        /* A backend that refused (or did not answer) a connect is not dialled again for
         * this request: at once it would refuse again, and with the backend down each
         * request took eight connects and the workers both CPUs. A connect that worked
         * but could not be entered in the pool may go again. */
        if (c)
            client_job_failed(w, c, res == 0);
        sweep(w);
        return;
    }
    up->registered = true;
    w->by_slot[orbit_id_slot(up->id)] = up;
    w->n_ups++;
    STAT_ADD(w->st, upstreams_created, 1);
    STAT_ADD(w->st, upstreams_open, 1);
    idle_push(w, up);   /* until a request takes it (up_start) */
    if (!c && w->loop.stopping) {
        up_retire(w, up);   /* its client left meanwhile, and nobody else will take it from us */
    } else if (c) {
        /* Our own new upstream, unless another worker leased it in between. */
        struct orbit_lease lease;
        c->up = NULL;
        struct up_job job = client_job(c);
        if (orbit_pool_reserve(w->pool, up->id, &lease) == 0 &&
            up_run_lease(w, &lease, SINK_CLIENT, c, &job) == 0) {
            c->state = C_LOCAL;
            c->up = up;
            STAT_ADD(w->st, local_leases, 1);
        } else {
            dispatch(w, c);
        }
    }
    sweep(w);
}


/* The next piece of a streamed body. */
void up_stream(struct worker *w, struct upstream *up, const char *p, size_t n, bool more)
{
    up->job.req = p;
    up->job.req_len = n;
    up->job.more = more;
    up->req_off = 0;
    up_send(w, up);
}

/* The request cannot complete (its client left mid-body): the upstream goes. */
void up_abort(struct worker *w, struct upstream *up)
{
    up_unsink(w, up);
    up_fail(w, up);
}

/* Busy, and what it waits for is the backend: not the sink taking a piece, nor the
 * client sending the next piece of a streamed body. */
static bool up_waits_on_backend(const struct upstream *up)
{
    return up->busy && !up->handing && !(up->job.more && up->req_off == up->job.req_len);
}

/* Housekeeping: a connect, or a response (its head, or the next bytes of its body),
 * that takes longer than configured. Past the head the request fails as a cut. */
void up_check_timeouts(struct worker *w, struct upstream *up, int64_t now)
{
    if (up->timed_out)
        return;
    if (!up->registered && up->fd >= 0 && now - up->t_start > (int64_t)w->o->connect_timeout_ms * 1000000) {
        up->timed_out = true;
        loop_cancel(&w->loop, &up->o, OP_U_CONNECT);
    } else if (up_waits_on_backend(up) && now - up->t_start > (int64_t)w->o->response_timeout_ms * 1000000) {
        up->timed_out = true;
        up_fail(w, up);
    }
}
