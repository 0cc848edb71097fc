/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: where a request runs (acquire, the wait queue, capacity waits, retries). */
#include <errno.h>
#include <stddef.h>
#include <orbit/uring.h>
#include "dispatch.h"

static struct disp *disp_of_wait(const struct loop_obj *o)
{
    return (struct disp *)(void *)((char *)o - offsetof(struct disp, wait));
}

/* local_first, except that a worker at its share does not dial while others starve. */
static struct orbit_decision fair_decide(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                         uint32_t live, uint32_t creating, const struct orbit_limits *limits)
{
    struct disp *d = ctx;
    int ours = d->ups->n_ups + d->ups->n_creating;
    struct orbit_decision dec = orbit_policy_local_first.decide(orbit_policy_local_first.ctx, key, c, n, live,
                                                                creating, limits);
    if (dec.kind == ORBIT_DECIDE_CREATE && ours >= share_fair(d->share) && share_others_starving(d->share))
        dec = (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
    /* Below our share with budget left: dial our own rather than lean on another worker's
     * (a remote request needs both processes scheduled: it is the slow tail). */
    if (dec.kind == ORBIT_DECIDE_REUSE && orbit_id_node(dec.reuse) != orbit_fleet_node(d->fleet) &&
        live + creating < limits->max_live && ours < share_fair(d->share))
        dec = (struct orbit_decision){ .kind = ORBIT_DECIDE_CREATE };
    /* Many of our own, every one busy, and a short queue: wait for our own. One comes
     * back within a fraction of a request's time, sooner than a remote round trip; a
     * longer queue (a skewed load) still borrows. Below our share, our queue is what
     * makes a peer over its share give one back (share_others_starving). */
    else if (dec.kind == ORBIT_DECIDE_REUSE && orbit_id_node(dec.reuse) != orbit_fleet_node(d->fleet) &&
             d->ups->n_ups >= DISP_OWN_WAIT_MIN &&
             STAT_GET(d->l->st, queued) * 4 < (uint64_t)d->ups->n_ups) {
        dec = (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
        d->decided_own = true;
    }
    return dec;
}

/* ---- the wait queue -------------------------------------------------------- */

static void queue_remove(struct disp *d, struct disp_req *r)
{
    if (r->where != DISP_QUEUED)
        return;
    if (r->qprev) r->qprev->qnext = r->qnext; else d->qhead = r->qnext;
    if (r->qnext) r->qnext->qprev = r->qprev; else d->qtail = r->qprev;
    r->qnext = r->qprev = NULL;
    r->where = DISP_NONE;
    STAT_SUB(d->l->st, queued, 1);
}

/* At the tail, or back at the head (a request the pool sent back keeps its turn). */
static void queue_push(struct disp *d, struct disp_req *r, bool head)
{
    if (head) {
        r->qprev = NULL;
        r->qnext = d->qhead;
        if (d->qhead) d->qhead->qprev = r; else d->qtail = r;
        d->qhead = r;
    } else {
        r->qnext = NULL;
        r->qprev = d->qtail;
        if (d->qtail) d->qtail->qnext = r; else d->qhead = r;
        d->qtail = r;
    }
    r->where = DISP_QUEUED;
    STAT_ADD(d->l->st, queued, 1);
}

/* ---- where a request goes ------------------------------------------------- */

enum { D_STARTED, D_WAIT };

static void req_fail(struct disp_req *r, int status)
{
    r->where = DISP_NONE;
    r->up = NULL;
    r->rs = NULL;
    r->ops->failed(r, status);
}

static bool run_local(struct disp *d, struct disp_req *r, const struct orbit_lease *lease)
{
    if (up_run_lease(d->ups, lease, &r->sink, &r->job) < 0)
        return false;
    r->where = DISP_LOCAL;
    r->up = up_by_id(d->ups, lease->id);
    STAT_ADD(d->l->st, local_leases, 1);
    return true;
}

/* Our most recently used idle upstream: what local_first would choose, without
 * the snapshot of every candidate of the key an acquire takes. */
static bool take_idle(struct disp *d, struct disp_req *r)
{
    struct upstream *up;
    while ((up = up_idle_pop(d->ups))) {
        struct orbit_lease lease;
        if (orbit_pool_reserve(d->pool, up->id, &lease) < 0)
            continue;   /* a requester of another worker reserved it first: it comes back when done */
        if (run_local(d, r, &lease))
            return true;
    }
    return false;
}

/* A remote lease: the request goes through a stream to the upstream's owner. */
static void run_remote(struct disp *d, struct disp_req *r, const struct orbit_lease *lease)
{
    r->where = DISP_REMOTE;   /* before the stream's first step, which may end it */
    if (rs_start(d->rss, lease, &r->job, &r->sink, &r->rs) < 0)
        req_fail(r, 503);
}

static void run_create(struct disp *d, struct disp_req *r, struct orbit_permit *permit)
{
    struct upstream *up;
    if (up_create(d->ups, permit, r, &up) < 0) {
        req_fail(r, 503);
        return;
    }
    r->where = DISP_CREATE;
    r->up = up;
}

/* One acquire for r: starts it (local, remote, create, or an error) or says WAIT. */
static int try_dispatch(struct disp *d, struct disp_req *r, uint32_t *version)
{
    if (take_idle(d, r))
        return D_STARTED;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct orbit_plan plan;
        /* No stream slot left for a remote lease, or a body that streams (or is longer
         * than a remote owner takes): only our own upstreams. */
        bool local = r->local_only || d->rss->n >= PEER_LANE - 4;
        const struct orbit_policy *pol = local ? &orbit_policy_local_only : &d->policy;
        d->decided_own = false;
        if (orbit_pool_acquire(d->pool, d->key, &d->limits, pol, &plan) < 0)
            break;
        switch (plan.kind) {
        case ORBIT_PLAN_LOCAL_REUSE:
            if (run_local(d, r, &plan.lease))
                return D_STARTED;
            continue;
        case ORBIT_PLAN_REMOTE_REUSE:
            run_remote(d, r, &plan.lease);
            return D_STARTED;
        case ORBIT_PLAN_CREATE:
            run_create(d, r, &plan.permit);
            return D_STARTED;
        case ORBIT_PLAN_WAIT:
            *version = plan.version;
            d->wait_own = d->decided_own && (d->l->features & WF_QUIET_WAIT);
            return D_WAIT;
        case ORBIT_PLAN_REJECT:
        default:
            attempt = 4;
            break;
        }
    }
    req_fail(r, 503);
    return D_STARTED;
}

static bool need_pool_wait(struct disp *d)
{
    return d->qhead || rs_waiting(d->rss);
}

/*
 * The queue's head waits for one of our own upstreams (fair_decide), and
 * nothing else waits on the key: each of those comes back through the
 * upstreams' capacity hook, which sweeps the queue. So no FUTEX_WAIT on the
 * key, whose arming costs a membarrier(2) (the pool's fence before a sleep)
 * and whose completion a loop turn, both for a wake our own completion
 * brings anyway. A peer's upstream that comes free meanwhile is seen at that
 * sweep, or at the tick's.
 */
static bool quiet_wait(struct disp *d)
{
    return d->wait_own && d->qhead && !rs_waiting(d->rss);
}

/* Arms one FUTEX_WAIT on the key's change word past since: 0 armed (or
 * armed already, or nothing to arm), 1 the key moved already. */
static int arm_pool_wait(struct disp *d, uint32_t since)
{
    if (!d->l->futex || d->pool_armed)
        return 0;
    if (quiet_wait(d)) {
        STAT_ADD(d->l->st, quiet_waits, 1);
        return 0;
    }
    struct io_uring_sqe *sqe = loop_sqe(d->l);
    int r = orbit_pool_prep_wait_capacity(d->pool, d->key, since, sqe);
    /* Not armed: the prep left a NOP, whose completion is ignored. */
    io_uring_sqe_set_data64(sqe, r == 0 ? loop_ud(&d->wait, 1) : 0);
    if (r == 0) {
        d->pool_armed = true;
        STAT_ADD(d->l->st, futex_waits, 1);
        return 0;
    }
    return r == 1 ? 1 : 0;   /* an error: the tick sweeps again */
}

static void disp_go(struct disp *d, struct disp_req *r)
{
    uint32_t version;
    if (try_dispatch(d, r, &version) != D_WAIT)
        return;
    STAT_ADD(d->l->st, pool_waits, 1);
    queue_push(d, r, false);
    if (arm_pool_wait(d, version) == 1)
        disp_sweep(d);
}

/* Serves the wait queue in order until the pool says WAIT again. */
static void process_queue(struct disp *d)
{
    while (d->qhead) {
        struct disp_req *r = d->qhead;
        uint32_t version;
        queue_remove(d, r);
        if (try_dispatch(d, r, &version) == D_WAIT) {
            queue_push(d, r, true);
            return;
        }
    }
}

/*
 * Everything that waits on the pool key: queued requests and remote requests
 * whose owner has not answered. The version is read before the checks, so a
 * change during them makes the armed wait complete at once.
 */
void disp_sweep(struct disp *d)
{
    if (d->sweeping)
        return;   /* called again from inside: the outer sweep re-checks */
    d->sweeping = true;
    for (int round = 0; round < 4; round++) {
        uint32_t v = 0;
        if (!d->l->futex)
            orbit_pool_watch(d->pool, d->key);   /* before the attempts it guards */
        orbit_pool_version(d->pool, d->key, &v);
        rs_check_leases(d->rss);
        process_queue(d);
        if (!need_pool_wait(d) || arm_pool_wait(d, v) == 0)
            break;
    }
    d->sweeping = false;
}

/* ---- the request's sink: what its source says, passed on or tried again ---- */

static struct disp_req *req_of(struct sink *k)
{
    return (struct disp_req *)(void *)((char *)k - offsetof(struct disp_req, sink));
}

static void on_piece(struct sink *k, const char *p, size_t n, bool interim)
{
    struct disp_req *r = req_of(k);
    r->ops->piece(r, p, n, interim);
}

static void on_done(struct sink *k)
{
    struct disp_req *r = req_of(k);
    r->where = DISP_NONE;
    r->up = NULL;
    r->rs = NULL;
    r->ops->done(r);
}

/* The request failed before (SINK_RETRY) or after bytes reached the owner. */
static void on_failed(struct sink *k, enum sink_fail how)
{
    struct disp_req *r = req_of(k);
    struct disp *d = r->d;
    r->where = DISP_NONE;
    r->up = NULL;
    r->rs = NULL;
    if (how == SINK_RETRY && r->retries < DISP_RETRIES) {
        r->retries++;
        STAT_ADD(d->l->st, retries, 1);
        r->job.keepalive = r->job.keepalive && !k->close;
        disp_go(d, r);
        return;
    }
    req_fail(r, how == SINK_CUT ? 0 : how == SINK_TIMEOUT ? 504 : how == SINK_REFUSED ? 503 : 502);
}

static void on_more(struct sink *k)
{
    struct disp_req *r = req_of(k);
    r->ops->more(r);
}

static void on_broken(struct sink *k, int err)
{
    struct disp_req *r = req_of(k);
    r->ops->broken(r, err);
}

static const struct sink_ops disp_sink_ops = {
    .piece = on_piece, .done = on_done, .failed = on_failed, .more = on_more, .broken = on_broken,
};

/* ---- the upstreams' hooks ---------------------------------------------------- */

/* A creation for r ended: the new upstream is ours (unless another worker leased it in
 * between), or the request failed. */
static void on_created(void *ctx, void *creator, struct upstream *up, bool retryable, bool timed_out)
{
    struct disp *d = ctx;
    struct disp_req *r = creator;
    r->where = DISP_NONE;
    r->up = NULL;
    if (!up) {
        on_failed(&r->sink, retryable ? SINK_RETRY : timed_out ? SINK_TIMEOUT : SINK_BAD_GATEWAY);
        return;
    }
    struct orbit_lease lease;
    if (orbit_pool_reserve(d->pool, up->id, &lease) == 0 && run_local(d, r, &lease))
        return;
    disp_go(d, r);
}

static void on_capacity(void *ctx)
{
    disp_sweep(ctx);
}

const struct up_hooks disp_up_hooks = { on_created, on_capacity };

/* ---- the owner's calls ------------------------------------------------------- */

void disp_start(struct disp *d, struct disp_req *r)
{
    r->d = d;
    r->sink.ops = &disp_sink_ops;
    r->sink.close = false;
    r->retries = 0;
    r->where = DISP_NONE;
    r->up = NULL;
    r->rs = NULL;
    if (d->qhead) {            /* others wait already: queue behind them */
        queue_push(d, r, false);
        disp_sweep(d);
    } else {
        disp_go(d, r);
    }
}

void disp_drained(struct disp *d, struct disp_req *r)
{
    if (r->where == DISP_LOCAL)
        up_drained(d->ups, r->up);
    else if (r->where == DISP_REMOTE)
        rs_drained(d->rss, r->rs);
}

void disp_body(struct disp *d, struct disp_req *r, const char *p, size_t n, bool more)
{
    up_stream(d->ups, r->up, p, n, more);
}

void disp_cut(struct disp *d, struct disp_req *r)
{
    struct upstream *up = r->up;
    r->where = DISP_NONE;
    r->up = NULL;
    up_abort(d->ups, up);
}

void disp_cancel(struct disp *d, struct disp_req *r, bool abort)
{
    switch (r->where) {
    case DISP_QUEUED:
        queue_remove(d, r);
        break;
    case DISP_CREATE:
        if (r->up)
            up_forget_creator(r->up);
        break;
    case DISP_LOCAL:
        if (r->up && abort)
            up_abort(d->ups, r->up);   /* its request can never be completed */
        else if (r->up)
            up_release(d->ups, r->up);
        break;
    case DISP_REMOTE:
        if (r->rs)
            rs_abandon(d->rss, r->rs);
        break;
    default:
        break;
    }
    r->where = DISP_NONE;
    r->up = NULL;
    r->rs = NULL;
}

/* ---- the loop's kind: the capacity wait -------------------------------------- */

static void wait_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct disp *d = disp_of_wait(o);
    (void)op; (void)res; (void)flags;
    d->pool_armed = false;
    disp_sweep(d);
}

int disp_init(struct disp *d, struct loop *l, struct share *share, struct up_set *ups, struct rs_set *rss,
              struct orbit_pool *pool, struct orbit_fleet *fleet, orbit_key key)
{
    *d = (struct disp){ .l = l, .wait_kind = { wait_on_cqe, NULL, NULL }, .share = share, .ups = ups, .rss = rss,
                        .pool = pool, .fleet = fleet, .key = key };
    d->limits = (struct orbit_limits){ .max_live = (uint32_t)l->o->upstreams, .attempts = 4 };
    d->policy = (struct orbit_policy){ .decide = fair_decide, .ctx = d };
    return loop_obj_add(l, &d->wait, &d->wait_kind);
}
