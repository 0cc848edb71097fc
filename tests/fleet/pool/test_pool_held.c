/* SPDX-License-Identifier: MIT */
/*
 * Held entries (capacity <= 16): an accepted lease keeps its pending entry,
 * its complete marks the entry DONE by a store and the next reserve folds it.
 * Racing completes and reserves never over-admit; a DONE entry is folded once
 * and a late DONE matches nobody; an execution whose process was killed with
 * its entry ACTIVE is reclaimed by the owner's reconcile; above 16 units the
 * counted path is kept. Members killed -9 in the protocol's windows: a
 * reserver between its fold and the release, one after taking a released entry
 * and before its publish, one whose lease was never accepted (its report frees
 * it), an owner with held entries (its worker's late complete frees nothing).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <orbit/pool.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "proc.h"
#include "pool/pool_layout.h"   /* the entries' states are inspected */

static const orbit_key KEY = { 0x4e1d, 16 };

struct fixture { const char *name; struct orbit_fleet *f; struct orbit_pool *p; };

static void setup(struct fixture *x, const char *tag)
{
    x->name = tu_fleet_name(tag);
    x->f = tu_join(x->name, 8, 0, 1, tu_backing());
    int rc = orbit_pool_open(x->f, NULL, &x->p);
    ck_assert_msg(rc == 0, "pool open: %s", orbit_strerror(rc));
}

static void teardown(struct fixture *x)
{
    orbit_pool_close(x->p);
    orbit_fleet_leave(x->f);
    ck_assert_int_eq(orbit_fleet_unlink(x->name), 0);
}

static struct pool_resource *res_of(struct orbit_pool *p, orbit_id id)
{
    return pool_res_at(p, (uint64_t)orbit_id_node(id) * p->geo.lane_capacity + orbit_id_slot(id));
}

static struct orbit_candidate candidate(struct orbit_pool *p)
{
    struct orbit_candidate c;
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, &c, 1), 1);
    return c;
}

static void take(struct orbit_pool *p, orbit_id id, struct orbit_lease *l, struct orbit_execution *ex)
{
    ck_assert_int_eq(orbit_pool_reserve(p, id, l), 0);
    ck_assert_int_eq(orbit_pool_accept(p, l, ex), 0);
}

START_TEST(a_done_entry_counts_free_and_is_folded_once_by_the_next_reserve)
{
    struct fixture x;
    setup(&x, "hfold");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 2, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l1, l2, l3, l4;
    struct orbit_execution e1, e2, e3;
    take(x.p, id, &l1, &e1);
    uint32_t b1 = (uint32_t)(l1.fence % POOL_PENDING);
    ck_assert_uint_eq(atomic_load(&r->pending[b1].fence), l1.fence | ENTRY_HELD);
    ck_assert_uint_eq(candidate(x.p).active, 1);
    orbit_execution_complete(&e1);
    /* DONE: the bit is still set, but the unit counts as free. */
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)) & (1u << b1), 1u << b1);
    ck_assert_uint_eq(atomic_load(&r->pending[b1].since), l1.fence | SINCE_DONE);
    ck_assert_uint_eq(candidate(x.p).active, 0);
    ck_assert_uint_eq(candidate(x.p).reserved, 0);
    take(x.p, id, &l2, &e2);
    /* Folded by that reserve: bit cleared, entry released (it names the fence it shows). */
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)) & (1u << b1), 0);
    ck_assert_uint_eq(atomic_load(&r->pending[b1].fence), l1.fence | ENTRY_HELD);
    ck_assert_uint_eq(atomic_load(&r->pending[b1].released), l1.fence);
    take(x.p, id, &l3, &e3);
    /* Two held: the DONE unit came back once, not twice. */
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l4), -ORBIT_EBUSY);
    ck_assert_uint_eq(candidate(x.p).active, 2);
    orbit_execution_complete(&e2);
    orbit_execution_complete(&e3);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l4), 0);
    ck_assert_uint_eq(candidate(x.p).reserved, 1);
    ck_assert_uint_eq(candidate(x.p).active, 0);
    teardown(&x);
}
END_TEST

