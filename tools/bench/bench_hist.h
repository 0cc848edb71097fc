/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench's latency histogram: every sample counted in log-linear buckets
 * of HdrHistogram's layout with 2048 sub-buckets (three significant digits:
 * a value is known within 1/1024 of itself), from 0 to 2^40 ns, plus the exact
 * count, sum, minimum and maximum. Written out as HdrHistogram's percentile
 * distribution text (.hgrm), which its plotter and tools read.
 */
#ifndef ORBIT_BENCH_HIST_H
#define ORBIT_BENCH_HIST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HIST_SUB_BUCKETS 2048
#define HIST_BUCKETS     31                                 /* bucket 0 below 2048, then 30 doublings */
#define HIST_SLOTS       (HIST_SUB_BUCKETS + (HIST_BUCKETS - 1) * (HIST_SUB_BUCKETS / 2))
#define HIST_MAX_VALUE   ((INT64_C(1) << 40) - 1)           /* larger samples count as this */

struct hist {
    uint64_t total;
    int64_t min, max;
    double sum, sum_sq;
    uint64_t count[HIST_SLOTS];
};

void hist_reset(struct hist *h);
void hist_record(struct hist *h, int64_t value);
void hist_add(struct hist *into, const struct hist *from);
/* The value at or below which a fraction p (0..1) of the samples lie, as HdrHistogram
 * reports it (the highest value its bucket stands for, never above the maximum); 0 if empty. */
int64_t hist_value_at(const struct hist *h, double p);
double hist_mean(const struct hist *h);
double hist_stddev(const struct hist *h);

/* The percentiles every latency report prints, in this order. */
#define HIST_NPCT 5
extern const double hist_pct[HIST_NPCT];          /* 0.50, 0.90, 0.99, 0.999, 0.9999 */
extern const char *const hist_pct_key[HIST_NPCT]; /* "p50", "p90", "p99", "p999", "p9999" */

/* HdrHistogram's outputPercentileDistribution text: values divided by unit (1000: µs
 * from ns), five reporting ticks per half distance, the #[Mean ...] footer. */
void hist_write_hgrm(const struct hist *h, double unit, FILE *out);
/* hist_write_hgrm into DIR/NAME.hgrm; 0, or -1 with errno set. */
int hist_save_hgrm(const struct hist *h, const char *dir, const char *name);

/* JSON, in ns: {"count":..,"min":..,"p50":..,"p90":..,"p99":..,"p999":..,"p9999":..,"max":..,"mean":..}
 * (64-bit values as strings, the mean a number). */
void hist_print_json(const struct hist *h, FILE *out);

#endif
