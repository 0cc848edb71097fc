/* SPDX-License-Identifier: MIT */
/* The busy-poll cache-line round trip between two CPUs. */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"
#include "bench_clock.h"
#include "bench_floor.h"

#define FLOOR_ROUNDS 2000
#define FLOOR_WARMUP 200
#define FLOOR_BATCH 50             /* round trips per timed batch: the clock's tick is ~20 ns */
#define FLOOR_BUDGET_NS 20000000      /* stop early past this: a descheduled peer */
#define FLOOR_SPINS_BEFORE_YIELD 64
#define FLOOR_CLOCK_EVERY 1024u     /* waits this long look at the clock */
#define FLOOR_GIVE_UP_NS 1000000000   /* a side that waits a second for the other gives up */

struct floor_line {
    _Alignas(64) _Atomic uint64_t ping;
    _Alignas(64) _Atomic uint64_t pong;
    _Atomic int stop;
    unsigned spin_first;           /* spins before the first yield */
};

static void pin_self(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

/*
 * Wait until *w reaches want (or stop), spinning, then yielding to the process
 * on this CPU; on one CPU (spin_first 0) yielding at once: a spin there only
 * delays the peer. False past FLOOR_GIVE_UP_NS: a peer that died or never ran.
 */
static bool await(_Atomic uint64_t *w, uint64_t want, _Atomic int *stop, unsigned spin_first, int64_t give_up)
{
    for (unsigned spins = 0; atomic_load_explicit(w, memory_order_acquire) != want; spins++) {
        if (atomic_load_explicit(stop, memory_order_relaxed))
            return false;
        if (spins >= spin_first)
            sched_yield();
        else
            bench_cpu_relax();
        if (spins % FLOOR_CLOCK_EVERY == FLOOR_CLOCK_EVERY - 1 && bench_now_ns() > give_up)
            return false;
    }
    return true;
}

/* The peer process: answers every ping until told to stop or the parent is gone. */
static _Noreturn void echo(struct floor_line *l, int cpu)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin_self(cpu);
    int64_t give_up = bench_now_ns() + FLOOR_GIVE_UP_NS;
    for (uint64_t i = 1; await(&l->ping, i, &l->stop, l->spin_first, give_up); i++)
        atomic_store_explicit(&l->pong, i, memory_order_release);
    _exit(0);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

double floor_round_trip_ns(const int cpu[2])
{
    static int64_t rt[FLOOR_ROUNDS / FLOOR_BATCH];
    struct floor_line *line = mmap(NULL, sizeof *line, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (line == MAP_FAILED)
        return -1;
    line->spin_first = cpu[0] >= 0 && cpu[0] == cpu[1] ? 0 : FLOOR_SPINS_BEFORE_YIELD;
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    pin_self(cpu[0]);
    pid_t peer = fork();
    if (peer == 0)
        echo(line, cpu[1]);
    int n = 0;
    int64_t begin = bench_now_ns(), t0 = begin;
    for (uint64_t i = 1; peer > 0 && i <= FLOOR_ROUNDS + FLOOR_WARMUP; i++) {
        atomic_store_explicit(&line->ping, i, memory_order_release);
        if (!await(&line->pong, i, &line->stop, line->spin_first, begin + FLOOR_GIVE_UP_NS))
            break;
        if (i == FLOOR_WARMUP)
            t0 = bench_now_ns();
        if (i <= FLOOR_WARMUP || (i - FLOOR_WARMUP) % FLOOR_BATCH)
            continue;
        int64_t t1 = bench_now_ns();
        rt[n++] = t1 - t0;
        t0 = t1;
        if (t1 - begin > FLOOR_BUDGET_NS && n >= 5)
            break;
    }
    atomic_store(&line->stop, 1);
    if (peer > 0)
        waitpid(peer, NULL, 0);
    munmap(line, sizeof *line);
    sched_setaffinity(0, sizeof saved, &saved);
    if (n == 0)
        return -1;
    qsort(rt, (size_t)n, sizeof *rt, cmp_i64);
    return (double)rt[n / 2] / FLOOR_BATCH;
}

void floor_cpus(const int given[2], int out[2])
{
    if (given[0] >= 0) {
        out[0] = given[0];
        out[1] = given[1];
        return;
    }
    cpu_set_t set;
    out[0] = out[1] = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &set))
            out[found++] = c;
    if (out[1] < 0)
        out[1] = out[0];
}
