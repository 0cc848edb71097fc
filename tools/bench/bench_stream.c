/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench stream: one-way throughput between two processes through an
 * orbit stream (rings of 64 KiB and 1 MiB; waiting in futex(2) or through
 * io_uring) beside a pipe (default and 1 MiB F_SETPIPE_SZ), an AF_UNIX
 * socketpair and single-thread memcpy, for chunks of 4 KiB, 64 KiB and 1 MiB;
 * parks per ring-ful; and a 64-byte ping-pong beside a pipe and a socketpair.
 */
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/stream.h>
#include <orbit/uring.h>
#include "cli.h"
#include "bench.h"
#include "bench_stream.h"
#include "bench_stream_scale.h"
#include "bench_clock.h"
#include "bench_place.h"
#include "bench_plot.h"

struct orbit_result { double gbps, parks_per_ringful; bool ok; };

/* A prep that filled the SQE: submit and wait for its completion. One that answered
 * "ready" leaves a NOP behind that rides along with the next submit, as an event
 * loop would, instead of costing a system call of its own. */
static int uring_wait(struct io_uring *ring, struct io_uring_sqe *sqe, int prep_rc)
{
    if (prep_rc < 0)
        return prep_rc;
    if (prep_rc == 1) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
        return 0;
    }
    io_uring_submit_and_wait(ring, 1);
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(ring, &cqe) == 0)
        io_uring_cqe_seen(ring, cqe);
    return 0;
}

/* An SQE, flushing queued NOPs first when the ring is full. */
static struct io_uring_sqe *next_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
    }
    return sqe;
}

