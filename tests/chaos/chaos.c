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
 * fleets must not stall either.
 *
 * Where servers run: one member in four (when root may unshare) is pid 1 of
 * a pid namespace of its own with its own /proc, killed -9 from outside like
 * the others. Some of the other members fork a child mid-run: the child must
 * be refused the parent's fleet and table handles (-ORBIT_EFORKED) and find
 * the parent's node untouched, then joins as its own node and works until
 * killed -9 or it exits; parents are killed while their child lives, and
 * their life must be over (a death wait returns) and their node freed
 * meanwhile. No live member may ever be judged
 * dead: members check their own node record, the supervisor checks every
 * live member's and every reaper report. Prints its figures; exit 1 on any
 * failure (leak, hang, wrong byte, crash, unreclaimed death, false death,
 * fork rule broken). Namespaces refused are reported as skipped.
 *
 * Hostile neighbour (--neighbour KILLS, root; issue 34): in a mount namespace
 * with its own /dev/shm, a reaper watching every fleet (backend auto, as the
 * shipped unit runs it) reclaims the victim fleet's members, killed at random,
 * in rounds without and with another user's fleets beside it (hostile_fleet
 * as uid 65534: 4,000 forged live nodes, a half-created fleet and table, a
 * fleet it truncates mid-round, which the reaper must quarantine as corrupt,
 * never die of; the forger killed and made anew mid-round): leaks, hangs and
 * crashes as ever,
 * and the reclaim p99 with the attacker at most twice the p99 without (that
 * taken as at least 50 ms; p95s under 500 deaths a condition, as in the
 * bounded form). It gets two shares of --seconds.
 *
 * Bounded form (the "chaos" suite): chaos --kills 1200 --hostile 100 --neighbour 400 --seconds 70
 * Long form: chaos --kills 2400 --hostile 200 --neighbour 2000 --seconds 0   (0: no time limit)
 * --no-ns runs without namespaced members (reported as skipped).
 * Environment: ORBIT_CHAOS_KILLS, ORBIT_CHAOS_HOSTILE, ORBIT_CHAOS_NEIGHBOUR,
 * ORBIT_CHAOS_SECONDS and ORBIT_CHAOS_SEED override the arguments' defaults;
 * ORBIT_HOSTILE_BIN names the hostile_fleet helper. The BPF path needs root
 * and a BPF build; without them it is reported as skipped, never as passed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/inspect.h>
#include <orbit/reaper.h>
#include "chaos.h"

enum path { PATH_NODE_DEAD, PATH_REAP, PATH_BPF, PATH_PIDFD, PATH_COUNT };
static const char *const path_name[PATH_COUNT] = { "node_dead", "reap", "bpf", "pidfd" };
#define T_JOINING T_COUNT            /* killed before it had opened its tables */
#define HANG_MS 8000                 /* a member with no finished operation for this long is hung */
/* A forked child before its first operation joins (reporting dead nodes it finds on the way: each
 * report may wait out a busy owner byte, ORB_LOCK_BOUND_MS + 1 s) and opens four tables (a stuck
 * creator is waited for up to 10 s): its setup is bounded by those, not by HANG_MS. */
#define SETUP_HANG_MS 25000
#define RECLAIM_MS 5000              /* a death not reclaimed by then is counted unreclaimed */
#define PARENT_OVER_MS 1000          /* a killed parent's life (its child running) must be over by then */
#define ROUND_KILLS 50               /* kills between leak checks */
#define LAT_MAX 100000
#define TARGETS (2 * CHAOS_MEMBERS_MAX) /* members 0..11, their forked children 12..23 */
#define KID(i) (CHAOS_MEMBERS_MAX + (i))
#define ZOMBIES_MAX 512

struct figures {
    uint64_t kills[T_COUNT + 1][PATH_COUNT];
    uint64_t hangs, crashes, leaks, unreclaimed, refused_opens, rounds, skipped[PATH_COUNT];
    uint64_t hostile_kills, hostile_ops, reporters_killed, unfenced_members;
    uint64_t ns_members, kid_kills[PATH_COUNT], kids_exited, parents_killed, parents_over_kid_running;
    uint64_t false_deaths_seen, freed_by_others[PATH_COUNT], ns_freed_by_others[PATH_COUNT];
    char ns_skipped[160];                /* why namespaced members did not run; "" when they did */
    uint64_t neighbour_kills[2], neighbour_rounds[2], neighbour_quarantines, attacker_failures;
    uint64_t neighbour_cuts, neighbour_cut_faults;   /* fleets truncated under the reaper; its faults of them */
    char neighbour_skipped[160];         /* why the hostile neighbour did not run; "" when it did */
    uint64_t nlat[2][LAT_MAX];           /* victim reclaim latencies without [0] and with [1] the attacker */
    size_t n_nlat[2];
    uint64_t lat[PATH_COUNT][LAT_MAX];
    size_t n_lat[PATH_COUNT];
};

struct opts { uint64_t kills, hostile, seed, neighbour; int seconds, members; bool no_ns; const char *hostile_bin; };

/* A forked child's pid, pinned (unreaped) until it is ours to reap: reparented to us, the subreaper. */
struct zombie { pid_t pid; bool killed; };

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
    bool cut_seen;                    /* the neighbour round's truncated fleet was quarantined as corrupt */
    pid_t pid[TARGETS];               /* as this process sees it (a namespaced member is 1 in its own) */
    int64_t kill_ns[TARGETS];
    uint64_t rng;
    int64_t deadline_ns;
    bool hostile;
    int neighbour;                    /* the neighbour phase: 1 a round without the attacker, 2 with; 0 others */
    bool reaped[TARGETS];             /* the reaper's callback saw target t's death */
    bool ns[TARGETS];                 /* member t runs in a pid namespace of its own */
    bool judged[TARGETS];             /* target t's life was seen judged dead while running (counted once) */
    int own_pidns;                    /* our pid namespace, to go back to after a namespaced fork; -1: none */
    struct zombie zombie[ZOMBIES_MAX];
    int n_zombies;
};

