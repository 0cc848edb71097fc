/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench pool: reserve -> accept -> complete operations per second, with
 * one process and with two processes on one key and on distinct keys, beside
 * a process-shared pthread mutex protecting the same counters (a per-key lock
 * over reserved/active/fence/stamps/changes), in the same run.
 *
 * Each process owns one resource of the given capacity under its key and
 * drives it: reserve (one CAS), accept (fence out of the pending set, unit to
 * active), complete (unit back; the key's change word moves only if someone
 * looks). On one key the processes share the key's line (read only when
 * nobody waits); on distinct keys nothing. --procs N runs N processes, --scale
 * sweeps 1..CPUs, each beside the mutex, in --pairs pairs run back to back. --floor adds the pool's atomic steps
 * alone, inline, without the API's checks: the most any implementation of
 * that protocol can reach on this machine.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/pool.h>
#include "cli.h"
#include "bench.h"
#include "bench_clock.h"
#include "bench_pair.h"
#include "bench_plot.h"

#define POOL_BENCH_PROCS_MAX 256

struct mutex_key {                  /* the baseline's per-key state, one per 128 bytes */
    pthread_mutex_t lock;
    uint32_t reserved, active, capacity, changes;
    uint64_t fence, since_ms, last_reserve_ms;
    uint8_t pad[128 - sizeof(pthread_mutex_t) - 40];
};

/* --floor: a resource's pair (units, fence) and its 16 entries, and a key's waiter words. */
struct floor_res {
    _Alignas(64) unsigned __int128 pair;
    uint64_t last_reserve_ms;
    _Alignas(64) struct { _Atomic uint64_t fence, since; } entry[16];
    _Atomic uint64_t released[16];
};
struct floor_key { _Alignas(64) _Atomic uint32_t changes, parked, watch_count, watched; };

struct shared {
    struct mutex_key keys[POOL_BENCH_PROCS_MAX];
    struct floor_res floor_res[POOL_BENCH_PROCS_MAX];
    struct floor_key floor_keys[POOL_BENCH_PROCS_MAX];
    _Atomic int ready;
    _Atomic int go;
    int64_t elapsed_ns[POOL_BENCH_PROCS_MAX];
    int failed;
};

struct options {
    uint64_t ops;
    uint32_t capacity;
    int procs;                      /* 0: the default scenarios */
    int pairs;                      /* every cell beside its baselines this many times */
    bool scale, json, floor;
    const char *plot;
};

/* MUTEX stamps with the coarse clock the pool uses (the same work); MUTEX_FINE with
 * CLOCK_REALTIME, as the pool did before it took coarse stamps; FLOOR (--floor) is
 * the pool's atomic steps alone. */
enum impl { ORBIT, MUTEX, MUTEX_FINE, FLOOR, IMPLS };
struct scenario { int procs; bool shared_key; };

static const char usage[] =
"usage: orbit-bench pool [--ops N] [--capacity C] [--procs N | --scale] [--pairs N] [--floor]\n"
"                        [--plot FILE.svg] [--json]\n"
"\n"
"  reserve -> accept -> complete operations per second on a pool resource,\n"
"  beside a process-shared pthread mutex protecting the same counters (same\n"
"  run; both stamp reservations with the coarse realtime clock; a second mutex\n"
"  column stamps with CLOCK_REALTIME, as the pool once did). Each process\n"
"  owns one resource under its key and drives it; on one key the pool's\n"
"  processes share the key's line, the mutex's share one lock.\n"
"  Default: 1 process, then 2 on one key and on distinct keys.\n"
"\n"
"  --ops N        operations per process (default 1000000)\n"
"  --capacity C   units per resource (default 4)\n"
"  --procs N      N processes, on one key and on distinct keys (1..256)\n"
"  --scale        every process count from 1 to the CPUs this process may use\n"
"  --pairs N      run every cell beside its baselines N times, back to back, the order\n"
"                 alternating (default 9, at most 100; --repeat N is the same)\n"
"  --plot FILE    with --scale: ops/s against processes as SVG, orbit beside the mutex\n"
"  --floor        also run the pool's atomic steps alone, inline, without the\n"
"                 API (two locked operations, the stamp, the waiter check): the\n"
"                 ceiling of any implementation of the protocol on this machine\n"
"  --json         one JSON object instead of the table\n"
"  -h, --help     this text\n"
"\n"
"  orbit/mutex is the median over the pairs of orbit's rate over the mutex's in\n"
"  the same pair, [min-max] its spread; best-of is the ratio of each side's best\n"
"  pair, shown for comparison only. See orbit-bench(1) on reading the output.\n";

