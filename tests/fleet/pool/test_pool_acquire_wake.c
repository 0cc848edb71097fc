/* SPDX-License-Identifier: MIT */
/*
 * A unit freed after acquire decided WAIT and before it read the key's
 * version: the acquirer, stopped at exactly that point by
 * ORBIT_TEST_POOL_PARK=acquire_wait, must take the unit (the version is read
 * before one more look), not hand back a WAIT plan whose version already
 * counts the room. Both ways to WAIT: the policy decided it, or every attempt
 * lost its race. And a WAIT plan's version must move on the next release.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <orbit/pool.h>
#include "testutil.h"
#include "proc.h"

#define CAPACITY 4
#define CHILD_NODE 1
#define CHILD_INC 0x8001ull
#define EXIT_PLAN 10   /* a child that got a plan exits EXIT_PLAN + its kind */

static const orbit_key KEY = { 9, 99 };
static const char *const KIND[] = { "LOCAL_REUSE", "REMOTE_REUSE", "CREATE", "WAIT", "REJECT" };

/* Reuses the first candidate, room or not: every reserve of a full resource loses its race. */
static struct orbit_decision first_candidate(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                             uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    (void)ctx, (void)key, (void)live, (void)creating, (void)l;
    if (n == 0)
        return (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
    return (struct orbit_decision){ .kind = ORBIT_DECIDE_REUSE, .reuse = c[0].id };
}
static const struct orbit_policy FIRST_CANDIDATE = { first_candidate, NULL };

struct acquirer {
    const char *name;
    const struct orbit_policy *policy;   /* NULL: local_first */
    bool stop_after_wait;                /* check the WAIT plan's version, stop, then wait on it */
};

static struct orbit_pool *child_pool(const char *name)
{
    setenv("ORBIT_TEST_POOL_PARK", "acquire_wait", 1);
    struct orbit_fleet *f = tp_join(name, CAPACITY, CHILD_NODE, CHILD_INC);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    return p;
}

/* A WAIT plan's version: nothing moved it yet; after the parent's release it moves. */
static void wait_on(struct orbit_pool *p, uint32_t version)
{
    int rc = orbit_pool_wait_capacity(p, KEY, version, 0, NULL);
    TP_CHECK(rc == -ORBIT_ETIMEDOUT, "WAIT plan's version already moved: %s", orbit_strerror(rc));
    raise(SIGSTOP);   /* the parent frees the unit, then continues us */
    rc = orbit_pool_wait_capacity(p, KEY, version, 20000, NULL);
    TP_CHECK(rc == 0, "wait past the WAIT plan's version after a release: %s", orbit_strerror(rc));
}

/* The child: one acquire (max_live 1: it may not create); exits EXIT_PLAN + the plan's kind. */
static int acquirer(void *arg)
{
    struct acquirer *a = arg;
    struct orbit_pool *p = child_pool(a->name);
    struct orbit_limits lim = { .max_live = 1, .attempts = 3 };
    struct orbit_plan plan;
    int rc = orbit_pool_acquire(p, KEY, &lim, a->policy, &plan);
    TP_CHECK(rc == 0, "acquire: %s", orbit_strerror(rc));
    if (a->stop_after_wait && plan.kind == ORBIT_PLAN_WAIT) {
        wait_on(p, plan.version);
        rc = orbit_pool_acquire(p, KEY, &lim, a->policy, &plan);
        TP_CHECK(rc == 0, "acquire after the wait: %s", orbit_strerror(rc));
    }
    return EXIT_PLAN + (int)plan.kind;
}

/* Waits for the child to stop itself; false if it exited instead (status in *exit_code). */
static bool stopped(pid_t kid, int *exit_code)
{
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    if (WIFSTOPPED(st))
        return true;
    *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
}

static void assert_plan(int code, enum orbit_plan_kind want)
{
    int kind = code - EXIT_PLAN;
    ck_assert_msg(code == EXIT_PLAN + (int)want, "the acquirer's plan: %s (want %s)",
                  kind >= 0 && kind <= ORBIT_PLAN_REJECT ? KIND[kind] : "none, it failed", KIND[want]);
}

/* Our resource of capacity 1 with its unit active: the child's acquire finds no room. */
static void full_resource(struct orbit_pool *p, struct orbit_execution *busy)
{
    orbit_id id;
    struct orbit_lease l;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(p, &l, busy), 0);
}

/* _i: 0 the policy decides WAIT, 1 every attempt loses its race. The unit is freed while the
 * child is stopped between the WAIT and the version read. */
START_TEST(a_unit_freed_before_the_version_read_is_taken)
{
    const char *name = tu_fleet_name("acqwake");
    struct orbit_fleet *f = tu_join(name, CAPACITY, 0, 0x8000, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    struct orbit_execution busy;
    full_resource(p, &busy);
    struct acquirer a = { name, _i == 0 ? NULL : &FIRST_CANDIDATE, false };
    pid_t kid = tp_spawn(acquirer, &a);
    int code = -1;
    ck_assert_msg(stopped(kid, &code), "the acquirer did not stop after its WAIT (exit %d)", code);
    orbit_execution_complete(&busy);
    kill(kid, SIGCONT);
    assert_plan(tu_wait_child(kid, 20000), ORBIT_PLAN_REMOTE_REUSE);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* Nothing freed while it is stopped: its second look still says WAIT, and that WAIT plan's
 * version is current (not moved) and moves on the next release. */
START_TEST(a_wait_plan_version_is_current_and_moves_on_release)
{
    const char *name = tu_fleet_name("acqwait");
    struct orbit_fleet *f = tu_join(name, CAPACITY, 0, 0x8000, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    struct orbit_execution busy;
    full_resource(p, &busy);
    struct acquirer a = { name, NULL, true };
    pid_t kid = tp_spawn(acquirer, &a);
    int code = -1;
    ck_assert_msg(stopped(kid, &code), "the acquirer did not stop after its WAIT (exit %d)", code);
    kill(kid, SIGCONT);   /* nothing changed: a WAIT plan */
    ck_assert_msg(stopped(kid, &code), "the acquirer did not stop with a WAIT plan (exit %d)", code);
    orbit_execution_complete(&busy);
    kill(kid, SIGCONT);
    assert_plan(tu_wait_child(kid, 30000), ORBIT_PLAN_REMOTE_REUSE);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_acquire_wake");
    TCase *tc = tcase_create("acquire_wake");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, a_unit_freed_before_the_version_read_is_taken, 0, 2);
    tcase_add_test(tc, a_wait_plan_version_is_current_and_moves_on_release);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
