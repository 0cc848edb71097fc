/* SPDX-License-Identifier: MIT */
/*
 * metrics_member FLEET ROUNDS: a fleet member that does a known amount of
 * work in every table, then holds what it has until stdin closes (or it is
 * killed), for test_metrics.py to check orbitctl metrics and orbit-reaper
 * --metrics against. Every call is checked: a result other than the planned
 * one exits 1 naming it. When the work is done it prints one line,
 *     ready node=N pid=P
 * The counts, for R rounds (test_metrics.py computes the same):
 *   pool:      reservations R+4, accepts R+1, completions R, busy_refusals 2,
 *              creation_claims 1; held: capacity 4, reserved 3, active 1
 *   streams:   bytes_written 100R+1000+4096, bytes_read 100R, frames_written R,
 *              frames_read R, streams_created 1, streams_opened 1;
 *              held: 1000 bytes queued a->b, the b->a ring full (4096)
 *   admission: claims R+1, releases R, deferred_refusals 1, rejected_refusals 1;
 *              held: 3 of 10 units of domain 7
 *   arena:     chunks_reserved R+2, chunks_committed R+2, chunks_consumed R,
 *              chunks_released R, bytes_committed 100R+3000, bytes_consumed 100R;
 *              held: 2 live chunks of 2 slots each
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <orbit/orbit.h>

#define DOMAIN 7
static const orbit_key KEY = { 0x6d6574726963ull, 1 };
static const orbit_key CREATE_KEY = { 0x6d6574726963ull, 2 };

struct member {
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    struct orbit_admission *adm;
    struct orbit_arena *arena;
    struct orbit_endpoint *a, *b;
};

static _Noreturn void die(const char *what, int rc)
{
    fprintf(stderr, "metrics_member: %s: %s (%s)\n", what, orbit_strerror(rc), orbit_last_error());
    exit(1);
}

static void must(int rc, const char *what)
{
    if (rc < 0)
        die(what, rc);
}

static void want(int rc, int expected, const char *what)
{
    if (rc != expected) {
        fprintf(stderr, "metrics_member: %s: %d (%s), expected %d\n", what, rc,
                rc < 0 ? orbit_strerror(rc) : "", expected);
        exit(1);
    }
}

static void open_tables(const char *name, struct member *m)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    const char *b = getenv("ORBIT_TEST_BACKING");
    o.capacity = 8;
    o.backing = b && strcmp(b, "shm") == 0 ? ORBIT_BACKING_SHM : b && strcmp(b, "hugetlb") == 0
                ? ORBIT_BACKING_HUGETLB : ORBIT_BACKING_AUTO;
    struct orbit_pool_spec ps = { .kind = ORBIT_POOL_KIND, .key_capacity = 16, .lane_capacity = 8 };
    struct orbit_stream_spec ss = { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8, .buffer_bytes = 4096 };
    struct orbit_admission_spec as = { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4, .max_claims = 64 };
    struct orbit_arena_spec ar = { .kind = ORBIT_ARENA_KIND, .slot_bytes = 1024, .slots_per_lane = 64 };
    must(orbit_fleet_join(name, &o, &m->f), "join");
    must(orbit_pool_open(m->f, &ps, &m->pool), "pool open");
    must(orbit_streams_open(m->f, &ss, &m->streams), "streams open");
    must(orbit_admission_open(m->f, &as, &m->adm), "admission open");
    must(orbit_arena_open(m->f, &ar, &m->arena), "arena open");
}

static void pool_work(struct member *m, int rounds)
{
    orbit_id id;
    struct orbit_lease l[6];
    struct orbit_execution e;
    must(orbit_pool_register(m->pool, KEY, 4, &id), "register");
    for (int i = 0; i < rounds; i++) {
        must(orbit_pool_reserve(m->pool, id, &l[0]), "reserve");
        must(orbit_pool_accept(m->pool, &l[0], &e), "accept");
        orbit_execution_complete(&e);
    }
    for (int i = 0; i < 4; i++)
        must(orbit_pool_reserve(m->pool, id, &l[i]), "reserve (held)");
    must(orbit_pool_accept(m->pool, &l[0], &e), "accept (held)");   /* reserved 3, active 1 */
    want(orbit_pool_reserve(m->pool, id, &l[4]), -ORBIT_EBUSY, "reserve past capacity");
    want(orbit_pool_reserve(m->pool, id, &l[5]), -ORBIT_EBUSY, "reserve past capacity");
    struct orbit_permit permit;
    must(orbit_pool_claim_create(m->pool, CREATE_KEY, 1, &permit), "claim_create");
    orbit_permit_finish(&permit);
}

