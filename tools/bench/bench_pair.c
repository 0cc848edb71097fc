/* SPDX-License-Identifier: MIT */
/* Paired figures: medians of per-pair ratios, their spread, and the floor per pair. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "bench.h"
#include "bench_floor.h"
#include "bench_pair.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void put(struct series *s, int pair, double v, bool ok)
{
    if (pair < 0 || pair >= PAIRS_MAX)
        return;
    s->v[pair] = ok ? v : 0;
    s->ok[pair] = ok;
    if (pair + 1 > s->n)
        s->n = pair + 1;
}

void series_put(struct series *s, int pair, double v)
{
    put(s, pair, v, v > 0);
}

void series_put_count(struct series *s, int pair, double v)
{
    put(s, pair, v, v >= 0);
}

struct side_stats series_stats(const struct series *s, bool higher_better)
{
    double v[PAIRS_MAX];
    struct side_stats st = { 0, 0, 0, 0, 0 };
    for (int i = 0; i < s->n; i++)
        if (s->ok[i])
            v[st.n++] = s->v[i];
    if (!st.n)
        return st;
    st.median = median_of(v, st.n);
    st.min = v[0];
    st.max = v[st.n - 1];
    st.best = higher_better ? st.max : st.min;
    return st;
}

struct ratio_stats ratio_stats(const struct series *a, const struct series *b, bool higher_better)
{
    double v[PAIRS_MAX];
    struct ratio_stats st = { 0, 0, 0, 0, 0 };
    int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        if (a->ok[i] && b->ok[i] && b->v[i] > 0)
            v[st.n++] = a->v[i] / b->v[i];
    if (!st.n)
        return st;
    st.median = median_of(v, st.n);
    st.min = v[0];
    st.max = v[st.n - 1];
    struct side_stats sa = series_stats(a, higher_better), sb = series_stats(b, higher_better);
    st.best_of = sa.best > 0 && sb.best > 0 ? sa.best / sb.best : 0;
    return st;
}

void run_begin(struct bench_run *r, int pairs, const int cpus[2])
{
    memset(r, 0, sizeof *r);
    host_probe(&r->host);
    r->pairs = pairs;
    floor_cpus(cpus, r->floor_cpu);
}

void run_floor(struct bench_run *r, int pair)
{
    series_put(&r->floor_ns, pair, floor_round_trip_ns(r->floor_cpu));
}

void run_end(struct bench_run *r)
{
    host_finish(&r->host);
}

bool run_flagged(const struct bench_run *r, int pair)
{
    struct side_stats f = series_stats(&r->floor_ns, false);
    double v = pair < r->floor_ns.n ? r->floor_ns.v[pair] : 0;
    return f.n && v > 0 && (v > 2 * f.median || v < f.median / 2);
}

int run_flagged_count(const struct bench_run *r)
{
    int n = 0;
    for (int i = 0; i < r->floor_ns.n; i++)
        n += run_flagged(r, i);
    return n;
}

static const char *floor_kind(const struct bench_run *r)
{
    return r->floor_cpu[0] == r->floor_cpu[1] ? "sched_yield hand-off on one CPU"
                                              : "busy-poll cache-line round trip";
}

void run_print_text(const struct bench_run *r, FILE *out)
{
    host_print_text(&r->host, out);
    struct side_stats f = series_stats(&r->floor_ns, false);
    fprintf(out, "floor: %s, CPU %d <-> CPU %d, taken before each of %d pairs: median %.0f ns, min %.0f, max %.0f",
            floor_kind(r), r->floor_cpu[0], r->floor_cpu[1], r->pairs, f.median, f.min, f.max);
    int flagged = run_flagged_count(r);
    if (flagged)
        fprintf(out, "; %d pair%s flagged (floor beyond 2x of the median: another host state)", flagged,
                flagged > 1 ? "s" : "");
    fprintf(out, "\nratios: median of the %d per-pair ratios [min-max]; each pair ran both sides back to back\n\n",
            r->pairs);
}

void run_print_json(const struct bench_run *r, FILE *out)
{
    host_print_json(&r->host, out);
    struct side_stats f = series_stats(&r->floor_ns, false);
    fprintf(out, ",\"pairs\":%d,\"floor\":{\"kind\":\"%s\",\"cpus\":[%d,%d],\"median_ns\":%.1f,\"min_ns\":%.1f,"
            "\"max_ns\":%.1f,\"per_pair_ns\":[", r->pairs,
            r->floor_cpu[0] == r->floor_cpu[1] ? "yield_handoff" : "busy_poll",
            r->floor_cpu[0], r->floor_cpu[1], f.median, f.min, f.max);
    for (int i = 0; i < r->floor_ns.n; i++)
        fprintf(out, "%s%.1f", i ? "," : "", r->floor_ns.v[i]);
    fputs("],\"flagged_pairs\":[", out);
    for (int i = 0, n = 0; i < r->floor_ns.n; i++)
        if (run_flagged(r, i))
            fprintf(out, "%s%d", n++ ? "," : "", i);
    fputs("]}", out);
}

const char *ratio_text(const struct ratio_stats *s, char *buf, size_t len)
{
    if (!s->n)
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.2fx [%.2f-%.2f]", s->median, s->min, s->max);
    return buf;
}

void ratio_print_json(const struct ratio_stats *s, FILE *out)
{
    fprintf(out, "{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g,\"pairs\":%d,\"best_of\":%.6g}", s->median, s->min,
            s->max, s->n, s->best_of);
}

void series_print_json(const struct series *s, bool higher_better, FILE *out)
{
    struct side_stats st = series_stats(s, higher_better);
    fprintf(out, "{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g,\"best\":%.6g,\"per_pair\":[", st.median, st.min,
            st.max, st.best);
    for (int i = 0; i < s->n; i++)
        s->ok[i] ? fprintf(out, "%s%.6g", i ? "," : "", s->v[i]) : fprintf(out, "%snull", i ? "," : "");
    fputs("]}", out);
}

int pairs_arg(const char *opt, const char *arg)
{
    return cli_int(BENCH_TOOL, opt, arg, 1, PAIRS_MAX);
}