START_TEST(a_late_done_on_a_retaken_entry_frees_nothing)
{
    struct fixture x;
    setup(&x, "hlate");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 1, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l1, l;
    struct orbit_execution e1, ex;
    take(x.p, id, &l1, &e1);
    /* The owner's truth says nothing runs (a leaked execution): its entry is reclaimed. */
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 0, 60000), 0);
    uint32_t b1 = (uint32_t)(l1.fence % POOL_PENDING);
    ck_assert_uint_eq(atomic_load(&r->pending[b1].fence), 0);
    /* Cycle until entry b1 is held again, by a fence 16 later. */
    for (;;) {
        take(x.p, id, &l, &ex);
        if (l.fence % POOL_PENDING == b1)
            break;
        orbit_execution_complete(&ex);
    }
    ck_assert_uint_eq(l.fence, l1.fence + POOL_PENDING);
    /* The leaked execution completes late: it names an entry no longer its own. */
    orbit_execution_complete(&e1);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l1), -ORBIT_EBUSY);
    /* A completer past its check whose DONE lands now (its store raced the retake). */
    atomic_store(&r->pending[b1].since, (l.fence - POOL_PENDING) | SINCE_DONE);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l1), -ORBIT_EBUSY);
    ck_assert_uint_eq(candidate(x.p).active, 1);
    orbit_execution_complete(&ex);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l1), 0);
    teardown(&x);
}
END_TEST

START_TEST(an_execution_killed_with_its_entry_active_is_reclaimed_by_reconcile)
{
    struct fixture x;
    setup(&x, "hkill");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 1, &id), 0);
    struct orbit_lease l;
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l), 0);
    /* The accepter's image is gone before it completes: its execution is never completed (a
     * fork child can no longer act on the parent's handle, so the parent leaks it itself). */
    struct orbit_execution killed;
    ck_assert_int_eq(orbit_pool_accept(x.p, &l, &killed), 0);
    struct pool_resource *r = res_of(x.p, id);
    ck_assert_uint_eq(atomic_load(&r->pending[l.fence % POOL_PENDING].fence), l.fence | ENTRY_HELD);
    struct orbit_lease n;
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    /* A count that covers the entry keeps it: one active, not two. */
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 1, 60000), 0);
    ck_assert_uint_eq(candidate(x.p).active, 1);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    /* The owner's truth, nothing runs: the entry is reclaimed and wiped. */
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 0, 60000), 0);
    ck_assert_uint_eq(candidate(x.p).active, 0);
    ck_assert_uint_eq(atomic_load(&r->pending[l.fence % POOL_PENDING].fence), 0);
    struct orbit_execution ex;
    take(x.p, id, &n, &ex);
    struct orbit_lease m;
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &m), -ORBIT_EBUSY);   /* capacity still 1 */
    orbit_execution_complete(&ex);
    teardown(&x);
}
END_TEST

START_TEST(a_waiter_about_to_sleep_folds_a_done_whose_wake_it_missed)
{
    struct fixture x;
    setup(&x, "hwake");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 1, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l, n;
    struct orbit_execution ex;
    take(x.p, id, &l, &ex);
    uint32_t v;
    ck_assert_int_eq(orbit_pool_version(x.p, KEY, &v), 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    /* A completer whose read of the key's words came before the version: its DONE, no wake. */
    atomic_store(&r->pending[l.fence % POOL_PENDING].since, l.fence | SINCE_DONE);
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_pool_wait_capacity(x.p, KEY, v, 5000, NULL), 0);
    ck_assert_int_lt(tu_now_ns() - t0, 4000 * 1000000ll);   /* woken by the fold, not the timeout */
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)), 0);   /* folded by the waiter */
    ck_assert_uint_eq(atomic_load(&r->pending[l.fence % POOL_PENDING].released), l.fence);   /* and released */
    /* Nothing left to fold: the next wait sleeps to its timeout. */
    ck_assert_int_eq(orbit_pool_version(x.p, KEY, &v), 0);
    ck_assert_int_eq(orbit_pool_wait_capacity(x.p, KEY, v, 50, NULL), -ORBIT_ETIMEDOUT);
    take(x.p, id, &n, &ex);
    orbit_execution_complete(&ex);
    teardown(&x);
}
END_TEST

START_TEST(sixteen_units_all_done_are_folded_when_no_entry_is_free)
{
    struct fixture x;
    setup(&x, "hfull");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, POOL_PENDING, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l[POOL_PENDING + 1];
    struct orbit_execution ex[POOL_PENDING];
    for (unsigned i = 0; i < POOL_PENDING; i++)
        take(x.p, id, &l[i], &ex[i]);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l[POOL_PENDING]), -ORBIT_EBUSY);
    for (unsigned i = 0; i < POOL_PENDING; i++)
        orbit_execution_complete(&ex[i]);
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)), 0xffff);   /* every entry DONE */
    for (unsigned i = 0; i < POOL_PENDING; i++)
        take(x.p, id, &l[i], &ex[i]);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l[POOL_PENDING]), -ORBIT_EBUSY);
    for (unsigned i = 0; i < POOL_PENDING; i++)
        orbit_execution_complete(&ex[i]);
    teardown(&x);
}
END_TEST

