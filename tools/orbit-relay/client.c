/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: client connections (accept, read a request, send the response). */
#include <errno.h>
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

/* The socket an SQE works on: a direct descriptor is an index in the ring's table. */
void client_sqe_fd(const struct client *c, struct io_uring_sqe *sqe)
{
    if (c->direct)
        sqe->flags |= IOSQE_FIXED_FILE;
}

/* ---- multishot receive: the kernel fills provided buffers as bytes come;
 * they are copied where the request asked (rd_dst) or kept in the stash until
 * it asks. A stash past W_STASH_MAX cancels the receive: the client waits in
 * its socket buffer, as it would between single receives. ------------------ */

static bool client_ms(const struct worker *w, const struct client *c)
{
    return (w->loop.features & WF_MULTISHOT_RECV) && !c->ms_off;
}

static size_t stash_avail(const struct client *c)
{
    return c->stash_len - c->stash_off;
}

static void ms_arm(struct worker *w, struct client *c)
{
    if (c->ms_armed || c->ms_eof || c->ms_err || c->closing || stash_avail(c) > W_STASH_MAX)
        return;
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &c->o, OP_C_MRECV);
    io_uring_prep_recv(sqe, c->fd, NULL, 0, 0);
    sqe->ioprio |= IORING_RECV_MULTISHOT;
    if (w->loop.features & WF_BUNDLE)
        sqe->ioprio |= LOOP_RECVSEND_BUNDLE;
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = LOOP_BGID;
    client_sqe_fd(c, sqe);
    c->ms_armed = true;
    c->ms_paused = false;
}

static void ready_push(struct worker *w, struct client *c)
{
    if (c->on_ready)
        return;
    c->on_ready = true;
    c->ready_next = w->ready;
    w->ready = c;
}

/* Asks for up to n bytes at dst: a receive, or the stash's next bytes. */
static void client_read(struct worker *w, struct client *c, char *dst, size_t n)
{
    c->recv_armed = true;
    if (!client_ms(w, c)) {
        struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &c->o, OP_C_RECV);
        io_uring_prep_recv(sqe, c->fd, dst, n, 0);
        client_sqe_fd(c, sqe);
        return;
    }
    c->rd_dst = dst;
    c->rd_n = n;
    if (stash_avail(c) || c->ms_eof || c->ms_err)
        ready_push(w, c);
    else
        ms_arm(w, c);
}

static int stash_put(struct client *c, const char *p, size_t n)
{
    if (c->stash_off == c->stash_len)
        c->stash_off = c->stash_len = 0;
    if (c->stash_cap - c->stash_len < n && c->stash_off) {
        memmove(c->stash, c->stash + c->stash_off, stash_avail(c));
        c->stash_len -= c->stash_off;
        c->stash_off = 0;
    }
    if (c->stash_cap - c->stash_len < n) {
        size_t cap = c->stash_cap ? c->stash_cap : LOOP_BR_SIZE;
        while (cap - c->stash_len < n)
            cap *= 2;
        char *ns = realloc(c->stash, cap);
        if (!ns)
            return -1;
        c->stash = ns;
        c->stash_cap = cap;
    }
    memcpy(c->stash + c->stash_len, p, n);
    c->stash_len += n;
    return 0;
}

/* The stash's next bytes go where the request asked; an end or error once it is empty. */
static void stash_deliver(struct worker *w, struct client *c)
{
    if (c->closing || !c->recv_armed)
        return;
    size_t k = stash_avail(c) < c->rd_n ? stash_avail(c) : c->rd_n;
    if (k == 0 && stash_avail(c)) {
        client_on_recv(w, c, -ENOBUFS);   /* asked for nothing: cannot happen */
        return;
    }
    if (k) {
        memcpy(c->rd_dst, c->stash + c->stash_off, k);
        c->stash_off += k;
        if (c->ms_paused && !c->ms_armed && stash_avail(c) <= W_STASH_MAX / 2)
            ms_arm(w, c);
        client_on_recv(w, c, (int)k);
    } else if (c->ms_eof || c->ms_err) {
        client_on_recv(w, c, c->ms_eof ? 0 : c->ms_err);
    }
}

/* Clients asked for bytes their stash holds: delivered after the completions' batch. */
void client_ready_run(struct worker *w)
{
    while (w->ready) {
        struct client *c = w->ready;
        w->ready = c->ready_next;
        c->on_ready = false;
        if (!c->o.dead)
            stash_deliver(w, c);
    }
}

/* A completion's res bytes in its buffers: to rd_dst while the request asks, the rest to
 * the stash; every buffer goes back to the ring. Returns the bytes given to rd_dst. */
