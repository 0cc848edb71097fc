/* SPDX-License-Identifier: MIT */
/*
 * chaos - members doing random operations on every table (pool, streams,
 * exchange and arena, admission, io_uring waits and batched wakes) are
 * killed -9 at random moments and reclaimed by orbit_fleet_node_dead, by
 * orbit_fleet_reap, and by liborbit-reaper with its BPF and pidfd backends;
 * then a scribbler writes random bytes into the live segments while members
 * keep working. Checked through the public API: nothing leaked (after each
 * round every member is killed and reclaimed, and every table must be
 * empty), no member stalled past a deadline, no payload byte arrived wrong,
 * no member crashed. One member in four runs as if refused membarrier(2)
 * (ORBIT_DISABLE_MEMBARRIER=1, a seccomp filter the others lack): mixed
 * fleets must not stall either. Prints its figures; exit 1 on any failure.
 *
 * Bounded form (the "chaos" suite): chaos --kills 1200 --hostile 100 --seconds 50
 * Long form: chaos --kills 2400 --hostile 200 --seconds 0   (0: no time limit)
 * Environment: ORBIT_CHAOS_KILLS, ORBIT_CHAOS_HOSTILE, ORBIT_CHAOS_SECONDS and
 * ORBIT_CHAOS_SEED override the arguments' defaults. The BPF path needs root
 * and a BPF build; without them it is reported as skipped, never as passed.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/reaper.h>
#include "chaos.h"

enum path { PATH_NODE_DEAD, PATH_REAP, PATH_BPF, PATH_PIDFD, PATH_COUNT };
static const char *const path_name[PATH_COUNT] = { "node_dead", "reap", "bpf", "pidfd" };
#define T_JOINING T_COUNT            /* killed before it had opened its tables */
#define HANG_MS 8000                 /* a member with no finished operation for this long is hung */
#define RECLAIM_MS 5000              /* a death not reclaimed by then is counted unreclaimed */
#define ROUND_KILLS 50               /* kills between leak checks */
#define LAT_MAX 100000

struct figures {
    uint64_t kills[T_COUNT + 1][PATH_COUNT];
    uint64_t hangs, crashes, leaks, unreclaimed, refused_opens, rounds, skipped[PATH_COUNT];
    uint64_t hostile_kills, hostile_ops, reporters_killed, unfenced_members;
    uint64_t lat[PATH_COUNT][LAT_MAX];
    size_t n_lat[PATH_COUNT];
};

struct opts { uint64_t kills, hostile, seed; int seconds, members; };

/* The supervisor's view of one phase: its fleet, tables and members. */
struct sup {
    const struct opts *o;
    struct figures *fig;
    struct chaos_shared *sh;
    enum path path;
    char name[64];
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *st;
    struct orbit_exchanges *ex;
    struct orbit_admission *adm;
    struct orbit_reaper *reaper;
    pid_t pid[CHAOS_MEMBERS_MAX];
    int64_t kill_ns[CHAOS_MEMBERS_MAX];
    uint64_t rng;
    int64_t deadline_ns;
    bool hostile;
    bool reaped[CHAOS_MEMBERS_MAX];   /* the reaper's callback saw member i's death */
};

