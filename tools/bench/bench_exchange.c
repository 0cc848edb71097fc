/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench exchange: request/response round trips between two processes through
 * paired exchanges (a fresh exchange per round trip: create, offer, open, START, DATA
 * chunks, FIN each way, close), beside the same traffic over persistent orbit streams
 * and persistent AF_UNIX socketpairs, for 64 KiB and 1 MiB bodies in 4 KiB and 64 KiB
 * application chunks with 1 and 8 concurrent exchanges; then a relay: bytes from a
 * loopback TCP socket into the arena in one process (READ_FIXED into a reserved chunk)
 * and out of it to another TCP socket in a second process (WRITE_FIXED from the
 * received chunk), against a one-process splice(2) relay and a read/write copy relay.
 *
 * Two models. Thread (this file): each concurrent pair is a thread in each process, and
 * each thread is its own fleet node (as a worker process would be): its own lane, offers
 * addressed to it alone; the blocking calls wait. Loop (bench_exchange_loop.c): each
 * process is one thread and one node that keeps every pair in flight with try_* calls.
 * Work per side: senders copy each chunk from a buffer (into the reserved chunk, the
 * ring, the socket) and an exchange sender fills its first chunk before it sends START
 * (and, as the client, before it offers the exchange); exchange receivers read chunks
 * in place and release them, stream and socket receivers copy into a buffer; --touch
 * makes every receiver also read each byte it got (a sum over 64-bit words).
 * "sleeps/rt" is futex parks (thread model) or blocking poll(2) calls (loop model) per
 * round trip, both processes together.
 *
 * This file holds the thread model's round trips, the relay and the --scale runs;
 * bench_exchange_cli.c the options, the pairing and the report.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <liburing.h>
#include <orbit/exchange.h>
#include <orbit/uring.h>
#include "cli.h"
#include "bench.h"
#include "bench_clock.h"
#include "bench_exchange.h"

const char *const bx_transport_name[T_COUNT] = { "exchange", "stream", "socketpair" };

/* ---- small helpers ---------------------------------------------------------------- */

static bool write_full(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

uint64_t bx_touch_sum(const void *p, size_t n)
{
    const uint64_t *w = p;
    uint64_t s = 0;
    for (size_t i = 0; i < n / 8; i++)
        s += w[i];
    return s;
}

struct orbit_fleet *bx_join_node(const char *name, int node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2 * MAXC;
    o.node = node;
    struct orbit_fleet *f = NULL;
    return orbit_fleet_join(name, &o, &f) == 0 ? f : NULL;
}

struct orbit_exchange_spec bx_exch_spec(void)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control = (struct orbit_stream_spec){ .kind = CTL_KIND, .lane_capacity = 64, .buffer_bytes = 16384 };
    s.a_to_b = (struct orbit_arena_spec){ .kind = ARENA_KIND, .slot_bytes = 4096, .slots_per_lane = 2048 };
    return s;
}

const struct orbit_stream_spec bx_stream_spec = { .kind = STREAM_KIND, .lane_capacity = 16,
                                                  .buffer_bytes = 1u << 20 };

bool bx_channels_open(struct bx_channels *ch, unsigned conc)
{
    *ch = (struct bx_channels){ .conc = 0 };
    if (pipe2(ch->up, O_CLOEXEC) != 0)
        return false;
    if (pipe2(ch->down, O_CLOEXEC) != 0) {
        close(ch->up[0]);
        close(ch->up[1]);
        return false;
    }
    for (; ch->conc < conc; ch->conc++)
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch->fds[ch->conc]) != 0) {
            bx_channels_close(ch);
            return false;
        }
    return true;
}

void bx_channels_close(struct bx_channels *ch)
{
    for (unsigned i = 0; i < ch->conc; i++) {
        close(ch->fds[i][0]);
        close(ch->fds[i][1]);
    }
    close(ch->up[0]); close(ch->up[1]); close(ch->down[0]); close(ch->down[1]);
}

void bx_pin(const struct opts *o, int role)
{
    if (o->cpu[role] < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o->cpu[role], &set);
    sched_setaffinity(0, sizeof set, &set);   /* threads made later inherit it */
}

pid_t bx_fork_server(const struct opts *o, struct bx_channels *ch, void (*server)(void *), void *arg,
                     uint64_t iters)
{
    fflush(NULL);
    pid_t pid = bench_fork();
    if (pid == 0) {
        bx_pin(o, 1);
        server(arg);
    }
    if (pid < 0) {
        bx_channels_close(ch);
        return -1;
    }
    bench_put(ch->down[1], &iters, sizeof iters);
    return pid;
}

