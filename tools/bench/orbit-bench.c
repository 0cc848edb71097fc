/* SPDX-License-Identifier: MIT */
/* orbit-bench — orbit measured side by side with the kernel alternatives, in one run. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "tool.h"

static const char usage[] =
"usage: orbit-bench SUBCOMMAND [OPTIONS]   (SUBCOMMAND --help for its options)\n"
"\n"
"  wake        one-way wake and ping-pong latency, 1-byte messages: orbit stream\n"
"              (spin+park, park only, io_uring wait), eventfd, pipe, AF_UNIX socketpair\n"
#ifdef ORBIT_WITH_STREAM
"  stream      stream throughput and ping-pong beside pipe, socketpair and memcpy\n"
#endif
#ifdef ORBIT_WITH_POOL
"  pool        reserve/accept/complete ops/s beside a process-shared mutex\n"
#endif
#ifdef ORBIT_WITH_ADMISSION
"  admission   claims+releases per second\n"
#endif
#ifdef ORBIT_WITH_EXCHANGE
"  exchange    paired exchanges through the payload arena beside streams and a socketpair\n"
#endif
"\n"
"Every subcommand takes --json for machine-readable output.\n";

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

bool bench_u64_arg(const char *sub, const char *opt, const char *arg, uint64_t min, uint64_t max,
                   uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    /* strtoull takes "-5" as 2^64 - 5: only digits are numbers here. */
    if (arg[0] < '0' || arg[0] > '9' || errno || !end || *end || v < min || v > max) {
        fprintf(stderr, "orbit-bench %s: %s: '%s' is not a whole number in %llu..%llu\n", sub, opt, arg,
                (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    *out = v;
    return true;
}

bool bench_double_arg(const char *sub, const char *opt, const char *arg, double min, double max,
                      double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || !end || end == arg || *end || !isfinite(v) || v < min || v > max) {
        fprintf(stderr, "orbit-bench %s: %s: '%s' is not a number in %g..%g\n", sub, opt, arg, min, max);
        return false;
    }
    *out = v;
    return true;
}

static char cleanup_fleet[80];
static pid_t cleanup_owner;

/* Only the process that registered unlinks; children just go (they die with it anyway). */
static void on_signal(int sig)
{
    if (getpid() == cleanup_owner && cleanup_fleet[0])
        orbit_fleet_unlink(cleanup_fleet);
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

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "wake") == 0) return bench_wake(argc - 1, argv + 1);
#ifdef ORBIT_WITH_STREAM
    if (strcmp(sub, "stream") == 0) return bench_stream(argc - 1, argv + 1);
#endif
#ifdef ORBIT_WITH_POOL
    if (strcmp(sub, "pool") == 0) return bench_pool(argc - 1, argv + 1);
#endif
#ifdef ORBIT_WITH_ADMISSION
    if (strcmp(sub, "admission") == 0) return bench_admission(argc - 1, argv + 1);
#endif
#ifdef ORBIT_WITH_EXCHANGE
    if (strcmp(sub, "exchange") == 0) return bench_exchange(argc - 1, argv + 1);
#endif
    fprintf(stderr, "orbit-bench: unknown subcommand '%s'\n\n%s", sub, usage);
    return 2;
}