static int mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    int rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc;
}

/*
 * The same three steps under a per-key mutex: reserve (with the fence and the
 * reservation's time stamp, as the pool keeps), accept, complete.
 */
static int mutex_loop(struct mutex_key *k, uint64_t ops, bool fine_clock)
{
    for (uint64_t i = 0; i < ops; i++) {
        uint64_t now = fine_clock ? bench_wall_ms() : bench_wall_ms_coarse();
        pthread_mutex_lock(&k->lock);
        bool room = k->reserved + k->active < k->capacity;
        if (room) {
            k->reserved++;
            k->fence++;
            k->since_ms = k->last_reserve_ms = now;
        }
        pthread_mutex_unlock(&k->lock);
        if (!room)
            return -ORBIT_EBUSY;
        pthread_mutex_lock(&k->lock);
        k->reserved--;
        k->active++;
        pthread_mutex_unlock(&k->lock);
        pthread_mutex_lock(&k->lock);
        k->active--;
        k->changes++;
        pthread_mutex_unlock(&k->lock);
    }
    return 0;
}

/*
 * The held-entry triple's shared-memory steps and nothing else: reserve folds
 * the last DONE entry and takes the next by one 16-byte CAS, releases, stamps and
 * publishes; accept CASes the entry to held; complete stores DONE and reads
 * the key's waiter words. No id, state, epoch or ownership checks, no calls.
 */
static void floor_loop(struct floor_res *r, struct floor_key *k, uint64_t ops)
{
    const uint64_t held = 1ull << 62, done_bit = 1ull << 63;
    for (uint64_t f = 1; f <= ops; f++) {
        uint64_t now = bench_wall_ms_coarse();
        unsigned last = (unsigned)((f - 1) % 16), b = (unsigned)(f % 16);
        unsigned __int128 old = r->pair;
        uint64_t done = atomic_load_explicit(&r->entry[last].since, memory_order_acquire) >> 63;
        __sync_bool_compare_and_swap(&r->pair, old, old + 1 + done);
        atomic_store_explicit(&r->released[last], f - 1, memory_order_release);
        atomic_store_explicit(&r->entry[b].since, now, memory_order_relaxed);
        atomic_store_explicit(&r->entry[b].fence, f, memory_order_release);
        r->last_reserve_ms = now;
        uint64_t expect = f;
        atomic_compare_exchange_strong(&r->entry[b].fence, &expect, f | held);
        atomic_store_explicit(&r->entry[b].since, f | done_bit, memory_order_release);
        uint32_t c = atomic_load(&k->changes);
        if (atomic_load(&k->watched) == c + 1 || atomic_load(&k->parked) || atomic_load(&k->watch_count))
            atomic_fetch_add(&k->changes, 1);   /* never taken: nobody looks */
    }
}

static int orbit_loop(struct orbit_pool *p, orbit_id id, uint64_t ops)
{
    for (uint64_t i = 0; i < ops; i++) {
        struct orbit_lease lease;
        struct orbit_execution ex;
        int rc = orbit_pool_reserve(p, id, &lease);
        if (rc == 0)
            rc = orbit_pool_accept(p, &lease, &ex);
        if (rc < 0)
            return rc;
        orbit_execution_complete(&ex);
    }
    return 0;
}

static void start_line(struct shared *sh)
{
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go))
        bench_cpu_relax();
}

static int orbit_setup(const char *fleet, int index, const struct scenario *sc, const struct options *o,
                       struct orbit_fleet **f, struct orbit_pool **p, orbit_id *id)
{
    struct orbit_fleet_opts fo = ORBIT_FLEET_OPTS_DEFAULT;
    fo.capacity = (uint16_t)(POOL_BENCH_PROCS_MAX + 1);
    orbit_key key = { 0xbe7c4, sc->shared_key ? 0 : (uint64_t)index + 1 };
    int rc = orbit_fleet_join(fleet, &fo, f);
    if (rc == 0 && (rc = orbit_pool_open(*f, NULL, p)) == 0)
        rc = orbit_pool_register(*p, key, o->capacity, id);
    return rc;
}

