/* SPDX-License-Identifier: MIT */
/*
 * Held entries (capacity <= 16): an accepted lease keeps its pending entry,
 * its complete marks the entry DONE by a store and the next reserve folds it.
 * Racing completes and reserves never over-admit; a DONE entry is folded once
 * and a late DONE matches nobody; an execution whose process was killed with
 * its entry ACTIVE is reclaimed by the owner's reconcile; above 16 units the
 * counted path is kept.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <orbit/pool.h>
#include "testutil.h"
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
    ck_assert_uint_eq(atomic_load(&r->pending[b1].since_ms), l1.fence | SINCE_DONE);
    ck_assert_uint_eq(candidate(x.p).active, 0);
    ck_assert_uint_eq(candidate(x.p).reserved, 0);
    take(x.p, id, &l2, &e2);
    /* Folded by that reserve: bit cleared, entry wiped. */
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)) & (1u << b1), 0);
    ck_assert_uint_eq(atomic_load(&r->pending[b1].fence), 0);
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
    atomic_store(&r->pending[b1].since_ms, (l.fence - POOL_PENDING) | SINCE_DONE);
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
    struct tu_gate g;
    tu_gate_init(&g);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {   /* the owner's process image, accepting then killed before it completes */
        struct orbit_execution ex;
        if (orbit_pool_accept(x.p, &l, &ex) != 0)
            _exit(3);
        char c = 1;
        if (write(g.fd[1], &c, 1) != 1)
            _exit(4);
        for (;;)
            pause();
    }
    char c;
    ck_assert_int_eq(read(g.fd[0], &c, 1), 1);
    kill(kid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
    tu_gate_close(&g);
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
    atomic_store(&r->pending[l.fence % POOL_PENDING].since_ms, l.fence | SINCE_DONE);
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_pool_wait_capacity(x.p, KEY, v, 5000, NULL), 0);
    ck_assert_int_lt(tu_now_ns() - t0, 4000 * 1000000ll);   /* woken by the fold, not the timeout */
    ck_assert_uint_eq(units_bits(atomic_load(&r->units)), 0);   /* folded by the waiter */
    ck_assert_uint_eq(atomic_load(&r->pending[l.fence % POOL_PENDING].fence), 0);
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
        suite_add_tcase(s, held);
    }
    return tu_run(s);
}
