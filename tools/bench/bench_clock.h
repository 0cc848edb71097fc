/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench's clocks and spin hint: the same clocks liborbit reads, so figures
 * stay comparable with the library's own timestamps.
 */
#ifndef ORBIT_BENCH_CLOCK_H
#define ORBIT_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: every latency and elapsed time. */
static inline int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t bench_ms_of(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000u + (uint64_t)ts->tv_nsec / 1000000u;
}

/* CLOCK_REALTIME in ms. */
static inline uint64_t bench_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return bench_ms_of(&ts);
}

/* CLOCK_REALTIME_COARSE in ms: a tick behind, much cheaper (the pool stamps with it). */
static inline uint64_t bench_wall_ms_coarse(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return bench_ms_of(&ts);
}

/* The CPU's spin-wait hint, as liborbit's own spin loops use it. */
static inline void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
