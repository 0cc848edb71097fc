/* SPDX-License-Identifier: MIT */
/*
 * Counters in the fleet segment, as an operator reads them: a known workload
 * in a real member process, read per node while it lives and in the totals
 * after it is killed -9 and reported; threads, leaves and rejoins, slots
 * running out, a garbled region.
 */
#include <fcntl.h>
#include <pthread.h>
#include <orbit/orbit.h>
#include "proc.h"
#include "core/fleet_internal.h"

#define N 500
#define FRAME 100
#define CHUNK 64

static enum orbit_backing backing;

static uint64_t value_of(struct orbit_fleet *f, uint8_t kind, uint16_t node, const char *name)
{
    struct orbit_table_info t[16];
    ssize_t n = orbit_fleet_tables(f, t, 16);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n; i++) {
        if (t[i].kind != kind)
            continue;
        struct orbit_counters c;
        int rc = orbit_fleet_counters(f, kind, node, &c);
        ck_assert_msg(rc == 0, "counters: %s", orbit_strerror(rc));
        for (unsigned j = 0; orbit_counter_name(t[i].type, j); j++)
            if (strcmp(orbit_counter_name(t[i].type, j), name) == 0)
                return c.value[j];
        ck_abort_msg("table kind %u (%s) has no counter %s", kind, t[i].name, name);
    }
    ck_abort_msg("no table of kind %u", kind);
    return 0;
}

/* ---- the workload: exact counts of every table ---- */

static void pool_work(struct orbit_fleet *f)
{
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    orbit_id id;
    TP_CHECK(orbit_pool_register(p, (orbit_key){ 1, 2 }, 4, &id) == 0, "register");
    for (int i = 0; i < N; i++) {
        struct orbit_lease l;
        struct orbit_execution ex;
        TP_CHECK(orbit_pool_reserve(p, id, &l) == 0, "reserve");
        TP_CHECK(orbit_pool_accept(p, &l, &ex) == 0, "accept");
        orbit_execution_complete(&ex);
    }
    struct orbit_lease held[4], extra;
    for (int i = 0; i < 4; i++)   /* left pending: the death gives them back */
        TP_CHECK(orbit_pool_reserve(p, id, &held[i]) == 0, "reserve held");
    TP_CHECK(orbit_pool_reserve(p, id, &extra) == -ORBIT_EBUSY, "a fifth is busy");
}

static void stream_work(struct orbit_fleet *f)
{
    struct orbit_streams *s;
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    TP_CHECK(orbit_streams_open(f, NULL, &s) == 0, "streams open");
    TP_CHECK(orbit_streams_create(s, &a, &t) == 0, "create");
    TP_CHECK(orbit_streams_open_ticket(s, &t, &b) == 0, "open ticket");
    char frame[FRAME] = { 0 };
    for (int i = 0; i < N; i++) {
        TP_CHECK(orbit_endpoint_write_exact(a, frame, sizeof frame, 1000) == 0, "write");
        TP_CHECK(orbit_endpoint_read_exact(b, frame, sizeof frame, 1000) == 0, "read");
    }
}

static void admission_work(struct orbit_fleet *f)
{
    struct orbit_admission *a;
    TP_CHECK(orbit_admission_open(f, NULL, &a) == 0, "admission open");
    TP_CHECK(orbit_admission_set_capacity(a, 1, 10) == 0, "capacity");
    struct orbit_units one = { 1, 1 }, all = { 1, 10 };
    struct orbit_demand d1 = { &one, 1, NULL, 0, 0 }, d10 = { &all, 1, NULL, 0, 0 };
    struct orbit_admit_result r;
    for (int i = 0; i < N; i++) {
        TP_CHECK(orbit_admission_try_claim(a, &d1, &r) == 0 && r.outcome == ORBIT_ADMIT_CLAIMED, "claim");
        TP_CHECK(orbit_admission_release(a, &r.claim) == 0, "release");
    }
    TP_CHECK(orbit_admission_try_claim(a, &d10, &r) == 0 && r.outcome == ORBIT_ADMIT_CLAIMED, "claim all");
    TP_CHECK(orbit_admission_try_claim(a, &d1, &r) == 0 && r.outcome == ORBIT_ADMIT_DEFERRED, "deferred");
}

