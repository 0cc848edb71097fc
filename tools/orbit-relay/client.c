/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: client connections (accept, read a request, send the response). */
#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <orbit/uring.h>
#include "http.h"
#include "httpmsg.h"
#include "worker.h"

/* ---- clients ------------------------------------------------------------ */

/* Room for the next recv: the buffer grows up to a whole request's limit. */
static int client_room(struct worker *w, struct client *c)
{
    size_t limit = relay_buffered_max(w->o) + W_IN;
    if (c->in_cap - c->in_len >= W_IN / 4 || c->in_cap >= limit)
        return c->in_len < c->in_cap ? 0 : -1;
    size_t cap = c->in_cap * 2 < limit ? c->in_cap * 2 : limit;
    char *in = realloc(c->in, cap);
    if (!in)
        return -1;
    c->in = in;
    c->in_cap = cap;
    return 0;
}

static void client_recv(struct worker *w, struct client *c)
{
    if (client_room(w, c) < 0) {
        client_error(w, c, 413, "Content Too Large", true);
        return;
    }
    conn_read(&w->conns, &c->conn, c->in + c->in_len, c->in_cap - c->in_len);
}

void queue_remove(struct worker *w, struct client *c)
{
    if (!c->queued)
        return;
    if (c->qprev) c->qprev->qnext = c->qnext; else w->qhead = c->qnext;
    if (c->qnext) c->qnext->qprev = c->qprev; else w->qtail = c->qprev;
    c->qnext = c->qprev = NULL;
    c->queued = false;
    STAT_SUB(w->st, queued, 1);
}

void queue_push(struct worker *w, struct client *c)
{
    c->qnext = NULL;
    c->qprev = w->qtail;
    if (w->qtail) w->qtail->qnext = c; else w->qhead = c;
    w->qtail = c;
    c->queued = true;
    c->state = C_QUEUED;
    STAT_ADD(w->st, queued, 1);
}

void client_close(struct worker *w, struct client *c)
{
    if (c->conn.closing)
        return;
    c->conn.closing = true;
    queue_remove(w, c);
    conn_shutdown(&w->loop, &c->conn, true);   /* completes a pending recv or send */
    w->n_clients--;
    STAT_SUB(w->st, conns_open, 1);
    loop_obj_kill(&w->loop, &c->conn.o);
    accept_resume(w);   /* a descriptor came free */
}

/* The request for the upstream: its head without hop-by-hop fields, then the
 * payload. A chunked body held whole goes as its payload with a Content-Length;
 * one that streams (rechunk) is re-chunked: the payload so far is its first chunk. */
static int build_upstream_request(struct client *c, bool rechunk)
{
    const struct hm_head *h = &c->msg.h;
    size_t body = c->body_out - h->head_len;
    struct hm_rewrite rw = { .drop_expect = h->expect_continue, .drop_te = h->chunked,
                             .add_length = h->chunked && !rechunk, .add_chunked = rechunk,
                             .length = body, .connection = h->minor == 0 ? "keep-alive" : NULL };
    size_t need = h->head_len + 128 + body + 32;
    if (c->req_cap < need) {
        char *r = realloc(c->req, need);
        if (!r)
            return -1;
        c->req = r;
        c->req_cap = need;
    }
    ssize_t n = hm_msg_rewrite(&c->msg, c->in, &rw, c->req, c->req_cap - body - 32);
    if (n < 0)
        return -1;
    char *e = c->req + n;
    if (rechunk && body) {
        char line[HM_CHUNK_LINE_LEN];
        size_t k = hm_chunk_line(line, body);
        memcpy(e, line, k);
        e += k;
    }
    memcpy(e, c->in + h->head_len, body);
    e += body;
    if (rechunk)
        e = hm_chunk_tail(e, body, c->msg.complete);
    c->req_len = (size_t)(e - c->req);
    return 0;
}

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* Expect: 100-continue and no body yet: the relay answers it (the body is read here). */
static void client_continue(struct worker *w, struct client *c)
{
    c->continue_sent = true;
    conn_send(&w->loop, &c->conn, continue_100, sizeof continue_100 - 1);
}

