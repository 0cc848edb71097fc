/* SPDX-License-Identifier: MIT */
/* From bench figures to chart series and files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "bench.h"
#include "bench_plot.h"

void plot_latency(struct chart *c, const char *name, const struct hist *h)
{
    struct chart_series *s = chart_add(c, name);
    if (!s || !h->total)
        return;
    double most = log10((double)h->total);
    for (int k = 0; k <= 10 * (int)ceil(most) && k < CHART_POINTS; k++) {
        double nines = k / 10.0 > most ? most : k / 10.0;
        double x = pow(10, nines);
        chart_point(s, x, (double)hist_value_at(h, 1.0 - 1.0 / x) / 1e3, 0, 0);
        if (nines >= most)
            break;
    }
}

void plot_scale_point(struct chart_series *cs, double x, const struct series *s, double unit)
{
    struct side_stats st = series_stats(s, true);
    if (st.n)
        chart_point(cs, x, st.median / unit, st.min / unit, st.max / unit);
}

int plot_save(const char *bench, const char *path, const struct chart *charts, int n)
{
    if (svg_save(path, charts, n) == 0)
        return 0;
    fprintf(stderr, "orbit-bench %s: --plot %s: %s\n", bench, path, strerror(errno));
    return 1;
}

int hgrm_save(const char *bench, const char *dir, const char *name, const struct hist *h)
{
    if ((mkdir(dir, 0777) == 0 || errno == EEXIST) && hist_save_hgrm(h, dir, name) == 0)
        return 0;
    fprintf(stderr, "orbit-bench %s: --hist %s: %s: %s\n", bench, dir, name, strerror(errno));
    return 1;
}

/* The directory part of path ("." if none) is writable, and path is not a directory. */
void plot_check_path(const char *opt, const char *path, bool dir)
{
    char parent[4096];
    struct stat st;
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        parent[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    if (!path[0])
        cli_bad(BENCH_TOOL, opt, path, "empty");
    if (stat(path, &st) == 0 && (S_ISDIR(st.st_mode) != dir))
        cli_bad(BENCH_TOOL, opt, path, dir ? "exists and is not a directory" : "is a directory");
    if (access(parent, W_OK) != 0)
        cli_bad(BENCH_TOOL, opt, path, dir ? "its parent directory is not writable" : "its directory is not writable");
}