START_TEST(above_sixteen_units_accepts_free_their_entries)
{
    struct fixture x;
    setup(&x, "hcount");
    enum { CAP = 20 };
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, CAP, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l[CAP + 1];
    struct orbit_execution ex[CAP];
    for (int i = 0; i < CAP; i++)
        take(x.p, id, &l[i], &ex[i]);
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)), 0);   /* counted: no entry held */
    ck_assert_uint_eq(units_active(atomic_load(&r->units)), CAP);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &l[CAP]), -ORBIT_EBUSY);
    for (int i = 0; i < CAP; i++)
        orbit_execution_complete(&ex[i]);
    ck_assert_uint_eq(candidate(x.p).active, 0);
    teardown(&x);
}
END_TEST

/* ---- members killed -9 in the held protocol's windows ---- */

#define REMOTE_NODE 1
#define REMOTE_INC  0x51ull
#define OWNER_NODE  2
#define OWNER_INC   0x52ull

static void assert_counts(struct orbit_pool *p, uint32_t active, uint32_t reserved)
{
    struct orbit_candidate c = candidate(p);
    ck_assert_msg(c.active == active && c.reserved == reserved && c.active + c.reserved <= c.capacity,
                  "candidate: active %u reserved %u capacity %u (want active %u reserved %u)", c.active,
                  c.reserved, c.capacity, active, reserved);
}

/* Reserves until refused; how many were taken (room + 1: one past room, an over-admission). */
static unsigned reserve_until_busy(struct orbit_pool *p, orbit_id id, struct orbit_lease *l, unsigned room)
{
    unsigned n = 0;
    int rc;
    struct orbit_lease extra;
    while ((rc = orbit_pool_reserve(p, id, n < room ? &l[n] : &extra)) == 0)
        if (++n > room)
            return n;
    ck_assert_msg(rc == -ORBIT_EBUSY, "reserve %u: %s", n, orbit_strerror(rc));
    return n;
}

static void stop_and_kill(pid_t kid)
{
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    ck_assert_msg(WIFSTOPPED(st), "the child did not stop where it should (status %#x)", st);
    kill(kid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
}

/* A child of the test dies with it (a failed test leaves no stopped or pausing process). */
static void die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(6);
}

/* Another member process reserving a unit of id: it sends its lease and stops; with park
 * set, the hook stops it inside the reserve instead (exit 3 if it never did). */
struct remote { const char *name; const char *park; orbit_id id; int wr; pid_t parent; };

static int remote_reserver(void *arg)
{
    struct remote *rm = arg;
    die_with_parent(rm->parent);
    if (rm->park)
        setenv("ORBIT_TEST_POOL_PARK", rm->park, 1);
    struct orbit_fleet *f = tp_join(rm->name, 8, REMOTE_NODE, REMOTE_INC);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    struct orbit_lease l;
    int rc = orbit_pool_reserve(p, rm->id, &l);
    TP_CHECK(rc == 0, "reserve: %s", orbit_strerror(rc));
    if (rm->park)
        return 3;
    tp_send(rm->wr, &l, sizeof l);
    raise(SIGSTOP);
    return 4;
}

/* A remote reserver killed where park says (NULL: after its reserve, *lease), reported dead. */
static void remote_killed(struct fixture *x, orbit_id id, const char *park, struct orbit_lease *lease)
{
    struct tp_pipe pp = tp_pipe();
    struct remote rm = { x->name, park, id, pp.wr, getpid() };
    stop_and_kill(tp_spawn(remote_reserver, &rm));
    if (lease)
        ck_assert(tp_recv(pp.rd, lease, sizeof *lease));
    close(pp.rd);
    close(pp.wr);
    ck_assert_int_eq(orbit_fleet_node_dead(x->f, REMOTE_NODE, REMOTE_INC), 0);
}

static uint32_t entry_of(const struct orbit_lease *l) { return (uint32_t)(l->fence % POOL_PENDING); }
static uint64_t fence_at(struct pool_resource *r, uint32_t b) { return atomic_load(&r->pending[b].fence); }
static uint32_t bits_of(struct pool_resource *r) { return units_bits(atomic_load(&r->units)); }

/* Capacity 16, ten DONE and five ACTIVE: a remote reserver folds the ten and is killed before
 * it releases them. Reserves skip them (never over-admit, never give an entry showing a fence);
 * the owner's reconcile wipes them, and every unit can be taken again, exactly. */
