/* SPDX-License-Identifier: MIT */
/*
 * A reserver killed -9 holding unaccepted reservations on another member's
 * resource: its death report (orbit_fleet_reap, or orbit_fleet_node_dead)
 * frees every one of them, with no reconcile, on held entries (capacity <= 16)
 * and counted ones (above 16), young and lapped; the owner's late accept of
 * such a lease fails, and the units are reservable again. A capacity waiter
 * parked on the key in a third process gets the unit. Leases the owner
 * accepted stay its own (ACTIVE and DONE entries are untouched). A report for
 * an earlier incarnation of the node, or for another node with the same
 * incarnation, leaves the current life's reservation alone. A report racing
 * the owner's accepts of the same leases: each lease goes to exactly one.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <orbit/pool.h>
#include "testutil.h"
#include "proc.h"
#include "pool/pool_layout.h"   /* a key's parked count: the waiter is asleep before the reap */

#define FLEET_CAP     8
#define OWNER_NODE    0
#define OWNER_INC     0x60ull
#define RESERVER_NODE 1
#define RESERVER_INC  0x61ull
#define WAITER_NODE   2
#define WAITER_INC    0x62ull

static const orbit_key KEY = { 0xdead, 0x5e };

struct fixture { const char *name; struct orbit_fleet *f; struct orbit_pool *p; orbit_id id; };

static void setup(struct fixture *x, const char *tag, uint32_t capacity)
{
    x->name = tu_fleet_name(tag);
    x->f = tu_join(x->name, FLEET_CAP, OWNER_NODE, OWNER_INC, tu_backing());
    int rc = orbit_pool_open(x->f, NULL, &x->p);
    ck_assert_msg(rc == 0, "pool open: %s", orbit_strerror(rc));
    ck_assert_int_eq(orbit_pool_register(x->p, KEY, capacity, &x->id), 0);
}

static void teardown(struct fixture *x)
{
    orbit_pool_close(x->p);
    orbit_fleet_leave(x->f);
    ck_assert_int_eq(orbit_fleet_unlink(x->name), 0);
}

static struct orbit_candidate candidate(struct orbit_pool *p)
{
    struct orbit_candidate c;
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, &c, 1), 1);
    return c;
}

static void assert_counts(struct orbit_pool *p, uint32_t active, uint32_t reserved)
{
    struct orbit_candidate c = candidate(p);
    ck_assert_msg(c.active == active && c.reserved == reserved,
                  "candidate: active %u reserved %u capacity %u (want active %u reserved %u)", c.active,
                  c.reserved, c.capacity, active, reserved);
}

/* Reserves until refused (at most max); how many were taken. */
static unsigned reserve_until_busy(struct orbit_pool *p, orbit_id id, unsigned max)
{
    unsigned n = 0;
    struct orbit_lease l;
    int rc = 0;
    while (n < max + 1 && (rc = orbit_pool_reserve(p, id, &l)) == 0)
        n++;
    ck_assert_msg(rc == 0 || rc == -ORBIT_EBUSY, "reserve %u: %s", n, orbit_strerror(rc));
    return n;
}

/* A child of the test dies with it: a failed test leaves no stopped or sleeping process. */
static void die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(6);
}

/* A member reserving n units as (node, inc), lease i on ids[i % nids]: it sends its leases
 * and stops. */
struct reserver { const char *name; const orbit_id *ids; unsigned nids, n; int node; uint64_t inc; int wr;
                  pid_t parent; };

static int reserver_main(void *arg)
{
    struct reserver *rs = arg;
    die_with_parent(rs->parent);
    struct orbit_fleet *f = tp_join(rs->name, FLEET_CAP, rs->node, rs->inc);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    for (unsigned i = 0; i < rs->n; i++) {
        struct orbit_lease l;
        int rc = orbit_pool_reserve(p, rs->ids[i % rs->nids], &l);
        TP_CHECK(rc == 0, "reserve %u: %s", i, orbit_strerror(rc));
        tp_send(rs->wr, &l, sizeof l);
    }
    raise(SIGSTOP);
    return 4;
}

/* Spawns a reserver of n units of ids as (node, inc) and receives its leases; it is stopped then. */
static pid_t spawn_reserver_on(struct fixture *x, const orbit_id *ids, unsigned nids, int node, uint64_t inc,
                               unsigned n, struct orbit_lease *out)
{
    struct tp_pipe pp = tp_pipe();
    struct reserver rs = { x->name, ids, nids, n, node, inc, pp.wr, getpid() };
    pid_t kid = tp_spawn(reserver_main, &rs);
    for (unsigned i = 0; i < n; i++)
        ck_assert_msg(tp_recv(pp.rd, &out[i], sizeof out[i]), "the reserver sent %u leases of %u", i, n);
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    ck_assert_msg(WIFSTOPPED(st), "the reserver did not stop (status %#x)", st);
    close(pp.rd);
    close(pp.wr);
    return kid;
}

