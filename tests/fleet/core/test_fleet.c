/* SPDX-License-Identifier: MIT */
/* Segments and the fleet, with real processes: joins, geometry, corruption, permissions, reaping. */
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <orbit/inspect.h>
#include "testutil.h"
#include "core/fleet_internal.h"
#include "core/table_ops.h"

#define TEST_TABLE_TYPE 99   /* a table type no module registers */

static struct orbit_fleet_opts opts_for(uint16_t capacity, int32_t node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = capacity;
    o.node = node;
    o.backing = tu_backing();
    return o;
}

START_TEST(eight_processes_join_and_get_distinct_nodes)
{
    const char *name = tu_fleet_name("join8");
    struct tu_gate gate, hold;
    tu_gate_init(&gate);
    tu_gate_init(&hold);
    int report[2];
    ck_assert_int_eq(pipe(report), 0);
    pid_t kids[8];
    for (int i = 0; i < 8; i++) {
        if ((kids[i] = fork()) == 0) {
            tu_gate_pass(&gate);   /* all race to create the fleet at once */
            struct orbit_fleet_opts o = opts_for(8, -1);
            struct orbit_fleet *f;
            int rc = orbit_fleet_join(name, &o, &f);
            int node = rc == 0 ? orbit_fleet_node(f) : rc;
            if (write(report[1], &node, sizeof node) != sizeof node) _exit(2);
            tu_gate_pass(&hold);   /* keep the node until every child has reported */
            _exit(rc == 0 ? 0 : 1);
        }
    }
    tu_gate_open(&gate, 8);
    bool seen[8] = { false };
    for (int i = 0; i < 8; i++) {
        int node;
        ck_assert_int_eq(read(report[0], &node, sizeof node), (ssize_t)sizeof node);
        ck_assert_msg(node >= 0 && node < 8, "join failed: %s", orbit_strerror(node));
        ck_assert_msg(!seen[node], "node %d handed out twice", node);
        seen[node] = true;
    }
    /* The fleet is full now: a ninth joiner is refused cleanly. */
    struct orbit_fleet_opts o = opts_for(8, -1);
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), -ORBIT_EFULL);
    tu_gate_open(&hold, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(tu_wait_child(kids[i], 20000), 0);
    /* The children left by exiting without leave: a sweep reports all eight once. */
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_fleet_reap(obs), 8);
    ck_assert_int_eq(orbit_fleet_reap(obs), 0);
    ck_assert_int_eq(orbit_fleet_nodes(obs, NULL, 0), 0);
    orbit_fleet_leave(obs);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* Joiners that exit the moment they have joined: the creator may publish ready and be gone
 * before an opener that saw ready = 0 checks on it. That opener must see the fleet as ready,
 * never as one whose creator died before publishing (-ORBIT_ECORRUPT). */
START_TEST(a_creator_that_publishes_and_exits_at_once_is_not_taken_for_dead)
{
    int64_t end = tu_now_ns() + 2000000000LL;   /* rounds for about two seconds */
    int rounds = 0;
    for (; rounds < 400 && (rounds < 20 || tu_now_ns() < end); rounds++) {
        const char *name = tu_fleet_name("quick");
        struct tu_gate gate;
        tu_gate_init(&gate);
        pid_t kids[6];
        for (int i = 0; i < 6; i++) {
            if ((kids[i] = fork()) == 0) {
                tu_gate_pass(&gate);
                struct orbit_fleet_opts o = opts_for(8, -1);
                struct orbit_fleet *f;
                int rc = orbit_fleet_join(name, &o, &f);
                _exit(rc == 0 ? 0 : 100 + (rc == -ORBIT_ECORRUPT));   /* exits holding its node */
            }
        }
        tu_gate_open(&gate, 6);
        for (int i = 0; i < 6; i++) {
            int st = tu_wait_child(kids[i], 20000);
            ck_assert_msg(st == 0, "round %d: a joiner ended with %d (101: -ORBIT_ECORRUPT)", rounds, st);
        }
        tu_gate_close(&gate);
        ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    }
}
END_TEST