static volatile sig_atomic_t watchdog_phase;
static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "chaos: FAIL: the supervisor made no progress for 120 s (hang)\n";
    if (write(2, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
    _exit(3);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void fleet_name(struct sup *s, const char *tag)
{
    static unsigned n;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(s->name, sizeof s->name, "t-chaos-%s-%d-%u-%06lx", tag, (int)getpid(), n++,
             (unsigned long)(ts.tv_nsec ^ ts.tv_sec) & 0xffffffUL);
}

/* ---- tables -------------------------------------------------------------- */

static int sup_open(struct sup *s)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CHAOS_FLEET_CAPACITY;
    o.node = 0;
    struct orbit_pool_spec ps = chaos_pool_spec();
    struct orbit_stream_spec ss = chaos_stream_spec();
    struct orbit_exchange_spec es = chaos_exchange_spec();
    int rc = orbit_fleet_join(s->name, &o, &s->f);
    if (rc == 0) rc = orbit_pool_open(s->f, &ps, &s->pool);
    if (rc == 0) rc = orbit_streams_open(s->f, &ss, &s->st);
    if (rc == 0) rc = orbit_exchanges_open(s->f, &es, &s->ex);
    if (rc == 0) rc = orbit_admission_open(s->f, NULL, &s->adm);
    for (uint32_t d = 1; rc == 0 && d <= CHAOS_DOMAINS; d++)
        rc = orbit_admission_set_capacity(s->adm, d, 8);
    if (rc < 0)
        fprintf(stderr, "chaos: opening %s: %s\n", s->name, orbit_strerror(rc));
    return rc;
}

static void sup_close(struct sup *s)
{
    orbit_admission_close(s->adm);
    orbit_exchanges_close(s->ex);
    orbit_streams_close(s->st);
    orbit_pool_close(s->pool);
    orbit_fleet_leave(s->f);
    s->f = NULL;
    orbit_fleet_unlink(s->name);
}

/* ---- members ----------------------------------------------------------- */

static void spawn(struct sup *s, int i)
{
    struct chaos_slot *sl = &s->sh->slot[i];
    atomic_store(&sl->ready, 0);
    atomic_store(&sl->focus, (uint32_t)i % T_COUNT);   /* every table has members focused on it */
    if (s->o->members > T_COUNT && i >= T_COUNT)
        atomic_store(&sl->focus, chaos_below(&s->rng, T_COUNT));
    atomic_store(&sl->last_beat_ns, chaos_now_ns());
    uint64_t seed = chaos_rand(&s->rng);
    bool unfenced = chaos_below(&s->rng, 4) == 0;
    s->fig->unfenced_members += unfenced;
    pid_t pid = fork();
    if (pid == 0) {
        if (unfenced)
            setenv("ORBIT_DISABLE_MEMBARRIER", "1", 1);
        /* The supervisor's reaper is left alone here: closing it would unregister the
         * descriptors the parent's epoll shares with us. */
        chaos_member(s->name, s->sh, i, seed);
        _exit(0);
    }
    s->pid[i] = pid;
    s->reaped[i] = false;
}

/* A member that ended without our kill: opened a scribbled fleet (refused), or crashed. */
static void classify_exit(struct sup *s, int i, int status)
{
    bool refused = WIFEXITED(status) && (WEXITSTATUS(status) == 42 || WEXITSTATUS(status) == 41);
    if (refused && (s->hostile || WEXITSTATUS(status) == 42)) {
        s->fig->refused_opens++;
        return;
    }
    s->fig->crashes++;
    fprintf(stderr, "chaos: CRASH: member %d (pid %d) %s %d\n", i, (int)s->pid[i],
            WIFSIGNALED(status) ? "killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- reclaiming -------------------------------------------------------------- */

static void on_death(void *ctx, const struct orbit_reaper_death *d)
{
    struct sup *s = ctx;
    for (int i = 0; i < s->o->members; i++) {
        if (s->pid[i] != d->pid || s->kill_ns[i] == 0)
            continue;
        s->reaped[i] = true;
        size_t *n = &s->fig->n_lat[s->path];
        if (*n < LAT_MAX && d->reclaimed_ns > (uint64_t)s->kill_ns[i])
            s->fig->lat[s->path][(*n)++] = d->reclaimed_ns - (uint64_t)s->kill_ns[i];
    }
}

/* Is that life still holding its node? */
static bool still_held(struct sup *s, uint16_t node, uint64_t inc)
{
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    ssize_t got = orbit_fleet_nodes(s->f, n, CHAOS_FLEET_CAPACITY);
    for (ssize_t k = 0; k < got && k < CHAOS_FLEET_CAPACITY; k++)
        if (n[k].node == node && n[k].incarnation == inc)
            return true;
    return false;
}

/* node_dead from a child with a deadline: under a scribbler, a report may meet garbage. */
static bool node_dead_bounded(struct sup *s, uint16_t node, uint64_t inc)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct orbit_fleet *obs;
        _exit(orbit_fleet_observe(s->name, &obs) == 0 && orbit_fleet_node_dead(obs, node, inc) == 0 ? 0 : 1);
    }
    int64_t end = chaos_now_ns() + (int64_t)RECLAIM_MS * 1000000;
    int st;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (chaos_now_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return false;
        }
        sleep_ms(1);
    }
    return true;
}

