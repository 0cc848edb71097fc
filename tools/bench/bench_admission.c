/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench admission: claim+release pairs per second on the admission
 * ledger with 1 and 2 processes, beside two baselines doing the same
 * all-or-nothing multi-domain charge: a bare robust process-shared pthread
 * mutex over counters (the ledger's floor), and the kernel's own multi-counter
 * admission, a SysV semaphore set with semop(IPC_NOWAIT|SEM_UNDO).
 * Default: 1 and 2 processes; --procs N runs N, --scale sweeps 1..CPUs; every
 * cell beside its baselines in --pairs pairs run back to back.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/admission.h>
#include "cli.h"
#include "bench.h"
#include "bench_pair.h"
#include "bench_plot.h"

enum bkind { B_ORBIT, B_MUTEX, B_SEMOP, B_COUNT };
static const char *bkind_name[B_COUNT] = { "orbit admission ledger", "pthread robust mutex + counters",
                                           "SysV semop (kernel)" };
static const char *bkind_key[B_COUNT] = { "orbit", "pthread_mutex", "semop" };

#define BENCH_DOMAINS_MAX 16
#define BENCH_PROCS_MAX 256

struct bench_cfg { double seconds; int domains, pairs; char fleet[64]; int semid; const char *plot; bool json; };

/* MAP_SHARED between the parent and its workers. */
struct bench_shared {
    pthread_mutex_t mutex;                 /* the mutex baseline */
    uint64_t used[BENCH_DOMAINS_MAX], capacity[BENCH_DOMAINS_MAX];
    _Atomic int64_t start_ns[BENCH_PROCS_MAX], end_ns[BENCH_PROCS_MAX];
    _Atomic long pairs[BENCH_PROCS_MAX];
    _Atomic int stop, failed;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int orbit_prepare(const struct bench_cfg *c, struct orbit_fleet **f, struct orbit_admission **a)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = BENCH_PROCS_MAX + 1;
    int rc = orbit_fleet_join(c->fleet, &o, f);
    if (rc == 0 && (rc = orbit_admission_open(*f, NULL, a)) < 0) {
        orbit_fleet_leave(*f);
        *f = NULL;
    }
    return rc;
}

/* Workers look at the stop flag once per this many pairs. */
#define BENCH_BATCH 256

static int run_orbit(const struct bench_cfg *c, struct bench_shared *sh, struct orbit_admission *a, long *done)
{
    struct orbit_units u[BENCH_DOMAINS_MAX];
    for (int d = 0; d < c->domains; d++)
        u[d] = (struct orbit_units){ .domain = 100u + (uint32_t)d, .units = 1 };
    struct orbit_demand dem = { .claim = u, .n_claim = (size_t)c->domains };
    struct orbit_admit_result r;
    int rc = 0;
    for (long i = 0; rc == 0 && (i % BENCH_BATCH || !atomic_load(&sh->stop)); i++, ++*done) {
        rc = orbit_admission_try_claim(a, &dem, &r);
        if (rc == 0 && r.outcome != ORBIT_ADMIT_CLAIMED)
            rc = -ORBIT_EBUSY;
        if (rc == 0)
            rc = orbit_admission_release(a, &r.claim);
    }
    return rc;
}

static int run_mutex(const struct bench_cfg *c, struct bench_shared *sh, long *done)
{
    for (long i = 0; i % BENCH_BATCH || !atomic_load(&sh->stop); i++, ++*done) {
        pthread_mutex_lock(&sh->mutex);
        bool fits = true;
        for (int d = 0; d < c->domains; d++)
            fits = fits && sh->capacity[d] - sh->used[d] >= 1;
        for (int d = 0; fits && d < c->domains; d++)
            sh->used[d] += 1;
        pthread_mutex_unlock(&sh->mutex);
        if (!fits)
            return -ORBIT_EBUSY;
        pthread_mutex_lock(&sh->mutex);
        for (int d = 0; d < c->domains; d++)
            sh->used[d] -= 1;
        pthread_mutex_unlock(&sh->mutex);
    }
    return 0;
}

static int run_semop(const struct bench_cfg *c, struct bench_shared *sh, long *done)
{
    struct sembuf take[BENCH_DOMAINS_MAX], give[BENCH_DOMAINS_MAX];
    for (int d = 0; d < c->domains; d++) {
        take[d] = (struct sembuf){ .sem_num = (unsigned short)d, .sem_op = -1, .sem_flg = IPC_NOWAIT | SEM_UNDO };
        give[d] = (struct sembuf){ .sem_num = (unsigned short)d, .sem_op = 1, .sem_flg = SEM_UNDO };
    }
    for (long i = 0; i % BENCH_BATCH || !atomic_load(&sh->stop); i++, ++*done)
        if (semop(c->semid, take, (size_t)c->domains) != 0 || semop(c->semid, give, (size_t)c->domains) != 0)
            return -errno;
    return 0;
}

static void worker(enum bkind k, const struct bench_cfg *c, struct bench_shared *sh, int idx, int gate,
                   int ready)
{
    struct orbit_fleet *f = NULL;
    struct orbit_admission *a = NULL;
    int rc = k == B_ORBIT ? orbit_prepare(c, &f, &a) : 0;
    char go = 1;
    if (write(ready, &go, 1) != 1 || read(gate, &go, 1) != 1)
        _exit(3);
    atomic_store(&sh->start_ns[idx], now_ns());
    long done = 0;
    if (rc == 0)
        rc = k == B_ORBIT ? run_orbit(c, sh, a, &done) : k == B_MUTEX ? run_mutex(c, sh, &done)
                                                       : run_semop(c, sh, &done);
    atomic_store(&sh->end_ns[idx], now_ns());
    atomic_store(&sh->pairs[idx], done);
    if (a) {
        orbit_admission_close(a);
        orbit_fleet_leave(f);
    }
    if (rc < 0) {
        fprintf(stderr, "orbit-bench admission: %s: %s\n", bkind_name[k], orbit_strerror(rc));
        atomic_store(&sh->failed, 1);
    }
    _exit(rc < 0);
}

/* Runs procs workers at once; returns pairs per second, or < 0. */
static double measure(enum bkind k, const struct bench_cfg *c, struct bench_shared *sh, int procs)
{
    int gate[2], ready[2];
    if (pipe(gate) != 0)
        return -1;
    if (pipe(ready) != 0) {
        close(gate[0]);
        close(gate[1]);
        return -1;
    }
    pid_t pid[BENCH_PROCS_MAX];
    int started = 0;
    for (; started < procs; started++) {
        if ((pid[started] = bench_fork()) < 0)
            break;
        if (pid[started] == 0) {
            close(gate[1]);
            close(ready[0]);
            worker(k, c, sh, started, gate[0], ready[1]);
        }
    }
    close(gate[0]);
    close(ready[1]);
    /* Every worker has joined and opened before any starts its clock. */
    char go[BENCH_PROCS_MAX];
    memset(go, 1, sizeof go);
    bool ok = started == procs;
    for (int i = 0; i < started && ok; i++)
        ok = read(ready[0], go, 1) == 1;
    close(ready[0]);
    atomic_store(&sh->stop, 0);
    ok = write(gate[1], go, (size_t)started) == started && ok;
    close(gate[1]);
    struct timespec run = { (time_t)c->seconds, (long)((c->seconds - (double)(time_t)c->seconds) * 1e9) };
    nanosleep(&run, NULL);
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < started; i++) {
        int st;
        ok = waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0 && ok;
    }
    int64_t start = INT64_MAX, end = 0;
    long pairs = 0;
    for (int i = 0; i < procs; i++) {
        pairs += atomic_load(&sh->pairs[i]);
        start = atomic_load(&sh->start_ns[i]) < start ? atomic_load(&sh->start_ns[i]) : start;
        end = atomic_load(&sh->end_ns[i]) > end ? atomic_load(&sh->end_ns[i]) : end;
    }
    if (!ok || atomic_load(&sh->failed) || end <= start)
        return -1;
    return (double)pairs / ((double)(end - start) / 1e9);
}