START_TEST(a_reserver_killed_between_its_fold_and_the_release_costs_no_unit_after_reconcile)
{
    struct fixture x;
    setup(&x, "hfoldk");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, POOL_PENDING, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l[POOL_PENDING], n, more[POOL_PENDING];
    struct orbit_execution ex[POOL_PENDING], mex[POOL_PENDING];
    for (unsigned i = 0; i < 15; i++)
        take(x.p, id, &l[i], &ex[i]);
    for (unsigned i = 0; i < 10; i++)
        orbit_execution_complete(&ex[i]);
    remote_killed(&x, id, "fold", NULL);
    uint32_t bits = bits_of(r);
    for (unsigned i = 0; i < 10; i++) {   /* folded, not released */
        ck_assert_uint_eq(bits & (1u << entry_of(&l[i])), 0);
        ck_assert_uint_eq(fence_at(r, entry_of(&l[i])), l[i].fence | ENTRY_HELD);
    }
    assert_counts(x.p, 5, 1);   /* five held; the dead reserver's unit */
    /* Ten units free by the count, no entry to put them in: refused, nothing over-admitted. */
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    /* A DONE among the busy entries: the reserve folds it alone, then takes that entry. */
    orbit_execution_complete(&ex[10]);
    take(x.p, id, &n, &ex[10]);
    ck_assert_uint_eq(entry_of(&n), entry_of(&l[10]));
    for (unsigned i = 0; i < 10; i++)
        ck_assert_uint_eq(fence_at(r, entry_of(&l[i])), l[i].fence | ENTRY_HELD);
    assert_counts(x.p, 5, 1);
    /* The owner's truth, five run: aging wipes the ten and ages the dead reserver's entry. */
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 5, 0), 0);
    assert_counts(x.p, 5, 0);
    ck_assert_uint_eq(reserve_until_busy(x.p, id, more, 11), 11);
    assert_counts(x.p, 5, 11);
    for (unsigned i = 0; i < 11; i++)
        ck_assert_int_eq(orbit_pool_accept(x.p, &more[i], &mex[i]), 0);
    assert_counts(x.p, POOL_PENDING, 0);
    ck_assert_uint_eq(bits_of(r), 0xffff);   /* every entry held */
    for (unsigned i = 10; i < 15; i++)
        orbit_execution_complete(&ex[i]);
    for (unsigned i = 0; i < 11; i++)
        orbit_execution_complete(&mex[i]);
    assert_counts(x.p, 0, 0);
    ck_assert_uint_eq(reserve_until_busy(x.p, id, more, POOL_PENDING), POOL_PENDING);
    assert_counts(x.p, 0, POOL_PENDING);
    teardown(&x);
}
END_TEST

/* Capacity 4: three accepted; a remote reserver's lease, never accepted (killed): its death
 * report frees it and leaves the held entries alone; one of the three completes: one DONE,
 * two ACTIVE. _i 0: the owner's count covers the two ACTIVE (kept); _i 1: it does not (all
 * reclaimed, completes counted). */
START_TEST(a_killed_reservers_unaccepted_lease_is_freed_among_held_entries)
{
    struct fixture x;
    setup(&x, "hunacc");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 4, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l[3], dead, more[4];
    struct orbit_execution ex[3], never;
    for (unsigned i = 0; i < 3; i++)
        take(x.p, id, &l[i], &ex[i]);
    remote_killed(&x, id, NULL, &dead);
    /* Freed by the report: bit and entry, and the late accept fails by its fence. */
    ck_assert_uint_eq(bits_of(r) & (1u << entry_of(&dead)), 0);
    ck_assert_uint_eq(fence_at(r, entry_of(&dead)), 0);
    ck_assert_int_eq(orbit_pool_accept(x.p, &dead, &never), -ORBIT_ENOTRESERVED);
    assert_counts(x.p, 3, 0);
    orbit_execution_complete(&ex[0]);
    assert_counts(x.p, 2, 0);
    /* The DONE is folded by the owner's reconcile. */
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 2, 60000), 0);
    ck_assert_uint_eq(bits_of(r) & (1u << entry_of(&l[0])), 0);
    ck_assert_uint_eq(fence_at(r, entry_of(&l[0])), 0);
    assert_counts(x.p, 2, 0);
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, _i == 0 ? 2 : 1, 0), 0);
    if (_i == 0) {   /* kept: still held, their completes are stores the next reserve folds */
        assert_counts(x.p, 2, 0);
        for (unsigned i = 1; i < 3; i++)
            ck_assert_uint_eq(fence_at(r, entry_of(&l[i])), l[i].fence | ENTRY_HELD);
        ck_assert_uint_eq(reserve_until_busy(x.p, id, more, 2), 2);
        orbit_execution_complete(&ex[1]);
        orbit_execution_complete(&ex[2]);
        assert_counts(x.p, 0, 2);
        ck_assert_uint_eq(reserve_until_busy(x.p, id, more, 2), 2);
    } else {         /* reclaimed: wiped, one unit counted active, the other given back */
        assert_counts(x.p, 1, 0);
        for (unsigned i = 1; i < 3; i++)
            ck_assert_uint_eq(fence_at(r, entry_of(&l[i])), 0);
        ck_assert_uint_eq(reserve_until_busy(x.p, id, more, 3), 3);
        orbit_execution_complete(&ex[1]);   /* counted: the unit the owner's count kept */
        assert_counts(x.p, 0, 3);
        ck_assert_uint_eq(reserve_until_busy(x.p, id, &more[3], 1), 1);
        orbit_execution_complete(&ex[2]);   /* nothing left to give back */
    }
    assert_counts(x.p, 0, 4);
    ck_assert_uint_eq(reserve_until_busy(x.p, id, more, 0), 0);
    teardown(&x);
}
END_TEST