static bool reclaim_by_reaper(struct sup *s, int i)
{
    int64_t end = chaos_now_ns() + (int64_t)RECLAIM_MS * 1000000;
    while (!s->reaped[i] && chaos_now_ns() < end)
        orbit_reaper_process(s->reaper, 20);
    return s->reaped[i];
}

/* A reporter killed -9 at a random moment of its orbit_fleet_node_dead (maybe before, maybe after). */
static void kill_a_reporter(struct sup *s, uint16_t node, uint64_t inc)
{
    uint32_t after_us = chaos_below(&s->rng, 3000);
    pid_t pid = fork();
    if (pid == 0) {
        struct orbit_fleet *obs;
        if (orbit_fleet_observe(s->name, &obs) == 0)
            orbit_fleet_node_dead(obs, node, inc);
        _exit(0);
    }
    struct timespec ts = { 0, (long)after_us * 1000 };
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    s->fig->reporters_killed += WIFSIGNALED(st);
}

/* Reclaim member i (killed, waited for) by this phase's path; false when it was not. */
static bool reclaim(struct sup *s, int i)
{
    struct chaos_slot *sl = &s->sh->slot[i];
    uint16_t node = (uint16_t)atomic_load(&sl->node);
    uint64_t inc = atomic_load(&sl->incarnation);
    bool ready = atomic_load(&sl->ready);
    if (s->hostile)
        return !ready || node_dead_bounded(s, node, inc);
    int64_t t0 = s->kill_ns[i];
    if (!ready || s->path == PATH_REAP) {
        orbit_fleet_reap(s->f);
    } else if (s->path == PATH_NODE_DEAD) {
        if (chaos_below(&s->rng, 4) == 0)
            kill_a_reporter(s, node, inc);
        orbit_fleet_node_dead(s->f, node, inc);   /* reports, or finishes the killed reporter's */
    } else {
        return reclaim_by_reaper(s, i) && !still_held(s, node, inc);
    }
    if (ready && s->fig->n_lat[s->path] < LAT_MAX)
        s->fig->lat[s->path][s->fig->n_lat[s->path]++] = (uint64_t)(chaos_now_ns() - t0);
    return !ready || !still_held(s, node, inc);
}

/* Kill member i now and reclaim it; counts the kill under the table it was in. */
static void kill_member(struct sup *s, int i)
{
    struct chaos_slot *sl = &s->sh->slot[i];
    bool ready = atomic_load(&sl->ready);
    uint32_t table = ready ? atomic_load(&sl->focus) % T_COUNT : T_JOINING;
    s->kill_ns[i] = chaos_now_ns();
    kill(s->pid[i], SIGKILL);
    int st;
    waitpid(s->pid[i], &st, 0);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
        classify_exit(s, i, st);
    if (s->hostile)
        s->fig->hostile_kills++;
    else
        s->fig->kills[table < T_COUNT ? table : T_JOINING][s->path]++;
    if (!reclaim(s, i)) {
        s->fig->unreclaimed++;
        fprintf(stderr, "chaos: UNRECLAIMED: %s path, member %d pid %d\n", path_name[s->path], i, (int)s->pid[i]);
    }
    s->kill_ns[i] = 0;
    s->pid[i] = 0;
}

/* Half the time any member (it may still be joining); else the one whose focus has the fewest kills. */
static int pick_victim(struct sup *s)
{
    int any = (int)chaos_below(&s->rng, (uint32_t)s->o->members);
    if (s->hostile || chaos_below(&s->rng, 2))
        return any;
    int best = any;
    uint64_t fewest = UINT64_MAX;
    for (int i = 0; i < s->o->members; i++) {
        uint32_t t = atomic_load(&s->sh->slot[i].focus) % T_COUNT;
        if (atomic_load(&s->sh->slot[i].ready) && s->fig->kills[t][s->path] < fewest) {
            fewest = s->fig->kills[t][s->path];
            best = i;
        }
    }
    return best;
}

/* ---- watching the living ---------------------------------------------------- */

