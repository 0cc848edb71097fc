/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench transfer: one-way transfers of whole messages between two
 * processes, orbit's stream and exchange beside a zero-copy slot ring, in the
 * same run, paired.
 *
 * Every transport moves the same messages the same way: the sender writes
 * every byte of each message (a fill), the receiver reads every byte of it (a
 * sum over 64-bit words) and checks its first and last byte. The zero-copy
 * ring (this file) is what a zero-copy publish/subscribe library does at its
 * best: slots in shared memory that the sender fills in place and the
 * receiver reads in place, a published count and a released count on lines
 * of their own, both sides busy-polling. The exchange is zero-copy too (the
 * sender fills a reserved chunk of the arena, the receiver reads the chunk it
 * consumed); the stream copies (the sender fills a buffer and writes it, the
 * receiver reads into a buffer and sums it). Each transport buffers four
 * messages: four slots, a ring and an arena lane of four messages' bytes.
 *
 * Cases: 1 MiB messages, with orbit's blocking calls (their default spin,
 * then a park) and spinning (ORBIT_SPIN_NS at its ceiling, 1 ms: a waiter
 * never parks while the other side keeps up); 64 KiB messages with both
 * sides spinning. The receiver runs in this process, the sender in a child,
 * pinned to --cpus (default: the floor's two CPUs).
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/exchange.h>
#include "cli.h"
#include "bench.h"
#include "bench_clock.h"
#include "bench_exchange.h"
#include "bench_pair.h"
#include "bench_place.h"

#define XF_IN_FLIGHT 4u            /* each transport buffers this many messages */
#define XF_BUFFER    (XF_IN_FLIGHT << 20)   /* the most: four 1 MiB slots (the ring's mapping) */
#define XF_SPIN_NS   1000000u      /* "spinning": the spin ceiling (orbit_set_spin_ns) */
#define XF_RECEIVER  0             /* fleet nodes */
#define XF_SENDER    1
#define XF_CELLS_MAX 5

enum xport { XP_RING, XP_STREAM, XP_EXCHANGE };
enum xwait { XW_BLOCK, XW_SPIN };
struct cell { enum xport xp; enum xwait wait; };
struct xcase {
    const char *key, *name;
    size_t msg;
    uint8_t stream_kind, control_kind, arena_kind;   /* its tables: sized for four messages */
    int ncells;
    struct cell cells[XF_CELLS_MAX];
};

static const struct xcase cases[] = {
    { "1m", "1 MiB messages", 1u << 20, ORBIT_STREAM_KIND, ORBIT_EXCHANGE_CONTROL_KIND, ORBIT_ARENA_KIND, 5,
      { { XP_RING, XW_SPIN }, { XP_STREAM, XW_BLOCK }, { XP_STREAM, XW_SPIN }, { XP_EXCHANGE, XW_BLOCK },
        { XP_EXCHANGE, XW_SPIN } } },
    { "64k_spin", "64 KiB messages, both sides spinning", 64u << 10, 238, 237, 236, 3,
      { { XP_RING, XW_SPIN }, { XP_STREAM, XW_SPIN }, { XP_EXCHANGE, XW_SPIN } } },
};
#define NCASES (sizeof cases / sizeof cases[0])
static const char *const xport_key[] = { "zero_copy_ring", "stream", "exchange" };
static const char *const wait_key[] = { "blocking", "spinning" };

/* Shared with the sender: the ring's counts (a line each) and the run's gates. */
struct xshared {
    _Alignas(64) _Atomic uint64_t head;   /* ring: messages published */
    _Alignas(64) _Atomic uint64_t tail;   /* ring: messages released */
    _Alignas(64) _Atomic int ready, go, done, failed;
};

struct xbench {
    uint64_t bytes;                       /* per run */
    int pairs, cpu[2];
    bool json, cpus_given;
    uint32_t spin_default;                /* this process's ORBIT_SPIN_NS, between cells */
    char fleet[64];
    struct xshared *sh;
    unsigned char *slots;                 /* the ring's XF_BUFFER bytes */
    struct orbit_fleet *f;
    struct orbit_streams *streams[NCASES];
    struct orbit_exchanges *exchanges[NCASES];
    struct series gbps[NCASES][XF_CELLS_MAX];
    struct bench_run run;
};

static const char usage[] =
"usage: orbit-bench transfer [--bytes N] [--pairs N] [--cpus R,S] [--json]\n"
"\n"
"  One-way transfers of whole messages between two processes, the sender writing\n"
"  and the receiver reading every byte of each, beside a zero-copy slot ring (the\n"
"  sender fills slots in shared memory in place, the receiver reads them in place,\n"
"  both busy-polling): orbit's exchange (zero-copy through its payload arena) and\n"
"  stream (a copy in, a copy out). 1 MiB messages with orbit's blocking calls and\n"
"  spinning (ORBIT_SPIN_NS at its 1 ms ceiling), and 64 KiB messages with both\n"
"  sides spinning. Each transport buffers four messages.\n"
"\n"
"  --bytes N      bytes moved per run (default 256M; K/M/G suffixes; at least 1M)\n"
"  --pairs N      run every case's transports back to back N times, the order\n"
"                 alternating (default 9, at most 100; --repeat N is the same)\n"
"  --cpus R,S     pin the receiver to CPU R, the sender to CPU S (default: the\n"
"                 floor's two CPUs)\n"
"  --json         one JSON object instead of the table\n"
"  -h, --help     this text\n"
"\n"
"  x ring is the median over the pairs of the transport's GB/s over the ring's in\n"
"  the same pair, [min-max] its spread. See orbit-bench(1) on reading the output.\n";

static unsigned char tag_of(uint64_t i) { return (unsigned char)(i * 7 + 1); }

/* The receiver's work: every byte read (a sum), the message's first and last byte checked. */
static bool take_message(const unsigned char *p, size_t len, uint64_t i, uint64_t *sum)
{
    *sum += bx_touch_sum(p, len);
    return p[0] == tag_of(i) && p[len - 1] == tag_of(i);
}

static void relax(void) { bench_cpu_relax(); }

/* ---- the zero-copy slot ring ------------------------------------------------------ */

static int ring_send(struct xbench *b, size_t len, uint64_t n)
{
    struct xshared *sh = b->sh;
    const uint64_t slots = XF_IN_FLIGHT;
    for (uint64_t i = 0; i < n; i++) {
        /* Acquire: the receiver's reads of the slot it released are done. */
        while (i - atomic_load_explicit(&sh->tail, memory_order_acquire) >= slots)
            relax();
        memset(b->slots + (i % slots) * len, tag_of(i), len);
        /* Release: the slot's bytes before the count that covers them. */
        atomic_store_explicit(&sh->head, i + 1, memory_order_release);
    }
    return 0;
}

static int ring_receive(struct xbench *b, size_t len, uint64_t n, uint64_t *sum)
{
    struct xshared *sh = b->sh;
    const uint64_t slots = XF_IN_FLIGHT;
    for (uint64_t i = 0; i < n; i++) {
        while (atomic_load_explicit(&sh->head, memory_order_acquire) <= i)
            relax();
        if (!take_message(b->slots + (i % slots) * len, len, i, sum))
            return -1;
        /* Release: our reads of the slot are done before the sender may refill it. */
        atomic_store_explicit(&sh->tail, i + 1, memory_order_release);
    }
    return 0;
}

/* ---- orbit: set-up ---------------------------------------------------------------- */

static struct orbit_stream_spec stream_spec(const struct xcase *c)
{
    return (struct orbit_stream_spec){ .kind = c->stream_kind, .lane_capacity = 1,
                                       .buffer_bytes = (uint32_t)(XF_IN_FLIGHT * c->msg) };
}

static struct orbit_exchange_spec exchange_spec(const struct xcase *c)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control.kind = c->control_kind;
    s.control.lane_capacity = 4;
    s.a_to_b = (struct orbit_arena_spec){ .kind = c->arena_kind, .slot_bytes = 64u << 10,
                                          .slots_per_lane = (uint32_t)(XF_IN_FLIGHT * c->msg / (64u << 10)) };
    return s;
}

