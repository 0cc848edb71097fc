/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: one process, one io_uring, no threads.
 *
 * A client request needs an upstream connection to the backend. Upstreams are
 * pool resources (capacity 1) owned by the worker that dialled them; the
 * worker asks the pool (acquire, local-first) and gets one of:
 *   local lease  - its own idle upstream: accept, forward, relay the answer;
 *   remote lease - another worker's idle upstream: create a stream, write the
 *                  lease and the request into it, offer it to the owner, and
 *                  relay what comes back;
 *   create       - a unit of the backend's creation budget: dial, register;
 *   wait         - park on the key's change word until a unit comes back.
 * As an owner it takes offers, accepts the lease each carries, forwards the
 * request and streams the response back. Sockets, stream readiness, offers and
 * pool capacity are all waited for in the one ring (FUTEX_WAIT SQEs beside the
 * socket ops), and the wakes orbit issues ride the same submit. Without the
 * kernel's io_uring futex ops it waits on the tables' readiness eventfds.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <orbit/uring.h>
#include "worker.h"

#define W_LANE 256   /* relay_stream_spec.lane_capacity and relay_pool_spec.lane_capacity */

struct worker {
    const struct relay_opts *o;
    struct relay_worker_stats *st;
    struct io_uring ring;
    struct orbit_fleet *fleet;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    orbit_key key;
    struct orbit_limits limits;
    bool futex;                     /* io_uring FUTEX_WAIT available */
    int lfd;
    bool stopping;
    int64_t stop_deadline;
    /* objects */
    struct obj **objs;
    uint32_t *gens, n_objs, cap_objs, *free_idx, n_free;
    struct obj **grave;
    uint32_t n_grave, cap_grave;
    /* the pool wait queue (FIFO) and what is armed */
    struct client *qhead, *qtail;
    bool pool_armed, offer_armed;
    struct upstream *by_slot[W_LANE];
    int n_ups, n_creating, n_clients, n_rs, n_os;
    struct relay_stats *stats;      /* the whole fleet's counters: who waits, who owns */
    struct orbit_policy policy;
    struct rstream *rs_list;
    struct ostream *os_list;
    /* readiness mode */
    int rfd_streams, rfd_pool;
    bool rfd_streams_armed, rfd_pool_armed;
    uint64_t rfd_buf[2];
    struct __kernel_timespec tick;
};

static volatile sig_atomic_t w_stop_flag;
static void w_on_signal(int sig) { (void)sig; w_stop_flag = 1; }

/* ---- objects and user_data ---------------------------------------------- */

static uint64_t ud_of(const struct obj *o, enum w_op op)
{
    return (uint64_t)op << 56 | (uint64_t)(o->gen & 0xffffffu) << 32 | o->idx;
}

static int obj_add(struct worker *w, struct obj *o, enum w_kind kind)
{
    uint32_t idx;
    if (w->n_free) {
        idx = w->free_idx[--w->n_free];
    } else {
        if (w->n_objs == w->cap_objs) {
            uint32_t cap = w->cap_objs ? w->cap_objs * 2 : 256;
            struct obj **no = realloc(w->objs, cap * sizeof *no);
            uint32_t *ng = no ? realloc(w->gens, cap * sizeof *ng) : NULL;
            uint32_t *nf = ng ? realloc(w->free_idx, cap * sizeof *nf) : NULL;
            if (no) w->objs = no;
            if (ng) w->gens = ng;
            if (!nf)
                return -ENOMEM;
            w->free_idx = nf;
            w->cap_objs = cap;
        }
        idx = w->n_objs++;
        w->gens[idx] = 1;
    }
    w->objs[idx] = o;
    o->idx = idx;
    o->gen = w->gens[idx];
    o->pending = 0;
    o->dead = false;
    o->kind = (uint8_t)kind;
    return 0;
}

static struct obj *obj_lookup(struct worker *w, uint64_t ud)
{
    uint32_t idx = (uint32_t)ud, gen = (uint32_t)(ud >> 32) & 0xffffffu;
    if (idx >= w->n_objs || !w->objs[idx] || (w->gens[idx] & 0xffffffu) != gen)
        return NULL;
    return w->objs[idx];
}

/* A dead object with nothing in flight goes to the grave, freed after the batch. */
static void obj_settle(struct worker *w, struct obj *o)
{
    if (!o->dead || o->pending > 0 || !w->objs[o->idx])
        return;
    w->objs[o->idx] = NULL;
    w->gens[o->idx]++;
    w->free_idx[w->n_free++] = o->idx;
    if (w->n_grave == w->cap_grave) {
        uint32_t cap = w->cap_grave ? w->cap_grave * 2 : 64;
        struct obj **ng = realloc(w->grave, cap * sizeof *ng);
        if (!ng)
            abort();
        w->grave = ng;
        w->cap_grave = cap;
    }
    w->grave[w->n_grave++] = o;
}

static void obj_kill(struct worker *w, struct obj *o)
{
    o->dead = true;
    obj_settle(w, o);
}