/* A reserver stopped (not killed) between its fold and the release while the owner's reconcile
 * wipes the folded entries and a new lease takes one: the late release must not clobber it. */
START_TEST(a_folders_late_release_leaves_a_retaken_entry_to_its_new_holder)
{
    struct fixture x;
    setup(&x, "hstall");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, POOL_PENDING, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l[POOL_PENDING], n;
    struct orbit_execution ex[POOL_PENDING], e;
    for (unsigned i = 0; i < 15; i++)
        take(x.p, id, &l[i], &ex[i]);
    for (unsigned i = 0; i < 15; i++)
        orbit_execution_complete(&ex[i]);
    struct remote rm = { x.name, "fold", id, -1, getpid() };
    pid_t kid = tp_spawn(remote_reserver, &rm);
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    ck_assert_msg(WIFSTOPPED(st), "the child did not stop at the hook (status %#x)", st);
    /* The owner's aging wipes the fifteen folded entries (their folder looks dead, or slow). */
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 0, 60000), 0);
    ck_assert_uint_eq(fence_at(r, entry_of(&l[0])), 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), 0);
    ck_assert_uint_eq(entry_of(&n), entry_of(&l[0]));   /* a wiped entry, retaken */
    kill(kid, SIGCONT);   /* the folder resumes: its release comes after the retake */
    ck_assert_int_eq(tu_wait_child(kid, 10000), 3);
    ck_assert_int_eq(orbit_fleet_node_dead(x.f, REMOTE_NODE, REMOTE_INC), 0);
    ck_assert_msg(fence_at(r, entry_of(&n)) == n.fence, "the new lease's entry shows %#llx, not its fence %llu",
                  (unsigned long long)fence_at(r, entry_of(&n)), (unsigned long long)n.fence);
    ck_assert_int_eq(orbit_pool_accept(x.p, &n, &e), 0);
    orbit_execution_complete(&e);
    assert_counts(x.p, 0, 0);   /* the folder's own lease, never accepted: freed by its report */
    teardown(&x);
}
END_TEST

/* A lap of the ring done, every entry folded and released: a remote reserver folds the last
 * DONE, takes a released entry and is killed before it publishes. Its entry still shows the
 * old fence, DONE: it is a pending reservation, never folded again (one unit left of two), and
 * the owner's reconcile ages it like an unpublished one. */
START_TEST(a_new_holder_before_its_publish_is_neither_folded_nor_lost)
{
    struct fixture x;
    setup(&x, "hstale");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 2, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l, n[2];
    struct orbit_execution ex, nex;
    for (unsigned i = 0; i <= POOL_PENDING; i++) {
        take(x.p, id, &l, &ex);
        orbit_execution_complete(&ex);
    }
    uint32_t next = (uint32_t)((l.fence + 1) % POOL_PENDING);
    uint64_t shown = fence_at(r, next);
    ck_assert(entry_held(shown));
    ck_assert_uint_eq(atomic_load(&r->pending[next].released), shown & ~ENTRY_HELD);   /* released: takeable */
    remote_killed(&x, id, "fold", NULL);
    ck_assert_uint_eq(bits_of(r), 1u << next);
    ck_assert_uint_eq(fence_at(r, next), shown);   /* the dead reserver never published */
    assert_counts(x.p, 0, 1);
    /* One unit left of two: taken once, then refused (folding the dead one's entry gives two). */
    ck_assert_uint_eq(reserve_until_busy(x.p, id, n, 1), 1);
    ck_assert_int_eq(orbit_pool_accept(x.p, &n[0], &nex), 0);
    assert_counts(x.p, 1, 1);
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 1, 0), 0);
    assert_counts(x.p, 1, 0);
    ck_assert_uint_eq(reserve_until_busy(x.p, id, &n[1], 1), 1);
    orbit_execution_complete(&nex);
    teardown(&x);
}
END_TEST