/* A head is in: check it; 0 to read its body, or an error was answered. */
static int client_head(struct worker *w, struct client *c)
{
    int r = hm_head_parse(&c->msg, HM_REQUEST, c->in, c->in_len, w->o->max_head, false);
    if (r <= 0) {
        if (r < 0)
            client_error(w, c, -r, http_reason(-r), true);
        return -1;
    }
    c->head_done = true;
    c->body_scan = c->body_out = (size_t)r;
    c->msg.dechunk = c->msg.h.chunked;
    if (w->o->max_body && c->msg.h.has_length && c->msg.h.content_length > w->o->max_body) {
        client_error(w, c, 413, "Content Too Large", true);   /* before reading the body */
        return -1;
    }
    if (c->msg.h.expect_continue && !c->msg.complete && c->in_len == (size_t)r && !w->loop.stopping)
        client_continue(w, c);
    return 0;
}

/* Frames the body bytes read so far; 1 when the request is complete, 0 for more, -1 answered. */
static int client_body(struct worker *w, struct client *c)
{
    if (!c->msg.complete && c->in_len > c->body_scan) {
        size_t out;
        ssize_t used = hm_body(&c->msg, c->in + c->body_scan, c->in_len - c->body_scan, &out);
        if (used < 0) {
            client_error(w, c, 400, "Bad Request", true);
            return -1;
        }
        if (c->body_out != c->body_scan)
            memmove(c->in + c->body_out, c->in + c->body_scan, out);   /* the payload, de-chunked */
        c->body_out += out;
        c->body_scan += (size_t)used;
        if (c->body_out != c->body_scan) {   /* close the gap the chunk framing left */
            memmove(c->in + c->body_out, c->in + c->body_scan, c->in_len - c->body_scan);
            c->in_len -= c->body_scan - c->body_out;
            c->body_scan = c->body_out;
        }
        if (w->o->max_body && c->msg.payload > w->o->max_body) {
            client_error(w, c, 413, "Content Too Large", true);   /* chunked: no length to check before */
            return -1;
        }
    }
    return c->msg.complete ? 1 : 0;
}

/* A Content-Length body too long to hold: it streams through (local upstreams only). */
static bool stream_candidate(const struct client *c)
{
    return !c->msg.complete && c->msg.h.has_length && c->msg.h.content_length > RELAY_STREAM_MIN;
}

/* A chunked body grown past what is held: it streams through, re-chunked. */
static bool chunked_stream_candidate(const struct client *c)
{
    return c->msg.h.chunked && c->body_out - c->msg.h.head_len > RELAY_STREAM_MIN;
}

static void client_start(struct worker *w, struct client *c)
{
    c->keepalive = c->msg.h.keepalive && !w->loop.stopping;
    c->http10 = c->msg.h.minor == 0;
    c->idempotent = c->msg.h.idempotent && !c->streaming;   /* a streamed body is not kept: never again */
    c->head_method = c->msg.h.head_method;
    c->retries = 0;
    c->fail_status = 502;
    c->resp_started = c->resp_done = false;
    c->sink.close = false;
    STAT_ADD(w->st, inflight, 1);
    if (w->qhead) {            /* others wait already: queue behind them */
        queue_push(w, c);
        sweep(w);
    } else {
        dispatch(w, c);
    }
}

/* The head and the body bytes here go first; the rest follows as the client sends it. */
static void client_stream_start(struct worker *w, struct client *c)
{
    size_t head = c->msg.h.head_len, have = c->in_len - head;
    c->body_out = head + have;   /* have < Content-Length: else it was complete */
    if (build_upstream_request(c, false) < 0) {
        client_error(w, c, 503, "Service Unavailable", true);
        return;
    }
    c->used = c->in_len;
    c->stream_left = c->msg.h.content_length - have;
    c->streaming = true;
    if (c->in_cap < RELAY_STREAM_MIN) {   /* bigger pieces: fewer sends */
        char *in = realloc(c->in, RELAY_STREAM_MIN);
        if (in) {
            c->in = in;
            c->in_cap = RELAY_STREAM_MIN;
        }
    }
    client_start(w, c);
}

/* A chunked body past RELAY_STREAM_MIN: the head and the payload so far go
 * first (re-chunked), the rest as it comes. Bytes after a complete body stay
 * for the next request. */
static void client_chunked_stream_start(struct worker *w, struct client *c)
{
    if (build_upstream_request(c, true) < 0) {
        client_error(w, c, 503, "Service Unavailable", true);
        return;
    }
    c->used = c->body_scan;
    c->streaming = !c->msg.complete;
    client_start(w, c);
}

/* The upstream sent what it had: read more of the body (never past a Content-Length;
 * a chunked piece lands after room for its size line). */