static void grave_empty(struct worker *w)
{
    for (uint32_t i = 0; i < w->n_grave; i++)
        free(w->grave[i]);
    w->n_grave = 0;
}

static struct io_uring_sqe *obj_sqe(struct worker *w, struct obj *o, enum w_op op)
{
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_sqe_set_data64(sqe, ud_of(o, op));
    o->pending++;
    return sqe;
}

static void cancel_op(struct worker *w, struct obj *o, enum w_op op)
{
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_cancel64(sqe, ud_of(o, op), 0);
    io_uring_sqe_set_data64(sqe, OP_IGNORE);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

/* ---- forward declarations ----------------------------------------------- */

static void dispatch(struct worker *w, struct client *c);
static void sweep(struct worker *w);
static void client_send(struct worker *w, struct client *c, const char *p, size_t n);
static void client_resp_done(struct worker *w, struct client *c);
static void client_job_failed(struct worker *w, struct client *c, bool retryable);
static void client_error(struct worker *w, struct client *c, int status, const char *reason, bool close);
static void up_drained(struct worker *w, struct upstream *up);
static void os_deliver(struct worker *w, struct ostream *os, const char *p, size_t n);
static void os_job_done(struct worker *w, struct ostream *os);
static void os_job_failed(struct worker *w, struct ostream *os, bool retryable);
static void rs_step(struct worker *w, struct rstream *rs);
static void os_step(struct worker *w, struct ostream *os);

/* ---- waiting on an endpoint --------------------------------------------- */

/*
 * After a try_* call said EAGAIN: arm a FUTEX_WAIT on the direction (futex
 * mode) and return 1, or return 0 when it is ready already (try again now).
 * In readiness mode nothing is armed: the streams eventfd covers every
 * endpoint whose last try_* said EAGAIN, and the object is stepped again when
 * it fires. -1: the wait cannot be armed (the next try_* will say why not).
 */
static int ep_wait(struct worker *w, struct obj *o, struct orbit_endpoint *ep, bool write, size_t need,
                   bool *armed)
{
    if (!w->futex)
        return 1;
    if (*armed)
        return 1;
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_sqe_set_data64(sqe, ud_of(o, OP_EP_WAIT));
    int r = write ? orbit_endpoint_prep_wait_writable_exact(ep, need, sqe)
                  : orbit_endpoint_prep_wait_readable_exact(ep, need, sqe);
    if (r != 0) {
        relay_sqe_void(sqe);
        return r == 1 ? 0 : -1;
    }
    o->pending++;
    *armed = true;
    STAT_ADD(w->st, futex_waits, 1);
    return 1;
}

/* ---- clients ------------------------------------------------------------ */

static void client_recv(struct worker *w, struct client *c)
{
    struct io_uring_sqe *sqe = obj_sqe(w, &c->o, OP_C_RECV);
    io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, W_IN - c->in_len, 0);
    c->recv_armed = true;
}

static void queue_remove(struct worker *w, struct client *c)
{
    if (!c->queued)
        return;
    if (c->qprev) c->qprev->qnext = c->qnext; else w->qhead = c->qnext;
    if (c->qnext) c->qnext->qprev = c->qprev; else w->qtail = c->qprev;
    c->qnext = c->qprev = NULL;
    c->queued = false;
    STAT_SUB(w->st, queued, 1);
}

static void queue_push(struct worker *w, struct client *c)
{
    c->qnext = NULL;
    c->qprev = w->qtail;
    if (w->qtail) w->qtail->qnext = c; else w->qhead = c;
    w->qtail = c;
    c->queued = true;
    c->state = C_QUEUED;
    STAT_ADD(w->st, queued, 1);
}

static void client_close(struct worker *w, struct client *c)
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

static void client_send(struct worker *w, struct client *c, const char *p, size_t n)
{
    c->out = p;
    c->out_len = n;
    c->out_off = 0;
    c->resp_started = true;
    struct io_uring_sqe *sqe = obj_sqe(w, &c->o, OP_C_SEND);
    io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
    c->send_armed = true;
}

static void client_error(struct worker *w, struct client *c, int status, const char *reason, bool close)
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
static void client_resp_done(struct worker *w, struct client *c)
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
static void client_job_failed(struct worker *w, struct client *c, bool retryable)
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

static void rs_fail(struct worker *w, struct rstream *rs, bool retryable);
static void up_unsink(struct worker *w, struct upstream *up);

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

static void client_on_send(struct worker *w, struct client *c, int res)
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

static void client_on_recv(struct worker *w, struct client *c, int res)
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

static void accept_arm(struct worker *w)
{
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_accept(sqe, w->lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, (uint64_t)OP_ACCEPT << 56);
}

static void on_accept(struct worker *w, int res)
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

/* ---- fair shares of the budget ------------------------------------------ */

/*
 * Local-first alone lets one worker keep every upstream it dialled: it
 * re-leases each one the moment it completes, before a waiting peer is even
 * scheduled. So a worker holds at most its share of the budget (budget over
 * running workers, rounded up) while another worker waits with less than its
 * share: it dials no more, and gives back a surplus upstream when one comes
 * free. The counters in the relay's shared stats say who waits.
 */