static void arena_work(struct orbit_fleet *f)
{
    struct orbit_arena *ar;
    TP_CHECK(orbit_arena_open(f, NULL, &ar) == 0, "arena open");
    for (int i = 0; i < N; i++) {
        struct orbit_reservation res;
        struct orbit_chunk_desc d;
        struct orbit_chunk c;
        TP_CHECK(orbit_arena_try_reserve(ar, CHUNK, &res) == 0, "arena reserve");
        TP_CHECK(orbit_arena_commit(&res, CHUNK, &d) == 0, "commit");
        TP_CHECK(orbit_arena_consume(ar, &d, &c) == 0, "consume");
        orbit_chunk_release(&c);
    }
}

struct member_args { const char *name; int ready; };

static int workload_member(void *arg)
{
    struct member_args *m = arg;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    o.node = 1;
    o.backing = backing;
    struct orbit_fleet *f;
    TP_CHECK(orbit_fleet_join(m->name, &o, &f) == 0, "join");
    pool_work(f);
    stream_work(f);
    admission_work(f);
    arena_work(f);
    char c = 'r';
    TP_CHECK(write(m->ready, &c, 1) == 1, "ready");
    for (;;)
        pause();   /* killed -9 with everything open */
    return 0;
}

static void check_workload(struct orbit_fleet *f, uint16_t node)
{
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, node, "reservations"), N + 4);
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, node, "accepts"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, node, "completions"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, node, "busy_refusals"), 1);
    ck_assert_uint_eq(value_of(f, ORBIT_STREAM_KIND, node, "bytes_written"), N * FRAME);
    ck_assert_uint_eq(value_of(f, ORBIT_STREAM_KIND, node, "bytes_read"), N * FRAME);
    ck_assert_uint_eq(value_of(f, ORBIT_STREAM_KIND, node, "frames_written"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_STREAM_KIND, node, "frames_read"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_STREAM_KIND, node, "streams_created"), 1);
    ck_assert_uint_eq(value_of(f, ORBIT_STREAM_KIND, node, "streams_opened"), 1);
    ck_assert_uint_eq(value_of(f, ORBIT_ADMISSION_KIND, node, "claims"), N + 1);
    ck_assert_uint_eq(value_of(f, ORBIT_ADMISSION_KIND, node, "releases"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_ADMISSION_KIND, node, "deferred_refusals"), 1);
    ck_assert_uint_eq(value_of(f, ORBIT_ARENA_KIND, node, "chunks_reserved"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_ARENA_KIND, node, "chunks_committed"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_ARENA_KIND, node, "chunks_consumed"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_ARENA_KIND, node, "chunks_released"), N);
    ck_assert_uint_eq(value_of(f, ORBIT_ARENA_KIND, node, "bytes_committed"), N * CHUNK);
}

