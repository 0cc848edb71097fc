/* SPDX-License-Identifier: MIT */
/*
 * A member killed -9 between two steps of a key update, stopped at the exact
 * instruction by ORBIT_TEST_POOL_PARK: taking a key reference and counting it
 * in its holds row (hold), the reverse (release), counting a creation and
 * recording its claim (claim), the reverse (finish), counting a resource in
 * its key and setting its member bit (register), the reverse (uncount),
 * taking a watch bit's reference and setting the bit (watch), taking watcher
 * bits and dropping their references (deliver); and a reporter killed
 * half-way through returning a dead node's rows (return). Its death report
 * (resumed by the next one for a killed reporter) must leave the key with
 * nothing counted: no reference, no live or creating count, no watcher.
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <orbit/pool.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "proc.h"

#define CAPACITY 4
#define VICTIM_NODE 1
#define VICTIM_INC 0x7001ull

static const orbit_key KEY = { 7, 77 };
static const orbit_key NEW_KEY = { 8, 88 };   /* inserted by the victim: both key locks held */

struct victim {
    const char *name;
    const char *park;   /* ORBIT_TEST_POOL_PARK for the victim's pool handle */
    int op;
};

enum { OP_VERSION, OP_VERSION_NEW_KEY, OP_CLAIM, OP_FINISH, OP_REGISTER, OP_UNREGISTER, OP_CLAIM_AND_STOP, OP_WATCH,
       OP_WATCH_NEW_KEY };

/* The victim: does the operation; the hook stops it inside (or it stops itself after). */
static int victim(void *arg)
{
    struct victim *v = arg;
    if (v->park)
        setenv("ORBIT_TEST_POOL_PARK", v->park, 1);
    struct orbit_fleet *f = tp_join(v->name, CAPACITY, VICTIM_NODE, VICTIM_INC);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    uint32_t version;
    struct orbit_permit pm;
    orbit_id id;
    switch (v->op) {
    case OP_VERSION:
        orbit_pool_version(p, KEY, &version);
        break;
    case OP_VERSION_NEW_KEY:
        orbit_pool_version(p, NEW_KEY, &version);
        break;
    case OP_CLAIM:
        orbit_pool_claim_create(p, KEY, 4, &pm);
        break;
    case OP_FINISH:
        TP_CHECK(orbit_pool_claim_create(p, KEY, 4, &pm) == 0, "claim");
        orbit_permit_finish(&pm);
        break;
    case OP_REGISTER:
        orbit_pool_register(p, KEY, 2, &id);
        break;
    case OP_UNREGISTER:
        TP_CHECK(orbit_pool_register(p, KEY, 2, &id) == 0, "register");
        orbit_pool_unregister(p, id);
        break;
    case OP_CLAIM_AND_STOP:
        TP_CHECK(orbit_pool_claim_create(p, KEY, 4, &pm) == 0, "claim");
        TP_CHECK(orbit_pool_register(p, KEY, 2, &id) == 0, "register");
        raise(SIGSTOP);
        break;
    case OP_WATCH:
        orbit_pool_watch(p, KEY);
        break;
    case OP_WATCH_NEW_KEY:
        orbit_pool_watch(p, NEW_KEY);
        break;
    }
    return 3;   /* only reached if the hook did not stop it */
}

/* A reporter whose pool handle stops half-way through returning the dead node's rows. */
static int reporter(void *arg)
{
    setenv("ORBIT_TEST_POOL_PARK", "return", 1);
    struct orbit_fleet *obs;
    TP_CHECK(orbit_fleet_observe(arg, &obs) == 0, "observe");
    orbit_fleet_node_dead(obs, VICTIM_NODE, VICTIM_INC);
    return 3;
}

static void stop_and_kill(pid_t kid)
{
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    ck_assert_msg(WIFSTOPPED(st), "the child did not stop at the hook (status %#x)", st);
    kill(kid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
}

/* Nothing counted on any key: the key was reclaimed or is idle with no reference. */
static void assert_nothing_counted(struct orbit_pool *p)
{
    struct orbit_pool_key_info k[8];
    ssize_t n = orbit_pool_keys(p, k, 8);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n && i < 8; i++)
        ck_assert_msg(!k[i].live && !k[i].creating && !k[i].refs && !k[i].watchers,
                      "key slot %u left with live %u creating %u refs %u watchers %u", k[i].index,
                      k[i].live, k[i].creating, k[i].refs, k[i].watchers);
    ck_assert_int_eq(orbit_pool_owners(p, NULL, 0), 0);
}