static int running_workers(struct worker *w)
{
    int n = 1;
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        struct relay_worker_stats *o = &w->stats->w[i];
        if (o != w->st && STAT_GET(o, state) == SLOT_RUNNING)
            n++;
    }
    return n;
}

static int fair_share(struct worker *w)
{
    int n = running_workers(w);
    return (w->o->upstreams + n - 1) / n;
}

static bool others_starving(struct worker *w)
{
    uint64_t share = (uint64_t)fair_share(w);
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        struct relay_worker_stats *o = &w->stats->w[i];
        if (o != w->st && STAT_GET(o, state) == SLOT_RUNNING && STAT_GET(o, queued) > 0 &&
            STAT_GET(o, upstreams_open) < share)
            return true;
    }
    return false;
}

/* local_first, except that a worker at its share does not dial while others starve. */
static struct orbit_decision fair_decide(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                         uint32_t live, uint32_t creating, const struct orbit_limits *limits)
{
    struct worker *w = ctx;
    struct orbit_decision d = orbit_policy_local_first.decide(orbit_policy_local_first.ctx, key, c, n, live,
                                                              creating, limits);
    if (d.kind == ORBIT_DECIDE_CREATE && w->n_ups + w->n_creating >= fair_share(w) && others_starving(w))
        d = (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
    return d;
}

/* ---- upstreams: the owner's side ---------------------------------------- */

static void up_send(struct worker *w, struct upstream *up)
{
    struct io_uring_sqe *sqe = obj_sqe(w, &up->o, OP_U_SEND);
    io_uring_prep_send(sqe, up->fd, up->req + up->req_off, up->req_len - up->req_off, MSG_NOSIGNAL);
}

static void up_recv(struct worker *w, struct upstream *up)
{
    size_t room = W_UPBUF - up->len;
    if (up->head_parsed && room > up->resp_total - up->resp_seen)
        room = up->resp_total - up->resp_seen;
    struct io_uring_sqe *sqe = obj_sqe(w, &up->o, OP_U_RECV);
    io_uring_prep_recv(sqe, up->fd, up->buf + up->len, room, 0);
}

/* Starts forwarding one request; the response goes to the sink. */
static void up_start(struct worker *w, struct upstream *up, enum sink_kind sink, void *sink_obj,
                     const char *req, size_t req_len)
{
    up->busy = true;
    up->sink = sink;
    up->sink_obj = sink_obj;
    up->req = req;
    up->req_len = req_len;
    up->req_off = 0;
    up->head_req = req_len >= 5 && memcmp(req, "HEAD ", 5) == 0;
    up->len = 0;
    up->head_parsed = false;
    up->resp_total = up->resp_seen = up->delivered = 0;
    up_send(w, up);
}

/* No one reads this response any more: it is drained into the void. */
static void up_unsink(struct worker *w, struct upstream *up)
{
    (void)w;
    up->sink = SINK_NONE;
    up->sink_obj = NULL;
}

/* Ends an upstream: out of the pool and closed. */
static void up_retire(struct worker *w, struct upstream *up)
{
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
        shutdown(up->fd, SHUT_RDWR);
        close(up->fd);
        up->fd = -1;
    }
    obj_kill(w, &up->o);
}

static void up_fail(struct worker *w, struct upstream *up)
{
    bool retryable = up->delivered == 0;
    enum sink_kind sink = up->sink;
    void *obj = up->sink_obj;
    STAT_ADD(w->st, upstream_failures, 1);
    up->broken = true;
    if (up->busy) {
        orbit_execution_complete(&up->exec);
        up->busy = false;
    }
    up_unsink(w, up);
    up_retire(w, up);
    if (sink == SINK_CLIENT)
        client_job_failed(w, obj, retryable);
    else if (sink == SINK_OSTREAM)
        os_job_failed(w, obj, retryable);
    sweep(w);   /* the budget has room again */
}

static void up_job_done(struct worker *w, struct upstream *up)
{
    enum sink_kind sink = up->sink;
    void *obj = up->sink_obj;
    /* The unit goes back before anyone is told, so our own waiters can take it. */
    orbit_execution_complete(&up->exec);
    up->busy = false;
    up_unsink(w, up);
    if (!up->keepalive || (w->n_ups > fair_share(w) && others_starving(w)))
        up_retire(w, up);   /* closed by the backend, or more than our share while others wait */
    if (sink == SINK_CLIENT)
        client_resp_done(w, obj);
    else if (sink == SINK_OSTREAM)
        os_job_done(w, obj);
    sweep(w);
}

static void up_deliver(struct worker *w, struct upstream *up)
{
    up->delivered += up->len;
    switch (up->sink) {
    case SINK_CLIENT: client_send(w, up->sink_obj, up->buf, up->len); break;
    case SINK_OSTREAM: os_deliver(w, up->sink_obj, up->buf, up->len); break;
    default: up_drained(w, up); break;
    }
}

