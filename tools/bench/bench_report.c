/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench report: runs a set of benches (each as its own orbit-bench process,
 * --plot into a scratch directory), then writes one self-contained HTML page: per
 * bench its command, its chart as inline SVG and its text report. No scripts, no
 * styles or fonts fetched: the page opens offline.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli.h"
#include "bench.h"
#include "bench_pair.h"
#include "bench_plot.h"
#include "bench_report.h"

#define SECTION_ARGS 16

struct section { const char *title; const char *args[SECTION_ARGS]; };

/* The benches of a report; quick: sizes for a smoke test, not for figures. */
static size_t plan(struct section *s, bool quick)
{
    size_t n = 0;
    s[n++] = (struct section){ "one-way wake and ping-pong latency",
                               { "wake", "--oneway", quick ? "20" : "500", "--rtt", quick ? "300" : "5000" } };
#ifdef ORBIT_WITH_STREAM
    s[n++] = (struct section){ "stream: throughput and 64-byte ping-pong",
                               { "stream", "--bytes", quick ? "2" : "64", "--rounds", quick ? "300" : "5000" } };
    s[n++] = (struct section){ "stream: ping-pong pairs at once", { "stream", "--scale", "--rounds",
                                                                    quick ? "500" : "20000" } };
#endif
#ifdef ORBIT_WITH_POOL
    s[n++] = (struct section){ "pool: reserve, accept, complete", { "pool", "--scale", "--ops",
                                                                    quick ? "20000" : "1000000" } };
#endif
#ifdef ORBIT_WITH_ADMISSION
    s[n++] = (struct section){ "admission: claim and release", { "admission", "--scale", "--seconds",
                                                                 quick ? "0.02" : "0.2" } };
#endif
#ifdef ORBIT_WITH_EXCHANGE
    s[n++] = (struct section){ "exchange: round trips, pairs at once", { "exchange", "--scale", "--bytes",
                                                                         quick ? "2M" : "128M" } };
#endif
    return n;
}

/* The section's full argument vector: orbit-bench, its args, --pairs N, --plot SVG. */
static void section_argv(const struct section *s, const char *pairs, const char *svg, const char **argv)
{
    int n = 0;
    argv[n++] = BENCH_TOOL;
    for (int i = 0; i < SECTION_ARGS && s->args[i]; i++)
        argv[n++] = s->args[i];
    argv[n++] = "--pairs";
    argv[n++] = pairs;
    argv[n++] = "--plot";
    argv[n++] = svg;
    argv[n] = NULL;
}