/* Members that exited by themselves, and members stalled past HANG_MS: counted, then replaced. */
static void watch_members(struct sup *s)
{
    int64_t now = chaos_now_ns();
    for (int i = 0; i < s->o->members; i++) {
        int st;
        if (waitpid(s->pid[i], &st, WNOHANG) == s->pid[i]) {
            classify_exit(s, i, st);
            s->kill_ns[i] = now;
            reclaim(s, i);
            spawn(s, i);
            continue;
        }
        int64_t last = atomic_load(&s->sh->slot[i].last_beat_ns);
        if (now - last > (int64_t)HANG_MS * 1000000) {
            s->fig->hangs++;
            fprintf(stderr, "chaos: HANG: member %d (pid %d) finished nothing for %d ms, in %s\n", i,
                    (int)s->pid[i], HANG_MS, chaos_table_name[atomic_load(&s->sh->slot[i].table) % T_COUNT]);
            kill_member(s, i);
            spawn(s, i);
        }
    }
}

/* Wait a random while (the reaper keeps working meanwhile). */
static void idle(struct sup *s, int ms)
{
    if (s->reaper && !s->hostile) {
        int64_t end = chaos_now_ns() + (int64_t)ms * 1000000;
        while (chaos_now_ns() < end)
            orbit_reaper_process(s->reaper, ms);
    } else {
        sleep_ms(ms);
    }
}

/* ---- leaks ----------------------------------------------------------------- */

static int leak(struct sup *s, const char *what, long n)
{
    if (n == 0)
        return 0;
    fprintf(stderr, "chaos: LEAK after round %llu (%s path): %s: %ld\n",
            (unsigned long long)s->fig->rounds, path_name[s->path], what, n);
    return 1;
}

static long pool_key_leaks(struct sup *s)
{
    struct orbit_pool_key_info k[64];
    ssize_t n = orbit_pool_keys(s->pool, k, 64);
    long bad = 0;
    for (ssize_t i = 0; i < n && i < 64; i++) {
        if (!k[i].live && !k[i].creating && !k[i].refs && !k[i].watchers)
            continue;
        bad++;
        fprintf(stderr, "chaos:   key %llx:%llx (slot %u): live %u creating %u refs %u version %u watchers %u\n",
                (unsigned long long)k[i].key.hi, (unsigned long long)k[i].key.lo, k[i].index, k[i].live,
                k[i].creating, k[i].refs, k[i].version, k[i].watchers);
    }
    return n < 0 ? 1 : bad;
}

/* Live streams left: how many, each printed with its sides (state, node, incarnation) and queues. */
static long stream_leaks(struct orbit_streams *st)
{
    struct orbit_stream_info si[16];
    ssize_t n = orbit_streams_list(st, si, 16);
    for (ssize_t i = 0; i < n && i < 16; i++)
        fprintf(stderr, "chaos:   stream %llx: A state %d node %u inc %llx, B state %d node %u inc %llx; "
                "queued %llu/%llu flags %x/%x\n", (unsigned long long)si[i].id,
                (int)si[i].side[0].state, si[i].side[0].node, (unsigned long long)si[i].side[0].incarnation,
                (int)si[i].side[1].state, si[i].side[1].node, (unsigned long long)si[i].side[1].incarnation,
                (unsigned long long)si[i].dir[0].queued, (unsigned long long)si[i].dir[1].queued,
                si[i].dir[0].flags, si[i].dir[1].flags);
    return (long)n;
}

static long admission_leaks(struct sup *s)
{
    struct orbit_domain_info d[CHAOS_DOMAINS];
    ssize_t n = orbit_admission_domains(s->adm, d, CHAOS_DOMAINS);
    long bad = n != CHAOS_DOMAINS;
    for (ssize_t i = 0; i < n && i < CHAOS_DOMAINS; i++)
        bad += d[i].used != 0;
    return bad + (long)orbit_admission_claims(s->adm, NULL, 0);
}

/* Every member is dead and reclaimed: every table must be empty again. */
static int check_leaks(struct sup *s)
{
    int bad = 0;
    bad += leak(s, "claimed nodes besides the supervisor's", (long)orbit_fleet_nodes(s->f, NULL, 0) - 1);
    bad += leak(s, "pool resources owned", (long)orbit_pool_owners(s->pool, NULL, 0));
    bad += leak(s, "pool keys with live, creating or held counts", pool_key_leaks(s));
    bad += leak(s, "streams", stream_leaks(s->st));
    bad += leak(s, "exchange control streams", stream_leaks(orbit_exchanges_streams(s->ex)));
    bad += leak(s, "arena lanes in use", (long)orbit_arena_lanes(orbit_exchanges_arena(s->ex, ORBIT_FLOW_A_TO_B), NULL, 0));
    bad += leak(s, "admission claims or used units", admission_leaks(s));
    return bad;
}