START_TEST(another_capacity_is_refused_with_egeometry)
{
    const char *name = tu_fleet_name("geom");
    struct orbit_fleet *a = tu_join(name, 4, -1, 0, tu_backing()), *b;
    struct orbit_fleet_opts o = opts_for(5, -1);
    ck_assert_int_eq(orbit_fleet_join(name, &o, &b), -ORBIT_EGEOMETRY);
    o = opts_for(4, -1);
    ck_assert_int_eq(orbit_fleet_join(name, &o, &b), 0);
    ck_assert_uint_ne(orbit_fleet_node(a), orbit_fleet_node(b));
    orbit_fleet_leave(b);
    orbit_fleet_leave(a);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(bad_options_are_malformed)
{
    struct orbit_fleet *f;
    struct orbit_fleet_opts o = opts_for(0, -1);
    ck_assert_int_eq(orbit_fleet_join("x", &o, &f), -ORBIT_EMALFORMED);
    o = opts_for(4097, -1);
    ck_assert_int_eq(orbit_fleet_join("x", &o, &f), -ORBIT_EMALFORMED);
    o = opts_for(4, 4);
    ck_assert_int_eq(orbit_fleet_join("x", &o, &f), -ORBIT_EMALFORMED);
    o = opts_for(4, -2);
    ck_assert_int_eq(orbit_fleet_join("x", &o, &f), -ORBIT_EMALFORMED);
    o = opts_for(4, -1);
    o.mode = 0666;
    ck_assert_int_eq(orbit_fleet_join("x", &o, &f), -ORBIT_EMALFORMED);
    o.mode = 0;
    ck_assert_int_eq(orbit_fleet_join("a/b", &o, &f), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_join("", &o, &f), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_join(".hidden", &o, &f), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_join("x", &o, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_observe("t-no-such-fleet-here", &f), -ENOENT);
    ck_assert_int_eq(orbit_fleet_unlink("t-no-such-fleet-here"), -ENOENT);
}
END_TEST

/* Write garbage over (or cut) the fleet segment and reopen it. */
static void damage_and_expect(const char *how, int expected)
{
    const char *name = tu_fleet_name(how);
    struct orbit_fleet *f = tu_join(name, 4, -1, 0, ORBIT_BACKING_SHM);
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", name);
    orbit_fleet_leave(f);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    if (strcmp(how, "garbage") == 0) {
        char junk[4096];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 7 + 3);
        ck_assert_int_eq(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    } else if (strcmp(how, "truncated") == 0) {
        ck_assert_int_eq(ftruncate(fd, 100), 0);
    } else if (strcmp(how, "shrunk") == 0) {
        ck_assert_int_eq(ftruncate(fd, 4096), 0);
    } else if (strcmp(how, "flipped") == 0) {
        char byte;
        ck_assert_int_eq(pread(fd, &byte, 1, 24), 1);   /* inside the checked header fields */
        byte ^= 0x40;
        ck_assert_int_eq(pwrite(fd, &byte, 1, 24), 1);
    }
    close(fd);
    struct orbit_fleet_opts o = opts_for(4, -1);
    o.backing = ORBIT_BACKING_SHM;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), expected);
    ck_assert_int_eq(orbit_fleet_observe(name, &f), expected);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}

START_TEST(a_garbled_or_truncated_segment_is_corrupt)
{
    damage_and_expect("garbage", -ORBIT_ECORRUPT);
    damage_and_expect("truncated", -ORBIT_ECORRUPT);
    damage_and_expect("shrunk", -ORBIT_ECORRUPT);
    damage_and_expect("flipped", -ORBIT_ECORRUPT);
}
END_TEST

START_TEST(open_existing_reads_the_geometry_back)
{
    const char *name = tu_fleet_name("exist");
    struct orbit_fleet *f = tu_join(name, 12, 3, 77, tu_backing()), *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_uint_eq(orbit_fleet_capacity(obs), 12);
    ck_assert_uint_eq(orbit_fleet_node(obs), ORBIT_NODE_NONE);
    struct orbit_node_info ni[12];
    ck_assert_int_eq(orbit_fleet_nodes(obs, ni, 12), 1);
    ck_assert_uint_eq(ni[0].node, 3);
    ck_assert_uint_eq(ni[0].incarnation, 77);
    ck_assert_int_eq(ni[0].pid, getpid());
    ck_assert(ni[0].alive);
    ck_assert_uint_eq(ni[0].start_time, orb_proc_start_time(getpid()));
    struct orb_segment seg;
    ck_assert_int_eq(orb_segment_open_existing(name, ORB_FLEET_KIND, &seg), 0);
    struct orb_fleet_geometry g;
    memcpy(&g, orb_seg_hdr(&seg)->geometry, sizeof g);
    ck_assert_uint_eq(g.capacity, 12);
    ck_assert_uint_eq(g.record_bytes, 64);
    orb_segment_close(&seg);
    orbit_fleet_leave(obs);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(an_exact_node_held_by_a_live_process_is_refused_then_taken_over)
{
    const char *name = tu_fleet_name("exact");
    struct tu_gate hold;
    tu_gate_init(&hold);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        struct orbit_fleet_opts o = opts_for(4, 2);
        struct orbit_fleet *f;
        char ok = orbit_fleet_join(name, &o, &f) == 0 ? 1 : 0;
        if (write(ready[1], &ok, 1) != 1) _exit(2);
        tu_gate_pass(&hold);
        _exit(0);
    }
    char ok;
    ck_assert_int_eq(read(ready[0], &ok, 1), 1);
    ck_assert_int_eq(ok, 1);
    struct orbit_fleet_opts o = opts_for(4, 2);
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), -ORBIT_ECLAIMED);
    tu_gate_open(&hold, 1);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 0);
    /* Its holder is dead now: the node is taken over (its earlier life reported dead). */
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), 0);
    ck_assert_uint_eq(orbit_fleet_node(f), 2);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(a_zombie_counts_as_dead_and_a_live_node_never_does)
{
    const char *name = tu_fleet_name("zombie");
    struct orbit_fleet *me = tu_join(name, 4, 0, 0, tu_backing());
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        struct orbit_fleet_opts o = opts_for(4, 1);
        struct orbit_fleet *f;
        char ok = orbit_fleet_join(name, &o, &f) == 0 ? 1 : 0;
        if (write(ready[1], &ok, 1) != 1) _exit(2);
        _exit(0);   /* exits; the parent does not reap it yet */
    }
    char ok;
    ck_assert_int_eq(read(ready[0], &ok, 1), 1);
    ck_assert_int_eq(ok, 1);
    /* Wait for the exit without reaping it (WNOWAIT leaves a zombie). */
    siginfo_t si;
    ck_assert_int_eq(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT), 0);
    ck_assert_int_eq(orbit_fleet_reap(me), 1);
    ck_assert_int_eq(orbit_fleet_reap(me), 0);
    struct orbit_node_info ni[4];
    ck_assert_int_eq(orbit_fleet_nodes(me, ni, 4), 1);   /* only this live process is left */
    ck_assert_uint_eq(ni[0].node, 0);
    ck_assert_int_eq(tu_wait_child(kid, 1000), 0);
    orbit_fleet_leave(me);
    orbit_fleet_unlink(name);
}
END_TEST

