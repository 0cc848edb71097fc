/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench stream --procs N / --scale: N ping-pong pairs at once (2N
 * processes), each pair a client and an echo exchanging 64-byte messages
 * through its own orbit stream, beside N socketpair pairs doing the same.
 * Prints round trips per second of all pairs together per pair count.
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
#include "tool.h"
#include "bench_stream_scale.h"
#include "bench_clock.h"

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

int bench_stream_scale(const char *fleet, int procs, int rounds, bool json)
{
    int lo = procs ? procs : 1, hi = procs ? procs : bench_cpus();
    hi = hi > SCALE_PAIRS_MAX ? SCALE_PAIRS_MAX : hi;
    struct scale_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    if (json)
        printf("{\"bench\":\"stream_scale\",\"message_bytes\":%d,\"rounds_per_pair\":%d,\"cpus\":%d,"
               "\"baseline\":\"socketpair\",\"results\":[", SCALE_MSG, rounds, bench_cpus());
    else
        printf("64-byte ping-pong, N pairs at once (2N processes), %d round trips per pair\n\n"
               "%-6s %18s %18s %12s\n", rounds, "pairs", "orbit rt/s", "socketpair rt/s", "orbit/sock");
    int status = 0;
    for (int p = lo; p <= hi && status == 0; p++) {
        double o = scale_run(fleet, true, p, rounds, sh), k = scale_run(fleet, false, p, rounds, sh);
        orbit_fleet_unlink(fleet);
        if (o < 0 || k < 0) {
            status = 1;
            break;
        }
        if (json)
            printf("%s{\"processes\":%d,\"pairs\":%d,\"orbit_rt_per_s\":%.0f,\"socketpair_rt_per_s\":%.0f,"
                   "\"orbit_over_socketpair\":%.3f}", p > lo ? "," : "", 2 * p, p, o, k, o / k);
        else
            printf("%-6d %18.0f %18.0f %11.2fx\n", p, o, k, o / k);
    }
    if (json)
        printf("]}\n");
    munmap(sh, sizeof *sh);
    if (status)
        fprintf(stderr, "orbit-bench stream: a scaling run failed\n");
    return status;
}
