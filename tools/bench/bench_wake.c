/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench wake: one-way wake latency and ping-pong round trips between two
 * processes, one byte a message: through an orbit stream (a blocking read that
 * spins then parks, one that parks at once, and an io_uring loop waiting with
 * orbit_endpoint_prep_wait_readable), an eventfd, a pipe and an AF_UNIX
 * socketpair. Every transport runs once per pair, the order alternating; every
 * sample goes into the transport's histogram, every pair's medians into its
 * series, and both sides sample the CPU they run on.
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
#include <sched.h>
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
#include "bench.h"
#include "bench_clock.h"
#include "bench_hist.h"
#include "bench_pair.h"
#include "bench_place.h"
#include "bench_plot.h"

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
    struct place_log where[2];       /* A's and B's CPU on the same round trips */
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


struct wake_opts {
    int oneway, rtt, pairs, cpu[2];
    bool json;
    const char *hist_dir, *plot;
};

/* Every transport's figures over all pairs. */
struct wake_figures {
    bool ran[K_COUNT];
    struct hist oneway[K_COUNT], rtt[K_COUNT];
    struct series oneway_p50[K_COUNT], rtt_p50[K_COUNT];
    struct place_summary where[K_COUNT];
};

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

/* B: echo every ping; for one-way rounds record now - stamp. */
static void child_loop(struct channel *c, const struct wake_opts *o)
{
    place_pin(o->cpu[1]);
    if (ch_connect(c, false) != 0)
        _exit(3);
    for (int i = 0; i < o->oneway; i++) {
        ch_recv(c, 0);
        c->sh->samples[i] = bench_now_ns() - atomic_load(&c->sh->stamp);
        ch_send(c, 1);
    }
    for (int i = 0; i < o->rtt; i++) {
        ch_recv(c, 0);
        if (place_due(i))
            place_sample(&c->sh->where[1]);
        ch_send(c, 1);
    }
    ch_close(c);
    _exit(0);
}

/* A: the pings, timed; then B's exit status. */
static bool parent_loop(struct channel *c, pid_t pid, const struct wake_opts *o, int64_t *rt)
{
    if (ch_connect(c, true) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return false;
    }
    for (int i = 0; i < o->oneway; i++) {
        sleep_us(200);                                /* let B go to sleep first */
        atomic_store(&c->sh->stamp, bench_now_ns());
        ch_send(c, 0);
        ch_recv(c, 1);
    }
    /* One clock read a round trip: each one's end is the next one's start, so a
     * sample holds a single clock read, as the floor's batches hold almost none. */
    int64_t t0 = bench_now_ns();
    for (int i = 0; i < o->rtt; i++) {
        ch_send(c, 0);
        ch_recv(c, 1);
        int64_t t1 = bench_now_ns();
        rt[i] = t1 - t0;
        t0 = t1;
        if (place_due(i)) {
            place_sample(&c->sh->where[0]);
            t0 = bench_now_ns();   /* the sample's own cost stays out of the next round trip */
        }
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Both processes of one transport's run, A here (pinned to --cpus' first CPU), B forked. */
static bool run_processes(enum kind kind, const char *fleet, const struct wake_opts *o, struct shared *sh,
                          int64_t *rt)
{
    int ctl[2];
    struct channel c;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, ctl) != 0)
        return false;
    bool opened = ch_open(&c, kind, sh, fleet, -1) == 0, ok = opened;
    /* Process-wide, inherited by B: park only and io_uring rows never spin. */
    uint32_t saved_spin = orbit_spin_ns();
    if (ok && kind != K_SPIN)
        orbit_set_spin_ns(0);
    pid_t pid = ok ? bench_fork() : -1;
    if (pid == 0) {
        close(ctl[0]);
        c.ctl = ctl[1];
        child_loop(&c, o);
    }
    close(ctl[1]);                  /* so B's exit is EOF here: A never waits on a dead B */
    c.ctl = ctl[0];
    ok = pid > 0 && parent_loop(&c, pid, o, rt);
    orbit_set_spin_ns(saved_spin);
    if (opened)
        ch_close(&c);
    if (is_orbit(kind))
        orbit_fleet_unlink(fleet);
    close(ctl[0]);
    return ok;
}

/* One transport in one pair: its samples into the histograms, its medians into the series. */
static bool run_one(enum kind kind, const char *fleet, const struct wake_opts *o, int pair, struct wake_figures *w)
{
    size_t bytes = sizeof(struct shared) + (size_t)o->oneway * sizeof(int64_t);
    struct shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int64_t *rt = calloc((size_t)o->rtt, sizeof *rt);
    bool ok = sh != MAP_FAILED && rt && kind_available(kind) && run_processes(kind, fleet, o, sh, rt);
    if (ok) {
        for (int i = 0; i < o->oneway; i++)
            hist_record(&w->oneway[kind], sh->samples[i]);
        for (int i = 0; i < o->rtt; i++)
            hist_record(&w->rtt[kind], rt[i]);
        series_put(&w->oneway_p50[kind], pair, (double)tool_percentile(sh->samples, (size_t)o->oneway, 0.5));
        series_put(&w->rtt_p50[kind], pair, (double)tool_percentile(rt, (size_t)o->rtt, 0.5));
        place_add(&w->where[kind], &sh->where[0], &sh->where[1]);
    }
    free(rt);
    if (sh != MAP_FAILED)
        munmap(sh, bytes);
    return ok;
}

