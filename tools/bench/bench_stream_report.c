/* SPDX-License-Identifier: MIT */
/* orbit-bench stream's report: text, JSON, --hist files and the --plot chart. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <orbit/stream.h>
#include "cli.h"
#include "bench_plot.h"
#include "bench_stream.h"

/* ---- output ---------------------------------------------------------------------- */

static const char *size_text(size_t v, char *buf, size_t len)
{
    if (v >= (1u << 20))
        snprintf(buf, len, "%zu MiB", v >> 20);
    else
        snprintf(buf, len, "%zu KiB", v >> 10);
    return buf;
}

static void print_baselines(const struct bench *b)
{
    char c1[32];
    printf("baselines, GB/s median of pairs");
    for (int k = 0; k < ALT_COUNT; k++)
        printf("%12s", alt_name[k]);
    printf("\n");
    for (int c = 0; c < NCHUNK; c++) {
        printf("  chunk %-24s", size_text(chunk_sizes[c], c1, sizeof c1));
        for (int k = 0; k < ALT_COUNT; k++)
            printf("%12.2f", series_stats(&b->alt[c][k], true).median);
        printf("\n");
    }
}

static void print_orbit_cell(const struct bench *b, int m, int r, int c)
{
    char c1[32], c2[32], rt[48];
    const struct orbit_cell *o = &b->orbit[c][r][m];
    printf("  %-9s %8s %8s", m ? "io_uring" : "blocking", size_text(chunk_sizes[c], c1, sizeof c1),
           size_text(ring_sizes[r], c2, sizeof c2));
    if (!o->ok) {
        printf("   (failed or not available)\n");
        return;
    }
    struct side_stats g = series_stats(&o->gbps, true), p = series_stats(&o->parks, false);
    printf(" %7.2f %8.3f", g.median, p.median);
    for (int k = 0; k < ALT_COUNT; k++) {
        struct ratio_stats rs = ratio_stats(&o->gbps, &b->alt[c][k], true);
        printf(" %-19s", ratio_text(&rs, rt, sizeof rt));
    }
    printf("\n");
}

static void print_pingpong(const struct bench *b)
{
    char where[96], r1[48], r2[48];
    printf("\n64-byte ping-pong round trip (us), every sample of every pair\n  %-14s %8s %8s %8s %8s %8s %9s"
           "  placement\n", "transport", "p50", "p90", "p99", "p99.9", "p99.99", "max");
    for (int k = 0; k < PP_COUNT; k++) {
        const struct pp_figures *f = &b->pp[k];
        if (!f->ok) {
            printf("  %-14s (failed)\n", pp_name[k]);
            continue;
        }
        printf("  %-14s", pp_name[k]);
        for (int p = 0; p < HIST_NPCT; p++)
            printf(" %8.2f", (double)hist_value_at(&f->rtt, hist_pct[p]) / 1e3);
        printf(" %9.2f  %s\n", (double)f->rtt.max / 1e3, place_text(&f->where, where, sizeof where));
    }
    printf("paired, per pair    p50 us: median [min-max]   it/orbit, p50          it/floor, p50\n");
    for (int k = 0; k < PP_COUNT; k++) {
        struct side_stats s = series_stats(&b->pp[k].p50, false);
        struct ratio_stats vs = ratio_stats(&b->pp[k].p50, &b->pp[PP_ORBIT].p50, false);
        struct ratio_stats fl = ratio_stats(&b->pp[k].p50, &b->run.floor_ns, false);
        printf("  %-14s %8.2f [%.2f-%.2f]        %-22s %s\n", pp_name[k], s.median / 1e3, s.min / 1e3,
               s.max / 1e3, ratio_text(&vs, r1, sizeof r1), ratio_text(&fl, r2, sizeof r2));
    }
}

void bs_print_text(const struct bench *b)
{
    printf("orbit-bench stream: %d pairs, %" PRIu64 " MiB one way per throughput run, %d ping-pong round trips per "
           "transport and pair, writer and reader in two processes, spin %u ns", b->pairs, b->bytes >> 20,
           b->rounds, orbit_spin_ns());
    if (b->cpu[0] >= 0)
        printf(", reader on CPU %d, writer on CPU %d", b->cpu[0], b->cpu[1]);
    printf("\n");
    run_print_text(&b->run, stdout);
    print_baselines(b);
    printf("\norbit stream  chunk     ring    GB/s  parks/    x pipe              x pipe 1M           "
           "x socketpair        x memcpy\n%36s\n", "ring-ful");
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING; r++)
            for (int c = 0; c < NCHUNK && b->modes[m]; c++)
                print_orbit_cell(b, m, r, c);
    print_pingpong(b);
}