static void *sleeper(void *arg)
{
    int fd = *(int *)arg;
    char c;
    if (read(fd, &c, 1) < 0)   /* until the parent closes its end */
        _exit(3);
    _exit(0);
}

/* The one identity rule: a zombie has exited; a leader that called pthread_exit while a thread runs has not. */
START_TEST(process_identity_follows_one_zombie_rule)
{
    uint64_t self = 0, t = 0;
    ck_assert_int_eq(orbit_process_start_time(getpid(), &self), 0);
    ck_assert_uint_eq(self, orb_proc_start_time(getpid()));
    ck_assert_int_eq(orbit_process_exiting(getpid()), 0);
    ck_assert_int_eq(orbit_process_start_time(0, &t), -ESRCH);
    int hold[2];
    ck_assert_int_eq(pipe(hold), 0);
    pid_t kid = fork();
    if (kid == 0) {
        pthread_t th;
        close(hold[1]);
        if (pthread_create(&th, NULL, sleeper, &hold[0]) != 0)
            _exit(2);
        pthread_exit(NULL);   /* the leader turns zombie; the process lives on in its thread */
    }
    close(hold[0]);
    char state = 0;
    for (int i = 0; i < 2000 && state != 'Z'; i++) {   /* wait for the leader's zombie state */
        char path[64], buf[256];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)kid);
        FILE *fp = fopen(path, "r");
        ck_assert_ptr_nonnull(fp);
        char *p = fgets(buf, sizeof buf, fp) ? strrchr(buf, ')') : NULL;
        state = p ? p[2] : 0;
        fclose(fp);
        if (state != 'Z')
            tu_sleep_ms(1);
    }
    ck_assert_int_eq(state, 'Z');
    ck_assert_int_eq(orbit_process_start_time(kid, &t), 0);   /* alive: its thread runs */
    ck_assert_int_eq(orbit_process_exiting(kid), 0);
    close(hold[1]);   /* the thread exits the process */
    siginfo_t si;
    ck_assert_int_eq(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT), 0);
    ck_assert_int_eq(orbit_process_start_time(kid, &t), -ESRCH);   /* a zombie, not reaped: exited */
    ck_assert_int_eq(orbit_process_exiting(kid), 1);
    ck_assert_int_eq(tu_wait_child(kid, 1000), 0);
    ck_assert_int_eq(orbit_process_start_time(kid, &t), -ESRCH);   /* reaped: gone */
    ck_assert_int_eq(orbit_process_exiting(kid), 1);
}
END_TEST

struct exiting_reader { pid_t pid; _Atomic bool stop; unsigned zeros, calls; };

static void *read_exiting(void *arg)
{
    struct exiting_reader *r = arg;
    while (!atomic_load(&r->stop)) {
        r->zeros += orbit_process_exiting(r->pid) == 0;
        r->calls++;
    }
    return NULL;
}

/* A zombie reaped while orbit_process_exiting reads its /proc entry is gone, never "running". */
START_TEST(a_process_reaped_mid_read_counts_as_exiting)
{
    unsigned zeros = 0, calls = 0;
    for (int i = 0; i < 200; i++) {
        pid_t kid = fork();
        ck_assert_int_ge(kid, 0);
        if (kid == 0) {
            pause();
            _exit(0);
        }
        ck_assert_int_eq(kill(kid, SIGKILL), 0);
        siginfo_t si;
        ck_assert_int_eq(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT), 0);   /* a zombie now */
        struct exiting_reader r = { .pid = kid };
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, read_exiting, &r), 0);
        while (r.calls < 3)
            sched_yield();
        ck_assert_int_eq(waitpid(kid, NULL, 0), kid);
        atomic_store(&r.stop, true);
        pthread_join(t, NULL);
        zeros += r.zeros;
        calls += r.calls;
    }
    ck_assert_msg(zeros == 0, "%u of %u reads called a dead process running", zeros, calls);
}
END_TEST