uint64_t bx_round_trips(const struct opts *o, struct cfg c)
{
    uint64_t iters = o->bytes / (2 * c.body * c.conc);
    return iters ? iters : 1;
}

/* ---- one side of a round trip, per transport ----------------------------------------- */

struct worker {
    enum transport t;
    struct cfg c;
    uint64_t iters;
    bool touch, server;
    struct orbit_fleet *f;
    struct orbit_exchanges *ex;
    struct orbit_streams *s;
    struct orbit_endpoint *ep;
    int fd;
    uint16_t peer;                  /* client, exchange: the server's node */
    pthread_barrier_t *go;
    unsigned char *buf;
    uint64_t sink;
    int rc;
};

/* The first chunk is produced before START goes out (and, for a client, before the offer):
 * the receiver then finds START and data together instead of waking for each. */
static int exch_send_body(struct worker *w, struct orbit_exchange *x, const struct orbit_ticket *offer)
{
    struct orbit_reservation r;
    int rc = orbit_exchange_reserve(x, w->c.chunk, -1, &r);
    if (rc < 0)
        return rc;
    memcpy(r.data, w->buf, w->c.chunk);
    if ((rc = orbit_exchange_start(x, NULL, 0, -1)) < 0 || (rc = orbit_exchange_data(x, &r, w->c.chunk, -1)) < 0) {
        orbit_arena_cancel(&r);
        return rc;
    }
    if (offer && (rc = orbit_exchanges_offer(w->ex, offer, w->peer)) < 0)
        return rc;
    for (size_t off = w->c.chunk; rc == 0 && off < w->c.body; off += w->c.chunk)
        rc = orbit_exchange_send_data(x, w->buf + off, w->c.chunk, -1);
    return rc == 0 ? orbit_exchange_finish(x, -1) : rc;
}

static int exch_recv_body(struct worker *w, struct orbit_exchange *x)
{
    size_t got = 0;
    for (;;) {
        struct orbit_exchange_event ev;
        int rc = orbit_exchange_next(x, &ev, -1);
        if (rc < 0)
            return rc;
        if (ev.type == ORBIT_EXCHANGE_FIN)
            return got == w->c.body ? 0 : -ORBIT_EMALFORMED;
        if (!ev.chunk.released) {
            if (w->touch)
                w->sink += bx_touch_sum(ev.chunk.data, ev.chunk.len);
            got += ev.chunk.len;
            orbit_chunk_release(&ev.chunk);
        }
    }
}

static int exch_client_once(struct worker *w)
{
    struct orbit_exchange *x;
    struct orbit_ticket t;
    int rc = orbit_exchange_create(w->ex, &x, &t);
    if (rc < 0)
        return rc;
    if ((rc = exch_send_body(w, x, &t)) == 0)
        rc = exch_recv_body(w, x);
    orbit_exchange_close(x);
    return rc;
}

static int exch_server_once(struct worker *w)
{
    struct orbit_ticket t;
    struct orbit_exchange *x;
    int rc = orbit_exchanges_wait_offer(w->ex, -1, &t);
    if (rc < 0 || (rc = orbit_exchange_open(w->ex, &t, &x)) < 0)
        return rc;
    if ((rc = exch_recv_body(w, x)) == 0)
        rc = exch_send_body(w, x, NULL);
    orbit_exchange_close(x);
    return rc;
}

