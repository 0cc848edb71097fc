/* SPDX-License-Identifier: MIT */
/*
 * Paired measurement. A comparison runs orbit and its baseline back to back, N
 * times ("pairs"), the order alternating; each pair gives a ratio, and the report
 * is the median of those ratios with their min and max, beside each side's median.
 * Host speed moves both sides of a pair alike, so the ratio holds still where the
 * absolute figures do not. Before every pair the floor (bench_floor.h) is taken;
 * a pair whose floor is more than twice or less than half the run's median floor
 * ran in another host state and is flagged.
 */
#ifndef ORBIT_BENCH_PAIR_H
#define ORBIT_BENCH_PAIR_H

#include <stdbool.h>
#include <stdio.h>
#include "bench_host.h"

#define PAIRS_MAX 100
#define PAIRS_DEFAULT 9

/* One side's figure in every pair, and whether the pair produced it. */
struct series { int n; double v[PAIRS_MAX]; bool ok[PAIRS_MAX]; };

struct side_stats { int n; double median, min, max, best; };
struct ratio_stats { int n; double median, min, max, best_of; };

/* A rate or a latency: v <= 0 marks a pair where the side failed or did not run. */
void series_put(struct series *s, int pair, double v);
/* A count (parks per ring-ful): 0 is a figure, v < 0 a failure. */
void series_put_count(struct series *s, int pair, double v);
/* higher_better: "best" is the largest value (a rate), else the smallest (a latency). */
struct side_stats series_stats(const struct series *s, bool higher_better);
/* a[i] / b[i] over the pairs where both ran; best_of is the ratio of the two sides' bests. */
struct ratio_stats ratio_stats(const struct series *a, const struct series *b, bool higher_better);

/* The run: host, pairs, the CPUs the floor is taken between, and each pair's floor. */
struct bench_run {
    struct bench_host host;
    int pairs, floor_cpu[2];
    struct series floor_ns;
};

/* Probe the host, choose the floor's CPUs (--cpus or the first two allowed). */
void run_begin(struct bench_run *r, int pairs, const int cpus[2]);
void run_floor(struct bench_run *r, int pair);     /* just before pair `pair` */
void run_end(struct bench_run *r);
bool run_flagged(const struct bench_run *r, int pair);
int run_flagged_count(const struct bench_run *r);
/* Pair i runs orbit first when even, its baseline first when odd. */
static inline bool run_orbit_first(int pair) { return pair % 2 == 0; }

/* The report's head: the host, the floor, and how to read the ratios. */
void run_print_text(const struct bench_run *r, FILE *out);
/* "host":{...},"pairs":N,"floor":{...} (no leading or trailing comma) */
void run_print_json(const struct bench_run *r, FILE *out);

/* "1.23x [0.98-1.41]": a paired ratio with its spread; "n/a" when no pair ran both. */
const char *ratio_text(const struct ratio_stats *s, char *buf, size_t len);
/* {"median":..,"min":..,"max":..,"pairs":n,"best_of":..} */
void ratio_print_json(const struct ratio_stats *s, FILE *out);
/* {"median":..,"min":..,"max":..,"best":..,"per_pair":[...]} */
void series_print_json(const struct series *s, bool higher_better, FILE *out);

/* --pairs N: 1..PAIRS_MAX, or a one-line error (exit 2). */
int pairs_arg(const char *opt, const char *arg);

#endif