START_TEST(node_snapshots_and_a_replaced_fleet_segment)
{
    const char *name = tu_fleet_name("snap");
    struct orbit_fleet *me = tu_join(name, 4, 2, 77, tu_backing()), *obs;
    struct orbit_node_snapshot s;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_fleet_node_snapshot(obs, 2, &s), 0);
    ck_assert_int_eq(s.state, ORBIT_NODE_LIVE);
    ck_assert_int_eq(s.pid, getpid());
    ck_assert_uint_eq(s.incarnation, 77);
    ck_assert_uint_eq(s.start_time, orb_proc_start_time(getpid()));
    ck_assert_uint_eq(s.joins, 1);
    ck_assert_int_eq(orbit_fleet_node_snapshot(obs, 1, &s), 0);
    ck_assert_int_eq(s.state, ORBIT_NODE_FREE);
    ck_assert_int_eq(orbit_fleet_node_snapshot(obs, 4, &s), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_replaced(obs), 0);
    orbit_fleet_leave(me);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    ck_assert_int_eq(orbit_fleet_replaced(obs), 1);   /* unlinked */
    me = tu_join(name, 4, 2, 78, tu_backing());
    ck_assert_int_eq(orbit_fleet_replaced(obs), 1);   /* another file under the name now */
    orbit_fleet_leave(obs);
    orbit_fleet_leave(me);
    orbit_fleet_unlink(name);
}
END_TEST

/* Join node 1 in a child, send the incarnation over fd, then wait to be killed. */
static void join_node1_and_wait(const char *name, int fd)
{
    struct orbit_fleet_opts o = opts_for(4, 1);
    struct orbit_fleet *f;
    uint64_t inc = orbit_fleet_join(name, &o, &f) == 0 ? orbit_fleet_incarnation(f) : 0;
    if (write(fd, &inc, sizeof inc) != (ssize_t)sizeof inc || !inc)
        _exit(1);
    pause();
    _exit(0);
}

/*
 * A node whose life ended and was reported, taken by a joiner that is not
 * LIVE yet: the record reads JOINING and must not still name the dead life
 * (a supervisor asking whether that life holds its node would hear yes). The
 * joiner is held in JOINING by a read lock on its life byte.
 */
