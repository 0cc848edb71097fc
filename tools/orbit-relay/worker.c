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


static volatile sig_atomic_t w_stop_flag;
static void w_on_signal(int sig) { (void)sig; w_stop_flag = 1; }

/* ---- objects and user_data ---------------------------------------------- */

uint64_t ud_of(const struct obj *o, enum w_op op)
{
    return (uint64_t)op << 56 | (uint64_t)(o->gen & 0xffffffu) << 32 | o->idx;
}

int obj_add(struct worker *w, struct obj *o, enum w_kind kind)
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

void obj_kill(struct worker *w, struct obj *o)
{
    o->dead = true;
    obj_settle(w, o);
}

/* An object and the buffers it owns. */
static void obj_free(struct obj *o)
{
    if (!o)
        return;
    if (o->kind == K_CLIENT) {
        free(((struct client *)o)->in);
        free(((struct client *)o)->req);
        free(((struct client *)o)->stash);
    } else if (o->kind == K_RSTREAM) {
        free(((struct rstream *)o)->frame);
    } else if (o->kind == K_OSTREAM) {
        free(((struct ostream *)o)->req);
    }
    free(o);
}

static void grave_empty(struct worker *w)
{
    for (uint32_t i = 0; i < w->n_grave; i++)
        obj_free(w->grave[i]);
    w->n_grave = 0;
}

struct io_uring_sqe *obj_sqe(struct worker *w, struct obj *o, enum w_op op)
{
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_sqe_set_data64(sqe, ud_of(o, op));
    o->pending++;
    return sqe;
}

void cancel_op(struct worker *w, struct obj *o, enum w_op op)
{
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_cancel64(sqe, ud_of(o, op), 0);
    io_uring_sqe_set_data64(sqe, OP_IGNORE);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

/* ---- readiness mode (no io_uring futex ops) ----------------------------- */

static void arm_readiness(struct worker *w)
{
    if (w->futex)
        return;   /* a stopping worker too: it still serves what it holds (begin_stop) */
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
/* Connections and upstreams past their timeouts; a paused accept tries again. */
static void check_timeouts(struct worker *w)
{
    int64_t now = relay_now_ns();
    for (uint32_t i = 0; i < w->n_objs; i++) {
        struct obj *o = w->objs[i];
        if (!o || o->dead)
            continue;
        if (o->kind == K_CLIENT)
            client_check_timeouts(w, (struct client *)o, now);
        else if (o->kind == K_UPSTREAM)
            up_check_timeouts(w, (struct upstream *)o, now);
    }
    accept_resume(w);
}

static void on_tick(struct worker *w)
{
    w->now = relay_now_ns();
    count_running(w);
    check_timeouts(w);
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
    w->stopping = true;
    w->stop_deadline = relay_now_ns() + (int64_t)w->o->drain_timeout_ms * 1000000;
    struct io_uring_sqe *sqe = relay_sqe(&w->ring);
    io_uring_prep_cancel64(sqe, (uint64_t)OP_ACCEPT << 56, 0);   /* multishot too */
    io_uring_sqe_set_data64(sqe, OP_IGNORE);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    close(w->lfd);
    w->lfd = -1;
    up_stop(w);
}

static bool idle(struct worker *w)
{
    return w->n_clients == 0 && w->n_rs == 0 && w->n_os == 0;
}

/* ---- the loop ----------------------------------------------------------- */

static void on_cqe(struct worker *w, uint64_t ud, int res, uint32_t flags)
{
    enum w_op op = (enum w_op)(ud >> 56);
    switch (op) {
    case OP_IGNORE: return;
    case OP_ACCEPT: on_accept(w, res, flags); return;
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
    if (!o) {
        ring_buf_drop(w, flags, res);
        return;
    }
    if (!(flags & IORING_CQE_F_MORE))   /* a multishot op, or a zero-copy send, ends last */
        o->pending--;
    bool linked = false;
    if ((op == OP_U_SEND || op == OP_U_RECV) && o->kind == K_UPSTREAM) {
        linked = ((struct upstream *)o)->linked;
        up_link_cqe(w, (struct upstream *)o, op);   /* before the dead check: pending stays exact */
    }
    if (o->dead) {
        ring_buf_drop(w, flags, res);
        obj_settle(w, o);
        return;
    }
    switch (op) {
    case OP_C_RECV: client_on_recv(w, (struct client *)o, res); break;
    case OP_C_MRECV: client_on_recv_cqe(w, (struct client *)o, res, flags); break;
    case OP_C_SEND: client_on_send_cqe(w, (struct client *)o, res, flags); break;
    case OP_U_CONNECT: up_on_connect(w, (struct upstream *)o, res); break;
    case OP_U_SEND: up_on_send(w, (struct upstream *)o, res, linked); break;
    case OP_U_RECV: up_on_recv(w, (struct upstream *)o, res); break;
    case OP_U_POLL: up_on_poll(w, (struct upstream *)o, res); break;
    case OP_C_POLL: client_on_poll(w, (struct client *)o, res); break;
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
    w->stats = stats;
    atomic_store(&w->st->node, orbit_fleet_node(w->fleet));
    atomic_store(&w->st->incarnation, orbit_fleet_incarnation(w->fleet));
    w->key = relay_backend_key(&w->o->upstream);
    w->limits = (struct orbit_limits){ .max_live = (uint32_t)w->o->upstreams, .attempts = 4 };
    w->policy = (struct orbit_policy){ .decide = fair_decide, .ctx = w };
    w->futex = orbit_uring_futex_supported();
    rc = ring_open(w);
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
    ring_publish(w);
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
    up_close_all(w);
    ring_close(w);
    io_uring_queue_exit(&w->ring);
    for (uint32_t i = 0; i < w->n_objs; i++)
        obj_free(w->objs[i]);
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
    count_running(&w);
    w.now = relay_now_ns();
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
        int rc = ring_submit_and_wait(&w);
        w.now = relay_now_ns();   /* one clock read a batch: the timeouts are coarser than one */
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
            on_cqe(&w, cqe->user_data, cqe->res, cqe->flags);
        }
        io_uring_cq_advance(&w.ring, seen);
        ring_waited(&w, seen);
        client_ready_run(&w);   /* before the grave: a dead client there is skipped, not freed */
        grave_empty(&w);
    }
    worker_close(&w);
    return 0;
}