static int stream_send(struct worker *w)
{
    for (size_t off = 0; off < w->c.body; off += w->c.chunk) {
        int rc = orbit_endpoint_write_all(w->ep, w->buf + off, w->c.chunk, -1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int stream_recv(struct worker *w)
{
    for (size_t off = 0; off < w->c.body; off += w->c.chunk) {
        int rc = orbit_endpoint_read_exact(w->ep, w->buf + off, w->c.chunk, -1);
        if (rc < 0)
            return rc;
        if (w->touch)
            w->sink += bx_touch_sum(w->buf + off, w->c.chunk);
    }
    return 0;
}

static int sock_send(struct worker *w)
{
    for (size_t off = 0; off < w->c.body; off += w->c.chunk)
        if (!write_full(w->fd, w->buf + off, w->c.chunk))
            return -EIO;
    return 0;
}

static int sock_recv(struct worker *w)
{
    for (size_t off = 0; off < w->c.body; off += w->c.chunk) {
        if (!bench_get(w->fd, w->buf + off, w->c.chunk))
            return -EIO;
        if (w->touch)
            w->sink += bx_touch_sum(w->buf + off, w->c.chunk);
    }
    return 0;
}

static int once(struct worker *w)
{
    switch (w->t) {
    case T_EXCH:
        return w->server ? exch_server_once(w) : exch_client_once(w);
    case T_STREAM: {
        int rc = w->server ? stream_recv(w) : stream_send(w);
        return rc < 0 ? rc : w->server ? stream_send(w) : stream_recv(w);
    }
    default: {
        int rc = w->server ? sock_recv(w) : sock_send(w);
        return rc < 0 ? rc : w->server ? sock_send(w) : sock_recv(w);
    }
    }
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    pthread_barrier_wait(w->go);
    for (uint64_t i = 0; i < w->iters && w->rc == 0; i++)
        w->rc = once(w);
    return NULL;
}

/* Run n workers (already set up) behind one barrier; returns 0 if all succeeded. */
static int run_workers(struct worker *w, unsigned n, int ready_fd, int go_fd, int64_t *t0, int64_t *t1)
{
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, n + 1);
    pthread_t th[MAXC];
    for (unsigned i = 0; i < n; i++) {
        w[i].go = &go;
        w[i].buf = aligned_alloc(64, w[i].c.body);
        memset(w[i].buf, 0x5a, w[i].c.body);
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    char c = 'r';
    if (ready_fd >= 0)
        bench_put(ready_fd, &c, 1);   /* server: tell the client we are set up */
    if (go_fd >= 0 && !bench_get(go_fd, &c, 1))
        _exit(91);
    *t0 = bench_now_ns();
    pthread_barrier_wait(&go);
    int rc = 0;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        rc |= w[i].rc;
        free(w[i].buf);
    }
    *t1 = bench_now_ns();
    pthread_barrier_destroy(&go);
    return rc;
}

/* ---- the round trip run: client here, server in a child --------------------------------- */

/* Every worker is its own node with its own tables, as a worker process would be; client
 * worker i is node i and offers to its server, node MAXC + i. */
static int worker_open(struct worker *w, const char *fleet, int node)
{
    if (w->t == T_SOCK)
        return 0;
    if (!(w->f = bx_join_node(fleet, node)))
        return -1;
    struct orbit_exchange_spec es = bx_exch_spec();
    return w->t == T_EXCH ? orbit_exchanges_open(w->f, &es, &w->ex)
                          : orbit_streams_open(w->f, &bx_stream_spec, &w->s);
}

static void worker_close(struct worker *w)
{
    if (w->ep) {
        orbit_endpoint_finish(w->ep);   /* a clean end: the peer may still be reading */
        orbit_endpoint_close(w->ep);
    }
    orbit_streams_close(w->s);
    orbit_exchanges_close(w->ex);
    if (w->f)
        orbit_fleet_leave(w->f);
}

/* Futex sleeps of the workers' orbit handles so far (0 for sockets). */
static uint64_t workers_parks(const struct worker *w, unsigned n)
{
    uint64_t parks = 0;
    for (unsigned i = 0; i < n; i++) {
        struct orbit_stream_stats ss = { 0 };
        struct orbit_arena_stats as = { 0 };
        if (w[i].ex) {
            orbit_streams_stats(orbit_exchanges_streams(w[i].ex), &ss);
            orbit_arena_stats(orbit_exchanges_arena(w[i].ex, ORBIT_FLOW_A_TO_B), &as);
        } else if (w[i].s) {
            orbit_streams_stats(w[i].s, &ss);
        }
        parks += ss.parks + as.parks;
    }
    return parks;
}

struct rt { struct opts *o; struct cfg c; enum transport t; struct bx_channels ch; };

static void rt_server(void *arg)
{
    struct rt *r = arg;
    struct worker w[MAXC];
    memset(w, 0, sizeof w);
    uint64_t iters = 0;
    if (!bench_get(r->ch.down[0], &iters, sizeof iters))
        _exit(92);
    for (unsigned i = 0; i < r->c.conc; i++) {
        w[i] = (struct worker){ .t = r->t, .c = r->c, .iters = iters, .touch = r->o->touch, .server = true,
                                .fd = r->ch.fds[i][1] };
        if (worker_open(&w[i], r->o->fleet, MAXC + (int)i) != 0)
            _exit(93);
        struct orbit_ticket t;
        if (r->t == T_STREAM &&
            (!bench_get(r->ch.down[0], &t, sizeof t) || orbit_streams_open_ticket(w[i].s, &t, &w[i].ep) != 0))
            _exit(96);
    }
    int64_t t0, t1;
    int rc = run_workers(w, r->c.conc, r->ch.up[1], r->ch.down[0], &t0, &t1);
    uint64_t parks = workers_parks(w, r->c.conc);
    bench_put(r->ch.up[1], &parks, sizeof parks);
    for (unsigned i = 0; i < r->c.conc; i++)
        worker_close(&w[i]);
    _exit(rc == 0 ? 0 : 97);
}

static bool rt_clients_open(struct rt *r, struct worker *w, uint64_t iters)
{
    for (unsigned i = 0; i < r->c.conc; i++) {
        w[i] = (struct worker){ .t = r->t, .c = r->c, .iters = iters, .touch = r->o->touch,
                                .fd = r->ch.fds[i][0], .peer = (uint16_t)(MAXC + i) };
        if (worker_open(&w[i], r->o->fleet, (int)i) != 0)
            return false;
        struct orbit_ticket tk;
        if (r->t == T_STREAM) {
            if (orbit_streams_create(w[i].s, &w[i].ep, &tk) != 0)
                return false;
            bench_put(r->ch.down[1], &tk, sizeof tk);
        }
    }
    return true;
}

/* GB/s of request + response bytes and futex sleeps per round trip; 0 if the run failed. */
struct rt_result bx_thread_run(struct opts *o, struct cfg c, enum transport t)
{
    struct rt r = { .o = o, .c = c, .t = t };
    struct rt_result res = { 0, 0 };
    if (!bx_channels_open(&r.ch, c.conc))
        return res;
    uint64_t iters = bx_round_trips(o, c);
    pid_t pid = bx_fork_server(o, &r.ch, rt_server, &r, iters);
    if (pid < 0)
        return res;
    struct worker w[MAXC];
    memset(w, 0, sizeof w);
    bool ok = rt_clients_open(&r, w, iters);
    char ready;
    int64_t t0 = 0, t1 = 0;
    int rc = -1;
    uint64_t parks = 0, server_parks = 0;
    if (ok && bench_get(r.ch.up[0], &ready, 1)) {
        parks = workers_parks(w, c.conc);
        bench_put(r.ch.down[1], "g", 1);
        rc = run_workers(w, c.conc, -1, -1, &t0, &t1);
        parks = workers_parks(w, c.conc) - parks;
        bench_get(r.ch.up[0], &server_parks, sizeof server_parks);
    }
    if (!ok)
        kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    for (unsigned i = 0; i < c.conc; i++)
        worker_close(&w[i]);
    bx_channels_close(&r.ch);
    bool good = ok && rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && t1 > t0;
    if (!good)
        fprintf(stderr, "orbit-bench exchange: %s c=%u body=%zu chunk=%zu failed (client %d, server status %d)\n",
                bx_transport_name[t], c.conc, c.body, c.chunk, rc, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    if (good) {
        res.gbps = (double)(2 * c.body * c.conc * iters) / (double)(t1 - t0);
        res.sleeps_per_rt = (double)(parks + server_parks) / (double)(c.conc * iters);
    }
    return res;
}

/* ---- the relay --------------------------------------------------------------------- */


static int listen_loopback(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 4) < 0)
        return -1;
    return s;
}

static int connect_to(int listener)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || getsockname(listener, (struct sockaddr *)&a, &len) < 0 ||
        connect(s, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    return s;
}

static int ring_run(struct io_uring *ring)
{
    struct io_uring_cqe *cqe;
    if (io_uring_submit_and_wait(ring, 1) < 0 || io_uring_wait_cqe(ring, &cqe) < 0)
        return -EIO;
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

struct relay { struct opts *o; int l_in, l_out, go[2]; };

static void relay_source(struct relay *r)
{
    int s = connect_to(r->l_in);
    unsigned char *buf = malloc(RCHUNK);
    memset(buf, 0x3c, RCHUNK);
    char g;
    if (s < 0 || !bench_get(r->go[0], &g, 1))
        _exit(80);
    for (uint64_t done = 0; done < r->o->relay_bytes; done += RCHUNK)
        if (!write_full(s, buf, RCHUNK))
            _exit(81);
    close(s);
    _exit(0);
}

/* Socket -> arena: READ_FIXED into a reserved chunk, commit what arrived. */
static void relay_arena_in(struct relay *r)
{
    struct orbit_fleet *f = bx_join_node(r->o->fleet, 1);
    struct orbit_exchange_spec es = bx_exch_spec();
    struct orbit_exchanges *ex;
    struct io_uring ring;
    if (!f || orbit_exchanges_open(f, &es, &ex) != 0 || io_uring_queue_init(8, &ring, 0) != 0 ||
        orbit_arena_register_buffers(orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B), &ring) != 0)
        _exit(82);
    int s = accept4(r->l_in, NULL, NULL, SOCK_CLOEXEC);
    struct orbit_exchange *a;
    struct orbit_ticket t;
    if (s < 0 || orbit_exchange_create(ex, &a, &t) != 0 || orbit_exchange_send_start(a, NULL, 0, -1) != 0 ||
        orbit_exchanges_offer(ex, &t, 0) != 0)
        _exit(83);
    for (;;) {
        struct orbit_reservation res;
        struct orbit_fixed_buf fb;
        if (orbit_exchange_reserve(a, RCHUNK, -1, &res) != 0 || orbit_reservation_fixed(&res, &fb) != 0)
            _exit(84);
        io_uring_prep_read_fixed(io_uring_get_sqe(&ring), s, fb.addr, RCHUNK, 0, fb.index);
        int n = ring_run(&ring);
        if (n <= 0) {
            orbit_arena_cancel(&res);
            if (n < 0)
                _exit(85);
            break;
        }
        if (orbit_exchange_data(a, &res, (size_t)n, -1) != 0)
            _exit(86);
    }
    if (orbit_exchange_finish(a, -1) != 0)
        _exit(87);
    /* Closing now would end the exchange before a slow receiver has even opened it (a small
     * body fits in the lane): stay until the receiver closes its side, which ends our
     * receive direction with -ORBIT_ERESET. */
    struct orbit_exchange_event ev;
    while (orbit_exchange_next(a, &ev, -1) == 0)
        if (ev.type == ORBIT_EXCHANGE_DATA && !ev.chunk.released)
            orbit_chunk_release(&ev.chunk);
    orbit_exchange_close(a);
    io_uring_queue_exit(&ring);
    orbit_exchanges_close(ex);
    orbit_fleet_leave(f);
    _exit(0);
}

/* Arena -> socket: WRITE_FIXED from the received chunk, release once written. */
static void relay_arena_out(struct relay *r)
{
    struct orbit_fleet *f = bx_join_node(r->o->fleet, 0);
    struct orbit_exchange_spec es = bx_exch_spec();
    struct orbit_exchanges *ex;
    struct io_uring ring;
    if (!f || orbit_exchanges_open(f, &es, &ex) != 0 || io_uring_queue_init(8, &ring, 0) != 0 ||
        orbit_arena_register_buffers(orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B), &ring) != 0)
        _exit(88);
    int s = connect_to(r->l_out);
    struct orbit_ticket t;
    struct orbit_exchange *b;
    if (s < 0 || orbit_exchanges_wait_offer(ex, -1, &t) != 0 || orbit_exchange_open(ex, &t, &b) != 0)
        _exit(89);
    for (;;) {
        struct orbit_exchange_event ev;
        if (orbit_exchange_next(b, &ev, -1) != 0)
            _exit(70);
        if (ev.type == ORBIT_EXCHANGE_FIN)
            break;
        struct orbit_fixed_buf fb;
        if (ev.type != ORBIT_EXCHANGE_DATA || orbit_chunk_fixed(&ev.chunk, &fb) != 0)
            continue;
        for (size_t off = 0; off < fb.len;) {
            io_uring_prep_write_fixed(io_uring_get_sqe(&ring), s, (char *)fb.addr + off, (unsigned)(fb.len - off),
                                      0, fb.index);
            int n = ring_run(&ring);
            if (n <= 0)
                _exit(71);
            off += (size_t)n;
        }
        orbit_chunk_release(&ev.chunk);
    }
    close(s);
    orbit_exchange_close(b);
    io_uring_queue_exit(&ring);
    orbit_exchanges_close(ex);
    orbit_fleet_leave(f);
    _exit(0);
}