static struct orbit_fleet *join_as(const char *fleet, uint16_t node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.node = node;
    struct orbit_fleet *f = NULL;
    return orbit_fleet_join(fleet, &o, &f) == 0 ? f : NULL;
}

static void spin_for(enum xwait w)
{
    if (w == XW_SPIN)
        orbit_set_spin_ns(XF_SPIN_NS);
}

/* ---- orbit: the sender (a child of its own: handles never cross fork) ---------------- */

static int stream_send(struct orbit_fleet *f, struct xshared *sh, const struct xcase *c, uint64_t n)
{
    struct orbit_stream_spec spec = stream_spec(c);
    struct orbit_streams *s;
    struct orbit_endpoint *ep;
    struct orbit_ticket t;
    size_t len = c->msg;
    unsigned char *buf = malloc(len);
    int rc = buf ? orbit_streams_open(f, &spec, &s) : -ENOMEM;
    if (rc < 0)
        return rc;
    if ((rc = orbit_streams_create(s, &ep, &t)) == 0 && (rc = orbit_streams_offer(s, &t, XF_RECEIVER)) == 0) {
        atomic_fetch_add(&sh->ready, 1);
        while (!atomic_load(&sh->go))
            relax();
        for (uint64_t i = 0; rc == 0 && i < n; i++) {
            memset(buf, tag_of(i), len);
            rc = orbit_endpoint_write_all(ep, buf, len, -1);
        }
        while (rc == 0 && !atomic_load(&sh->done) && !atomic_load(&sh->failed))
            usleep(100);   /* the receiver holds its side until it read everything */
        orbit_endpoint_close(ep);
    }
    orbit_streams_close(s);
    free(buf);
    return rc;
}