static struct chaos_slot *slot_of(struct sup *s, int t)
{
    return t < CHAOS_MEMBERS_MAX ? &s->sh->slot[t] : &s->sh->kid[t - CHAOS_MEMBERS_MAX];
}

/* Running user code still (not gone, not a zombie, not exiting): pids are pinned until we reap. */
static bool running(pid_t pid)
{
    return pid > 0 && orbit_process_exiting(pid) == 0;
}

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

/* In the child of a namespaced fork: pid 1 of the new pid namespace, with a mount namespace and /proc of its own. */
static void become_namespaced(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getpid() != 1 || unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
        fprintf(stderr, "chaos: namespaced member: %s\n", strerror(errno));
        _exit(CHAOS_EXIT_NS_SETUP);
    }
}

/* fork(), or (ns) a fork whose child is pid 1 of a new pid namespace; our own children stay in ours. */
static pid_t fork_member(struct sup *s, bool ns)
{
    if (!ns)
        return fork();
    if (unshare(CLONE_NEWPID) != 0)
        return -1;
    pid_t pid = fork();
    if (pid != 0 && setns(s->own_pidns, CLONE_NEWPID) != 0) {
        fprintf(stderr, "chaos: setns back to our pid namespace: %s\n", strerror(errno));
        exit(1);
    }
    if (pid == 0)
        become_namespaced();
    return pid;
}

/* Whether member i forks a child mid-run (never a namespaced one, never under the scribbler). */
static void plan_fork(struct sup *s, int i, bool ns)
{
    struct chaos_slot *sl = &s->sh->slot[i];
    bool forks = !ns && !s->hostile && atomic_load(&s->sh->kid[i].pid) == 0 && chaos_below(&s->rng, 3) == 0;
    atomic_store(&sl->fork_at, forks ? 2 + chaos_below(&s->rng, 24) : 0);
    atomic_store(&sl->kid_ops, chaos_below(&s->rng, 2) ? 0 : 10 + chaos_below(&s->rng, 200));
}

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
    bool ns = s->own_pidns >= 0 && chaos_below(&s->rng, 4) == 0;
    plan_fork(s, i, ns);
    s->fig->unfenced_members += unfenced;
    pid_t pid = fork_member(s, ns);
    if (pid < 0 && ns) {
        ns = false;   /* unshare refused now: counted as an ordinary member */
        pid = fork();
    }
    if (pid == 0) {
        if (unfenced)
            setenv("ORBIT_DISABLE_MEMBARRIER", "1", 1);
        /* The supervisor's reaper is left alone here: closing it would unregister the
         * descriptors the parent's epoll shares with us. */
        chaos_member(s->name, s->sh, i, seed);
        _exit(0);
    }
    s->fig->ns_members += ns;
    s->ns[i] = ns;
    s->pid[i] = pid;
    s->reaped[i] = false;
    s->judged[i] = false;
}