/* One benchmark process: set up, wait for the start, run, report elapsed time. */
static void worker(const char *fleet, enum impl impl, int index, const struct scenario *sc,
                   const struct options *o, struct shared *sh)
{
    struct orbit_fleet *f = NULL;
    struct orbit_pool *p = NULL;
    orbit_id id = 0;
    int rc = impl == ORBIT ? orbit_setup(fleet, index, sc, o, &f, &p, &id) : 0;
    if (rc < 0) {
        fprintf(stderr, "orbit-bench pool: setup: %s\n", orbit_strerror(rc));
        sh->failed = 1;
    }
    start_line(sh);
    int64_t t0 = bench_now_ns();
    if (rc == 0 && impl == FLOOR)
        floor_loop(&sh->floor_res[index], &sh->floor_keys[sc->shared_key ? 0 : index], o->ops);
    else if (rc == 0)
        rc = impl == ORBIT ? orbit_loop(p, id, o->ops)
                           : mutex_loop(&sh->keys[sc->shared_key ? 0 : index], o->ops, impl == MUTEX_FINE);
    sh->elapsed_ns[index] = bench_now_ns() - t0;
    if (rc < 0) {
        fprintf(stderr, "orbit-bench pool: run: %s\n", orbit_strerror(rc));
        sh->failed = 1;
    }
    if (p) {
        orbit_pool_unregister(p, id);
        orbit_pool_close(p);
    }
    if (f)
        orbit_fleet_leave(f);
    _exit(rc < 0);
}

/* Operations per second of one scenario: all processes' operations over the slowest's time. */
static double run_one(const char *fleet, enum impl impl, const struct scenario *sc, const struct options *o,
                      struct shared *sh)
{
    memset(sh, 0, sizeof *sh);
    for (int i = 0; i < sc->procs; i++) {
        mutex_init(&sh->keys[i].lock);
        sh->keys[i].capacity = o->capacity;
    }
    pid_t kids[POOL_BENCH_PROCS_MAX];
    int started = 0;
    for (; started < sc->procs; started++) {
        if ((kids[started] = bench_fork()) < 0)
            break;
        if (kids[started] == 0)
            worker(fleet, impl, started, sc, o, sh);
    }
    if (started < sc->procs)
        sh->failed = 1;
    while (!sh->failed && atomic_load(&sh->ready) < started)
        bench_cpu_relax();
    atomic_store(&sh->go, 1);
    int64_t slowest = 1;
    for (int i = 0; i < started; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            sh->failed = 1;
        if (sh->elapsed_ns[i] > slowest)
            slowest = sh->elapsed_ns[i];
    }
    for (int i = 0; i < sc->procs; i++)
        pthread_mutex_destroy(&sh->keys[i].lock);
    return sh->failed ? -1 : (double)o->ops * sc->procs * 1e9 / (double)slowest;
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "ops", required_argument, 0, 'n' }, { "capacity", required_argument, 0, 'c' },
        { "procs", required_argument, 0, 'p' }, { "scale", no_argument, 0, 's' },
        { "repeat", required_argument, 0, 'r' }, { "pairs", required_argument, 0, 'r' },
        { "floor", no_argument, 0, 'f' }, { "plot", required_argument, 0, 'P' },
        { "json", no_argument, 0, 'j' }, { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    *o = (struct options){ .ops = 1000000, .capacity = 4, .pairs = PAIRS_DEFAULT };
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":n:c:p:r:P:sfjh", longopts, NULL)) != -1;) {
        if (c == 'n')
            o->ops = cli_u64(BENCH_TOOL, "--ops", optarg, 1, UINT64_MAX / POOL_BENCH_PROCS_MAX);
        else if (c == 'c')
            o->capacity = (uint32_t)cli_u64(BENCH_TOOL, "--capacity", optarg, 1, UINT32_MAX);
        else if (c == 'p')
            o->procs = cli_int(BENCH_TOOL, "--procs", optarg, 1, POOL_BENCH_PROCS_MAX);
        else if (c == 'r')
            o->pairs = pairs_arg(argv[optind - 1][2] == 'r' ? "--repeat" : "--pairs", optarg);
        else if (c == 'P') {
            plot_check_path("--plot", optarg, false);
            o->plot = optarg;
        }
        else if (c == 's')
            o->scale = true;
        else if (c == 'f')
            o->floor = true;
        else if (c == 'j')
            o->json = true;
        else if (c == 'h' || c == 'V') {
            c == 'h' ? (void)fputs(usage, stdout) : cli_version(BENCH_TOOL);
            return 0;
        } else
            cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
    }
    bench_no_operands(argc, argv);
    if (o->scale && o->procs)
        cli_usage_error(BENCH_TOOL, "--procs or --scale, not both");
    if (o->plot && !o->scale && !o->procs)
        cli_usage_error(BENCH_TOOL, "--plot draws a process-count curve: give --scale or --procs");
    return -1;
}

