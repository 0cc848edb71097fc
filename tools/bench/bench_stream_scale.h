/* SPDX-License-Identifier: MIT */
#ifndef ORBIT_BENCH_STREAM_SCALE_H
#define ORBIT_BENCH_STREAM_SCALE_H
#include <stdbool.h>

struct stream_scale_opts {
    const char *fleet;
    int procs;                 /* 0: 1..CPUs */
    int rounds, pairs;
    bool json;
    const char *plot;          /* or NULL */
};

/* orbit-bench stream --procs N / --scale: returns the exit status. */
int bench_stream_scale(const struct stream_scale_opts *o);
#endif