static pid_t spawn_reserver(struct fixture *x, int node, uint64_t inc, unsigned n, struct orbit_lease *out)
{
    return spawn_reserver_on(x, &x->id, 1, node, inc, n, out);
}

static void kill_child(pid_t kid)
{
    kill(kid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
}

/* The owner's own reserve -> accept -> complete, n times: the fence moves n past a lease. */
static void cycle(struct orbit_pool *p, orbit_id id, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct orbit_lease l;
        struct orbit_execution ex;
        ck_assert_int_eq(orbit_pool_reserve(p, id, &l), 0);
        ck_assert_int_eq(orbit_pool_accept(p, &l, &ex), 0);
        orbit_execution_complete(&ex);
    }
}

static void assert_accept_refused(struct orbit_pool *p, const struct orbit_lease *l)
{
    struct orbit_execution ex;
    int rc = orbit_pool_accept(p, l, &ex);
    ck_assert_msg(rc == -ORBIT_ENOTRESERVED, "accept of the dead reserver's lease (fence %llu): %s",
                  (unsigned long long)l->fence, rc == 0 ? "accepted" : orbit_strerror(rc));
}

/* capacity; fences the owner moves past the dead's lease before the kill (16 or more: lapped). */
static const struct { uint32_t capacity; unsigned laps; } SHAPES[] = {
    { 1, 0 }, { 2, 20 }, { 17, 0 }, { 17, 20 },
};

/* _i: one of SHAPES. */
START_TEST(a_reaped_reservers_lease_is_freed_without_a_reconcile)
{
    struct fixture x;
    setup(&x, "dfree", SHAPES[_i].capacity);
    struct orbit_lease dead;
    pid_t kid = spawn_reserver(&x, RESERVER_NODE, RESERVER_INC, 1, &dead);
    cycle(x.p, x.id, SHAPES[_i].laps);
    assert_counts(x.p, 0, 1);
    kill_child(kid);
    ck_assert_int_eq(orbit_fleet_reap(x.f), 1);
    assert_counts(x.p, 0, 0);
    assert_accept_refused(x.p, &dead);
    unsigned room = SHAPES[_i].capacity < POOL_PENDING ? SHAPES[_i].capacity : POOL_PENDING;
    ck_assert_uint_eq(reserve_until_busy(x.p, x.id, room), room);
    teardown(&x);
}
END_TEST

/* Capacity 4: the dead reserved three; the owner accepted two and completed one (one DONE,
 * one ACTIVE entry naming the dead as holder): only the third, never accepted, is freed. */
START_TEST(a_reaped_reservers_accepted_leases_stay_with_the_owner)
{
    struct fixture x;
    setup(&x, "dheld", 4);
    struct orbit_lease l[3];
    struct orbit_execution done, running;
    pid_t kid = spawn_reserver(&x, RESERVER_NODE, RESERVER_INC, 3, l);
    ck_assert_int_eq(orbit_pool_accept(x.p, &l[0], &done), 0);
    ck_assert_int_eq(orbit_pool_accept(x.p, &l[1], &running), 0);
    orbit_execution_complete(&done);
    assert_counts(x.p, 1, 1);
    kill_child(kid);
    ck_assert_int_eq(orbit_fleet_reap(x.f), 1);
    assert_counts(x.p, 1, 0);
    assert_accept_refused(x.p, &l[2]);
    ck_assert_uint_eq(reserve_until_busy(x.p, x.id, 3), 3);   /* the running one keeps its unit */
    orbit_execution_complete(&running);
    assert_counts(x.p, 0, 3);
    ck_assert_uint_eq(reserve_until_busy(x.p, x.id, 1), 1);
    teardown(&x);
}
END_TEST

/* A member waiting for capacity on KEY: says whether it took a unit of id within 10 s ('U' or
 * 'T' on wr), then stays alive (its node is not reported while the parent looks). */
struct waiter { const char *name; orbit_id id; int wr; pid_t parent; };

static _Noreturn void waiter_say(struct waiter *w, char c)
{
    tp_send(w->wr, &c, 1);
    for (;;)
        pause();
}

