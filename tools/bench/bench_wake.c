/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench wake: one-way wake latency and ping-pong round trips between two
 * processes, one byte a message: through an orbit stream (a blocking read that
 * spins then parks, one that parks at once, and an io_uring loop waiting with
 * orbit_endpoint_prep_wait_readable), an eventfd, a pipe and an AF_UNIX
 * socketpair.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <liburing.h>
#include <orbit/fleet.h>
#ifdef ORBIT_WITH_STREAM
#include <orbit/stream.h>
#include <orbit/uring.h>
#endif
#include "cli.h"
#include "tool.h"
#include "bench_clock.h"

enum kind { K_SPIN, K_PARK, K_URING, K_EVENTFD, K_PIPE, K_SOCKET, K_COUNT };
static const char *kind_name[K_COUNT] = { "orbit stream (spin+park)", "orbit stream (park only)",
                                          "orbit stream io_uring wait", "eventfd", "pipe",
                                          "AF_UNIX socketpair" };
static const char *kind_key[K_COUNT] = { "orbit_spin", "orbit_park", "orbit_uring", "eventfd",
                                         "pipe", "socketpair" };

static bool is_orbit(enum kind k)
{
    return k == K_SPIN || k == K_PARK || k == K_URING;
}

struct shared {                      /* MAP_SHARED between parent (A) and child (B) */
    _Atomic int64_t stamp;
    int64_t samples[];               /* one-way samples, written by B */
};

/*
 * One process's end of the channel. The orbit kinds: a stream between the two
 * processes' nodes of the bench's fleet; A writes side A, B side B, one byte a
 * message. The kernel kinds: a descriptor pair per direction.
 */
struct channel {
    enum kind kind;
    struct shared *sh;
    int fd[2][2];                    /* per direction: [read end, write end] */
    const char *fleet;
    int ctl;                         /* control socket to the other process */
#ifdef ORBIT_WITH_STREAM
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_endpoint *ep;
#endif
    struct io_uring ring;
    bool ring_ready;
};

#ifdef ORBIT_WITH_STREAM
static const struct orbit_stream_spec wake_spec = { .kind = 241, .lane_capacity = 2, .buffer_bytes = 4096 };

/* Join the fleet as node (0: A, 1: B) and open the stream table. */
static int orbit_open(struct channel *c, int node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.node = node;
    if (orbit_fleet_join(c->fleet, &o, &c->f) != 0)
        return -1;
    return orbit_streams_open(c->f, &wake_spec, &c->s) == 0 ? 0 : -1;
}

static void orbit_close(struct channel *c)
{
    if (c->ep) {
        orbit_endpoint_finish(c->ep);   /* FIN, not RESET: the last echo stays readable */
        orbit_endpoint_close(c->ep);
    }
    if (c->s)
        orbit_streams_close(c->s);
    if (c->f)
        orbit_fleet_leave(c->f);
    c->ep = NULL, c->s = NULL, c->f = NULL;
}

/* A creates the stream and sends B its ticket; B opens it and answers ready. */
static int orbit_connect(struct channel *c, bool side_a)
{
    struct orbit_ticket t;
    char ready = 1;
    if (orbit_open(c, side_a ? 0 : 1) != 0)
        return -1;
    if (side_a) {
        if (orbit_streams_create(c->s, &c->ep, &t) != 0)
            return -1;
        bench_put(c->ctl, &t, sizeof t);
        return bench_get(c->ctl, &ready, 1) ? 0 : -1;
    }
    if (!bench_get(c->ctl, &t, sizeof t) || orbit_streams_open_ticket(c->s, &t, &c->ep) != 0)
        return -1;
    bench_put(c->ctl, &ready, 1);
    return 0;
}

/*
 * An event loop's read: try, else prep a wait on the endpoint in the ring and
 * sleep in io_uring_enter. A prep that finds the byte already there returns 1
 * with the SQE a NOP: it goes out with the next submit, without a completion.
 */
static void orbit_recv_uring(struct channel *c, char *buf)
{
    for (;;) {
        ssize_t n = orbit_endpoint_try_read(c->ep, buf, 1);
        if (n == 1)
            return;
        if (n != -ORBIT_EAGAIN)
            abort();
        struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
        if (!sqe) {                   /* SQ full of ready-now NOPs: flush them */
            io_uring_submit(&c->ring);
            continue;
        }
        int r = orbit_endpoint_prep_wait_readable(c->ep, sqe);
        if (r < 0)
            abort();
        if (r == 1) {
            io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
            continue;
        }
        io_uring_sqe_set_data64(sqe, 1);
        struct io_uring_cqe *cqe;
        io_uring_submit_and_wait(&c->ring, 1);
        while (io_uring_peek_cqe(&c->ring, &cqe) == 0)
            io_uring_cqe_seen(&c->ring, cqe);
    }
}
#endif

