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

#define NCHUNK 3
#define NRING  2
static const size_t chunk_sizes[NCHUNK] = { 4096, 65536, 1u << 20 };
static const uint32_t ring_sizes[NRING] = { 65536, 1u << 20 };
static const uint8_t ring_kinds[NRING] = { 240, 241 };

enum alt { ALT_PIPE, ALT_PIPE1M, ALT_SOCK, ALT_MEMCPY, ALT_COUNT };
static const char *alt_name[ALT_COUNT] = { "pipe", "pipe 1M", "socketpair", "memcpy" };
static const char *alt_key[ALT_COUNT] = { "pipe", "pipe_1m", "socketpair", "memcpy" };

struct orbit_result { double gbps, parks_per_ringful; bool ok; };
struct pp_result { int64_t p50, p99; bool ok; };

struct bench {
    int cpu[2];                                  /* --cpus: reader/parent, writer/child; -1 none */
    uint64_t bytes;
    int rounds, repeat;
    bool modes[2];                               /* [0] blocking, [1] io_uring */
    char fleet[64];
    struct orbit_fleet *f;
    struct orbit_streams *s[NRING];
    struct orbit_result orbit[NCHUNK][NRING][2];
    double alt[NCHUNK][ALT_COUNT];               /* GB/s; 0 when unavailable */
    struct pp_result pp_orbit, pp_pipe, pp_sock;
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
#define PP_WARMUP 1000

static struct pp_result summarize(int64_t *rt, int n)
{
    return (struct pp_result){ tool_percentile(rt, (size_t)n, 0.50), tool_percentile(rt, (size_t)n, 0.99), true };
}

static void orbit_echo(struct bench *b, struct ctl *c, int total)
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
    for (int i = 0; i < total; i++)
        if (orbit_endpoint_read_exact(ep, msg, PP_BYTES, -1) != 0 ||
            orbit_endpoint_write_all(ep, msg, PP_BYTES, -1) != 0)
            _exit(4);
    orbit_endpoint_finish(ep);   /* a clean end: closing unfinished would reset the last echo */
    orbit_endpoint_close(ep);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    _exit(0);
}

