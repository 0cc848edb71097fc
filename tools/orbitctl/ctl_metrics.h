/* SPDX-License-Identifier: MIT */
/* orbitctl metrics: the fleets' counters and gauges in the Prometheus text format. */
#ifndef ORBITCTL_METRICS_H
#define ORBITCTL_METRICS_H

/* names: n fleet names (checked already), or n == 0 for every fleet on the host. Returns the exit code. */
int ctl_metrics(char **names, int n);

#endif