static int exchange_send(struct orbit_fleet *f, struct xshared *sh, const struct xcase *c, uint64_t n)
{
    struct orbit_exchange_spec spec = exchange_spec(c);
    size_t len = c->msg;
    struct orbit_exchanges *xs;
    struct orbit_exchange *x;
    struct orbit_ticket t;
    int rc = orbit_exchanges_open(f, &spec, &xs);
    if (rc < 0)
        return rc;
    if ((rc = orbit_exchange_create(xs, &x, &t)) == 0) {
        if ((rc = orbit_exchanges_offer(xs, &t, XF_RECEIVER)) == 0 &&
            (rc = orbit_exchange_send_start(x, NULL, 0, -1)) == 0) {
            atomic_fetch_add(&sh->ready, 1);
            while (!atomic_load(&sh->go))
                relax();
        }
        for (uint64_t i = 0; rc == 0 && i < n; i++) {
            struct orbit_reservation res;
            if ((rc = orbit_exchange_reserve(x, len, -1, &res)) == 0) {
                memset(res.data, tag_of(i), len);
                rc = orbit_exchange_data(x, &res, len, -1);
            }
        }
        if (rc == 0)
            rc = orbit_exchange_finish(x, -1);
        while (rc == 0 && !atomic_load(&sh->done) && !atomic_load(&sh->failed))
            usleep(100);
        orbit_exchange_close(x);
    }
    orbit_exchanges_close(xs);
    return rc;
}

static _Noreturn void sender(struct xbench *b, const struct xcase *c, struct cell cell, uint64_t n)
{
    place_pin(b->cpu[1]);
    int rc = 0;
    if (cell.xp == XP_RING) {
        atomic_fetch_add(&b->sh->ready, 1);
        while (!atomic_load(&b->sh->go))
            relax();
        rc = ring_send(b, c->msg, n);
    } else {
        spin_for(cell.wait);
        struct orbit_fleet *f = join_as(b->fleet, XF_SENDER);
        rc = !f ? -1 : cell.xp == XP_STREAM ? stream_send(f, b->sh, c, n) : exchange_send(f, b->sh, c, n);
        if (rc < 0)
            fprintf(stderr, "orbit-bench transfer: sender: %s\n", f ? orbit_last_error() : "join failed");
        if (f)
            orbit_fleet_leave(f);
    }
    if (rc < 0)
        atomic_store(&b->sh->failed, 1);
    _exit(rc < 0);
}

