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
 *
 * The worker's floors, each calling down only: the ring loop (loop.h) at the
 * bottom, the HTTP layer (httpmsg.h) beside it; the clients' sockets
 * (conn.h), the fair share (share.h), the upstreams (upstream.h, splice.h),
 * the streams between workers (peer.h, rstream.h, ostream.h), the dispatcher
 * (dispatch.h) and the clients (client.h) above; this file on top: it joins
 * the fleet, builds the floors, and runs the loop, the tick and the stop.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <orbit/uring.h>
#include "client.h"
#include "dispatch.h"
#include "loop.h"
#include "ostream.h"
#include "rstream.h"
#include "share.h"
#include "upstream.h"
#include "worker.h"

#define W_TICK_MS 200   /* housekeeping: reconcile, lease checks, timeouts */

struct worker {
    struct loop loop;               /* the ring, the objects, the clock, stopping */
    const struct relay_opts *o;
    struct relay_worker_stats *st;
    struct orbit_fleet *fleet;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    orbit_key key;
    struct share share;             /* our share of the budget */
    struct up_set ups;              /* our upstreams */
    struct rs_set rss;              /* requests we relay to a peer's upstream */
    struct os_set oss;              /* requests a peer relays to ours */
    struct disp disp;               /* where each request runs */
    struct client_set clients;
    int64_t stop_deadline;
    /* the tick, and readiness mode (no io_uring futex ops) */
    struct loop_kind timer_kind, ready_streams_kind, ready_pool_kind;
    struct loop_obj timer, ready_streams, ready_pool;
    struct __kernel_timespec tick;
    int rfd_streams, rfd_pool;
    bool rfd_streams_armed, rfd_pool_armed;
};

static volatile sig_atomic_t w_stop_flag;
static void w_on_signal(int sig) { (void)sig; w_stop_flag = 1; }

#define WORKER_OF(obj, field) ((struct worker *)(void *)((char *)(obj) - offsetof(struct worker, field)))

/* ---- readiness mode (no io_uring futex ops) ----------------------------- */

static void arm_readiness(struct worker *w)
{
    if (w->loop.futex)
        return;   /* a stopping worker too: it still serves what it holds (begin_stop) */
    if (!w->rfd_streams_armed) {
        struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &w->ready_streams, 1);
        io_uring_prep_poll_add(sqe, w->rfd_streams, POLLIN);
        w->rfd_streams_armed = true;
    }
    if (!w->rfd_pool_armed) {
        struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &w->ready_pool, 1);
        io_uring_prep_poll_add(sqe, w->rfd_pool, POLLIN);
        w->rfd_pool_armed = true;
    }
}

/* The doorbell moved: retry every stream that waits, take offers, sweep the pool. */
static void on_readiness(struct worker *w, int fd)
{
    orbit_readiness_drain(fd);
    os_take_offers(&w->oss);
    rs_poke_all(&w->rss);
    os_poke_all(&w->oss);
    disp_sweep(&w->disp);
}

static void ready_streams_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = WORKER_OF(o, ready_streams);
    (void)op; (void)res; (void)flags;
    w->rfd_streams_armed = false;
    on_readiness(w, w->rfd_streams);
    arm_readiness(w);
}

static void ready_pool_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = WORKER_OF(o, ready_pool);
    (void)op; (void)res; (void)flags;
    w->rfd_pool_armed = false;
    on_readiness(w, w->rfd_pool);
    arm_readiness(w);
}

/* ---- housekeeping ------------------------------------------------------- */

static void arm_tick(struct worker *w)
{
    w->tick.tv_sec = W_TICK_MS / 1000;
    w->tick.tv_nsec = (W_TICK_MS % 1000) * 1000000L;
    struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &w->timer, 1);
    io_uring_prep_timeout(sqe, &w->tick, 0, 0);
}

/* Counts, timeouts (each object's own), the owner's truth into the pool, and a
 * backstop for every wait that may have given up for a moment. */
static void timer_on_cqe(struct loop_obj *o, unsigned op, int res, uint32_t flags)
{
    struct worker *w = WORKER_OF(o, timer);
    (void)op; (void)res; (void)flags;
    w->loop.now = relay_now_ns();
    share_count(&w->share);
    loop_tick(&w->loop, relay_now_ns());
    client_accept_resume(&w->clients);
    up_reconcile(&w->ups);
    if (!w->loop.futex) {
        on_readiness(w, w->rfd_streams);   /* a backstop; it sweeps too */
    } else {
        os_tick(&w->oss);
        disp_sweep(&w->disp);
    }
    arm_tick(w);
}

