/* SPDX-License-Identifier: MIT */
/*
 * The machine a report was measured on: CPU model, kernel, the CPUs this process
 * may use, huge pages, the load average when the run began and ended, the tasks
 * already running beside the bench, and the CPU time the hypervisor stole during
 * the run, so a reader can tell a slow host from a slow library.
 */
#ifndef ORBIT_BENCH_HOST_H
#define ORBIT_BENCH_HOST_H

#include <stdio.h>

struct bench_host {
    char cpu_model[96], kernel[96], allowed[64];   /* allowed: a CPU list, "0-1" */
    int online, allowed_count;
    long huge_kb, huge_total, huge_free;            /* Hugepagesize, HugePages_Total/_Free */
    double load_begin[3], load_end[3];              /* 1, 5 and 15 minute load averages */
    int others_runnable;                            /* tasks running or runnable at the start, not us */
    unsigned long long stat_begin[2], stat_end[2];  /* /proc/stat "cpu": all ticks, steal ticks */
};

/* Share of the CPUs' time the hypervisor gave to others during the run, 0..1; -1 unknown. */
double host_steal(const struct bench_host *h);

void host_probe(struct bench_host *h);      /* everything, the load and CPU ticks as "begin" */
void host_finish(struct bench_host *h);     /* the load and CPU ticks as "end" */
/* "host: MODEL, kernel K, CPUs 0-1 (2 of 2 online), huge pages ..." and a line on the load. */
void host_print_text(const struct bench_host *h, FILE *out);
/* "host":{...} (no leading comma) */
void host_print_json(const struct bench_host *h, FILE *out);

#endif