/* dir 0: A -> B, 1: B -> A (the orbit kinds need no direction: each end writes its side). */
static void ch_send(struct channel *c, int dir)
{
    char byte = 1;
    eventfd_t one = 1;
    switch (c->kind) {
    case K_SPIN: case K_PARK: case K_URING:
#ifdef ORBIT_WITH_STREAM
        if (orbit_endpoint_write(c->ep, &byte, 1, -1) != 1) abort();
#endif
        break;
    case K_EVENTFD:
        if (write(c->fd[dir][1], &one, sizeof one) != sizeof one) abort();
        break;
    default:
        if (write(c->fd[dir][1], &byte, 1) != 1) abort();
        break;
    }
}

static void ch_recv(struct channel *c, int dir)
{
    char buf[8];
    switch (c->kind) {
    case K_SPIN: case K_PARK:
#ifdef ORBIT_WITH_STREAM
        if (orbit_endpoint_read(c->ep, buf, 1, -1) != 1) abort();
#endif
        break;
    case K_URING:
#ifdef ORBIT_WITH_STREAM
        orbit_recv_uring(c, buf);
#endif
        break;
    case K_EVENTFD:
        if (read(c->fd[dir][0], buf, 8) != 8) abort();
        break;
    default:
        if (read(c->fd[dir][0], buf, 1) != 1) abort();
        break;
    }
}

static bool kind_available(enum kind kind)
{
#ifdef ORBIT_WITH_STREAM
    return kind != K_URING || orbit_uring_futex_supported();
#else
    return !is_orbit(kind);
#endif
}