/* The sink took everything handed to it. */
static void up_drained(struct worker *w, struct upstream *up)
{
    up->len = 0;
    if (up->resp_seen < up->resp_total)
        up_recv(w, up);
    else
        up_job_done(w, up);
}

static void up_on_recv(struct worker *w, struct upstream *up, int res)
{
    if (res <= 0) {
        up_fail(w, up);
        return;
    }
    up->len += (size_t)res;
    up->resp_seen += (size_t)res;
    if (!up->head_parsed) {
        struct http_resp rp;
        int r = http_parse_response(up->buf, up->len, &rp);
        if (r == 0 && up->len < W_UPBUF) {
            up_recv(w, up);
            return;
        }
        if (r <= 0) {
            up_fail(w, up);
            return;
        }
        up->head_parsed = true;
        up->keepalive = rp.keepalive;
        up->resp_total = rp.head_len + (up->head_req ? 0 : rp.content_length);
    }
    if (up->resp_seen > up->resp_total) {   /* more than one response: out of step */
        up_fail(w, up);
        return;
    }
    up_deliver(w, up);
}

static void up_on_send(struct worker *w, struct upstream *up, int res)
{
    if (res <= 0) {
        up_fail(w, up);
        return;
    }
    up->req_off += (size_t)res;
    if (up->req_off < up->req_len)
        up_send(w, up);
    else
        up_recv(w, up);
}

static struct upstream *up_by_id(struct worker *w, orbit_id id)
{
    uint32_t slot = orbit_id_slot(id);
    if (slot >= W_LANE || !w->by_slot[slot] || w->by_slot[slot]->id != id)
        return NULL;
    return w->by_slot[slot];
}

/* Accepts a lease on one of our upstreams and runs the request on it: 0, or a negative code. */
static int up_run_lease(struct worker *w, const struct orbit_lease *lease, enum sink_kind sink, void *obj,
                        const char *req, size_t req_len)
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
    up_start(w, up, sink, obj, req, req_len);
    return 0;
}

static void up_create(struct worker *w, struct client *c, struct orbit_permit *permit)
{
    struct upstream *up = calloc(1, sizeof *up);
    if (!up || obj_add(w, &up->o, K_UPSTREAM) < 0) {
        free(up);
        orbit_permit_finish(permit);
        client_error(w, c, 503, "Service Unavailable", false);
        return;
    }
    up->permit = *permit;
    up->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    up->creator = c;
    up->addr = w->o->upstream;
    c->state = C_CREATE;
    c->up = up;
    w->n_creating++;
    int one = 1;
    setsockopt(up->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct io_uring_sqe *sqe = obj_sqe(w, &up->o, OP_U_CONNECT);
    io_uring_prep_connect(sqe, up->fd, (const struct sockaddr *)&up->addr, sizeof up->addr);
}

static void up_on_connect(struct worker *w, struct upstream *up, int res)
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
        if (c)
            client_job_failed(w, c, true);
        sweep(w);
        return;
    }
    up->registered = true;
    w->by_slot[orbit_id_slot(up->id)] = up;
    w->n_ups++;
    STAT_ADD(w->st, upstreams_created, 1);
    STAT_ADD(w->st, upstreams_open, 1);
    if (c) {
        /* Our own new upstream, unless another worker leased it in between. */
        struct orbit_lease lease;
        c->up = NULL;
        if (orbit_pool_reserve(w->pool, up->id, &lease) == 0 &&
            up_run_lease(w, &lease, SINK_CLIENT, c, c->req, c->req_len) == 0) {
            c->state = C_LOCAL;
            c->up = up;
            STAT_ADD(w->st, local_leases, 1);
        } else {
            dispatch(w, c);
        }
    }
    sweep(w);
}

/* ---- requester streams (side A) ----------------------------------------- */

void relay_frame_encode(char out[48], const struct orbit_lease *l, uint32_t req_len)
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
}

int relay_frame_decode(const char in[48], struct orbit_lease *l, uint32_t *req_len)
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
        cancel_op(w, &rs->o, OP_EP_WAIT);
    if (reset)
        orbit_endpoint_reset(rs->ep);
    orbit_endpoint_close(rs->ep);
    rs->ep = NULL;
    rs_unlink(w, rs);
    obj_kill(w, &rs->o);
}

static void rs_fail(struct worker *w, struct rstream *rs, bool retryable)
{
    struct client *c = rs->c;
    rs->c = NULL;
    rs_end(w, rs, true);
    if (c)
        client_job_failed(w, c, retryable && rs->body_bytes == 0);
}