/* Ledger and baselines start with room for every worker's claim in every domain. */
static int setup(struct bench_cfg *c, struct bench_shared *sh)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = BENCH_PROCS_MAX + 1;
    struct orbit_fleet *f;
    struct orbit_admission *a;
    int rc = orbit_fleet_join(c->fleet, &o, &f);
    if (rc < 0)
        return rc;
    if ((rc = orbit_admission_open(f, NULL, &a)) == 0) {
        for (int d = 0; d < c->domains && rc == 0; d++)
            rc = orbit_admission_set_capacity(a, 100u + (uint32_t)d, 100000);
        orbit_admission_close(a);
    }
    orbit_fleet_leave(f);
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->mutex, &at);
    pthread_mutexattr_destroy(&at);
    for (int d = 0; d < c->domains; d++)
        sh->capacity[d] = 100000;
    c->semid = semget(IPC_PRIVATE, c->domains, IPC_CREAT | 0600);
    for (int d = 0; d < c->domains && c->semid >= 0; d++)
        semctl(c->semid, d, SETVAL, 30000);
    return rc;
}

/* Every baseline's rate per pair, for each process count. */
typedef struct series adm_rates[B_COUNT];

static void print_text(const struct bench_cfg *c, const struct bench_run *run, const int *procs, size_t n,
                       const adm_rates *r)
{
    char t1[48], t2[48];
    printf("orbit-bench admission: claim+release pairs per second, %d domains per claim, %.2f s per run, %d pairs\n",
           c->domains, c->seconds, c->pairs);
    run_print_text(run, stdout);
    printf("%-10s %12s %13s %10s  %-20s %8s  %-20s\n", "processes", "orbit", "robust mutex", "semop",
           "orbit/mutex", "best-of", "orbit/semop");
    for (size_t i = 0; i < n; i++) {
        struct ratio_stats m = ratio_stats(&r[i][B_ORBIT], &r[i][B_MUTEX], true);
        struct ratio_stats s = ratio_stats(&r[i][B_ORBIT], &r[i][B_SEMOP], true);
        printf("%-10d %12.0f %13.0f %10.0f  %-20s %7.2fx  %-20s\n", procs[i],
               series_stats(&r[i][B_ORBIT], true).median, series_stats(&r[i][B_MUTEX], true).median,
               series_stats(&r[i][B_SEMOP], true).median, ratio_text(&m, t1, sizeof t1), m.best_of,
               ratio_text(&s, t2, sizeof t2));
    }
}