/* Run this program with argv, its stdout into text; its exit status, or -1. */
static int run_self(const char **argv, const char *text)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(text, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
            _exit(127);
        execv("/proc/self/exe", (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Copy path into out: escaped for HTML text, or raw past the SVG's XML declaration. */
static void copy_into(FILE *out, const char *path, bool escape)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        if (!escape && strncmp(line, "<?xml", 5) == 0)
            continue;
        for (const char *c = line; *c; c++) {
            if (escape && *c == '<') fputs("&lt;", out);
            else if (escape && *c == '>') fputs("&gt;", out);
            else if (escape && *c == '&') fputs("&amp;", out);
            else fputc(*c, out);
        }
    }
    if (f)
        fclose(f);
}

static void html_section(FILE *out, const struct section *s, const char **argv, int status, const char *svg,
                         const char *text)
{
    fprintf(out, "<h2>%s</h2>\n<p><code>", s->title);
    for (int i = 0; argv[i]; i++)
        if (strcmp(argv[i], "--plot") == 0)
            i++;
        else
            fprintf(out, "%s%s", i ? " " : "", argv[i]);
    fprintf(out, "</code>%s</p>\n<div>\n", status ? " <b>(failed)</b>" : "");
    if (status == 0)
        copy_into(out, svg, false);
    fputs("</div>\n<pre>", out);
    copy_into(out, text, true);
    fputs("</pre>\n", out);
}

struct report_opts { const char *out, *pairs; bool quick, json; };

static void parse(int argc, char **argv, struct report_opts *o)
{
    static const char help[] =
        "usage: orbit-bench report [--out FILE.html] [--pairs N] [--quick] [--json]\n"
        "  Runs wake, stream (and its --scale), pool --scale, admission --scale and exchange\n"
        "  --scale, each with --plot, and writes one self-contained HTML page: per bench its\n"
        "  command, its chart as inline SVG and its text report (no scripts, nothing fetched).\n"
        "  --out FILE   the page (default orbit-bench-report.html)\n"
        "  --pairs N    pairs per comparison, passed to every bench (default 9)\n"
        "  --quick      small sizes: checks the page, its figures mean little\n"
        "  --json       one JSON object on stdout: the page and each bench's exit status\n";
    static const struct option opts[] = { { "out", required_argument, 0, 'o' },
                                          { "pairs", required_argument, 0, 'n' },
                                          { "quick", no_argument, 0, 'q' }, { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' },
                                          { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    *o = (struct report_opts){ .out = "orbit-bench-report.html", .pairs = "9" };
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":o:n:qjhV", opts, NULL)) != -1;) {
        switch (c) {
        case 'o': plot_check_path("--out", optarg, false); o->out = optarg; break;
        case 'n': pairs_arg("--pairs", optarg); o->pairs = optarg; break;
        case 'q': o->quick = true; break;
        case 'j': o->json = true; break;
        case 'h': fputs(help, stdout); exit(0);
        case 'V': cli_version(BENCH_TOOL); exit(0);
        default: cli_getopt_error(BENCH_TOOL, c, optopt, argv[optind - 1]);
        }
    }
    bench_no_operands(argc, argv);
}

/* Run every section into dir and write the page; failed counts sections that failed. */
static int write_page(const struct report_opts *o, const char *dir, int *failed)
{
    static struct section s[8];
    size_t n = plan(s, o->quick);
    FILE *out = fopen(o->out, "w");
    if (!out)
        return -1;
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>orbit-bench report</title></head>\n"
          "<body style=\"font-family:sans-serif;max-width:1000px\">\n<h1>orbit-bench report</h1>\n"
          "<p>Every ratio is the median of per-pair ratios, [min-max] its spread; each report names its host "
          "and the busy-poll floor taken before each pair (orbit-bench(1)).</p>\n", out);
    for (size_t i = 0; i < n; i++) {
        char svg[4200], text[4200];
        const char *argv[SECTION_ARGS + 8];
        snprintf(svg, sizeof svg, "%s/%zu.svg", dir, i);
        snprintf(text, sizeof text, "%s/%zu.txt", dir, i);
        section_argv(&s[i], o->pairs, svg, argv);
        int status = run_self(argv, text);
        *failed += status != 0;
        html_section(out, &s[i], argv, status, svg, text);
        if (o->json)
            printf("%s{\"bench\":\"%s\",\"exit\":%d}", i ? "," : "", s[i].args[0], status);
        unlink(svg);
        unlink(text);
    }
    fputs("</body></html>\n", out);
    return fclose(out) == 0 ? 0 : -1;
}

int bench_report(int argc, char **argv)
{
    struct report_opts o;
    parse(argc, argv, &o);
    char dir[] = "/tmp/orbit-bench-report-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "orbit-bench report: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int failed = 0;
    if (o.json) {
        printf("{\"bench\":\"report\",\"out\":");
        tool_json_str(stdout, o.out);
        printf(",\"sections\":[");
    }
    int rc = write_page(&o, dir, &failed);
    rmdir(dir);
    if (o.json)
        printf("],\"failed\":%d}\n", failed);
    if (rc != 0) {
        fprintf(stderr, "orbit-bench report: %s: %s\n", o.out, strerror(errno));
        return 1;
    }
    if (!o.json)
        printf("orbit-bench report: %s written, %d of its benches failed\n", o.out, failed);
    return failed ? 1 : 0;
}