/* ---- orbit: the receiver (this process, node 0 for the whole run) ------------------- */

static int stream_receive(struct xbench *b, size_t k, uint64_t n, uint64_t *sum, int64_t *t0)
{
    struct orbit_ticket t;
    struct orbit_endpoint *ep;
    size_t len = cases[k].msg;
    unsigned char *buf = malloc(len);
    int rc = buf ? orbit_streams_wait_offer(b->streams[k], 10000, &t) : -ENOMEM;
    if (rc == 0 && (rc = orbit_streams_open_ticket(b->streams[k], &t, &ep)) == 0) {
        while (atomic_load(&b->sh->ready) < 1 && !atomic_load(&b->sh->failed))
            relax();
        atomic_store(&b->sh->go, 1);
        *t0 = bench_now_ns();
        for (uint64_t i = 0; rc == 0 && i < n; i++) {
            /* The bytes as they come, as a byte stream's reader takes them. */
            for (size_t got = 0; rc == 0 && got < len;) {
                ssize_t r = orbit_endpoint_read(ep, buf + got, len - got, 10000);
                rc = r > 0 ? 0 : r == 0 ? -ORBIT_EPEERGONE : (int)r;
                got += r > 0 ? (size_t)r : 0;
            }
            if (rc == 0 && !take_message(buf, len, i, sum))
                rc = -1;
        }
        orbit_endpoint_close(ep);
    }
    free(buf);
    return rc;
}

static int exchange_receive(struct xbench *b, size_t k, uint64_t n, uint64_t *sum, int64_t *t0)
{
    struct orbit_ticket t;
    struct orbit_exchange *x;
    struct orbit_exchange_event ev;
    size_t len = cases[k].msg;
    int rc = orbit_exchanges_wait_offer(b->exchanges[k], 10000, &t);
    if (rc < 0 || (rc = orbit_exchange_open(b->exchanges[k], &t, &x)) < 0)
        return rc;
    if ((rc = orbit_exchange_next(x, &ev, 10000)) == 0 && ev.type != ORBIT_EXCHANGE_START)
        rc = -1;
    while (rc == 0 && atomic_load(&b->sh->ready) < 1 && !atomic_load(&b->sh->failed))
        relax();
    atomic_store(&b->sh->go, 1);
    *t0 = bench_now_ns();
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        if ((rc = orbit_exchange_next(x, &ev, 10000)) < 0)
            break;
        if (ev.type != ORBIT_EXCHANGE_DATA || ev.chunk.len != len ||
            !take_message(ev.chunk.data, len, i, sum))
            rc = -1;
        orbit_chunk_release(&ev.chunk);
    }
    if (rc == 0 && ((rc = orbit_exchange_next(x, &ev, 10000)) == 0 && ev.type != ORBIT_EXCHANGE_FIN))
        rc = -1;
    orbit_exchange_close(x);
    return rc;
}

/* GB/s of one run of a cell, or -1 when it failed. */
static double run_cell(struct xbench *b, size_t k, struct cell cell)
{
    const struct xcase *c = &cases[k];
    uint64_t n = b->bytes / c->msg, sum = 0;
    struct xshared *sh = b->sh;
    memset(sh, 0, sizeof *sh);
    orbit_set_spin_ns(b->spin_default);
    spin_for(cell.wait);   /* the sender inherits it */
    pid_t kid = bench_fork();
    if (kid < 0)
        return -1;
    if (kid == 0)
        sender(b, c, cell, n);
    int64_t t0 = 0;
    int rc;
    if (cell.xp == XP_RING) {
        while (atomic_load(&sh->ready) < 1 && !atomic_load(&sh->failed))
            relax();
        atomic_store(&sh->go, 1);
        t0 = bench_now_ns();
        rc = ring_receive(b, c->msg, n, &sum);
    } else {
        rc = cell.xp == XP_STREAM ? stream_receive(b, k, n, &sum, &t0) : exchange_receive(b, k, n, &sum, &t0);
    }
    int64_t t1 = bench_now_ns();
    atomic_store(&sh->done, 1);
    if (rc < 0) {
        atomic_store(&sh->failed, 1);
        fprintf(stderr, "orbit-bench transfer: %s, %s %s: %s\n", c->name, xport_key[cell.xp], wait_key[cell.wait],
                rc == -1 ? "a message arrived out of order or garbled" : orbit_last_error());
    }
    int st = 0;
    waitpid(kid, &st, 0);
    __asm__ __volatile__("" : : "r"(sum));   /* the sums are the receiver's reads: kept */
    if (rc < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || t1 <= t0)
        return -1;
    return (double)(n * c->msg) / (double)(t1 - t0);
}

