/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench's charts: line charts as self-contained SVG (no script, no fonts
 * fetched, nothing from the network), one or more panels stacked in one file.
 * A scale chart has linear axes and whiskers from each point's min to its max;
 * a latency chart has a log latency axis against percentiles spaced as
 * HdrHistogram plots them (0%, 90%, 99%, 99.9%, ... evenly).
 */
#ifndef ORBIT_BENCH_SVG_H
#define ORBIT_BENCH_SVG_H

#include <stdbool.h>
#include <stdio.h>

#define CHART_SERIES 8
#define CHART_POINTS 128

struct chart_series {
    char name[48];
    int n;
    double x[CHART_POINTS], y[CHART_POINTS], lo[CHART_POINTS], hi[CHART_POINTS];   /* lo, hi: 0 = none */
};

enum chart_axes { CHART_LINEAR, CHART_PERCENTILE_LOG };   /* scale curves; latency percentile curves */

struct chart {
    char title[160], x_label[64], y_label[64];
    enum chart_axes axes;
    int nseries;
    struct chart_series s[CHART_SERIES];
};

/* A new series in c (NULL when full). */
struct chart_series *chart_add(struct chart *c, const char *name);
void chart_point(struct chart_series *s, double x, double y, double lo, double hi);
/* Write the charts stacked into path as one SVG; 0, or -1 with errno set. */
int svg_save(const char *path, const struct chart *charts, int n);
void svg_write(FILE *out, const struct chart *charts, int n);

#endif
