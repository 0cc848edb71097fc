/* SPDX-License-Identifier: MIT */
/*
 * orbitctl metrics [FLEET...]: the exposition orbit-reaper --metrics serves,
 * once, on stdout (text/plain; version=0.0.4). A fleet that cannot be read
 * shows as orbit_fleet_up 0 and is named on stderr; when it was named on the
 * command line the exit status is 1.
 */
#include <stdio.h>
#include <orbit/orbit.h>
#include "ctl_metrics.h"
#include "prom_fleet.h"

int ctl_metrics(char **names, int n)
{
    struct prom *p = prom_new();
    if (!p) {
        fprintf(stderr, "orbitctl: metrics: out of memory\n");
        return 1;
    }
    int failed = prom_fleets(p, n ? (const char *const *)names : NULL, (size_t)n, "orbitctl");
    if (failed < 0) {
        fprintf(stderr, "orbitctl: metrics: cannot list the fleets: %s\n", orbit_strerror(failed));
        prom_free(p);
        return 1;
    }
    const char *why = prom_error(p);
    int rc = prom_write(p, stdout) == 0 && fflush(stdout) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "orbitctl: metrics: cannot write the output\n");
    if (why)
        fprintf(stderr, "orbitctl: metrics: %s (samples were left out)\n", why);
    prom_free(p);
    return rc || (n && failed) || why ? 1 : 0;   /* every fleet: one that cannot be read is up 0, not an error */
}
