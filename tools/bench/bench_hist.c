/* SPDX-License-Identifier: MIT */
/* orbit-bench's log-linear latency histogram and its .hgrm writer. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "bench_hist.h"

#define HALF (HIST_SUB_BUCKETS / 2)

const double hist_pct[HIST_NPCT] = { 0.50, 0.90, 0.99, 0.999, 0.9999 };
const char *const hist_pct_key[HIST_NPCT] = { "p50", "p90", "p99", "p999", "p9999" };

/* Below 2048 a slot per value; above, 1024 slots per power of two. */
static size_t slot_of(int64_t v)
{
    if (v < HIST_SUB_BUCKETS)
        return (size_t)v;
    int msb = 63 - __builtin_clzll((unsigned long long)v);
    int shift = msb - 10;
    return (size_t)HIST_SUB_BUCKETS + (size_t)(shift - 1) * HALF + (size_t)((v >> shift) - HALF);
}

static int64_t slot_highest(size_t i)
{
    if (i < HIST_SUB_BUCKETS)
        return (int64_t)i;
    size_t k = i - HIST_SUB_BUCKETS;
    int shift = (int)(k / HALF) + 1;
    int64_t low = (int64_t)(k % HALF + HALF) << shift;
    return low + (INT64_C(1) << shift) - 1;
}

void hist_reset(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = INT64_MAX;
}

void hist_record(struct hist *h, int64_t value)
{
    if (value < 0)
        value = 0;
    if (value > HIST_MAX_VALUE)
        value = HIST_MAX_VALUE;
    h->count[slot_of(value)]++;
    h->total++;
    h->sum += (double)value;
    h->sum_sq += (double)value * (double)value;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
}

void hist_add(struct hist *into, const struct hist *from)
{
    for (size_t i = 0; i < HIST_SLOTS; i++)
        into->count[i] += from->count[i];
    into->total += from->total;
    into->sum += from->sum;
    into->sum_sq += from->sum_sq;
    if (from->total && from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
}

static int64_t capped(const struct hist *h, int64_t v)
{
    return v > h->max ? h->max : v;
}

int64_t hist_value_at(const struct hist *h, double p)
{
    if (!h->total)
        return 0;
    double want = ceil(p * (double)h->total);
    uint64_t need = want < 1 ? 1 : (uint64_t)want, cum = 0;
    for (size_t i = 0; i < HIST_SLOTS; i++) {
        cum += h->count[i];
        if (cum >= need)
            return capped(h, slot_highest(i));
    }
    return h->max;
}

double hist_mean(const struct hist *h)
{
    return h->total ? h->sum / (double)h->total : 0;
}

double hist_stddev(const struct hist *h)
{
    if (!h->total)
        return 0;
    double m = hist_mean(h), var = h->sum_sq / (double)h->total - m * m;
    return var > 0 ? sqrt(var) : 0;
}

/* HdrHistogram's PercentileIterator step with five ticks per half distance to 100%. */
static double next_level(double level)
{
    double halvings = floor(log(100.0 / (100.0 - level)) / log(2.0));
    double ticks = 5.0 * pow(2.0, halvings + 1);
    return level + 100.0 / ticks;
}

static void hgrm_line(FILE *out, int64_t v, double unit, double level, uint64_t cum, bool last)
{
    double p = level / 100.0;
    if (last)
        fprintf(out, "%12.3f %2.12f %10" PRIu64 "\n", (double)v / unit, p, cum);
    else
        fprintf(out, "%12.3f %2.12f %10" PRIu64 " %14.2f\n", (double)v / unit, p, cum, 1.0 / (1.0 - p));
}

void hist_write_hgrm(const struct hist *h, double unit, FILE *out)
{
    fprintf(out, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
    uint64_t cum = 0;
    double level = 0;
    for (size_t i = 0; i < HIST_SLOTS && h->total; i++) {
        if (!h->count[i])
            continue;
        cum += h->count[i];
        int64_t v = capped(h, slot_highest(i));
        while (100.0 * (double)cum / (double)h->total >= level) {
            hgrm_line(out, v, unit, level, cum, false);
            level = next_level(level);
            if (cum == h->total) {
                hgrm_line(out, v, unit, 100.0, cum, true);
                break;
            }
        }
    }
    fprintf(out, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", hist_mean(h) / unit, hist_stddev(h) / unit);
    fprintf(out, "#[Max     = %12.3f, Total count    = %12" PRIu64 "]\n", (double)h->max / unit, h->total);
    fprintf(out, "#[Buckets = %12d, SubBuckets     = %12d]\n", HIST_BUCKETS, HIST_SUB_BUCKETS);
}

int hist_save_hgrm(const struct hist *h, const char *dir, const char *name)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.hgrm", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    hist_write_hgrm(h, 1000.0, f);
    return fclose(f) == 0 ? 0 : -1;
}

void hist_print_json(const struct hist *h, FILE *out)
{
    fprintf(out, "{\"count\":" CLI_JSON_U64 ",\"min\":" CLI_JSON_I64, h->total, h->total ? h->min : 0);
    for (int k = 0; k < HIST_NPCT; k++)
        fprintf(out, ",\"%s\":" CLI_JSON_I64, hist_pct_key[k], hist_value_at(h, hist_pct[k]));
    fprintf(out, ",\"max\":" CLI_JSON_I64 ",\"mean\":%.1f}", h->max, hist_mean(h));
}