static void print_orbit_json(const struct bench *b, int m, int r, int c, bool comma)
{
    const struct orbit_cell *o = &b->orbit[c][r][m];
    printf("%s{\"mode\":\"%s\",\"chunk\":" CLI_JSON_SIZE ",\"ring\":%u,\"ok\":%s,\"gbps\":", comma ? "," : "",
           m ? "io_uring" : "blocking", chunk_sizes[c], ring_sizes[r], o->ok ? "true" : "false");
    series_print_json(&o->gbps, true, stdout);
    printf(",\"parks_per_ringful\":");
    series_print_json(&o->parks, false, stdout);
    printf(",\"ratio\":{");
    for (int k = 0; k < ALT_COUNT; k++) {
        struct ratio_stats rs = ratio_stats(&o->gbps, &b->alt[c][k], true);
        printf("%s\"%s\":", k ? "," : "", alt_key[k]);
        ratio_print_json(&rs, stdout);
    }
    printf("}}");
}

static void print_pingpong_json(const struct bench *b)
{
    printf(",\"pingpong_64\":{\"rounds_per_pair\":%d", b->rounds);
    for (int k = 0; k < PP_COUNT; k++) {
        printf(",\"%s\":{\"ok\":%s,\"rtt_ns\":", pp_key[k], b->pp[k].ok ? "true" : "false");
        hist_print_json(&b->pp[k].rtt, stdout);
        printf(",\"p50_ns\":");
        series_print_json(&b->pp[k].p50, false, stdout);
        printf(",\"placement\":");
        place_print_json(&b->pp[k].where, stdout);
        struct ratio_stats fl = ratio_stats(&b->pp[k].p50, &b->run.floor_ns, false);
        printf(",\"p50_over_floor\":");
        ratio_print_json(&fl, stdout);
        printf("}");
    }
    for (int k = PP_PIPE; k < PP_COUNT; k++) {
        struct ratio_stats vs = ratio_stats(&b->pp[k].p50, &b->pp[PP_ORBIT].p50, false);
        printf(",\"orbit_p50_speedup_vs_%s\":", pp_key[k]);
        ratio_print_json(&vs, stdout);
    }
    printf("}");
}

void bs_print_json(const struct bench *b)
{
    printf("{\"bench\":\"stream\",");
    run_print_json(&b->run, stdout);
    printf(",\"bytes_per_run\":" CLI_JSON_U64 ",\"spin_ns\":%u,\"cpus\":[%d,%d],\"baselines\":[", b->bytes,
           orbit_spin_ns(), b->cpu[0], b->cpu[1]);
    for (int c = 0; c < NCHUNK; c++) {
        printf("%s{\"chunk\":" CLI_JSON_SIZE, c ? "," : "", chunk_sizes[c]);
        for (int k = 0; k < ALT_COUNT; k++) {
            printf(",\"%s_gbps\":", alt_key[k]);
            series_print_json(&b->alt[c][k], true, stdout);
        }
        printf("}");
    }
    printf("],\"orbit\":[");
    bool first = true;
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < NRING; r++)
            for (int c = 0; c < NCHUNK && b->modes[m]; c++, first = false)
                print_orbit_json(b, m, r, c, !first);
    printf("]");
    print_pingpong_json(b);
    printf("}\n");
}

int bs_write_outputs(const struct bench *b)
{
    int rc = 0;
    char name[64];
    for (int k = 0; b->hist_dir && k < PP_COUNT; k++) {
        snprintf(name, sizeof name, "stream-pingpong-%s", pp_key[k]);
        if (b->pp[k].ok)
            rc |= hgrm_save("stream", b->hist_dir, name, &b->pp[k].rtt);
    }
    if (!b->plot)
        return rc;
    static struct chart ch;
    memset(&ch, 0, sizeof ch);
    snprintf(ch.title, sizeof ch.title, "orbit-bench stream: 64-byte ping-pong round trip, 2 processes");
    snprintf(ch.x_label, sizeof ch.x_label, "percentile");
    snprintf(ch.y_label, sizeof ch.y_label, "latency (us, log)");
    ch.axes = CHART_PERCENTILE_LOG;
    for (int k = 0; k < PP_COUNT; k++)
        if (b->pp[k].ok)
            plot_latency(&ch, pp_name[k], &b->pp[k].rtt);
    return rc | plot_save("stream", b->plot, &ch, 1);
}
