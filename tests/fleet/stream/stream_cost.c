/* SPDX-License-Identifier: MIT */
/*
 * stream_cost ROUNDS: ROUNDS round trips of a 1-byte message between the two
 * ends of one stream in one process (write A, read B, write B, read A), with
 * the blocking calls a ping-pong uses. stream_cost.py runs it under callgrind
 * twice and pins the instructions one round trip costs: a design figure of
 * the small-message path, counted, never timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <orbit/orbit.h>

static void must(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "stream_cost: %s: %s\n", what, orbit_strerror(rc));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long rounds = argc == 2 ? strtol(argv[1], &end, 10) : -1;
    if (rounds < 0 || !end || *end) {
        fprintf(stderr, "usage: stream_cost ROUNDS\n");
        return 2;
    }
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    must(orbit_fleet_join(NULL, NULL, &f), "join");
    must(orbit_streams_open(f, NULL, &s), "open");
    must(orbit_streams_create(s, &a, &t), "create");
    must(orbit_streams_open_ticket(s, &t, &b), "open ticket");
    char byte = 'x', got[4];
    for (long i = 0; i < rounds; i++) {
        if (orbit_endpoint_write(a, &byte, 1, -1) != 1 || orbit_endpoint_read(b, got, sizeof got, -1) != 1 ||
            orbit_endpoint_write(b, &byte, 1, -1) != 1 || orbit_endpoint_read(a, got, sizeof got, -1) != 1) {
            fprintf(stderr, "stream_cost: round %ld: a write or read moved other than one byte\n", i);
            return 1;
        }
    }
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}