static int ch_open(struct channel *c, enum kind kind, struct shared *sh, const char *fleet, int ctl)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->sh = sh;
    c->fleet = fleet;
    c->ctl = ctl;
    for (int d = 0; d < 2; d++) {
        int rc = 0;
        if (kind == K_EVENTFD) {
            c->fd[d][0] = c->fd[d][1] = eventfd(0, EFD_CLOEXEC);
            rc = c->fd[d][0] < 0 ? -1 : 0;
        } else if (kind == K_PIPE) {
            rc = pipe(c->fd[d]);
        } else if (kind == K_SOCKET) {
            rc = socketpair(AF_UNIX, SOCK_STREAM, 0, c->fd[d]);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* After the fork: the orbit kinds connect through the fleet, io_uring gets its ring. */
static int ch_connect(struct channel *c, bool side_a)
{
    if (!is_orbit(c->kind))
        return 0;
#ifdef ORBIT_WITH_STREAM
    if (c->kind == K_URING && io_uring_queue_init(8, &c->ring, 0) != 0)
        return -1;
    c->ring_ready = c->kind == K_URING;
    return orbit_connect(c, side_a);
#else
    (void)side_a;
    return -1;
#endif
}

static void ch_close(struct channel *c)
{
    if (c->ring_ready)
        io_uring_queue_exit(&c->ring);
#ifdef ORBIT_WITH_STREAM
    if (is_orbit(c->kind))
        orbit_close(c);
#endif
    for (int d = 0; d < 2; d++) {
        if (c->kind == K_EVENTFD) close(c->fd[d][0]);
        else if (c->kind >= K_PIPE) { close(c->fd[d][0]); close(c->fd[d][1]); }
    }
}

struct result { int64_t oneway[3], rtt[3]; bool ok; };

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

/* B: echo every ping; for one-way rounds record now - stamp. */
static void child_loop(struct channel *c, int oneway, int rtt)
{
    if (ch_connect(c, false) != 0)
        _exit(3);
    for (int i = 0; i < oneway; i++) {
        ch_recv(c, 0);
        c->sh->samples[i] = bench_now_ns() - atomic_load(&c->sh->stamp);
        ch_send(c, 1);
    }
    for (int i = 0; i < rtt; i++) {
        ch_recv(c, 0);
        ch_send(c, 1);
    }
    ch_close(c);
    _exit(0);
}

/* A: the pings, timed; then B's exit status. */
static bool parent_loop(struct channel *c, pid_t pid, int oneway, int rtt, int64_t *rt)
{
    if (ch_connect(c, true) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return false;
    }
    for (int i = 0; i < oneway; i++) {
        sleep_us(200);                                /* let B go to sleep first */
        atomic_store(&c->sh->stamp, bench_now_ns());
        ch_send(c, 0);
        ch_recv(c, 1);
    }
    for (int i = 0; i < rtt; i++) {
        int64_t t0 = bench_now_ns();
        ch_send(c, 0);
        ch_recv(c, 1);
        rt[i] = bench_now_ns() - t0;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int run_one(enum kind kind, const char *fleet, int oneway, int rtt, struct result *res)
{
    size_t bytes = sizeof(struct shared) + (size_t)oneway * sizeof(int64_t);
    struct shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int ctl[2] = { -1, -1 };
    int64_t *rt = calloc((size_t)rtt, sizeof *rt);
    struct channel c;
    res->ok = false;
    if (sh == MAP_FAILED || !rt || !kind_available(kind) || socketpair(AF_UNIX, SOCK_STREAM, 0, ctl) != 0 ||
        ch_open(&c, kind, sh, fleet, -1) < 0)
        goto out;
    /* Process-wide, inherited by B: park only and io_uring rows never spin. */
    uint32_t saved_spin = orbit_spin_ns();
    if (kind != K_SPIN)
        orbit_set_spin_ns(0);
    pid_t pid = bench_fork();
    if (pid == 0) {
        close(ctl[0]);
        c.ctl = ctl[1];
        child_loop(&c, oneway, rtt);
    }
    close(ctl[1]);                  /* so B's exit is EOF here: A never waits on a dead B */
    ctl[1] = -1;
    c.ctl = ctl[0];
    res->ok = pid > 0 && parent_loop(&c, pid, oneway, rtt, rt);
    orbit_set_spin_ns(saved_spin);
    ch_close(&c);
    if (is_orbit(kind))
        orbit_fleet_unlink(fleet);
    double ps[3] = { 0.50, 0.99, 0.999 };
    for (int k = 0; res->ok && k < 3; k++) {
        res->oneway[k] = tool_percentile(sh->samples, (size_t)oneway, ps[k]);
        res->rtt[k] = tool_percentile(rt, (size_t)rtt, ps[k]);
    }
out:
    for (int i = 0; i < 2; i++)
        if (ctl[i] >= 0)
            close(ctl[i]);
    free(rt);
    if (sh != MAP_FAILED)
        munmap(sh, bytes);
    return res->ok ? 0 : -1;
}

static void print_text(struct result *r, bool *ran, int oneway, int rtt)
{
    printf("orbit-bench wake: %d one-way wakes (receiver parked), %d ping-pong round trips, 2 processes\n\n",
           oneway, rtt);
    printf("%-28s %26s   %26s   %s\n", "", "one-way wake (us)", "round trip (us)", "RTT p50 vs pipe");
    printf("%-28s %8s %8s %8s   %8s %8s %8s\n", "transport", "p50", "p99", "p99.9", "p50", "p99", "p99.9");
    for (int k = 0; k < K_COUNT; k++) {
        if (!ran[k]) {
            printf("%-28s (not available here)\n", kind_name[k]);
            continue;
        }
        printf("%-28s %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f   %.2fx faster\n", kind_name[k],
               (double)r[k].oneway[0] / 1e3, (double)r[k].oneway[1] / 1e3, (double)r[k].oneway[2] / 1e3,
               (double)r[k].rtt[0] / 1e3, (double)r[k].rtt[1] / 1e3, (double)r[k].rtt[2] / 1e3,
               ran[K_PIPE] && r[k].rtt[0] ? (double)r[K_PIPE].rtt[0] / (double)r[k].rtt[0] : 0.0);
    }
}

static void print_json(struct result *r, bool *ran, int oneway, int rtt)
{
    printf("{\"bench\":\"wake\",\"oneway_samples\":%d,\"rtt_samples\":%d,\"spin_ns\":%u,\"results\":[",
           oneway, rtt, orbit_spin_ns());
    int first = 1;
    for (int k = 0; k < K_COUNT; k++) {
        if (!ran[k])
            continue;
        printf("%s{\"transport\":\"%s\",\"oneway_ns\":{\"p50\":" CLI_JSON_I64 ",\"p99\":" CLI_JSON_I64
               ",\"p999\":" CLI_JSON_I64 "},\"rtt_ns\":{\"p50\":" CLI_JSON_I64 ",\"p99\":" CLI_JSON_I64
               ",\"p999\":" CLI_JSON_I64 "},\"rtt_p50_speedup_vs_pipe\":%.3f}", first ? "" : ",", kind_key[k],
               r[k].oneway[0], r[k].oneway[1], r[k].oneway[2], r[k].rtt[0], r[k].rtt[1], r[k].rtt[2],
               ran[K_PIPE] && r[k].rtt[0] ? (double)r[K_PIPE].rtt[0] / (double)r[k].rtt[0] : 0.0);
        first = 0;
    }
    printf("]}\n");
}

int bench_wake(int argc, char **argv)
{
    static const char help[] =
        "usage: orbit-bench wake [--oneway N] [--rtt N] [--json]\n"
        "  --oneway N  one-way wake samples per transport (default 2000)\n"
        "  --rtt N     ping-pong round trips per transport (default 20000)\n"
        "  --json      one JSON object on stdout\n";
    static const struct option opts[] = { { "oneway", required_argument, 0, 'o' },
                                          { "rtt", required_argument, 0, 'r' },
                                          { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    int oneway = 2000, rtt = 20000, c;
    bool json = false;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:r:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': oneway = cli_int(BENCH_TOOL, "--oneway", optarg, 1, 10000000); break;
        case 'r': rtt = cli_int(BENCH_TOOL, "--rtt", optarg, 1, 10000000); break;
        case 'j': json = true; break;
        case 'h': fputs(help, stdout); return 0;
        default: cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
    char fleet[64];
    snprintf(fleet, sizeof fleet, "bench-wake-%d", (int)getpid());
    bench_unlink_on_signal(fleet);
    struct result r[K_COUNT];
    bool ran[K_COUNT];
    for (int k = 0; k < K_COUNT; k++)
        ran[k] = run_one((enum kind)k, fleet, oneway, rtt, &r[k]) == 0;
    if (json)
        print_json(r, ran, oneway, rtt);
    else
        print_text(r, ran, oneway, rtt);
    return 0;
}