/* A member that ended without our kill: opened a scribbled fleet (refused), or crashed. */
static void classify_exit(struct sup *s, int i, int status)
{
    bool refused = WIFEXITED(status) && (WEXITSTATUS(status) == 42 || WEXITSTATUS(status) == 41);
    if (refused && (s->hostile || WEXITSTATUS(status) == 42)) {
        s->fig->refused_opens++;
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == CHAOS_EXIT_FALSE_DEATH)
        return;   /* counted by the member, which said so */
    s->fig->crashes++;
    fprintf(stderr, "chaos: CRASH: member %d (pid %d) %s %d\n", i, (int)s->pid[i],
            WIFSIGNALED(status) ? "killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- reclaiming -------------------------------------------------------------- */

static void false_death_seen(struct sup *s, int t, const char *by)
{
    struct chaos_slot *sl = slot_of(s, t);
    if (s->judged[t])
        return;
    s->judged[t] = true;
    s->fig->false_deaths_seen++;
    fprintf(stderr, "chaos: FALSE DEATH: %s %d (pid %d%s, node %u, incarnation %llx) judged dead while running, "
            "by %s (%s path)\n", t < CHAOS_MEMBERS_MAX ? "member" : "forked child", t % CHAOS_MEMBERS_MAX,
            (int)s->pid[t], s->ns[t] ? ", pid 1 of its own pid namespace" : "", (unsigned)atomic_load(&sl->node),
            (unsigned long long)atomic_load(&sl->incarnation), by, path_name[s->path]);
}

/* A reaper's report: a death we caused (its latency), or the report of a life still running. */
static void on_death(void *ctx, const struct orbit_reaper_death *d)
{
    struct sup *s = ctx;
    if (strcmp(d->fleet, s->name) != 0)
        return;   /* the neighbour phase's reaper watches every fleet: another's death is not ours */
    for (int t = 0; t < TARGETS; t++) {
        struct chaos_slot *sl = slot_of(s, t);
        if (s->pid[t] <= 0 || !atomic_load(&sl->ready) || atomic_load(&sl->node) != d->node ||
            atomic_load(&sl->incarnation) != d->incarnation)
            continue;
        if (s->kill_ns[t] == 0) {
            char by[160];
            snprintf(by, sizeof by, "the reaper (%s, pid %d start %llu in its report)",
                     d->source == ORBIT_REAPER_FOUND_DEAD ? "found dead when read" : "an exit event", (int)d->pid,
                     (unsigned long long)d->start_time);
            if (running(s->pid[t]) && !atomic_load(&sl->exited))
                false_death_seen(s, t, by);
            continue;
        }
        s->reaped[t] = true;
        size_t *n = s->neighbour ? &s->fig->n_nlat[s->neighbour - 1] : &s->fig->n_lat[s->path];
        uint64_t *lat = s->neighbour ? s->fig->nlat[s->neighbour - 1] : s->fig->lat[s->path];
        if (*n < LAT_MAX && d->reclaimed_ns > (uint64_t)s->kill_ns[t])
            lat[(*n)++] = d->reclaimed_ns - (uint64_t)s->kill_ns[t];
        if (s->neighbour && getenv("ORBIT_CHAOS_SLOW") && d->reclaimed_ns - (uint64_t)s->kill_ns[t] > 30000000)
            fprintf(stderr, "chaos: SLOW: neighbour %s the attacker: kill->exit %lld us, exit->detected %lld us, "
                    "detected->reclaimed %lld us (%s%s)\n", s->neighbour == 2 ? "with" : "without",
                    d->exit_ns ? (long long)((int64_t)d->exit_ns - s->kill_ns[t]) / 1000 : -1,
                    d->exit_ns ? (long long)((int64_t)d->detected_ns - (int64_t)d->exit_ns) / 1000 : -1,
                    (long long)(d->reclaimed_ns - d->detected_ns) / 1000,
                    d->source == ORBIT_REAPER_FOUND_DEAD ? "found dead" : "exit event", s->ns[t] ? ", namespaced" : "");
    }
}

/* Is that life still holding its node (and, with alive, its kernel lock too)? */
static bool node_held(struct sup *s, uint16_t node, uint64_t inc, bool alive)
{
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    ssize_t got = orbit_fleet_nodes(s->f, n, CHAOS_FLEET_CAPACITY);
    for (ssize_t k = 0; k < got && k < CHAOS_FLEET_CAPACITY; k++)
        if (n[k].node == node && n[k].incarnation == inc)
            return !alive || n[k].alive;
    return false;
}

static bool still_held(struct sup *s, uint16_t node, uint64_t inc)
{
    return node_held(s, node, inc, false);
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

/* Not a failure by itself (a death waits for a lock's bound), but said: it explains a late reclaim. */
static void on_deferral(void *ctx, const struct orbit_reaper_deferral *d)
{
    struct sup *s = ctx;
    fprintf(stderr, "chaos: DEFERRED: %s path, node %u (pid %d, incarnation %llx): %s, attempt %u\n",
            path_name[s->path], (unsigned)d->node, (int)d->pid, (unsigned long long)d->incarnation,
            orbit_strerror(d->error), d->attempts);
}

/* Why the reaper did not reclaim a death in time: the node as we see it, and the reaper's counts. */
static void reaper_unreclaimed(struct sup *s, uint16_t node, uint64_t inc)
{
    struct orbit_reaper_stats st;
    orbit_reaper_stats(s->reaper, &st);
    fprintf(stderr, "chaos:   node %u incarnation %llx %s; reaper: %llu events, %llu deaths, %llu ignored, %llu drops, "
            "%llu rescans, %u watched\n", (unsigned)node, (unsigned long long)inc,
            node_held(s, node, inc, true) ? "held, its lock too" : "held, its lock released",
            (unsigned long long)st.events, (unsigned long long)st.deaths, (unsigned long long)st.ignored,
            (unsigned long long)st.drops, (unsigned long long)st.rescans, st.watched);
}

/* The reaper's callback, or (members reap too) the node freed by another first: counted apart. */
static bool reclaim_by_reaper(struct sup *s, int t, uint16_t node, uint64_t inc)
{
    int64_t end = chaos_now_ns() + (int64_t)RECLAIM_MS * 1000000, freed_ns = 0;
    while (!s->reaped[t] && chaos_now_ns() < end) {
        orbit_reaper_process(s->reaper, 20);
        if (!freed_ns && !still_held(s, node, inc))
            freed_ns = chaos_now_ns();
        if (freed_ns && chaos_now_ns() - freed_ns > 200 * 1000000)
            break;   /* its callback would have come by now */
    }
    if (!s->reaped[t] && freed_ns) {
        s->fig->freed_by_others[s->path]++;
        s->fig->ns_freed_by_others[s->path] += s->ns[t];
    }
    bool ok = (s->reaped[t] || freed_ns) && !still_held(s, node, inc);
    if (!ok)
        reaper_unreclaimed(s, node, inc);
    return ok;
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

/*
 * orbit_fleet_reap, or orbit_fleet_node_dead (which reports, or finishes a killed reporter's).
 * Members reap too: one may be reporting this very death (holding the node's owner byte, so
 * our call passes it by). Until it is freed, within RECLAIM_MS, we call again.
 */
static int reclaim_call(struct sup *s, bool ready, uint16_t node, uint64_t inc)
{
    int64_t end = chaos_now_ns() + (int64_t)RECLAIM_MS * 1000000;
    for (;;) {
        int rc = !ready || s->path == PATH_REAP ? orbit_fleet_reap(s->f) : orbit_fleet_node_dead(s->f, node, inc);
        if (rc < 0 || !ready || !still_held(s, node, inc) || chaos_now_ns() > end)
            return rc;
        /* Its lock held still: a child it forked may not have run its fork handler yet (which
         * closes the child's copy of the descriptor). Wait for the kernel, bounded; a lock held
         * past that is counted unreclaimed. */
        int64_t left_ms = (end - chaos_now_ns()) / 1000000;
        if (s->path == PATH_REAP && node_held(s, node, inc, true) &&
            (left_ms <= 0 || orbit_fleet_wait_node_death(s->f, node, inc, (int)left_ms) != 0))
            return rc;
        sleep_ms(1);
    }
}

/* Reclaim target t (killed, gone) by this phase's path; false when it was not. */
static bool reclaim(struct sup *s, int t)
{
    struct chaos_slot *sl = slot_of(s, t);
    uint16_t node = (uint16_t)atomic_load(&sl->node);
    uint64_t inc = atomic_load(&sl->incarnation);
    bool ready = atomic_load(&sl->ready);
    if (s->hostile)
        return !ready || node_dead_bounded(s, node, inc);
    int64_t t0 = s->kill_ns[t], call_ns = chaos_now_ns();
    if (ready && s->path != PATH_REAP && s->path != PATH_NODE_DEAD)
        return reclaim_by_reaper(s, t, node, inc);
    if (ready && s->path == PATH_NODE_DEAD && chaos_below(&s->rng, 4) == 0)
        kill_a_reporter(s, node, inc);
    int rc = reclaim_call(s, ready, node, inc);
    int64_t took = chaos_now_ns() - call_ns;
    if (ready && s->fig->n_lat[s->path] < LAT_MAX)
        s->fig->lat[s->path][s->fig->n_lat[s->path]++] = (uint64_t)(chaos_now_ns() - t0);
    if (took > 1000 * 1000000LL || rc < 0)   /* a report that waited out a lock bound: say whose */
        fprintf(stderr, "chaos: SLOW: %s path, %s %d%s (node %u): %lld ms, %s\n", path_name[s->path],
                t < CHAOS_MEMBERS_MAX ? "member" : "forked child", t % CHAOS_MEMBERS_MAX,
                s->ns[t] ? " (namespaced)" : "", (unsigned)node, (long long)(took / 1000000),
                rc < 0 ? orbit_strerror(rc) : "no error");
    return !ready || !still_held(s, node, inc);
}

/* Wait (bounded) until the process has exited; its pid is pinned: no one else reaps it. */
static void wait_gone(pid_t pid)
{
    uint64_t st;
    int64_t end = chaos_now_ns() + (int64_t)RECLAIM_MS * 1000000;
    while (orbit_process_start_time(pid, &st) != -ESRCH && chaos_now_ns() < end)
        sleep_ms(1);
}

/* After a parent's death: the child it was forking, if any, shows its pid now (or never was). */
static void settle_fork(struct sup *s, int i, pid_t parent)
{
    struct chaos_slot *ks = &s->sh->kid[i];
    int64_t end = chaos_now_ns() + 1000 * 1000000LL;
    while (atomic_load(&ks->pid) == -1 && chaos_now_ns() < end)
        sleep_ms(1);
    int32_t forking = -1;
    if (atomic_load(&ks->ppid) == parent)
        atomic_compare_exchange_strong(&ks->pid, &forking, 0);   /* killed before its fork() */
}

/* The forked child of slot i, if it runs, and its parent is pid: its pid, else 0. */
static pid_t live_child_of(struct sup *s, int i, pid_t parent)
{
    struct chaos_slot *ks = &s->sh->kid[i];
    pid_t kid = atomic_load(&ks->pid);
    return kid > 0 && atomic_load(&ks->ppid) == parent && running(kid) ? kid : 0;
}

/* A parent killed while its child runs: its life must be over (the child held none of it). */
static bool parent_life_over(struct sup *s, int i, uint16_t node, uint64_t inc)
{
    s->fig->parents_killed++;
    int rc = orbit_fleet_wait_node_death(s->f, node, inc, PARENT_OVER_MS);
    if (rc == 0)
        return true;
    s->fig->unreclaimed++;
    fprintf(stderr, "chaos: UNRECLAIMED: member %d (pid %d) killed while its forked child lives: "
            "orbit_fleet_wait_node_death: %s\n", i, (int)s->pid[i], orbit_strerror(rc));
    return false;
}

/* Kill member i now and reclaim it; counts the kill under the table it was in. */
static void kill_member(struct sup *s, int i)
{
    struct chaos_slot *sl = &s->sh->slot[i];
    bool ready = atomic_load(&sl->ready);
    uint32_t table = ready ? atomic_load(&sl->focus) % T_COUNT : T_JOINING;
    pid_t parent = s->pid[i], kid = live_child_of(s, i, parent);
    s->kill_ns[i] = chaos_now_ns();
    kill(s->pid[i], SIGKILL);
    int st;
    waitpid(s->pid[i], &st, 0);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
        classify_exit(s, i, st);
    settle_fork(s, i, parent);
    if (s->hostile)
        s->fig->hostile_kills++;
    else if (s->neighbour)
        s->fig->neighbour_kills[s->neighbour - 1]++;
    else
        s->fig->kills[table < T_COUNT ? table : T_JOINING][s->path]++;
    bool with_kid = kid && ready && !s->hostile;
    bool over = with_kid && parent_life_over(s, i, (uint16_t)atomic_load(&sl->node), atomic_load(&sl->incarnation));
    bool reclaimed = reclaim(s, i);
    if (!reclaimed && (!with_kid || over)) {   /* a parent's life not over is counted once, above */
        s->fig->unreclaimed++;
        fprintf(stderr, "chaos: UNRECLAIMED: %s path, member %d pid %d%s\n", path_name[s->path], i, (int)s->pid[i],
                s->ns[i] ? " (pid 1 of its own pid namespace)" : "");
    }
    s->fig->parents_over_kid_running += over && reclaimed && running(kid);
    s->kill_ns[i] = 0;
    s->pid[i] = 0;
}

/* ---- forked children ---------------------------------------------------------- */

static void classify_kid(struct sup *s, const struct zombie *z, int status)
{
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        return;
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == CHAOS_EXIT_FALSE_DEATH))
        return;   /* exited after its operations, or said it found itself reaped (counted) */
    s->fig->crashes++;
    fprintf(stderr, "chaos: CRASH: forked child (pid %d%s) %s %d\n", (int)z->pid, z->killed ? ", killed by us" : "",
            WIFSIGNALED(status) ? "killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* Reap the children that are ours now (their parents gone); block: every parent is dead. */
static void reap_zombies(struct sup *s, bool block)
{
    for (int k = 0; k < s->n_zombies;) {
        int st;
        pid_t r = waitpid(s->zombie[k].pid, &st, block ? 0 : WNOHANG);
        if (r == 0 || (r < 0 && errno == ECHILD && !block)) {
            k++;   /* alive as a zombie of a living parent: later */
            continue;
        }
        if (r == s->zombie[k].pid)
            classify_kid(s, &s->zombie[k], st);
        s->zombie[k] = s->zombie[--s->n_zombies];
    }
}

/* Child i is gone (killed by us, or exited): reclaimed by this phase's path, its slot freed. */
static void kid_done(struct sup *s, int i, bool killed)
{
    int t = KID(i);
    struct chaos_slot *ks = &s->sh->kid[i];
    wait_gone(s->pid[t]);
    if (!s->kill_ns[t])
        s->kill_ns[t] = chaos_now_ns();
    if (killed)
        s->fig->kid_kills[s->path]++;
    else
        s->fig->kids_exited++;
    if (!reclaim(s, t)) {
        s->fig->unreclaimed++;
        fprintf(stderr, "chaos: UNRECLAIMED: %s path, forked child %d pid %d (%s; its node %s)\n", path_name[s->path], i,
                (int)s->pid[t], running(s->pid[t]) ? "still running" : "gone",
                orbit_fleet_wait_node_death(s->f, (uint16_t)atomic_load(&ks->node), atomic_load(&ks->incarnation), 0) == 0
                    ? "shows its life over" : "shows its life held");
    }
    if (s->n_zombies == ZOMBIES_MAX)
        reap_zombies(s, false);
    if (s->n_zombies < ZOMBIES_MAX)
        s->zombie[s->n_zombies++] = (struct zombie){ s->pid[t], killed };
    atomic_store(&ks->ready, 0);
    atomic_store(&ks->exited, 0);
    atomic_store(&ks->node, 0);
    atomic_store(&ks->incarnation, 0);
    atomic_store(&ks->ppid, 0);
    atomic_store(&ks->pid, 0);   /* last: the slot is free for the next fork */
    s->pid[t] = 0;
    s->kill_ns[t] = 0;
    s->reaped[t] = false;
}

/* Follow slot i's child: take up its pid, notice its own end. Returns its pid while it runs, else 0. */
static pid_t follow_kid(struct sup *s, int i)
{
    int t = KID(i);
    pid_t pid = atomic_load(&s->sh->kid[i].pid);
    if (s->pid[t] == 0 && pid > 0) {
        s->pid[t] = pid;
        s->ns[t] = false;
        s->reaped[t] = false;
        s->judged[t] = false;
    }
    if (s->pid[t] <= 0)
        return 0;
    if (atomic_load(&s->sh->kid[i].exited) || !running(s->pid[t])) {
        kid_done(s, i, false);   /* its own exit (or a crash: its status tells, once reaped) */
        return 0;
    }
    return s->pid[t];
}

static void kill_kid(struct sup *s, int i)
{
    int t = KID(i);
    s->kill_ns[t] = chaos_now_ns();
    kill(s->pid[t], SIGKILL);
    kid_done(s, i, true);
}

/* A random running child, or -1. */
static int pick_kid(struct sup *s)
{
    int live[CHAOS_MEMBERS_MAX], n = 0;
    for (int i = 0; i < s->o->members; i++)
        if (follow_kid(s, i))
            live[n++] = i;
    return n ? live[chaos_below(&s->rng, (uint32_t)n)] : -1;
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

/* Children that ended by themselves are reclaimed; one stalled past HANG_MS is a hang, killed. */
static void watch_kids(struct sup *s)
{
    int64_t now = chaos_now_ns();
    for (int i = 0; i < s->o->members; i++) {
        if (!follow_kid(s, i))
            continue;
        int64_t last = atomic_load(&s->sh->kid[i].last_beat_ns);
        int bound = atomic_load(&s->sh->kid[i].ready) ? HANG_MS : SETUP_HANG_MS;
        if (now - last > (int64_t)bound * 1000000) {
            s->fig->hangs++;
            struct chaos_slot *ks = &s->sh->kid[i];
            char st[256] = "";
            char path[64];
            snprintf(path, sizeof path, "/proc/%d/wchan", (int)s->pid[KID(i)]);
            FILE *w = fopen(path, "r");
            if (w) {
                if (!fgets(st, sizeof st, w))
                    st[0] = 0;
                fclose(w);
            }
            fprintf(stderr, "chaos: HANG: forked child %d (pid %d) finished nothing for %lld ms (bound %d ms), "
                    "in %s (slot pid %d ppid %d ready %d beats %llu; wchan %s)\n", i, (int)s->pid[KID(i)],
                    (long long)((now - last) / 1000000), bound, chaos_table_name[atomic_load(&ks->table) % T_COUNT],
                    (int)atomic_load(&ks->pid), (int)atomic_load(&ks->ppid), (int)atomic_load(&ks->ready),
                    (unsigned long long)atomic_load(&ks->beats), st);
            if (getenv("ORBIT_CHAOS_HANG_GDB")) {   /* diagnosis: where the child is */
                char cmd[160];
                snprintf(cmd, sizeof cmd, "timeout 20 gdb -p %d -batch -ex bt 1>&2 2>/dev/null",
                         (int)s->pid[KID(i)]);
                if (system(cmd) != 0)
                    fprintf(stderr, "chaos: (no backtrace)\n");
            }
            kill_kid(s, i);
        }
    }
}

/* Every running member and child still holds its node, alive, as our own handle sees it. */
static void check_lives(struct sup *s)
{
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    bool was_ready[TARGETS];
    for (int t = 0; t < TARGETS; t++)
        was_ready[t] = s->pid[t] > 0 && s->kill_ns[t] == 0 && atomic_load(&slot_of(s, t)->ready);
    ssize_t got = orbit_fleet_nodes(s->f, n, CHAOS_FLEET_CAPACITY);
    for (int t = 0; got >= 0 && t < TARGETS; t++) {
        struct chaos_slot *sl = slot_of(s, t);
        const struct orbit_node_info *rec = NULL;
        for (ssize_t k = 0; k < got && k < CHAOS_FLEET_CAPACITY; k++)
            if (n[k].node == atomic_load(&sl->node))
                rec = &n[k];
        bool held = rec && rec->incarnation == atomic_load(&sl->incarnation) && rec->state == ORBIT_NODE_LIVE &&
                    rec->alive;
        /* Checked after the probe: a process running now was running at it (pids are pinned). */
        if (!was_ready[t] || held || atomic_load(&sl->exited) || !running(s->pid[t]))
            continue;
        char by[160];
        snprintf(by, sizeof by, "orbit_fleet_nodes (its node %s)", !rec ? "free"
                 : rec->incarnation != atomic_load(&sl->incarnation) ? "another life's"
                 : rec->state != ORBIT_NODE_LIVE ? "not LIVE" : "LIVE but not alive");
        false_death_seen(s, t, by);
    }
}

/* Members that exited by themselves, and members stalled past HANG_MS: counted, then replaced. */
static void watch_members(struct sup *s)
{
    if (!s->hostile)
        check_lives(s);
    reap_zombies(s, false);
    watch_kids(s);
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
    for (int i = 0; i < s->o->members; i++)
        if (follow_kid(s, i))
            kill_kid(s, i);
    reap_zombies(s, true);   /* every parent is dead: their children are ours */
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
    orbit_reaper_on_deferral(s->reaper, on_deferral, s);
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
        int i = pick_victim(s), k = pick_kid(s);
        if (k >= 0 && chaos_below(&s->rng, 3) == 0) {
            kill_kid(s, k);
        } else {
            kill_member(s, i);
            spawn(s, i);
        }
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

/* ---- the hostile neighbour --------------------------------------------------- */

static void on_quarantine(void *ctx, const struct orbit_reaper_quarantine *q)
{
    struct sup *s = ctx;
    if (!q->released && strstr(q->fleet, "-nb-"))
        s->fig->neighbour_quarantines++;   /* the attacker's fleets: proof it reached the reaper */
    if (!q->released && strstr(q->fleet, "-nb-cut-") && q->reason == ORBIT_REAPER_QUARANTINE_FAULT &&
        q->error == -ORBIT_ECORRUPT)
        s->cut_seen = true;   /* its truncation: the SIGBUS guard's -ORBIT_ECORRUPT, no signal */
}

static int open_neighbour_reaper(struct sup *s)
{
    int rc = orbit_reaper_open(ORBIT_REAPER_AUTO, &s->reaper);   /* as the shipped unit runs it */
    if (rc < 0) {
        s->reaper = NULL;
        return rc;
    }
    s->path = orbit_reaper_backend(s->reaper) == ORBIT_REAPER_BPF ? PATH_BPF : PATH_PIDFD;
    orbit_reaper_set_interval(s->reaper, 10);
    orbit_reaper_on_deferral(s->reaper, on_deferral, s);
    orbit_reaper_on_quarantine(s->reaper, on_quarantine, s);
    return orbit_reaper_on_death(s->reaper, on_death, s, 0);
}

#define NEIGHBOUR_ROUND_KILLS 12   /* kills a round: short rounds, so the two conditions interleave finely */

/* The reaper's callbacks for a while (its quarantines of the attacker's fleets come in). */
static void settle(struct sup *s, int ms)
{
    int64_t end = chaos_now_ns() + (int64_t)ms * 1000000;
    while (chaos_now_ns() < end)
        orbit_reaper_process(s->reaper, ms);
}

/*
 * One round: without the attacker (1) or with it (2). The attacker's fleets
 * are made before the round's kills, and its forger is killed at a random
 * kill of the round: its 4,000 lives end at once and the reaper reports them
 * while the victim's members go on dying. The round ends like every round
 * (end_round), members respawned only when another round follows. Returns
 * whether one does.
 */
static bool neighbour_round(struct sup *s, unsigned round, uint64_t *done)
{
    struct chaos_attacker a = { 0 };
    s->neighbour = 1 + (int)(round % 2);
    s->cut_seen = false;
    if (s->neighbour == 2 && chaos_attacker_start(&a, s->o->hostile_bin, "nb", round) < 0)
        s->fig->attacker_failures++;
    settle(s, 300);   /* both kinds of round alike: made, found and quarantined before the kills */
    uint32_t storm = chaos_below(&s->rng, NEIGHBOUR_ROUND_KILLS);
    uint32_t cut = chaos_below(&s->rng, NEIGHBOUR_ROUND_KILLS / 2);   /* early: its fault lands in the round */
    /* The first two rounds (one of each kind) run whatever the clock says: both conditions are measured. */
    for (uint32_t k = 0; k < NEIGHBOUR_ROUND_KILLS && *done < s->o->neighbour && (round < 2 || time_left(s));
         k++, (*done)++) {
        alarm(120);
        idle(s, 2 + (int)chaos_below(&s->rng, 30));
        watch_members(s);
        if (a.n && k == storm) {   /* 4,000 forged lives end at once */
            kill(a.pid[CHAOS_FORGER], SIGKILL);
            waitpid(a.pid[CHAOS_FORGER], NULL, 0);
        }
        if (a.n && k == cut) {   /* its fleet's files shrink under the reaper's mappings */
            chaos_attacker_cut(&a);
            s->fig->neighbour_cuts++;
        }
        int i = pick_victim(s);
        kill_member(s, i);
        spawn(s, i);
    }
    s->fig->neighbour_rounds[s->neighbour - 1]++;
    bool more = *done < s->o->neighbour && (round < 1 || time_left(s));
    end_round(s, more);   /* every member and child killed and reclaimed, the tables checked */
    s->fig->neighbour_cut_faults += a.n && s->cut_seen;   /* one fleet a round: it is quarantined once */
    s->fig->attacker_failures += (uint64_t)chaos_attacker_stop(&a);
    return more;
}

static void neighbour_phase(struct sup *s, int64_t budget_ns)
{
    const char *why = s->o->neighbour == 0 ? "--neighbour 0"
                    : !s->o->hostile_bin ? "no hostile_fleet (--hostile-bin or ORBIT_HOSTILE_BIN)"
                    : chaos_private_shm();
    if (!why && open_neighbour_reaper(s) < 0)
        why = "orbit_reaper_open failed";
    if (why) {
        snprintf(s->fig->neighbour_skipped, sizeof s->fig->neighbour_skipped, "%s", why);
        return;
    }
    s->deadline_ns = budget_ns ? chaos_now_ns() + budget_ns : 0;
    fleet_name(s, "victim");
    if (sup_open(s) < 0) {
        s->fig->crashes++;
        orbit_reaper_close(s->reaper);
        s->reaper = NULL;
        return;
    }
    orbit_reaper_watch_all(s->reaper);
    for (int i = 0; i < s->o->members; i++)
        spawn(s, i);
    uint64_t done = 0;
    for (unsigned round = 0; neighbour_round(s, round, &done); round++) {}
    s->neighbour = 0;
    orbit_reaper_close(s->reaper);
    s->reaper = NULL;
    sup_close(s);
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

/* A percentile (0..1) of one neighbour sample set, in microseconds (sorted first). */
static double neighbour_pct(struct figures *fig, int which, double q)
{
    size_t n = fig->n_nlat[which];
    qsort(fig->nlat[which], n, sizeof fig->nlat[which][0], cmp_u64);
    return (double)fig->nlat[which][(size_t)((double)n * q)] / 1e3;
}

/*
 * The hostile neighbour's figures. It passes when the attacker reached the
 * reaper (its fleets quarantined), started every time, and the victim's
 * reclaim p99 with it is at most twice the p99 without it, that p99 taken
 * as at least NEIGHBOUR_FLOOR_US: so at most 100 ms (the reclaim bound of
 * issue 34) whatever the baseline. A p99 of fewer than NEIGHBOUR_P99_MIN
 * deaths is their largest or second largest, which one stray wait on a
 * shared machine decides (a report waits out a dying holder's table lock
 * now and then, in both conditions alike): the bounded run compares p95s,
 * and says so; the long form, p99s.
 */
#define NEIGHBOUR_FLOOR_US 50000.0
#define NEIGHBOUR_P99_MIN  500
static bool report_neighbour(struct figures *fig)
{
    if (fig->neighbour_skipped[0]) {
        printf("chaos: hostile neighbour SKIPPED (not covered): %s\n", fig->neighbour_skipped);
        return true;
    }
    printf("chaos: hostile neighbour: %llu victim kills in %llu rounds without the attacker, %llu in %llu rounds "
           "with it (uid 65534: 4,000 forged live nodes, a half-created fleet and table, a fleet truncated "
           "under the reaper; %llu quarantines of its fleets, %llu of %llu truncations seen as corrupt, %llu "
           "attacker parts failed)\n", (unsigned long long)fig->neighbour_kills[0],
           (unsigned long long)fig->neighbour_rounds[0], (unsigned long long)fig->neighbour_kills[1],
           (unsigned long long)fig->neighbour_rounds[1], (unsigned long long)fig->neighbour_quarantines,
           (unsigned long long)fig->neighbour_cut_faults, (unsigned long long)fig->neighbour_cuts,
           (unsigned long long)fig->attacker_failures);
    if (!fig->n_nlat[0] || !fig->n_nlat[1]) {
        printf("chaos: hostile neighbour: FAIL: no reclaim samples in one of the two conditions\n");
        return false;
    }
    double p50[2], p95[2], p99[2];
    for (int c = 0; c < 2; c++) {
        p50[c] = neighbour_pct(fig, c, 0.50);
        p95[c] = neighbour_pct(fig, c, 0.95);
        p99[c] = neighbour_pct(fig, c, 0.99);
    }
    bool by_p99 = fig->n_nlat[0] >= NEIGHBOUR_P99_MIN && fig->n_nlat[1] >= NEIGHBOUR_P99_MIN;
    double base = by_p99 ? p99[0] : p95[0], with = by_p99 ? p99[1] : p95[1];
    double allowed = 2 * (base > NEIGHBOUR_FLOOR_US ? base : NEIGHBOUR_FLOOR_US);
    bool ok = with <= allowed && fig->neighbour_quarantines > 0 && !fig->attacker_failures &&
              fig->neighbour_cut_faults == fig->neighbour_cuts;
    printf("chaos: hostile neighbour: victim reclaim without the attacker p50 %.1f us p95 %.1f us p99 %.1f us "
           "(%zu deaths); with it p50 %.1f us p95 %.1f us p99 %.1f us (%zu deaths)\n", p50[0], p95[0], p99[0],
           fig->n_nlat[0], p50[1], p95[1], p99[1], fig->n_nlat[1]);
    printf("chaos: hostile neighbour: %s with / without %.2f (bound %.0f us%s): %s\n", by_p99 ? "p99" : "p95",
           with / base, allowed, by_p99 ? "" : "; p95: under 500 deaths a condition", ok ? "ok" : "FAIL");
    return ok;
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

/* The new member kinds: namespaced members, forked children, members' own reaps, false deaths. */
static uint64_t report_kinds(const struct figures *fig, struct chaos_shared *sh)
{
    uint64_t kid_kills = 0, others = 0, ns_others = 0;
    for (int p = 0; p < PATH_COUNT; p++) {
        kid_kills += fig->kid_kills[p];
        others += fig->freed_by_others[p];
        ns_others += fig->ns_freed_by_others[p];
    }
    if (fig->ns_skipped[0])
        printf("chaos: pid-namespace members SKIPPED (not covered): %s\n", fig->ns_skipped);
    else
        printf("chaos: %llu members ran as pid 1 of a pid namespace of their own (own /proc), killed -9 from "
               "outside\n", (unsigned long long)fig->ns_members);
    printf("chaos: forked children: %llu forked, %llu killed -9 (node_dead %llu, reap %llu, bpf %llu, pidfd %llu), "
           "%llu exited by themselves; %llu parents killed while their child ran (life over and node freed with "
           "the child still running: %llu)\n", (unsigned long long)atomic_load(&sh->kids_forked),
           (unsigned long long)kid_kills, (unsigned long long)fig->kid_kills[PATH_NODE_DEAD],
           (unsigned long long)fig->kid_kills[PATH_REAP], (unsigned long long)fig->kid_kills[PATH_BPF],
           (unsigned long long)fig->kid_kills[PATH_PIDFD], (unsigned long long)fig->kids_exited,
           (unsigned long long)fig->parents_killed, (unsigned long long)fig->parents_over_kid_running);
    printf("chaos: fork rules: %llu checks in children (-ORBIT_EFORKED from the parent's fleet handle: nodes, "
           "reap, wait_node_death, node_dead; and its tables: pool version, register, unregister, streams create, "
           "exchanges wait_offer, admission try_claim, release; the parent's node -ORBIT_ECLAIMED and untouched), "
           "%llu violations\n", (unsigned long long)atomic_load(&sh->fork_checks),
           (unsigned long long)atomic_load(&sh->fork_violations));
    printf("chaos: members' own orbit_fleet_reap: %llu calls reported %llu nodes; reaper phases: %llu deaths "
           "freed by another before the reaper's callback (%llu namespaced)\n",
           (unsigned long long)atomic_load(&sh->member_reaps), (unsigned long long)atomic_load(&sh->member_reaped),
           (unsigned long long)others, (unsigned long long)ns_others);
    return kid_kills;
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
    total += report_kinds(fig, sh);
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
    uint64_t false_deaths = atomic_load(&sh->false_deaths) + fig->false_deaths_seen;
    uint64_t fork_bad = atomic_load(&sh->fork_violations);
    printf("chaos: leaks %llu, hangs %llu, wrong bytes %llu, crashes %llu, unreclaimed %llu, false deaths %llu "
           "(%llu found by the members themselves, %llu seen by the supervisor), fork violations %llu\n",
           (unsigned long long)fig->leaks, (unsigned long long)fig->hangs, (unsigned long long)wrong,
           (unsigned long long)fig->crashes, (unsigned long long)fig->unreclaimed, (unsigned long long)false_deaths,
           (unsigned long long)atomic_load(&sh->false_deaths), (unsigned long long)fig->false_deaths_seen,
           (unsigned long long)fork_bad);
    printf("chaos: kill -> reclaimed (node_dead/reap: until the call returned; reapers: reclaimed_ns):\n");
    for (int p = 0; p < PATH_COUNT; p++)
        print_latency(fig, (enum path)p);
    bool neighbour_ok = report_neighbour(fig);
    bool ok = total > 0 && !fig->leaks && !fig->hangs && !wrong && !fig->crashes && !fig->unreclaimed &&
              !false_deaths && !fork_bad && neighbour_ok;
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
    "  --no-ns           no members in pid namespaces of their own (reported as skipped)\n"
    "  --neighbour N     victim kills beside a hostile neighbour (root; default 0: none)\n"
    "  --hostile-bin P   the hostile_fleet helper the neighbour runs (default: ORBIT_HOSTILE_BIN)\n"
    "Environment: ORBIT_CHAOS_KILLS, ORBIT_CHAOS_HOSTILE, ORBIT_CHAOS_NEIGHBOUR, ORBIT_CHAOS_SECONDS, ORBIT_CHAOS_SEED\n"
    "set the defaults; ORBIT_HOSTILE_BIN the hostile_fleet helper; ORBIT_CHAOS_SLOW=1 explains each\n"
    "neighbour-phase reclaim over 30 ms.\n"
    "Long form: chaos --kills 2400 --hostile 200 --neighbour 2000 --seconds 0\n";

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
        { "members", 1, 0, 'm' }, { "seed", 1, 0, 'S' }, { "no-ns", 0, 0, 'N' }, { "neighbour", 1, 0, 'B' },
        { "hostile-bin", 1, 0, 'P' }, { "help", 0, 0, 'h' }, { "version", 0, 0, 'V' }, { 0, 0, 0, 0 } };
    uint64_t secs = env_or("ORBIT_CHAOS_SECONDS", 50), members = 6;
    o->no_ns = false;
    o->neighbour = env_or("ORBIT_CHAOS_NEIGHBOUR", 0);
    o->hostile_bin = getenv("ORBIT_HOSTILE_BIN");
    o->kills = env_or("ORBIT_CHAOS_KILLS", 400);
    o->hostile = env_or("ORBIT_CHAOS_HOSTILE", 60);
    o->seed = env_or("ORBIT_CHAOS_SEED", (uint64_t)chaos_now_ns());
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        bool ok = c == 'k' ? parse_u64(optarg, 10000000, &o->kills)
                : c == 'H' ? parse_u64(optarg, 10000000, &o->hostile)
                : c == 's' ? parse_u64(optarg, 86400, &secs)
                : c == 'm' ? parse_u64(optarg, CHAOS_MEMBERS_MAX, &members) && members >= 2
                : c == 'S' ? parse_u64(optarg, UINT64_MAX, &o->seed) : c == 'N' ? (o->no_ns = true)
                : c == 'B' ? parse_u64(optarg, 10000000, &o->neighbour)
                : c == 'P' ? (o->hostile_bin = optarg) != NULL : false;
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

/* Namespaced members need root, unshare(CLONE_NEWPID) and a /proc mount: one trial member says. */
static void namespaces_probe(struct sup *s)
{
    const char *why = s->o->no_ns ? "--no-ns" : geteuid() ? "not root" : NULL;
    if (!why && (s->own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC)) < 0)
        why = "no /proc/self/ns/pid";
    int st = 0;
    pid_t pid = why ? -1 : fork_member(s, true);
    if (pid == 0)
        _exit(0);   /* it got as far as pid 1 with its own /proc */
    if (!why && pid < 0)
        why = "unshare(CLONE_NEWPID) refused";
    if (pid > 0 && (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
        why = "a namespaced trial member could not mount its own /proc";
    if (!why)
        return;
    snprintf(s->fig->ns_skipped, sizeof s->fig->ns_skipped, "%s", why);
    printf("chaos: pid-namespace members SKIPPED: %s\n", why);
    if (s->own_pidns >= 0)
        close(s->own_pidns);
    s->own_pidns = -1;
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
    struct sup s = { .o = &o, .fig = fig, .sh = sh, .rng = o.seed | 1, .own_pidns = -1 };
    /* Orphaned forked children come to us, so their pids stay pinned until we reap them. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        fprintf(stderr, "chaos: PR_SET_CHILD_SUBREAPER: %s\n", strerror(errno));
    namespaces_probe(&s);
    /* Four kill phases and the hostile one share the budget equally. */
    /* The neighbour gets two shares: its figures compare two conditions' p99s. */
    int64_t share = (int64_t)o.seconds * 1000000000 / (PATH_COUNT + (o.hostile ? 1 : 0) + (o.neighbour ? 2 : 0));
    for (int p = 0; p < PATH_COUNT; p++)
        kill_phase(&s, (enum path)p, share);
    hostile_phase(&s, share);
    neighbour_phase(&s, 2 * share);   /* last: it moves this process into a mount namespace of its own */
    alarm(0);
    if (s.own_pidns >= 0)
        close(s.own_pidns);
    rc = report(fig, sh);
    free(fig);
    return rc;
}
