/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench exchange: options, the pairs (every round-trip cell's three transports
 * back to back, the order alternating, --pairs times; the relay's three kinds the
 * same way), and the report.
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <orbit/exchange.h>
#include <orbit/uring.h>
#include "cli.h"
#include "bench.h"
#include "bench_exchange.h"
#include "bench_pair.h"
#include "bench_place.h"
#include "bench_plot.h"

static const char *const model_name[M_COUNT] = { "thread", "loop" };
static const char *const r_key[R_COUNT] = { "arena", "splice", "copy" };

#define NCFG 8
static const struct cfg cfgs[NCFG] = {
    { 1, 65536, 4096 }, { 1, 65536, 65536 }, { 1, 1u << 20, 4096 }, { 1, 1u << 20, 65536 },
    { 8, 65536, 4096 }, { 8, 65536, 65536 }, { 8, 1u << 20, 4096 }, { 8, 1u << 20, 65536 },
};

/* Every cell's figures per pair. */
struct rt_cell { struct series gbps, sleeps; };
struct exchange_figures {
    struct bench_run run;
    struct rt_cell rt[M_COUNT][NCFG][T_COUNT];
    struct series relay[R_COUNT];
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: orbit-bench exchange [--json] [--touch] [--bytes N] [--relay-bytes N] [--no-relay]\n"
        "                            [--no-roundtrip] [--only T] [--model M] [--conc N] [--body N]\n"
        "                            [--chunk N] [--pairs N] [--cpus C,S] [--procs N | --scale]\n"
        "                            [--plot FILE.svg]\n"
        "  Round trips between two processes (request then response of one body each, a fresh\n"
        "  exchange per round trip) through the payload arena, beside persistent orbit streams and\n"
        "  persistent AF_UNIX socketpairs: bodies of 64 KiB and 1 MiB in 4 KiB and 64 KiB chunks,\n"
        "  1 and 8 concurrent exchanges. GB/s counts request + response bytes. Two models:\n"
        "    thread  each concurrent round trip is a thread (and fleet node) in each process,\n"
        "            using the blocking calls\n"
        "    loop    each process is one thread keeping every round trip in flight with try_*\n"
        "            (non-blocking) calls, then poll(2) on a readiness eventfd or the sockets\n"
        "  Relay: TCP -> arena (READ_FIXED) -> another process -> TCP (WRITE_FIXED) against a\n"
        "  splice(2) relay and a read/write relay in one process.\n"
        "  --bytes N        bytes per round-trip run (default 256M; K/M/G suffixes)\n"
        "  --relay-bytes N  bytes through each relay run (default 128M)\n"
        "  --touch          receivers also read every byte they receive\n"
        "  --only T         one round-trip transport: exchange, stream or socketpair\n"
        "  --model M        one model: thread or loop (default both)\n"
        "  --conc N, --body N, --chunk N   only the configurations with that value\n"
        "  --pairs N        run every cell's transports (and the relays) back to back N times, the\n"
        "                   order alternating (default 9, at most 100; --repeat N is the same)\n"
        "  --cpus C,S       pin the client process (every thread) to CPU C, the server to CPU S\n"
        "  --procs N        instead: N client/server pairs at once (2N processes), each doing\n"
        "                   round trips of 64 KiB bodies in 64 KiB chunks (thread model, conc 1)\n"
        "                   through the exchange, then through a socketpair: GB/s of all pairs\n"
        "  --scale          the same for every pair count from 1 to the CPUs (at most 64)\n"
        "  --plot FILE      with --procs or --scale: GB/s against pairs as SVG\n"
        "  --json           one JSON object instead of the table\n"
        "  exch/sock is the median over the pairs of the exchange's GB/s over the socketpair's in\n"
        "  the same pair, [min-max] its spread. See orbit-bench(1) on reading the output.\n");
}

#define SIZE_MAX_ARG (1ull << 40)   /* 1 TiB: any size option */