/* End of a round: kill and reclaim everyone, check the tables, start afresh (a new fleet after a leak). */
static int end_round(struct sup *s, bool respawn)
{
    for (int i = 0; i < s->o->members; i++)
        kill_member(s, i);
    s->fig->rounds++;
    int bad = check_leaks(s);
    s->fig->leaks += (uint64_t)bad;
    if (bad) {
        sup_close(s);
        fleet_name(s, path_name[s->path]);
        if (sup_open(s) < 0)
            return -1;
        if (s->reaper)
            orbit_reaper_watch(s->reaper, s->name);
    }
    for (int i = 0; respawn && i < s->o->members; i++)
        spawn(s, i);
    return 0;
}

/* ---- phases ------------------------------------------------------------------- */

static int open_reaper(struct sup *s)
{
    enum orbit_reaper_backend b = s->path == PATH_BPF ? ORBIT_REAPER_BPF : ORBIT_REAPER_PIDFD;
    int rc = orbit_reaper_open(b, &s->reaper);
    if (rc < 0) {
        s->reaper = NULL;
        printf("chaos: %s path SKIPPED: orbit_reaper_open: %s%s\n", path_name[s->path], orbit_strerror(rc),
               geteuid() ? " (BPF needs root)" : "");
        s->fig->skipped[s->path] = 1;
        return rc;
    }
    orbit_reaper_set_interval(s->reaper, 10);
    return orbit_reaper_on_death(s->reaper, on_death, s, 0);
}

static bool time_left(const struct sup *s)
{
    return s->deadline_ns == 0 || chaos_now_ns() < s->deadline_ns;
}

static void kill_phase(struct sup *s, enum path p, int64_t budget_ns)
{
    s->path = p;
    s->deadline_ns = budget_ns ? chaos_now_ns() + budget_ns : 0;
    fleet_name(s, path_name[p]);
    if ((p == PATH_BPF || p == PATH_PIDFD) && open_reaper(s) < 0)
        return;
    if (sup_open(s) < 0) {
        s->fig->crashes++;
        return;
    }
    if (s->reaper)
        orbit_reaper_watch(s->reaper, s->name);
    for (int i = 0; i < s->o->members; i++)
        spawn(s, i);
    uint64_t target = s->o->kills / PATH_COUNT;
    for (uint64_t done = 1; done <= target && time_left(s); done++) {
        alarm(120);
        idle(s, 2 + (int)chaos_below(&s->rng, 30));
        watch_members(s);
        int i = pick_victim(s);
        kill_member(s, i);
        spawn(s, i);
        if (done % ROUND_KILLS == 0 && end_round(s, true) < 0)
            break;
    }
    end_round(s, false);
    if (s->reaper)
        orbit_reaper_close(s->reaper);
    s->reaper = NULL;
    sup_close(s);
}

static uint64_t total_ops(struct chaos_shared *sh)
{
    uint64_t n = 0;
    for (int t = 0; t < T_COUNT; t++)
        n += atomic_load(&sh->ops[t]);
    return n;
}

/* Create the tables, then let go of them: the supervisor touches nothing a scribbler writes. */
static int hostile_setup(struct sup *s)
{
    fleet_name(s, "hostile");
    if (sup_open(s) < 0)
        return -1;
    orbit_admission_close(s->adm);
    orbit_exchanges_close(s->ex);
    orbit_streams_close(s->st);
    orbit_pool_close(s->pool);
    orbit_fleet_leave(s->f);
    s->f = NULL;
    return 0;
}

