/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench stream --procs N / --scale: N ping-pong pairs at once (2N
 * processes), each pair a client and an echo exchanging 64-byte messages
 * through its own orbit stream, beside N socketpair pairs doing the same.
 * Prints round trips per second of all pairs together per pair count, both sides
 * run back to back --pairs times, the order alternating.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/stream.h>
#include "bench.h"
#include "bench_stream_scale.h"
#include "bench_clock.h"
#include "bench_pair.h"
#include "bench_plot.h"

#define SCALE_MSG 64
#define SCALE_PAIRS_MAX 128

struct scale_shared {
    _Atomic int ready, go, failed;
    int64_t elapsed_ns[SCALE_PAIRS_MAX];
};

static const struct orbit_stream_spec scale_spec = { .kind = 242, .lane_capacity = 4, .buffer_bytes = 65536 };

static struct orbit_fleet *scale_join(const char *fleet, int node, int pairs)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = (uint16_t)(2 * pairs + 1);
    o.node = node;
    struct orbit_fleet *f = NULL;
    return orbit_fleet_join(fleet, &o, &f) == 0 ? f : NULL;
}

static void start_line(struct scale_shared *sh)
{
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go) && !atomic_load(&sh->failed))
        sched_yield();
}

/* One side of an orbit pair: the client creates the stream and sends the ticket down fd. */
static int orbit_side(const char *fleet, int pair, int pairs, bool client, int fd, int rounds,
                      struct scale_shared *sh)
{
    struct orbit_fleet *f = scale_join(fleet, 1 + 2 * pair + !client, pairs);
    struct orbit_streams *s = NULL;
    struct orbit_endpoint *ep = NULL;
    struct orbit_ticket t;
    if (!f || orbit_streams_open(f, &scale_spec, &s) != 0)
        return 2;
    if (client ? orbit_streams_create(s, &ep, &t) != 0 : !bench_get(fd, &t, sizeof t))
        return 3;
    if (client)
        bench_put(fd, &t, sizeof t);
    else if (orbit_streams_open_ticket(s, &t, &ep) != 0)
        return 4;
    unsigned char msg[SCALE_MSG] = { 1 };
    start_line(sh);
    int64_t t0 = bench_now_ns();
    for (int i = 0; i < rounds; i++) {
        bool ok = client ? orbit_endpoint_write_all(ep, msg, SCALE_MSG, -1) == 0 &&
                               orbit_endpoint_read_exact(ep, msg, SCALE_MSG, -1) == 0
                         : orbit_endpoint_read_exact(ep, msg, SCALE_MSG, -1) == 0 &&
                               orbit_endpoint_write_all(ep, msg, SCALE_MSG, -1) == 0;
        if (!ok)
            return 5;
    }
    if (client)
        sh->elapsed_ns[pair] = bench_now_ns() - t0;
    else
        orbit_endpoint_finish(ep);
    orbit_endpoint_close(ep);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}

static bool fd_all(int fd, unsigned char *p, size_t n, bool rd)
{
    while (n) {
        ssize_t r = rd ? read(fd, p, n) : write(fd, p, n);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static int sock_side(int pair, bool client, int fd, int rounds, struct scale_shared *sh)
{
    unsigned char msg[SCALE_MSG] = { 1 };
    start_line(sh);
    int64_t t0 = bench_now_ns();
    for (int i = 0; i < rounds; i++)
        if (!fd_all(fd, msg, SCALE_MSG, !client) || !fd_all(fd, msg, SCALE_MSG, client))
            return 5;
    if (client)
        sh->elapsed_ns[pair] = bench_now_ns() - t0;
    return 0;
}

/* Round trips per second of `pairs` pairs at once, or -1. */
static double scale_run(const char *fleet, bool orbit, int pairs, int rounds, struct scale_shared *sh)
{
    memset(sh, 0, sizeof *sh);
    pid_t kids[2 * SCALE_PAIRS_MAX];
    int n = 0;
    for (int p = 0; p < pairs; p++) {
        int fd[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd) != 0)
            break;
        for (int side = 0; side < 2; side++) {
            if ((kids[n] = bench_fork()) == 0) {
                close(fd[!side]);
                int rc = orbit ? orbit_side(fleet, p, pairs, side == 0, fd[side], rounds, sh)
                               : sock_side(p, side == 0, fd[side], rounds, sh);
                if (rc)
                    atomic_store(&sh->failed, 1);
                _exit(rc);
            }
            n += kids[n] > 0;
        }
        close(fd[0]);
        close(fd[1]);
    }
    if (n < 2 * pairs)
        atomic_store(&sh->failed, 1);
    while (atomic_load(&sh->ready) < n && !atomic_load(&sh->failed))
        sched_yield();
    atomic_store(&sh->go, 1);
    int64_t slowest = 1;
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            atomic_store(&sh->failed, 1);
    }
    for (int p = 0; p < pairs; p++)
        slowest = sh->elapsed_ns[p] > slowest ? sh->elapsed_ns[p] : slowest;
    return atomic_load(&sh->failed) ? -1 : (double)pairs * rounds * 1e9 / (double)slowest;
}

