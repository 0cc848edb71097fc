/* SPDX-License-Identifier: MIT */
#ifndef ORBIT_BENCH_REPORT_H
#define ORBIT_BENCH_REPORT_H
/* orbit-bench report: a set of benches with --plot into one HTML page; the exit status. */
int bench_report(int argc, char **argv);
#endif
