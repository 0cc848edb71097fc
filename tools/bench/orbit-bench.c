/* SPDX-License-Identifier: MIT */
/* orbit-bench — orbit measured side by side with the kernel alternatives, in one run. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "bench.h"

#include "bench_report.h"

static const char usage[] =
"usage: orbit-bench SUBCOMMAND [OPTIONS]   (SUBCOMMAND --help for its options)\n"
"\n"
"  death       kill -9 -> notification latency: orbit-reaper (BPF, pidfd) and\n"
"              orbit_fleet_wait_node_death (no reaper)\n"
"  wake        one-way wake and ping-pong latency, 1-byte messages: orbit stream\n"
"              (spin+park, park only, io_uring wait), eventfd, pipe, AF_UNIX socketpair\n"
#ifdef ORBIT_WITH_STREAM
"  stream      stream throughput and ping-pong beside pipe, socketpair and memcpy\n"
#endif
#ifdef ORBIT_WITH_POOL
"  pool        reserve/accept/complete ops/s beside a process-shared mutex\n"
#endif
#ifdef ORBIT_WITH_ADMISSION
"  admission   claims+releases per second\n"
#endif
#ifdef ORBIT_WITH_EXCHANGE
"  exchange    paired exchanges through the payload arena beside streams and a socketpair\n"
"  transfer    1 MiB and busy-polled 64 KiB messages, every byte read, beside a zero-copy\n"
"              slot ring: orbit's exchange and stream\n"
#endif
"  report      run a set of the above with --plot, write one HTML page (inline SVG)\n"
"\n"
"Every subcommand takes --help, --json (one JSON object) and --pairs N.\n"
"  -h, --help     this text\n"
"  -V, --version  print the version\n"
"\n"
"Reading the output. Absolute figures on a VM move 2-4x within minutes: the host\n"
"moves vCPUs and runs other guests. So every comparison is paired: orbit and its\n"
"baseline run back to back, N times (--pairs, default 9), the order alternating,\n"
"and a ratio is the median of the N per-pair ratios, [min-max] their spread,\n"
"beside each side's median. A host state that moves both sides alike cancels in\n"
"the ratio; a wide spread says the pairs disagreed. \"best-of\" (the ratio of each\n"
"side's best pair) is shown for comparison only.\n"
"Every report starts with the host (CPU, kernel, CPUs, huge pages, load average,\n"
"other tasks running, CPU time stolen by the hypervisor during the run)\n"
"and the floor: a busy-poll cache-line round trip between two processes on the\n"
"CPUs used (--cpus, else the first two allowed), taken before each pair; with one\n"
"CPU a sched_yield hand-off between processes. A slow floor is a slow host, not a\n"
"slow library; a pair whose floor is beyond 2x of the run's median is flagged.\n"
"Latency benches print p50..p99.99 and max of every sample, the median over the\n"
"floor, and where each side ran: A pings, B echoes, how often each moved, and\n"
"unpinned how often both sat on one CPU (then a ping-pong runs at the scheduler's\n"
"pace). See orbit-bench(1).\n";

int main(int argc, char **argv)
{
    if (argc < 2)
        cli_usage_error(BENCH_TOOL, "no subcommand");
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(sub, "--version") == 0 || strcmp(sub, "-V") == 0) {
        cli_version(BENCH_TOOL);
        return 0;
    }
    if (strcmp(sub, "wake") == 0) return bench_wake(argc - 1, argv + 1);
    if (strcmp(sub, "death") == 0) return bench_death(argc - 1, argv + 1);
    if (strcmp(sub, "report") == 0) return bench_report(argc - 1, argv + 1);
#ifdef ORBIT_WITH_STREAM
    if (strcmp(sub, "stream") == 0) return bench_stream(argc - 1, argv + 1);
#endif
#ifdef ORBIT_WITH_POOL
    if (strcmp(sub, "pool") == 0) return bench_pool(argc - 1, argv + 1);
#endif
#ifdef ORBIT_WITH_ADMISSION
    if (strcmp(sub, "admission") == 0) return bench_admission(argc - 1, argv + 1);
#endif
#ifdef ORBIT_WITH_EXCHANGE
    if (strcmp(sub, "exchange") == 0) return bench_exchange(argc - 1, argv + 1);
    if (strcmp(sub, "transfer") == 0) return bench_transfer(argc - 1, argv + 1);
#endif
    if (sub[0] == '-')
        cli_getopt_error(BENCH_TOOL, '?', 0, sub);
    cli_bad(BENCH_TOOL, "subcommand", sub, "unknown (see --help)");
}