/*
 * SIGTERM: a graceful stop. No more accepts (the listener stays open in the
 * supervisor, or in a successor's: its queue waits for their accepts); the
 * upstreams leave the pool as they come free (up_stop); every request on our
 * connections is still served, those begun from now on with Connection:
 * close, and a connection idle between requests is closed after
 * CLIENT_DRAIN_IDLE_MS. The worker exits once it holds nothing, or at the drain
 * deadline.
 */
static void begin_stop(struct worker *w)
{
    w->loop.stopping = true;
    w->stop_deadline = relay_now_ns() + (int64_t)w->o->drain_timeout_ms * 1000000;
    client_accept_stop(&w->clients);
    up_stop(&w->ups);
}

static bool idle(struct worker *w)
{
    return w->clients.n == 0 && w->rss.n == 0 && w->oss.n == 0;
}

/* ---- the worker's life ----------------------------------------------------- */

/* The floors, bottom up, on the loop. */
static int worker_floors(struct worker *w)
{
    w->timer_kind = (struct loop_kind){ timer_on_cqe, NULL, NULL };
    w->ready_streams_kind = (struct loop_kind){ ready_streams_on_cqe, NULL, NULL };
    w->ready_pool_kind = (struct loop_kind){ ready_pool_on_cqe, NULL, NULL };
    w->share = (struct share){ .o = w->o, .stats = w->share.stats, .st = w->st };
    up_set_init(&w->ups, &w->loop, &w->share, w->pool, w->key, &disp_up_hooks, &w->disp);
    rs_set_init(&w->rss, &w->loop, w->streams, w->pool);
    int rc = os_set_init(&w->oss, &w->loop, w->streams, w->fleet, &w->ups);
    if (rc == 0)
        rc = disp_init(&w->disp, &w->loop, &w->share, &w->ups, &w->rss, w->pool, w->fleet, w->key);
    if (rc == 0)
        rc = client_set_init(&w->clients, &w->loop, &w->disp, w->o->listen_fd);
    if (rc == 0)
        rc = loop_obj_add(&w->loop, &w->timer, &w->timer_kind);
    if (rc == 0)
        rc = loop_obj_add(&w->loop, &w->ready_streams, &w->ready_streams_kind);
    if (rc == 0)
        rc = loop_obj_add(&w->loop, &w->ready_pool, &w->ready_pool_kind);
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
    w->share.stats = stats;
    atomic_store(&w->st->node, orbit_fleet_node(w->fleet));
    atomic_store(&w->st->incarnation, orbit_fleet_incarnation(w->fleet));
    w->key = relay_backend_key(&w->o->upstream);
    w->loop.o = w->o;
    w->loop.st = w->st;
    w->loop.futex = orbit_uring_futex_supported();
    rc = loop_open(&w->loop);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay worker: io_uring: %s\n", strerror(-rc));
        return rc;
    }
    if (w->loop.futex && orbit_uring_attach_wakes(&w->loop.ring) < 0)
        w->loop.futex = false;
    if (worker_floors(w) < 0) {
        fprintf(stderr, "orbit-relay worker: %s\n", strerror(ENOMEM));
        return -ENOMEM;
    }
    if (!w->loop.futex) {
        w->rfd_streams = orbit_streams_readiness(w->streams);
        w->rfd_pool = orbit_pool_readiness(w->pool);
        if (w->rfd_streams < 0 || w->rfd_pool < 0) {
            fprintf(stderr, "orbit-relay worker: readiness: %s\n", orbit_strerror(w->rfd_streams));
            return -1;
        }
        orbit_pool_watch(w->pool, w->key);
    }
    loop_publish(&w->loop);
    return 0;
}

static void worker_close(struct worker *w)
{
    io_uring_submit(&w->loop.ring);      /* queued wakes go out */
    orbit_uring_detach_wakes();
    rs_close_all(&w->rss);
    os_close_all(&w->oss);
    up_close_all(&w->ups);
    loop_close(&w->loop);
    orbit_streams_close(w->streams);
    orbit_pool_close(w->pool);
    orbit_fleet_leave(w->fleet);
}

int worker_main(const struct relay_opts *o, struct relay_stats *stats, int slot, int ready_fd)
{
    struct worker w = { .o = o, .rfd_streams = -1, .rfd_pool = -1 };
    struct sigaction sa = { .sa_handler = w_on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (worker_open(&w, stats, slot) < 0)
        return 1;
    share_count(&w.share);
    w.loop.now = relay_now_ns();
    client_accept_arm(&w.clients);
    os_arm_offer_wait(&w.oss);
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
        client_ready_run(&w.clients);   /* before the grave: a dead client there is skipped, not freed */
        loop_settle(&w.loop);
    }
    worker_close(&w);
    return 0;
}
