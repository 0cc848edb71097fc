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
#include "worker.h"

/* ---- clients ------------------------------------------------------------ */

static void client_recv(struct worker *w, struct client *c)
{
    struct io_uring_sqe *sqe = obj_sqe(w, &c->o, OP_C_RECV);
    io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, W_IN - c->in_len, 0);
    c->recv_armed = true;
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
    if (c->closing)
        return;
    c->closing = true;
    queue_remove(w, c);
    shutdown(c->fd, SHUT_RDWR);   /* completes a pending recv or send */
    close(c->fd);
    w->n_clients--;
    STAT_SUB(w->st, conns_open, 1);
    obj_kill(w, &c->o);
}

/* Copies the request with the hop-by-hop headers dropped, for a keep-alive upstream. */
static size_t build_upstream_request(const char *in, const struct http_req *rq, char *out)
{
    const char *p = in, *end = in + rq->head_len - 2;
    size_t n = 0;
    const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
    memcpy(out, p, (size_t)(eol - p) + 2);
    n += (size_t)(eol - p) + 2;
    for (p = eol + 2; p < end; p = eol + 2) {
        eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        size_t len = (size_t)(eol - p);
        if ((len >= 11 && strncasecmp(p, "Connection:", 11) == 0) ||
            (len >= 11 && strncasecmp(p, "Keep-Alive:", 11) == 0) ||
            (len >= 17 && strncasecmp(p, "Proxy-Connection:", 17) == 0))
            continue;
        memcpy(out + n, p, len + 2);
        n += len + 2;
    }
    if (rq->http10) {
        memcpy(out + n, "Connection: keep-alive\r\n", 24);
        n += 24;
    }
    memcpy(out + n, "\r\n", 2);
    n += 2;
    memcpy(out + n, in + rq->head_len, rq->content_length);
    return n + rq->content_length;
}

/* Looks for a whole request in the input; starts it, or reads more. */
static void client_try_request(struct worker *w, struct client *c)
{
    struct http_req rq;
    int r = http_parse_request(c->in, c->in_len, &rq);
    if (r < 0 || (r == 0 && c->in_len == W_IN)) {
        client_error(w, c, 400, "Bad Request", true);
        return;
    }
    if (r == 0) {
        if (w->stopping && c->in_len == 0)
            client_close(w, c);
        else
            client_recv(w, c);
        return;
    }
    size_t total = rq.head_len + rq.content_length;
    if (total > W_IN) {
        client_error(w, c, 413, "Request Too Large", true);
        return;
    }
    if (c->in_len < total) {
        client_recv(w, c);
        return;
    }
    c->req_len = build_upstream_request(c->in, &rq, c->req);
    c->used = total;
    c->keepalive = rq.keepalive && !w->stopping;
    c->head_method = rq.head_method;
    c->retries = 0;
    c->resp_started = c->resp_done = false;
    c->t0 = relay_now_ns();
    STAT_ADD(w->st, inflight, 1);
    if (w->qhead) {            /* others wait already: queue behind them */
        queue_push(w, c);
        sweep(w);
    } else {
        dispatch(w, c);
    }
}

void client_send(struct worker *w, struct client *c, const char *p, size_t n)
{
    c->out = p;
    c->out_len = n;
    c->out_off = 0;
    c->resp_started = true;
    struct io_uring_sqe *sqe = obj_sqe(w, &c->o, OP_C_SEND);
    io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
    c->send_armed = true;
}

void client_error(struct worker *w, struct client *c, int status, const char *reason, bool close)
{
    int n = http_error(c->err, sizeof c->err, status, reason, close || !c->keepalive);
    if (close)
        c->keepalive = false;
    c->state = C_ERROR;
    c->up = NULL;
    c->rs = NULL;
    STAT_ADD(w->st, errors, 1);
    if (c->used == 0) {        /* no request was started: nothing in flight to count */
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
    if (!c->keepalive || w->stopping) {
        client_close(w, c);
        return;
    }
    memmove(c->in, c->in + c->used, c->in_len - c->used);
    c->in_len -= c->used;
    c->used = 0;
    client_try_request(w, c);
}

/* The request failed before (retryable) or after bytes reached the client. */
void client_job_failed(struct worker *w, struct client *c, bool retryable)
{
    c->up = NULL;
    c->rs = NULL;
    if (retryable && !c->resp_started && c->retries < W_RETRIES && !w->stopping) {
        c->retries++;
        STAT_ADD(w->st, retries, 1);
        dispatch(w, c);
    } else if (!c->resp_started) {
        client_error(w, c, 502, "Bad Gateway", false);
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
        if (c->up) {
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

void client_on_send(struct worker *w, struct client *c, int res)
{
    c->send_armed = false;
    if (c->closing)
        return;
    if (res <= 0) {
        client_gone(w, c);
        return;
    }
    c->out_off += (size_t)res;
    if (c->out_off < c->out_len) {
        struct io_uring_sqe *sqe = obj_sqe(w, &c->o, OP_C_SEND);
        io_uring_prep_send(sqe, c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        c->send_armed = true;
        return;
    }
    switch (c->state) {
    case C_LOCAL: up_drained(w, c->up); break;
    case C_REMOTE: rs_step(w, c->rs); break;
    case C_ERROR: client_resp_done(w, c); break;
    default: break;
    }
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
    c->in_len += (size_t)res;
    client_try_request(w, c);
}

void accept_arm(struct worker *w)
{
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_accept(sqe, w->lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, (uint64_t)OP_ACCEPT << 56);
}

void on_accept(struct worker *w, int res)
{
    if (res < 0) {
        if (!w->stopping)
            accept_arm(w);
        return;
    }
    struct client *c = calloc(1, sizeof *c);
    if (!c || obj_add(w, &c->o, K_CLIENT) < 0) {
        free(c);
        close(res);
    } else {
        c->fd = res;
        int one = 1;
        setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        w->n_clients++;
        STAT_ADD(w->st, accepted, 1);
        STAT_ADD(w->st, conns_open, 1);
        client_recv(w, c);
    }
    if (!w->stopping)
        accept_arm(w);
}

