/* SPDX-License-Identifier: MIT */
/* What every orbit-bench subcommand shares: control pipes, CPU arguments, forks, cleanup on signals. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "bench.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void bench_put(int fd, const void *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n)
        _exit(90);
}

bool bench_get(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

void bench_cpu_pair(const char *opt, const char *arg, int cpu[2])
{
    char first[16];
    const char *comma = strchr(arg, ',');
    size_t n = comma ? (size_t)(comma - arg) : 0;
    uint64_t v[2];
    const char *why;
    if (!comma || n >= sizeof first)
        cli_bad(BENCH_TOOL, opt, arg, "not two CPU numbers C,S");
    memcpy(first, arg, n);
    first[n] = '\0';
    if (cli_parse_u64(first, 0, CPU_SETSIZE - 1, &v[0], &why) != 0 ||
        cli_parse_u64(comma + 1, 0, CPU_SETSIZE - 1, &v[1], &why) != 0) {
        char reason[64];
        snprintf(reason, sizeof reason, "not two CPU numbers C,S in 0..%d", CPU_SETSIZE - 1);
        cli_bad(BENCH_TOOL, opt, arg, reason);
    }
    cpu[0] = (int)v[0];
    cpu[1] = (int)v[1];
}

void bench_no_operands(int argc, char **argv)
{
    if (optind < argc)
        cli_bad(BENCH_TOOL, "argument", argv[optind], "unexpected");
}

static char cleanup_fleet[80];
static pid_t cleanup_owner;

/*
 * A child still joining may create a segment after the owner's unlink. When the
 * bench leads its process group (a shell job, a session of its own), it first
 * stops its children: they run this handler too and _exit, and are reaped (for
 * at most 2 s) before the unlink. Otherwise they die with it (PDEATHSIG).
 */
static void stop_children(int sig)
{
    if (getpgrp() != getpid())
        return;
    kill(0, sig);                     /* ours stays pending: the handler blocks it */
    struct timespec ms = { 0, 1000000 };
    for (int i = 0; i < 2000; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (waitpid(-1, NULL, WNOHANG) < 0)   /* ECHILD: none left */
            return;
        nanosleep(&ms, NULL);
    }
}

/* Only the process that registered unlinks; children just go. */
static void on_signal(int sig)
{
    if (getpid() == cleanup_owner && cleanup_fleet[0]) {
        stop_children(sig);
        orbit_fleet_unlink(cleanup_fleet);
    }
    _exit(128 + sig);
}

void bench_unlink_on_signal(const char *fleet)
{
    snprintf(cleanup_fleet, sizeof cleanup_fleet, "%s", fleet);
    cleanup_owner = getpid();
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

pid_t bench_fork(void)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* A bench child never outlives the bench: a signalled parent leaves no worker behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

int bench_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int64_t tool_percentile(int64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_i64);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}