static int waiter_main(void *arg)
{
    struct waiter *w = arg;
    die_with_parent(w->parent);
    struct orbit_fleet *f = tp_join(w->name, FLEET_CAP, WAITER_NODE, WAITER_INC);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    int64_t end = tu_now_ns() + 10000 * 1000000ll;
    uint32_t version;
    TP_CHECK(orbit_pool_version(p, KEY, &version) == 0, "version");
    for (;;) {
        struct orbit_lease l;
        int rc = orbit_pool_reserve(p, w->id, &l);
        if (rc == 0)
            waiter_say(w, 'U');
        TP_CHECK(rc == -ORBIT_EBUSY, "reserve: %s", orbit_strerror(rc));
        int64_t left_ms = (end - tu_now_ns()) / 1000000;
        if (left_ms <= 0)
            waiter_say(w, 'T');
        rc = orbit_pool_wait_capacity(p, KEY, version, (int)left_ms, &version);
        TP_CHECK(rc == 0 || rc == -ORBIT_ETIMEDOUT, "wait: %s", orbit_strerror(rc));
    }
}

/* Until a waiter is parked on KEY's change word (bounded). */
static void await_parked(struct orbit_pool *p)
{
    struct orbit_pool_key_info k;
    ck_assert_int_eq(orbit_pool_keys(p, &k, 1), 1);
    struct pool_key *key = pool_key_at(p, k.index);
    int64_t end = tu_now_ns() + 5000 * 1000000ll;
    while (atomic_load(&key->wait.parked) == 0) {
        ck_assert_msg(tu_now_ns() < end, "the waiter never parked on the key");
        tu_sleep_ms(2);
    }
}

START_TEST(a_capacity_waiter_gets_the_unit_a_reaped_reserver_held)
{
    struct fixture x;
    setup(&x, "dwait", 1);
    struct orbit_lease dead;
    pid_t kid = spawn_reserver(&x, RESERVER_NODE, RESERVER_INC, 1, &dead);
    struct tp_pipe pp = tp_pipe();
    struct waiter w = { x.name, x.id, pp.wr, getpid() };
    pid_t wkid = tp_spawn(waiter_main, &w);
    await_parked(x.p);
    kill_child(kid);
    ck_assert_int_eq(orbit_fleet_reap(x.f), 1);
    struct pollfd pfd = { pp.rd, POLLIN, 0 };
    char said = 0;
    ck_assert_msg(poll(&pfd, 1, 15000) == 1 && read(pp.rd, &said, 1) == 1, "the waiter said nothing");
    ck_assert_msg(said == 'U', "the waiter got no unit within 10 s of the reap");
    assert_counts(x.p, 0, 1);   /* the waiter's own lease */
    kill_child(wkid);
    ck_assert_int_eq(orbit_fleet_reap(x.f), 1);
    assert_counts(x.p, 0, 0);
    close(pp.rd);
    close(pp.wr);
    teardown(&x);
}
END_TEST

/* Life A of the reserver's node is reaped (its lease freed); life B reserves. Reports for A
 * again, and for another node with B's incarnation, leave B's lease; B's own report frees it. */
START_TEST(a_report_for_another_life_leaves_the_current_lives_reservation)
{
    struct fixture x;
    setup(&x, "dlife", 2);
    struct orbit_lease a, b;
    kill_child(spawn_reserver(&x, RESERVER_NODE, RESERVER_INC, 1, &a));
    ck_assert_int_eq(orbit_fleet_reap(x.f), 1);
    assert_counts(x.p, 0, 0);
    const uint64_t life_b = RESERVER_INC + 1;
    pid_t kid = spawn_reserver(&x, RESERVER_NODE, life_b, 1, &b);
    orbit_pool_node_dead(x.p, RESERVER_NODE, RESERVER_INC);
    orbit_pool_node_dead(x.p, WAITER_NODE, life_b);
    assert_counts(x.p, 0, 1);
    struct orbit_lease c;
    ck_assert_int_eq(orbit_pool_reserve(x.p, x.id, &c), 0);   /* life B's unit still taken */
    ck_assert_int_eq(orbit_pool_reserve(x.p, x.id, &c), -ORBIT_EBUSY);
    kill_child(kid);
    ck_assert_int_eq(orbit_fleet_reap(x.f), 1);
    assert_counts(x.p, 0, 1);
    assert_accept_refused(x.p, &b);
    assert_accept_refused(x.p, &a);
    teardown(&x);
}
END_TEST