/* Only the supervisor's own resource counted on the key (so the key outlives the victim). */
static void assert_only_ours(struct orbit_pool *p)
{
    struct orbit_pool_key_info k[8];
    ssize_t n = orbit_pool_keys(p, k, 8);
    ck_assert_int_eq(n, 1);
    ck_assert_msg(k[0].live == 1 && !k[0].creating && k[0].refs == 1 && !k[0].watchers,
                  "key left with live %u creating %u refs %u watchers %u (want 1 0 1 0)", k[0].live,
                  k[0].creating, k[0].refs, k[0].watchers);
    ck_assert_int_eq(orbit_pool_owners(p, NULL, 0), 1);
}

/* The key still works for the living: a claim, a register, a budget that counts them. */
static void assert_key_works(struct orbit_pool *p)
{
    struct orbit_permit pm;
    ck_assert_int_eq(orbit_pool_claim_create(p, KEY, 1, &pm), 0);
    orbit_permit_finish(&pm);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    uint32_t live, creating;
    orbit_pool_budget(p, KEY, &live, &creating);
    ck_assert_uint_eq(live, 1);
    ck_assert_uint_eq(creating, 0);
    ck_assert_int_eq(orbit_pool_unregister(p, id), 0);
    assert_nothing_counted(p);
}

static const struct { const char *park; int op; } WINDOWS[] = {
    { "hold", OP_VERSION }, { "hold", OP_VERSION_NEW_KEY }, { "release", OP_VERSION },
    { "release", OP_VERSION_NEW_KEY }, { "claim", OP_CLAIM },
    { "finish", OP_FINISH }, { "register", OP_REGISTER }, { "uncount", OP_UNREGISTER },
    { "watch", OP_WATCH }, { "watch", OP_WATCH_NEW_KEY },
};

/* _i: one window of WINDOWS; the victim is killed there and reported dead (twice). */
START_TEST(a_member_killed_mid_key_update_leaves_nothing_counted)
{
    const char *name = tu_fleet_name("pwin");
    struct orbit_fleet *f = tu_join(name, CAPACITY, 0, 0x7000, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id ours;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &ours), 0);
    struct victim v = { name, WINDOWS[_i].park, WINDOWS[_i].op };
    stop_and_kill(tp_spawn(victim, &v));
    ck_assert_int_eq(orbit_fleet_node_dead(f, VICTIM_NODE, VICTIM_INC), 0);
    assert_only_ours(p);
    ck_assert_int_eq(orbit_fleet_node_dead(f, VICTIM_NODE, VICTIM_INC), 0);   /* idempotent */
    assert_only_ours(p);
    ck_assert_int_eq(orbit_pool_unregister(p, ours), 0);
    assert_nothing_counted(p);
    assert_key_works(p);
    uint32_t version;   /* an insert after a victim killed holding the key-table lock */
    ck_assert_int_eq(orbit_pool_version(p, NEW_KEY, &version), 0);
    assert_nothing_counted(p);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(a_reporter_killed_mid_return_is_finished_by_the_next_report)
{
    const char *name = tu_fleet_name("pret");
    struct orbit_fleet *f = tu_join(name, CAPACITY, 0, 0x7000, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id ours;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &ours), 0);
    struct victim v = { name, NULL, OP_CLAIM_AND_STOP };
    stop_and_kill(tp_spawn(victim, &v));
    uint32_t live, creating;
    orbit_pool_budget(p, KEY, &live, &creating);
    ck_assert_uint_eq(live, 2);
    ck_assert_uint_eq(creating, 1);
    stop_and_kill(tp_spawn(reporter, (void *)name));
    ck_assert_int_eq(orbit_fleet_node_dead(f, VICTIM_NODE, VICTIM_INC), 0);
    assert_only_ours(p);
    ck_assert_int_eq(orbit_pool_unregister(p, ours), 0);
    assert_nothing_counted(p);
    ck_assert_int_eq(orbit_fleet_nodes(f, NULL, 0), 1);   /* the victim's node is free again */
    assert_key_works(p);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* A member killed between taking our watcher bit and its reference; its report finishes it. */
