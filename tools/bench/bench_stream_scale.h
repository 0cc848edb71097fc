/* SPDX-License-Identifier: MIT */
/* orbit-bench stream --procs / --scale: concurrent ping-pong pairs. */
#ifndef ORBIT_BENCH_STREAM_SCALE_H
#define ORBIT_BENCH_STREAM_SCALE_H
#include <stdbool.h>
/* procs 0: sweep 1..CPUs pairs. Prints the table or JSON; returns the exit code. */
int bench_stream_scale(const char *fleet, int procs, int rounds, bool json);
#endif