/* The index of arg in names, or a one-line error naming opt (exit 2). */
static int name_index(const char *opt, const char *const *names, int n, const char *arg)
{
    for (int i = 0; i < n; i++)
        if (strcmp(arg, names[i]) == 0)
            return i;
    cli_bad(BENCH_TOOL, opt, arg, "unknown (see --help)");
}

static void parse_one(struct opts *o, int c, char **argv)
{
    switch (c) {
    case 'j': o->json = true; break;
    case 't': o->touch = true; break;
    case 'b': o->bytes = cli_size(BENCH_TOOL, "--bytes", optarg, 1, SIZE_MAX_ARG); break;
    case 'r':
        o->relay_bytes = cli_size(BENCH_TOOL, "--relay-bytes", optarg, RCHUNK, SIZE_MAX_ARG);
        o->relay_bytes = o->relay_bytes / RCHUNK * RCHUNK;
        break;
    case 'R': o->relay = false; break;
    case 'T': o->roundtrip = false; break;
    case 'o': o->only = name_index("--only", bx_transport_name, T_COUNT, optarg); break;
    case 'm': o->model = name_index("--model", model_name, M_COUNT, optarg); break;
    case 'p': bench_cpu_pair("--cpus", optarg, o->cpu); break;
    case 'n': o->pairs = pairs_arg(argv[optind - 1][2] == 'r' ? "--repeat" : "--pairs", optarg); break;
    case 'c': o->conc = (unsigned)cli_int(BENCH_TOOL, "--conc", optarg, 1, 1 << 16); break;
    case 'P': o->procs = cli_int(BENCH_TOOL, "--procs", optarg, 1, SCALE_PAIRS_MAX); break;
    case 'S': o->procs = -1; break;
    case 'B': o->body = cli_size(BENCH_TOOL, "--body", optarg, 1, SIZE_MAX_ARG); break;
    case 'C': o->chunk = cli_size(BENCH_TOOL, "--chunk", optarg, 1, SIZE_MAX_ARG); break;
    case 'G': plot_check_path("--plot", optarg, false); o->plot = optarg; break;
    default: cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
    }
}

/* 0: run; 1: --help was printed. */
static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        { "json", no_argument, 0, 'j' }, { "touch", no_argument, 0, 't' }, { "bytes", required_argument, 0, 'b' },
        { "relay-bytes", required_argument, 0, 'r' }, { "no-relay", no_argument, 0, 'R' },
        { "no-roundtrip", no_argument, 0, 'T' }, { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'V' },
        { "only", required_argument, 0, 'o' }, { "conc", required_argument, 0, 'c' },
        { "body", required_argument, 0, 'B' }, { "chunk", required_argument, 0, 'C' },
        { "model", required_argument, 0, 'm' }, { "repeat", required_argument, 0, 'n' },
        { "pairs", required_argument, 0, 'n' }, { "plot", required_argument, 0, 'G' },
        { "cpus", required_argument, 0, 'p' }, { "procs", required_argument, 0, 'P' },
        { "scale", no_argument, 0, 'S' }, { 0, 0, 0, 0 },
    };
    *o = (struct opts){ .bytes = 256ull << 20, .relay_bytes = 128ull << 20, .relay = true, .roundtrip = true,
                        .only = -1, .model = -1, .pairs = PAIRS_DEFAULT, .cpu = { -1, -1 } };
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":", longopts, NULL)) != -1;) {
        if (c == 'h' || c == 'V') {
            c == 'h' ? usage(stdout) : cli_version(BENCH_TOOL);
            return 1;
        }
        parse_one(o, c, argv);
    }
    bench_no_operands(argc, argv);
    bench_check_cpus("--cpus", o->cpu);
    struct io_uring ring;
    if (o->relay && io_uring_queue_init(2, &ring, 0) < 0) {   /* the arena relay reads into fixed buffers */
        fprintf(stderr, BENCH_TOOL " exchange: relay skipped (it needs io_uring): %s\n",
                orbit_uring_futex_status());
        o->relay = false;
    } else if (o->relay) {
        io_uring_queue_exit(&ring);
    }
    if (o->plot && !o->procs)
        cli_usage_error(BENCH_TOOL, "--plot draws a curve over pair counts: give --scale or --procs");
    snprintf(o->fleet, sizeof o->fleet, "bench-exch-%d", (int)getpid());
    bench_unlink_on_signal(o->fleet);
    return 0;
}

