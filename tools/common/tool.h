/* SPDX-License-Identifier: MIT */
/* Shared by orbitctl and orbit-bench: module hooks and small output helpers. */
#ifndef ORBIT_TOOL_H
#define ORBIT_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <orbit/fleet.h>

/*
 * orbitctl show: one function per table type (orbit-relay's --stats uses the
 * pool and stream ones). Each prints its section for the segment of that kind:
 * human text, or with json a single JSON object with its "type" first (no
 * trailing newline), in docs/orbitctl-show.schema.json's shape. Returns 0 or a
 * negative code. orbitctl itself calls ctl_section_* (orbitctl/ctl.h), which
 * share one snapshot of the node records.
 */
int ctl_show_pool(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);
int ctl_show_stream(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);
int ctl_show_admission(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);
int ctl_show_exchange(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);   /* arena segments */

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

/* Print a JSON string literal (quoted, escaped). */
static inline void tool_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

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