static void client_stream_more(struct worker *w, struct client *c)
{
    c->in_len = c->used = 0;
    char *at = c->in;
    size_t n = c->in_cap < c->stream_left ? c->in_cap : (size_t)c->stream_left;
    if (c->msg.h.chunked) {
        at = c->in + W_CHUNK_HEAD;
        n = c->in_cap - W_CHUNK_HEAD - W_CHUNK_TAIL;
    }
    conn_read(&w->conns, &c->conn, at, n);
    c->t_read = w->loop.now;
}

/* A streamed body that cannot go on: the upstream goes; status answered (0: just closed). */
static void client_stream_cut(struct worker *w, struct client *c, int status)
{
    struct upstream *up = c->up;
    c->up = NULL;
    c->streaming = false;
    up_abort(&w->ups, up);
    if (status && !c->conn.send_armed) {
        client_error(w, c, status, http_reason(status), true);
        return;
    }
    STAT_ADD(w->st, aborted, 1);
    STAT_SUB(w->st, inflight, 1);
    client_close(w, c);
}

/* n bytes of a chunked body at in + W_CHUNK_HEAD: their payload goes on as one chunk. */
static void client_chunk_in(struct worker *w, struct client *c, size_t n)
{
    char *p = c->in + W_CHUNK_HEAD;
    size_t out;
    ssize_t used = hm_body(&c->msg, p, n, &out);
    c->t_read = w->loop.now;
    if (used < 0 || (w->o->max_body && c->msg.payload > w->o->max_body)) {
        client_stream_cut(w, c, used < 0 ? 400 : 413);
        return;
    }
    bool last = c->msg.complete;
    if (last) {
        /* What follows the body is the next request: it moves past the room chunk_tail needs. */
        memmove(p + used + W_CHUNK_TAIL, p + used, n - (size_t)used);
        c->used = W_CHUNK_HEAD + (size_t)used + W_CHUNK_TAIL;
        c->in_len = W_CHUNK_HEAD + n + W_CHUNK_TAIL;
        c->streaming = false;
    } else if (out == 0) {
        client_stream_more(w, c);   /* only framing: nothing to send yet */
        return;
    }
    char line[HM_CHUNK_LINE_LEN];
    size_t k = out ? hm_chunk_line(line, out) : 0;
    memcpy(p - k, line, k);
    char *e = hm_chunk_tail(p + out, out, last);
    up_stream(&w->ups, c->up, p - k, (size_t)(e - (p - k)), !last);
}

static void client_stream_in(struct worker *w, struct client *c, size_t n)
{
    c->stream_left -= n;
    c->t_read = w->loop.now;
    if (c->stream_left == 0)
        c->streaming = false;
    up_stream(&w->ups, c->up, c->in, n, c->stream_left > 0);
}

/* Looks for a whole request in the input; starts it, or reads more. */
static void client_try_request(struct worker *w, struct client *c)
{
    if (!c->head_done) {
        if (c->in_len > 0 && c->t_head == 0)
            c->t_head = w->loop.now;
        if (client_head(w, c) < 0) {
            if (c->state == C_ERROR || c->conn.closing)
                return;
            client_recv(w, c);   /* stopping, an idle one is closed by client_check_timeouts */
            return;
        }
    }
    if (stream_candidate(c)) {
        client_stream_start(w, c);
        return;
    }
    int r = client_body(w, c);
    if (r < 0)
        return;
    if (chunked_stream_candidate(c)) {
        client_chunked_stream_start(w, c);
        return;
    }
    if (r == 0 || c->conn.send_armed) {   /* more body, or our 100 Continue is still going out */
        if (r == 0)
            client_recv(w, c);
        return;
    }
    if (build_upstream_request(c, false) < 0) {
        client_error(w, c, 503, "Service Unavailable", true);
        return;
    }
    c->used = c->body_scan;
    c->streaming = false;
    client_start(w, c);
}

void client_send(struct worker *w, struct client *c, const char *p, size_t n)
{
    c->resp_started = true;
    conn_send(&w->loop, &c->conn, p, n);
}

/* An interim (1xx) response: it goes out, yet the response has not started (a
 * failure can still be answered, or the request tried again). */
void client_send_interim(struct worker *w, struct client *c, const char *p, size_t n)
{
    bool started = c->resp_started;
    client_send(w, c, p, n);
    c->resp_started = started;
}

