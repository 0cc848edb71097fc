/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench death: kill -9 -> notification latency, side by side: the
 * reaper with its BPF backend, with its pidfd backend, and
 * orbit_fleet_wait_node_death (no reaper: a thread of the watching process
 * learns of the death from the kernel-released lock). Each kill is of a
 * fresh member, watched before it is killed. --pidns starts every member as
 * pid 1 of a new pid namespace: the reaper then watches it through the lock.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/reaper.h>
#include "cli.h"
#include "bench.h"

enum dpath { D_BPF, D_PIDFD, D_WAIT, D_COUNT };
static const char *dpath_name[D_COUNT] = { "orbit-reaper, BPF backend", "orbit-reaper, pidfd backend",
                                           "orbit_fleet_wait_node_death (no reaper)" };
static const char *dpath_key[D_COUNT] = { "reaper_bpf", "reaper_pidfd", "wait_node_death" };

struct dcfg { int kills; bool json, pidns; char fleet[64]; };
struct dres { bool ran; char why[160]; int n; int64_t p50, p99, max; };

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void member_main(const struct dcfg *c, int out)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    struct orbit_fleet *f;
    uint64_t hello[3] = { (uint64_t)getpid(), UINT64_MAX, 0 };
    if (orbit_fleet_join(c->fleet, &o, &f) == 0) {
        hello[1] = orbit_fleet_node(f);
        hello[2] = orbit_fleet_incarnation(f);
    }
    bench_put(out, hello, sizeof hello);
    for (;;)
        pause();
}

/* --pidns: a helper unshares, forks the member (pid 1 there) and says its pid as we see it on pidfd. */
static void nested_main(const struct dcfg *c, int out, int pidfd_out)
{
    if (unshare(CLONE_NEWPID) != 0)
        _exit(1);
    pid_t pid = fork();   /* not bench_fork: the member's parent is outside its namespace (ppid 0) */
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pidfd_out);
        member_main(c, out);
    }
    uint64_t seen = (uint64_t)pid;
    bench_put(pidfd_out, &seen, sizeof seen);
    waitpid(pid, NULL, 0);
    _exit(0);
}

/* A member: joins, says its node, then sleeps until killed. *waitee is what to waitpid for. */
static pid_t member_start(const struct dcfg *c, uint16_t *node, uint64_t *inc, pid_t *waitee)
{
    int p[2], q[2];   /* p: the member's hello; q: its pid, from the --pidns helper */
    if (pipe(p) != 0)
        return -1;
    if (pipe(q) != 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    pid_t pid = bench_fork();
    if (pid == 0) {
        close(p[0]);
        close(q[0]);
        if (c->pidns)
            nested_main(c, p[1], q[1]);
        member_main(c, p[1]);
    }
    close(p[1]);
    close(q[1]);
    uint64_t seen = (uint64_t)pid, hello[3];
    bool ok = pid > 0 && (!c->pidns || bench_get(q[0], &seen, sizeof seen)) &&
              bench_get(p[0], hello, sizeof hello) && hello[1] != UINT64_MAX;
    close(p[0]);
    close(q[0]);
    *waitee = pid;
    if (!ok) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        return -1;
    }
    *node = (uint16_t)hello[1];
    *inc = hello[2];
    return (pid_t)seen;
}

struct got { int64_t at; int n; };

static void on_death(void *ctx, const struct orbit_reaper_death *d)
{
    struct got *g = ctx;
    (void)d;
    g->at = now_ns();
    g->n++;
}

/* One kill through a reaper: ns from kill(2) to the death callback, or -1. */
static int64_t one_reaper_kill(const struct dcfg *c, struct orbit_reaper *r, struct got *g)
{
    uint16_t node;
    uint64_t inc;
    pid_t waitee, pid = member_start(c, &node, &inc, &waitee);
    if (pid < 0)
        return -1;
    int64_t until = now_ns() + 2000000000;
    while (orbit_reaper_rescan(r) < 1 && now_ns() < until)
        orbit_reaper_process(r, 1);   /* watched before the kill */
    int before = g->n;
    int64_t t0 = now_ns();
    kill(pid, SIGKILL);
    while (g->n == before && now_ns() - t0 < 2000000000)
        orbit_reaper_process(r, 100);
    if (g->n == before)
        kill(waitee, SIGKILL);   /* not reported: the wait below stays bounded */
    waitpid(waitee, NULL, 0);
    return g->n > before ? g->at - t0 : -1;
}

struct waiter { struct orbit_fleet *f; uint16_t node; uint64_t inc; int64_t at; int rc; };

static void *wait_death(void *p)
{
    struct waiter *w = p;
    w->rc = orbit_fleet_wait_node_death(w->f, w->node, w->inc, 2000);
    w->at = now_ns();
    return NULL;
}

/* One kill with no reaper: ns from kill(2) to orbit_fleet_wait_node_death's return, or -1. */
static int64_t one_wait_kill(const struct dcfg *c, struct orbit_fleet *obs)
{
    struct waiter w = { .f = obs };
    pid_t waitee, pid = member_start(c, &w.node, &w.inc, &waitee);
    if (pid < 0)
        return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, wait_death, &w) != 0) {
        kill(pid, SIGKILL);
        waitpid(waitee, NULL, 0);
        return -1;
    }
    struct timespec settle = { 0, 2000000 };
    nanosleep(&settle, NULL);   /* the waiter parks on the life's word first */
    int64_t t0 = now_ns();
    kill(pid, SIGKILL);
    pthread_join(t, NULL);   /* the wait is bounded (2 s) */
    if (w.rc != 0)
        kill(waitee, SIGKILL);
    waitpid(waitee, NULL, 0);
    orbit_fleet_node_dead(obs, w.node, w.inc);   /* the node is free for the next member */
    return w.rc == 0 ? w.at - t0 : -1;
}