START_TEST(a_deliverer_killed_mid_delivery_leaves_the_watch_delivered)
{
    const char *name = tu_fleet_name("pdel");
    struct orbit_fleet *f = tu_join(name, CAPACITY, 0, 0x7000, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id ours;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &ours), 0);
    ck_assert_int_eq(orbit_pool_watch(p, KEY), 0);
    struct orbit_pool_key_info k;
    ck_assert_int_eq(orbit_pool_keys(p, &k, 1), 1);
    ck_assert_uint_eq(k.refs, 2);   /* our resource and our watch */
    ck_assert_uint_eq(k.watchers, 1);
    struct victim v = { name, "deliver", OP_REGISTER };   /* its register delivers our watch */
    stop_and_kill(tp_spawn(victim, &v));
    ck_assert_int_eq(orbit_fleet_node_dead(f, VICTIM_NODE, VICTIM_INC), 0);
    assert_only_ours(p);
    ck_assert_int_eq(orbit_fleet_node_dead(f, VICTIM_NODE, VICTIM_INC), 0);   /* idempotent */
    assert_only_ours(p);
    ck_assert_int_eq(orbit_pool_watch(p, KEY), 0);   /* watched again: one bit, one reference */
    ck_assert_int_eq(orbit_pool_watch(p, KEY), 0);
    ck_assert_int_eq(orbit_pool_keys(p, &k, 1), 1);
    ck_assert_uint_eq(k.refs, 2);
    ck_assert_uint_eq(k.watchers, 1);
    ck_assert_int_eq(orbit_pool_unregister(p, ours), 0);   /* delivers it: the key goes */
    assert_nothing_counted(p);
    assert_key_works(p);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* One unit of our resource through reserve, accept and complete: a change on KEY. */
static void cycle(struct orbit_pool *p, orbit_id id)
{
    struct orbit_lease l;
    struct orbit_execution e;
    ck_assert_int_eq(orbit_pool_reserve(p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(p, &l, &e), 0);
    orbit_execution_complete(&e);
}

static void assert_rung(int fd)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    ck_assert_int_eq(poll(&pfd, 1, 20000), 1);
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
}

/* A change while a stopped member holds the key's op lock rings the watcher and leaves its bit
 * (with its reference) for a later delivery; nothing is counted twice or lost. */
START_TEST(a_delivery_that_cannot_lock_rings_and_leaves_the_watch_whole)
{
    const char *name = tu_fleet_name("pring");
    struct orbit_fleet *f = tu_join(name, CAPACITY, 0, 0x7000, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    int fd = orbit_pool_readiness(p);
    ck_assert_int_ge(fd, 0);
    orbit_id ours;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &ours), 0);
    ck_assert_int_eq(orbit_pool_watch(p, KEY), 0);
    struct victim v = { name, "register", OP_REGISTER };   /* stops holding KEY's op lock */
    pid_t kid = tp_spawn(victim, &v);
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    ck_assert(WIFSTOPPED(st));
    cycle(p, ours);
    assert_rung(fd);
    struct orbit_pool_key_info k;
    ck_assert_int_eq(orbit_pool_keys(p, &k, 1), 1);
    ck_assert_uint_eq(k.watchers, 1);   /* not taken: the lock was the stopped member's */
    kill(kid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
    /* The report's own change (the victim's rows given back) delivers it: bit and pin taken. */
    ck_assert_int_eq(orbit_fleet_node_dead(f, VICTIM_NODE, VICTIM_INC), 0);
    assert_rung(fd);
    assert_only_ours(p);
    ck_assert_int_eq(orbit_pool_watch(p, KEY), 0);
    cycle(p, ours);   /* a change with the lock free delivers at once */
    assert_rung(fd);
    assert_only_ours(p);
    ck_assert_int_eq(orbit_pool_unregister(p, ours), 0);
    assert_nothing_counted(p);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_windows");
    TCase *tc = tcase_create("windows");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, a_member_killed_mid_key_update_leaves_nothing_counted, 0,
                        (int)(sizeof WINDOWS / sizeof WINDOWS[0]));
    tcase_add_test(tc, a_reporter_killed_mid_return_is_finished_by_the_next_report);
    tcase_add_test(tc, a_deliverer_killed_mid_delivery_leaves_the_watch_delivered);
    tcase_add_test(tc, a_delivery_that_cannot_lock_rings_and_leaves_the_watch_whole);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
