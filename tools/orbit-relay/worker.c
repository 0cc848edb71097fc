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
#include "loop.h"
#include "worker.h"


static volatile sig_atomic_t w_stop_flag;
static void w_on_signal(int sig) { (void)sig; w_stop_flag = 1; }

/* ---- readiness mode (no io_uring futex ops) ----------------------------- */

static void arm_readiness(struct worker *w)
{
    if (w->loop.futex)
        return;   /* a stopping worker too: it still serves what it holds (begin_stop) */
    if (!w->rfd_streams_armed) {
        struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &w->ready_streams_obj, OP_READY_STREAMS);
        io_uring_prep_poll_add(sqe, w->rfd_streams, POLLIN);
        w->rfd_streams_armed = true;
    }
    if (!w->rfd_pool_armed) {
        struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &w->ready_pool_obj, OP_READY_POOL);
        io_uring_prep_poll_add(sqe, w->rfd_pool, POLLIN);
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
        if (!(rs->phase == RS_BODY && rs->c && rs->c->conn.send_armed))
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
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &w->timer_obj, OP_TIMER);
    io_uring_prep_timeout(sqe, &w->tick, 0, 0);
}

/* Connections and upstreams past their timeouts; a paused accept tries again. */
static void check_timeouts(struct worker *w)
{
    loop_tick(&w->loop, relay_now_ns());
    accept_resume(w);
}

static void on_tick(struct worker *w)
{
    w->loop.now = relay_now_ns();
    share_count(&w->share);
    check_timeouts(w);
    up_reconcile(&w->ups);
    if (!w->loop.futex) {
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

/*
 * SIGTERM: a graceful stop. No more accepts (the listener stays open in the
 * supervisor, or in a successor's: its queue waits for their accepts); the
 * upstreams leave the pool as they come free (up_stop); every request on our
 * connections is still served, those begun from now on with Connection:
 * close, and a connection idle between requests is closed after
 * W_DRAIN_IDLE_MS. The worker exits once it holds nothing, or at the drain
 * deadline.
 */
static void begin_stop(struct worker *w)
{
    w->loop.stopping = true;
    w->stop_deadline = relay_now_ns() + (int64_t)w->o->drain_timeout_ms * 1000000;
    loop_cancel(&w->loop, &w->accept_obj, OP_ACCEPT);   /* multishot too */
    close(w->lfd);
    w->lfd = -1;
    up_stop(&w->ups);
}

static bool idle(struct worker *w)
{
    return w->n_clients == 0 && w->n_rs == 0 && w->n_os == 0;
}

/* ---- the loop ----------------------------------------------------------- */

/* ---- the kinds of the loop's objects ------------------------------------- */

#define W_OF(o, field) WORKER_OF(o, field)

static void client_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_client);
    struct client *c = (struct client *)o;
    if (loop_cqe_dead(&w->loop, o, res, flags))
        return;
    client_on_cqe(w, c, op, res, flags);
}

static void client_tick(struct loop_obj *o, int64_t now)
{
    client_check_timeouts(W_OF(o, k_client), (struct client *)o, now);
}

static void client_free(struct loop_obj *o)
{
    struct client *c = (struct client *)o;
    free(c->in);
    free(c->req);
    conn_free(&c->conn);
    free(c);
}

static void rstream_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_rstream);
    if (loop_cqe_dead(&w->loop, o, res, flags) || op != OP_EP_WAIT)
        return;
    ((struct rstream *)o)->wait_armed = false;
    rs_step(w, (struct rstream *)o);
}

static void rstream_free(struct loop_obj *o)
{
    free(((struct rstream *)o)->frame);
    free(o);
}

static void ostream_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_ostream);
    if (loop_cqe_dead(&w->loop, o, res, flags) || op != OP_EP_WAIT)
        return;
    ((struct ostream *)o)->wait_armed = false;
    os_step(w, (struct ostream *)o);
}

static void ostream_free(struct loop_obj *o)
{
    free(((struct ostream *)o)->req);
    free(o);
}

static void accept_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    (void)op;
    on_accept(W_OF(o, k_accept), res, flags);
}

static void timer_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    (void)op; (void)res; (void)flags;
    on_tick(W_OF(o, k_timer));
}

static void offers_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_offers);
    (void)op; (void)res; (void)flags;
    w->offer_armed = false;
    take_offers(w);
    arm_offer_wait(w);
}

static void pool_wait_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_pool_wait);
    (void)op; (void)res; (void)flags;
    w->pool_armed = false;
    sweep(w);
}

static void ready_streams_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_ready_streams);
    (void)op; (void)res; (void)flags;
    w->rfd_streams_armed = false;
    on_readiness(w, w->rfd_streams);
    arm_readiness(w);
}

static void ready_pool_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = W_OF(o, k_ready_pool);
    (void)op; (void)res; (void)flags;
    w->rfd_pool_armed = false;
    on_readiness(w, w->rfd_pool);
    arm_readiness(w);
}

