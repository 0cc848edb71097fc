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

struct orb_deadline orb_deadline_in(int timeout_ms)
{
    /* Below -1 is malformed (callers refuse it): never forever, already passed. */
    struct orb_deadline d = { 0, timeout_ms == -1 };
    if (timeout_ms >= 0)
        d.at_ns = orb_now_ns() + (int64_t)timeout_ms * 1000000;
    return d;
}

bool orb_deadline_passed(const struct orb_deadline *d)
{
    return !d->forever && orb_now_ns() >= d->at_ns;
}

void orb_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