/* One process, socket -> socket: splice(2) through a pipe, or read(2)/write(2). */
static void relay_plain(struct relay *r, bool use_splice)
{
    int out = connect_to(r->l_out), in = accept4(r->l_in, NULL, NULL, SOCK_CLOEXEC), p[2];
    unsigned char *buf = malloc(RCHUNK);
    if (out < 0 || in < 0 || pipe(p) != 0)
        _exit(72);
    for (;;) {
        ssize_t n = use_splice ? splice(in, NULL, p[1], NULL, RCHUNK, SPLICE_F_MOVE | SPLICE_F_MORE)
                               : read(in, buf, RCHUNK);
        if (n < 0)
            _exit(73);
        if (n == 0)
            break;
        if (!use_splice) {
            if (!write_full(out, buf, (size_t)n))
                _exit(74);
            continue;
        }
        for (ssize_t left = n; left > 0;) {
            ssize_t m = splice(p[0], NULL, out, NULL, (size_t)left, SPLICE_F_MOVE | SPLICE_F_MORE);
            if (m <= 0)
                _exit(75);
            left -= m;
        }
    }
    close(out);
    _exit(0);
}

static pid_t fork_into(void (*fn)(struct relay *), struct relay *r)
{
    fflush(NULL);
    pid_t pid = bench_fork();
    if (pid == 0)
        fn(r);
    return pid;
}