static void stream_work(struct member *m, int rounds)
{
    struct orbit_ticket t;
    unsigned char buf[4096];
    memset(buf, 'x', sizeof buf);
    must(orbit_streams_create(m->streams, &m->a, &t), "streams create");
    must(orbit_streams_open_ticket(m->streams, &t, &m->b), "open ticket");
    for (int i = 0; i < rounds; i++) {
        must(orbit_endpoint_try_write_exact(m->a, buf, 100), "write frame");
        must(orbit_endpoint_try_read_exact(m->b, buf, 100), "read frame");
    }
    want((int)orbit_endpoint_try_write(m->a, buf, 1000), 1000, "write 1000 (left queued)");
    want((int)orbit_endpoint_try_write(m->b, buf, 4096), 4096, "write 4096 (fills b->a)");
}

static void admission_work(struct member *m, int rounds)
{
    struct orbit_units two = { DOMAIN, 2 }, three = { DOMAIN, 3 }, eight = { DOMAIN, 8 }, eleven = { DOMAIN, 11 };
    struct orbit_admit_result r;
    must(orbit_admission_set_capacity(m->adm, DOMAIN, 10), "set_capacity");
    for (int i = 0; i < rounds; i++) {
        struct orbit_demand d = { .claim = &two, .n_claim = 1 };
        must(orbit_admission_try_claim(m->adm, &d, &r), "claim");
        want((int)r.outcome, ORBIT_ADMIT_CLAIMED, "claim outcome");
        must(orbit_admission_release(m->adm, &r.claim), "release");
    }
    struct orbit_demand keep = { .claim = &three, .n_claim = 1 }, big = { .claim = &eight, .n_claim = 1 },
                        never = { .claim = &eleven, .n_claim = 1 };
    must(orbit_admission_try_claim(m->adm, &keep, &r), "claim (held)");
    want((int)r.outcome, ORBIT_ADMIT_CLAIMED, "held claim outcome");
    must(orbit_admission_try_claim(m->adm, &big, &r), "claim 8 of 7 free");
    want((int)r.outcome, ORBIT_ADMIT_DEFERRED, "claim 8 of 7 free");
    must(orbit_admission_try_claim(m->adm, &never, &r), "claim 11 of 10");
    want((int)r.outcome, ORBIT_ADMIT_REJECTED, "claim 11 of 10");
}

static void arena_work(struct member *m, int rounds)
{
    struct orbit_reservation r;
    struct orbit_chunk_desc d;
    struct orbit_chunk c;
    for (int i = 0; i < rounds; i++) {
        must(orbit_arena_try_reserve(m->arena, 100, &r), "arena reserve");
        memset(r.data, 'y', 100);
        must(orbit_arena_commit(&r, 100, &d), "arena commit");
        must(orbit_arena_consume(m->arena, &d, &c), "arena consume");
        orbit_chunk_release(&c);
    }
    for (int i = 0; i < 2; i++) {
        must(orbit_arena_try_reserve(m->arena, 1500, &r), "arena reserve (held)");
        must(orbit_arena_commit(&r, 1500, &d), "arena commit (held)");
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: metrics_member FLEET ROUNDS\n");
        return 2;
    }
    int rounds = atoi(argv[2]);
    if (rounds < 1 || rounds > 100000) {
        fprintf(stderr, "metrics_member: bad ROUNDS '%s': 1..100000\n", argv[2]);
        return 2;
    }
    struct member m = { 0 };
    open_tables(argv[1], &m);
    pool_work(&m, rounds);
    stream_work(&m, rounds);
    admission_work(&m, rounds);
    arena_work(&m, rounds);
    printf("ready node=%u pid=%d\n", orbit_fleet_node(m.f), (int)getpid());
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)   /* holds everything until stdin closes (or kill -9) */
        ;
    return 0;   /* exits holding it all: the process's death is what gives it back */
}