static int worker_kinds(struct worker *w)
{
    w->k_client = (struct loop_kind){ client_cqe, client_tick, client_free };
    w->k_rstream = (struct loop_kind){ rstream_cqe, NULL, rstream_free };
    w->k_ostream = (struct loop_kind){ ostream_cqe, NULL, ostream_free };
    w->k_accept = (struct loop_kind){ accept_cqe, NULL, NULL };
    w->k_timer = (struct loop_kind){ timer_cqe, NULL, NULL };
    w->k_offers = (struct loop_kind){ offers_cqe, NULL, NULL };
    w->k_pool_wait = (struct loop_kind){ pool_wait_cqe, NULL, NULL };
    w->k_ready_streams = (struct loop_kind){ ready_streams_cqe, NULL, NULL };
    w->k_ready_pool = (struct loop_kind){ ready_pool_cqe, NULL, NULL };
    int rc = loop_obj_add(&w->loop, &w->accept_obj, &w->k_accept);
    if (rc == 0) rc = loop_obj_add(&w->loop, &w->timer_obj, &w->k_timer);
    if (rc == 0) rc = loop_obj_add(&w->loop, &w->offers_obj, &w->k_offers);
    if (rc == 0) rc = loop_obj_add(&w->loop, &w->pool_wait_obj, &w->k_pool_wait);
    if (rc == 0) rc = loop_obj_add(&w->loop, &w->ready_streams_obj, &w->k_ready_streams);
    if (rc == 0) rc = loop_obj_add(&w->loop, &w->ready_pool_obj, &w->k_ready_pool);
    return rc;
}

static int worker_open(struct worker *w, struct relay_stats *stats, int slot)
{
    struct orbit_fleet_opts fo = ORBIT_FLEET_OPTS_DEFAULT;
    fo.capacity = w->o->fleet_capacity ? w->o->fleet_capacity : relay_fleet_capacity(w->o->workers);
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
    w->share = (struct share){ .o = w->o, .stats = stats, .st = w->st };
    atomic_store(&w->st->node, orbit_fleet_node(w->fleet));
    atomic_store(&w->st->incarnation, orbit_fleet_incarnation(w->fleet));
    w->key = relay_backend_key(&w->o->upstream);
    w->limits = (struct orbit_limits){ .max_live = (uint32_t)w->o->upstreams, .attempts = 4 };
    w->policy = (struct orbit_policy){ .decide = fair_decide, .ctx = w };
    w->loop.o = w->o;
    w->loop.st = w->st;
    w->conns.l = &w->loop;
    w->loop.futex = orbit_uring_futex_supported();
    rc = loop_open(&w->loop);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay worker: io_uring: %s\n", strerror(-rc));
        return rc;
    }
    if (w->loop.futex && orbit_uring_attach_wakes(&w->loop.ring) < 0)
        w->loop.futex = false;
    if (worker_kinds(w) < 0)
        return -ENOMEM;
    up_set_init(&w->ups, &w->loop, &w->share, w->pool, w->key, &worker_up_hooks, w);
    if (!w->loop.futex) {
        w->rfd_streams = orbit_streams_readiness(w->streams);
        w->rfd_pool = orbit_pool_readiness(w->pool);
        if (w->rfd_streams < 0 || w->rfd_pool < 0) {
            fprintf(stderr, "orbit-relay worker: readiness: %s\n", orbit_strerror(w->rfd_streams));
            return -1;
        }
        orbit_pool_watch(w->pool, w->key);
    }
    w->lfd = w->o->listen_fd;
    loop_publish(&w->loop);
    return 0;
}

static void worker_close(struct worker *w)
{
    io_uring_submit(&w->loop.ring);      /* queued wakes go out */
    orbit_uring_detach_wakes();
    for (struct rstream *rs = w->rs_list; rs; rs = rs->next)
        orbit_endpoint_close(rs->ep);
    for (struct ostream *os = w->os_list; os; os = os->next)
        orbit_endpoint_close(os->ep);
    up_close_all(&w->ups);
    loop_close(&w->loop);
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
    share_count(&w.share);
    w.loop.now = relay_now_ns();
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
    while (!(w.loop.stopping && (idle(&w) || relay_now_ns() > w.stop_deadline))) {
        int rc = loop_enter(&w.loop);
        w.loop.now = relay_now_ns();   /* one clock read a batch: the timeouts are coarser than one */
        STAT_ADD(w.st, submits, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            fprintf(stderr, "orbit-relay worker: io_uring_enter: %s\n", strerror(-rc));
            break;
        }
        if (w_stop_flag && !w.loop.stopping)
            begin_stop(&w);
        loop_reap(&w.loop);
        client_ready_run(&w);   /* before the grave: a dead client there is skipped, not freed */
        loop_settle(&w.loop);
    }
    worker_close(&w);
    return 0;
}