static void print_hist_row(const char *name, const struct hist *h, const char *tail)
{
    printf("  %-27s", name);
    for (int p = 0; p < HIST_NPCT; p++)
        printf(" %8.2f", (double)hist_value_at(h, hist_pct[p]) / 1e3);
    printf(" %9.2f  %s\n", (double)h->max / 1e3, tail);
}

static void print_hist_head(const char *what)
{
    printf("%s (us)\n  %-27s %8s %8s %8s %8s %8s %9s\n", what, "transport", "p50", "p90", "p99", "p99.9",
           "p99.99", "max");
}

static void print_text(const struct bench_run *run, const struct wake_figures *w, const struct wake_opts *o)
{
    char a[64], b[64], where[96];
    printf("orbit-bench wake: %d pairs; per transport and pair %d one-way wakes (receiver parked) and %d "
           "ping-pong round trips, 1 byte, 2 processes, spin %u ns\n", o->pairs, o->oneway, o->rtt, orbit_spin_ns());
    run_print_text(run, stdout);
    print_hist_head("round trip, every sample of every pair");
    for (int k = 0; k < K_COUNT; k++)
        if (w->ran[k])
            print_hist_row(kind_name[k], &w->rtt[k], place_text(&w->where[k], where, sizeof where));
        else
            printf("  %-27s (not available here)\n", kind_name[k]);
    print_hist_head("\none-way wake");
    for (int k = 0; k < K_COUNT; k++)
        if (w->ran[k])
            print_hist_row(kind_name[k], &w->oneway[k], "");
    printf("\npaired, per pair    RTT p50 us: median [min-max]   pipe/it, RTT p50     it/floor, RTT p50\n");
    for (int k = 0; k < K_COUNT; k++) {
        if (!w->ran[k])
            continue;
        struct side_stats s = series_stats(&w->rtt_p50[k], false);
        struct ratio_stats vs_pipe = ratio_stats(&w->rtt_p50[K_PIPE], &w->rtt_p50[k], false);
        struct ratio_stats vs_floor = ratio_stats(&w->rtt_p50[k], &run->floor_ns, false);
        printf("  %-27s %6.2f [%.2f-%.2f]   %-24s %s\n", kind_name[k], s.median / 1e3, s.min / 1e3, s.max / 1e3,
               ratio_text(&vs_pipe, a, sizeof a), ratio_text(&vs_floor, b, sizeof b));
    }
    printf("  pipe/it above 1: faster than a pipe; it/floor: times the floor, the pair's busy-poll round trip\n");
}

static void print_json(const struct bench_run *run, const struct wake_figures *w, const struct wake_opts *o)
{
    printf("{\"bench\":\"wake\",");
    run_print_json(run, stdout);
    printf(",\"oneway_per_pair\":%d,\"rtt_per_pair\":%d,\"spin_ns\":%u,\"cpus\":[%d,%d],\"results\":[", o->oneway,
           o->rtt, orbit_spin_ns(), o->cpu[0], o->cpu[1]);
    for (int k = 0, n = 0; k < K_COUNT; k++) {
        if (!w->ran[k])
            continue;
        struct ratio_stats vs_pipe = ratio_stats(&w->rtt_p50[K_PIPE], &w->rtt_p50[k], false);
        struct ratio_stats vs_floor = ratio_stats(&w->rtt_p50[k], &run->floor_ns, false);
        printf("%s{\"transport\":\"%s\",\"rtt_ns\":", n++ ? "," : "", kind_key[k]);
        hist_print_json(&w->rtt[k], stdout);
        printf(",\"oneway_ns\":");
        hist_print_json(&w->oneway[k], stdout);
        printf(",\"rtt_p50_ns\":");
        series_print_json(&w->rtt_p50[k], false, stdout);
        printf(",\"oneway_p50_ns\":");
        series_print_json(&w->oneway_p50[k], false, stdout);
        printf(",\"rtt_p50_speedup_vs_pipe\":");
        ratio_print_json(&vs_pipe, stdout);
        printf(",\"rtt_p50_over_floor\":");
        ratio_print_json(&vs_floor, stdout);
        printf(",\"placement\":");
        place_print_json(&w->where[k], stdout);
        printf("}");
    }
    printf("]}\n");
}