static void hostile_phase(struct sup *s, int64_t budget_ns)
{
    s->path = PATH_NODE_DEAD;
    s->deadline_ns = budget_ns ? chaos_now_ns() + budget_ns : 0;
    if (s->o->hostile == 0 || hostile_setup(s) < 0)
        return;
    s->hostile = true;
    atomic_store(&s->sh->hostile, 1);
    for (int i = 0; i < s->o->members; i++)
        spawn(s, i);
    uint64_t seed = chaos_rand(&s->rng), ops0 = total_ops(s->sh);
    pid_t scribbler = fork();
    if (scribbler == 0)
        chaos_scribbler(s->name, s->sh, s->o->hostile, seed);
    int st;
    while (waitpid(scribbler, &st, WNOHANG) == 0 && time_left(s)) {
        alarm(120);
        idle(s, 10 + (int)chaos_below(&s->rng, 30));
        watch_members(s);
        int i = (int)chaos_below(&s->rng, (uint32_t)s->o->members);
        kill_member(s, i);
        spawn(s, i);
    }
    kill(scribbler, SIGKILL);
    waitpid(scribbler, &st, 0);
    for (int i = 0; i < s->o->members; i++)
        kill_member(s, i);
    atomic_store(&s->sh->hostile, 0);
    s->fig->hostile_ops = total_ops(s->sh) - ops0;
    s->hostile = false;
    orbit_fleet_unlink(s->name);
}

/* ---- figures ----------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void print_latency(struct figures *fig, enum path p)
{
    size_t n = fig->n_lat[p];
    if (fig->skipped[p] || n == 0) {
        printf("  %-9s  %s\n", path_name[p], fig->skipped[p] ? "skipped" : "no samples");
        return;
    }
    qsort(fig->lat[p], n, sizeof fig->lat[p][0], cmp_u64);
    printf("  %-9s  p50 %8.1f us  p99 %8.1f us  max %8.1f us  (%zu deaths)\n", path_name[p],
           (double)fig->lat[p][n / 2] / 1e3, (double)fig->lat[p][n * 99 / 100] / 1e3,
           (double)fig->lat[p][n - 1] / 1e3, n);
}

static uint64_t print_kills(const struct figures *fig)
{
    uint64_t total = 0;
    printf("chaos: kills by the table the member worked on (its focus: 3 of 4 operations) and reclaim path:\n  %-10s", "");
    for (int p = 0; p < PATH_COUNT; p++)
        printf(" %9s", path_name[p]);
    printf("\n");
    for (int t = 0; t <= T_COUNT; t++) {
        printf("  %-10s", t < T_COUNT ? chaos_table_name[t] : "joining");
        for (int p = 0; p < PATH_COUNT; p++) {
            printf(" %9llu", (unsigned long long)fig->kills[t][p]);
            total += fig->kills[t][p];
        }
        printf("\n");
    }
    return total;
}

static int report(struct figures *fig, struct chaos_shared *sh)
{
    uint64_t total = print_kills(fig);
    printf("chaos: %llu kills in %llu rounds (each round ends with every member killed, reclaimed, "
           "and every table checked empty)\n", (unsigned long long)total, (unsigned long long)fig->rounds);
    printf("chaos: %llu reporters killed -9 inside orbit_fleet_node_dead (node_dead path); the next report "
           "finished theirs\n", (unsigned long long)fig->reporters_killed);
    printf("chaos: %llu members ran refused membarrier (ORBIT_DISABLE_MEMBARRIER=1)\n",
           (unsigned long long)fig->unfenced_members);
    printf("chaos: operations:");
    for (int t = 0; t < T_COUNT; t++)
        printf(" %s %llu (%llu errors)", chaos_table_name[t], (unsigned long long)atomic_load(&sh->ops[t]),
               (unsigned long long)atomic_load(&sh->errors[t]));
    printf("; payload bytes checked %llu\n", (unsigned long long)atomic_load(&sh->bytes_checked));
    printf("chaos: hostile: %llu rounds, %llu random bytes written into live segments, %llu member operations "
           "meanwhile, %llu members killed, %llu opens refused, %llu payload bytes read as scribbled\n",
           (unsigned long long)atomic_load(&sh->hostile_rounds), (unsigned long long)atomic_load(&sh->hostile_bytes),
           (unsigned long long)fig->hostile_ops, (unsigned long long)fig->hostile_kills, (unsigned long long)fig->refused_opens,
           (unsigned long long)atomic_load(&sh->scribbled_bytes));
    uint64_t wrong = atomic_load(&sh->wrong_bytes);
    printf("chaos: leaks %llu, hangs %llu, wrong bytes %llu, crashes %llu, unreclaimed %llu\n",
           (unsigned long long)fig->leaks, (unsigned long long)fig->hangs, (unsigned long long)wrong,
           (unsigned long long)fig->crashes, (unsigned long long)fig->unreclaimed);
    printf("chaos: kill -> reclaimed (node_dead/reap: until the call returned; reapers: reclaimed_ns):\n");
    for (int p = 0; p < PATH_COUNT; p++)
        print_latency(fig, (enum path)p);
    bool ok = total > 0 && !fig->leaks && !fig->hangs && !wrong && !fig->crashes && !fig->unreclaimed;
    printf("chaos: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}

/* ---- arguments ----------------------------------------------------------------- */

