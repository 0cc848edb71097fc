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
#include "tool.h"
#include "bench_stream_scale.h"
#include "bench_clock.h"
#include "bench_hist.h"
#include "bench_pair.h"
#include "bench_place.h"
#include "bench_plot.h"

#define NCHUNK 3
#define NRING  2
static const size_t chunk_sizes[NCHUNK] = { 4096, 65536, 1u << 20 };
static const uint32_t ring_sizes[NRING] = { 65536, 1u << 20 };
static const uint8_t ring_kinds[NRING] = { 240, 241 };

enum alt { ALT_PIPE, ALT_PIPE1M, ALT_SOCK, ALT_MEMCPY, ALT_COUNT };
static const char *alt_name[ALT_COUNT] = { "pipe", "pipe 1M", "socketpair", "memcpy" };
static const char *alt_key[ALT_COUNT] = { "pipe", "pipe_1m", "socketpair", "memcpy" };

struct orbit_result { double gbps, parks_per_ringful; bool ok; };

enum pp_kind { PP_ORBIT, PP_PIPE, PP_SOCK, PP_COUNT };
static const char *pp_name[PP_COUNT] = { "orbit stream", "pipe", "socketpair" };
static const char *pp_key[PP_COUNT] = { "orbit", "pipe", "socketpair" };

/* One ping-pong transport over all pairs: every sample, each pair's median, where it ran. */
struct pp_figures {
    bool ok;
    struct hist rtt;
    struct series p50;
    struct place_summary where;
};

/* One orbit throughput cell over all pairs. */
struct orbit_cell { bool ok; struct series gbps, parks; };

struct bench {
    int cpu[2];                                  /* --cpus: reader/parent, writer/child; -1 none */
    uint64_t bytes;
    int rounds, pairs;
    bool modes[2];                               /* [0] blocking, [1] io_uring */
    const char *hist_dir, *plot;
    char fleet[64];
    struct orbit_fleet *f;
    struct orbit_streams *s[NRING];
    struct orbit_cell orbit[NCHUNK][NRING][2];
    struct series alt[NCHUNK][ALT_COUNT];        /* GB/s per pair; 0 when unavailable */
    struct pp_figures pp[PP_COUNT];
    struct bench_run run;
};

/* ---- small pipe protocol between parent and child ------------------------- */

static struct bench *g_bench;

