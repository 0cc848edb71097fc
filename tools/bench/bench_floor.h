/* SPDX-License-Identifier: MIT */
/*
 * The floor: a busy-poll ping-pong of one cache line between two threads pinned
 * to the CPUs a bench uses, the round trip no shared-memory protocol between
 * those CPUs can beat. Measured before every pair, it tells how fast the host is
 * right now. With both threads on one CPU a waiting thread yields after a short
 * spin, and the figure is a hand-off between two threads through the scheduler.
 */
#ifndef ORBIT_BENCH_FLOOR_H
#define ORBIT_BENCH_FLOOR_H

#include <stdbool.h>

/* The median round trip in ns, or -1 if the threads could not be started. cpu[i] < 0:
 * thread i is not pinned. Takes at most about 20 ms. */
double floor_round_trip_ns(const int cpu[2]);

/* The CPUs the floor runs between: --cpus if given, else this process's first two
 * allowed CPUs (the same one twice if it may use only one). */
void floor_cpus(const int given[2], int out[2]);

#endif
