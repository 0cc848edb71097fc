/* SPDX-License-Identifier: MIT */
/* orbit-bench: its subcommands and the helpers they share. */
#ifndef ORBIT_BENCH_H
#define ORBIT_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tool.h"

/*
 * orbit-bench subcommands: argv[0] is the subcommand name. Each parses its own
 * options (--help, --json, ...), runs its kernel baselines in the same run and
 * prints ratios. Returns the process exit code.
 */
int bench_wake(int argc, char **argv);
int bench_death(int argc, char **argv);
int bench_pool(int argc, char **argv);
int bench_stream(int argc, char **argv);
int bench_admission(int argc, char **argv);
int bench_exchange(int argc, char **argv);
int bench_transfer(int argc, char **argv);

/* orbit-bench's control pipes between its processes: bench_put writes all n bytes or
 * _exit(90)s; bench_get reads exactly n bytes, false at EOF (the other side exited). */
void bench_put(int fd, const void *p, size_t n);
bool bench_get(int fd, void *p, size_t n);

/* orbit-bench's name in its one-line errors (cli.h: "orbit-bench: bad --OPT 'ARG': REASON"). */
#define BENCH_TOOL "orbit-bench"
/* After a subcommand's options: a leftover argument is refused (exit 2). */
void bench_no_operands(int argc, char **argv);
/* "C,S": two CPU numbers (0..CPU_SETSIZE-1) into cpu[0], cpu[1], or a one-line error (exit 2). */
void bench_cpu_pair(const char *opt, const char *arg, int cpu[2]);

/*
 * SIGINT/SIGTERM: the fleet registered here is unlinked before the bench
 * exits (128 + signal); children made by bench_fork die with their parent.
 */
void bench_unlink_on_signal(const char *fleet);
pid_t bench_fork(void);
/* CPUs this process may run on (at least 1): the top of a --scale sweep. */
int bench_cpus(void);

/* Sort helper and percentile of n int64 samples (sorts in place). */
int64_t tool_percentile(int64_t *v, size_t n, double p);

#endif
