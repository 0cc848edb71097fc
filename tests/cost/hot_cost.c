/* SPDX-License-Identifier: MIT */
/*
 * hot_cost PATH ROUNDS: ROUNDS operations of one hot path in one process,
 * through the public calls a program makes, for cost.py to count with
 * callgrind (a design figure: counted, never timed).
 *
 *   pool       reserve -> accept -> complete on a resource of capacity 4
 *   admission  try_claim + release of one unit in each of 2 domains
 *   stream     a 1-byte round trip between the two ends of one stream
 *              (write A, read B, write B, read A; the blocking calls)
 *
 * Every result is checked: an operation that does not succeed exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/orbit.h>

static void must(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "hot_cost: %s: %s\n", what, orbit_last_error());
        exit(1);
    }
}

static int pool_rounds(struct orbit_fleet *f, long rounds)
{
    struct orbit_pool *p;
    orbit_id id;
    must(orbit_pool_open(f, NULL, &p), "pool open");
    must(orbit_pool_register(p, (orbit_key){ 1, 2 }, 4, &id), "register");
    for (long i = 0; i < rounds; i++) {
        struct orbit_lease lease;
        struct orbit_execution ex;
        must(orbit_pool_reserve(p, id, &lease), "reserve");
        must(orbit_pool_accept(p, &lease, &ex), "accept");
        orbit_execution_complete(&ex);
    }
    orbit_pool_close(p);
    return 0;
}

static int admission_rounds(struct orbit_fleet *f, long rounds)
{
    struct orbit_admission *a;
    must(orbit_admission_open(f, NULL, &a), "admission open");
    must(orbit_admission_set_capacity(a, 100, 100000), "set_capacity");
    must(orbit_admission_set_capacity(a, 101, 100000), "set_capacity");
    const struct orbit_units units[2] = { { 100, 1 }, { 101, 1 } };
    const struct orbit_demand demand = { .claim = units, .n_claim = 2 };
    for (long i = 0; i < rounds; i++) {
        struct orbit_admit_result r;
        must(orbit_admission_try_claim(a, &demand, &r), "try_claim");
        if (r.outcome != ORBIT_ADMIT_CLAIMED) {
            fprintf(stderr, "hot_cost: round %ld: the claim was not granted (outcome %d)\n", i, (int)r.outcome);
            exit(1);
        }
        must(orbit_admission_release(a, &r.claim), "release");
    }
    orbit_admission_close(a);
    return 0;
}

static int stream_rounds(struct orbit_fleet *f, long rounds)
{
    struct orbit_streams *s;
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    must(orbit_streams_open(f, NULL, &s), "streams open");
    must(orbit_streams_create(s, &a, &t), "create");
    must(orbit_streams_open_ticket(s, &t, &b), "open ticket");
    char byte = 'x', got[4];
    for (long i = 0; i < rounds; i++) {
        if (orbit_endpoint_write(a, &byte, 1, -1) != 1 || orbit_endpoint_read(b, got, sizeof got, -1) != 1 ||
            orbit_endpoint_write(b, &byte, 1, -1) != 1 || orbit_endpoint_read(a, got, sizeof got, -1) != 1) {
            fprintf(stderr, "hot_cost: round %ld: a write or read moved other than one byte\n", i);
            exit(1);
        }
    }
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    orbit_streams_close(s);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; int (*run)(struct orbit_fleet *, long); } paths[] = {
        { "pool", pool_rounds }, { "admission", admission_rounds }, { "stream", stream_rounds } };
    char *end = NULL;
    long rounds = argc == 3 ? strtol(argv[2], &end, 10) : -1;
    for (size_t i = 0; rounds >= 0 && end && !*end && i < sizeof paths / sizeof paths[0]; i++) {
        if (strcmp(argv[1], paths[i].name) != 0)
            continue;
        struct orbit_fleet *f;
        must(orbit_fleet_join(NULL, NULL, &f), "join");
        int rc = paths[i].run(f, rounds);
        orbit_fleet_leave(f);
        return rc;
    }
    fprintf(stderr, "usage: hot_cost pool|admission|stream ROUNDS\n");
    return 2;
}