START_TEST(workload_counted_exactly_and_kept_past_a_kill)
{
    const char *name = tu_fleet_name("ctr");
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    struct member_args m = { name, pipefd[1] };
    pid_t pid = tp_spawn(workload_member, &m);
    char c;
    ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    check_workload(obs, 1);                  /* the live member's node */
    check_workload(obs, ORBIT_NODE_NONE);    /* the fleet's totals: the same, one member */
    ck_assert_uint_eq(value_of(obs, ORBIT_POOL_KIND, 0, "reservations"), 0);
    kill(pid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(pid, 5000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_reap(obs), 1);
    check_workload(obs, ORBIT_NODE_NONE);    /* folded at the report: nothing lost, nothing twice */
    struct orbit_counters per;
    ck_assert_int_eq(orbit_fleet_counters(obs, ORBIT_POOL_KIND, 1, &per), 0);
    ck_assert_uint_eq(per.slots, 0);         /* the dead life's slots are free again */
    struct orbit_death_counters d;
    ck_assert_int_eq(orbit_fleet_death_counters(obs, &d), 0);
    ck_assert_uint_eq(d.deaths_reported, 1);
    ck_assert_uint_eq(d.reclaim_le[ORBIT_RECLAIM_BUCKETS - 1], 1);
    ck_assert_uint_eq(d.reclaim_bound_ns[ORBIT_RECLAIM_BUCKETS - 1], UINT64_MAX);
    orbit_fleet_leave(obs);
    orbit_fleet_unlink(name);
    close(pipefd[0]);
    close(pipefd[1]);
}
END_TEST

/* ---- threads ---- */

struct thread_args { struct orbit_pool *p; orbit_id id; int rounds; pthread_barrier_t *hold; };

static void *reserve_rounds(void *arg)
{
    struct thread_args *t = arg;
    for (int i = 0; i < t->rounds; i++) {
        struct orbit_lease l;
        struct orbit_execution ex;
        while (orbit_pool_reserve(t->p, t->id, &l) != 0)
            ;   /* 16 units, at most 8 threads: a busy refusal only while another holds them */
        if (orbit_pool_accept(t->p, &l, &ex) == 0)
            orbit_execution_complete(&ex);
    }
    if (t->hold)
        pthread_barrier_wait(t->hold);   /* everyone counted */
    if (t->hold)
        pthread_barrier_wait(t->hold);   /* the main thread has read */
    return NULL;
}

static void run_threads(struct orbit_pool *p, orbit_id id, int n, int rounds)
{
    pthread_t th[8];
    struct thread_args a = { p, id, rounds, NULL };
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, reserve_rounds, &a), 0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

START_TEST(threads_of_one_life_count_exactly_and_reuse_their_slots)
{
    const char *name = tu_fleet_name("ctrth");
    struct orbit_fleet *f = tu_join(name, 4, 0, 0, backing);
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, (orbit_key){ 3, 4 }, 16, &id), 0);
    run_threads(p, id, 6, 20000);
    uint64_t busy = value_of(f, ORBIT_POOL_KIND, 0, "busy_refusals");
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, 0, "reservations"), 6 * 20000);
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, 0, "completions"), 6 * 20000);
    run_threads(p, id, 6, 1000);   /* new threads adopt the ended ones' slots */
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, 0, "reservations"), 6 * 21000);
    ck_assert_uint_ge(value_of(f, ORBIT_POOL_KIND, 0, "busy_refusals"), busy);
    struct orbit_counters c;
    ck_assert_int_eq(orbit_fleet_counters(f, ORBIT_POOL_KIND, 0, &c), 0);
    ck_assert_uint_le(c.slots, 6);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(a_leave_folds_and_a_rejoin_starts_from_zero)
{
    const char *name = tu_fleet_name("ctrlv");
    struct orbit_fleet *f = tu_join(name, 4, 0, 0, backing);
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, (orbit_key){ 5, 6 }, 4, &id), 0);
    run_threads(p, id, 1, 100);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_uint_eq(value_of(obs, ORBIT_POOL_KIND, ORBIT_NODE_NONE, "reservations"), 100);
    ck_assert_uint_eq(value_of(obs, ORBIT_POOL_KIND, 0, "reservations"), 0);
    struct orbit_death_counters d;
    ck_assert_int_eq(orbit_fleet_death_counters(obs, &d), 0);
    ck_assert_uint_eq(d.leaves, 1);
    ck_assert_uint_eq(d.deaths_reported, 0);
    f = tu_join(name, 4, 0, 0, backing);
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    ck_assert_int_eq(orbit_pool_register(p, (orbit_key){ 5, 7 }, 4, &id), 0);
    run_threads(p, id, 1, 5);
    ck_assert_uint_eq(value_of(obs, ORBIT_POOL_KIND, 0, "reservations"), 5);
    ck_assert_uint_eq(value_of(obs, ORBIT_POOL_KIND, ORBIT_NODE_NONE, "reservations"), 105);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    orbit_fleet_leave(obs);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(threads_past_the_slots_are_counted_in_the_totals)
{
    const char *name = tu_fleet_name("ctrov");
    struct orbit_fleet *f = tu_join(name, 1, 0, 0, backing);   /* 1 node: 68 writer slots */
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, (orbit_key){ 7, 8 }, 16, &id), 0);
    enum { THREADS = 80 };
    pthread_t th[THREADS];
    pthread_barrier_t hold;
    pthread_barrier_init(&hold, NULL, THREADS + 1);
    struct thread_args a = { p, id, 1, &hold };
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, reserve_rounds, &a), 0);
    pthread_barrier_wait(&hold);   /* all 80 hold a slot or the overflow line now */
    ck_assert_uint_eq(value_of(f, ORBIT_POOL_KIND, ORBIT_NODE_NONE, "reservations"), THREADS);
    struct orbit_counters c;
    ck_assert_int_eq(orbit_fleet_counters(f, ORBIT_POOL_KIND, 0, &c), 0);
    ck_assert_uint_eq(c.slots, orb_ctr_slot_count(1));
    ck_assert_uint_eq(c.value[ORB_CTR_TABLE_FIRST], orb_ctr_slot_count(1));   /* the rest under no node */
    pthread_barrier_wait(&hold);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&hold);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- hostile bytes ---- */

