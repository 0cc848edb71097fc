/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: upstream connections to the backend, owned by this
 * worker: dialled under a permit, registered in the pool, leased for one
 * request at a time, retired when the backend closes or the worker holds
 * more than its share while others wait. A job sends the request and hands
 * the response, head rewritten, to its sink piece by piece.
 */
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
#include "splice.h"
#include "upstream.h"

/* ---- upstreams: the owner's side ---------------------------------------- */

static void up_recv(struct up_set *s, struct upstream *up)
{
    size_t room = splice_recv_room(s->l, up);
    up->capped = room < UP_BUF - up->len;
    struct io_uring_sqe *sqe = loop_obj_sqe(s->l, &up->o, UP_OP_RECV);
    io_uring_prep_recv(sqe, up->fd, up->buf + up->len, room, 0);
}

/* The request goes out; when it is the whole of it, the response's receive is
 * linked behind it (WF_LINK): the kernel retries a short send (MSG_WAITALL),
 * posts no completion for one that succeeds, and cancels the receive after one
 * that fails. So one round, not two, and one completion. */
static void up_send(struct up_set *s, struct upstream *up)
{
    bool link = (s->l->features & WF_LINK) && !up->job.more;
    if (link && io_uring_sq_space_left(&s->l->ring) < 2)
        io_uring_submit(&s->l->ring);   /* a chain is never split across two submits */
    struct io_uring_sqe *sqe = loop_obj_sqe(s->l, &up->o, UP_OP_SEND);
    io_uring_prep_send(sqe, up->fd, up->job.req + up->req_off, up->job.req_len - up->req_off,
                       MSG_NOSIGNAL | (link ? MSG_WAITALL : 0));
    if (!link) {
        s->l->sends_queued++;
        return;
    }
    sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
    up->linked = true;
    up_recv(s, up);
}

/* A completion of a linked pair (up_send): the receive's, with the send's
 * still unseen, means the send succeeded (its completion was skipped). */
static void up_link_cqe(struct up_set *s, struct upstream *up, unsigned op)
{
    if (!up->linked)
        return;
    up->linked = false;
    if (op != UP_OP_RECV)
        return;   /* the send failed: its own completion says so */
    up->o.pending--;   /* the send's, which posts none */
    up->sent_any = true;
    up->req_off = up->job.req_len;
    up->t_start = s->l->now;
}

/* ---- the idle list: a request takes the most recently used idle upstream
 * without a snapshot of the key's every candidate ------------------------- */

static void idle_push(struct up_set *s, struct upstream *up)
{
    if (up->idle_at >= 0 || s->n_idle >= UP_LANE)
        return;
    up->idle_at = s->n_idle;
    s->idle[s->n_idle++] = up;
}

static void idle_remove(struct up_set *s, struct upstream *up)
{
    if (up->idle_at < 0)
        return;
    struct upstream *last = s->idle[--s->n_idle];
    s->idle[up->idle_at] = last;
    last->idle_at = up->idle_at;
    up->idle_at = -1;
}

struct upstream *up_idle_pop(struct up_set *s)
{
    if (s->n_idle == 0)
        return NULL;
    struct upstream *up = s->idle[s->n_idle - 1];
    idle_remove(s, up);
    return up;
}

/* Starts forwarding one request; the response goes to the sink. */
static void up_start(struct up_set *s, struct upstream *up, struct sink *sink, const struct up_job *job)
{
    idle_remove(s, up);
    up->busy = true;
    up->sink = sink;
    up->job = *job;
    up->req_off = 0;
    up->sent_any = up->head_done = up->close_client = up->timed_out = up->handing = up->splicing = false;
    up->len = up->hout_len = up->body_len = 0;
    up->delivered = 0;
    up->t_start = s->l->now;
    up_send(s, up);
}

/* No one reads this response any more: it is drained into the void. */
static void up_unsink(struct upstream *up)
{
    up->sink = NULL;
}

/* Ends an upstream: closed, then out of the pool. In that order: its unit of the budget
 * goes back once the backend saw the connection end, so the fleet never holds more
 * connections to the backend than the budget, not even while one closes. */