/* The scenarios to run: default, --procs N, or --scale 1..CPUs. */
static size_t plan(const struct options *o, struct scenario *out, size_t max)
{
    size_t n = 0;
    if (!o->procs && !o->scale) {
        out[n++] = (struct scenario){ 1, true };
        out[n++] = (struct scenario){ 2, true };
        out[n++] = (struct scenario){ 2, false };
        return n;
    }
    int lo = o->procs ? o->procs : 1, hi = o->procs ? o->procs : bench_cpus();
    if (hi > POOL_BENCH_PROCS_MAX)
        hi = POOL_BENCH_PROCS_MAX;
    for (int p = lo; p <= hi && n + 2 <= max; p++) {
        out[n++] = (struct scenario){ p, true };
        if (p > 1)
            out[n++] = (struct scenario){ p, false };
    }
    return n;
}

static void scenario_name(const struct scenario *sc, char *buf, size_t len, bool key)
{
    if (sc->procs == 1)
        snprintf(buf, len, key ? "1p" : "1 process");
    else if (key)
        snprintf(buf, len, "%dp_%s", sc->procs, sc->shared_key ? "one_key" : "distinct_keys");
    else
        snprintf(buf, len, "%d processes, %s", sc->procs, sc->shared_key ? "one key" : "distinct keys");
}

/* Every implementation's rate per pair, for each scenario. */
typedef struct series pool_rates[IMPLS];

static void json_cell(const char *key, const struct series *s)
{
    printf(",\"%s\":", key);
    series_print_json(s, true, stdout);
}

static void json_ratio(const char *key, const struct series *a, const struct series *b)
{
    struct ratio_stats r = ratio_stats(a, b, true);
    printf(",\"%s\":", key);
    ratio_print_json(&r, stdout);
}

static void report_json(const struct options *o, const struct bench_run *run, const struct scenario *sc,
                        const pool_rates *rate, size_t n)
{
    char name[64];
    printf("{\"bench\":\"pool\",");
    run_print_json(run, stdout);
    printf(",\"ops_per_process\":" CLI_JSON_U64 ",\"capacity\":%" PRIu32 ",\"cpus\":%d,\"baseline\":\"mutex\","
           "\"results\":[", o->ops, o->capacity, bench_cpus());
    for (size_t i = 0; i < n; i++) {
        scenario_name(&sc[i], name, sizeof name, true);
        printf("%s{\"scenario\":\"%s\",\"processes\":%d,\"shared_key\":%s", i ? "," : "", name, sc[i].procs,
               sc[i].shared_key ? "true" : "false");
        json_cell("orbit_ops_per_s", &rate[i][ORBIT]);
        json_cell("mutex_ops_per_s", &rate[i][MUTEX]);
        json_ratio("orbit_over_mutex", &rate[i][ORBIT], &rate[i][MUTEX]);
        json_cell("mutex_fine_clock_ops_per_s", &rate[i][MUTEX_FINE]);
        json_ratio("orbit_over_mutex_fine_clock", &rate[i][ORBIT], &rate[i][MUTEX_FINE]);
        if (o->floor) {
            json_cell("floor_ops_per_s", &rate[i][FLOOR]);
            json_ratio("floor_over_mutex", &rate[i][FLOOR], &rate[i][MUTEX]);
        }
        printf("}");
    }
    printf("]}\n");
}