static int write_outputs(const struct wake_figures *w, const struct wake_opts *o)
{
    int rc = 0;
    char name[64];
    for (int k = 0; o->hist_dir && k < K_COUNT; k++) {
        if (!w->ran[k])
            continue;
        snprintf(name, sizeof name, "wake-%s-rtt", kind_key[k]);
        rc |= hgrm_save("wake", o->hist_dir, name, &w->rtt[k]);
        snprintf(name, sizeof name, "wake-%s-oneway", kind_key[k]);
        rc |= hgrm_save("wake", o->hist_dir, name, &w->oneway[k]);
    }
    if (!o->plot)
        return rc;
    static struct chart charts[2];
    memset(charts, 0, sizeof charts);
    for (int c = 0; c < 2; c++) {
        snprintf(charts[c].title, sizeof charts[c].title, "orbit-bench wake: %s, 1 byte, 2 processes",
                 c ? "one-way wake (receiver parked)" : "ping-pong round trip");
        snprintf(charts[c].x_label, sizeof charts[c].x_label, "percentile");
        snprintf(charts[c].y_label, sizeof charts[c].y_label, "latency (us, log)");
        charts[c].axes = CHART_PERCENTILE_LOG;
        for (int k = 0; k < K_COUNT; k++)
            if (w->ran[k])
                plot_latency(&charts[c], kind_name[k], c ? &w->oneway[k] : &w->rtt[k]);
    }
    return rc | plot_save("wake", o->plot, charts, 2);
}

static void parse(int argc, char **argv, struct wake_opts *o)
{
    static const char help[] =
        "usage: orbit-bench wake [--oneway N] [--rtt N] [--pairs N] [--cpus A,B] [--hist DIR]\n"
        "                        [--plot FILE.svg] [--json]\n"
        "  --oneway N     one-way wake samples per transport and pair (default 500)\n"
        "  --rtt N        ping-pong round trips per transport and pair (default 5000)\n"
        "  --pairs N      rounds of every transport, order alternating (default 9, at most 100)\n"
        "  --cpus A,B     pin the pinging process to CPU A, the echoing one to CPU B (A may equal B)\n"
        "  --hist DIR     write DIR/wake-TRANSPORT-{rtt,oneway}.hgrm (HdrHistogram text, microseconds)\n"
        "  --plot FILE    write latency percentile curves of every transport as SVG\n"
        "  --json         one JSON object on stdout\n"
        "Percentiles are over every sample of every pair. The paired columns are per pair: its\n"
        "median round trip, a pipe's median over it in the same pair, and it over the floor (the\n"
        "busy-poll round trip between the same CPUs, taken just before the pair). The placement\n"
        "column says where each side ran (A pings, B echoes), how often it moved, and, unpinned\n"
        "or on one CPU, how often both were on the same CPU. See orbit-bench(1).\n";
    static const struct option opts[] = { { "oneway", required_argument, 0, 'o' },
                                          { "rtt", required_argument, 0, 'r' },
                                          { "pairs", required_argument, 0, 'n' },
                                          { "cpus", required_argument, 0, 'c' },
                                          { "hist", required_argument, 0, 'H' },
                                          { "plot", required_argument, 0, 'P' },
                                          { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' },
                                          { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    *o = (struct wake_opts){ .oneway = 500, .rtt = 5000, .pairs = PAIRS_DEFAULT, .cpu = { -1, -1 } };
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":o:r:n:c:H:P:jh", opts, NULL)) != -1;) {
        switch (c) {
        case 'o': o->oneway = cli_int(BENCH_TOOL, "--oneway", optarg, 1, 10000000); break;
        case 'r': o->rtt = cli_int(BENCH_TOOL, "--rtt", optarg, 1, 10000000); break;
        case 'n': o->pairs = pairs_arg("--pairs", optarg); break;
        case 'c': bench_cpu_pair("--cpus", optarg, o->cpu); break;
        case 'H': plot_check_path("--hist", optarg, true); o->hist_dir = optarg; break;
        case 'P': plot_check_path("--plot", optarg, false); o->plot = optarg; break;
        case 'j': o->json = true; break;
        case 'h': fputs(help, stdout); exit(0);
        case 'V': cli_version(BENCH_TOOL); exit(0);
        default: cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
    bench_check_cpus("--cpus", o->cpu);
}

int bench_wake(int argc, char **argv)
{
    struct wake_opts o;
    parse(argc, argv, &o);
    char fleet[64];
    snprintf(fleet, sizeof fleet, "bench-wake-%d", (int)getpid());
    bench_unlink_on_signal(fleet);
    static struct wake_figures w;
    static struct bench_run run;
    for (int k = 0; k < K_COUNT; k++) {
        hist_reset(&w.oneway[k]);
        hist_reset(&w.rtt[k]);
        place_begin(&w.where[k], o.cpu);
    }
    run_begin(&run, o.pairs, o.cpu);
    cpu_set_t all;
    sched_getaffinity(0, sizeof all, &all);
    for (int pair = 0; pair < o.pairs; pair++) {
        run_floor(&run, pair);
        place_pin(o.cpu[0]);
        for (int i = 0; i < K_COUNT; i++) {
            enum kind k = run_orbit_first(pair) ? (enum kind)i : (enum kind)(K_COUNT - 1 - i);
            w.ran[k] = run_one(k, fleet, &o, pair, &w) || w.ran[k];
        }
        sched_setaffinity(0, sizeof all, &all);
    }
    run_end(&run);
    if (o.json)
        print_json(&run, &w, &o);
    else
        print_text(&run, &w, &o);
    return write_outputs(&w, &o);
}
