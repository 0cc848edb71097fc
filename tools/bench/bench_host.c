/* SPDX-License-Identifier: MIT */
/* What orbit-bench reports about the machine it ran on. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "bench.h"
#include "bench_host.h"

/* The value after "key<spaces>:" of the first matching line of path, trimmed. */
static void field_of(const char *path, const char *key, char *out, size_t len)
{
    char line[512];
    size_t klen = strlen(key);
    FILE *f = fopen(path, "r");
    snprintf(out, len, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 || !strchr(line, ':'))
            continue;
        char *v = strchr(line, ':') + 1;
        v += strspn(v, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, len, "%s", v);
        break;
    }
    if (f)
        fclose(f);
}

static long number_of(const char *path, const char *key)
{
    char v[64];
    field_of(path, key, v, sizeof v);
    return strcmp(v, "unknown") ? strtol(v, NULL, 10) : -1;
}

/* The CPUs in set as a list of ranges, "0-3,6". */
static void cpu_list(const cpu_set_t *set, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
            end++;
        int n = end > c ? snprintf(out + used, len - used, "%s%d-%d", used ? "," : "", c, end)
                        : snprintf(out + used, len - used, "%s%d", used ? "," : "", c);
        used += n > 0 ? (size_t)n : 0;
        c = end;
    }
}

static void load_now(double load[3])
{
    if (getloadavg(load, 3) != 3)
        load[0] = load[1] = load[2] = -1;
}

/* /proc/stat's first line: the sum of every tick counter, and steal (the 8th). */
static void ticks_now(unsigned long long t[2])
{
    unsigned long long v[10] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    t[0] = t[1] = 0;
    if (!f)
        return;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    for (int i = 0; i < n && i < 8; i++)   /* guest time is already in user */
        t[0] += v[i];
    t[1] = n >= 8 ? v[7] : 0;
}

/* Running or runnable tasks now, this one not counted ("R/T" in /proc/loadavg). */
static int runnable_others(void)
{
    int running = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%*f %*f %*f %d/", &running) == 1;
    fclose(f);
    return ok ? running - 1 : -1;
}

double host_steal(const struct bench_host *h)
{
    unsigned long long all = h->stat_end[0] - h->stat_begin[0], steal = h->stat_end[1] - h->stat_begin[1];
    return all && h->stat_end[0] >= h->stat_begin[0] ? (double)steal / (double)all : -1;
}

void host_probe(struct bench_host *h)
{
    memset(h, 0, sizeof *h);
    field_of("/proc/cpuinfo", "model name", h->cpu_model, sizeof h->cpu_model);
    struct utsname u;
    snprintf(h->kernel, sizeof h->kernel, "%s", uname(&u) == 0 ? u.release : "unknown");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    h->online = online > 0 ? (int)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpu_list(&set, h->allowed, sizeof h->allowed);
    h->allowed_count = bench_cpus();
    h->huge_kb = number_of("/proc/meminfo", "Hugepagesize");
    h->huge_total = number_of("/proc/meminfo", "HugePages_Total");
    h->huge_free = number_of("/proc/meminfo", "HugePages_Free");
    load_now(h->load_begin);
    memcpy(h->load_end, h->load_begin, sizeof h->load_end);
    h->others_runnable = runnable_others();
    ticks_now(h->stat_begin);
    memcpy(h->stat_end, h->stat_begin, sizeof h->stat_end);
}

void host_finish(struct bench_host *h)
{
    load_now(h->load_end);
    ticks_now(h->stat_end);
}

void host_print_text(const struct bench_host *h, FILE *out)
{
    fprintf(out, "host: %s, kernel %s, CPUs %s (%d of %d online), huge pages %ld kB: %ld of %ld free\n",
            h->cpu_model, h->kernel, h->allowed, h->allowed_count, h->online, h->huge_kb, h->huge_free,
            h->huge_total);
    fprintf(out, "load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end (benches count too); "
            "%d other task%s running at the start; steal %.1f%% of CPU time during the run\n", h->load_begin[0],
            h->load_begin[1], h->load_begin[2], h->load_end[0], h->load_end[1], h->load_end[2], h->others_runnable,
            h->others_runnable == 1 ? "" : "s", 100 * host_steal(h));
}

void host_print_json(const struct bench_host *h, FILE *out)
{
    fputs("\"host\":{\"cpu_model\":", out);
    tool_json_str(out, h->cpu_model);
    fputs(",\"kernel\":", out);
    tool_json_str(out, h->kernel);
    fputs(",\"cpus_allowed\":", out);
    tool_json_str(out, h->allowed);
    fprintf(out, ",\"cpus_allowed_count\":%d,\"cpus_online\":%d,\"hugepage_kb\":%ld,\"hugepages_total\":%ld,"
            "\"hugepages_free\":%ld,\"loadavg_begin\":[%.2f,%.2f,%.2f],\"loadavg_end\":[%.2f,%.2f,%.2f],"
            "\"others_runnable\":%d,\"steal_fraction\":%.4f}",
            h->allowed_count, h->online, h->huge_kb, h->huge_total, h->huge_free, h->load_begin[0],
            h->load_begin[1], h->load_begin[2], h->load_end[0], h->load_end[1], h->load_end[2],
            h->others_runnable, host_steal(h));
}