static void up_retire(struct up_set *s, struct upstream *up)
{
    idle_remove(s, up);
    if (up->fd >= 0)
        shutdown(up->fd, SHUT_RDWR);
    if (up->registered) {
        orbit_pool_unregister(s->pool, up->id);
        up->registered = false;
        uint32_t slot = orbit_id_slot(up->id);
        if (slot < UP_LANE && s->by_slot[slot] == up)
            s->by_slot[slot] = NULL;
        s->n_ups--;
        STAT_SUB(s->l->st, upstreams_open, 1);
    }
    if (up->fd >= 0) {
        close(up->fd);
        up->fd = -1;
    }
    splice_pipe_close(up);
    loop_obj_kill(s->l, &up->o);
}

/*
 * The worker stops: its idle upstreams end now, so their share of the budget
 * goes to whoever dials next (a successor's workers, in an upgrade); a busy
 * one takes no new lease, from us or a peer, and ends when its job does
 * (up_job_done). Requests that still come on our connections go to a peer's
 * upstream or a new one, under the same budget.
 */
void up_stop(struct up_set *s)
{
    while (s->n_idle > 0)
        up_retire(s, s->idle[s->n_idle - 1]);
    for (uint32_t slot = 0; slot < UP_LANE; slot++)
        if (s->by_slot[slot] && s->by_slot[slot]->registered)
            orbit_pool_drain(s->pool, s->by_slot[slot]->id);
}

/* The worker exits: each upstream it still has is closed, then leaves the pool (up_retire's
 * order: the budget never counts fewer connections than are open, while the process ends). */
void up_close_all(struct up_set *s)
{
    for (uint32_t slot = 0; slot < UP_LANE; slot++)
        if (s->by_slot[slot])
            up_retire(s, s->by_slot[slot]);
}

/* A request may go again only if no byte of the response went on, and either
 * none of it reached the backend or its method is idempotent. */
static void up_fail(struct up_set *s, struct upstream *up)
{
    bool retryable = up->delivered == 0 && (!up->sent_any || up->job.idempotent) && !up->timed_out;
    enum sink_fail how = retryable ? SINK_RETRY : up->delivered ? SINK_CUT
                         : up->timed_out ? SINK_TIMEOUT : SINK_BAD_GATEWAY;
    struct sink *sink = up->sink;
    if (sink && sink->ops->answer_first) {
        /* Its answer is in the stream before the lease ends: a requester that sees the
         * lease gone reads it there first. */
        sink->ops->failed(sink, how);
        sink = NULL;
    }
    STAT_ADD(s->l->st, upstream_failures, 1);
    up->broken = true;
    if (up->busy) {
        orbit_execution_complete(&up->exec);
        up->busy = false;
    }
    up_unsink(up);
    up_retire(s, up);
    if (sink)
        sink->ops->failed(sink, how);
    s->hooks->capacity(s->ctx);   /* the budget has room again */
}

static void up_job_done(struct up_set *s, struct upstream *up)
{
    struct sink *sink = up->sink;
    /* The unit goes back before anyone is told, so our own waiters can take it. */
    orbit_execution_complete(&up->exec);
    up->busy = false;
    up_unsink(up);
    if (!up->keepalive || s->l->stopping || (s->n_ups > share_fair(s->share) && share_others_starving(s->share)))
        up_retire(s, up);   /* closed by the backend, stopping, or more than our share while others wait */
    else
        idle_push(s, up);
    if (sink)
        sink->ops->done(sink);
    s->hooks->capacity(s->ctx);
}

/* The next piece for the sink, the rewritten head, then the body bytes: false
 * when none is left. */
static bool up_next_piece(struct upstream *up, const char **p, size_t *n)
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
static void up_deliver(struct up_set *s, struct upstream *up)
{
    const char *p;
    size_t n;
    if (!up_next_piece(up, &p, &n)) {
        up_drained(s, up);
        return;
    }
    up->handing = true;
    if (up->sink)
        up->sink->ops->piece(up->sink, p, n, !up->head_done);
    else
        up_drained(s, up);
}

/* Moves a spliced body on (splice.c) and acts on where it stopped. */
static void up_splice(struct up_set *s, struct upstream *up)
{
    int err = 0;
    switch (splice_move(s->l, up, &err)) {
    case SPLICE_DONE:   /* the body is all in the client's socket: the job ends as a copied one does */
        up->splicing = false;
        up->len = 0;
        STAT_ADD(s->l->st, spliced, 1);
        up_job_done(s, up);
        return;
    case SPLICE_WAIT:
        return;
    case SPLICE_OFF:
        up->splicing = false;
        up_recv(s, up);
        return;
    case SPLICE_CUT:
        up_fail(s, up);   /* cut mid-body: the client's connection goes with it */
        return;
    case SPLICE_BROKEN:
        up->sink->ops->broken(up->sink, err);   /* the client is gone: it releases us, up_drained ends us */
        return;
    case SPLICE_NO_READER:
        up_abort(s, up);   /* no reader for the rest of this body: the connection cannot be reused */
        return;
    }
}