static const char usage[] =
    "usage: chaos [--kills N] [--hostile ROUNDS] [--seconds S] [--members M] [--seed X]\n"
    "  --kills N         kill -9s in all, shared by the reclaim paths node_dead, reap, bpf, pidfd (default 400)\n"
    "  --hostile ROUNDS  scribbler rounds: random bytes into live segments (default 60; 0: none)\n"
    "  --seconds S       time budget for the whole run, shared by the phases (default 50; 0: none)\n"
    "  --members M       concurrent members, 2..12 (default 6)\n"
    "  --seed X          random seed (default: from the clock; printed)\n"
    "Environment: ORBIT_CHAOS_KILLS, ORBIT_CHAOS_HOSTILE, ORBIT_CHAOS_SECONDS, ORBIT_CHAOS_SEED set the defaults.\n"
    "Long form: chaos --kills 2400 --hostile 200 --seconds 0\n";

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (!*s || *end || errno || v > max || s[0] == '-')
        return false;
    *out = v;
    return true;
}

static uint64_t env_or(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    uint64_t x;
    return v && parse_u64(v, UINT64_MAX, &x) ? x : dflt;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        { "kills", 1, 0, 'k' }, { "hostile", 1, 0, 'H' }, { "seconds", 1, 0, 's' },
        { "members", 1, 0, 'm' }, { "seed", 1, 0, 'S' }, { "help", 0, 0, 'h' }, { "version", 0, 0, 'V' }, { 0, 0, 0, 0 } };
    uint64_t secs = env_or("ORBIT_CHAOS_SECONDS", 50), members = 6;
    o->kills = env_or("ORBIT_CHAOS_KILLS", 400);
    o->hostile = env_or("ORBIT_CHAOS_HOSTILE", 60);
    o->seed = env_or("ORBIT_CHAOS_SEED", (uint64_t)chaos_now_ns());
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        bool ok = c == 'k' ? parse_u64(optarg, 10000000, &o->kills)
                : c == 'H' ? parse_u64(optarg, 10000000, &o->hostile)
                : c == 's' ? parse_u64(optarg, 86400, &secs)
                : c == 'm' ? parse_u64(optarg, CHAOS_MEMBERS_MAX, &members) && members >= 2
                : c == 'S' ? parse_u64(optarg, UINT64_MAX, &o->seed) : false;
        if (c == 'h' || c == 'V') {
            fputs(c == 'h' ? usage : "chaos (orbit tests)\n", stdout);
            exit(0);
        }
        if (!ok) {
            fprintf(stderr, "chaos: bad argument %s\n%s", optarg ? optarg : "", usage);
            return 2;
        }
    }
    if (optind != argc) {
        fputs(usage, stderr);
        return 2;
    }
    o->seconds = (int)secs;
    o->members = (int)members;
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    struct figures *fig = calloc(1, sizeof *fig);
    struct chaos_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!fig || sh == MAP_FAILED)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);   /* figures survive a watchdog exit */
    signal(SIGALRM, on_watchdog);
    printf("chaos: seed %llu, %d members, %llu kills, %llu hostile rounds, %d s budget\n",
           (unsigned long long)o.seed, o.members, (unsigned long long)o.kills, (unsigned long long)o.hostile, o.seconds);
    struct sup s = { .o = &o, .fig = fig, .sh = sh, .rng = o.seed | 1 };
    /* Four kill phases and the hostile one share the budget equally. */
    int64_t share = (int64_t)o.seconds * 1000000000 / (PATH_COUNT + (o.hostile ? 1 : 0));
    for (int p = 0; p < PATH_COUNT; p++)
        kill_phase(&s, (enum path)p, share);
    hostile_phase(&s, share);
    alarm(0);
    rc = report(fig, sh);
    free(fig);
    return rc;
}
