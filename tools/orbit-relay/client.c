/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: client connections (accept, read a request, send the response). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include "client.h"
#include "http.h"

static void client_error(struct client_set *s, struct client *c, int status, const char *reason, bool close);
static void client_try_request(struct client_set *s, struct client *c);

static struct client_set *set_of(const struct client *c)
{
    return (struct client_set *)(void *)((char *)c->conn.o.kind - offsetof(struct client_set, kind));
}

static void client_close(struct client_set *s, struct client *c)
{
    if (c->conn.closing)
        return;
    c->conn.closing = true;
    if (c->rq.where == DISP_QUEUED)
        disp_cancel(s->d, &c->rq, false);
    conn_shutdown(s->l, &c->conn, true);   /* completes a pending recv or send */
    s->n--;
    STAT_SUB(s->l->st, conns_open, 1);
    loop_obj_kill(s->l, &c->conn.o);
    client_accept_resume(s);   /* a descriptor came free */
}

/* Room for the next recv: the buffer grows up to a whole request's limit. */
static int client_room(struct client_set *s, struct client *c)
{
    size_t limit = relay_buffered_max(s->l->o) + CLIENT_IN;
    if (c->in_cap - c->in_len >= CLIENT_IN / 4 || c->in_cap >= limit)
        return c->in_len < c->in_cap ? 0 : -1;
    size_t cap = c->in_cap * 2 < limit ? c->in_cap * 2 : limit;
    char *in = realloc(c->in, cap);
    if (!in)
        return -1;
    c->in = in;
    c->in_cap = cap;
    return 0;
}