/*
 * The response's head is in and its body's rest is for splice: the head and
 * the body bytes read with it go out now, by a plain send, so that the splice
 * follows within this turn; a socket that takes only part of them gets the rest
 * as an io_uring send, and the splice goes on from up_drained. False: not for
 * splice (the caller hands the pieces on as usual).
 */
static bool up_splice_begin(struct up_set *s, struct upstream *up)
{
    if (!splice_ready(s->l, up))
        return false;
    up->splicing = true;
    const char *p;
    size_t n;
    while (up_next_piece(up, &p, &n)) {
        up->handing = true;
        int r = conn_send_now(s->l, up->sink->conn, p, n);
        if (r == 0)
            return true;
        up->handing = false;
        if (r < 0) {
            up->sink->ops->broken(up->sink, r);
            return true;
        }
    }
    up_splice(s, up);
    return true;
}

/* The sink took the piece handed to it: the next one, more bytes, or the end. */
void up_drained(struct up_set *s, struct upstream *up)
{
    up->handing = false;
    if (up->hout_len || up->body_len) {
        up_deliver(s, up);
        return;
    }
    if (up->splicing) {
        up->pipe_len = 0;   /* the sink took what the pipe held (or left) */
        up_splice(s, up);
        return;
    }
    if (!up->head_done) {   /* interim heads went on: the final one (begun in buf, maybe) is to come */
        up_recv(s, up);
        return;
    }
    up->len = 0;
    if (up->head_done && up->msg.complete)
        up_job_done(s, up);
    else
        up_recv(s, up);
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
        int r = hm_head_parse(&up->msg, HM_RESPONSE, up->buf, up->len, UP_HEAD, up->job.head_req);
        if (r <= 0)
            return r == 0 && up->len < UP_BUF ? 0 : -1;
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
    if (up->sink)
        up->sink->close = up->close_client;
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
static void up_on_eof(struct up_set *s, struct upstream *up)
{
    if (!up->head_done || hm_eof(&up->msg) < 0) {
        up_fail(s, up);
        return;
    }
    up->keepalive = false;
    up_drained(s, up);
}

static void up_on_recv(struct up_set *s, struct upstream *up, int res)
{
    if (res < 0 || (res == 0 && !up->busy)) {
        up_fail(s, up);
        return;
    }
    if (res == 0) {
        up_on_eof(s, up);
        return;
    }
    up->len += (size_t)res;
    up->t_start = s->l->now;   /* the response timeout also bounds each wait for more of it */
    size_t start = 0;
    if (!up->head_done) {
        int r = up_head(up);
        if (r == 0) {
            if (up->hout_len)
                up_deliver(s, up);   /* interim heads go on now, not with the final one */
            else
                up_recv(s, up);
            return;
        }
        if (r < 0) {
            up_fail(s, up);
            return;
        }
        start = (size_t)r;
    }
    splice_read_rest_now(s->l, up, start);
    size_t out;
    ssize_t used = hm_body(&up->msg, up->buf + start, up->len - start, &out);
    if (used < 0) {
        up_fail(s, up);
        return;
    }
    if (up->msg.complete && start + (size_t)used < up->len)
        up->keepalive = false;   /* bytes past the response: out of step, not reused */
    up->body = up->buf + start;
    up->body_len = out;
    if (start)
        up_join_head(up, start);
    if (!up_splice_begin(s, up))
        up_deliver(s, up);
}

static void up_on_send(struct up_set *s, struct upstream *up, int res, bool linked)
{
    if (linked) {   /* only a failed one completes: a short send that could not go on */
        up->sent_any = res > 0;
        up_fail(s, up);
        return;
    }
    if (res <= 0) {
        up_fail(s, up);
        return;
    }
    up->sent_any = true;
    up->t_start = s->l->now;   /* the response timeout runs from the request's last byte */
    up->req_off += (size_t)res;
    if (up->req_off < up->job.req_len)
        up_send(s, up);
    else if (up->job.more && up->sink && up->sink->ops->more)
        up->sink->ops->more(up->sink);
    else if (up->job.more)
        up_fail(s, up);   /* the client left mid-body: this request cannot end */
    else
        up_recv(s, up);
}

struct upstream *up_by_id(struct up_set *s, orbit_id id)
{
    uint32_t slot = orbit_id_slot(id);
    if (slot >= UP_LANE || !s->by_slot[slot] || s->by_slot[slot]->id != id)
        return NULL;
    return s->by_slot[slot];
}

/* An idle upstream the backend has not closed (nor written to). */
static bool up_still_open(struct upstream *up)
{
    char b;
    ssize_t r = recv(up->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Out of the pool with no job to report. */
static void up_fail_quiet(struct up_set *s, struct upstream *up)
{
    up_unsink(up);
    up_fail(s, up);
}

/* Accepts a lease on one of our upstreams and runs the request on it: 0, or a negative code. */
int up_run_lease(struct up_set *s, const struct orbit_lease *lease, struct sink *sink, const struct up_job *job)
{
    struct upstream *up = up_by_id(s, lease->id);
    struct orbit_execution exec;
    int rc = orbit_pool_accept(s->pool, lease, &exec);
    if (rc < 0)
        return rc;
    if (!up || up->busy || up->broken) {   /* cannot happen while the pool counts right */
        orbit_execution_complete(&exec);
        return -ORBIT_EBUSY;
    }
    up->exec = exec;
    if (up->reused && !job->idempotent && !up_still_open(up)) {
        up->busy = true;   /* closed while idle: nothing was sent, the request goes elsewhere */
        up_fail_quiet(s, up);
        return -ORBIT_ERESET;
    }
    up->reused = true;
    up_start(s, up, sink, job);
    return 0;
}

/* up_create zeroes what lies before hout: the buffers must be the struct's tail. */
_Static_assert(offsetof(struct upstream, buf) == offsetof(struct upstream, hout) + UP_HEAD * 2 + 128 &&
               sizeof(struct upstream) - offsetof(struct upstream, buf) < UP_BUF + _Alignof(struct upstream),
               "struct upstream must end with hout and buf");

int up_create(struct up_set *s, struct orbit_permit *permit, void *creator, struct upstream **out)
{
    /* Its buffers (hout, buf: most of its 300 KiB) are written before they are read;
     * zeroing them took most of the CPU time of a request the backend refused. */
    struct upstream *up = malloc(sizeof *up);
    if (up)
        memset(up, 0, offsetof(struct upstream, hout));
    if (!up || loop_obj_add(s->l, &up->o, &s->kind) < 0) {
        free(up);
        orbit_permit_finish(permit);
        return -ENOMEM;
    }
    up->permit = *permit;
    up->idle_at = -1;
    up->pipe_rd = up->pipe_wr = -1;
    up->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    up->creator = creator;
    up->addr = s->l->o->upstream;
    up->t_start = s->l->now;
    s->n_creating++;
    int one = 1;
    setsockopt(up->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct io_uring_sqe *sqe = loop_obj_sqe(s->l, &up->o, UP_OP_CONNECT);
    io_uring_prep_connect(sqe, up->fd, (const struct sockaddr *)&up->addr, sizeof up->addr);
    *out = up;
    return 0;
}

void up_forget_creator(struct upstream *up)
{
    up->creator = NULL;
}

static void up_on_connect(struct up_set *s, struct upstream *up, int res)
{
    void *creator = up->creator;
    up->creator = NULL;
    s->n_creating--;
    int rc = res;
    if (rc == 0) {
        /* Registered before the permit ends: live + creating never dips below the truth. */
        rc = orbit_pool_register(s->pool, s->key, 1, &up->id);
        if (rc == 0 && orbit_id_slot(up->id) >= UP_LANE) {
            orbit_pool_unregister(s->pool, up->id);
            rc = -ORBIT_ECORRUPT;
        }
    }
    orbit_permit_finish(&up->permit);
    if (rc < 0) {
        STAT_ADD(s->l->st, upstream_failures, 1);
        up_retire(s, up);
        /* A backend that refused (or did not answer) a connect is not dialled again for
         * this request: at once it would refuse again, and with the backend down each
         * request took eight connects and the workers both CPUs. A connect that worked
         * but could not be entered in the pool may go again. */
        if (creator)
            s->hooks->created(s->ctx, creator, NULL, res == 0, up->timed_out);
        s->hooks->capacity(s->ctx);
        return;
    }
    up->registered = true;
    s->by_slot[orbit_id_slot(up->id)] = up;
    s->n_ups++;
    STAT_ADD(s->l->st, upstreams_created, 1);
    STAT_ADD(s->l->st, upstreams_open, 1);
    idle_push(s, up);   /* until a request takes it (up_start) */
    if (!creator && s->l->stopping)
        up_retire(s, up);   /* its client left meanwhile, and nobody else will take it from us */
    else if (creator)
        s->hooks->created(s->ctx, creator, up, false, false);
    s->hooks->capacity(s->ctx);
}

void up_stream(struct up_set *s, struct upstream *up, const char *p, size_t n, bool more)
{
    up->job.req = p;
    up->job.req_len = n;
    up->job.more = more;
    up->req_off = 0;
    up_send(s, up);
}

void up_abort(struct up_set *s, struct upstream *up)
{
    up_unsink(up);
    up_fail(s, up);
}

void up_release(struct up_set *s, struct upstream *up)
{
    up_unsink(up);
    up_drained(s, up);   /* it waited for the sink: carry on, discarding */
}

/* Busy, and what it waits for is the backend: not the sink taking a piece, nor the
 * client sending the next piece of a streamed body. */
static bool up_waits_on_backend(const struct upstream *up)
{
    return up->busy && !up->handing && !(up->job.more && up->req_off == up->job.req_len);
}

/* Housekeeping: a connect, or a response (its head, or the next bytes of its body),
 * that takes longer than configured. Past the head the request fails as a cut. */
static void up_check_timeouts(struct up_set *s, struct upstream *up, int64_t now)
{
    const struct relay_opts *o = s->l->o;
    if (up->timed_out)
        return;
    if (!up->registered && up->fd >= 0 && now - up->t_start > (int64_t)o->connect_timeout_ms * 1000000) {
        up->timed_out = true;
        loop_cancel(s->l, &up->o, UP_OP_CONNECT);
    } else if (up_waits_on_backend(up) && now - up->t_start > (int64_t)o->response_timeout_ms * 1000000) {
        up->timed_out = true;
        up_fail(s, up);
    }
}

void up_reconcile(struct up_set *s)
{
    for (uint32_t slot = 0; slot < UP_LANE; slot++) {
        struct upstream *up = s->by_slot[slot];
        if (up && up->registered)
            orbit_pool_reconcile(s->pool, up->id, up->busy ? 1 : 0, UP_GRACE_MS);
    }
}

/* ---- the loop's kind ------------------------------------------------------ */

static struct up_set *set_of(const struct loop_obj *o)
{
    return (struct up_set *)(void *)((char *)o->kind - offsetof(struct up_set, kind));
}

static void up_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct up_set *s = set_of(o);
    struct upstream *up = (struct upstream *)o;
    bool linked = false;
    if (op == UP_OP_SEND || op == UP_OP_RECV) {
        linked = up->linked;
        up_link_cqe(s, up, op);   /* before the dead check: pending stays exact */
    }
    if (loop_cqe_dead(s->l, o, res, flags))
        return;
    switch (op) {
    case UP_OP_CONNECT: up_on_connect(s, up, res); break;
    case UP_OP_SEND: up_on_send(s, up, res, linked); break;
    case UP_OP_RECV: up_on_recv(s, up, res); break;
    case UP_OP_POLL:   /* the backend's socket has body bytes to splice */
        if (res < 0)
            up_fail(s, up);
        else
            up_splice(s, up);
        break;
    default: break;
    }
}

static void up_on_tick(struct loop_obj *o, int64_t now)
{
    up_check_timeouts(set_of(o), (struct upstream *)o, now);
}

static void up_free(struct loop_obj *o)
{
    free(o);
}

void up_set_init(struct up_set *s, struct loop *l, struct share *share, struct orbit_pool *pool, orbit_key key,
                 const struct up_hooks *hooks, void *ctx)
{
    *s = (struct up_set){ .l = l, .kind = { up_on_cqe, up_on_tick, up_free }, .share = share, .pool = pool,
                          .key = key, .hooks = hooks, .ctx = ctx };
}
