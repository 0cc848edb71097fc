/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench pool: reserve -> accept -> complete operations per second, with
 * one process and with two processes on one key and on distinct keys, beside
 * a process-shared pthread mutex protecting the same counters (a per-key lock
 * over reserved/active/fence/stamps/changes), in the same run.
 *
 * Each process owns one resource of the given capacity under its key and
 * drives it: reserve (one CAS), accept (fence out of the pending set, unit to
 * active), complete (unit back, the key's change word bumped). On one key the
 * two processes share the key's change word; on distinct keys nothing.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/pool.h>
#include "tool.h"
#include "core/wait.h"

struct mutex_key {                  /* the baseline's per-key state, one per 128 bytes */
    pthread_mutex_t lock;
    uint32_t reserved, active, capacity, changes;
    uint64_t fence, since_ms, last_reserve_ms;
    uint8_t pad[128 - sizeof(pthread_mutex_t) - 40];
};

struct shared {
    struct mutex_key keys[2];
    _Atomic int ready;
    _Atomic int go;
    int64_t elapsed_ns[2];
    int failed;
};

struct options {
    uint64_t ops;
    uint32_t capacity;
    bool json;
};

enum impl { ORBIT, MUTEX };
struct scenario { const char *name, *key; int procs; bool shared_key; };
static const struct scenario scenarios[] = {
    { "1 process", "1p", 1, true },
    { "2 processes, one key", "2p_one_key", 2, true },
    { "2 processes, distinct keys", "2p_distinct_keys", 2, false },
};

static const char usage[] =
"usage: orbit-bench pool [--ops N] [--capacity C] [--json]\n"
"\n"
"  reserve -> accept -> complete operations per second on a pool resource, with\n"
"  1 process and 2 processes on one key and on distinct keys, beside a\n"
"  process-shared pthread mutex protecting the same counters (same run).\n"
"  Each process owns one resource under its key and drives it. On one key the\n"
"  pool's processes share the key's change word, the mutex's share one lock.\n"
"\n"
"  --ops N        operations per process (default 1000000)\n"
"  --capacity C   units per resource (default 4)\n"
"  --json         one JSON object instead of the table\n"
"  -h, --help     this text\n";

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
static int mutex_loop(struct mutex_key *k, uint64_t ops)
{
    for (uint64_t i = 0; i < ops; i++) {
        uint64_t now = orb_wall_ms_coarse();
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
        orb_cpu_relax();
}

/* One benchmark process: set up, wait for the start, run, report elapsed time. */
static void worker(const char *fleet, enum impl impl, int index, const struct scenario *sc,
                   const struct options *o, struct shared *sh)
{
    struct orbit_fleet *f = NULL;
    struct orbit_pool *p = NULL;
    orbit_id id = 0;
    int rc = 0;
    if (impl == ORBIT) {
        orbit_key key = { 0xbe7c4, sc->shared_key ? 0 : (uint64_t)index + 1 };
        if ((rc = orbit_fleet_join(fleet, NULL, &f)) == 0 && (rc = orbit_pool_open(f, NULL, &p)) == 0)
            rc = orbit_pool_register(p, key, o->capacity, &id);
    }
    if (rc < 0) {
        fprintf(stderr, "orbit-bench pool: setup: %s\n", orbit_strerror(rc));
        sh->failed = 1;
    }
    start_line(sh);
    int64_t t0 = orb_now_ns();
    if (rc == 0)
        rc = impl == ORBIT ? orbit_loop(p, id, o->ops)
                           : mutex_loop(&sh->keys[sc->shared_key ? 0 : index], o->ops);
    sh->elapsed_ns[index] = orb_now_ns() - t0;
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
    for (int i = 0; i < 2; i++) {
        mutex_init(&sh->keys[i].lock);
        sh->keys[i].capacity = o->capacity;
    }
    pid_t kids[2];
    for (int i = 0; i < sc->procs; i++) {
        fflush(NULL);
        kids[i] = fork();
        if (kids[i] < 0)
            return -1;
        if (kids[i] == 0)
            worker(fleet, impl, i, sc, o, sh);
    }
    while (atomic_load(&sh->ready) < sc->procs)
        orb_cpu_relax();
    atomic_store(&sh->go, 1);
    int64_t slowest = 1;
    for (int i = 0; i < sc->procs; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            sh->failed = 1;
        if (sh->elapsed_ns[i] > slowest)
            slowest = sh->elapsed_ns[i];
    }
    for (int i = 0; i < 2; i++)
        pthread_mutex_destroy(&sh->keys[i].lock);
    return sh->failed ? -1 : (double)o->ops * sc->procs * 1e9 / (double)slowest;
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "ops", required_argument, 0, 'n' }, { "capacity", required_argument, 0, 'c' },
        { "json", no_argument, 0, 'j' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    *o = (struct options){ .ops = 1000000, .capacity = 4, .json = false };
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "n:c:jh", longopts, NULL)) != -1;) {
        char *end = NULL;
        if (c == 'n')
            o->ops = strtoull(optarg, &end, 10);
        else if (c == 'c')
            o->capacity = (uint32_t)strtoul(optarg, &end, 10);
        else if (c == 'j')
            o->json = true;
        else if (c == 'h') {
            fputs(usage, stdout);
            return 0;
        } else {
            fputs(usage, stderr);
            return 2;
        }
        if (end && (*end || o->ops == 0 || o->capacity == 0)) {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fputs(usage, stderr);
        return 2;
    }
    return -1;
}