static void client_recv(struct client_set *s, struct client *c)
{
    if (client_room(s, c) < 0) {
        client_error(s, c, 413, "Content Too Large", true);
        return;
    }
    conn_read(&s->conns, &c->conn, c->in + c->in_len, c->in_cap - c->in_len);
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
static void client_continue(struct client_set *s, struct client *c)
{
    c->continue_sent = true;
    conn_send(s->l, &c->conn, continue_100, sizeof continue_100 - 1);
}

/* A head is in: check it; 0 to read its body, or an error was answered. */
static int client_head(struct client_set *s, struct client *c)
{
    int r = hm_head_parse(&c->msg, HM_REQUEST, c->in, c->in_len, s->l->o->max_head, false);
    if (r <= 0) {
        if (r < 0)
            client_error(s, c, -r, http_reason(-r), true);
        return -1;
    }
    c->head_done = true;
    c->body_scan = c->body_out = (size_t)r;
    c->msg.dechunk = c->msg.h.chunked;
    if (s->l->o->max_body && c->msg.h.has_length && c->msg.h.content_length > s->l->o->max_body) {
        client_error(s, c, 413, "Content Too Large", true);   /* before reading the body */
        return -1;
    }
    if (c->msg.h.expect_continue && !c->msg.complete && c->in_len == (size_t)r && !s->l->stopping)
        client_continue(s, c);
    return 0;
}

/* Frames the body bytes read so far; 1 when the request is complete, 0 for more, -1 answered. */
static int client_body(struct client_set *s, struct client *c)
{
    if (!c->msg.complete && c->in_len > c->body_scan) {
        size_t out;
        ssize_t used = hm_body(&c->msg, c->in + c->body_scan, c->in_len - c->body_scan, &out);
        if (used < 0) {
            client_error(s, c, 400, "Bad Request", true);
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
        if (s->l->o->max_body && c->msg.payload > s->l->o->max_body) {
            client_error(s, c, 413, "Content Too Large", true);   /* chunked: no length to check before */
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

static void client_start(struct client_set *s, struct client *c)
{
    c->keepalive = c->msg.h.keepalive && !s->l->stopping;
    c->http10 = c->msg.h.minor == 0;
    c->idempotent = c->msg.h.idempotent && !c->streaming;   /* a streamed body is not kept: never again */
    c->head_method = c->msg.h.head_method;
    c->state = C_RUN;
    STAT_ADD(s->l->st, inflight, 1);
    c->rq.job = (struct up_job){ .req = c->req, .req_len = c->req_len, .head_req = c->head_method,
                                 .idempotent = c->idempotent, .http10 = c->http10, .keepalive = c->keepalive,
                                 .more = c->streaming };
    c->rq.local_only = c->streaming || c->req_len > relay_buffered_max(s->l->o);
    disp_start(s->d, &c->rq);
}

/* The head and the body bytes here go first; the rest follows as the client sends it. */
static void client_stream_start(struct client_set *s, struct client *c)
{
    size_t head = c->msg.h.head_len, have = c->in_len - head;
    c->body_out = head + have;   /* have < Content-Length: else it was complete */
    if (build_upstream_request(c, false) < 0) {
        client_error(s, c, 503, "Service Unavailable", true);
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
    client_start(s, c);
}

/* A chunked body past RELAY_STREAM_MIN: the head and the payload so far go
 * first (re-chunked), the rest as it comes. Bytes after a complete body stay
 * for the next request. */
static void client_chunked_stream_start(struct client_set *s, struct client *c)
{
    if (build_upstream_request(c, true) < 0) {
        client_error(s, c, 503, "Service Unavailable", true);
        return;
    }
    c->used = c->body_scan;
    c->streaming = !c->msg.complete;
    client_start(s, c);
}

/* The upstream sent what it had: read more of the body (never past a Content-Length;
 * a chunked piece lands after room for its size line). */
static void client_stream_more(struct client_set *s, struct client *c)
{
    c->in_len = c->used = 0;
    char *at = c->in;
    size_t n = c->in_cap < c->stream_left ? c->in_cap : (size_t)c->stream_left;
    if (c->msg.h.chunked) {
        at = c->in + CLIENT_CHUNK_HEAD;
        n = c->in_cap - CLIENT_CHUNK_HEAD - CLIENT_CHUNK_TAIL;
    }
    conn_read(&s->conns, &c->conn, at, n);
    c->t_read = s->l->now;
}

/* A streamed body that cannot go on: the upstream goes; status answered (0: just closed). */
static void client_stream_cut(struct client_set *s, struct client *c, int status)
{
    c->streaming = false;
    disp_cut(s->d, &c->rq);
    if (status && !c->conn.send_armed) {
        client_error(s, c, status, http_reason(status), true);
        return;
    }
    STAT_ADD(s->l->st, aborted, 1);
    STAT_SUB(s->l->st, inflight, 1);
    client_close(s, c);
}

/* n bytes of a chunked body at in + CLIENT_CHUNK_HEAD: their payload goes on as one chunk. */
static void client_chunk_in(struct client_set *s, struct client *c, size_t n)
{
    char *p = c->in + CLIENT_CHUNK_HEAD;
    size_t out;
    ssize_t used = hm_body(&c->msg, p, n, &out);
    c->t_read = s->l->now;
    if (used < 0 || (s->l->o->max_body && c->msg.payload > s->l->o->max_body)) {
        client_stream_cut(s, c, used < 0 ? 400 : 413);
        return;
    }
    bool last = c->msg.complete;
    if (last) {
        /* What follows the body is the next request: it moves past the room chunk_tail needs. */
        memmove(p + used + CLIENT_CHUNK_TAIL, p + used, n - (size_t)used);
        c->used = CLIENT_CHUNK_HEAD + (size_t)used + CLIENT_CHUNK_TAIL;
        c->in_len = CLIENT_CHUNK_HEAD + n + CLIENT_CHUNK_TAIL;
        c->streaming = false;
    } else if (out == 0) {
        client_stream_more(s, c);   /* only framing: nothing to send yet */
        return;
    }
    char line[HM_CHUNK_LINE_LEN];
    size_t k = out ? hm_chunk_line(line, out) : 0;
    memcpy(p - k, line, k);
    char *e = hm_chunk_tail(p + out, out, last);
    disp_body(s->d, &c->rq, p - k, (size_t)(e - (p - k)), !last);
}

static void client_stream_in(struct client_set *s, struct client *c, size_t n)
{
    c->stream_left -= n;
    c->t_read = s->l->now;
    if (c->stream_left == 0)
        c->streaming = false;
    disp_body(s->d, &c->rq, c->in, n, c->stream_left > 0);
}

/* Looks for a whole request in the input; starts it, or reads more. */
static void client_try_request(struct client_set *s, struct client *c)
{
    if (!c->head_done) {
        if (c->in_len > 0 && c->t_head == 0)
            c->t_head = s->l->now;
        if (client_head(s, c) < 0) {
            if (c->state == C_ERROR || c->conn.closing)
                return;
            client_recv(s, c);   /* stopping, an idle one is closed by client_check_timeouts */
            return;
        }
    }
    if (stream_candidate(c)) {
        client_stream_start(s, c);
        return;
    }
    int r = client_body(s, c);
    if (r < 0)
        return;
    if (chunked_stream_candidate(c)) {
        client_chunked_stream_start(s, c);
        return;
    }
    if (r == 0 || c->conn.send_armed) {   /* more body, or our 100 Continue is still going out */
        if (r == 0)
            client_recv(s, c);
        return;
    }
    if (build_upstream_request(c, false) < 0) {
        client_error(s, c, 503, "Service Unavailable", true);
        return;
    }
    c->used = c->body_scan;
    c->streaming = false;
    client_start(s, c);
}

static void client_send(struct client_set *s, struct client *c, const char *p, size_t n)
{
    conn_send(s->l, &c->conn, p, n);
}

static void client_error(struct client_set *s, struct client *c, int status, const char *reason, bool close)
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
    STAT_ADD(s->l->st, errors, 1);
    if (fresh) {
        c->used = c->in_len;
        STAT_ADD(s->l->st, inflight, 1);
    }
    client_send(s, c, c->err, (size_t)n);
}

/* The response went out completely: next request or close. */
static void client_resp_done(struct client_set *s, struct client *c)
{
    if (c->state != C_ERROR)
        STAT_ADD(s->l->st, requests, 1);
    STAT_SUB(s->l->st, inflight, 1);
    c->state = C_READ;
    if (!c->keepalive) {   /* the response said close: stopping, every request after it begun says so */
        client_close(s, c);
        return;
    }
    memmove(c->in, c->in + c->used, c->in_len - c->used);
    c->in_len -= c->used;
    c->used = 0;
    c->head_done = c->continue_sent = c->streaming = false;
    c->t_head = 0;
    c->t_idle = s->l->now;
    client_try_request(s, c);
}

/* The client went away (recv end, send failure): its work is dropped. */
static void client_gone(struct client_set *s, struct client *c)
{
    if (c->state == C_RUN)
        disp_cancel(s->d, &c->rq, c->streaming);
    if (c->state != C_READ)
        STAT_SUB(s->l->st, inflight, 1);
    client_close(s, c);
}

/* The piece in progress went out whole: whoever handed it on is told. */
static void client_sent(struct client_set *s, struct client *c)
{
    switch (c->state) {
    case C_RUN: disp_drained(s->d, &c->rq); break;
    case C_ERROR: client_resp_done(s, c); break;
    case C_READ:   /* our 100 Continue went out */
        if (c->deferred_status)
            client_error(s, c, c->deferred_status, http_reason(c->deferred_status), true);
        else if (!c->conn.recv_armed)
            client_try_request(s, c);
        break;
    }
}

/* The send in progress ended: res > 0 it went whole, else the client is gone. */
static void client_on_send(struct client_set *s, struct client *c, int res)
{
    if (c->conn.closing)
        return;
    if (res <= 0) {
        client_gone(s, c);
        return;
    }
    if (c->conn.out == continue_100 && c->state != C_READ) {
        c->conn.out = NULL;   /* our 100 Continue went out while the body streams */
        return;
    }
    client_sent(s, c);
}

/* The read in progress ended: res bytes came, or the client is gone. */
static void client_on_recv(struct client_set *s, struct client *c, int res)
{
    if (res <= 0) {
        client_gone(s, c);
        return;
    }
    if (c->streaming && c->state == C_RUN && c->rq.where == DISP_LOCAL) {
        if (c->msg.h.chunked)
            client_chunk_in(s, c, (size_t)res);
        else
            client_stream_in(s, c, (size_t)res);
        return;
    }
    c->in_len += (size_t)res;
    c->t_read = s->l->now;
    client_try_request(s, c);
}

static void client_event(struct client_set *s, struct client *c, enum conn_event ev, int res)
{
    if (ev == CONN_READ)
        client_on_recv(s, c, res);
    else if (ev == CONN_SENT)
        client_on_send(s, c, res);
}

void client_ready_run(struct client_set *s)
{
    struct conn *cn;
    enum conn_event ev;
    int r;
    while ((cn = conn_ready_take(&s->conns, &ev, &r)))
        client_event(s, (struct client *)cn, ev, r);
}

/* ---- what the dispatcher tells of the request ------------------------------ */

static struct client *client_of(struct disp_req *r)
{
    return (struct client *)(void *)((char *)r - offsetof(struct client, rq));
}

static void client_piece(struct disp_req *r, const char *p, size_t n, bool interim)
{
    struct client *c = client_of(r);
    (void)interim;   /* a 1xx head goes on like the rest; the dispatcher knows it is no response yet */
    client_send(set_of(c), c, p, n);
}

static void client_done(struct disp_req *r)
{
    struct client *c = client_of(r);
    c->keepalive = c->keepalive && !r->sink.close;
    client_resp_done(set_of(c), c);
}

static void client_failed(struct disp_req *r, int status)
{
    struct client *c = client_of(r);
    struct client_set *s = set_of(c);
    c->keepalive = c->keepalive && !r->sink.close;
    if (status == 503) {
        client_error(s, c, 503, http_reason(503), false);   /* no source could be had */
    } else if (status) {
        /* A body not read to its end closes the connection: its rest is no request. */
        client_error(s, c, status, http_reason(status), status == 504 || c->streaming);
    } else {
        STAT_ADD(s->l->st, aborted, 1);
        STAT_SUB(s->l->st, inflight, 1);
        client_close(s, c);
    }
}

static void client_more(struct disp_req *r)
{
    struct client *c = client_of(r);
    client_stream_more(set_of(c), c);
}

static void client_broken(struct disp_req *r, int err)
{
    struct client *c = client_of(r);
    client_on_send(set_of(c), c, err);
}

static const struct disp_ops client_disp_ops = {
    .piece = client_piece, .done = client_done, .failed = client_failed, .more = client_more,
    .broken = client_broken,
};

/* ---- accepts ---------------------------------------------------------------- */

/* A splice into the socket must not block the worker when the socket is full
 * (conn.c's pipe_step); the ring's own operations wait for room either way. */
static int accept_flags(const struct client_set *s)
{
    return SOCK_CLOEXEC | ((s->l->features & WF_SPLICE) ? SOCK_NONBLOCK : 0);
}

/* One accept, or a multishot one that stays armed; into the ring's table when direct
 * (a direct descriptor is never inherited: no CLOEXEC, which it refuses). */
void client_accept_arm(struct client_set *s)
{
    if (s->accept_armed || s->lfd < 0)
        return;
    struct io_uring_sqe *sqe = loop_obj_sqe(s->l, &s->accept, 1);
    bool direct = s->l->features & WF_DIRECT;
    if (s->l->features & WF_MULTISHOT_ACCEPT) {
        if (direct)
            io_uring_prep_multishot_accept_direct(sqe, s->lfd, NULL, NULL, 0);
        else
            io_uring_prep_multishot_accept(sqe, s->lfd, NULL, NULL, accept_flags(s));
    } else if (direct) {
        io_uring_prep_accept_direct(sqe, s->lfd, NULL, NULL, 0, IORING_FILE_INDEX_ALLOC - 1);
    } else {
        io_uring_prep_accept(sqe, s->lfd, NULL, NULL, accept_flags(s));
    }
    s->accept_armed = true;
}

/* Out of descriptors (or memory): the connections wait in the backlog until
 * a client closes or the next tick, instead of failing the accept in a loop. */
static bool accept_pause(struct client_set *s, int res)
{
    if (res != -EMFILE && res != -ENFILE && res != -ENOBUFS && res != -ENOMEM)
        return false;
    s->accept_paused = true;
    STAT_ADD(s->l->st, accept_pauses, 1);
    return true;
}

void client_accept_resume(struct client_set *s)
{
    if (s->accept_paused && !s->l->stopping) {
        s->accept_paused = false;
        client_accept_arm(s);
    }
}

void client_accept_stop(struct client_set *s)
{
    loop_cancel(s->l, &s->accept, 1);   /* multishot too */
    close(s->lfd);
    s->lfd = -1;
}

/* A new connection: a client on its socket (TCP_NODELAY: inherited from the listener). */
static void client_new(struct client_set *s, int fd)
{
    struct client *c = calloc(1, sizeof *c);
    char *in = c ? malloc(CLIENT_IN) : NULL;
    if (!in || loop_obj_add(s->l, &c->conn.o, &s->kind) < 0) {
        free(in);
        free(c);
        if (s->l->features & WF_DIRECT) {
            struct io_uring_sqe *sqe = loop_sqe(s->l);
            io_uring_prep_close_direct(sqe, (unsigned)fd);
            io_uring_sqe_set_data64(sqe, 0);
        } else {
            close(fd);
        }
        return;
    }
    c->in = in;
    c->in_cap = CLIENT_IN;
    c->t_idle = s->l->now;
    conn_init(&c->conn, fd, s->l->features & WF_DIRECT);
    c->rq.ops = &client_disp_ops;
    c->rq.sink.conn = &c->conn;
    s->n++;
    STAT_ADD(s->l->st, accepted, 1);
    STAT_ADD(s->l->st, conns_open, 1);
    client_recv(s, c);
}

static void accept_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct client_set *s = (struct client_set *)(void *)((char *)o - offsetof(struct client_set, accept));
    (void)op;
    if (!(flags & IORING_CQE_F_MORE))
        s->accept_armed = false;
    if (res == -EINVAL && (s->l->features & WF_MULTISHOT_ACCEPT) && !s->l->stopping) {
        s->l->features &= ~WF_MULTISHOT_ACCEPT;   /* refused by this kernel: one accept at a time */
        loop_publish(s->l);
        client_accept_arm(s);
        return;
    }
    if (res < 0) {
        if (!s->l->stopping && !accept_pause(s, res))
            client_accept_arm(s);
        return;
    }
    client_new(s, res);
    if (!s->l->stopping)
        client_accept_arm(s);
}

/* ---- the loop's kind ------------------------------------------------------- */

static void client_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct client *c = (struct client *)o;
    struct client_set *s = set_of(c);
    if (loop_cqe_dead(s->l, o, res, flags))
        return;
    int r = 0;
    enum conn_event ev = conn_on_cqe(&s->conns, &c->conn, op, res, flags, &r);
    client_event(s, c, ev, r);
}

/* Housekeeping: a connection idle too long is closed; a head (or a body) that
 * does not arrive in time is answered 408. */
static void client_on_tick(struct loop_obj *o, int64_t now)
{
    struct client *c = (struct client *)o;
    struct client_set *s = set_of(c);
    const struct relay_opts *opts = s->l->o;
    if (c->conn.send_armed && !c->conn.closing && now - c->conn.t_send > (int64_t)opts->idle_timeout_ms * 1000000) {
        /* The client took none of its response for that long: the send fails, and its
         * failure lets go of what serves it (client_gone). */
        conn_shutdown(s->l, &c->conn, false);
        c->conn.t_send = now;
        return;
    }
    if (c->streaming && c->state == C_RUN && c->rq.where == DISP_LOCAL && c->conn.recv_armed && c->rq.up &&
        now - c->t_read > (int64_t)opts->header_timeout_ms * 1000000) {
        client_stream_cut(s, c, 0);   /* the body stalled mid-stream: the request cannot complete */
        return;
    }
    if (c->conn.closing || c->state != C_READ || !c->conn.recv_armed)
        return;
    if (c->in_len == 0 && !c->head_done) {
        /* Stopping, a keep-alive connection closes once it has been idle a while, between
         * requests: closed at once it could meet a request already on its way (a client
         * sees its connection cut); one in use gets Connection: close on its next response. */
        int64_t limit = s->l->stopping ? CLIENT_DRAIN_IDLE_MS : opts->idle_timeout_ms;
        if (now - c->t_idle > limit * 1000000 && conn_stash_avail(&c->conn) == 0)
            client_close(s, c);
        return;
    }
    int64_t since = c->head_done ? c->t_read : c->t_head;
    if (now - since > (int64_t)opts->header_timeout_ms * 1000000)
        client_error(s, c, 408, "Request Timeout", true);
}

static void client_free(struct loop_obj *o)
{
    struct client *c = (struct client *)o;
    free(c->in);
    free(c->req);
    conn_free(&c->conn);
    free(c);
}

int client_set_init(struct client_set *s, struct loop *l, struct disp *d, int lfd)
{
    *s = (struct client_set){ .l = l, .kind = { client_on_cqe, client_on_tick, client_free },
                              .accept_kind = { accept_on_cqe, NULL, NULL }, .conns = { .l = l }, .d = d, .lfd = lfd };
    return loop_obj_add(l, &s->accept, &s->accept_kind);
}