static void summarise(struct dres *res, int64_t *v, int n)
{
    res->ran = true;
    res->n = n;
    res->p50 = tool_percentile(v, (size_t)n, 0.50);
    res->p99 = tool_percentile(v, (size_t)n, 0.99);
    res->max = tool_percentile(v, (size_t)n, 1.0);
}

static void run_path(const struct dcfg *c, enum dpath p, struct dres *res)
{
    int64_t *v = calloc((size_t)c->kills, sizeof *v);
    struct orbit_reaper *r = NULL;
    struct orbit_fleet *obs = NULL;
    struct got g = { 0, 0 };
    int n = 0;
    int rc = p == D_WAIT ? 0 : orbit_reaper_open(p == D_BPF ? ORBIT_REAPER_BPF : ORBIT_REAPER_PIDFD, &r);
    if (rc == 0 && r) {
        orbit_reaper_set_interval(r, 10);
        orbit_reaper_on_death(r, on_death, &g, 0);
        rc = orbit_reaper_watch(r, c->fleet);
    }
    for (int i = 0; v && rc == 0 && i < c->kills; i++) {
        if (p == D_WAIT && !obs && (rc = orbit_fleet_observe(c->fleet, &obs)) == -ENOENT) {
            uint16_t node;   /* the first member makes the fleet */
            uint64_t inc;
            pid_t waitee, pid = member_start(c, &node, &inc, &waitee);
            rc = pid < 0 ? -1 : orbit_fleet_observe(c->fleet, &obs);
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(waitee, NULL, 0);
            }
            if (rc == 0)
                orbit_fleet_reap(obs);
        }
        int64_t ns = rc != 0 ? -1 : p == D_WAIT ? one_wait_kill(c, obs) : one_reaper_kill(c, r, &g);
        if (ns >= 0)
            v[n++] = ns;
    }
    if (rc != 0)
        snprintf(res->why, sizeof res->why, "%s", orbit_strerror(rc));
    else if (n > 0)
        summarise(res, v, n);
    else
        snprintf(res->why, sizeof res->why, "no kill was reported");
    orbit_reaper_close(r);
    orbit_fleet_leave(obs);
    orbit_fleet_unlink(c->fleet);
    free(v);
}

static void print_text(const struct dcfg *c, const struct dres *res)
{
    printf("kill -9 -> notification, %d kills per path, members %s\n", c->kills,
           c->pidns ? "each pid 1 of a new pid namespace" : "in this pid namespace");
    printf("  %-42s %6s %10s %10s %10s\n", "path", "n", "p50 us", "p99 us", "max us");
    for (int p = 0; p < D_COUNT; p++) {
        if (res[p].ran)
            printf("  %-42s %6d %10.1f %10.1f %10.1f\n", dpath_name[p], res[p].n, (double)res[p].p50 / 1e3,
                   (double)res[p].p99 / 1e3, (double)res[p].max / 1e3);
        else
            printf("  %-42s skipped: %s\n", dpath_name[p], res[p].why);
    }
}

static void print_json(const struct dcfg *c, const struct dres *res)
{
    printf("{\"bench\":\"death\",\"kills\":%d,\"pidns\":%s,\"paths\":[", c->kills, c->pidns ? "true" : "false");
    for (int p = 0; p < D_COUNT; p++) {
        printf("%s{\"path\":\"%s\"", p ? "," : "", dpath_key[p]);
        if (res[p].ran)
            printf(",\"n\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f}", res[p].n,
                   (double)res[p].p50 / 1e3, (double)res[p].p99 / 1e3, (double)res[p].max / 1e3);
        else
            printf(",\"skipped\":\"%s\"}", res[p].why);
    }
    printf("]}\n");
}

static const char death_usage[] =
"usage: orbit-bench death [--kills N] [--pidns] [--json]\n"
"\n"
"kill -9 -> notification latency for the reaper (BPF, pidfd) and\n"
"orbit_fleet_wait_node_death (no reaper), one fresh member per kill.\n"
"  -k, --kills N   kills per path (default 200)\n"
"  -p, --pidns     every member is pid 1 of a new pid namespace (root)\n"
"  -j, --json      one JSON object\n";

int bench_death(int argc, char **argv)
{
    static const struct option longs[] = {
        { "kills", required_argument, 0, 'k' }, { "pidns", no_argument, 0, 'p' },
        { "json", no_argument, 0, 'j' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    struct dcfg c = { .kills = 200 };
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":k:pjh", longs, NULL)) != -1) {
        switch (opt) {
        case 'k': c.kills = cli_int(BENCH_TOOL, "--kills", optarg, 1, 100000); break;
        case 'p': c.pidns = true; break;
        case 'j': c.json = true; break;
        case 'h': fputs(death_usage, stdout); return 0;
        default: cli_getopt_error(BENCH_TOOL, opt, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
    snprintf(c.fleet, sizeof c.fleet, "bench-death-%d", (int)getpid());
    bench_unlink_on_signal(c.fleet);
    struct dres res[D_COUNT];
    memset(res, 0, sizeof res);
    for (int p = 0; p < D_COUNT; p++)
        run_path(&c, (enum dpath)p, &res[p]);
    if (c.json)
        print_json(&c, res);
    else
        print_text(&c, res);
    return 0;
}