START_TEST(a_claim_never_shows_the_dead_life_it_replaces)
{
    const char *name = tu_fleet_name("claim");
    struct orbit_fleet *me = tu_join(name, 4, 0, 0, tu_backing());
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t a = fork();
    ck_assert_int_ge(a, 0);
    if (a == 0)
        join_node1_and_wait(name, p[1]);
    uint64_t inc_a = 0;
    ck_assert_int_eq(read(p[0], &inc_a, sizeof inc_a), (ssize_t)sizeof inc_a);
    ck_assert_uint_ne(inc_a, 0);
    ck_assert_int_eq(kill(a, SIGKILL), 0);
    ck_assert_int_eq(tu_wait_child(a, 5000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_node_dead(me, 1, inc_a), 0);
    struct orbit_node_snapshot s;
    ck_assert_int_eq(orbit_fleet_node_snapshot(me, 1, &s), 0);
    ck_assert_int_eq(s.state, ORBIT_NODE_FREE);
    int byte = tu_hold_life_byte(name, 1, s.joins);
    pid_t b = fork();
    ck_assert_int_ge(b, 0);
    if (b == 0)
        join_node1_and_wait(name, p[1]);
    int64_t end = tu_now_ns() + 900 * 1000000LL;
    struct orbit_node_info info[4];
    ssize_t n = 0;
    while (tu_now_ns() < end && (n = orbit_fleet_nodes(me, info, 4)) < 2)
        tu_sleep_ms(1);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(info[1].node, 1);
    ck_assert_int_eq(info[1].state, ORBIT_NODE_JOINING);
    ck_assert_uint_ne(info[1].incarnation, inc_a);
    ck_assert_int_eq(orbit_fleet_node_snapshot(me, 1, &s), 0);
    ck_assert_int_eq(s.state, ORBIT_NODE_JOINING);
    ck_assert_uint_ne(s.incarnation, inc_a);
    tu_release_life_byte(byte);
    uint64_t inc_b = 0;
    ck_assert_int_eq(read(p[0], &inc_b, sizeof inc_b), (ssize_t)sizeof inc_b);   /* B is LIVE now */
    ck_assert_int_eq(orbit_fleet_nodes(me, info, 4), 2);
    ck_assert_int_eq(info[1].state, ORBIT_NODE_LIVE);
    ck_assert_uint_eq(info[1].incarnation, inc_b);
    ck_assert_int_eq(kill(b, SIGKILL), 0);
    ck_assert_int_eq(tu_wait_child(b, 5000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_reap(me), 1);
    close(p[0]);
    close(p[1]);
    orbit_fleet_leave(me);
    orbit_fleet_unlink(name);
}
END_TEST

/* The registry names the built tables; a segment of a type no module has is listed and left alone. */
START_TEST(tables_of_unknown_type_are_listed_and_left_alone)
{
    ck_assert_str_eq(orbit_table_type_name(ORB_TABLE_FLEET), "fleet");
    ck_assert_str_eq(orbit_table_type_name(TEST_TABLE_TYPE), "unknown");
    ck_assert_str_eq(orbit_table_type_name(1000), "unknown");
    ck_assert_ptr_null(orb_table_ops_of(TEST_TABLE_TYPE));
    /* Every module built registered once, each under a type and a name of its own
     * (two modules on one type would leave fewer types known than modules built). */
    int built = 0, known = 0;
#ifdef ORBIT_WITH_POOL
    built++;
#endif
#ifdef ORBIT_WITH_STREAM
    built++;
#endif
#ifdef ORBIT_WITH_ADMISSION
    built++;
#endif
#ifdef ORBIT_WITH_EXCHANGE
    built++;
#endif
    for (unsigned a = 2; a < 256; a++) {
        const struct orb_table_ops *ops = orb_table_ops_of((uint8_t)a);
        if (!ops)
            continue;
        known++;
        ck_assert_uint_eq(ops->kind->type, a);
        ck_assert_uint_le(strlen(ops->name), ORBIT_TABLE_NAME_MAX);
        for (unsigned b = a + 1; b < 256; b++)
            if (orb_table_ops_of((uint8_t)b))
                ck_assert_str_ne(orbit_table_type_name(a), orbit_table_type_name(b));
    }
    ck_assert_int_eq(known, built);
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(NULL, NULL, &f), 0);
    uint32_t geom = 7;
    struct orb_seg_request req = { .kind = 30, .table_type = TEST_TABLE_TYPE, .geometry = &geom,
                                   .geometry_len = sizeof geom, .table_bytes = 8192 };
    struct orb_segment seg;
    ck_assert_int_eq(orb_fleet_table_open(f, &req, &seg), 0);
    struct orbit_table_info t[4];
    ck_assert_int_eq(orbit_fleet_tables(f, t, 4), 1);
    ck_assert_uint_eq(t[0].kind, 30);
    ck_assert_uint_eq(t[0].type, TEST_TABLE_TYPE);
    ck_assert(!t[0].built);
    ck_assert_str_eq(t[0].name, "unknown");
    ck_assert_int_eq(orbit_fleet_reset_tables(f), 0);
    struct orbit_reclaim r;
    ck_assert_int_eq(orbit_fleet_account(f, 0, orbit_fleet_incarnation(f), &r), 0);
    ck_assert_uint_eq(r.tables, 0);
    ck_assert_int_eq(orbit_fleet_tables(NULL, t, 4), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_account(f, 0, 0, NULL), -ORBIT_EMALFORMED);
    orb_fleet_table_close(f, &seg);
    ck_assert_int_eq(orbit_fleet_tables(f, NULL, 0), 0);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(a_clean_leave_frees_the_node)
{
    const char *name = tu_fleet_name("leave");
    struct orbit_fleet *a = tu_join(name, 2, -1, 0, tu_backing());
    struct orbit_fleet *b = tu_join(name, 2, -1, 0, tu_backing());
    struct orbit_fleet_opts o = opts_for(2, -1);
    struct orbit_fleet *c;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &c), -ORBIT_EFULL);
    uint16_t freed = orbit_fleet_node(b);
    orbit_fleet_leave(b);
    ck_assert_int_eq(orbit_fleet_join(name, &o, &c), 0);
    ck_assert_uint_eq(orbit_fleet_node(c), freed);
    ck_assert_int_eq(orbit_fleet_reap(a), 0);
    orbit_fleet_leave(c);
    orbit_fleet_leave(a);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(the_incarnation_is_given_or_derived_per_process_life)
{
    const char *name = tu_fleet_name("inc");
    struct orbit_fleet *a = tu_join(name, 4, -1, 0, tu_backing());
    struct orbit_fleet *b = tu_join(name, 4, -1, 0, tu_backing());
    struct orbit_fleet *c = tu_join(name, 4, -1, 9, tu_backing());
    ck_assert_uint_ne(orbit_fleet_incarnation(a), 0);
    ck_assert_uint_eq(orbit_fleet_incarnation(a), orbit_fleet_incarnation(b));   /* same life */
    ck_assert_uint_eq(orbit_fleet_incarnation(c), 9);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t kid = fork();
    if (kid == 0) {
        struct orbit_fleet_opts o = opts_for(4, -1);
        struct orbit_fleet *k;
        uint64_t inc = orbit_fleet_join(name, &o, &k) == 0 ? orbit_fleet_incarnation(k) : 0;
        _exit(write(p[1], &inc, sizeof inc) == sizeof inc ? 0 : 1);
    }
    uint64_t kid_inc;
    ck_assert_int_eq(read(p[0], &kid_inc, sizeof kid_inc), (ssize_t)sizeof kid_inc);
    ck_assert_uint_ne(kid_inc, 0);
    ck_assert_uint_ne(kid_inc, orbit_fleet_incarnation(a));
    ck_assert_int_eq(tu_wait_child(kid, 5000), 0);
    orbit_fleet_leave(c);
    orbit_fleet_leave(b);
    orbit_fleet_leave(a);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(segments_are_0600_by_default)
{
    const char *name = tu_fleet_name("mode");
    struct orbit_fleet *f = tu_join(name, 2, -1, 0, ORBIT_BACKING_SHM);
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", name);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(a_group_fleet_is_0660_and_chowned)
{
    if (geteuid() != 0) {
        tu_skip("a_group_fleet_is_0660_and_chowned: needs root to chown");
        return;
    }
    const char *name = tu_fleet_name("group");
    struct orbit_fleet *f;
    char path[256];
    struct stat st;
    struct orbit_fleet_opts o = opts_for(2, -1);
    o.backing = ORBIT_BACKING_SHM;
    o.gid = 100;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), 0);
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", name);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0660);
    ck_assert_uint_eq(st.st_gid, 100);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(another_uid_cannot_open_a_0600_fleet)
{
    if (geteuid() != 0) {
        tu_skip("another_uid_cannot_open_a_0600_fleet: needs root to switch uid");
        return;
    }
    const char *name = tu_fleet_name("uid");
    struct orbit_fleet *f = tu_join(name, 2, -1, 0, tu_backing());
    pid_t kid = fork();
    if (kid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        struct orbit_fleet_opts o = opts_for(2, -1);
        struct orbit_fleet *g;
        int rc = orbit_fleet_join(name, &o, &g);
        int rc2 = orbit_fleet_observe(name, &g);
        _exit(rc == -EACCES && rc2 == -EACCES ? 0 : 1);
    }
    ck_assert_int_eq(tu_wait_child(kid, 5000), 0);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

static int drop_to_nobody(void)
{
    return setgroups(0, NULL) == 0 && setresgid(65534, 65534, 65534) == 0 &&
           setresuid(65534, 65534, 65534) == 0 ? 0 : -1;
}

static bool path_exists(const char *fmt, const char *name)
{
    char path[300];
    snprintf(path, sizeof path, fmt, name);
    return access(path, F_OK) == 0;
}

/* AUTO as a user who may not write hugetlbfs: /dev/shm, and no lock file left behind. */
START_TEST(auto_as_an_unprivileged_user_falls_back_to_shm)
{
    if (geteuid() != 0) {
        tu_skip("auto_as_an_unprivileged_user_falls_back_to_shm: needs root to switch uid");
        return;
    }
    const char *name = tu_fleet_name("nobody");
    pid_t kid = fork();
    if (kid == 0) {
        if (drop_to_nobody() != 0)
            _exit(3);
        struct orbit_fleet_opts o = opts_for(2, -1);
        o.backing = ORBIT_BACKING_AUTO;
        struct orbit_fleet *f;
        int rc = orbit_fleet_join(name, &o, &f);
        if (rc != 0)
            _exit(rc == -EACCES ? 4 : 5);
        bool shm = orbit_fleet_backing(f) == ORBIT_BACKING_SHM;
        orbit_fleet_leave(f);
        _exit(shm ? 0 : 6);
    }
    ck_assert_int_eq(tu_wait_child(kid, 10000), 0);
    ck_assert(path_exists("/dev/shm/orbit.%s.255", name));
    ck_assert(!path_exists("/dev/shm/orbit.%s.255.lock", name));
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    ck_assert_int_eq(orbit_fleet_unlink(name), -ENOENT);
}
END_TEST

/* A creator killed while it held its creation lock leaves the file: unlink removes it and says so. */
START_TEST(unlink_removes_a_left_lock_file_and_says_so)
{
    const char *name = tu_fleet_name("lockleft");
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.3.lock", name);
    int fd = open(path, O_RDONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    ck_assert_int_eq(access(path, F_OK), -1);
    ck_assert_int_eq(orbit_fleet_unlink(name), -ENOENT);
}
END_TEST

/* A creator killed before linking its segment into place leaves a .tmp file: unlink removes it. */
START_TEST(unlink_removes_a_dead_creators_half_built_segment)
{
    const char *name = tu_fleet_name("tmpleft");
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 0);   /* a pid that is gone */
    char dead[400], own[400], live[400];
    snprintf(dead, sizeof dead, "/dev/shm/orbit.%s.255.tmp.%d.12345", name, (int)kid);
    snprintf(own, sizeof own, "/dev/shm/orbit.%s.2.tmp.%d.12345", name, (int)getpid());
    snprintf(live, sizeof live, "/dev/shm/orbit.%s.3.tmp.%d.12345", name, (int)getppid());
    const char *paths[] = { dead, own, live };
    int live_fd = -1;
    for (int i = 0; i < 3; i++) {
        int fd = open(paths[i], O_RDWR | O_CREAT | O_EXCL, 0600);
        ck_assert_int_ge(fd, 0);
        if (paths[i] == live) {   /* a live creator holds its file's creator lock until its link */
            struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = ORB_SEG_CREATOR_LOCK_OFF,
                                .l_len = 1 };
            ck_assert_int_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
            live_fd = fd;
        } else {
            close(fd);
        }
    }
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    ck_assert_int_eq(access(dead, F_OK), -1);
    ck_assert_int_eq(access(own, F_OK), -1);    /* no lock: its creator is gone */
    ck_assert_int_eq(access(live, F_OK), 0);    /* another live creator's file is its own */
    close(live_fd);
    ck_assert_int_eq(unlink(live), 0);
    ck_assert_int_eq(orbit_fleet_unlink(name), -ENOENT);
}
END_TEST

/*
 * Another user plants the fleet's creation lock first: 0 a file it holds
 * flocked, 1 a FIFO. Creation neither waits on it nor fails; the join
 * runs in a child with a deadline well under the 10 s bound on trusted holders.
 */
START_TEST(a_lock_file_planted_by_another_user_cannot_block_creation)
{
    if (geteuid() != 0) {
        tu_skip("a_lock_file_planted_by_another_user_cannot_block_creation: needs root");
        return;
    }
    const char *name = tu_fleet_name("planted");
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255.lock", name);
    struct tu_gate ready, done;
    tu_gate_init(&ready);
    tu_gate_init(&done);
    pid_t planter = fork();
    if (planter == 0) {
        if (drop_to_nobody() != 0)
            _exit(3);
        if (_i == 1) {
            if (mkfifo(path, 0666) != 0)
                _exit(4);
        } else {
            int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0666);
            if (fd < 0 || flock(fd, LOCK_EX) != 0)
                _exit(5);
        }
        tu_gate_open(&ready, 1);
        tu_gate_pass(&done);
        _exit(0);
    }
    tu_gate_pass(&ready);
    pid_t joiner = fork();
    if (joiner == 0) {
        struct orbit_fleet_opts o = opts_for(2, -1);
        struct orbit_fleet *f;
        _exit(orbit_fleet_join(name, &o, &f) == 0 ? 0 : 1);
    }
    ck_assert_int_eq(tu_wait_child(joiner, 5000), 0);
    tu_gate_open(&done, 1);
    ck_assert_int_eq(tu_wait_child(planter, 5000), 0);
    ck_assert_int_eq(access(path, F_OK), 0);   /* another user's file: not ours to remove */
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    tu_gate_close(&ready);
    tu_gate_close(&done);
}
END_TEST

/*
 * Another user plants a table segment of the fleet before anyone creates it:
 * a valid segment of its own, 0 left writable by everyone, 1 reached through
 * a symlink under the name. A member refuses it (-EACCES) instead of sharing
 * memory that user writes.
 */
START_TEST(a_segment_planted_by_another_user_is_refused)
{
    if (geteuid() != 0) {
        tu_skip("a_segment_planted_by_another_user_is_refused: needs root");
        return;
    }
    const char *name = tu_fleet_name("plantseg");
    char path[300], real[320];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.200", name);
    snprintf(real, sizeof real, "/dev/shm/orbit.%s.planted", name);
    uint32_t geom = 5;
    struct orb_seg_request req = { .fleet = name, .kind = 200, .table_type = TEST_TABLE_TYPE,
                                   .fleet_capacity = 2, .geometry = &geom, .geometry_len = sizeof geom,
                                   .table_bytes = 8192, .backing = ORBIT_BACKING_SHM, .gid = -1 };
    pid_t planter = fork();
    if (planter == 0) {
        struct orb_segment seg;
        if (drop_to_nobody() != 0 || orb_segment_open(&req, &seg) != 0)
            _exit(3);
        if (chmod(path, 0666) != 0)
            _exit(4);
        if (_i == 1 && (rename(path, real) != 0 || symlink(real, path) != 0))
            _exit(5);
        _exit(0);
    }
    ck_assert_int_eq(tu_wait_child(planter, 5000), 0);
    struct orb_segment seg;
    int rc = orb_segment_open(&req, &seg);
    if (rc == 0)
        orb_segment_close(&seg);
    ck_assert_msg(rc == -EACCES, "a planted segment was %s", rc == 0 ? "used" : orbit_strerror(rc));
    ck_assert_int_eq(orb_segment_open_existing(name, 200, &seg), -EACCES);
    ck_assert_int_eq(unlink(path), 0);
    if (_i == 1)
        ck_assert_int_eq(unlink(real), 0);
    ck_assert_int_eq(orb_segment_open(&req, &seg), 0);   /* once it is gone, ours is made */
    struct stat st;
    ck_assert_int_eq(fstat(seg.fd, &st), 0);
    ck_assert_uint_eq(st.st_uid, 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    orb_segment_close(&seg);
    ck_assert_int_eq(unlink(path), 0);
}
END_TEST

/* A node record whose state word another member scribbled over: refused, skipped, never spun on. */
START_TEST(a_garbled_node_state_is_corrupt_not_a_hang)
{
    const char *name = tu_fleet_name("garbled");
    struct orbit_fleet *f = tu_join(name, 3, 0, 0, tu_backing());
    atomic_store(&f->nodes[1].state, 77);
    struct orbit_fleet_opts o = opts_for(3, 1);
    struct orbit_fleet *g;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &g), -ORBIT_ECORRUPT);
    o.node = -1;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &g), 0);
    ck_assert_uint_eq(orbit_fleet_node(g), 2);
    ck_assert_int_eq(orbit_fleet_reap(f), 0);
    ck_assert_int_eq(orbit_fleet_node_dead(f, 1, 0), 0);
    ck_assert_uint_eq(atomic_load(&f->nodes[1].state), 77);   /* left as found */
    orbit_fleet_leave(g);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(private_fleets_share_tables_within_the_process)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.backing = ORBIT_BACKING_SHM;   /* a NULL name is PRIVATE whatever this says */
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), 0);
    ck_assert_int_eq(orbit_fleet_backing(f), ORBIT_BACKING_PRIVATE);
    ck_assert_uint_eq(orbit_fleet_node(f), 0);
    uint32_t geom = 7;
    struct orb_seg_request req = { .kind = 200, .table_type = TEST_TABLE_TYPE, .geometry = &geom,
                                   .geometry_len = sizeof geom, .table_bytes = 8192 };
    struct orb_segment s1, s2, s3;
    ck_assert_int_eq(orb_fleet_table_open(f, &req, &s1), 0);
    ck_assert_int_eq(orb_fleet_table_open(f, &req, &s2), 0);
    ck_assert_ptr_eq(s1.base, s2.base);
    geom = 8;
    ck_assert_int_eq(orb_fleet_table_open(f, &req, &s3), -ORBIT_EGEOMETRY);
    ck_assert_int_eq(orb_fleet_table_open_existing(f, 200, &s3), 0);
    ck_assert_ptr_eq(s3.base, s1.base);
    orb_fleet_table_close(f, &s3);
    orb_fleet_table_close(f, &s2);
    orb_fleet_table_close(f, &s1);
    ck_assert_int_eq(orb_fleet_table_open_existing(f, 200, &s3), -ENOENT);
    orbit_fleet_leave(f);
}
END_TEST