void client_error(struct worker *w, struct client *c, int status, const char *reason, bool close)
{
    if (c->conn.send_armed && c->state == C_READ) {   /* our 100 Continue is going out: after it */
        c->deferred_status = status;
        return;
    }
    bool fresh = c->used == 0 && c->state == C_READ;   /* no request was started: none in flight */
    int n = http_error(c->err, sizeof c->err, status, reason, close || !c->keepalive);
    if (close)
        c->keepalive = false;
    c->state = C_ERROR;
    c->up = NULL;
    c->rs = NULL;
    STAT_ADD(w->st, errors, 1);
    if (fresh) {
        c->used = c->in_len;
        STAT_ADD(w->st, inflight, 1);
    }
    client_send(w, c, c->err, (size_t)n);
}

/* The response went out completely: next request or close. */
void client_resp_done(struct worker *w, struct client *c)
{
    if (c->state != C_ERROR)
        STAT_ADD(w->st, requests, 1);
    STAT_SUB(w->st, inflight, 1);
    c->state = C_READ;
    c->up = NULL;
    c->rs = NULL;
    if (!c->keepalive) {   /* the response said close: stopping, every request after it begun says so */
        client_close(w, c);
        return;
    }
    memmove(c->in, c->in + c->used, c->in_len - c->used);
    c->in_len -= c->used;
    c->used = 0;
    c->head_done = c->continue_sent = c->streaming = false;
    c->t_head = 0;
    c->t_idle = w->loop.now;
    client_try_request(w, c);
}

/* The request failed before (retryable) or after bytes reached the client. */
void client_job_failed(struct worker *w, struct client *c, bool retryable)
{
    c->up = NULL;
    c->rs = NULL;
    if (retryable && !c->resp_started && c->retries < W_RETRIES) {
        c->retries++;
        STAT_ADD(w->st, retries, 1);
        dispatch(w, c);
    } else if (!c->resp_started) {
        /* A body not read to its end closes the connection: its rest is no request. */
        client_error(w, c, c->fail_status, http_reason(c->fail_status), c->fail_status == 504 || c->streaming);
    } else {
        STAT_ADD(w->st, aborted, 1);
        STAT_SUB(w->st, inflight, 1);
        client_close(w, c);
    }
}


/* The client went away (recv end, send failure): its work is dropped. */
static void client_gone(struct worker *w, struct client *c)
{
    switch (c->state) {
    case C_LOCAL:
        if (c->up && c->streaming) {
            up_abort(&w->ups, c->up);   /* its request can never be completed */
        } else if (c->up) {
            up_release(&w->ups, c->up);
        }
        break;
    case C_CREATE:
        if (c->up)
            up_forget_creator(c->up);
        break;
    case C_REMOTE:
        if (c->rs) {
            c->rs->c = NULL;
            rs_fail(w, c->rs, false);
        }
        break;
    default:
        break;
    }
    if (c->state != C_READ)
        STAT_SUB(w->st, inflight, 1);
    c->up = NULL;
    c->rs = NULL;
    client_close(w, c);
}

static void client_sent(struct worker *w, struct client *c);

/* The send in progress ended: res > 0 it went whole, else the client is gone. */
void client_on_send(struct worker *w, struct client *c, int res)
{
    if (c->conn.closing)
        return;
    if (res <= 0) {
        client_gone(w, c);
        return;
    }
    if (c->conn.out == continue_100 && c->state != C_READ) {
        c->conn.out = NULL;   /* our 100 Continue went out while the body streams */
        return;
    }
    client_sent(w, c);
}

/* The piece in progress went out whole: whoever handed it on is told. */
static void client_sent(struct worker *w, struct client *c)
{
    switch (c->state) {
    case C_LOCAL: up_drained(&w->ups, c->up); break;
    case C_REMOTE: rs_step(w, c->rs); break;
    case C_ERROR: client_resp_done(w, c); break;
    case C_READ:   /* our 100 Continue went out */
        if (c->deferred_status)
            client_error(w, c, c->deferred_status, http_reason(c->deferred_status), true);
        else if (!c->conn.recv_armed)
            client_try_request(w, c);
        break;
    default: break;
    }
}

/* The read in progress ended: res bytes came, or the client is gone. */
void client_on_recv(struct worker *w, struct client *c, int res)
{
    if (res <= 0) {
        client_gone(w, c);
        return;
    }
    if (c->streaming && c->state == C_LOCAL) {
        if (c->msg.h.chunked)
            client_chunk_in(w, c, (size_t)res);
        else
            client_stream_in(w, c, (size_t)res);
        return;
    }
    c->in_len += (size_t)res;
    c->t_read = w->loop.now;
    client_try_request(w, c);
}

