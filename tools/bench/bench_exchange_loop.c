/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench exchange, event-loop model: each of the two processes is one thread and one
 * fleet node that keeps all `conc` round trips in flight at once, as an io_uring-native
 * server does. Every pass makes whatever progress the try_* calls (or non-blocking socket
 * calls) allow on every connection; a pass with none is retried for up to 16 times the
 * spin setting (orbit_spin_ns), then the process blocks in poll(2): on the orbit handle's
 * readiness eventfd (drained before the last retry), or on the sockets it waits for. The
 * same loop, spin and body chunking serve all three transports; only step() differs.
 *
 * Exchange: a fresh exchange per round trip, as in the thread model (the client fills and
 * publishes its first chunk before it offers the exchange to the server's node).
 * Stream and socketpair: `conc` persistent connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/exchange.h>
#include <orbit/uring.h>
#include "bench_clock.h"
#include "bench.h"
#include "bench_exchange.h"

enum phase { PH_FREE, PH_SEND, PH_FIN, PH_RECV };

struct conn {
    enum phase phase;
    size_t off;                      /* bytes of the body sent or received in this phase */
    uint64_t done;                   /* round trips finished on this connection */
    bool started, offered;           /* exchange: START sent; (client) ticket offered */
    struct orbit_exchange *x;
    struct orbit_ticket ticket;
    struct orbit_endpoint *ep;
    int fd;
};

struct side {
    enum transport t;
    struct cfg c;
    bool server, touch;
    uint64_t iters;                  /* round trips per connection */
    uint64_t target, started, round_trips;   /* conc * iters; begun and finished so far */
    struct orbit_fleet *f;
    struct orbit_exchanges *ex;
    struct orbit_streams *s;
    int ready_fd;                    /* orbit readiness eventfd; -1 for sockets */
    uint16_t peer;                   /* exchange client: the server's node */
    struct conn conn[MAXC];
    unsigned char *buf, *rbuf;       /* what senders copy from, what copying receivers fill */
    uint64_t sink, blocks, timeouts;
};

#define LOOP_SERVER_NODE MAXC

/* An idle loop retries its passes for this many times the spin setting before it blocks:
 * the ceiling the library's own adaptive spin may learn (16 x 2 us by default), the same
 * for every transport. */
#define LOOP_SPIN_FACTOR 16
#define LOOP_LOST_WAKEUP_MS 1000

/* ---- byte streams: socketpair and orbit stream ------------------------------------------ */

static ssize_t bytes_tx(struct side *s, struct conn *k, const void *p, size_t n)
{
    if (s->t == T_STREAM)
        return orbit_endpoint_try_write(k->ep, p, n);
    ssize_t w = write(k->fd, p, n);
    return w >= 0 ? w : errno == EAGAIN ? -ORBIT_EAGAIN : -errno;
}

static ssize_t bytes_rx(struct side *s, struct conn *k, void *p, size_t n)
{
    if (s->t == T_STREAM)
        return orbit_endpoint_try_read(k->ep, p, n);
    ssize_t r = read(k->fd, p, n);
    return r >= 0 ? r : errno == EAGAIN ? -ORBIT_EAGAIN : -errno;
}

static void round_trip_done(struct side *s, struct conn *k)
{
    k->off = 0;
    k->done++;
    s->round_trips++;
}

/* The phase after a finished body: a round trip ends with the client's receive and the
 * server's send. */
static void body_done(struct side *s, struct conn *k)
{
    bool ends_round_trip = s->server ? k->phase == PH_SEND : k->phase == PH_RECV;
    k->phase = k->phase == PH_RECV ? PH_SEND : PH_RECV;
    if (ends_round_trip)
        round_trip_done(s, k);
    else
        k->off = 0;
}

/* One call's worth of progress on a byte stream: 1, 0 (would block) or a negative code. */
static int bytes_step(struct side *s, struct conn *k)
{
    size_t want = s->c.chunk - k->off % s->c.chunk;
    if (want > s->c.body - k->off)
        want = s->c.body - k->off;
    bool sending = k->phase == PH_SEND;
    ssize_t n = sending ? bytes_tx(s, k, s->buf + k->off, want) : bytes_rx(s, k, s->rbuf + k->off, want);
    if (n == -ORBIT_EAGAIN)
        return 0;
    if (n <= 0)
        return n == 0 ? -EPIPE : (int)n;
    if (!sending && s->touch)
        s->sink += bx_touch_sum(s->rbuf + k->off, (size_t)n);
    if ((k->off += (size_t)n) == s->c.body)
        body_done(s, k);
    return 1;
}

/* ---- exchanges ------------------------------------------------------------------------ */

/* Client: create the next exchange (if this side has round trips left to start).
 * Server: open the next exchange offered to this node. */
static int exch_begin(struct side *s, struct conn *k)
{
    int rc;
    if (s->server) {
        struct orbit_ticket t;
        if ((rc = orbit_exchanges_take_offer(s->ex, &t)) < 0)
            return rc == -ORBIT_EAGAIN ? 0 : rc;
        if ((rc = orbit_exchange_open(s->ex, &t, &k->x)) < 0)
            return rc;
        k->phase = PH_RECV;
    } else {
        if (s->started == s->target)
            return 0;
        if ((rc = orbit_exchange_create(s->ex, &k->x, &k->ticket)) < 0)
            return rc;
        k->phase = PH_SEND;
    }
    s->started++;
    k->started = k->offered = false;
    k->off = 0;
    return 1;
}

static void exch_done(struct side *s, struct conn *k)
{
    orbit_exchange_close(k->x);
    k->x = NULL;
    k->phase = PH_FREE;
    round_trip_done(s, k);
}

/* START, then one chunk per call; a client offers the exchange once its first chunk is out. */
static int exch_send(struct side *s, struct conn *k)
{
    int rc;
    if (!k->started) {
        if ((rc = orbit_exchange_try_start(k->x, NULL, 0)) < 0)
            return rc == -ORBIT_EAGAIN ? 0 : rc;
        k->started = true;
    }
    rc = orbit_exchange_try_send_data(k->x, s->buf + k->off, s->c.chunk);
    if (rc == -ORBIT_EAGAIN || rc == -ORBIT_EPAYLOADFULL)
        return 0;
    if (rc < 0)
        return rc;
    k->off += s->c.chunk;
    if (!s->server && !k->offered) {
        if ((rc = orbit_exchanges_offer(s->ex, &k->ticket, s->peer)) < 0)
            return rc;
        k->offered = true;
    }
    if (k->off == s->c.body)
        k->phase = PH_FIN;
    return 1;
}

static int exch_finish(struct side *s, struct conn *k)
{
    int rc = orbit_exchange_try_finish(k->x);
    if (rc < 0)
        return rc == -ORBIT_EAGAIN ? 0 : rc;
    if (s->server) {
        exch_done(s, k);                 /* the response is out: this round trip is done */
    } else {
        k->off = 0;
        k->phase = PH_RECV;
    }
    return 1;
}

static int exch_recv(struct side *s, struct conn *k)
{
    struct orbit_exchange_event ev;
    int rc = orbit_exchange_try_next(k->x, &ev);
    if (rc < 0)
        return rc == -ORBIT_EAGAIN ? 0 : rc;
    if (ev.type == ORBIT_EXCHANGE_FIN) {
        if (k->off != s->c.body)
            return -ORBIT_EMALFORMED;
        if (s->server) {
            k->off = 0;
            k->phase = PH_SEND;
        } else {
            exch_done(s, k);
        }
        return 1;
    }
    if (ev.type == ORBIT_EXCHANGE_DATA && !ev.chunk.released) {
        if (s->touch)
            s->sink += bx_touch_sum(ev.chunk.data, ev.chunk.len);
        k->off += ev.chunk.len;
        orbit_chunk_release(&ev.chunk);
    }
    return 1;
}

/* ---- the loop -------------------------------------------------------------------------- */

static int step(struct side *s, struct conn *k)
{
    if (s->t != T_EXCH)
        return k->done < s->iters ? bytes_step(s, k) : 0;
    switch (k->phase) {
    case PH_FREE: return exch_begin(s, k);
    case PH_SEND: return exch_send(s, k);
    case PH_FIN:  return exch_finish(s, k);
    case PH_RECV: return exch_recv(s, k);
    }
    return 0;
}

/* One pass over every connection, each driven until it would block: 1 if anything moved. */
static int pass(struct side *s)
{
    int moved = 0;
    for (unsigned i = 0; i < s->c.conc; i++) {
        int rc;
        while ((rc = step(s, &s->conn[i])) > 0)
            moved = 1;
        if (rc < 0)
            return rc;
    }
    return moved;
}

static void block(struct side *s)
{
    struct pollfd pfd[MAXC];
    nfds_t n = 0;
    s->blocks++;
    if (s->ready_fd >= 0) {
        pfd[n++] = (struct pollfd){ .fd = s->ready_fd, .events = POLLIN };
    } else {
        for (unsigned i = 0; i < s->c.conc; i++)
            if (s->conn[i].done < s->iters)
                pfd[n++] = (struct pollfd){ .fd = s->conn[i].fd,
                                            .events = s->conn[i].phase == PH_SEND ? POLLOUT : POLLIN };
    }
    /* Every wait here has a peer that will act: a timeout means a wakeup was lost. */
    if (n && poll(pfd, n, LOOP_LOST_WAKEUP_MS) == 0)
        s->timeouts++;
}

/* Run until this side has finished its round trips: passes, a spin of passes, then block. */
static int loop(struct side *s)
{
    int64_t spin_ns = (int64_t)orbit_spin_ns() * LOOP_SPIN_FACTOR;
    while (s->round_trips < s->target) {
        int rc = pass(s);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        int64_t until = bench_now_ns() + spin_ns;
        while ((rc = pass(s)) == 0 && bench_now_ns() < until)
            ;
        if (rc != 0)
            continue;
        if (s->ready_fd >= 0) {
            orbit_readiness_drain(s->ready_fd);   /* edge-triggered: drain, retry, then sleep */
            if ((rc = pass(s)) != 0)
                continue;
        }
        if (s->round_trips < s->target)
            block(s);
    }
    return 0;
}

/* ---- set-up and the run ------------------------------------------------------------------ */

struct lrun { const struct opts *o; struct cfg c; enum transport t; struct bx_channels ch; };

/* Join the fleet, open this side's handle and connections (tickets of streams travel from
 * the client to the server over the down pipe); 0 or -1. */
static int side_open(struct side *s, struct lrun *r, bool server, uint64_t iters)
{
    *s = (struct side){ .t = r->t, .c = r->c, .server = server, .touch = r->o->touch, .iters = iters,
                        .target = iters * r->c.conc, .ready_fd = -1, .peer = LOOP_SERVER_NODE };
    s->buf = aligned_alloc(64, r->c.body);
    s->rbuf = aligned_alloc(64, r->c.body);
    if (!s->buf || !s->rbuf)
        return -1;
    memset(s->buf, 0x5a, r->c.body);
    memset(s->rbuf, 0, r->c.body);
    for (unsigned i = 0; i < r->c.conc; i++) {
        s->conn[i] = (struct conn){ .phase = r->t == T_EXCH ? PH_FREE : server ? PH_RECV : PH_SEND,
                                    .fd = r->ch.fds[i][server ? 1 : 0] };
        if (r->t == T_SOCK && fcntl(s->conn[i].fd, F_SETFL, O_NONBLOCK) != 0)
            return -1;
    }
    if (r->t == T_SOCK)
        return 0;
    if (!(s->f = bx_join_node(r->o->fleet, server ? LOOP_SERVER_NODE : 0)))
        return -1;
    if (r->t == T_EXCH) {
        struct orbit_exchange_spec es = bx_exch_spec();
        if (orbit_exchanges_open(s->f, &es, &s->ex) != 0)
            return -1;
        return (s->ready_fd = orbit_exchanges_readiness(s->ex)) >= 0 ? 0 : -1;
    }
    if (orbit_streams_open(s->f, &bx_stream_spec, &s->s) != 0 ||
        (s->ready_fd = orbit_streams_readiness(s->s)) < 0)
        return -1;
    for (unsigned i = 0; i < r->c.conc; i++) {
        struct orbit_ticket tk;
        struct orbit_endpoint **ep = &s->conn[i].ep;
        if (server ? !bench_get(r->ch.down[0], &tk, sizeof tk) || orbit_streams_open_ticket(s->s, &tk, ep) != 0
                   : orbit_streams_create(s->s, ep, &tk) != 0)
            return -1;
        if (!server)
            bench_put(r->ch.down[1], &tk, sizeof tk);
    }
    return 0;
}

static void side_close(struct side *s)
{
    for (unsigned i = 0; i < s->c.conc; i++) {
        if (s->conn[i].x)
            orbit_exchange_close(s->conn[i].x);
        if (s->conn[i].ep) {
            orbit_endpoint_finish(s->conn[i].ep);
            orbit_endpoint_close(s->conn[i].ep);
        }
    }
    orbit_streams_close(s->s);
    orbit_exchanges_close(s->ex);
    if (s->f)
        orbit_fleet_leave(s->f);
    free(s->buf);
    free(s->rbuf);
}

static void loop_server(void *arg)
{
    struct lrun *r = arg;
    uint64_t iters = 0;
    struct side s;
    char go;
    if (!bench_get(r->ch.down[0], &iters, sizeof iters) || side_open(&s, r, true, iters) != 0)
        _exit(93);
    bench_put(r->ch.up[1], "r", 1);
    if (!bench_get(r->ch.down[0], &go, 1))
        _exit(91);
    int rc = loop(&s);
    bench_put(r->ch.up[1], &s.blocks, sizeof s.blocks);
    bench_put(r->ch.up[1], &s.timeouts, sizeof s.timeouts);
    side_close(&s);
    _exit(rc == 0 ? 0 : 97);
}

struct rt_result bx_loop_run(const struct opts *o, struct cfg c, enum transport t)
{
    struct lrun r = { .o = o, .c = c, .t = t };
    struct rt_result res = { 0, 0 };
    if (!bx_channels_open(&r.ch, c.conc))
        return res;
    uint64_t iters = bx_round_trips(o, c);
    pid_t pid = bx_fork_server(o, &r.ch, loop_server, &r, iters);
    if (pid < 0)
        return res;
    struct side s;
    bool ok = side_open(&s, &r, false, iters) == 0;
    char ready;
    int64_t t0 = 0, t1 = 0;
    int rc = -1;
    uint64_t server_blocks = 0, server_timeouts = 0;
    if (ok && bench_get(r.ch.up[0], &ready, 1)) {
        t0 = bench_now_ns();
        bench_put(r.ch.down[1], "g", 1);
        rc = loop(&s);
        t1 = bench_now_ns();
        bench_get(r.ch.up[0], &server_blocks, sizeof server_blocks);
        bench_get(r.ch.up[0], &server_timeouts, sizeof server_timeouts);
    }
    if (!ok || rc != 0)
        kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    side_close(&s);
    bx_channels_close(&r.ch);
    bool good = ok && rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && t1 > t0;
    if (!good) {
        fprintf(stderr, "orbit-bench exchange: loop %s c=%u body=%zu chunk=%zu failed "
                "(client %d, server status %d)\n", bx_transport_name[t], c.conc, c.body, c.chunk, rc,
                WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
        return res;
    }
    if (s.timeouts + server_timeouts)
        fprintf(stderr, "orbit-bench exchange: loop %s c=%u body=%zu chunk=%zu: %llu waits of %d ms found "
                "nothing ready (a lost wakeup)\n", bx_transport_name[t], c.conc, c.body, c.chunk,
                (unsigned long long)(s.timeouts + server_timeouts), LOOP_LOST_WAKEUP_MS);
    res.gbps = (double)(2 * c.body * c.conc * iters) / (double)(t1 - t0);
    res.sleeps_per_rt = (double)(s.blocks + server_blocks) / (double)(c.conc * iters);
    return res;
}