static void print_row(const struct stream_scale_opts *o, int p, int lo, const struct series *orbit,
                      const struct series *sock)
{
    struct side_stats so = series_stats(orbit, true), sk = series_stats(sock, true);
    struct ratio_stats r = ratio_stats(orbit, sock, true);
    char rt[48];
    if (!o->json) {
        printf("%-6d %18.0f %18.0f   %s\n", p, so.median, sk.median, ratio_text(&r, rt, sizeof rt));
        return;
    }
    printf("%s{\"processes\":%d,\"pairs\":%d,\"orbit_rt_per_s\":", p > lo ? "," : "", 2 * p, p);
    series_print_json(orbit, true, stdout);
    printf(",\"socketpair_rt_per_s\":");
    series_print_json(sock, true, stdout);
    printf(",\"orbit_over_socketpair\":");
    ratio_print_json(&r, stdout);
    printf("}");
}

/* One process count: pairs rounds of orbit and socketpair back to back, the order alternating. */
static int scale_point(const struct stream_scale_opts *o, struct bench_run *run, int p, struct scale_shared *sh,
                       struct series *orbit, struct series *sock)
{
    for (int i = 0; i < o->pairs; i++) {
        run_floor(run, i);
        for (int side = 0; side < 2; side++) {
            bool is_orbit = (side == 0) == run_orbit_first(i);
            double v = scale_run(o->fleet, is_orbit, p, o->rounds, sh);
            if (is_orbit)
                orbit_fleet_unlink(o->fleet);
            if (v < 0)
                return 1;
            series_put(is_orbit ? orbit : sock, i, v);
        }
    }
    return 0;
}

int bench_stream_scale(const struct stream_scale_opts *o)
{
    int lo = o->procs ? o->procs : 1, hi = o->procs ? o->procs : bench_cpus();
    hi = hi > SCALE_PAIRS_MAX ? SCALE_PAIRS_MAX : hi;
    struct scale_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    static struct bench_run run;
    static struct series orbit[SCALE_PAIRS_MAX + 1], sock[SCALE_PAIRS_MAX + 1];
    const int none[2] = { -1, -1 };
    run_begin(&run, o->pairs, none);
    int status = 0;
    for (int p = lo; p <= hi && status == 0; p++)
        status = scale_point(o, &run, p, sh, &orbit[p], &sock[p]);
    run_end(&run);
    munmap(sh, sizeof *sh);
    if (status) {
        fprintf(stderr, "orbit-bench stream: a scaling run failed\n");
        return status;
    }
    if (o->json) {
        printf("{\"bench\":\"stream_scale\",");
        run_print_json(&run, stdout);
        printf(",\"message_bytes\":%d,\"rounds_per_pair\":%d,\"baseline\":\"socketpair\",\"results\":[",
               SCALE_MSG, o->rounds);
    } else {
        printf("orbit-bench stream: 64-byte ping-pong, N pairs at once (2N processes), %d round trips per pair\n",
               o->rounds);
        run_print_text(&run, stdout);
        printf("%-6s %18s %18s   %s\n", "pairs", "orbit rt/s", "socketpair rt/s", "orbit/socketpair");
    }
    for (int p = lo; p <= hi; p++)
        print_row(o, p, lo, &orbit[p], &sock[p]);
    if (o->json)
        printf("]}\n");
    if (!o->plot)
        return 0;
    static struct chart ch;
    snprintf(ch.title, sizeof ch.title, "orbit-bench stream --scale: 64-byte ping-pong, N pairs at once");
    snprintf(ch.x_label, sizeof ch.x_label, "pairs of processes");
    snprintf(ch.y_label, sizeof ch.y_label, "round trips/s, all pairs");
    struct chart_series *a = chart_add(&ch, "orbit stream"), *b = chart_add(&ch, "socketpair");
    for (int p = lo; p <= hi; p++) {
        plot_scale_point(a, p, &orbit[p], 1);
        plot_scale_point(b, p, &sock[p], 1);
    }
    return plot_save("stream", o->plot, &ch, 1);
}