/* A splice into the socket must not block the worker when the socket is full
 * (client_pipe_step); the ring's own operations wait for room either way. */
static int accept_flags(const struct worker *w)
{
    return SOCK_CLOEXEC | ((w->loop.features & WF_SPLICE) ? SOCK_NONBLOCK : 0);
}

/* ---- the client's request as the sink of its response --------------------- */

static struct client *client_of(struct sink *k)
{
    return (struct client *)(void *)((char *)k - offsetof(struct client, sink));
}

static void client_piece(struct sink *k, const char *p, size_t n, bool interim)
{
    struct client *c = client_of(k);
    struct worker *w = WORKER_OF(&c->conn.o, k_client);
    if (interim)
        client_send_interim(w, c, p, n);
    else
        client_send(w, c, p, n);
}

static void client_done(struct sink *k)
{
    struct client *c = client_of(k);
    c->keepalive = c->keepalive && !k->close;
    client_resp_done(WORKER_OF(&c->conn.o, k_client), c);
}

static void client_failed(struct sink *k, enum sink_fail how)
{
    struct client *c = client_of(k);
    struct worker *w = WORKER_OF(&c->conn.o, k_client);
    switch (how) {
    case SINK_REFUSED:
        client_error(w, c, 503, "Service Unavailable", false);
        return;
    case SINK_TIMEOUT:
        c->fail_status = 504;
        break;
    case SINK_CUT:
        c->resp_started = true;   /* (a splice sent it) */
        break;
    default:
        break;
    }
    client_job_failed(w, c, how == SINK_RETRY);
}

static void client_more(struct sink *k)
{
    struct client *c = client_of(k);
    client_stream_more(WORKER_OF(&c->conn.o, k_client), c);
}

static void client_broken(struct sink *k, int err)
{
    struct client *c = client_of(k);
    client_on_send(WORKER_OF(&c->conn.o, k_client), c, err);
}

static const struct sink_ops client_sink_ops = {
    .piece = client_piece, .done = client_done, .failed = client_failed, .more = client_more,
    .broken = client_broken,
};

/* One accept, or a multishot one that stays armed; into the ring's table when direct
 * (a direct descriptor is never inherited: no CLOEXEC, which it refuses). */
void accept_arm(struct worker *w)
{
    if (w->accept_armed || w->lfd < 0)
        return;
    struct io_uring_sqe *sqe = loop_sqe(&w->loop);
    bool direct = w->loop.features & WF_DIRECT;
    if (w->loop.features & WF_MULTISHOT_ACCEPT) {
        if (direct)
            io_uring_prep_multishot_accept_direct(sqe, w->lfd, NULL, NULL, 0);
        else
            io_uring_prep_multishot_accept(sqe, w->lfd, NULL, NULL, accept_flags(w));
    } else if (direct) {
        io_uring_prep_accept_direct(sqe, w->lfd, NULL, NULL, 0, IORING_FILE_INDEX_ALLOC - 1);
    } else {
        io_uring_prep_accept(sqe, w->lfd, NULL, NULL, accept_flags(w));
    }
    io_uring_sqe_set_data64(sqe, loop_ud(&w->accept_obj, OP_ACCEPT));
    w->accept_armed = true;
}

/* Out of descriptors (or memory): the connections wait in the backlog until
 * a client closes or the next tick, instead of failing the accept in a loop. */
static bool accept_pause(struct worker *w, int res)
{
    if (res != -EMFILE && res != -ENFILE && res != -ENOBUFS && res != -ENOMEM)
        return false;
    w->accept_paused = true;
    STAT_ADD(w->st, accept_pauses, 1);
    return true;
}

void accept_resume(struct worker *w)
{
    if (w->accept_paused && !w->loop.stopping) {
        w->accept_paused = false;
        accept_arm(w);
    }
}