static void rs_start(struct worker *w, struct client *c, const struct orbit_lease *lease)
{
    struct rstream *rs = calloc(1, sizeof *rs);
    struct orbit_endpoint *ep = NULL;
    int rc = rs ? obj_add(w, &rs->o, K_RSTREAM) : -ENOMEM;
    if (rc == 0)
        rc = orbit_streams_create(w->streams, &ep, &rs->ticket);
    if (rc < 0) {
        /* The lease is abandoned: its owner's reconcile ages it out. */
        if (rs && rs->o.gen)
            obj_kill(w, &rs->o);
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
    rs->started = relay_now_ns();
    relay_frame_encode(rs->frame, lease, (uint32_t)c->req_len);
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

/* Writes the frame and the request, then the status, then relays the body. */
static void rs_step(struct worker *w, struct rstream *rs)
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
        case RS_STATUS: {
            char st[16];
            r = orbit_endpoint_try_read_exact(rs->ep, st, sizeof st);
            if (r == -ORBIT_EAGAIN) {
                r = ep_wait(w, &rs->o, rs->ep, false, sizeof st, &rs->wait_armed);
                if (r != 0) {
                    if (r < 0) rs_fail(w, rs, true);
                    return;
                }
                continue;
            }
            uint32_t magic;
            int32_t status;
            memcpy(&magic, st, 4);
            memcpy(&status, st + 4, 4);
            if (r < 0 || magic != RELAY_STATUS_MAGIC || status != 0) {
                rs_fail(w, rs, true);   /* refused or gone before a byte: try again */
                return;
            }
            rs->phase = RS_BODY;
            break;
        }
        case RS_BODY:
            if (!rs->c) {
                rs_end(w, rs, true);
                return;
            }
            if (rs->c->send_armed)
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

/* Requests whose owner vanished before answering: their lease is no longer current. */
static void rs_check_leases(struct worker *w)
{
    int64_t now = relay_now_ns();
    struct rstream *rs = w->rs_list, *next;
    for (; rs; rs = next) {
        next = rs->next;
        if (rs->phase == RS_BODY)
            continue;
        if (!orbit_pool_is_current(w->pool, &rs->lease) || now - rs->started > W_STATUS_TIMEOUT_NS)
            rs_fail(w, rs, true);
    }
}

/* ---- owner streams (side B) --------------------------------------------- */

static void os_end(struct worker *w, struct ostream *os, bool reset)
{
    if (os->wait_armed)
        cancel_op(w, &os->o, OP_EP_WAIT);
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
    obj_kill(w, &os->o);
}

static void os_set_status(struct ostream *os, int32_t status)
{
    uint32_t magic = RELAY_STATUS_MAGIC;
    memset(os->status_frame, 0, sizeof os->status_frame);
    memcpy(os->status_frame, &magic, 4);
    memcpy(os->status_frame + 4, &status, 4);
    os->status_sent = true;
}

/* Pushes wbuf into the stream; when all is in, tells whoever waits for it. */
static void os_write_step(struct worker *w, struct ostream *os)
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
            up_drained(w, os->up);
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
    os_set_status(os, status);
    os_write(w, os, os->status_frame, sizeof os->status_frame);
}

static void os_deliver(struct worker *w, struct ostream *os, const char *p, size_t n)
{
    if (!os->status_sent && !os->peer_gone) {
        os_set_status(os, 0);
        /* 16 bytes into a direction nobody wrote yet: always fits. */
        if (orbit_endpoint_try_write_exact(os->ep, os->status_frame, sizeof os->status_frame) < 0)
            os->peer_gone = true;
    }
    os_write(w, os, p, n);
}

static void os_job_done(struct worker *w, struct ostream *os)
{
    STAT_SUB(w->st, serving_remote, 1);
    STAT_ADD(w->st, served_remote, 1);
    os->up = NULL;
    os_end(w, os, false);
}

static void os_job_failed(struct worker *w, struct ostream *os, bool retryable)
{
    STAT_SUB(w->st, serving_remote, 1);
    os->up = NULL;
    if (retryable && !os->status_sent)
        os_refuse(w, os, -ORBIT_ERESET);
    else
        os_end(w, os, true);
}

/* The request is in: accept the lease it carries and run it on that upstream. */
static void os_run(struct worker *w, struct ostream *os)
{
    os->phase = OS_RUN;
    STAT_ADD(w->st, serving_remote, 1);
    int rc = up_run_lease(w, &os->lease, SINK_OSTREAM, os, os->req, os->req_len);
    if (rc < 0) {
        STAT_SUB(w->st, serving_remote, 1);
        os_refuse(w, os, rc);
        return;
    }
    os->up = up_by_id(w, os->lease.id);
}

static void os_step(struct worker *w, struct ostream *os)
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
            if (r < 0 || relay_frame_decode(os->head, &os->lease, &req_len) < 0 || req_len > W_REQ ||
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
    if (!os || obj_add(w, &os->o, K_OSTREAM) < 0) {
        free(os);
        return;   /* the requester's lease check or its timeout retries elsewhere */
    }
    if (orbit_streams_open_ticket(w->streams, t, &os->ep) < 0) {
        obj_kill(w, &os->o);
        return;
    }
    os->phase = OS_HEAD;
    os->next = w->os_list;
    if (w->os_list)
        w->os_list->prev = os;
    w->os_list = os;
    w->n_os++;
    os_step(w, os);
}

static void take_offers(struct worker *w)
{
    struct orbit_ticket t;
    while (!w->stopping && orbit_streams_take_offer(w->streams, &t) == 0)
        os_start(w, &t);
}

/*
 * Keep a FUTEX_WAIT on our offers word in the ring. Offers that arrive while
 * arming are taken here; if they keep coming (or the prep fails) it gives up
 * for now and the tick tries again, so offers are never left unwatched.
 */
static void arm_offer_wait(struct worker *w)
{
    for (int i = 0; i < 8 && w->futex && !w->offer_armed && !w->stopping; i++) {
        struct io_uring_sqe *sqe = relay_sqe(&w->ring);
        io_uring_sqe_set_data64(sqe, (uint64_t)OP_OFFER_WAIT << 56);
        int r = orbit_streams_prep_wait_offer(w->streams, sqe);
        if (r == 0) {
            w->offer_armed = true;
            STAT_ADD(w->st, futex_waits, 1);
            return;
        }
        relay_sqe_void(sqe);
        if (r < 0)
            return;
        take_offers(w);
    }
}

/* ---- the pool: acquire, wait queue, capacity waits ---------------------- */

enum { D_STARTED, D_WAIT };

/* One acquire for c: starts it (local, remote, create, or an error) or says WAIT. */
static int try_dispatch(struct worker *w, struct client *c, uint32_t *version)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        struct orbit_plan plan;
        /* No stream slot left for a remote lease: only our own upstreams then. */
        const struct orbit_policy *pol = w->n_rs >= W_LANE - 4 ? &orbit_policy_local_only : &w->policy;
        int rc = orbit_pool_acquire(w->pool, w->key, &w->limits, pol, &plan);
        if (rc < 0) {
            client_error(w, c, 503, "Service Unavailable", false);
            return D_STARTED;
        }
        switch (plan.kind) {
        case ORBIT_PLAN_LOCAL_REUSE:
            if (up_run_lease(w, &plan.lease, SINK_CLIENT, c, c->req, c->req_len) == 0) {
                c->state = C_LOCAL;
                c->up = up_by_id(w, plan.lease.id);
                STAT_ADD(w->st, local_leases, 1);
                return D_STARTED;
            }
            continue;
        case ORBIT_PLAN_REMOTE_REUSE:
            rs_start(w, c, &plan.lease);
            return D_STARTED;
        case ORBIT_PLAN_CREATE:
            up_create(w, c, &plan.permit);
            return D_STARTED;
        case ORBIT_PLAN_WAIT:
            *version = plan.version;
            return D_WAIT;
        case ORBIT_PLAN_REJECT:
        default:
            client_error(w, c, 503, "Service Unavailable", false);
            return D_STARTED;
        }
    }
    client_error(w, c, 503, "Service Unavailable", false);
    return D_STARTED;
}

