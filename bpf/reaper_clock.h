/* SPDX-License-Identifier: MIT */
/* The reaper's one clock: every due time, exit and detection time is CLOCK_MONOTONIC in ns. */
#ifndef ORB_REAPER_CLOCK_H
#define ORB_REAPER_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, as bpf_ktime_get_ns counts it too. */
static inline uint64_t rp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