static size_t ms_take(struct worker *w, struct client *c, uint32_t flags, size_t res, bool *bad)
{
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT), bids[LOOP_BR_ENTRIES];
    unsigned n = (unsigned)((res + LOOP_BR_SIZE - 1) / LOOP_BR_SIZE);
    if (n > LOOP_BR_ENTRIES)
        n = LOOP_BR_ENTRIES;
    for (unsigned k = 0; k < n; k++)
        bids[k] = loop_buf_nth(&w->loop, bid, k);
    size_t got = 0, left = res;
    for (unsigned k = 0; k < n; k++) {
        const char *p = loop_buf_addr(&w->loop, bids[k]);
        size_t len = left < LOOP_BR_SIZE ? left : LOOP_BR_SIZE, direct = 0;
        if (c->recv_armed && !stash_avail(c) && c->rd_n > got) {
            direct = c->rd_n - got < len ? c->rd_n - got : len;
            memcpy(c->rd_dst + got, p, direct);
            got += direct;
        }
        if (len > direct && stash_put(c, p + direct, len - direct) < 0)
            *bad = true;
        left -= len;
    }
    for (unsigned k = 0; k < n; k++)
        loop_buf_put(&w->loop, bids[k]);
    return got;
}

void client_on_recv_cqe(struct worker *w, struct client *c, int res, uint32_t flags)
{
    bool more = flags & IORING_CQE_F_MORE, bad = false;
    size_t got = 0;
    if (!more)
        c->ms_armed = false;
    if (res > 0 && (flags & IORING_CQE_F_BUFFER) && !c->closing)
        got = ms_take(w, c, flags, (size_t)res, &bad);
    else
        loop_buf_drop(&w->loop, flags, res);
    if (c->closing)
        return;
    if (bad)
        c->ms_err = -ENOMEM;
    else if (res == 0)
        c->ms_eof = true;
    else if (res < 0 && res != -ENOBUFS && res != -ECANCELED)
        c->ms_err = res;   /* ENOBUFS: the ring ran dry; ECANCELED: paused */
    if (more && stash_avail(c) > W_STASH_MAX) {
        loop_cancel(&w->loop, &c->o, OP_C_MRECV);   /* the client outran its requests: pause */
        c->ms_paused = true;
    }
    if (!more && !c->ms_paused)
        ms_arm(w, c);
    if (got) {
        client_on_recv(w, c, (int)got);
    } else if (c->recv_armed && (stash_avail(c) || c->ms_eof || c->ms_err)) {
        ready_push(w, c);
    }
}

static void client_recv(struct worker *w, struct client *c)
{
    if (client_room(w, c) < 0) {
        client_error(w, c, 413, "Content Too Large", true);
        return;
    }
    client_read(w, c, c->in + c->in_len, c->in_cap - c->in_len);
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

/* Both directions of the client's socket end, which completes what is pending on it;
 * with close, the descriptor goes too. */
static void client_shutdown(struct worker *w, struct client *c, bool close_too)
{
    if (!c->direct) {
        shutdown(c->fd, SHUT_RDWR);
        if (close_too)
            close(c->fd);
        return;
    }
    struct io_uring_sqe *sqe = loop_sqe(&w->loop);
    io_uring_prep_shutdown(sqe, c->fd, SHUT_RDWR);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS | (close_too ? IOSQE_IO_HARDLINK : 0);
    io_uring_sqe_set_data64(sqe, 0);
    if (!close_too)
        return;
    /* Hard-linked: the slot is freed after the shutdown, even one that failed. */
    sqe = loop_sqe(&w->loop);
    io_uring_prep_close_direct(sqe, (unsigned)c->fd);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, 0);
}