static bool wanted(const struct opts *o, int i, int t)
{
    return (o->only < 0 || t < 0 || o->only == t) && (!o->conc || o->conc == cfgs[i].conc) &&
           (!o->body || o->body == cfgs[i].body) && (!o->chunk || o->chunk == cfgs[i].chunk);
}

static const char *size_text(size_t v, char *buf, size_t len)
{
    if (v >= (1u << 20))
        snprintf(buf, len, "%zuM", v >> 20);
    else
        snprintf(buf, len, "%zuK", v >> 10);
    return buf;
}

static bool model_wanted(const struct opts *o, int m) { return o->model < 0 || o->model == m; }

static double med(const struct series *s, bool higher_better) { return series_stats(s, higher_better).median; }

static void print_cell(const struct opts *o, int m, int i, const struct rt_cell *r)
{
    char b[16], c[16], k[16] = "-", rt[48];
    (void)o;
    struct ratio_stats x = ratio_stats(&r[T_EXCH].gbps, &r[T_SOCK].gbps, true);
    if (m == M_LOOP)
        snprintf(k, sizeof k, "%.2f", med(&r[T_SOCK].sleeps, false));
    printf("  %-6s %-4u %-5s %-5s %9.2f %9.2f %11.2f  %-20s %.2f|%.2f|%s\n", model_name[m], cfgs[i].conc,
           size_text(cfgs[i].body, b, sizeof b), size_text(cfgs[i].chunk, c, sizeof c), med(&r[T_EXCH].gbps, true),
           med(&r[T_STREAM].gbps, true), med(&r[T_SOCK].gbps, true), ratio_text(&x, rt, sizeof rt),
           med(&r[T_EXCH].sleeps, false), med(&r[T_STREAM].sleeps, false), k);
}

static void print_table(const struct opts *o, const struct exchange_figures *f)
{
    printf("orbit-bench exchange: %d pairs, %" PRIu64 " MiB per round-trip run%s\n", o->pairs, o->bytes >> 20,
           o->touch ? ", receivers touch every byte" : "");
    run_print_text(&f->run, stdout);
    if (o->roundtrip) {
        printf("round trips between two processes, GB/s of request + response, median of pairs\n");
        printf("  %-6s %-4s %-5s %-5s %9s %9s %11s  %-20s %s\n", "model", "conc", "body", "chunk", "exchange",
               "stream", "socketpair", "exch/sock", "sleeps/rt exch|stream|sock");
        for (int m = 0; m < M_COUNT; m++)
            for (int i = 0; model_wanted(o, m) && i < NCFG; i++)
                if (wanted(o, i, -1))
                    print_cell(o, m, i, f->rt[m][i]);
        printf("  sleeps/rt: futex parks per round trip (thread model, orbit only) or blocking poll(2)\n"
               "  calls per round trip (loop model), both processes together\n");
    }
    if (o->relay) {
        char a[48], b[48];
        struct ratio_stats s = ratio_stats(&f->relay[R_ARENA], &f->relay[R_SPLICE], true);
        struct ratio_stats c = ratio_stats(&f->relay[R_ARENA], &f->relay[R_COPY], true);
        printf("relay of %" PRIu64 " MiB, TCP -> relay -> TCP (GB/s): arena (2 processes, fixed buffers) %.2f, "
               "splice %.2f, read/write %.2f; arena/splice %s, arena/read-write %s\n", o->relay_bytes >> 20,
               med(&f->relay[R_ARENA], true), med(&f->relay[R_SPLICE], true), med(&f->relay[R_COPY], true),
               ratio_text(&s, a, sizeof a), ratio_text(&c, b, sizeof b));
    }
}