static bool need_pool_wait(struct worker *w)
{
    if (w->qhead)
        return true;
    for (struct rstream *rs = w->rs_list; rs; rs = rs->next)
        if (rs->phase != RS_BODY)
            return true;
    return false;
}

/* Arms one FUTEX_WAIT on the key's change word past since: 0 armed (or
 * armed already, or nothing to arm), 1 the key moved already. */
static int arm_pool_wait(struct worker *w, uint32_t since)
{
    if (!w->futex || w->pool_armed)
        return 0;
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_sqe_set_data64(sqe, (uint64_t)OP_POOL_WAIT << 56);
    int r = orbit_pool_prep_wait_capacity(w->pool, w->key, since, sqe);
    if (r == 0) {
        w->pool_armed = true;
        STAT_ADD(w->st, futex_waits, 1);
        return 0;
    }
    relay_sqe_void(sqe);
    return r == 1 ? 1 : 0;   /* an error: the tick sweeps again */
}

static void dispatch(struct worker *w, struct client *c)
{
    uint32_t version;
    if (try_dispatch(w, c, &version) != D_WAIT)
        return;
    STAT_ADD(w->st, pool_waits, 1);
    queue_push(w, c);
    if (arm_pool_wait(w, version) == 1)
        sweep(w);
}

/* Serves the wait queue in order until the pool says WAIT again. */
static void process_queue(struct worker *w)
{
    while (w->qhead) {
        struct client *c = w->qhead;
        uint32_t version;
        queue_remove(w, c);
        if (try_dispatch(w, c, &version) == D_WAIT) {
            /* Back to the head: it keeps its turn. */
            c->qprev = NULL;
            c->qnext = w->qhead;
            if (w->qhead) w->qhead->qprev = c; else w->qtail = c;
            w->qhead = c;
            c->queued = true;
            c->state = C_QUEUED;
            STAT_ADD(w->st, queued, 1);
            return;
        }
    }
}

/*
 * Everything that waits on the pool key: queued requests and remote requests
 * whose owner has not answered. The version is read before the checks, so a
 * change during them makes the armed wait complete at once.
 */
static bool sweeping;
static void sweep(struct worker *w)
{
    if (sweeping)
        return;   /* called again from inside: the outer sweep re-checks */
    sweeping = true;
    for (int round = 0; round < 4; round++) {
        uint32_t v = 0;
        if (!w->futex)
            orbit_pool_watch(w->pool, w->key);   /* before the attempts it guards */
        orbit_pool_version(w->pool, w->key, &v);
        rs_check_leases(w);
        process_queue(w);
        if (!need_pool_wait(w) || arm_pool_wait(w, v) == 0)
            break;
    }
    sweeping = false;
}