static void print_json(const struct bench_cfg *c, const struct bench_run *run, const int *procs, size_t n,
                       const adm_rates *r)
{
    printf("{\"bench\":\"admission\",");
    run_print_json(run, stdout);
    printf(",\"domains\":%d,\"seconds\":%.3f,\"cpus\":%d,\"baseline\":\"pthread_mutex\",\"results\":[", c->domains,
           c->seconds, bench_cpus());
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"processes\":%d", i ? "," : "", procs[i]);
        for (int k = 0; k < B_COUNT; k++) {
            if (k == B_SEMOP && !series_stats(&r[i][k], true).n)
                continue;
            printf(",\"%s_pairs_per_s\":", bkind_key[k]);
            series_print_json(&r[i][k], true, stdout);
        }
        struct ratio_stats m = ratio_stats(&r[i][B_ORBIT], &r[i][B_MUTEX], true);
        printf(",\"orbit_over_mutex\":");
        ratio_print_json(&m, stdout);
        printf("}");
    }
    printf("]}\n");
}

static int plot(const struct bench_cfg *c, const int *procs, size_t n, const adm_rates *r)
{
    static struct chart ch;
    snprintf(ch.title, sizeof ch.title, "orbit-bench admission --scale: claim+release, %d domains, median of %d pairs",
             c->domains, c->pairs);
    snprintf(ch.x_label, sizeof ch.x_label, "processes");
    snprintf(ch.y_label, sizeof ch.y_label, "claim+release pairs/s, all processes");
    for (int k = 0; k < B_COUNT; k++) {
        struct chart_series *s = chart_add(&ch, bkind_name[k]);
        for (size_t i = 0; i < n; i++)
            plot_scale_point(s, procs[i], &r[i][k], 1);
    }
    return plot_save("admission", c->plot, &ch, 1);
}