static int uring_write_all(struct orbit_endpoint *ep, struct io_uring *ring, const unsigned char *buf,
                           size_t len, size_t quarter)
{
    for (size_t off = 0; off < len;) {
        ssize_t r = orbit_endpoint_try_write(ep, buf + off, len - off);
        if (r > 0) {
            off += (size_t)r;
            continue;
        }
        if (r != -ORBIT_EAGAIN)
            return (int)r;
        size_t need = len - off < quarter ? len - off : quarter;
        struct io_uring_sqe *sqe = next_sqe(ring);
        int rc = uring_wait(ring, sqe, orbit_endpoint_prep_wait_writable_exact(ep, need, sqe));
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int uring_read(struct orbit_endpoint *ep, struct io_uring *ring, unsigned char *buf, size_t len)
{
    for (;;) {
        ssize_t r = orbit_endpoint_try_read(ep, buf, len);
        if (r != -ORBIT_EAGAIN)
            return (int)r;
        struct io_uring_sqe *sqe = next_sqe(ring);
        int rc = uring_wait(ring, sqe, orbit_endpoint_prep_wait_readable(ep, sqe));
        if (rc < 0)
            return rc;
    }
}

struct orbit_job { struct bench *b; int ring; size_t chunk; bool uring; struct ctl c; };

/* The writer process: opens the ticket, waits for go, writes b->bytes, reports its parks. */
static void orbit_writer(struct orbit_job *j)
{
    struct orbit_fleet *f = bs_join_node(j->b->fleet, 1);
    struct orbit_stream_spec spec = bs_spec_for(j->ring);
    struct orbit_streams *s = NULL;
    struct orbit_ticket t;
    struct orbit_endpoint *ep = NULL;
    struct io_uring ring;
    if (!f || orbit_streams_open(f, &spec, &s) != 0 || !bench_get(j->c.down[0], &t, sizeof t) ||
        orbit_streams_open_ticket(s, &t, &ep) != 0 || (j->uring && io_uring_queue_init(8, &ring, 0) != 0))
        _exit(2);
    unsigned char *buf = malloc(j->chunk);
    memset(buf, 0x5a, j->chunk);
    char go;
    bench_put(j->c.up[1], "r", 1);
    if (!bench_get(j->c.down[0], &go, 1))
        _exit(3);
    for (uint64_t sent = 0; sent < j->b->bytes; sent += j->chunk) {
        int rc = j->uring ? uring_write_all(ep, &ring, buf, j->chunk, spec.buffer_bytes / 4)
                          : orbit_endpoint_write_all(ep, buf, j->chunk, -1);
        if (rc != 0)
            _exit(4);
    }
    orbit_endpoint_finish(ep);
    struct orbit_stream_stats st;
    orbit_streams_stats(s, &st);
    bench_put(j->c.up[1], &st.parks, sizeof st.parks);
    orbit_endpoint_close(ep);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    _exit(0);
}

static struct orbit_result orbit_run(struct bench *b, int ring_i, size_t chunk, bool uring)
{
    struct orbit_result res = { 0, 0, false };
    struct orbit_job j = { b, ring_i, chunk, uring, { { -1, -1 }, { -1, -1 } } };
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    struct io_uring ring;
    if (bs_ctl_open(&j.c) < 0 || orbit_streams_create(b->s[ring_i], &a, &t) != 0)
        return res;
    if (uring && io_uring_queue_init(8, &ring, 0) != 0) {
        orbit_endpoint_close(a);
        return res;
    }
    pid_t pid = bs_spawn(b);
    if (pid == 0)
        orbit_writer(&j);
    unsigned char *buf = malloc(chunk);
    char ready;
    bench_put(j.c.down[1], &t, sizeof t);
    struct orbit_stream_stats before, after;
    orbit_streams_stats(b->s[ring_i], &before);
    uint64_t got = 0, writer_parks = 0;
    int64_t t0 = 0, t1 = 0;
    if (bench_get(j.c.up[0], &ready, 1)) {
        t0 = bench_now_ns();
        bench_put(j.c.down[1], "g", 1);
        for (;;) {
            ssize_t r = uring ? uring_read(a, &ring, buf, chunk) : orbit_endpoint_read(a, buf, chunk, -1);
            if (r <= 0)
                break;
            got += (uint64_t)r;
        }
        t1 = bench_now_ns();
        bench_get(j.c.up[0], &writer_parks, sizeof writer_parks);
    }
    orbit_streams_stats(b->s[ring_i], &after);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && got == b->bytes && t1 > t0) {
        res.gbps = (double)got / (double)(t1 - t0);
        res.parks_per_ringful = (double)(after.parks - before.parks + writer_parks) /
                                ((double)got / ring_sizes[ring_i]);
        res.ok = true;
    }
    if (uring)
        io_uring_queue_exit(&ring);
    free(buf);
    orbit_endpoint_close(a);
    bs_ctl_close(&j.c);
    return res;
}

/* ---- kernel baselines ------------------------------------------------------ */

static int fd_pair(enum alt kind, int fd[2])
{
    if (kind == ALT_SOCK)
        return socketpair(AF_UNIX, SOCK_STREAM, 0, fd);
    if (pipe(fd) != 0)
        return -1;
    if (kind == ALT_PIPE1M && fcntl(fd[1], F_SETPIPE_SZ, 1 << 20) < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    return 0;
}

static double fd_run(const struct bench *b, enum alt kind, size_t chunk)
{
    int fd[2], go[2];
    if (fd_pair(kind, fd) != 0)
        return 0;
    if (pipe(go) != 0) {
        close(fd[0]);
        close(fd[1]);
        return 0;
    }
    unsigned char *buf = malloc(chunk);
    memset(buf, 0x5a, chunk);
    pid_t pid = bs_spawn(b);
    if (pid == 0) {
        close(fd[0]);
        char g;
        if (read(go[0], &g, 1) != 1)
            _exit(3);
        for (uint64_t sent = 0; sent < b->bytes;) {
            ssize_t w = write(fd[1], buf, chunk);
            if (w <= 0)
                _exit(4);
            sent += (uint64_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    uint64_t got = 0;
    int64_t t0 = bench_now_ns();
    bench_put(go[1], "g", 1);
    for (ssize_t r; (r = read(fd[0], buf, chunk)) > 0;)
        got += (uint64_t)r;
    int64_t t1 = bench_now_ns();
    int st = 0;
    waitpid(pid, &st, 0);
    close(fd[0]);
    close(go[0]);
    close(go[1]);
    free(buf);
    return got >= b->bytes && t1 > t0 ? (double)got / (double)(t1 - t0) : 0;
}

static double memcpy_run(size_t chunk, uint64_t bytes)
{
    unsigned char *src = malloc(chunk), *dst = malloc(chunk);
    memset(src, 0x5a, chunk);
    memset(dst, 0, chunk);
    int64_t t0 = bench_now_ns();
    for (uint64_t done = 0; done < bytes; done += chunk) {
        memcpy(dst, src, chunk);
        __asm__ __volatile__("" : : "r"(dst) : "memory");   /* keep every copy */
    }
    int64_t t1 = bench_now_ns();
    free(src);
    free(dst);
    return t1 > t0 ? (double)bytes / (double)(t1 - t0) : 0;
}

/* ---- main ------------------------------------------------------------------------- */

static int open_tables(struct bench *b)
{
    snprintf(b->fleet, sizeof b->fleet, "bench-stream-%d", (int)getpid());
    bench_unlink_on_signal(b->fleet);
    b->f = bs_join_node(b->fleet, 0);
    if (!b->f)
        return -1;
    for (int r = 0; r < NRING; r++) {
        struct orbit_stream_spec spec = bs_spec_for(r);
        int rc = orbit_streams_open(b->f, &spec, &b->s[r]);
        if (rc != 0) {
            fprintf(stderr, "orbit-bench stream: open: %s\n", orbit_strerror(rc));
            return -1;
        }
    }
    return 0;
}

static void close_tables(struct bench *b)
{
    for (int r = 0; r < NRING; r++)
        orbit_streams_close(b->s[r]);
    if (b->f)
        orbit_fleet_leave(b->f);
    orbit_fleet_unlink(b->fleet);
}

static void run_baselines(struct bench *b, int c, int pair)
{
    for (int k = 0; k < ALT_COUNT; k++)
        series_put(&b->alt[c][k], pair, k == ALT_MEMCPY ? memcpy_run(chunk_sizes[c], b->bytes)
                                                        : fd_run(b, (enum alt)k, chunk_sizes[c]));
}

static void run_orbit_cells(struct bench *b, int c, int pair)
{
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING && b->modes[m]; r++) {
            struct orbit_result o = orbit_run(b, r, chunk_sizes[c], m == 1);
            struct orbit_cell *cell = &b->orbit[c][r][m];
            series_put(&cell->gbps, pair, o.ok ? o.gbps : 0);
            series_put_count(&cell->parks, pair, o.ok ? o.parks_per_ringful : -1);
            cell->ok = cell->ok || o.ok;
        }
}

/* One pair: the floor, then every configuration and its baselines back to back, orbit
 * first in even pairs and last in odd ones. */
static void run_pair(struct bench *b, int pair)
{
    bool orbit_first = run_orbit_first(pair);
    run_floor(&b->run, pair);
    for (int c = 0; c < NCHUNK; c++) {
        if (orbit_first)
            run_orbit_cells(b, c, pair);
        run_baselines(b, c, pair);
        if (!orbit_first)
            run_orbit_cells(b, c, pair);
    }
    if (orbit_first)
        bs_orbit_pingpong(b, pair);
    bs_fd_pingpong(b, false, pair);
    bs_fd_pingpong(b, true, pair);
    if (!orbit_first)
        bs_orbit_pingpong(b, pair);
}

static void usage(void)
{
    fputs("usage: orbit-bench stream [--bytes MiB] [--rounds N] [--pairs N] [--mode blocking|uring|both]\n"
          "                          [--cpus R,W] [--hist DIR] [--plot FILE.svg] [--json]\n"
          "       orbit-bench stream (--procs N | --scale) [--rounds N] [--pairs N] [--plot FILE.svg] [--json]\n"
          "  --bytes MiB   bytes moved one way per throughput run (default 128)\n"
          "  --rounds N    64-byte ping-pong round trips per transport and pair (default 5000, after 500\n"
          "                warm-up; with --procs/--scale, per pair of processes, default 20000)\n"
          "  --pairs N     run every configuration beside its baselines N times, the order\n"
          "                alternating (default 9, at most 100; --repeat N is the same)\n"
          "  --mode M      how orbit waits: blocking (futex), uring (io_uring FUTEX_WAIT), both (default)\n"
          "  --cpus R,W    pin the reader (and ping-pong initiator) to CPU R, the writer to CPU W\n"
          "  --hist DIR    write DIR/stream-pingpong-TRANSPORT.hgrm (HdrHistogram text, microseconds)\n"
          "  --plot FILE   write the ping-pong percentile curves (or with --scale the scale curve) as SVG\n"
          "  --procs N     instead: N ping-pong pairs at once (2N processes) beside N socketpair\n"
          "                pairs, round trips per second of all (1..128)\n"
          "  --scale       the same for every pair count from 1 to the CPUs this process may use\n"
          "  --json        one JSON object on stdout\n"
          "Every throughput figure is one writer process and one reader process; orbit's\n"
          "rings are 64 KiB and 1 MiB, chunks 4 KiB, 64 KiB and 1 MiB, side by side with a\n"
          "pipe (default and 1 MiB F_SETPIPE_SZ), an AF_UNIX socketpair and memcpy. A ratio\n"
          "is the median over the pairs of orbit's figure over the baseline's in the same pair,\n"
          "[min-max] its spread. See orbit-bench(1) on reading the output.\n", stdout);
}

static void parse_mode(struct bench *b, const char *arg)
{
    b->modes[0] = strcmp(arg, "uring") != 0;
    b->modes[1] = strcmp(arg, "blocking") != 0;
    if (strcmp(arg, "uring") && strcmp(arg, "blocking") && strcmp(arg, "both"))
        cli_bad(BENCH_TOOL, "--mode", arg, "not blocking, uring or both");
}

/* Options into b; --procs into *procs, --scale into *scale. */
static void parse(int argc, char **argv, struct bench *b, int *procs, bool *scale, bool *json)
{
    static const struct option opts[] = { { "bytes", required_argument, 0, 'b' },
                                          { "rounds", required_argument, 0, 'r' },
                                          { "pairs", required_argument, 0, 'n' },
                                          { "repeat", required_argument, 0, 'n' },
                                          { "mode", required_argument, 0, 'm' },
                                          { "cpus", required_argument, 0, 'c' },
                                          { "procs", required_argument, 0, 'p' },
                                          { "scale", no_argument, 0, 'S' },
                                          { "hist", required_argument, 0, 'H' },
                                          { "plot", required_argument, 0, 'P' },
                                          { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' },
                                          { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    int mib = 128;
    b->rounds = 0;
    b->pairs = PAIRS_DEFAULT;
    b->cpu[0] = b->cpu[1] = -1;
    b->modes[0] = b->modes[1] = true;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":b:r:n:m:c:p:H:P:jh", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': *procs = cli_int(BENCH_TOOL, "--procs", optarg, 1, 128); break;
        case 'S': *scale = true; break;
        case 'b': mib = cli_int(BENCH_TOOL, "--bytes", optarg, 1, 1 << 20); break;
        case 'r': b->rounds = cli_int(BENCH_TOOL, "--rounds", optarg, 1, 10000000); break;
        case 'n': b->pairs = pairs_arg(argv[optind - 1][2] == 'r' ? "--repeat" : "--pairs", optarg); break;
        case 'm': parse_mode(b, optarg); break;
        case 'c': bench_cpu_pair("--cpus", optarg, b->cpu); break;
        case 'H': plot_check_path("--hist", optarg, true); b->hist_dir = optarg; break;
        case 'P': plot_check_path("--plot", optarg, false); b->plot = optarg; break;
        case 'j': *json = true; break;
        case 'h': usage(); exit(0);
        case 'V': cli_version(BENCH_TOOL); exit(0);
        default: cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
    bench_check_cpus("--cpus", b->cpu);
    if (*procs && *scale)
        cli_usage_error(BENCH_TOOL, "--procs or --scale, not both");
    if ((*procs || *scale) && (b->hist_dir || b->cpu[0] >= 0))
        cli_usage_error(BENCH_TOOL, "--hist and --cpus are for the two-process runs, not --procs or --scale");
    b->bytes = (uint64_t)mib << 20;
}

int bench_stream(int argc, char **argv)
{
    static struct bench b;
    int procs = 0;
    bool json = false, scale = false;
    parse(argc, argv, &b, &procs, &scale, &json);
    if (procs || scale) {
        snprintf(b.fleet, sizeof b.fleet, "bench-stream-%d", (int)getpid());
        bench_unlink_on_signal(b.fleet);
        struct stream_scale_opts so = { b.fleet, procs, b.rounds ? b.rounds : 20000, b.pairs, json, b.plot };
        return bench_stream_scale(&so);
    }
    if (!b.rounds)
        b.rounds = 5000;
    if (b.modes[1] && !orbit_uring_futex_supported()) {
        fprintf(stderr, "orbit-bench stream: io_uring mode skipped, blocking mode only: %s\n",
                orbit_uring_futex_status());
        b.modes[1] = false;
    }
    for (int k = 0; k < PP_COUNT; k++) {
        hist_reset(&b.pp[k].rtt);
        place_begin(&b.pp[k].where, b.cpu);
    }
    run_begin(&b.run, b.pairs, b.cpu);
    place_pin(b.cpu[0]);   /* the parent reads */
    if (open_tables(&b) != 0) {
        close_tables(&b);
        return 1;
    }
    for (int pair = 0; pair < b.pairs; pair++)
        run_pair(&b, pair);
    close_tables(&b);
    run_end(&b.run);
    if (json)
        bs_print_json(&b);
    else
        bs_print_text(&b);
    return bs_write_outputs(&b);
}