static void print_cell_json(int m, int i, const struct rt_cell *r, bool comma)
{
    printf("%s{\"model\":\"%s\",\"concurrency\":%u,\"body\":" CLI_JSON_SIZE ",\"chunk\":" CLI_JSON_SIZE,
           comma ? "," : "", model_name[m], cfgs[i].conc, cfgs[i].body, cfgs[i].chunk);
    for (int t = 0; t < T_COUNT; t++) {
        printf(",\"%s_gbps\":", bx_transport_name[t]);
        series_print_json(&r[t].gbps, true, stdout);
        printf(",\"%s_sleeps_per_rt\":", bx_transport_name[t]);
        if (m == M_THREAD && t == T_SOCK)
            printf("null");   /* blocking sockets sleep inside read(2): not counted */
        else
            printf("%.3f", med(&r[t].sleeps, false));
    }
    struct ratio_stats x = ratio_stats(&r[T_EXCH].gbps, &r[T_SOCK].gbps, true);
    printf(",\"exchange_over_socketpair\":");
    ratio_print_json(&x, stdout);
    printf("}");
}

static void print_json(const struct opts *o, const struct exchange_figures *f)
{
    printf("{\"bench\":\"exchange\",");
    run_print_json(&f->run, stdout);
    printf(",\"touch\":%s,\"bytes\":" CLI_JSON_U64 ",\"cpus\":[%d,%d],\"roundtrip\":[", o->touch ? "true" : "false",
           o->bytes, o->cpu[0], o->cpu[1]);
    for (int m = 0, n = 0; o->roundtrip && m < M_COUNT; m++)
        for (int i = 0; model_wanted(o, m) && i < NCFG; i++)
            if (wanted(o, i, -1))
                print_cell_json(m, i, f->rt[m][i], n++ > 0);
    printf("]");
    if (o->relay) {
        printf(",\"relay\":{\"bytes\":" CLI_JSON_U64, o->relay_bytes);
        for (int k = 0; k < R_COUNT; k++) {
            printf(",\"%s_gbps\":", r_key[k]);
            series_print_json(&f->relay[k], true, stdout);
        }
        struct ratio_stats s = ratio_stats(&f->relay[R_ARENA], &f->relay[R_SPLICE], true);
        printf(",\"arena_over_splice\":");
        ratio_print_json(&s, stdout);
        printf("}");
    }
    printf("}\n");
}

/* One pair's round trips: every wanted cell's transports back to back, the order alternating. */
static void roundtrip_pair(struct opts *o, struct exchange_figures *f, int pair)
{
    for (int i = 0; o->roundtrip && i < NCFG; i++)
        for (int m = 0; m < M_COUNT; m++)
            for (int j = 0; j < T_COUNT; j++) {
                int t = run_orbit_first(pair) ? j : T_COUNT - 1 - j;
                if (!wanted(o, i, t) || !model_wanted(o, m))
                    continue;
                struct rt_result r = m == M_LOOP ? bx_loop_run(o, cfgs[i], (enum transport)t)
                                                 : bx_thread_run(o, cfgs[i], (enum transport)t);
                series_put(&f->rt[m][i][t].gbps, pair, r.gbps);
                series_put_count(&f->rt[m][i][t].sleeps, pair, r.gbps > 0 ? r.sleeps_per_rt : -1);
            }
}

static int exchange_pairs(struct opts *o)
{
    static struct exchange_figures f;
    cpu_set_t all;
    sched_getaffinity(0, sizeof all, &all);
    run_begin(&f.run, o->pairs, o->cpu);
    for (int pair = 0; pair < o->pairs; pair++) {
        run_floor(&f.run, pair);
        bx_pin(o, 0);
        roundtrip_pair(o, &f, pair);
        sched_setaffinity(0, sizeof all, &all);   /* the relay is not pinned */
        for (int j = 0; o->relay && j < R_COUNT; j++) {
            int k = run_orbit_first(pair) ? j : R_COUNT - 1 - j;
            series_put(&f.relay[k], pair, bx_relay_run(o, (enum relay_kind)k));
        }
    }
    run_end(&f.run);
    orbit_fleet_unlink(o->fleet);
    if (o->json)
        print_json(o, &f);
    else
        print_table(o, &f);
    return 0;
}

/* ---- --procs / --scale ------------------------------------------------------------- */