/* ---- readiness mode (no io_uring futex ops) ----------------------------- */

static void arm_readiness(struct worker *w)
{
    if (w->futex || w->stopping)
        return;
    if (!w->rfd_streams_armed) {
        struct io_uring_sqe *sqe = relay_sqe(&w->ring);
        io_uring_prep_poll_add(sqe, w->rfd_streams, POLLIN);
        io_uring_sqe_set_data64(sqe, (uint64_t)OP_READY_STREAMS << 56);
        w->rfd_streams_armed = true;
    }
    if (!w->rfd_pool_armed) {
        struct io_uring_sqe *sqe = relay_sqe(&w->ring);
        io_uring_prep_poll_add(sqe, w->rfd_pool, POLLIN);
        io_uring_sqe_set_data64(sqe, (uint64_t)OP_READY_POOL << 56);
        w->rfd_pool_armed = true;
    }
}

/* The doorbell moved: retry every stream that waits, take offers, sweep the pool. */
static void on_readiness(struct worker *w, int fd)
{
    orbit_readiness_drain(fd);
    take_offers(w);
    struct rstream *rs, *rn;
    for (rs = w->rs_list; rs; rs = rn) {
        rn = rs->next;
        if (!(rs->phase == RS_BODY && rs->c && rs->c->send_armed))
            rs_step(w, rs);
    }
    struct ostream *os, *on;
    for (os = w->os_list; os; os = on) {
        on = os->next;
        if (os->phase == OS_HEAD || os->phase == OS_REQ)
            os_step(w, os);
        else if (os->writing)
            os_write_step(w, os);
    }
    sweep(w);
}

/* ---- housekeeping ------------------------------------------------------- */

static void arm_tick(struct worker *w)
{
    w->tick.tv_sec = W_TICK_MS / 1000;
    w->tick.tv_nsec = (W_TICK_MS % 1000) * 1000000L;
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_timeout(sqe, &w->tick, 0, 0);
    io_uring_sqe_set_data64(sqe, (uint64_t)OP_TIMER << 56);
}

/* The owner's truth for each upstream; reservations nobody brought age out. */
static void on_tick(struct worker *w)
{
    for (uint32_t s = 0; s < W_LANE; s++) {
        struct upstream *up = w->by_slot[s];
        if (up && up->registered)
            orbit_pool_reconcile(w->pool, up->id, up->busy ? 1 : 0, W_GRACE_MS);
    }
    if (!w->futex) {
        on_readiness(w, w->rfd_streams);   /* a backstop; it sweeps too */
    } else {
        if (!w->offer_armed) {             /* arm_offer_wait gave up for a moment */
            take_offers(w);
            arm_offer_wait(w);
        }
        sweep(w);
    }
    arm_tick(w);
}

static void begin_stop(struct worker *w)
{
    w->stopping = true;
    w->stop_deadline = relay_now_ns() + 3000000000ll;
    /* The listener stays open in the supervisor (for a successor): only our accept goes. */
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_cancel64(sqe, (uint64_t)OP_ACCEPT << 56, 0);
    io_uring_sqe_set_data64(sqe, OP_IGNORE);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    close(w->lfd);
    w->lfd = -1;
    for (uint32_t i = 0; i < w->n_objs; i++) {
        struct obj *o = w->objs[i];
        if (o && !o->dead && o->kind == K_CLIENT) {
            struct client *c = (struct client *)o;
            if (c->state == C_READ && c->in_len == 0)
                client_close(w, c);
        }
    }
}

static bool idle(struct worker *w)
{
    return w->n_clients == 0 && w->n_rs == 0 && w->n_os == 0;
}

/* ---- the loop ----------------------------------------------------------- */

static void on_cqe(struct worker *w, uint64_t ud, int res)
{
    enum w_op op = (enum w_op)(ud >> 56);
    switch (op) {
    case OP_IGNORE: return;
    case OP_ACCEPT: on_accept(w, res); return;
    case OP_TIMER: on_tick(w); return;
    case OP_OFFER_WAIT:
        w->offer_armed = false;
        take_offers(w);
        arm_offer_wait(w);
        return;
    case OP_POOL_WAIT:
        w->pool_armed = false;
        sweep(w);
        return;
    case OP_READY_STREAMS:
        w->rfd_streams_armed = false;
        on_readiness(w, w->rfd_streams);
        arm_readiness(w);
        return;
    case OP_READY_POOL:
        w->rfd_pool_armed = false;
        on_readiness(w, w->rfd_pool);
        arm_readiness(w);
        return;
    default: break;
    }
    struct obj *o = obj_lookup(w, ud);
    if (!o)
        return;
    o->pending--;
    if (o->dead) {
        obj_settle(w, o);
        return;
    }
    switch (op) {
    case OP_C_RECV: client_on_recv(w, (struct client *)o, res); break;
    case OP_C_SEND: client_on_send(w, (struct client *)o, res); break;
    case OP_U_CONNECT: up_on_connect(w, (struct upstream *)o, res); break;
    case OP_U_SEND: up_on_send(w, (struct upstream *)o, res); break;
    case OP_U_RECV: up_on_recv(w, (struct upstream *)o, res); break;
    case OP_EP_WAIT:
        if (o->kind == K_RSTREAM) {
            ((struct rstream *)o)->wait_armed = false;
            rs_step(w, (struct rstream *)o);
        } else if (o->kind == K_OSTREAM) {
            ((struct ostream *)o)->wait_armed = false;
            os_step(w, (struct ostream *)o);
        }
        break;
    default: break;
    }
}

