/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: upstream connections to the backend, owned by this worker. */
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
void up_unsink(struct worker *w, struct upstream *up)
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
void up_drained(struct worker *w, struct upstream *up)
{
    up->len = 0;
    if (up->resp_seen < up->resp_total)
        up_recv(w, up);
    else
        up_job_done(w, up);
}

void up_on_recv(struct worker *w, struct upstream *up, int res)
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

void up_on_send(struct worker *w, struct upstream *up, int res)
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

struct upstream *up_by_id(struct worker *w, orbit_id id)
{
    uint32_t slot = orbit_id_slot(id);
    if (slot >= W_LANE || !w->by_slot[slot] || w->by_slot[slot]->id != id)
        return NULL;
    return w->by_slot[slot];
}

/* Accepts a lease on one of our upstreams and runs the request on it: 0, or a negative code. */
int up_run_lease(struct worker *w, const struct orbit_lease *lease, enum sink_kind sink, void *obj,
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

void up_create(struct worker *w, struct client *c, struct orbit_permit *permit)
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