/* ---- set-up, pairs, report --------------------------------------------------------- */

static void *map_slots(void)
{
    /* Huge pages where the host has them, as orbit's segments take them (else 4 KiB pages). */
    void *p = mmap(NULL, XF_BUFFER, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED) {
        p = mmap(NULL, XF_BUFFER, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED)
            madvise(p, XF_BUFFER, MADV_HUGEPAGE);
    }
    return p == MAP_FAILED ? NULL : p;
}

static int open_orbit(struct xbench *b)
{
    b->f = join_as(b->fleet, XF_RECEIVER);
    if (!b->f)
        return -1;
    for (size_t k = 0; k < NCASES; k++) {
        struct orbit_stream_spec ss = stream_spec(&cases[k]);
        struct orbit_exchange_spec xs = exchange_spec(&cases[k]);
        if (orbit_streams_open(b->f, &ss, &b->streams[k]) < 0 || orbit_exchanges_open(b->f, &xs, &b->exchanges[k]) < 0)
            return -1;
    }
    return 0;
}

static void close_orbit(struct xbench *b)
{
    for (size_t k = 0; k < NCASES; k++) {
        if (b->exchanges[k])
            orbit_exchanges_close(b->exchanges[k]);
        if (b->streams[k])
            orbit_streams_close(b->streams[k]);
    }
    if (b->f)
        orbit_fleet_leave(b->f);
    orbit_fleet_unlink(b->fleet);
}

static int parse(int argc, char **argv, struct xbench *b)
{
    static const struct option longopts[] = {
        { "bytes", required_argument, 0, 'b' }, { "pairs", required_argument, 0, 'r' },
        { "repeat", required_argument, 0, 'r' }, { "cpus", required_argument, 0, 'c' },
        { "json", no_argument, 0, 'j' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
        { 0, 0, 0, 0 } };
    b->bytes = 256u << 20;
    b->pairs = PAIRS_DEFAULT;
    b->cpu[0] = b->cpu[1] = -1;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":b:r:c:jh", longopts, NULL)) != -1;) {
        if (c == 'b')
            b->bytes = cli_size(BENCH_TOOL, "--bytes", optarg, 1u << 20, UINT64_C(1) << 40);
        else if (c == 'r')
            b->pairs = pairs_arg(argv[optind - 1][2] == 'r' ? "--repeat" : "--pairs", optarg);
        else if (c == 'c') {
            bench_cpu_pair("--cpus", optarg, b->cpu);
            bench_check_cpus("--cpus", b->cpu);
            b->cpus_given = true;
        } else if (c == 'j')
            b->json = true;
        else if (c == 'h' || c == 'V') {
            c == 'h' ? (void)fputs(usage, stdout) : cli_version(BENCH_TOOL);
            return 0;
        } else
            cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
    }
    bench_no_operands(argc, argv);
    return -1;
}