static void scale_row(const struct opts *o, int p, int lo, const struct series *x, const struct series *k)
{
    struct ratio_stats r = ratio_stats(x, k, true);
    char rt[48];
    if (!o->json) {
        printf("%-6d %14.2f %16.2f   %s\n", p, med(x, true), med(k, true), ratio_text(&r, rt, sizeof rt));
        return;
    }
    printf("%s{\"processes\":%d,\"pairs\":%d,\"exchange_gbps\":", p > lo ? "," : "", 2 * p, p);
    series_print_json(x, true, stdout);
    printf(",\"socketpair_gbps\":");
    series_print_json(k, true, stdout);
    printf(",\"exchange_over_socketpair\":");
    ratio_print_json(&r, stdout);
    printf("}");
}

static int scale_plot(const struct opts *o, int lo, int hi, const struct series *x, const struct series *k)
{
    static struct chart ch;
    snprintf(ch.title, sizeof ch.title, "orbit-bench exchange --scale: 64 KiB round trips, median of %d pairs",
             o->pairs);
    snprintf(ch.x_label, sizeof ch.x_label, "client/server pairs of processes");
    snprintf(ch.y_label, sizeof ch.y_label, "GB/s, all pairs");
    struct chart_series *a = chart_add(&ch, "orbit exchange"), *b = chart_add(&ch, "socketpair");
    for (int p = lo; p <= hi; p++) {
        plot_scale_point(a, p, &x[p], 1);
        plot_scale_point(b, p, &k[p], 1);
    }
    return plot_save("exchange", o->plot, &ch, 1);
}

static int scale_measure(struct opts *o, struct bench_run *run, int lo, int hi, struct series *x,
                         struct series *k)
{
    struct scale_gate *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED)
        return 1;
    int status = 0;
    for (int p = lo; p <= hi && !status; p++)
        for (int i = 0; i < o->pairs && !status; i++) {
            run_floor(run, i);
            for (int side = 0; side < 2 && !status; side++) {
                bool exch = (side == 0) == run_orbit_first(i);
                double v = bx_scale_once(o, p, exch ? T_EXCH : T_SOCK, g);
                status = v < 0;
                series_put(exch ? &x[p] : &k[p], i, v);
            }
        }
    munmap(g, sizeof *g);
    if (status)
        fprintf(stderr, "orbit-bench exchange: a scaling run failed\n");
    return status;
}

static int exchange_scale(struct opts *o)
{
    int lo = o->procs > 0 ? o->procs : 1, hi = o->procs > 0 ? o->procs : bench_cpus();
    hi = hi > SCALE_PAIRS_MAX ? SCALE_PAIRS_MAX : hi;
    static struct series x[SCALE_PAIRS_MAX + 1], k[SCALE_PAIRS_MAX + 1];
    static struct bench_run run;
    const int none[2] = { -1, -1 };
    run_begin(&run, o->pairs, none);
    int status = scale_measure(o, &run, lo, hi, x, k);
    run_end(&run);
    if (status)
        return status;
    if (o->json) {
        printf("{\"bench\":\"exchange_scale\",");
        run_print_json(&run, stdout);
        printf(",\"body\":\"65536\",\"chunk\":\"65536\",\"bytes_per_pair\":" CLI_JSON_U64
               ",\"cpus\":%d,\"baseline\":\"socketpair\",\"results\":[", o->bytes, bench_cpus());
    } else {
        printf("orbit-bench exchange: round trips, 64 KiB bodies in 64 KiB chunks, N client/server pairs at once\n");
        run_print_text(&run, stdout);
        printf("%-6s %14s %16s   %s\n", "pairs", "exchange GB/s", "socketpair GB/s", "exch/sock");
    }
    for (int p = lo; p <= hi; p++)
        scale_row(o, p, lo, &x[p], &k[p]);
    if (o->json)
        printf("]}\n");
    return o->plot ? scale_plot(o, lo, hi, x, k) : 0;
}

int bench_exchange(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o))
        return 0;
    return o.procs ? exchange_scale(&o) : exchange_pairs(&o);
}
