/* SPDX-License-Identifier: MIT */
/* Clocks, deadlines and the spin pause: the floor under locks and waits (wait.h declares them). */
#include <time.h>
#include "wait.h"

int64_t orb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t orb_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t orb_next_epoch(uint64_t previous)
{
    uint64_t now = orb_wall_ms();
    return now > previous ? now : previous + 1;
}

void orb_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
