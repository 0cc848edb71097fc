/* SPDX-License-Identifier: MIT */
/*
 * Room, where a container gives little: run by small_shm.sh in a /dev/shm of
 * 64 MiB of its own (Docker's default), huge pages off. A fleet of 64 members
 * with default specs (pool, streams, admission, exchanges; a stream and an
 * arena chunk each) fits in it, because a member's lane costs the rings and
 * chunks it uses. Where the room runs out, the call that asked fails with
 * -ENOMEM and a sentence naming the bytes asked, the bytes free and the mount
 * (a join, a table's creation, a stream's rings, an arena chunk), never with
 * a SIGBUS later: every byte of what was handed out can be written.
 */
#include <fcntl.h>
#include <sys/statfs.h>
#include <orbit/orbit.h>
#include "testutil.h"

#define MEMBERS 64
#define MiB (1024.0 * 1024.0)

static struct statfs shm(void)
{
    struct statfs sf;
    ck_assert_int_eq(statfs("/dev/shm", &sf), 0);
    return sf;
}

static double shm_used_mib(void)
{
    struct statfs sf = shm();
    return (double)(sf.f_blocks - sf.f_bfree) * (double)sf.f_bsize / MiB;
}

/* The sentence of an -ENOMEM: the call, the bytes asked, the mount and its room. */
static void assert_room_sentence(const char *call)
{
    const char *e = orbit_last_error();
    ck_assert_msg(strstr(e, call) && strstr(e, "needs ") && strstr(e, "bytes on /dev/shm (tmpfs)") &&
                  strstr(e, " free"), "orbit_last_error: \"%s\"", e);
}

/* One member's handles: every table with its default spec, a stream and an arena chunk. */
struct member {
    struct orbit_fleet *f;
    struct orbit_pool *p;
    struct orbit_streams *s;
    struct orbit_admission *a;
    struct orbit_exchanges *x;
    struct orbit_endpoint *ep;
    struct orbit_reservation r;
};

static int member_work(const char *name, struct member *m)
{
    memset(m, 0, sizeof *m);
    struct orbit_ticket t;
    int rc = orbit_fleet_join(name, NULL, &m->f);
    if (rc == 0)
        rc = orbit_pool_open(m->f, NULL, &m->p);
    if (rc == 0)
        rc = orbit_streams_open(m->f, NULL, &m->s);
    if (rc == 0)
        rc = orbit_admission_open(m->f, NULL, &m->a);
    if (rc == 0)
        rc = orbit_exchanges_open(m->f, NULL, &m->x);
    if (rc == 0)
        rc = orbit_streams_create(m->s, &m->ep, &t);
    if (rc == 0)
        rc = orbit_endpoint_write_all(m->ep, "hello", 5, 1000);
    if (rc == 0)
        rc = orbit_arena_try_reserve(orbit_exchanges_arena(m->x, ORBIT_FLOW_A_TO_B), 4096, &m->r);
    if (rc < 0)
        fprintf(stderr, "member %d: %s (%s)\n", (int)getpid(), orbit_strerror(rc), orbit_last_error());
    return rc;
}

static void member_close(struct member *m)
{
    orbit_arena_cancel(&m->r);
    orbit_endpoint_close(m->ep);
    orbit_exchanges_close(m->x);
    orbit_admission_close(m->a);
    orbit_streams_close(m->s);
    orbit_pool_close(m->p);
    orbit_fleet_leave(m->f);
}