static int parse(int argc, char **argv, struct bench_cfg *c, int *procs, bool *scale)
{
    static const char help[] =
        "usage: orbit-bench admission [--seconds S] [--domains D] [--procs N | --scale] [--pairs N]\n"
        "                             [--plot FILE.svg] [--json]\n"
        "  --seconds S  length of each run (default 0.2, at most 60)\n"
        "  --domains D  domains charged by each claim, 1..16 (default 2)\n"
        "  --procs N    N processes at once (1..256; default: 1, then 2)\n"
        "  --scale      every process count from 1 to the CPUs this process may use\n"
        "  --pairs N    run every cell beside its baselines N times, back to back, the order\n"
        "               alternating (default 9, at most 100; --repeat N is the same)\n"
        "  --plot FILE  with --scale or --procs: pairs/s against processes as SVG\n"
        "  --json       one JSON object on stdout\n"
        "orbit/mutex is the median over the pairs of orbit's rate over the mutex's in the same\n"
        "pair, [min-max] its spread; best-of is the ratio of each side's best pair, for\n"
        "comparison only. See orbit-bench(1) on reading the output.\n";
    static const struct option opts[] = { { "seconds", required_argument, 0, 's' },
                                          { "domains", required_argument, 0, 'd' },
                                          { "procs", required_argument, 0, 'p' },
                                          { "scale", no_argument, 0, 'S' },
                                          { "repeat", required_argument, 0, 'r' },
                                          { "pairs", required_argument, 0, 'r' },
                                          { "plot", required_argument, 0, 'P' },
                                          { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' },
                                          { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":s:d:p:r:P:jh", opts, NULL)) != -1) {
        switch (ch) {
        case 's': c->seconds = cli_double(BENCH_TOOL, "--seconds", optarg, 0.001, 60); break;
        case 'd': c->domains = cli_int(BENCH_TOOL, "--domains", optarg, 1, BENCH_DOMAINS_MAX); break;
        case 'p': *procs = cli_int(BENCH_TOOL, "--procs", optarg, 1, BENCH_PROCS_MAX); break;
        case 'r': c->pairs = pairs_arg(argv[optind - 1][2] == 'r' ? "--repeat" : "--pairs", optarg); break;
        case 'P': plot_check_path("--plot", optarg, false); c->plot = optarg; break;
        case 'S': *scale = true; break;
        case 'j': c->json = true; break;
        case 'h': fputs(help, stdout); return 0;
        case 'V': cli_version(BENCH_TOOL); return 0;
        default: cli_getopt_error(BENCH_TOOL, ch, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
    if (*scale && *procs)
        cli_usage_error(BENCH_TOOL, "--procs or --scale, not both");
    if (c->plot && !*scale && !*procs)
        cli_usage_error(BENCH_TOOL, "--plot draws a process-count curve: give --scale or --procs");
    return -1;
}

/* One pair: the floor, then every process count's kinds back to back, the order alternating. */
static bool run_pair(struct bench_cfg *c, struct bench_run *run, struct bench_shared *sh, const int *procs,
                     size_t n, adm_rates *r, int pair)
{
    bool ok = true;
    run_floor(run, pair);
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < B_COUNT; j++) {
            int k = run_orbit_first(pair) ? j : B_COUNT - 1 - j;
            if (k == B_SEMOP && c->semid < 0)
                continue;
            double got = measure((enum bkind)k, c, sh, procs[i]);
            ok = ok && (k != B_ORBIT || got > 0);
            series_put(&r[i][k], pair, got);
        }
    return ok;
}

int bench_admission(int argc, char **argv)
{
    struct bench_cfg c = { .seconds = 0.2, .domains = 2, .pairs = PAIRS_DEFAULT };
    bool scale = false;
    int one = 0;
    int rc = parse(argc, argv, &c, &one, &scale);
    if (rc >= 0)
        return rc;
    static int procs[BENCH_PROCS_MAX];
    size_t n = 0;
    if (one)
        procs[n++] = one;
    else
        for (int p = 1; p <= (scale ? bench_cpus() : 2) && p <= BENCH_PROCS_MAX; p++)
            procs[n++] = p;
    snprintf(c.fleet, sizeof c.fleet, "bench-adm-%d", (int)getpid());
    bench_unlink_on_signal(c.fleet);
    struct bench_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    memset(sh, 0, sizeof *sh);
    rc = setup(&c, sh);
    static adm_rates r[BENCH_PROCS_MAX];
    static struct bench_run run;
    const int none[2] = { -1, -1 };
    run_begin(&run, c.pairs, none);
    bool ok = true;
    for (int pair = 0; pair < c.pairs && rc == 0; pair++)
        ok = run_pair(&c, &run, sh, procs, n, r, pair) && ok;
    run_end(&run);
    if (c.semid >= 0)
        semctl(c.semid, 0, IPC_RMID);
    orbit_fleet_unlink(c.fleet);
    munmap(sh, sizeof *sh);
    if (rc < 0) {
        fprintf(stderr, "orbit-bench admission: setup: %s\n", orbit_strerror(rc));
        return 1;
    }
    c.json ? print_json(&c, &run, procs, n, r) : print_text(&c, &run, procs, n, r);
    if (c.plot && plot(&c, procs, n, r) != 0)
        return 1;
    return ok ? 0 : 1;
}
