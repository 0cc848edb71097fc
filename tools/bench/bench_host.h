/* SPDX-License-Identifier: MIT */
/*
 * The machine a report was measured on: CPU model, kernel, the CPUs this process
 * may use, huge pages, and the load average when the run began and ended, so a
 * reader can tell a slow host from a slow library.
 */
#ifndef ORBIT_BENCH_HOST_H
#define ORBIT_BENCH_HOST_H

#include <stdio.h>

struct bench_host {
    char cpu_model[96], kernel[96], allowed[64];   /* allowed: a CPU list, "0-1" */
    int online, allowed_count;
    long huge_kb, huge_total, huge_free;            /* Hugepagesize, HugePages_Total/_Free */
    double load_begin[3], load_end[3];              /* 1, 5 and 15 minute load averages */
};

void host_probe(struct bench_host *h);      /* everything, the load as "begin" */
void host_finish(struct bench_host *h);     /* the load as "end" */
/* "host: MODEL, kernel K, CPUs 0-1 of 2, huge pages 2048 kB 1004/1024 free, load 0.12 0.30 0.41 -> ..." */
void host_print_text(const struct bench_host *h, FILE *out);
/* "host":{...} (no leading comma) */
void host_print_json(const struct bench_host *h, FILE *out);

#endif