static void relay_splice(struct relay *r) { relay_plain(r, true); }
static void relay_copy(struct relay *r) { relay_plain(r, false); }

/* GB/s through the relay, as the sink sees it (0 on failure). */
double bx_relay_run(struct opts *o, enum relay_kind kind)
{
    struct relay r = { .o = o, .l_in = listen_loopback(), .l_out = listen_loopback() };
    if (r.l_in < 0 || r.l_out < 0 || pipe(r.go) != 0)
        return 0;
    pid_t pids[3];
    int n = 0;
    if (kind == R_ARENA) {
        pids[n++] = fork_into(relay_arena_out, &r);
        pids[n++] = fork_into(relay_arena_in, &r);
    } else {
        pids[n++] = fork_into(kind == R_SPLICE ? relay_splice : relay_copy, &r);
    }
    pids[n++] = fork_into(relay_source, &r);
    int sink = accept4(r.l_out, NULL, NULL, SOCK_CLOEXEC);
    unsigned char *buf = malloc(1u << 20);
    uint64_t got = 0;
    int64_t t0 = bench_now_ns();
    bench_put(r.go[1], "g", 1);
    for (ssize_t m; sink >= 0 && (m = read(sink, buf, 1u << 20)) > 0;)
        got += (uint64_t)m;
    int64_t t1 = bench_now_ns();
    bool ok = got == o->relay_bytes;
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    free(buf);
    close(sink); close(r.l_in); close(r.l_out); close(r.go[0]); close(r.go[1]);
    return ok && t1 > t0 ? (double)got / (double)(t1 - t0) : 0;
}

