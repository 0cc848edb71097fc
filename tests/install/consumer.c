/* SPDX-License-Identifier: MIT */
/*
 * A program as a user writes it, built from an installed prefix through
 * pkg-config alone: every installed header, the version macros, and a name
 * of each kind the libraries export (functions and extern objects).
 */
#include <stdio.h>
#include <string.h>
#include <orbit/orbit.h>
#include <orbit/uring.h>
#include <orbit/reaper.h>

#ifndef EXPECT_VERSION
#error "build with -DEXPECT_VERSION=\"$(pkg-config --modversion orbit)\""
#endif

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer: %s: %s\n", what, orbit_strerror(rc));
    return 1;
}

int main(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ORBIT_VERSION_MAJOR, ORBIT_VERSION_MINOR, ORBIT_VERSION_PATCH);
    if (strcmp(want, EXPECT_VERSION) != 0 || strcmp(orbit_version_string(), EXPECT_VERSION) != 0) {
        fprintf(stderr, "consumer: headers say %s, library %s, pkg-config %s\n", want,
                orbit_version_string(), EXPECT_VERSION);
        return 1;
    }
    if (ORBIT_PENDING_RESERVATIONS == 0 || orbit_policy_local_first.decide == NULL)
        return fail("extern objects", -ORBIT_ECORRUPT);

    struct orbit_fleet *f;
    int rc = orbit_fleet_join(NULL, NULL, &f);
    if (rc < 0)
        return fail("join", rc);
    struct orbit_streams *s;
    if ((rc = orbit_streams_open(f, NULL, &s)) < 0)
        return fail("streams_open", rc);
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    if ((rc = orbit_streams_create(s, &a, &t)) < 0 || (rc = orbit_streams_open_ticket(s, &t, &b)) < 0)
        return fail("stream", rc);
    char buf[6] = { 0 };
    if ((rc = orbit_endpoint_write_all(a, "hello", 5, 1000)) < 0 ||
        (rc = orbit_endpoint_try_read_exact(b, buf, 5)) < 0)
        return fail("stream bytes", rc);
    orbit_endpoint_close(b);
    orbit_endpoint_close(a);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    if (strcmp(buf, "hello") != 0)
        return fail("stream bytes differ", -ORBIT_ECORRUPT);
    printf("consumer (C): liborbit %s, reaper backend names %s/%s\n", orbit_version_string(),
           orbit_reaper_backend_name(ORBIT_REAPER_BPF), orbit_reaper_backend_name(ORBIT_REAPER_PIDFD));
    return 0;
}