static struct pp_result orbit_pingpong(struct bench *b)
{
    struct pp_result res = { 0, 0, false };
    struct ctl c;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    int total = b->rounds + PP_WARMUP;
    if (ctl_open(&c) < 0 || orbit_streams_create(b->s[0], &a, &t) != 0)
        return res;
    pid_t pid = spawn();
    if (pid == 0)
        orbit_echo(b, &c, total);
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
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (ok && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        res = summarize(rt, b->rounds);
    free(rt);
    orbit_endpoint_close(a);
    ctl_close(&c);
    return res;
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

/* Two pipes, or one socketpair used both ways. */
static struct pp_result fd_pingpong(struct bench *b, bool sock)
{
    struct pp_result res = { 0, 0, false };
    int ab[2], ba[2];
    if (sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, ab) != 0 : (pipe(ab) != 0 || pipe(ba) != 0))
        return res;
    int p_out = ab[1], p_in = sock ? ab[1] : ba[0], c_in = ab[0], c_out = sock ? ab[0] : ba[1];
    int total = b->rounds + PP_WARMUP;
    pid_t pid = spawn();
    if (pid == 0) {
        unsigned char m[PP_BYTES];
        for (int i = 0; i < total; i++)
            if (!fd_full(c_in, m, PP_BYTES, true) || !fd_full(c_out, m, PP_BYTES, false))
                _exit(4);
        _exit(0);
    }
    int64_t *rt = calloc((size_t)b->rounds, sizeof *rt);
    unsigned char msg[PP_BYTES] = { 1 };
    bool ok = true;
    for (int i = 0; ok && i < total; i++) {
        int64_t t0 = bench_now_ns();
        ok = fd_full(p_out, msg, PP_BYTES, false) && fd_full(p_in, msg, PP_BYTES, true);
        if (i >= PP_WARMUP)
            rt[i - PP_WARMUP] = bench_now_ns() - t0;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (ok && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        res = summarize(rt, b->rounds);
    free(rt);
    close(ab[0]);
    close(ab[1]);
    if (!sock) {
        close(ba[0]);
        close(ba[1]);
    }
    return res;
}

/* ---- output ---------------------------------------------------------------------- */

static double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : 0; }

static const char *size_text(size_t v, char *buf, size_t len)
{
    if (v >= (1u << 20))
        snprintf(buf, len, "%zu MiB", v >> 20);
    else
        snprintf(buf, len, "%zu KiB", v >> 10);
    return buf;
}

static void print_text(const struct bench *b)
{
    char c1[32], c2[32];
    printf("orbit-bench stream: %" PRIu64 " MiB one way per run, best of %d, writer and reader in two processes,"
           " spin %u ns", b->bytes >> 20, b->repeat, orbit_spin_ns());
    if (b->cpu[0] >= 0)
        printf(", reader on CPU %d, writer on CPU %d", b->cpu[0], b->cpu[1]);
    printf("\n\n");
    printf("baselines (GB/s)   ");
    for (int k = 0; k < ALT_COUNT; k++)
        printf("%12s", alt_name[k]);
    printf("\n");
    for (int c = 0; c < NCHUNK; c++) {
        printf("  chunk %-10s ", size_text(chunk_sizes[c], c1, sizeof c1));
        for (int k = 0; k < ALT_COUNT; k++)
            printf("%12.2f", b->alt[c][k]);
        printf("\n");
    }
    printf("\norbit stream        chunk     ring    GB/s  parks/ring-ful   x pipe x pipe1M  x sock x memcpy\n");
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING; r++)
            for (int c = 0; c < NCHUNK; c++) {
                if (!b->modes[m])
                    continue;
                const struct orbit_result *o = &b->orbit[c][r][m];
                printf("  %-16s %8s %8s", m ? "io_uring" : "blocking", size_text(chunk_sizes[c], c1, sizeof c1),
                       size_text(ring_sizes[r], c2, sizeof c2));
                if (!o->ok) {
                    printf("   (failed or not available)\n");
                    continue;
                }
                printf(" %7.2f %15.3f", o->gbps, o->parks_per_ringful);
                for (int k = 0; k < ALT_COUNT; k++)
                    printf(" %7.2fx", ratio(o->gbps, b->alt[c][k]));
                printf("\n");
            }
    printf("\n64-byte ping-pong round trip (us)   p50      p99    p50 vs orbit\n");
    const struct pp_result *pp[3] = { &b->pp_orbit, &b->pp_pipe, &b->pp_sock };
    const char *names[3] = { "orbit stream", "pipe", "socketpair" };
    for (int i = 0; i < 3; i++) {
        if (!pp[i]->ok) {
            printf("  %-30s (failed)\n", names[i]);
            continue;
        }
        printf("  %-30s %7.2f %8.2f   %6.1fx\n", names[i], (double)pp[i]->p50 / 1e3, (double)pp[i]->p99 / 1e3,
               ratio((double)pp[i]->p50, (double)b->pp_orbit.p50));
    }
}

static void print_pp_json(const char *key, const struct pp_result *p, bool comma)
{
    printf("%s\"%s\":{\"ok\":%s,\"p50_ns\":" CLI_JSON_I64 ",\"p99_ns\":" CLI_JSON_I64 "}", comma ? "," : "", key,
           p->ok ? "true" : "false", p->p50, p->p99);
}

static void print_json(const struct bench *b)
{
    printf("{\"bench\":\"stream\",\"bytes_per_run\":" CLI_JSON_U64 ",\"repeat\":%d,\"spin_ns\":%u,"
           "\"cpus\":[%d,%d],\"baselines\":[", b->bytes, b->repeat, orbit_spin_ns(), b->cpu[0], b->cpu[1]);
    for (int c = 0; c < NCHUNK; c++) {
        printf("%s{\"chunk\":" CLI_JSON_SIZE, c ? "," : "", chunk_sizes[c]);
        for (int k = 0; k < ALT_COUNT; k++)
            printf(",\"%s_gbps\":%.4f", alt_key[k], b->alt[c][k]);
        printf("}");
    }
    printf("],\"orbit\":[");
    bool first = true;
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING; r++)
            for (int c = 0; c < NCHUNK; c++) {
                if (!b->modes[m])
                    continue;
                const struct orbit_result *o = &b->orbit[c][r][m];
                printf("%s{\"mode\":\"%s\",\"chunk\":" CLI_JSON_SIZE ",\"ring\":%u,\"ok\":%s,\"gbps\":%.4f,"
                       "\"parks_per_ringful\":%.4f,\"ratio\":{", first ? "" : ",", m ? "io_uring" : "blocking",
                       chunk_sizes[c], ring_sizes[r], o->ok ? "true" : "false", o->gbps, o->parks_per_ringful);
                for (int k = 0; k < ALT_COUNT; k++)
                    printf("%s\"%s\":%.4f", k ? "," : "", alt_key[k], ratio(o->gbps, b->alt[c][k]));
                printf("}}");
                first = false;
            }
    printf("],\"pingpong_64\":{\"rounds\":%d", b->rounds);
    print_pp_json("orbit", &b->pp_orbit, true);
    print_pp_json("pipe", &b->pp_pipe, true);
    print_pp_json("socketpair", &b->pp_sock, true);
    printf(",\"p50_speedup_vs_pipe\":%.3f,\"p50_speedup_vs_socketpair\":%.3f}}\n",
           ratio((double)b->pp_pipe.p50, (double)b->pp_orbit.p50),
           ratio((double)b->pp_sock.p50, (double)b->pp_orbit.p50));
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

static void keep_best_pp(struct pp_result *best, struct pp_result r)
{
    if (r.ok && (!best->ok || r.p50 < best->p50))
        *best = r;
}

/* Every configuration once per repetition, interleaved, keeping each one's best:
 * load from elsewhere on the machine then hits every transport alike. */
static void run_all(struct bench *b)
{
    for (int rep = 0; rep < b->repeat; rep++) {
        for (int c = 0; c < NCHUNK; c++) {
            for (int k = 0; k < ALT_COUNT; k++) {
                double g = k == ALT_MEMCPY ? memcpy_run(chunk_sizes[c], b->bytes)
                                           : fd_run((enum alt)k, chunk_sizes[c], b->bytes);
                if (g > b->alt[c][k])
                    b->alt[c][k] = g;
            }
            for (int m = 0; m < 2; m++)
                for (int r = 0; r < NRING && b->modes[m]; r++) {
                    struct orbit_result o = orbit_run(b, r, chunk_sizes[c], m == 1);
                    if (o.ok && o.gbps > b->orbit[c][r][m].gbps)
                        b->orbit[c][r][m] = o;
                }
        }
        keep_best_pp(&b->pp_orbit, orbit_pingpong(b));
        keep_best_pp(&b->pp_pipe, fd_pingpong(b, false));
        keep_best_pp(&b->pp_sock, fd_pingpong(b, true));
    }
}

int bench_stream(int argc, char **argv)
{
    static const char help[] =
        "usage: orbit-bench stream [--bytes MiB] [--rounds N] [--repeat N] [--mode blocking|uring|both]\n"
        "                          [--cpus R,W] [--procs N | --scale] [--json]\n"
        "  --bytes MiB   bytes moved one way per throughput run (default 256)\n"
        "  --rounds N    64-byte ping-pong round trips (default 20000, after 1000 warm-up)\n"
        "  --repeat N    run every configuration N times, interleaved, and keep the best (default 3)\n"
        "  --mode M      how orbit waits: blocking (futex), uring (io_uring FUTEX_WAIT), both (default)\n"
        "  --cpus R,W    pin the reader (and ping-pong initiator) to CPU R, the writer to CPU W\n"
        "  --procs N     instead: N ping-pong pairs at once (2N processes) beside N socketpair\n"
        "                pairs, round trips per second of all (--rounds per pair; 1..128)\n"
        "  --scale       the same for every pair count from 1 to the CPUs this process may use\n"
        "  --json        one JSON object on stdout\n"
        "Every throughput figure is one writer process and one reader process; orbit's\n"
        "rings are 64 KiB and 1 MiB, chunks 4 KiB, 64 KiB and 1 MiB, side by side with a\n"
        "pipe (default and 1 MiB F_SETPIPE_SZ), an AF_UNIX socketpair and memcpy.\n";
    static const struct option opts[] = { { "bytes", required_argument, 0, 'b' },
                                          { "rounds", required_argument, 0, 'r' },
                                          { "repeat", required_argument, 0, 'R' },
                                          { "mode", required_argument, 0, 'm' },
                                          { "cpus", required_argument, 0, 'c' },
                                          { "procs", required_argument, 0, 'p' },
                                          { "scale", no_argument, 0, 'S' },
                                          { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    static struct bench b;
    int mib = 256, procs = 0;
    bool json = false, scale = false;
    b.rounds = 20000;
    b.repeat = 3;
    b.cpu[0] = b.cpu[1] = -1;
    g_bench = &b;
    b.modes[0] = b.modes[1] = true;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":b:r:R:m:c:p:jh", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': procs = cli_int(BENCH_TOOL, "--procs", optarg, 1, 128); break;
        case 'S': scale = true; break;
        case 'b': mib = cli_int(BENCH_TOOL, "--bytes", optarg, 1, 1 << 20); break;
        case 'r': b.rounds = cli_int(BENCH_TOOL, "--rounds", optarg, 1, 10000000); break;
        case 'R': b.repeat = cli_int(BENCH_TOOL, "--repeat", optarg, 1, 100); break;
        case 'm':
            b.modes[0] = strcmp(optarg, "uring") != 0;
            b.modes[1] = strcmp(optarg, "blocking") != 0;
            if (strcmp(optarg, "uring") && strcmp(optarg, "blocking") && strcmp(optarg, "both"))
                cli_bad(BENCH_TOOL, "--mode", optarg, "not blocking, uring or both");
            break;
        case 'c': bench_cpu_pair("--cpus", optarg, b.cpu); break;
        case 'j': json = true; break;
        case 'h': fputs(help, stdout); return 0;
        default: cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
    b.bytes = (uint64_t)mib << 20;
    if (procs || scale) {
        if (procs && scale)
            cli_usage_error(BENCH_TOOL, "--procs or --scale, not both");
        snprintf(b.fleet, sizeof b.fleet, "bench-stream-%d", (int)getpid());
        bench_unlink_on_signal(b.fleet);
        return bench_stream_scale(b.fleet, procs, b.rounds, json);
    }
    if (b.modes[1] && !orbit_uring_futex_supported()) {
        fputs("orbit-bench stream: io_uring futex ops unavailable; blocking mode only\n", stderr);
        b.modes[1] = false;
    }
    pin(0);
    if (open_tables(&b) != 0) {
        close_tables(&b);
        return 1;
    }
    run_all(&b);
    close_tables(&b);
    if (json)
        print_json(&b);
    else
        print_text(&b);
    return 0;
}