void client_close(struct worker *w, struct client *c)
{
    if (c->closing)
        return;
    c->closing = true;
    queue_remove(w, c);
    client_shutdown(w, c, true);   /* completes a pending recv or send */
    w->n_clients--;
    STAT_SUB(w->st, conns_open, 1);
    loop_obj_kill(&w->loop, &c->o);
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
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &c->o, OP_C_SEND);
    c->out = continue_100;
    c->out_len = sizeof continue_100 - 1;
    c->out_off = 0;
    c->t_send = w->loop.now;
    io_uring_prep_send(sqe, c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    client_sqe_fd(c, sqe);
    c->send_armed = true;
    w->loop.sends_queued++;
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
void client_stream_more(struct worker *w, struct client *c)
{
    c->in_len = c->used = 0;
    char *at = c->in;
    size_t n = c->in_cap < c->stream_left ? c->in_cap : (size_t)c->stream_left;
    if (c->msg.h.chunked) {
        at = c->in + W_CHUNK_HEAD;
        n = c->in_cap - W_CHUNK_HEAD - W_CHUNK_TAIL;
    }
    client_read(w, c, at, n);
    c->t_read = w->loop.now;
}

/* A streamed body that cannot go on: the upstream goes; status answered (0: just closed). */
static void client_stream_cut(struct worker *w, struct client *c, int status)
{
    struct upstream *up = c->up;
    c->up = NULL;
    c->streaming = false;
    up_abort(w, up);
    if (status && !c->send_armed) {
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
    up_stream(w, c->up, p - k, (size_t)(e - (p - k)), !last);
}

static void client_stream_in(struct worker *w, struct client *c, size_t n)
{
    c->stream_left -= n;
    c->t_read = w->loop.now;
    if (c->stream_left == 0)
        c->streaming = false;
    up_stream(w, c->up, c->in, n, c->stream_left > 0);
}

/* Looks for a whole request in the input; starts it, or reads more. */
static void client_try_request(struct worker *w, struct client *c)
{
    if (!c->head_done) {
        if (c->in_len > 0 && c->t_head == 0)
            c->t_head = w->loop.now;
        if (client_head(w, c) < 0) {
            if (c->state == C_ERROR || c->closing)
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
    if (r == 0 || c->send_armed) {   /* more body, or our 100 Continue is still going out */
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

/* A send of n bytes at p: zero-copy when long enough (its buffer stays ours until
 * the kernel's notification, which client_on_send_cqe waits for). */
static void client_send_prep(struct worker *w, struct client *c, const char *p, size_t n)
{
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &c->o, OP_C_SEND);
    if ((w->loop.features & WF_ZC) && n >= W_ZC_MIN)
        io_uring_prep_send_zc(sqe, c->fd, p, n, MSG_NOSIGNAL, 0);
    else
        io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
    client_sqe_fd(c, sqe);
    c->send_armed = true;
    w->loop.sends_queued++;
}

void client_send(struct worker *w, struct client *c, const char *p, size_t n)
{
    c->out = p;
    c->out_len = n;
    c->out_off = 0;
    c->t_send = w->loop.now;
    c->resp_started = true;
    client_send_prep(w, c, p, n);
}

/* A zero-copy send completes twice: its result (F_MORE), then the notification
 * that the kernel let go of the buffer; only then is the send done. */
void client_on_send_cqe(struct worker *w, struct client *c, int res, uint32_t flags)
{
    if (flags & IORING_CQE_F_NOTIF) {
        client_on_send(w, c, c->zc_res);
    } else if (flags & IORING_CQE_F_MORE) {
        c->zc_res = res;
    } else {
        client_on_send(w, c, res);
    }
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
    if (c->send_armed && c->state == C_READ) {   /* our 100 Continue is going out: after it */
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
            up_abort(w, c->up);   /* its request can never be completed */
        } else if (c->up) {
            struct upstream *up = c->up;
            up_unsink(w, up);
            up_drained(w, up);   /* it waited for our send: carry on, discarding */
        }
        break;
    case C_CREATE:
        if (c->up)
            c->up->creator = NULL;
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

void client_on_send(struct worker *w, struct client *c, int res)
{
    c->send_armed = false;
    if (c->closing)
        return;
    if (res <= 0) {
        client_gone(w, c);
        return;
    }
    if (c->out == continue_100 && c->state != C_READ && c->out_off + (size_t)res == c->out_len) {
        c->out = NULL;   /* our 100 Continue went out while the body streams */
        return;
    }
    c->out_off += (size_t)res;
    c->t_send = w->loop.now;
    if (c->out_off < c->out_len) {
        client_send_prep(w, c, c->out + c->out_off, c->out_len - c->out_off);
        return;
    }
    client_sent(w, c);
}

/* The piece in progress went out whole: whoever handed it on is told. */
static void client_sent(struct worker *w, struct client *c)
{
    switch (c->state) {
    case C_LOCAL: up_drained(w, c->up); break;
    case C_REMOTE: rs_step(w, c->rs); break;
    case C_ERROR: client_resp_done(w, c); break;
    case C_READ:   /* our 100 Continue went out */
        if (c->deferred_status)
            client_error(w, c, c->deferred_status, http_reason(c->deferred_status), true);
        else if (!c->recv_armed)
            client_try_request(w, c);
        break;
    default: break;
    }
}

/* ---- a piece in a pipe (the upstream's splice) goes to the socket by splice:
 * the kernel moves its pages, nothing is copied through user space ---------- */

/* The rest of the piece from the pipe: 1 all went, 0 the socket is full (a poll
 * for room is armed: client_on_poll goes on), or a negative errno. */
static int client_pipe_step(struct worker *w, struct client *c)
{
    while (c->out_off < c->out_len) {
        ssize_t k = splice(c->pipe_rd, NULL, c->fd, NULL, c->out_len - c->out_off, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (k > 0) {
            c->out_off += (size_t)k;
            c->t_send = w->loop.now;
            continue;
        }
        if (k < 0 && errno == EAGAIN) {
            struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &c->o, OP_C_POLL);
            io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
            c->send_armed = true;
            return 0;
        }
        return k < 0 ? -errno : -EPIPE;
    }
    c->pipe_rd = -1;
    return 1;
}

/* A piece of the response, n bytes at p or in the pipe pipe_rd, becomes the send in progress. */
static void client_piece_begin(struct worker *w, struct client *c, const char *p, int pipe_rd, size_t n)
{
    c->out = p;
    c->pipe_rd = pipe_rd;
    c->out_len = n;
    c->out_off = 0;
    c->t_send = w->loop.now;
    c->resp_started = true;
}

/*
 * n bytes at p, sent now by the worker itself (for a splice to follow within
 * the turn): 1 when they all went; 0 when the socket took part or none (the
 * rest goes as an io_uring send, whose end client_sent reports); a negative
 * errno: the client is gone, which the caller reports through client_on_send
 * once its own state is settled.
 */
int client_send_now(struct worker *w, struct client *c, const char *p, size_t n)
{
    client_piece_begin(w, c, p, -1, n);
    ssize_t k = send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k == (ssize_t)n)
        return 1;
    if (k < 0 && errno != EAGAIN)
        return -errno;
    c->out_off = k > 0 ? (size_t)k : 0;
    client_send_prep(w, c, p + c->out_off, n - c->out_off);
    return 0;
}

/*
 * n bytes of the response wait in the pipe pipe_rd: 1 when they all went at
 * once (the caller goes on, nothing is reported), 0 when the socket is full
 * (client_sent reports the end as for any send), or a negative errno: the
 * client is gone, which the caller reports through client_on_send once its own
 * state is settled.
 */
int client_send_pipe(struct worker *w, struct client *c, int pipe_rd, size_t n)
{
    client_piece_begin(w, c, NULL, pipe_rd, n);
    return client_pipe_step(w, c);
}

/* Room in the socket (or its end): the rest of the piece in the pipe goes on. */
void client_on_poll(struct worker *w, struct client *c, int res)
{
    c->send_armed = false;
    if (c->closing)
        return;
    int r = res < 0 ? res : client_pipe_step(w, c);
    if (r == 0)
        return;
    if (r < 0)
        client_on_send(w, c, r);   /* the socket failed: client_gone */
    else
        client_sent(w, c);
}

void client_on_recv(struct worker *w, struct client *c, int res)
{
    c->recv_armed = false;
    if (c->closing)
        return;
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
    if (!in || loop_obj_add(&w->loop, &c->o, &w->k_client) < 0) {
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
        c->fd = res;
        c->pipe_rd = -1;
        c->direct = w->loop.features & WF_DIRECT;   /* TCP_NODELAY: inherited from the listener */
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
    if (c->send_armed && !c->closing && now - c->t_send > (int64_t)w->o->idle_timeout_ms * 1000000) {
        /* The client took none of its response for that long: the send fails, and its
         * failure lets go of what serves it (client_gone). */
        client_shutdown(w, c, false);
        c->t_send = now;
        return;
    }
    if (c->streaming && c->state == C_LOCAL && c->recv_armed && c->up &&
        now - c->t_read > (int64_t)w->o->header_timeout_ms * 1000000) {
        client_stream_cut(w, c, 0);   /* the body stalled mid-stream: the request cannot complete */
        return;
    }
    if (c->closing || c->state != C_READ || c->recv_armed == false)
        return;
    if (c->in_len == 0 && !c->head_done) {
        /* Stopping, a keep-alive connection closes once it has been idle a while, between
         * requests: closed at once it could meet a request already on its way (a client
         * sees its connection cut); one in use gets Connection: close on its next response. */
        int64_t limit = w->loop.stopping ? W_DRAIN_IDLE_MS : w->o->idle_timeout_ms;
        if (now - c->t_idle > limit * 1000000 && stash_avail(c) == 0)
            client_close(w, c);
        return;
    }
    int64_t since = c->head_done ? c->t_read : c->t_head;
    if (now - since > (int64_t)w->o->header_timeout_ms * 1000000)
        client_error(w, c, 408, "Request Timeout", true);
}