/* A member whose membarrier is refused (ORBIT_DISABLE_MEMBARRIER=1: a seccomp filter the
 * others lack) waits on a key; its SQE form says -ORBIT_ENOTSUP. Exit 0: the wait returned
 * room, 2: it timed out. */
struct unfenced { const char *name; pid_t parent; };

static int unfenced_waiter(void *arg)
{
    struct unfenced *u = arg;
    die_with_parent(u->parent);
    setenv("ORBIT_DISABLE_MEMBARRIER", "1", 1);
    struct orbit_fleet *f = tp_join(u->name, 8, REMOTE_NODE, REMOTE_INC);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    uint32_t v;
    TP_CHECK(orbit_pool_version(p, KEY, &v) == 0, "version");
    struct io_uring_sqe sqe = { 0 };
    int rc = orbit_pool_prep_wait_capacity(p, KEY, v, &sqe);
    TP_CHECK(rc == -ORBIT_ENOTSUP, "prep without membarrier: %s", orbit_strerror(rc));
    rc = orbit_pool_wait_capacity(p, KEY, v, 10000, NULL);
    return rc == 0 ? 0 : rc == -ORBIT_ETIMEDOUT ? 2 : 1;
}

/* The waiter parks; a registered completer's DONE lands without a wake (its read of the key's
 * words came first, and the waiter's membarrier, which would have ordered them, was refused).
 * The waiter sleeps in slices and folds after each: it returns room, not its timeout. */
START_TEST(a_waiter_without_membarrier_finds_an_unannounced_done_within_a_slice)
{
    struct fixture x;
    setup(&x, "hnomb");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 1, &id), 0);
    struct pool_resource *r = res_of(x.p, id);
    struct orbit_lease l;
    struct orbit_execution ex;
    take(x.p, id, &l, &ex);
    uint32_t ki;
    ck_assert_int_eq(pool_key_peek(x.p, KEY, &ki), 0);
    struct unfenced u = { x.name, getpid() };
    pid_t kid = tp_spawn(unfenced_waiter, &u);
    int64_t until = tu_now_ns() + 10000 * 1000000ll;
    while (!atomic_load(&pool_key_at(x.p, ki)->wait.parked) && tu_now_ns() < until)
        usleep(1000);
    ck_assert_msg(atomic_load(&pool_key_at(x.p, ki)->wait.parked), "the waiter never parked");
    atomic_store(&r->pending[l.fence % POOL_PENDING].since, l.fence | SINCE_DONE);
    ck_assert_int_eq(tu_wait_child(kid, 20000), 0);
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)), 0);   /* folded by the waiter */
    ck_assert_int_eq(orbit_fleet_node_dead(x.f, REMOTE_NODE, REMOTE_INC), 0);
    teardown(&x);
}
END_TEST

/* Held entries at capacity: an unaccepted reservation aged by reconcile is a unit back, and
 * a change for the key's waiters, whatever part of active the held entries make up. */
START_TEST(a_reconcile_that_ages_a_reservation_beside_held_entries_wakes_the_key)
{
    struct fixture x;
    setup(&x, "hrwake");
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, 2, &id), 0);
    struct orbit_lease l, gave_up, n;
    struct orbit_execution ex;
    take(x.p, id, &l, &ex);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &gave_up), 0);   /* never brought to the owner */
    uint32_t v, now;
    ck_assert_int_eq(orbit_pool_version(x.p, KEY, &v), 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    ck_assert_int_eq(orbit_pool_reconcile(x.p, id, 1, 0), 0);   /* one runs: the reservation ages */
    assert_counts(x.p, 1, 0);
    ck_assert_int_eq(orbit_pool_wait_capacity(x.p, KEY, v, 0, &now), 0);
    ck_assert_uint_ne(now, v);
    orbit_execution_complete(&ex);
    teardown(&x);
}
END_TEST

/* The owner process (node OWNER_NODE): capacity 2, one execution DONE, the other ACTIVE in a
 * worker process it forks, which outlives it and completes when a byte comes on go. It sends
 * the id, the worker's pid and lease, then waits to be killed. */
struct owner { const char *name; int wr, go, go_wr; orbit_id old; uint32_t entry; pid_t parent; };

