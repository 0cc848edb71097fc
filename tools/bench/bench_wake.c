/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench wake: one-way wake latency and ping-pong round trips between two
 * processes, through orbit's futex word (spin then park, and park only), an
 * io_uring FUTEX_WAIT, an eventfd, a pipe and an AF_UNIX socketpair.
 */
#include <getopt.h>
#include <inttypes.h>
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
#include <orbit/uring.h>
#include "tool.h"
#include "core/wait.h"
#include "uring_internal.h"

enum kind { K_SPIN, K_PARK, K_URING, K_EVENTFD, K_PIPE, K_SOCKET, K_COUNT };
static const char *kind_name[K_COUNT] = { "orbit futex (spin+park)", "orbit futex (park only)",
                                          "orbit io_uring FUTEX_WAIT", "eventfd", "pipe",
                                          "AF_UNIX socketpair" };
static const char *kind_key[K_COUNT] = { "orbit_spin", "orbit_park", "orbit_uring", "eventfd",
                                         "pipe", "socketpair" };

struct shared {                      /* MAP_SHARED between parent (A) and child (B) */
    struct orb_waitword word[2];     /* [0] A->B, [1] B->A */
    _Atomic uint64_t seq[2];
    _Atomic int64_t stamp;
    int64_t samples[];               /* one-way samples, written by B */
};

struct channel {
    enum kind kind;
    struct shared *sh;
    int fd[2][2];                    /* per direction: [read end, write end] */
    uint64_t seen[2];                /* receiver's count per direction */
    struct io_uring ring;
    bool ring_ready;
};

struct pred_ctx { _Atomic uint64_t *seq; uint64_t want; };
static int seq_reached(void *p)
{
    struct pred_ctx *c = p;
    return atomic_load_explicit(c->seq, memory_order_acquire) >= c->want;
}

static void ch_send(struct channel *c, int dir)
{
    char byte = 1;
    eventfd_t one = 1;
    switch (c->kind) {
    case K_SPIN: case K_PARK: case K_URING:
        atomic_fetch_add_explicit(&c->sh->seq[dir], 1, memory_order_release);
        orb_wait_signal(&c->sh->word[dir], NULL);
        break;
    case K_EVENTFD:
        if (write(c->fd[dir][1], &one, sizeof one) != sizeof one) abort();
        break;
    default:
        if (write(c->fd[dir][1], &byte, 1) != 1) abort();
        break;
    }
}

static void ch_recv_uring(struct channel *c, int dir, struct pred_ctx *p)
{
    for (;;) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
        int r = orb_uring_prep_wait(&c->sh->word[dir], seq_reached, p, sqe, NULL);
        if (r == 1) {
            io_uring_prep_nop(sqe);   /* hand the unused SQE back as a no-op */
            io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
            io_uring_submit(&c->ring);
            return;
        }
        if (r < 0) abort();
        struct io_uring_cqe *cqe;
        io_uring_submit_and_wait(&c->ring, 1);
        while (io_uring_peek_cqe(&c->ring, &cqe) == 0)
            io_uring_cqe_seen(&c->ring, cqe);
    }
}

static void ch_recv(struct channel *c, int dir)
{
    char buf[8];
    struct pred_ctx p = { &c->sh->seq[dir], ++c->seen[dir] };
    struct orb_deadline forever = orb_deadline_in(-1);
    switch (c->kind) {
    case K_SPIN: case K_PARK:
        orb_wait_until(&c->sh->word[dir], seq_reached, &p, &forever, NULL, NULL);
        break;
    case K_URING:
        ch_recv_uring(c, dir, &p);
        break;
    case K_EVENTFD:
        if (read(c->fd[dir][0], buf, 8) != 8) abort();
        break;
    default:
        if (read(c->fd[dir][0], buf, 1) != 1) abort();
        break;
    }
}

static int ch_open(struct channel *c, enum kind kind, struct shared *sh)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->sh = sh;
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