static int die_in_init(struct orb_segment *seg, void *ctx)
{
    (void)seg; (void)ctx;
    _exit(0);   /* the creator dies after linking the segment, before publishing ready */
}

START_TEST(a_creator_that_died_before_ready_is_corrupt_not_a_hang)
{
    const char *name = tu_fleet_name("stuck");
    uint32_t geom = 1;
    struct orb_seg_request req = { .fleet = name, .kind = 9, .table_type = TEST_TABLE_TYPE,
                                   .fleet_capacity = 2, .geometry = &geom, .geometry_len = sizeof geom,
                                   .table_bytes = 8192, .backing = ORBIT_BACKING_SHM, .gid = -1,
                                   .init = die_in_init };
    pid_t kid = fork();
    if (kid == 0) {
        struct orb_segment seg;
        orb_segment_open(&req, &seg);
        _exit(1);
    }
    ck_assert_int_eq(tu_wait_child(kid, 5000), 0);
    req.init = NULL;
    struct orb_segment seg;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orb_segment_open(&req, &seg), -ORBIT_ECORRUPT);
    ck_assert(tu_now_ns() - t0 < 5000000000LL);
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.9", name);
    ck_assert_int_eq(unlink(path), 0);
    /* Gone: the next opener creates it afresh. */
    ck_assert_int_eq(orb_segment_open(&req, &seg), 0);
    ck_assert(seg.created);
    orb_segment_close(&seg);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);   /* the segment and its creation lock */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fleet");
    TCase *tc = tcase_create("fleet");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, eight_processes_join_and_get_distinct_nodes);
    tcase_add_test(tc, a_creator_that_publishes_and_exits_at_once_is_not_taken_for_dead);
    tcase_add_test(tc, another_capacity_is_refused_with_egeometry);
    tcase_add_test(tc, bad_options_are_malformed);
    tcase_add_test(tc, a_garbled_or_truncated_segment_is_corrupt);
    tcase_add_test(tc, open_existing_reads_the_geometry_back);
    tcase_add_test(tc, an_exact_node_held_by_a_live_process_is_refused_then_taken_over);
    tcase_add_test(tc, a_zombie_counts_as_dead_and_a_live_node_never_does);
    tcase_add_test(tc, a_clean_leave_frees_the_node);
    tcase_add_test(tc, process_identity_follows_one_zombie_rule);
    tcase_add_test(tc, a_process_reaped_mid_read_counts_as_exiting);
    tcase_add_test(tc, node_snapshots_and_a_replaced_fleet_segment);
    tcase_add_test(tc, a_claim_never_shows_the_dead_life_it_replaces);
    tcase_add_test(tc, tables_of_unknown_type_are_listed_and_left_alone);
    tcase_add_test(tc, the_incarnation_is_given_or_derived_per_process_life);
    tcase_add_test(tc, segments_are_0600_by_default);
    tcase_add_test(tc, private_fleets_share_tables_within_the_process);
    tcase_add_test(tc, a_garbled_node_state_is_corrupt_not_a_hang);
    tcase_add_test(tc, unlink_removes_a_left_lock_file_and_says_so);
    tcase_add_test(tc, unlink_removes_a_dead_creators_half_built_segment);
    tcase_add_test(tc, a_creator_that_died_before_ready_is_corrupt_not_a_hang);
    suite_add_tcase(s, tc);
    TCase *root = tu_optional_tcase("root");
    tcase_set_timeout(root, 120);
    tcase_add_test(root, a_group_fleet_is_0660_and_chowned);
    tcase_add_test(root, another_uid_cannot_open_a_0600_fleet);
    tcase_add_test(root, auto_as_an_unprivileged_user_falls_back_to_shm);
    tcase_add_loop_test(root, a_lock_file_planted_by_another_user_cannot_block_creation, 0, 2);
    tcase_add_loop_test(root, a_segment_planted_by_another_user_is_refused, 0, 2);
    suite_add_tcase(s, root);
    return tu_run(s);
}