static void report(const struct options *o, const double rate[][2], size_t n)
{
    if (o->json) {
        printf("{\"bench\":\"pool\",\"ops_per_process\":%" PRIu64 ",\"capacity\":%" PRIu32 ",\"results\":[",
               o->ops, o->capacity);
        for (size_t i = 0; i < n; i++)
            printf("%s{\"scenario\":\"%s\",\"processes\":%d,\"shared_key\":%s,\"orbit_ops_per_s\":%.0f,"
                   "\"mutex_ops_per_s\":%.0f,\"orbit_over_mutex\":%.3f}",
                   i ? "," : "", scenarios[i].key, scenarios[i].procs, scenarios[i].shared_key ? "true" : "false",
                   rate[i][ORBIT], rate[i][MUTEX], rate[i][ORBIT] / rate[i][MUTEX]);
        printf("]}\n");
        return;
    }
    printf("pool reserve->accept->complete: %" PRIu64 " ops per process, capacity %" PRIu32 "\n\n",
           o->ops, o->capacity);
    printf("%-28s %16s %16s %12s\n", "scenario", "orbit ops/s", "mutex ops/s", "orbit/mutex");
    for (size_t i = 0; i < n; i++)
        printf("%-28s %16.0f %16.0f %11.2fx\n", scenarios[i].name, rate[i][ORBIT], rate[i][MUTEX],
               rate[i][ORBIT] / rate[i][MUTEX]);
}

int bench_pool(int argc, char **argv)
{
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char fleet[64];
    snprintf(fleet, sizeof fleet, "bench-pool-%d", (int)getpid());
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("orbit-bench pool: mmap");
        return 1;
    }
    const size_t n = sizeof scenarios / sizeof scenarios[0];
    double rate[sizeof scenarios / sizeof scenarios[0]][2];
    int status = 0;
    for (size_t i = 0; i < n && status == 0; i++)
        for (int impl = ORBIT; impl <= MUTEX && status == 0; impl++)
            if ((rate[i][impl] = run_one(fleet, (enum impl)impl, &scenarios[i], &o, sh)) < 0)
                status = 1;
    orbit_fleet_unlink(fleet);
    munmap(sh, sizeof *sh);
    if (status == 0)
        report(&o, (const double (*)[2])rate, n);
    else
        fprintf(stderr, "orbit-bench pool: a run failed\n");
    return status;
}
