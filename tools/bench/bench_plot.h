/* SPDX-License-Identifier: MIT */
/* Charts of bench figures: latency percentile curves from histograms, scale curves from pairs. */
#ifndef ORBIT_BENCH_PLOT_H
#define ORBIT_BENCH_PLOT_H

#include <stdbool.h>
#include "bench_hist.h"
#include "bench_pair.h"
#include "bench_svg.h"

/* A series of h's percentiles in µs, 0% up to what h's count can resolve. */
void plot_latency(struct chart *c, const char *name, const struct hist *h);
/* One point of a scale curve: x, and the median of s with whiskers at its min and max. */
void plot_scale_point(struct chart_series *cs, double x, const struct series *s, double unit);
/* svg_save, or a message on stderr naming the file: 0 or 1 (an exit status). */
int plot_save(const char *bench, const char *path, const struct chart *charts, int n);
/* mkdir DIR unless it exists, then hist_save_hgrm: 0, or 1 with a message on stderr. */
int hgrm_save(const char *bench, const char *dir, const char *name, const struct hist *h);

/* --plot FILE, --hist DIR (dir): refused with a one-line error (exit 2) before anything runs
 * when it cannot be written. */
void plot_check_path(const char *opt, const char *path, bool dir);

#endif