static int segment_fd(const char *name)
{
    struct orbit_segment_info s[8];
    ssize_t n = orbit_fleet_segments(name, s, 8);
    for (ssize_t i = 0; i < n; i++)
        if (s[i].kind == 255)
            return open(s[i].path, O_RDWR);
    return -1;
}

START_TEST(a_garbled_counters_region_is_refused)
{
    const char *name = tu_fleet_name("ctrbad");
    struct orbit_fleet *f = tu_join(name, 4, 0, 0, ORBIT_BACKING_SHM);
    int fd = segment_fd(name);
    ck_assert_int_ge(fd, 0);
    off_t at = (off_t)(ORB_SEG_HEADER_BYTES + orb_fleet_counters_offset(4) +
                       offsetof(struct orb_ctr_header, slot_count));
    uint32_t bad = 1u << 30;
    ck_assert_int_eq(pwrite(fd, &bad, sizeof bad, at), (ssize_t)sizeof bad);
    struct orbit_fleet *obs = NULL;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), -ORBIT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(orbit_last_error(), "counters"));
    uint32_t good = orb_ctr_slot_count(4);
    ck_assert_int_eq(pwrite(fd, &good, sizeof good, at), (ssize_t)sizeof good);
    /* A slot claiming a node past the capacity: read, never trusted as a node. */
    struct orb_ctr_slot garbled = { 0 };
    atomic_init(&garbled.tag, ORB_SLOT_TAG(ORB_SLOT_HELD, ORBIT_POOL_KIND, 999));
    off_t slot0 = (off_t)(ORB_SEG_HEADER_BYTES + orb_fleet_counters_offset(4) + ORB_CTR_HEADER_BYTES +
                          ORB_CTR_KINDS * sizeof(struct orb_ctr_totals));
    ck_assert_int_eq(pwrite(fd, &garbled, sizeof garbled, slot0), (ssize_t)sizeof garbled);
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    struct orbit_counters c;
    ck_assert_int_eq(orbit_fleet_counters(obs, ORBIT_POOL_KIND, 3, &c), 0);
    ck_assert_uint_eq(c.slots, 0);
    ck_assert_int_eq(orbit_fleet_counters(obs, ORBIT_POOL_KIND, 4, &c), -ORBIT_EMALFORMED);
    ck_assert_ptr_nonnull(strstr(orbit_last_error(), "node 4"));
    close(fd);
    orbit_fleet_leave(obs);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

int main(void)
{
    backing = tu_backing();
    Suite *s = suite_create("counters");
    TCase *tc = tcase_create("counters");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, workload_counted_exactly_and_kept_past_a_kill);
    tcase_add_test(tc, threads_of_one_life_count_exactly_and_reuse_their_slots);
    tcase_add_test(tc, a_leave_folds_and_a_rejoin_starts_from_zero);
    tcase_add_test(tc, threads_past_the_slots_are_counted_in_the_totals);
    tcase_add_test(tc, a_garbled_counters_region_is_refused);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