/* ---- --procs / --scale: pairs at once ---------------------------------------------- */

static void scale_driver(struct opts *o, int pair, enum transport t, struct scale_gate *g)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);   /* on the bench's death: unlink this pair's fleet */
    snprintf(o->fleet + strlen(o->fleet), sizeof o->fleet - strlen(o->fleet), "-p%d", pair);
    bench_unlink_on_signal(o->fleet);
    atomic_fetch_add(&g->ready, 1);
    while (!atomic_load(&g->go))
        usleep(100);
    struct cfg c = { 1, 65536, 65536 };
    struct rt_result r = bx_thread_run(o, c, t);
    orbit_fleet_unlink(o->fleet);
    g->gbps[pair] = r.gbps;
    _exit(r.gbps > 0 ? 0 : 1);
}

/* GB/s of `pairs` pairs running at once through transport t (their sum), or -1. */
double bx_scale_once(struct opts *o, int pairs, enum transport t, struct scale_gate *g)
{
    memset(g, 0, sizeof *g);
    pid_t kids[SCALE_PAIRS_MAX];
    int n = 0;
    for (; n < pairs; n++) {
        if ((kids[n] = bench_fork()) < 0)
            break;
        if (kids[n] == 0)
            scale_driver(o, n, t, g);
    }
    while (atomic_load(&g->ready) < n)
        usleep(100);
    atomic_store(&g->go, 1);
    bool ok = n == pairs;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        int st;
        ok = waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0 && ok;
        sum += g->gbps[i];
    }
    return ok ? sum : -1;
}