static void ch_close(struct channel *c)
{
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
    if (c->kind == K_URING && io_uring_queue_init(8, &c->ring, 0) != 0)
        _exit(3);
    for (int i = 0; i < oneway; i++) {
        ch_recv(c, 0);
        c->sh->samples[i] = orb_now_ns() - atomic_load(&c->sh->stamp);
        ch_send(c, 1);
    }
    for (int i = 0; i < rtt; i++) {
        ch_recv(c, 0);
        ch_send(c, 1);
    }
    _exit(0);
}

static int run_one(enum kind kind, int oneway, int rtt, struct result *res)
{
    size_t bytes = sizeof(struct shared) + (size_t)(oneway > rtt ? oneway : rtt) * sizeof(int64_t);
    struct shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return -1;
    struct channel c;
    if (ch_open(&c, kind, sh) < 0 || (kind == K_URING && !orbit_uring_futex_supported())) {
        munmap(sh, bytes);
        return -1;
    }
    uint32_t saved_spin = orbit_spin_ns();
    if (kind != K_SPIN)
        orbit_set_spin_ns(0);
    pid_t pid = bench_fork();
    if (pid == 0)
        child_loop(&c, oneway, rtt);
    if (kind == K_URING && io_uring_queue_init(8, &c.ring, 0) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        munmap(sh, bytes);
        return -1;
    }
    int64_t *rt = calloc((size_t)rtt, sizeof *rt);
    for (int i = 0; i < oneway; i++) {
        sleep_us(200);                                /* let B go to sleep first */
        atomic_store(&sh->stamp, orb_now_ns());
        ch_send(&c, 0);
        ch_recv(&c, 1);
    }
    for (int i = 0; i < rtt; i++) {
        int64_t t0 = orb_now_ns();
        ch_send(&c, 0);
        ch_recv(&c, 1);
        rt[i] = orb_now_ns() - t0;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    orbit_set_spin_ns(saved_spin);
    res->ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (kind == K_URING)
        io_uring_queue_exit(&c.ring);
    double ps[3] = { 0.50, 0.99, 0.999 };
    for (int k = 0; k < 3; k++) {
        res->oneway[k] = tool_percentile(sh->samples, (size_t)oneway, ps[k]);
        res->rtt[k] = tool_percentile(rt, (size_t)rtt, ps[k]);
    }
    free(rt);
    ch_close(&c);
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
        printf("%s{\"transport\":\"%s\",\"oneway_ns\":{\"p50\":%" PRId64 ",\"p99\":%" PRId64
               ",\"p999\":%" PRId64 "},\"rtt_ns\":{\"p50\":%" PRId64 ",\"p99\":%" PRId64 ",\"p999\":%" PRId64
               "},\"rtt_p50_speedup_vs_pipe\":%.3f}", first ? "" : ",", kind_key[k], r[k].oneway[0],
               r[k].oneway[1], r[k].oneway[2], r[k].rtt[0], r[k].rtt[1], r[k].rtt[2],
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
    while ((c = getopt_long(argc, argv, "o:r:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
        case 'r': {
            uint64_t v;
            if (!bench_u64_arg("wake", c == 'o' ? "--oneway" : "--rtt", optarg, 1, 10000000, &v))
                return 2;
            *(c == 'o' ? &oneway : &rtt) = (int)v;
            break;
        }
        case 'j': json = true; break;
        case 'h': fputs(help, stdout); return 0;
        default: fputs(help, stderr); return 2;
        }
    }
    if (oneway < 1 || rtt < 1 || oneway > 10000000 || rtt > 10000000) {
        fputs("orbit-bench wake: --oneway and --rtt must be 1..10000000\n", stderr);
        return 2;
    }
    struct result r[K_COUNT];
    bool ran[K_COUNT];
    for (int k = 0; k < K_COUNT; k++)
        ran[k] = run_one((enum kind)k, oneway, rtt, &r[k]) == 0;
    if (json)
        print_json(r, ran, oneway, rtt);
    else
        print_text(r, ran, oneway, rtt);
    return 0;
}
