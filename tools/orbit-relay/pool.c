/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: the pool (acquire, fair shares, the wait queue, capacity waits). */
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

/* local_first, except that a worker at its share does not dial while others starve. */
struct orbit_decision fair_decide(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                         uint32_t live, uint32_t creating, const struct orbit_limits *limits)
{
    struct worker *w = ctx;
    struct orbit_decision d = orbit_policy_local_first.decide(orbit_policy_local_first.ctx, key, c, n, live,
                                                              creating, limits);
    if (d.kind == ORBIT_DECIDE_CREATE && w->ups.n_ups + w->ups.n_creating >= share_fair(&w->share) && share_others_starving(&w->share))
        d = (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
    /* Below our share with budget left: dial our own rather than lean on another worker's
     * (a remote request needs both processes scheduled: it is the slow tail). */
    if (d.kind == ORBIT_DECIDE_REUSE && orbit_id_node(d.reuse) != orbit_fleet_node(w->fleet) &&
        live + creating < limits->max_live && w->ups.n_ups + w->ups.n_creating < share_fair(&w->share))
        d = (struct orbit_decision){ .kind = ORBIT_DECIDE_CREATE };
    /* Many of our own, every one busy, and a short queue: wait for our own. One comes
     * back within a fraction of a request's time, sooner than a remote round trip; a
     * longer queue (a skewed load) still borrows. Below our share, our queue is what
     * makes a peer over its share give one back (share_others_starving). */
    else if (d.kind == ORBIT_DECIDE_REUSE && orbit_id_node(d.reuse) != orbit_fleet_node(w->fleet) &&
             w->ups.n_ups >= W_OWN_WAIT_MIN && STAT_GET(w->st, queued) * 4 < (uint64_t)w->ups.n_ups) {
        d = (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
        w->decided_own = true;
    }
    return d;
}

/* ---- the pool: acquire, wait queue, capacity waits ---------------------- */

enum { D_STARTED, D_WAIT };

/* Our most recently used idle upstream: what local_first would choose, without
 * the snapshot of every candidate of the key an acquire takes. */
static bool take_idle(struct worker *w, struct client *c)
{
    struct upstream *up;
    while ((up = up_idle_pop(&w->ups))) {
        struct orbit_lease lease;
        if (orbit_pool_reserve(w->pool, up->id, &lease) < 0)
            continue;   /* a requester of another worker reserved it first: it comes back when done */
        struct up_job job = client_job(c);
        if (up_run_lease(&w->ups, &lease, &c->sink, &job) == 0) {
            c->state = C_LOCAL;
            c->up = up;
            STAT_ADD(w->st, local_leases, 1);
            return true;
        }
    }
    return false;
}

/* One acquire for c: starts it (local, remote, create, or an error) or says WAIT. */
static int try_dispatch(struct worker *w, struct client *c, uint32_t *version)
{
    if (take_idle(w, c))
        return D_STARTED;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct orbit_plan plan;
        /* No stream slot left for a remote lease, or a body that streams (or is longer
         * than a remote owner takes): only our own upstreams. */
        bool local = c->streaming || c->req_len > relay_buffered_max(w->o) || w->n_rs >= W_LANE - 4;
        const struct orbit_policy *pol = local ? &orbit_policy_local_only : &w->policy;
        w->decided_own = false;
        int rc = orbit_pool_acquire(w->pool, w->key, &w->limits, pol, &plan);
        if (rc < 0) {
            client_error(w, c, 503, "Service Unavailable", false);
            return D_STARTED;
        }
        switch (plan.kind) {
        case ORBIT_PLAN_LOCAL_REUSE: {
            struct up_job job = client_job(c);
            if (up_run_lease(&w->ups, &plan.lease, &c->sink, &job) == 0) {
                c->state = C_LOCAL;
                c->up = up_by_id(&w->ups, plan.lease.id);
                STAT_ADD(w->st, local_leases, 1);
                return D_STARTED;
            }
            continue;
        }
        case ORBIT_PLAN_REMOTE_REUSE:
            rs_start(w, c, &plan.lease);
            return D_STARTED;
        case ORBIT_PLAN_CREATE:
        {
            struct upstream *up;
            if (up_create(&w->ups, &plan.permit, c, &up) < 0) {
                client_error(w, c, 503, "Service Unavailable", false);
            } else {
                c->state = C_CREATE;
                c->up = up;
            }
            return D_STARTED;
        }
        case ORBIT_PLAN_WAIT:
            *version = plan.version;
            w->wait_own = w->decided_own && (w->loop.features & WF_QUIET_WAIT);
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

/* Remote requests whose owner has not answered: they wait on the pool key. */
static bool rs_waiting(struct worker *w)
{
    for (struct rstream *rs = w->rs_list; rs; rs = rs->next)
        if (rs->phase != RS_BODY)
            return true;
    return false;
}

static bool need_pool_wait(struct worker *w)
{
    return w->qhead || rs_waiting(w);
}

/*
 * The queue's head waits for one of our own upstreams (fair_decide), and
 * nothing else waits on the key: each of those comes back through
 * up_job_done or up_fail, which sweep the queue. So no FUTEX_WAIT on the key,
 * whose arming costs a membarrier(2) (the pool's fence before a sleep) and
 * whose completion a loop turn, both for a wake our own completion brings
 * anyway. A peer's upstream that comes free meanwhile is seen at that sweep,
 * or at the tick's.
 */
static bool quiet_wait(struct worker *w)
{
    return w->wait_own && w->qhead && !rs_waiting(w);
}

/* Arms one FUTEX_WAIT on the key's change word past since: 0 armed (or
 * armed already, or nothing to arm), 1 the key moved already. */
static int arm_pool_wait(struct worker *w, uint32_t since)
{
    if (!w->loop.futex || w->pool_armed)
        return 0;
    if (quiet_wait(w)) {
        STAT_ADD(w->st, quiet_waits, 1);
        return 0;
    }
    struct io_uring_sqe *sqe = loop_sqe(&w->loop);
    int r = orbit_pool_prep_wait_capacity(w->pool, w->key, since, sqe);
    /* Not armed: the prep left a NOP, whose completion is ignored. */
    io_uring_sqe_set_data64(sqe, r == 0 ? loop_ud(&w->pool_wait_obj, OP_POOL_WAIT) : 0);
    if (r == 0) {
        w->pool_armed = true;
        STAT_ADD(w->st, futex_waits, 1);
        return 0;
    }
    return r == 1 ? 1 : 0;   /* an error: the tick sweeps again */
}

void dispatch(struct worker *w, struct client *c)
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
void sweep(struct worker *w)
{
    if (sweeping)
        return;   /* called again from inside: the outer sweep re-checks */
    sweeping = true;
    for (int round = 0; round < 4; round++) {
        uint32_t v = 0;
        if (!w->loop.futex)
            orbit_pool_watch(w->pool, w->key);   /* before the attempts it guards */
        orbit_pool_version(w->pool, w->key, &v);
        rs_check_leases(w);
        process_queue(w);
        if (!need_pool_wait(w) || arm_pool_wait(w, v) == 0)
            break;
    }
    sweeping = false;
}


/* A creation for c ended: the new upstream is ours (unless another worker leased it in
 * between), or the request failed. */
static void on_created(void *ctx, void *creator, struct upstream *up, bool retryable, bool timed_out)
{
    struct worker *w = ctx;
    struct client *c = creator;
    if (!up) {
        if (timed_out)
            c->fail_status = 504;
        client_job_failed(w, c, retryable);
        return;
    }
    struct orbit_lease lease;
    c->up = NULL;
    struct up_job job = client_job(c);
    if (orbit_pool_reserve(w->pool, up->id, &lease) == 0 && up_run_lease(&w->ups, &lease, &c->sink, &job) == 0) {
        c->state = C_LOCAL;
        c->up = up;
        STAT_ADD(w->st, local_leases, 1);
    } else {
        dispatch(w, c);
    }
}

static void on_capacity(void *ctx)
{
    sweep(ctx);
}

const struct up_hooks worker_up_hooks = { on_created, on_capacity };