/* Pin the caller to --cpus' CPU for its role (0 parent/reader, 1 child/writer). */
static void pin(int role)
{
    if (!g_bench || g_bench->cpu[role] < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(g_bench->cpu[role], &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* fork() with the child pinned to the writer's CPU. */
static pid_t spawn(void)
{
    fflush(NULL);
    pid_t pid = bench_fork();
    if (pid == 0)
        pin(1);
    return pid;
}

struct ctl { int down[2], up[2]; };   /* down: parent -> child, up: child -> parent */

static int ctl_open(struct ctl *c)
{
    return pipe(c->down) == 0 && pipe(c->up) == 0 ? 0 : -1;
}

static void ctl_close(struct ctl *c)
{
    close(c->down[0]); close(c->down[1]); close(c->up[0]); close(c->up[1]);
}

/* ---- orbit throughput ------------------------------------------------------ */

static struct orbit_fleet *join_node(const char *name, int node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.node = node;
    o.backing = ORBIT_BACKING_AUTO;
    struct orbit_fleet *f = NULL;
    return orbit_fleet_join(name, &o, &f) == 0 ? f : NULL;
}

static struct orbit_stream_spec spec_for(int ring)
{
    return (struct orbit_stream_spec){ .kind = ring_kinds[ring], .lane_capacity = 4,
                                       .buffer_bytes = ring_sizes[ring] };
}

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
    struct orbit_fleet *f = join_node(j->b->fleet, 1);
    struct orbit_stream_spec spec = spec_for(j->ring);
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
    if (ctl_open(&j.c) < 0 || orbit_streams_create(b->s[ring_i], &a, &t) != 0)
        return res;
    if (uring && io_uring_queue_init(8, &ring, 0) != 0) {
        orbit_endpoint_close(a);
        return res;
    }
    pid_t pid = spawn();
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
    ctl_close(&j.c);
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

static double fd_run(enum alt kind, size_t chunk, uint64_t bytes)
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
    pid_t pid = spawn();
    if (pid == 0) {
        close(fd[0]);
        char g;
        if (read(go[0], &g, 1) != 1)
            _exit(3);
        for (uint64_t sent = 0; sent < bytes;) {
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
    return got >= bytes && t1 > t0 ? (double)got / (double)(t1 - t0) : 0;
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

static void orbit_echo(struct bench *b, struct ctl *c, int total, struct place_log *where)
{
    struct orbit_fleet *f = join_node(b->fleet, 1);
    struct orbit_stream_spec spec = spec_for(0);
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

static void orbit_pingpong(struct bench *b, int pair)
{
    struct ctl c;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    int total = b->rounds + PP_WARMUP;
    struct place_log *where = place_logs_map();
    if (!where || ctl_open(&c) < 0 || orbit_streams_create(b->s[0], &a, &t) != 0) {
        place_logs_unmap(where);
        return;
    }
    pid_t pid = spawn();
    if (pid == 0)
        orbit_echo(b, &c, total, where);
    bench_put(c.down[1], &t, sizeof t);
    int64_t *rt = calloc((size_t)b->rounds, sizeof *rt);
    unsigned char msg[PP_BYTES] = { 1 };
    char ready;
    bool ok = bench_get(c.up[0], &ready, 1);
    for (int i = 0; ok && i < total; i++) {
        int64_t t0 = bench_now_ns();
        ok = orbit_endpoint_write_all(a, msg, PP_BYTES, -1) == 0 &&
             orbit_endpoint_read_exact(a, msg, PP_BYTES, -1) == 0;
        if (i >= PP_WARMUP)
            rt[i - PP_WARMUP] = bench_now_ns() - t0;
        if (i >= PP_WARMUP && place_due(i - PP_WARMUP))
            place_sample(&where[0]);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (ok && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        pp_record(b, PP_ORBIT, pair, rt, where);
    free(rt);
    orbit_endpoint_close(a);
    ctl_close(&c);
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
static void fd_pingpong(struct bench *b, bool sock, int pair)
{
    int ab[2], ba[2] = { -1, -1 };
    struct place_log *where = place_logs_map();
    if (!where || (sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, ab) != 0 : (pipe(ab) != 0 || pipe(ba) != 0))) {
        place_logs_unmap(where);
        return;
    }
    int p_out = ab[1], p_in = sock ? ab[1] : ba[0], c_in = ab[0], c_out = sock ? ab[0] : ba[1];
    int total = b->rounds + PP_WARMUP;
    pid_t pid = spawn();
    if (pid == 0)
        fd_echo(c_in, c_out, total, where);
    int64_t *rt = calloc((size_t)b->rounds, sizeof *rt);
    unsigned char msg[PP_BYTES] = { 1 };
    bool ok = true;
    for (int i = 0; ok && i < total; i++) {
        int64_t t0 = bench_now_ns();
        ok = fd_full(p_out, msg, PP_BYTES, false) && fd_full(p_in, msg, PP_BYTES, true);
        if (i >= PP_WARMUP)
            rt[i - PP_WARMUP] = bench_now_ns() - t0;
        if (i >= PP_WARMUP && place_due(i - PP_WARMUP))
            place_sample(&where[0]);
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

/* ---- output ---------------------------------------------------------------------- */

static const char *size_text(size_t v, char *buf, size_t len)
{
    if (v >= (1u << 20))
        snprintf(buf, len, "%zu MiB", v >> 20);
    else
        snprintf(buf, len, "%zu KiB", v >> 10);
    return buf;
}

static void print_baselines(const struct bench *b)
{
    char c1[32];
    printf("baselines, GB/s median of pairs");
    for (int k = 0; k < ALT_COUNT; k++)
        printf("%12s", alt_name[k]);
    printf("\n");
    for (int c = 0; c < NCHUNK; c++) {
        printf("  chunk %-24s", size_text(chunk_sizes[c], c1, sizeof c1));
        for (int k = 0; k < ALT_COUNT; k++)
            printf("%12.2f", series_stats(&b->alt[c][k], true).median);
        printf("\n");
    }
}

static void print_orbit_cell(const struct bench *b, int m, int r, int c)
{
    char c1[32], c2[32], rt[48];
    const struct orbit_cell *o = &b->orbit[c][r][m];
    printf("  %-9s %8s %8s", m ? "io_uring" : "blocking", size_text(chunk_sizes[c], c1, sizeof c1),
           size_text(ring_sizes[r], c2, sizeof c2));
    if (!o->ok) {
        printf("   (failed or not available)\n");
        return;
    }
    struct side_stats g = series_stats(&o->gbps, true), p = series_stats(&o->parks, false);
    printf(" %7.2f %8.3f", g.median, p.median);
    for (int k = 0; k < ALT_COUNT; k++) {
        struct ratio_stats rs = ratio_stats(&o->gbps, &b->alt[c][k], true);
        printf(" %-19s", ratio_text(&rs, rt, sizeof rt));
    }
    printf("\n");
}

static void print_pingpong(const struct bench *b)
{
    char where[96], r1[48], r2[48];
    printf("\n64-byte ping-pong round trip (us), every sample of every pair\n  %-14s %8s %8s %8s %8s %8s %9s"
           "  placement\n", "transport", "p50", "p90", "p99", "p99.9", "p99.99", "max");
    for (int k = 0; k < PP_COUNT; k++) {
        const struct pp_figures *f = &b->pp[k];
        if (!f->ok) {
            printf("  %-14s (failed)\n", pp_name[k]);
            continue;
        }
        printf("  %-14s", pp_name[k]);
        for (int p = 0; p < HIST_NPCT; p++)
            printf(" %8.2f", (double)hist_value_at(&f->rtt, hist_pct[p]) / 1e3);
        printf(" %9.2f  %s\n", (double)f->rtt.max / 1e3, place_text(&f->where, where, sizeof where));
    }
    printf("paired, per pair    p50 us: median [min-max]   it/orbit, p50          it/floor, p50\n");
    for (int k = 0; k < PP_COUNT; k++) {
        struct side_stats s = series_stats(&b->pp[k].p50, false);
        struct ratio_stats vs = ratio_stats(&b->pp[k].p50, &b->pp[PP_ORBIT].p50, false);
        struct ratio_stats fl = ratio_stats(&b->pp[k].p50, &b->run.floor_ns, false);
        printf("  %-14s %8.2f [%.2f-%.2f]        %-22s %s\n", pp_name[k], s.median / 1e3, s.min / 1e3,
               s.max / 1e3, ratio_text(&vs, r1, sizeof r1), ratio_text(&fl, r2, sizeof r2));
    }
}

static void print_text(const struct bench *b)
{
    printf("orbit-bench stream: %d pairs, %" PRIu64 " MiB one way per throughput run, %d ping-pong round trips per "
           "transport and pair, writer and reader in two processes, spin %u ns", b->pairs, b->bytes >> 20,
           b->rounds, orbit_spin_ns());
    if (b->cpu[0] >= 0)
        printf(", reader on CPU %d, writer on CPU %d", b->cpu[0], b->cpu[1]);
    printf("\n");
    run_print_text(&b->run, stdout);
    print_baselines(b);
    printf("\norbit stream  chunk     ring    GB/s  parks/    x pipe              x pipe 1M           "
           "x socketpair        x memcpy\n%36s\n", "ring-ful");
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING; r++)
            for (int c = 0; c < NCHUNK && b->modes[m]; c++)
                print_orbit_cell(b, m, r, c);
    print_pingpong(b);
}

static void print_orbit_json(const struct bench *b, int m, int r, int c, bool comma)
{
    const struct orbit_cell *o = &b->orbit[c][r][m];
    printf("%s{\"mode\":\"%s\",\"chunk\":" CLI_JSON_SIZE ",\"ring\":%u,\"ok\":%s,\"gbps\":", comma ? "," : "",
           m ? "io_uring" : "blocking", chunk_sizes[c], ring_sizes[r], o->ok ? "true" : "false");
    series_print_json(&o->gbps, true, stdout);
    printf(",\"parks_per_ringful\":");
    series_print_json(&o->parks, false, stdout);
    printf(",\"ratio\":{");
    for (int k = 0; k < ALT_COUNT; k++) {
        struct ratio_stats rs = ratio_stats(&o->gbps, &b->alt[c][k], true);
        printf("%s\"%s\":", k ? "," : "", alt_key[k]);
        ratio_print_json(&rs, stdout);
    }
    printf("}}");
}

static void print_pingpong_json(const struct bench *b)
{
    printf(",\"pingpong_64\":{\"rounds_per_pair\":%d", b->rounds);
    for (int k = 0; k < PP_COUNT; k++) {
        printf(",\"%s\":{\"ok\":%s,\"rtt_ns\":", pp_key[k], b->pp[k].ok ? "true" : "false");
        hist_print_json(&b->pp[k].rtt, stdout);
        printf(",\"p50_ns\":");
        series_print_json(&b->pp[k].p50, false, stdout);
        printf(",\"placement\":");
        place_print_json(&b->pp[k].where, stdout);
        struct ratio_stats fl = ratio_stats(&b->pp[k].p50, &b->run.floor_ns, false);
        printf(",\"p50_over_floor\":");
        ratio_print_json(&fl, stdout);
        printf("}");
    }
    for (int k = PP_PIPE; k < PP_COUNT; k++) {
        struct ratio_stats vs = ratio_stats(&b->pp[k].p50, &b->pp[PP_ORBIT].p50, false);
        printf(",\"orbit_p50_speedup_vs_%s\":", pp_key[k]);
        ratio_print_json(&vs, stdout);
    }
    printf("}");
}

static void print_json(const struct bench *b)
{
    printf("{\"bench\":\"stream\",");
    run_print_json(&b->run, stdout);
    printf(",\"bytes_per_run\":" CLI_JSON_U64 ",\"spin_ns\":%u,\"cpus\":[%d,%d],\"baselines\":[", b->bytes,
           orbit_spin_ns(), b->cpu[0], b->cpu[1]);
    for (int c = 0; c < NCHUNK; c++) {
        printf("%s{\"chunk\":" CLI_JSON_SIZE, c ? "," : "", chunk_sizes[c]);
        for (int k = 0; k < ALT_COUNT; k++) {
            printf(",\"%s_gbps\":", alt_key[k]);
            series_print_json(&b->alt[c][k], true, stdout);
        }
        printf("}");
    }
    printf("],\"orbit\":[");
    bool first = true;
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING; r++)
            for (int c = 0; c < NCHUNK && b->modes[m]; c++, first = false)
                print_orbit_json(b, m, r, c, !first);
    printf("]");
    print_pingpong_json(b);
    printf("}\n");
}

/* ---- main ------------------------------------------------------------------------- */

static int open_tables(struct bench *b)
{
    snprintf(b->fleet, sizeof b->fleet, "bench-stream-%d", (int)getpid());
    bench_unlink_on_signal(b->fleet);
    b->f = join_node(b->fleet, 0);
    if (!b->f)
        return -1;
    for (int r = 0; r < NRING; r++) {
        struct orbit_stream_spec spec = spec_for(r);
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
                                                        : fd_run((enum alt)k, chunk_sizes[c], b->bytes));
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
        orbit_pingpong(b, pair);
    fd_pingpong(b, false, pair);
    fd_pingpong(b, true, pair);
    if (!orbit_first)
        orbit_pingpong(b, pair);
}

static int write_outputs(const struct bench *b)
{
    int rc = 0;
    char name[64];
    for (int k = 0; b->hist_dir && k < PP_COUNT; k++) {
        snprintf(name, sizeof name, "stream-pingpong-%s", pp_key[k]);
        if (b->pp[k].ok)
            rc |= hgrm_save("stream", b->hist_dir, name, &b->pp[k].rtt);
    }
    if (!b->plot)
        return rc;
    static struct chart ch;
    memset(&ch, 0, sizeof ch);
    snprintf(ch.title, sizeof ch.title, "orbit-bench stream: 64-byte ping-pong round trip, 2 processes");
    snprintf(ch.x_label, sizeof ch.x_label, "percentile");
    snprintf(ch.y_label, sizeof ch.y_label, "latency (us, log)");
    ch.axes = CHART_PERCENTILE_LOG;
    for (int k = 0; k < PP_COUNT; k++)
        if (b->pp[k].ok)
            plot_latency(&ch, pp_name[k], &b->pp[k].rtt);
    return rc | plot_save("stream", b->plot, &ch, 1);
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
                                          { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
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
    g_bench = &b;
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
        fputs("orbit-bench stream: io_uring futex ops unavailable; blocking mode only\n", stderr);
        b.modes[1] = false;
    }
    for (int k = 0; k < PP_COUNT; k++) {
        hist_reset(&b.pp[k].rtt);
        place_begin(&b.pp[k].where, b.cpu);
    }
    run_begin(&b.run, b.pairs, b.cpu);
    pin(0);
    if (open_tables(&b) != 0) {
        close_tables(&b);
        return 1;
    }
    for (int pair = 0; pair < b.pairs; pair++)
        run_pair(&b, pair);
    close_tables(&b);
    run_end(&b.run);
    if (json)
        print_json(&b);
    else
        print_text(&b);
    return write_outputs(&b);
}