START_TEST(a_fleet_of_64_members_with_default_specs_fits)
{
    const char *name = tu_fleet_name("room64");
    double before = shm_used_mib();
    int ready[2], hold[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t kid[MEMBERS - 1];
    fflush(NULL);
    for (int i = 0; i < MEMBERS - 1; i++) {
        kid[i] = fork();
        ck_assert_int_ge(kid[i], 0);
        if (kid[i] == 0) {
            alarm(60);
            close(hold[1]);
            struct member m;
            char rc = (char)(member_work(name, &m) < 0);
            if (write(ready[1], &rc, 1) != 1)
                _exit(2);
            while (read(hold[0], &rc, 1) > 0) {}
            _exit(0);   /* an exit, as a container's workers end: the test reports them */
        }
    }
    close(hold[0]);
    struct member me;
    int failed = member_work(name, &me) < 0;
    for (int i = 0; i < MEMBERS - 1; i++) {
        char rc = 1;
        ck_assert_int_eq(read(ready[0], &rc, 1), 1);
        failed += rc;
    }
    double used = shm_used_mib() - before;
    printf("room: %d members with default specs hold %.1f MiB of /dev/shm (%.1f MiB in all)\n", MEMBERS, used,
           (double)shm().f_blocks * (double)shm().f_bsize / MiB);
    close(hold[1]);
    for (int i = 0; i < MEMBERS - 1; i++)
        ck_assert_int_eq(tu_wait_child(kid[i], 20000), 0);
    ck_assert_msg(failed == 0, "%d of %d members could not join and open their tables", failed, MEMBERS);
    ck_assert_int_eq(orbit_fleet_reap(me.f), MEMBERS - 1);
    member_close(&me);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* Streams of 1 MiB rings until the room runs out: each costs its two rings, then -ENOMEM. */
START_TEST(a_stream_past_the_room_is_refused_and_the_rest_can_be_written)
{
    const char *name = tu_fleet_name("roomring");
    struct orbit_fleet *f = tu_join(name, 64, -1, 0, ORBIT_BACKING_AUTO);
    struct orbit_stream_spec spec = ORBIT_STREAM_SPEC_DEFAULT;
    spec.buffer_bytes = 1u << 20;
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), 0);
    static char ring[1 << 20];
    memset(ring, 0x5a, sizeof ring);
    struct orbit_endpoint *ep[64];
    int n = 0, rc = 0;
    double before = shm_used_mib();
    while (n < 64) {
        struct orbit_ticket t;
        if ((rc = orbit_streams_create(s, &ep[n], &t)) < 0)
            break;
        /* The whole A -> B ring: a page not there would be a SIGBUS here. */
        ck_assert_int_eq(orbit_endpoint_write_all(ep[n], ring, sizeof ring, 0), 0);
        n++;
    }
    ck_assert_msg(rc == -ENOMEM, "create %d: %s (%s), want -ENOMEM", n, orbit_strerror(rc), orbit_last_error());
    assert_room_sentence("orbit_streams_create: a new stream's two rings needs 2097152 bytes");
    ck_assert_int_ge(n, 8);
    double per = (shm_used_mib() - before) / n;
    ck_assert_msg(per > 1.9 && per < 2.1, "a stream of two 1 MiB rings cost %.2f MiB", per);
    for (int i = 0; i < n; i++)
        orbit_endpoint_close(ep[i]);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* Arena chunks of 1 MiB until the room runs out: -ENOMEM, and every chunk handed out is writable. */
START_TEST(an_arena_chunk_past_the_room_is_refused_and_the_rest_can_be_written)
{
    const char *name = tu_fleet_name("roomarena");
    struct orbit_fleet *f = tu_join(name, 64, -1, 0, ORBIT_BACKING_AUTO);
    struct orbit_arena_spec spec = { .kind = ORBIT_ARENA_KIND, .slot_bytes = 65536, .slots_per_lane = 1024 };
    struct orbit_arena *a;
    ck_assert_int_eq(orbit_arena_open(f, &spec, &a), 0);
    struct orbit_reservation r[64];
    int n = 0, rc = 0;
    while (n < 64) {
        if ((rc = orbit_arena_try_reserve(a, 1u << 20, &r[n])) < 0)
            break;
        memset(r[n].data, 0xa5, r[n].capacity);
        n++;
    }
    ck_assert_msg(rc == -ENOMEM, "reserve %d: %s (%s), want -ENOMEM", n, orbit_strerror(rc), orbit_last_error());
    assert_room_sentence("orbit_arena_try_reserve: this member's arena lane");
    ck_assert_int_ge(n, 8);
    for (int i = 0; i < n; i++)
        orbit_arena_cancel(&r[i]);
    ck_assert_int_eq(orbit_arena_try_reserve(a, 1u << 20, &r[0]), 0);   /* given back: reusable */
    orbit_arena_cancel(&r[0]);
    orbit_arena_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* A table whose shared part does not fit, and a join with the mount all but full. */
START_TEST(a_table_or_a_join_past_the_room_names_what_it_needs)
{
    const char *name = tu_fleet_name("roomopen");
    struct orbit_fleet *f = tu_join(name, 64, -1, 0, ORBIT_BACKING_AUTO);
    struct orbit_stream_spec big = ORBIT_STREAM_SPEC_DEFAULT;
    big.lane_capacity = 65536;   /* 64 x 65536 slots of 320 bytes: 1.25 GiB every member reads */
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, &big, &s), -ENOMEM);
    assert_room_sentence("orbit_streams_open: creating orbit.");
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);

    /* Fill the mount to 16 KiB of its end: the fleet segment of a joiner does not fit. */
    struct statfs sf = shm();
    off_t fill = (off_t)(sf.f_bavail * (uint64_t)sf.f_bsize) - 16384;
    int fd = open("/dev/shm/room-filler", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(posix_fallocate(fd, 0, fill), 0);
    struct orbit_fleet *g;
    const char *other = tu_fleet_name("roomjoin");
    ck_assert_int_eq(orbit_fleet_join(other, NULL, &g), -ENOMEM);
    assert_room_sentence("orbit_fleet_join: creating orbit.");
    close(fd);
    unlink("/dev/shm/room-filler");
    orbit_fleet_unlink(other);
}
END_TEST

int main(void)
{
    struct statfs sf;
    if (statfs("/dev/shm", &sf) != 0 || (double)sf.f_blocks * (double)sf.f_bsize > 256 * MiB ||
        getenv("ORBIT_HUGETLB_DIR") == NULL || *getenv("ORBIT_HUGETLB_DIR")) {
        printf("SKIP: run through small_shm.sh (a /dev/shm of its own, 256 MiB or less, huge pages off)\n");
        return 77;
    }
    Suite *s = suite_create("room");
    TCase *tc = tcase_create("room");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_fleet_of_64_members_with_default_specs_fits);
    tcase_add_test(tc, a_stream_past_the_room_is_refused_and_the_rest_can_be_written);
    tcase_add_test(tc, an_arena_chunk_past_the_room_is_refused_and_the_rest_can_be_written);
    tcase_add_test(tc, a_table_or_a_join_past_the_room_names_what_it_needs);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
