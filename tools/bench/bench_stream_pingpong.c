/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench stream's 64-byte ping-pong: orbit stream, two pipes, a socketpair;
 * every round trip into the transport's histogram, each pair's median into its
 * series, both sides' CPUs sampled on the same round trips.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/stream.h>
#include "bench.h"
#include "bench_clock.h"
#include "bench_stream.h"

const char *const pp_name[PP_COUNT] = { "orbit stream", "pipe", "socketpair" };
const char *const pp_key[PP_COUNT] = { "orbit", "pipe", "socketpair" };

/* ---- 64-byte ping-pong -------------------------------------------------------- */

#define PP_BYTES 64
#define PP_WARMUP 500

/* A pair's round trips into the transport's figures; where[] the two sides' CPU logs. */
static void pp_record(struct bench *b, enum pp_kind k, int pair, int64_t *rt, const struct place_log *where)
{
    struct pp_figures *f = &b->pp[k];
    for (int i = 0; i < b->rounds; i++)
        hist_record(&f->rtt, rt[i]);
    series_put(&f->p50, pair, (double)tool_percentile(rt, (size_t)b->rounds, 0.50));
    place_add(&f->where, &where[0], &where[1]);
    f->ok = true;
}

/*
 * After round trip i began at t0: record it (past the warm-up) and return the
 * next one's start. One clock read a round trip: each one's end is the next
 * one's start, so a sample holds a single clock read, as the floor's batches
 * hold almost none; a CPU sample's own cost stays out of the next round trip.
 */
static int64_t pp_stamp(int64_t *rt, int i, int64_t t0, struct place_log *where)
{
    int64_t t1 = bench_now_ns();
    if (i < PP_WARMUP)
        return t1;
    rt[i - PP_WARMUP] = t1 - t0;
    if (!place_due(i - PP_WARMUP))
        return t1;
    place_sample(where);
    return bench_now_ns();
}

static void orbit_echo(struct bench *b, struct ctl *c, int total, struct place_log *where)
{
    struct orbit_fleet *f = bs_join_node(b->fleet, 1);
    struct orbit_stream_spec spec = bs_spec_for(0);
    struct orbit_streams *s = NULL;
    struct orbit_ticket t;
    struct orbit_endpoint *ep = NULL;
    if (!f || orbit_streams_open(f, &spec, &s) != 0 || !bench_get(c->down[0], &t, sizeof t) ||
        orbit_streams_open_ticket(s, &t, &ep) != 0)
        _exit(2);
    bench_put(c->up[1], "r", 1);
    unsigned char msg[PP_BYTES];
    for (int i = 0; i < total; i++) {
        if (orbit_endpoint_read_exact(ep, msg, PP_BYTES, -1) != 0 ||
            orbit_endpoint_write_all(ep, msg, PP_BYTES, -1) != 0)
            _exit(4);
        if (i >= PP_WARMUP && place_due(i - PP_WARMUP))
            place_sample(&where[1]);
    }
    orbit_endpoint_finish(ep);   /* a clean end: closing unfinished would reset the last echo */
    orbit_endpoint_close(ep);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    _exit(0);
}

void bs_orbit_pingpong(struct bench *b, int pair)
{
    struct ctl c;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    int total = b->rounds + PP_WARMUP;
    struct place_log *where = place_logs_map();
    if (!where || bs_ctl_open(&c) < 0 || orbit_streams_create(b->s[0], &a, &t) != 0) {
        place_logs_unmap(where);
        return;
    }
    pid_t pid = bs_spawn(b);
    if (pid == 0)
        orbit_echo(b, &c, total, where);
    bench_put(c.down[1], &t, sizeof t);
    int64_t *rt = calloc((size_t)b->rounds, sizeof *rt);
    unsigned char msg[PP_BYTES] = { 1 };
    char ready;
    bool ok = bench_get(c.up[0], &ready, 1);
    int64_t t0 = bench_now_ns();
    for (int i = 0; ok && i < total; i++) {
        ok = orbit_endpoint_write_all(a, msg, PP_BYTES, -1) == 0 &&
             orbit_endpoint_read_exact(a, msg, PP_BYTES, -1) == 0;
        t0 = pp_stamp(rt, i, t0, &where[0]);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (ok && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        pp_record(b, PP_ORBIT, pair, rt, where);
    free(rt);
    orbit_endpoint_close(a);
    bs_ctl_close(&c);
    place_logs_unmap(where);
}

static bool fd_full(int fd, void *p, size_t n, bool rd)
{
    char *c = p;
    while (n) {
        ssize_t r = rd ? read(fd, c, n) : write(fd, c, n);
        if (r <= 0)
            return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

static void fd_echo(int c_in, int c_out, int total, struct place_log *where)
{
    unsigned char m[PP_BYTES];
    for (int i = 0; i < total; i++) {
        if (!fd_full(c_in, m, PP_BYTES, true) || !fd_full(c_out, m, PP_BYTES, false))
            _exit(4);
        if (i >= PP_WARMUP && place_due(i - PP_WARMUP))
            place_sample(&where[1]);
    }
    _exit(0);
}

/* Two pipes, or one socketpair used both ways. */
void bs_fd_pingpong(struct bench *b, bool sock, int pair)
{
    int ab[2], ba[2] = { -1, -1 };
    struct place_log *where = place_logs_map();
    if (!where || (sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, ab) != 0 : (pipe(ab) != 0 || pipe(ba) != 0))) {
        place_logs_unmap(where);
        return;
    }
    int p_out = ab[1], p_in = sock ? ab[1] : ba[0], c_in = ab[0], c_out = sock ? ab[0] : ba[1];
    int total = b->rounds + PP_WARMUP;
    pid_t pid = bs_spawn(b);
    if (pid == 0)
        fd_echo(c_in, c_out, total, where);
    int64_t *rt = calloc((size_t)b->rounds, sizeof *rt);
    unsigned char msg[PP_BYTES] = { 1 };
    bool ok = true;
    int64_t t0 = bench_now_ns();
    for (int i = 0; ok && i < total; i++) {
        ok = fd_full(p_out, msg, PP_BYTES, false) && fd_full(p_in, msg, PP_BYTES, true);
        t0 = pp_stamp(rt, i, t0, &where[0]);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (ok && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        pp_record(b, sock ? PP_SOCK : PP_PIPE, pair, rt, where);
    free(rt);
    close(ab[0]);
    close(ab[1]);
    if (!sock) {
        close(ba[0]);
        close(ba[1]);
    }
    place_logs_unmap(where);
}