static void report_json(const struct xbench *b)
{
    printf("{\"bench\":\"transfer\",");
    run_print_json(&b->run, stdout);
    printf(",\"bytes_per_run\":" CLI_JSON_U64 ",\"cpus\":[%d,%d],\"messages_in_flight\":%u,\"results\":[",
           b->bytes, b->cpu[0], b->cpu[1], XF_IN_FLIGHT);
    const char *sep = "";
    for (size_t k = 0; k < NCASES; k++) {
        const struct xcase *c = &cases[k];
        for (int i = 0; i < c->ncells; i++) {
            struct cell cell = c->cells[i];
            printf("%s{\"case\":\"%s\",\"message_bytes\":" CLI_JSON_SIZE ",\"messages\":" CLI_JSON_U64
                   ",\"transport\":\"%s\",\"wait\":\"%s\",\"gbps\":", sep, c->key, c->msg, b->bytes / c->msg,
                   xport_key[cell.xp], wait_key[cell.wait]);
            series_print_json(&b->gbps[k][i], true, stdout);
            if (cell.xp != XP_RING) {
                struct ratio_stats r = ratio_stats(&b->gbps[k][i], &b->gbps[k][0], true);
                printf(",\"over_zero_copy_ring\":");
                ratio_print_json(&r, stdout);
            }
            printf("}");
            sep = ",";
        }
    }
    printf("]}\n");
}

static void report(const struct xbench *b)
{
    if (b->json) {
        report_json(b);
        return;
    }
    printf("orbit-bench transfer: one-way, every byte written and read, %" PRIu64 " MiB a run, %d pairs, "
           "receiver on CPU %d, sender on CPU %d\n", b->bytes >> 20, b->pairs, b->cpu[0], b->cpu[1]);
    run_print_text(&b->run, stdout);
    printf("%-38s %-24s %8s  %s\n", "case", "transport", "GB/s", "x ring");
    for (size_t k = 0; k < NCASES; k++) {
        const struct xcase *c = &cases[k];
        for (int i = 0; i < c->ncells; i++) {
            char name[48], r[48] = "";
            struct cell cell = c->cells[i];
            snprintf(name, sizeof name, "%s%s", cell.xp == XP_RING ? "zero-copy ring" : xport_key[cell.xp],
                     cell.xp == XP_RING ? "" : cell.wait == XW_SPIN ? ", spinning" : ", blocking");
            if (cell.xp != XP_RING) {
                struct ratio_stats rs = ratio_stats(&b->gbps[k][i], &b->gbps[k][0], true);
                ratio_text(&rs, r, sizeof r);
            }
            printf("%-38s %-24s %8.2f  %s\n", i ? "" : c->name, name, series_stats(&b->gbps[k][i], true).median, r);
        }
    }
}

int bench_transfer(int argc, char **argv)
{
    static struct xbench b;
    int rc = parse(argc, argv, &b);
    if (rc >= 0)
        return rc;
    snprintf(b.fleet, sizeof b.fleet, "bench-transfer-%d", (int)getpid());
    bench_unlink_on_signal(b.fleet);
    b.sh = mmap(NULL, sizeof *b.sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    b.slots = map_slots();
    if (b.sh == MAP_FAILED || !b.slots) {
        perror("orbit-bench transfer: mmap");
        return 1;
    }
    b.spin_default = orbit_spin_ns();
    run_begin(&b.run, b.pairs, b.cpu);
    if (!b.cpus_given) {
        b.cpu[0] = b.run.floor_cpu[0];
        b.cpu[1] = b.run.floor_cpu[1];
    }
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    int status = open_orbit(&b) < 0 ? 1 : 0;
    if (status)
        fprintf(stderr, "orbit-bench transfer: set-up: %s\n", orbit_last_error());
    for (int pair = 0; pair < b.pairs && status == 0; pair++) {
        run_floor(&b.run, pair);
        place_pin(b.cpu[0]);
        for (size_t k = 0; k < NCASES && status == 0; k++)
            for (int j = 0; j < cases[k].ncells && status == 0; j++) {
                int i = run_orbit_first(pair) ? cases[k].ncells - 1 - j : j;   /* the ring last, then first */
                double g = run_cell(&b, k, cases[k].cells[i]);
                if (g < 0)
                    status = 1;
                series_put(&b.gbps[k][i], pair, g);
            }
        sched_setaffinity(0, sizeof saved, &saved);
    }
    run_end(&b.run);
    close_orbit(&b);
    munmap(b.slots, XF_BUFFER);
    munmap(b.sh, sizeof *b.sh);
    if (status) {
        fprintf(stderr, "orbit-bench transfer: a run failed\n");
        return status;
    }
    report(&b);
    return 0;
}