static int worker_open(struct worker *w, struct relay_stats *stats, int slot)
{
    struct orbit_fleet_opts fo = ORBIT_FLEET_OPTS_DEFAULT;
    fo.capacity = relay_fleet_capacity(w->o->workers);
    int rc = orbit_fleet_join(w->o->fleet, &fo, &w->fleet);
    if (rc == 0)
        rc = orbit_pool_open(w->fleet, &relay_pool_spec, &w->pool);
    if (rc == 0)
        rc = orbit_streams_open(w->fleet, &relay_stream_spec, &w->streams);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay worker: %s\n", orbit_strerror(rc));
        return rc;
    }
    w->st = &stats->w[slot];
    w->stats = stats;
    atomic_store(&w->st->node, orbit_fleet_node(w->fleet));
    atomic_store(&w->st->incarnation, orbit_fleet_incarnation(w->fleet));
    w->key = relay_backend_key(&w->o->upstream);
    w->limits = (struct orbit_limits){ .max_live = (uint32_t)w->o->upstreams, .attempts = 4 };
    w->policy = (struct orbit_policy){ .decide = fair_decide, .ctx = w };
    w->futex = orbit_uring_futex_supported();
    struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE, .cq_entries = 8192 };
    rc = io_uring_queue_init_params(1024, &w->ring, &p);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay worker: io_uring: %s\n", strerror(-rc));
        return rc;
    }
    if (w->futex && orbit_uring_attach_wakes(&w->ring) < 0)
        w->futex = false;
    if (!w->futex) {
        w->rfd_streams = orbit_streams_readiness(w->streams);
        w->rfd_pool = orbit_pool_readiness(w->pool);
        if (w->rfd_streams < 0 || w->rfd_pool < 0) {
            fprintf(stderr, "orbit-relay worker: readiness: %s\n", orbit_strerror(w->rfd_streams));
            return -1;
        }
        orbit_pool_watch(w->pool, w->key);
    }
    w->lfd = w->o->listen_fd;
    return 0;
}

static void worker_close(struct worker *w)
{
    io_uring_submit(&w->ring);      /* queued wakes go out */
    orbit_uring_detach_wakes();
    for (struct rstream *rs = w->rs_list; rs; rs = rs->next)
        orbit_endpoint_close(rs->ep);
    for (struct ostream *os = w->os_list; os; os = os->next)
        orbit_endpoint_close(os->ep);
    for (uint32_t s = 0; s < W_LANE; s++)
        if (w->by_slot[s]) {
            orbit_pool_unregister(w->pool, w->by_slot[s]->id);
            STAT_SUB(w->st, upstreams_open, 1);
        }
    io_uring_queue_exit(&w->ring);
    for (uint32_t i = 0; i < w->n_objs; i++)
        free(w->objs[i]);
    grave_empty(w);
    free(w->objs);
    free(w->gens);
    free(w->free_idx);
    free(w->grave);
    orbit_streams_close(w->streams);
    orbit_pool_close(w->pool);
    orbit_fleet_leave(w->fleet);
}

int worker_main(const struct relay_opts *o, struct relay_stats *stats, int slot, int ready_fd)
{
    struct worker w = { .o = o, .lfd = -1, .rfd_streams = -1, .rfd_pool = -1 };
    struct sigaction sa = { .sa_handler = w_on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (worker_open(&w, stats, slot) < 0)
        return 1;
    accept_arm(&w);
    arm_offer_wait(&w);
    arm_readiness(&w);
    arm_tick(&w);
    if (ready_fd >= 0) {
        char one = 1;
        if (write(ready_fd, &one, 1) != 1)
            return 1;
        close(ready_fd);
    }
    while (!(w.stopping && (idle(&w) || relay_now_ns() > w.stop_deadline))) {
        int rc = io_uring_submit_and_wait(&w.ring, 1);
        STAT_ADD(w.st, submits, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            fprintf(stderr, "orbit-relay worker: io_uring_enter: %s\n", strerror(-rc));
            break;
        }
        if (w_stop_flag && !w.stopping)
            begin_stop(&w);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&w.ring, head, cqe) {
            seen++;
            on_cqe(&w, cqe->user_data, cqe->res);
        }
        io_uring_cq_advance(&w.ring, seen);
        grave_empty(&w);
    }
    worker_close(&w);
    return 0;
}
