/* SPDX-License-Identifier: MIT */
/*
 * Where the two sides of a latency bench ran. Each side samples sched_getcpu()
 * at the same iteration numbers into a log in shared memory; the summary says
 * which CPUs each side used, how often it moved, and in what fraction of the
 * samples both sides were on one CPU (a ping-pong then runs at the scheduler's
 * pace, not the cache's).
 */
#ifndef ORBIT_BENCH_PLACE_H
#define ORBIT_BENCH_PLACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PLACE_SAMPLES 1024
#define PLACE_EVERY   64           /* sample on every 64th iteration */

struct place_log { int n; int16_t cpu[PLACE_SAMPLES]; };

/* --cpus A,B: both CPUs in this process's affinity mask, else a one-line error (exit 2). */
void bench_check_cpus(const char *opt, const int cpu[2]);
/* Pin the calling process (every thread made later) to cpu; -1: leave it. */
void place_pin(int cpu);
/* On iteration i: record the CPU if i is a sampling point. */
static inline bool place_due(long i) { return i % PLACE_EVERY == 0; }
void place_sample(struct place_log *l);

/* Two logs (A's, B's) in memory shared with children forked later; NULL on failure. */
struct place_log *place_logs_map(void);
void place_logs_unmap(struct place_log *l);

/* Over all pairs of a transport: CPUs each side used (a mask of CPUs 0..63), moves, sharing. */
struct place_summary {
    int pinned[2];                 /* --cpus, or -1 */
    uint64_t used[2];
    long moves[2], samples, shared;
};

void place_begin(struct place_summary *s, const int pinned[2]);
void place_add(struct place_summary *s, const struct place_log *a, const struct place_log *b);
/* "A 0 B 1, moved 0|0" or "A 0-1 B 0-1, moved 3|5, same CPU 12%" */
const char *place_text(const struct place_summary *s, char *buf, size_t len);
/* {"pinned":[a,b],"a_cpus":"0","b_cpus":"1","a_moves":0,"b_moves":0,"samples":n,"same_cpu_fraction":f} */
void place_print_json(const struct place_summary *s, FILE *out);

#endif
