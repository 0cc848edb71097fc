/* SPDX-License-Identifier: MIT */
/*
 * claim_loop.c — N admission claim+release pairs over two domains, in C: the
 * reference claim_instructions.sh counts the Python binding's instructions
 * against (built through pkg-config by that script).
 *   claim_loop N
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int must(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "claim_loop: %s: %s\n", what, orbit_strerror(rc));
        exit(1);
    }
    return rc;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
    char name[64];
    snprintf(name, sizeof name, "t-py-ir-c-%d", (int)getpid());
    struct orbit_fleet_opts opts = ORBIT_FLEET_OPTS_DEFAULT;
    opts.capacity = 4;
    opts.backing = ORBIT_BACKING_SHM;
    struct orbit_fleet *f;
    struct orbit_admission *a;
    must(orbit_fleet_join(name, &opts, &f), "join");
    must(orbit_admission_open(f, NULL, &a), "admission_open");
    must(orbit_admission_set_capacity(a, 1, 1ull << 40), "set_capacity");
    must(orbit_admission_set_capacity(a, 2, 1ull << 40), "set_capacity");
    struct orbit_units units[2] = { { .domain = 1, .units = 1 }, { .domain = 2, .units = 1 } };
    struct orbit_demand d = { .claim = units, .n_claim = 2 };
    for (long i = 0; i < n; i++) {
        struct orbit_admit_result r;
        must(orbit_admission_try_claim(a, &d, &r), "try_claim");
        if (r.outcome != ORBIT_ADMIT_CLAIMED)
            must(-ORBIT_EBUSY, "claimed");
        must(orbit_admission_release(a, &r.claim), "release");
    }
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
    return 0;
}