/* ---- a report racing the owner's accepts of the same leases ---- */

#define RACE_RESOURCES 8
#define RACE_LEASES    (RACE_RESOURCES * POOL_PENDING)

struct race { struct orbit_pool *p; const struct orbit_lease *l; struct orbit_execution ex[RACE_LEASES];
              bool got[RACE_LEASES]; unsigned accepted; int64_t delay_ns; _Atomic int ready, go, reported; };

/* One pass over the leases not yet accepted, from the last back (the report scans from the
 * first resource, so the two meet on some resource). */
static void accept_pass(struct race *rc)
{
    for (unsigned i = RACE_LEASES; i-- > 0;) {
        if (!rc->got[i] && orbit_pool_accept(rc->p, &rc->l[i], &rc->ex[i]) == 0) {
            rc->got[i] = true;
            rc->accepted++;
        }
    }
}

/* Passes for as long as the report runs, and one after it; the first delay_ns after the go
 * (rounds sweep where in the report the accepts begin: coverage, never the verdict). */
static void *race_accepts(void *arg)
{
    struct race *rc = arg;
    atomic_store(&rc->ready, 1);
    while (!atomic_load(&rc->go))
        ;
    for (int64_t start = tu_now_ns(); tu_now_ns() - start < rc->delay_ns;)
        ;
    while (!atomic_load(&rc->reported))
        accept_pass(rc);
    accept_pass(rc);
    return NULL;
}

/* Active and reserved over every resource of KEY. */
static void key_counts(struct orbit_pool *p, uint32_t *active, uint32_t *reserved)
{
    struct orbit_candidate c[RACE_RESOURCES];
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, c, RACE_RESOURCES), RACE_RESOURCES);
    *active = *reserved = 0;
    for (unsigned i = 0; i < RACE_RESOURCES; i++) {
        *active += c[i].active;
        *reserved += c[i].reserved;
    }
}

/* _i 0: held entries (capacity 16), 1: counted (capacity 40, young leases: the pair CAS).
 * Each lease goes to exactly one: the accepted ones count active, the rest are free, nothing
 * is left reserved. */
START_TEST(a_report_racing_the_owners_accepts_gives_each_lease_once)
{
    uint32_t capacity = _i == 0 ? POOL_PENDING : 40;
    for (unsigned round = 0; round < 16; round++) {
        struct fixture x;
        setup(&x, "drace", capacity);
        orbit_id ids[RACE_RESOURCES] = { x.id };
        for (unsigned i = 1; i < RACE_RESOURCES; i++)
            ck_assert_int_eq(orbit_pool_register(x.p, KEY, capacity, &ids[i]), 0);
        struct orbit_lease l[RACE_LEASES];
        kill_child(spawn_reserver_on(&x, ids, RACE_RESOURCES, RESERVER_NODE, RESERVER_INC, RACE_LEASES, l));
        struct race rc = { .p = x.p, .l = l, .delay_ns = (int64_t)round * 400 };
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, race_accepts, &rc), 0);
        while (!atomic_load(&rc.ready))
            ;
        atomic_store(&rc.go, 1);
        orbit_pool_node_dead(x.p, RESERVER_NODE, RESERVER_INC);   /* the pool's part of the report */
        atomic_store(&rc.reported, 1);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        uint32_t active, reserved;
        key_counts(x.p, &active, &reserved);
        ck_assert_msg(active == rc.accepted && reserved == 0, "active %u reserved %u after %u accepts",
                      active, reserved, rc.accepted);
        for (unsigned i = 0; i < RACE_LEASES; i++)
            if (rc.got[i])
                orbit_execution_complete(&rc.ex[i]);
        key_counts(x.p, &active, &reserved);
        ck_assert_uint_eq(active + reserved, 0);
        ck_assert_uint_eq(reserve_until_busy(x.p, x.id, POOL_PENDING), POOL_PENDING);
        teardown(&x);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_dead_reserver");
    TCase *tc = tcase_create("dead_reserver");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, a_reaped_reservers_lease_is_freed_without_a_reconcile, 0,
                        (int)(sizeof SHAPES / sizeof SHAPES[0]));
    tcase_add_test(tc, a_reaped_reservers_accepted_leases_stay_with_the_owner);
    tcase_add_test(tc, a_capacity_waiter_gets_the_unit_a_reaped_reserver_held);
    tcase_add_test(tc, a_report_for_another_life_leaves_the_current_lives_reservation);
    tcase_add_loop_test(tc, a_report_racing_the_owners_accepts_gives_each_lease_once, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