static int owner_proc(void *arg)
{
    struct owner *o = arg;
    die_with_parent(o->parent);
    struct orbit_fleet *f = tp_join(o->name, 8, OWNER_NODE, OWNER_INC);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    orbit_id id;
    TP_CHECK(orbit_pool_register(p, KEY, 2, &id) == 0, "register");
    struct orbit_lease l[2];
    struct orbit_execution ex[2];
    for (int i = 0; i < 2; i++)
        TP_CHECK(orbit_pool_reserve(p, id, &l[i]) == 0 && orbit_pool_accept(p, &l[i], &ex[i]) == 0, "take");
    orbit_execution_complete(&ex[0]);
    fflush(NULL);
    pid_t worker = fork();
    TP_CHECK(worker >= 0, "fork");
    if (worker == 0) {
        close(o->go_wr);   /* the test's end only: EOF if it goes away */
        char c;
        if (read(o->go, &c, 1) != 1)
            _exit(5);
        orbit_execution_complete(&ex[1]);
        _exit(0);
    }
    tp_send(o->wr, &id, sizeof id);
    tp_send(o->wr, &worker, sizeof worker);
    tp_send(o->wr, &l[1], sizeof l[1]);
    for (;;)
        pause();
    return 3;
}

/* The node's next life: registers capacity 1 in the old slot, cycles its unit until it holds
 * the entry the old execution names, sends the id and waits to be killed. */
static int heir_proc(void *arg)
{
    struct owner *o = arg;
    die_with_parent(o->parent);
    struct orbit_fleet *f = tp_join(o->name, 8, OWNER_NODE, OWNER_INC + 1);
    struct orbit_pool *p;
    TP_CHECK(orbit_pool_open(f, NULL, &p) == 0, "pool open");
    orbit_id id;
    for (uint32_t n = 0;; n++) {   /* the lane's cursor rotates: the old slot comes round */
        TP_CHECK(n <= p->geo.lane_capacity && orbit_pool_register(p, KEY, 1, &id) == 0, "register");
        if (orbit_id_slot(id) == orbit_id_slot(o->old))
            break;
        TP_CHECK(orbit_pool_unregister(p, id) == 0, "unregister");
    }
    struct orbit_lease l;
    struct orbit_execution ex;
    for (;;) {
        TP_CHECK(orbit_pool_reserve(p, id, &l) == 0 && orbit_pool_accept(p, &l, &ex) == 0, "take");
        if (entry_of(&l) == o->entry)
            break;
        orbit_execution_complete(&ex);
    }
    tp_send(o->wr, &id, sizeof id);
    for (;;)
        pause();
    return 3;
}

/* An owner killed with an ACTIVE and a DONE entry: the death report closes its resource; its
 * worker's late complete, after the node's next life holds the same slot and entry, frees
 * nothing there. */
START_TEST(an_owner_killed_with_held_entries_closes_and_a_late_complete_frees_nothing)
{
    struct fixture x;
    setup(&x, "hown");
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);   /* the worker outlives its parent */
    struct tp_pipe up = tp_pipe(), go = tp_pipe();
    struct owner o = { x.name, up.wr, go.rd, go.wr, 0, 0, getpid() };
    pid_t owner = tp_spawn(owner_proc, &o), worker;
    struct orbit_lease late, n;
    ck_assert(tp_recv(up.rd, &o.old, sizeof o.old) && tp_recv(up.rd, &worker, sizeof worker) &&
              tp_recv(up.rd, &late, sizeof late));
    o.entry = entry_of(&late);
    assert_counts(x.p, 1, 0);   /* one held ACTIVE; the DONE counts free */
    kill(owner, SIGKILL);
    ck_assert_int_eq(tu_wait_child(owner, 10000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_node_dead(x.f, OWNER_NODE, OWNER_INC), 0);
    ck_assert_int_eq(orbit_pool_candidates(x.p, KEY, NULL, 0), 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, o.old, &n), -ORBIT_ESTALE);
    pid_t heir = tp_spawn(heir_proc, &o);
    orbit_id id;
    ck_assert(tp_recv(up.rd, &id, sizeof id));
    ck_assert_uint_eq(orbit_id_slot(id), orbit_id_slot(o.old));
    struct pool_resource *r = res_of(x.p, id);
    ck_assert_uint_eq(fence_at(r, o.entry) & ENTRY_HELD, ENTRY_HELD);
    assert_counts(x.p, 1, 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    ck_assert_int_eq(write(go.wr, "g", 1), 1);
    ck_assert_int_eq(tu_wait_child(worker, 10000), 0);
    assert_counts(x.p, 1, 0);   /* the heir's execution still holds its entry */
    ck_assert_uint_eq(atomic_load(&r->pending[o.entry].since) & SINCE_DONE, 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, id, &n), -ORBIT_EBUSY);
    kill(heir, SIGKILL);
    ck_assert_int_eq(tu_wait_child(heir, 10000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_node_dead(x.f, OWNER_NODE, OWNER_INC + 1), 0);
    ck_assert_int_eq(orbit_pool_candidates(x.p, KEY, NULL, 0), 0);
    close(up.rd), close(up.wr), close(go.rd), close(go.wr);
    teardown(&x);
}
END_TEST

