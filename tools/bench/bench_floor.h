/* SPDX-License-Identifier: MIT */
/*
 * The floor: a busy-poll ping-pong of one cache line between two processes
 * pinned to the CPUs a bench uses, the round trip no shared-memory protocol
 * between those CPUs can beat. Measured before every pair, it tells how fast
 * the host is right now. With both on one CPU a waiting process yields at once,
 * and the figure is a hand-off between two processes through the scheduler,
 * address-space switch included (threads of one process skip it: on this
 * machine's VMs a quarter cheaper), as every transport's round trip pays it.
 */
#ifndef ORBIT_BENCH_FLOOR_H
#define ORBIT_BENCH_FLOOR_H

#include <stdbool.h>

/* The median round trip in ns, or -1 if the peer could not be started or did not
 * answer. cpu[i] < 0: side i is not pinned. Takes about 20 ms, at most a second. */
double floor_round_trip_ns(const int cpu[2]);

/* The CPUs the floor runs between: --cpus if given, else this process's first two
 * allowed CPUs (the same one twice if it may use only one). */
void floor_cpus(const int given[2], int out[2]);

#endif