void on_accept(struct worker *w, int res, uint32_t flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        w->accept_armed = false;
    if (res == -EINVAL && (w->loop.features & WF_MULTISHOT_ACCEPT) && !w->loop.stopping) {
        w->loop.features &= ~WF_MULTISHOT_ACCEPT;   /* refused by this kernel: one accept at a time */
        loop_publish(&w->loop);
        accept_arm(w);
        return;
    }
    if (res < 0) {
        if (!w->loop.stopping && !accept_pause(w, res))
            accept_arm(w);
        return;
    }
    struct client *c = calloc(1, sizeof *c);
    char *in = c ? malloc(W_IN) : NULL;
    if (!in || loop_obj_add(&w->loop, &c->conn.o, &w->k_client) < 0) {
        free(in);
        free(c);
        if (w->loop.features & WF_DIRECT) {
            struct io_uring_sqe *sqe = loop_sqe(&w->loop);
            io_uring_prep_close_direct(sqe, (unsigned)res);
            io_uring_sqe_set_data64(sqe, 0);
        } else {
            close(res);
        }
    } else {
        c->in = in;
        c->in_cap = W_IN;
        c->t_idle = w->loop.now;
        conn_init(&c->conn, res, w->loop.features & WF_DIRECT);
        c->sink = (struct sink){ .ops = &client_sink_ops, .conn = &c->conn };   /* TCP_NODELAY: inherited from the listener */
        w->n_clients++;
        STAT_ADD(w->st, accepted, 1);
        STAT_ADD(w->st, conns_open, 1);
        client_recv(w, c);
    }
    if (!w->loop.stopping)
        accept_arm(w);
}


struct up_job client_job(const struct client *c)
{
    return (struct up_job){ .req = c->req, .req_len = c->req_len, .head_req = c->head_method,
                            .idempotent = c->idempotent, .http10 = c->http10, .keepalive = c->keepalive,
                            .more = c->streaming };
}

/* Housekeeping: a connection idle too long is closed; a head (or a body) that
 * does not arrive in time is answered 408. */
void client_check_timeouts(struct worker *w, struct client *c, int64_t now)
{
    if (c->conn.send_armed && !c->conn.closing && now - c->conn.t_send > (int64_t)w->o->idle_timeout_ms * 1000000) {
        /* The client took none of its response for that long: the send fails, and its
         * failure lets go of what serves it (client_gone). */
        conn_shutdown(&w->loop, &c->conn, false);
        c->conn.t_send = now;
        return;
    }
    if (c->streaming && c->state == C_LOCAL && c->conn.recv_armed && c->up &&
        now - c->t_read > (int64_t)w->o->header_timeout_ms * 1000000) {
        client_stream_cut(w, c, 0);   /* the body stalled mid-stream: the request cannot complete */
        return;
    }
    if (c->conn.closing || c->state != C_READ || !c->conn.recv_armed)
        return;
    if (c->in_len == 0 && !c->head_done) {
        /* Stopping, a keep-alive connection closes once it has been idle a while, between
         * requests: closed at once it could meet a request already on its way (a client
         * sees its connection cut); one in use gets Connection: close on its next response. */
        int64_t limit = w->loop.stopping ? W_DRAIN_IDLE_MS : w->o->idle_timeout_ms;
        if (now - c->t_idle > limit * 1000000 && conn_stash_avail(&c->conn) == 0)
            client_close(w, c);
        return;
    }
    int64_t since = c->head_done ? c->t_read : c->t_head;
    if (now - since > (int64_t)w->o->header_timeout_ms * 1000000)
        client_error(w, c, 408, "Request Timeout", true);
}

/* n bytes of the response sent now, for a splice to follow (splice.c): conn_send_now. */
int client_send_now(struct worker *w, struct client *c, const char *p, size_t n)
{
    c->resp_started = true;
    return conn_send_now(&w->loop, &c->conn, p, n);
}

/* n bytes of the response in the pipe pipe_rd go by splice: conn_send_pipe. */
int client_send_pipe(struct worker *w, struct client *c, int pipe_rd, size_t n)
{
    c->resp_started = true;
    return conn_send_pipe(&w->loop, &c->conn, pipe_rd, n);
}

static void client_event(struct worker *w, struct client *c, enum conn_event ev, int res)
{
    if (ev == CONN_READ)
        client_on_recv(w, c, res);
    else if (ev == CONN_SENT)
        client_on_send(w, c, res);
}

/* A completion of the client's socket. */
void client_on_cqe(struct worker *w, struct client *c, unsigned op, int res, uint32_t flags)
{
    int r = 0;
    enum conn_event ev = conn_on_cqe(&w->conns, &c->conn, op, res, flags, &r);
    client_event(w, c, ev, r);
}

/* Clients asked for bytes their stash holds: delivered after the completions' batch. */
void client_ready_run(struct worker *w)
{
    struct conn *cn;
    enum conn_event ev;
    int r;
    while ((cn = conn_ready_take(&w->conns, &ev, &r)))
        client_event(w, (struct client *)cn, ev, r);
}