/* ---- threads racing reserve/accept/complete on one resource ---- */

enum { THREADS = 4, ROUNDS = 20000, RACE_CAP = 2 };

struct race { struct orbit_pool *p; orbit_id id; _Atomic int held, most, errors; };

static void *racer(void *arg)
{
    struct race *rc = arg;
    for (int n = 0; n < ROUNDS;) {
        struct orbit_lease l;
        int e = orbit_pool_reserve(rc->p, rc->id, &l);
        if (e == -ORBIT_EBUSY) {
            sched_yield();
            continue;
        }
        struct orbit_execution ex;
        if (e != 0 || orbit_pool_accept(rc->p, &l, &ex) != 0) {
            atomic_fetch_add(&rc->errors, 1);
            return NULL;
        }
        int held = atomic_fetch_add(&rc->held, 1) + 1, most = atomic_load(&rc->most);
        while (held > most && !atomic_compare_exchange_weak(&rc->most, &most, held))
            ;
        atomic_fetch_sub(&rc->held, 1);   /* before the unit goes back: never counts low */
        orbit_execution_complete(&ex);
        n++;
    }
    return NULL;
}

START_TEST(racing_completes_and_reserves_never_over_admit)
{
    struct fixture x;
    setup(&x, "hrace");
    struct race rc = { .p = x.p };
    ck_assert_int_eq(orbit_pool_register(x.p, KEY, RACE_CAP, &rc.id), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, racer, &rc), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&rc.errors), 0);
    ck_assert_int_le(atomic_load(&rc.most), RACE_CAP);
    ck_assert_int_ge(atomic_load(&rc.most), 1);
    struct orbit_candidate c = candidate(x.p);
    ck_assert_uint_eq(c.reserved, 0);
    ck_assert_uint_eq(c.active, 0);
    /* Every unit came back: exactly the capacity can be taken again. */
    struct orbit_lease l[RACE_CAP + 1];
    for (int i = 0; i < RACE_CAP; i++)
        ck_assert_int_eq(orbit_pool_reserve(x.p, rc.id, &l[i]), 0);
    ck_assert_int_eq(orbit_pool_reserve(x.p, rc.id, &l[RACE_CAP]), -ORBIT_EBUSY);
    teardown(&x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-held");
    TCase *tc = tcase_create("held");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, above_sixteen_units_accepts_free_their_entries);
    tcase_add_test(tc, racing_completes_and_reserves_never_over_admit);
    suite_add_tcase(s, tc);
    if (POOL_PAIR_CAS) {   /* no held entries without the pair CAS: the counted tests above cover it */
        TCase *held = tcase_create("held-states");
        tcase_set_timeout(held, 120);
        tcase_add_test(held, a_done_entry_counts_free_and_is_folded_once_by_the_next_reserve);
        tcase_add_test(held, a_late_done_on_a_retaken_entry_frees_nothing);
        tcase_add_test(held, an_execution_killed_with_its_entry_active_is_reclaimed_by_reconcile);
        tcase_add_test(held, a_waiter_about_to_sleep_folds_a_done_whose_wake_it_missed);
        tcase_add_test(held, sixteen_units_all_done_are_folded_when_no_entry_is_free);
        tcase_add_test(held, a_reserver_killed_between_its_fold_and_the_release_costs_no_unit_after_reconcile);
        tcase_add_loop_test(held, a_killed_reservers_unaccepted_lease_is_freed_among_held_entries, 0, 2);
        tcase_add_test(held, an_owner_killed_with_held_entries_closes_and_a_late_complete_frees_nothing);
        tcase_add_test(held, a_folders_late_release_leaves_a_retaken_entry_to_its_new_holder);
        tcase_add_test(held, a_new_holder_before_its_publish_is_neither_folded_nor_lost);
        tcase_add_test(held, a_waiter_without_membarrier_finds_an_unannounced_done_within_a_slice);
        tcase_add_test(held, a_reconcile_that_ages_a_reservation_beside_held_entries_wakes_the_key);
        suite_add_tcase(s, held);
    }
    return tu_run(s);
}