static void report(const struct options *o, const struct bench_run *run, const struct scenario *sc,
                   const pool_rates *rate, size_t n)
{
    char name[64], r1[48], r2[48], r3[48];
    if (o->json) {
        report_json(o, run, sc, rate, n);
        return;
    }
    printf("orbit-bench pool: reserve->accept->complete, %" PRIu64 " ops per process, capacity %" PRIu32 ", %d pairs\n",
           o->ops, o->capacity, o->pairs);
    run_print_text(run, stdout);
    printf("%-26s %12s %12s  %-20s %8s  %-20s", "scenario", "orbit ops/s", "mutex ops/s", "orbit/mutex",
           "best-of", "orbit/mutex fine clk");
    printf(o->floor ? "  %12s %s\n" : "\n", "floor ops/s", "floor/mutex");
    for (size_t i = 0; i < n; i++) {
        struct ratio_stats m = ratio_stats(&rate[i][ORBIT], &rate[i][MUTEX], true);
        struct ratio_stats f = ratio_stats(&rate[i][ORBIT], &rate[i][MUTEX_FINE], true);
        scenario_name(&sc[i], name, sizeof name, false);
        printf("%-26s %12.0f %12.0f  %-20s %7.2fx  %-20s", name, series_stats(&rate[i][ORBIT], true).median,
               series_stats(&rate[i][MUTEX], true).median, ratio_text(&m, r1, sizeof r1), m.best_of,
               ratio_text(&f, r2, sizeof r2));
        if (o->floor) {
            struct ratio_stats fl = ratio_stats(&rate[i][FLOOR], &rate[i][MUTEX], true);
            printf("  %12.0f %s", series_stats(&rate[i][FLOOR], true).median, ratio_text(&fl, r3, sizeof r3));
        }
        printf("\n");
    }
}

/* --plot: ops/s against processes, orbit and the mutex, on one key and on distinct keys. */
static int plot(const struct options *o, const struct scenario *sc, const pool_rates *rate, size_t n)
{
    static struct chart ch;
    snprintf(ch.title, sizeof ch.title, "orbit-bench pool --scale: reserve->accept->complete, median of %d pairs",
             o->pairs);
    snprintf(ch.x_label, sizeof ch.x_label, "processes");
    snprintf(ch.y_label, sizeof ch.y_label, "operations/s, all processes");
    struct chart_series *s[4] = { chart_add(&ch, "orbit, one key"), chart_add(&ch, "mutex, one key"),
                                  chart_add(&ch, "orbit, distinct keys"), chart_add(&ch, "mutex, distinct keys") };
    for (size_t i = 0; i < n; i++) {
        int base = sc[i].shared_key ? 0 : 2;
        plot_scale_point(s[base], sc[i].procs, &rate[i][ORBIT], 1);
        plot_scale_point(s[base + 1], sc[i].procs, &rate[i][MUTEX], 1);
        if (sc[i].procs == 1) {                  /* one process: both curves start here */
            plot_scale_point(s[2], 1, &rate[i][ORBIT], 1);
            plot_scale_point(s[3], 1, &rate[i][MUTEX], 1);
        }
    }
    return plot_save("pool", o->plot, &ch, 1);
}

/* One pair: the floor, then every scenario's implementations back to back. */
static int run_pair(const char *fleet, const struct options *o, struct bench_run *run, const struct scenario *sc,
                    size_t n, pool_rates *rate, struct shared *sh, int pair)
{
    int impls = o->floor ? IMPLS : FLOOR;
    run_floor(run, pair);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < impls; k++) {
            int impl = run_orbit_first(pair) ? k : impls - 1 - k;
            double r = run_one(fleet, (enum impl)impl, &sc[i], o, sh);
            if (r < 0)
                return 1;
            series_put(&rate[i][impl], pair, r);
        }
    return 0;
}

int bench_pool(int argc, char **argv)
{
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char fleet[64];
    snprintf(fleet, sizeof fleet, "bench-pool-%d", (int)getpid());
    bench_unlink_on_signal(fleet);
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("orbit-bench pool: mmap");
        return 1;
    }
    static struct scenario sc[2 * POOL_BENCH_PROCS_MAX];
    static pool_rates rate[2 * POOL_BENCH_PROCS_MAX];
    static struct bench_run run;
    const int none[2] = { -1, -1 };
    size_t n = plan(&o, sc, 2 * POOL_BENCH_PROCS_MAX);
    run_begin(&run, o.pairs, none);
    int status = 0;
    for (int pair = 0; pair < o.pairs && status == 0; pair++)
        status = run_pair(fleet, &o, &run, sc, n, rate, sh, pair);
    run_end(&run);
    orbit_fleet_unlink(fleet);
    munmap(sh, sizeof *sh);
    if (status) {
        fprintf(stderr, "orbit-bench pool: a run failed\n");
        return status;
    }
    report(&o, &run, sc, rate, n);
    return o.plot ? plot(&o, sc, rate, n) : 0;
}
