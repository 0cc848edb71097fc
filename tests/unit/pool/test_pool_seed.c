/* SPDX-License-Identifier: MIT */
/* The pool's protocol: leases, fences, aging, drain, claims, waits, death, epochs, acquire. */
#include "pool_common.h"

START_TEST(exclusive_resource_is_leased_once_and_freed_by_the_owner)
{
    struct env e = env_open(NULL);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_uint_eq(orbit_id_node(id), 0);
    ck_assert_uint_eq(orbit_id_kind(id), ORBIT_POOL_KIND);
    struct orbit_candidate c = only_candidate(e.p, KEY);
    ck_assert(c.local);
    ck_assert_uint_eq(cand_free(&c), 1);
    ck_assert_uint_eq(c.owner_incarnation, 1);

    struct orbit_lease lease, again;
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &lease), 0);
    ck_assert_uint_eq(lease.fence, 1);
    ck_assert_uint_eq(lease.holder, 0);
    ck_assert_uint_eq(lease.holder_incarnation, 1);
    ck_assert_uint_eq(lease.epoch, orbit_pool_epoch(e.p));
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &again), -ORBIT_EBUSY);
    ck_assert_uint_eq(only_candidate(e.p, KEY).reserved, 1);

    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_accept(e.p, &lease, &ex), 0);
    c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(c.reserved, 0);
    ck_assert_uint_eq(c.active, 1);
    /* Still busy while the owner works, whatever the caller does. */
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &again), -ORBIT_EBUSY);
    orbit_execution_complete(&ex);
    ck_assert(ex.done);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &again), 0);
    ck_assert_uint_eq(again.fence, 2);
    ck_assert_int_eq(orbit_pool_accept(e.p, &again, &ex), 0);
    orbit_execution_complete(&ex);
    orbit_execution_complete(&ex);   /* idempotent: gives nothing back twice */
    c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(cand_free(&c), 1);
    ck_assert_uint_eq(c.active, 0);
    ck_assert_uint_ne(c.last_reserve_ms, 0);
    env_close(&e);
}
END_TEST

START_TEST(abandoned_reservation_is_aged_out_by_the_owner_not_by_time_alone)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease abandoned, other;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &abandoned), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &other), -ORBIT_EBUSY);
    /* Within the grace the reservation is honoured. */
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 60000), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &other), -ORBIT_EBUSY);
    /* Past it, the owner's reconcile frees the unit, and a late accept is refused
     * (20 ms: well past the 1 ms grace plus a coarse clock tick). */
    tu_sleep_ms(20);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 1), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &abandoned, &ex), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &other), 0);
    env_close(&e);
}
END_TEST

START_TEST(lease_is_accepted_exactly_once_and_leases_are_told_apart)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease first, second, old, fresh;
    struct orbit_execution run_first, run_second, ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 2, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &first), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &second), 0);
    ck_assert_uint_ne(first.fence, second.fence);
    ck_assert_uint_gt(second.fence, first.fence);
    /* Out of order, each once. */
    ck_assert_int_eq(orbit_pool_accept(e.p, &second, &run_second), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &second, &ex), -ORBIT_ENOTRESERVED);
    ck_assert(ex.done);
    orbit_execution_complete(&ex);   /* a refused execution gives nothing back */
    ck_assert_uint_eq(only_candidate(e.p, KEY).active, 1);
    ck_assert_int_eq(orbit_pool_accept(e.p, &first, &run_first), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &first, &ex), -ORBIT_ENOTRESERVED);
    struct orbit_candidate c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(c.reserved, 0);
    ck_assert_uint_eq(c.active, 2);
    orbit_execution_complete(&run_first);
    orbit_execution_complete(&run_second);
    c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(cand_free(&c), 2);

    /* Aging is per reservation: an old one goes, a fresh one stays. Stamps are
     * coarse (a few ms a tick), so the gaps are wide: only a ~60 ms stall between
     * the fresh reserve and the reconcile could age the fresh one. */
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &old), 0);
    tu_sleep_ms(120);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &fresh), 0);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 60), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &old, &ex), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_pool_accept(e.p, &fresh, &ex), 0);
    /* A fence nobody was given is never reserved. */
    struct orbit_lease forged = fresh;
    forged.fence = 0;
    ck_assert_int_eq(orbit_pool_accept(e.p, &forged, &ex), -ORBIT_ENOTRESERVED);
    forged.fence = fresh.fence + 100;
    ck_assert_int_eq(orbit_pool_accept(e.p, &forged, &ex), -ORBIT_ENOTRESERVED);
    env_close(&e);
}
END_TEST

START_TEST(owner_far_behind_makes_the_resource_refuse_reservations)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease leases[32], extra;
    struct orbit_execution ex;
    ck_assert_uint_eq(ORBIT_PENDING_RESERVATIONS, 16);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, UINT32_MAX, &id), 0);
    for (unsigned i = 0; i < ORBIT_PENDING_RESERVATIONS; i++)
        ck_assert_int_eq(orbit_pool_reserve(e.p, id, &leases[i]), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &extra), -ORBIT_EBUSY);
    ck_assert_uint_eq(only_candidate(e.p, KEY).reserved, ORBIT_PENDING_RESERVATIONS);
    ck_assert_int_eq(orbit_pool_accept(e.p, &leases[0], &ex), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &extra), 0);
    orbit_execution_complete(&ex);
    env_close(&e);
}
END_TEST

START_TEST(capacity_counts_and_drain_refuses_new_leases)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease leases[3], extra;
    struct orbit_execution running, ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 3, &id), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(orbit_pool_reserve(e.p, id, &leases[i]), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &extra), -ORBIT_EBUSY);
    ck_assert_int_eq(orbit_pool_accept(e.p, &leases[0], &running), 0);
    ck_assert_int_eq(orbit_pool_drain(e.p, id), 0);
    ck_assert_int_eq(orbit_pool_drain(e.p, id), 0);   /* draining twice is still draining */
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &extra), -ORBIT_EDRAINING);
    ck_assert_int_eq(orbit_pool_accept(e.p, &leases[1], &ex), -ORBIT_EDRAINING);
    ck_assert_int_eq(only_candidate(e.p, KEY).state, ORBIT_DRAINING);
    orbit_execution_complete(&running);
    ck_assert_int_eq(orbit_pool_unregister(e.p, id), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &leases[2], &ex), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_unregister(e.p, id), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_drain(e.p, id), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 0), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, NULL, 0), 0);
    assert_budget(e.p, KEY, 0, 0);
    env_close(&e);
}
END_TEST

START_TEST(reused_slot_makes_the_old_id_stale)
{
    struct env e = env_open(NULL);
    struct orbit_pool_spec spec;
    orbit_pool_spec_of(e.p, &spec);
    orbit_id first, id, second;
    struct orbit_lease lease, l2;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &first), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, first, &lease), 0);
    ck_assert_int_eq(orbit_pool_unregister(e.p, first), 0);
    for (uint32_t i = 0; i < spec.lane_capacity - 1; i++) {
        QUIET_CHECK(orbit_pool_register(e.p, KEY, 1, &id) == 0, "register %u", i);
        QUIET_CHECK(orbit_pool_unregister(e.p, id) == 0, "unregister %u", i);
    }
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &second), 0);
    ck_assert_uint_eq(orbit_id_slot(second), orbit_id_slot(first));
    ck_assert_uint_ne(orbit_id_generation(second), orbit_id_generation(first));
    ck_assert_int_eq(orbit_pool_reserve(e.p, first, &l2), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_accept(e.p, &lease, &ex), -ORBIT_ESTALE);
    ck_assert(!orbit_pool_is_current(e.p, &lease));
    ck_assert_int_eq(orbit_pool_unregister(e.p, first), -ORBIT_ESTALE);
    env_close(&e);
}
END_TEST

struct claim_race { struct orbit_pool *p; struct orbit_permit permit; int rc; };

static void *claim_thread(void *arg)
{
    struct claim_race *c = arg;
    c->rc = orbit_pool_claim_create(c->p, KEY, 3, &c->permit);
    return NULL;
}

START_TEST(creation_claims_hold_the_fleet_under_max_live)
{
    struct env e = env_open(NULL);
    struct orbit_permit first, second, third;
    orbit_id id;
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 2, &first), 0);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 2, &second), 0);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 2, &third), -ORBIT_EBUDGET);
    ck_assert(third.done);
    orbit_permit_finish(&third);   /* a refused permit gives nothing back */
    assert_budget(e.p, KEY, 0, 2);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    orbit_permit_finish(&first);
    assert_budget(e.p, KEY, 1, 1);
    orbit_permit_finish(&second);
    orbit_permit_finish(&second);   /* idempotent */
    assert_budget(e.p, KEY, 1, 0);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 2, &third), 0);
    orbit_permit_finish(&third);
    ck_assert_int_eq(orbit_pool_unregister(e.p, id), 0);
    assert_budget(e.p, KEY, 0, 0);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 0, &third), -ORBIT_EBUDGET);

    /* Under contention, exactly max_live claims succeed. */
    struct claim_race r[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        r[i].p = e.p;
        ck_assert_int_eq(pthread_create(&t[i], NULL, claim_thread, &r[i]), 0);
    }
    int won = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        ck_assert(r[i].rc == 0 || r[i].rc == -ORBIT_EBUDGET);
        won += r[i].rc == 0;
    }
    ck_assert_int_eq(won, 3);
    assert_budget(e.p, KEY, 0, 3);
    for (int i = 0; i < 8; i++)
        if (r[i].rc == 0)
            orbit_permit_finish(&r[i].permit);
    assert_budget(e.p, KEY, 0, 0);
    env_close(&e);
}
END_TEST

struct waiter { struct orbit_pool *p; uint32_t since, now; int rc; _Atomic pid_t tid; };

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->tid, gettid());
    w->rc = orbit_pool_wait_capacity(w->p, KEY, w->since, -1, &w->now);
    return NULL;
}

/* The thread's scheduler state from /proc: 'S' once it sleeps in the kernel. */
static char thread_state(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

START_TEST(waiter_is_woken_when_the_owner_completes)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease lease, l2;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &lease), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &lease, &ex), 0);
    uint32_t since, now = 0;
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &since), 0);

    struct orbit_pool_stats before, after;
    orbit_pool_stats(e.p, &before);
    struct waiter w = { .p = e.p, .since = since, .rc = -1 };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    /* Complete only once the waiter sleeps in the kernel: the wake is what frees it. */
    char st = '?';
    for (int i = 0; i < 10000 && st != 'S'; i++) {
        pid_t tid = atomic_load(&w.tid);
        st = tid ? thread_state(tid) : '?';
        if (st != 'S')
            tu_sleep_ms(1);
    }
    ck_assert_int_eq(st, 'S');
    orbit_execution_complete(&ex);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_gt(w.now, since);
    orbit_pool_stats(e.p, &after);
    ck_assert_uint_eq(after.wakes - before.wakes, 1);   /* one wake for one parked waiter */
    ck_assert_uint_eq(after.parks - before.parks, 1);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l2), 0);

    /* The timed form: nothing changes, so it times out and reports the count. */
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &since), 0);
    ck_assert_int_eq(orbit_pool_wait_capacity(e.p, KEY, since, 0, &now), -ORBIT_ETIMEDOUT);
    ck_assert_uint_eq(now, since);
    ck_assert_int_eq(orbit_pool_wait_capacity(e.p, KEY, since, 20, &now), -ORBIT_ETIMEDOUT);
    ck_assert_uint_eq(now, since);
    /* A count already past since returns at once. */
    ck_assert_int_eq(orbit_pool_wait_capacity(e.p, KEY, since - 1, 0, &now), 0);
    ck_assert_uint_eq(now, since);
    env_close(&e);
}
END_TEST

START_TEST(death_report_closes_that_incarnations_resources_and_claims)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease lease, l2;
    struct orbit_permit claim;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 2, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &lease), 0);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 4, &claim), 0);
    assert_budget(e.p, KEY, 1, 1);
    struct orbit_owner owners[4];
    ck_assert_int_eq(orbit_pool_owners(e.p, owners, 4), 1);
    ck_assert_uint_eq(owners[0].node, 0);
    ck_assert_uint_eq(owners[0].incarnation, 1);

    orbit_pool_node_dead(e.p, 0, 2);
    ck_assert(orbit_pool_is_current(e.p, &lease));
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, NULL, 0), 1);

    orbit_pool_node_dead(e.p, 0, 1);
    ck_assert(!orbit_pool_is_current(e.p, &lease));
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l2), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, NULL, 0), 0);
    assert_budget(e.p, KEY, 0, 0);
    ck_assert_int_eq(orbit_pool_owners(e.p, owners, 4), 0);
    /* The permit still held here finishes later and must not underflow. */
    orbit_permit_finish(&claim);
    assert_budget(e.p, KEY, 0, 0);
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(e.p, &kt);
    ck_assert_uint_eq(kt.live, 0);   /* nothing holds the key any more: reclaimed */
    orbit_pool_node_dead(e.p, 7, 1);  /* a node outside the fleet is ignored */
    env_close(&e);
}
END_TEST

START_TEST(reset_starts_a_new_epoch_and_a_slot_can_be_exhausted)
{
    struct orbit_pool_spec spec = ORBIT_POOL_SPEC_DEFAULT;
    spec.generation_limit = 4;
    struct env e = env_open(&spec);
    orbit_id id;
    struct orbit_lease lease, l2;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &lease), 0);
    uint64_t before = orbit_pool_epoch(e.p);
    orbit_pool_reset_all(e.p);
    ck_assert_uint_gt(orbit_pool_epoch(e.p), before);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l2), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, NULL, 0), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &lease, &ex), -ORBIT_ESTALE);
    ck_assert(!orbit_pool_is_current(e.p, &lease));
    assert_budget(e.p, KEY, 0, 0);

    /* generation_limit is 4: every slot gives four tenancies this epoch. */
    for (uint32_t i = 0; i < spec.lane_capacity * 4; i++) {
        int rc = orbit_pool_register(e.p, KEY, 1, &id);
        QUIET_CHECK(rc == 0, "register %u: %s", i, orbit_strerror(rc));
        QUIET_CHECK(orbit_pool_unregister(e.p, id) == 0, "unregister %u", i);
    }
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), -ORBIT_EFULL);
    orbit_pool_reset_all(e.p);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    /* Generations continue across epochs: the new id is not one handed out before. */
    ck_assert_uint_gt(orbit_id_generation(id), 4);
    env_close(&e);
}
END_TEST

START_TEST(acquire_walks_reuse_create_and_wait)
{
    struct env e = env_open(NULL);
    struct orbit_limits limits = { .max_live = 2, .attempts = 2 };
    struct orbit_plan plan, held_plan;
    struct orbit_execution ex;
    orbit_id id;
    /* Nothing yet: create, within the budget. */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_first, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_CREATE);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    orbit_permit_finish(&plan.permit);
    /* A local resource with room: local reuse. */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_first, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_LOCAL_REUSE);
    ck_assert_uint_eq(plan.lease.id, id);
    ck_assert_int_eq(orbit_pool_accept(e.p, &plan.lease, &ex), 0);
    /* Busy, budget for one more: create (and give the permit back). */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_first, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_CREATE);
    orbit_permit_finish(&plan.permit);
    /* Claim it for real: the only answer left is WAIT, with the key's version. */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_first, &held_plan), 0);
    ck_assert_int_eq(held_plan.kind, ORBIT_PLAN_CREATE);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_first, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_WAIT);
    uint32_t version;
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &version), 0);
    ck_assert_uint_eq(plan.version, version);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_only, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_WAIT);
    orbit_execution_complete(&ex);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &limits, &orbit_policy_local_only, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_LOCAL_REUSE);
    orbit_permit_finish(&held_plan.permit);
    /* Defaults: NULL limits (max_live 1) and NULL policy (local first). */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, NULL, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_WAIT);
    env_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-seed");
    TCase *tc = tcase("seed", 60);
    tcase_add_test(tc, exclusive_resource_is_leased_once_and_freed_by_the_owner);
    tcase_add_test(tc, abandoned_reservation_is_aged_out_by_the_owner_not_by_time_alone);
    tcase_add_test(tc, lease_is_accepted_exactly_once_and_leases_are_told_apart);
    tcase_add_test(tc, owner_far_behind_makes_the_resource_refuse_reservations);
    tcase_add_test(tc, capacity_counts_and_drain_refuses_new_leases);
    tcase_add_test(tc, reused_slot_makes_the_old_id_stale);
    tcase_add_test(tc, creation_claims_hold_the_fleet_under_max_live);
    tcase_add_test(tc, waiter_is_woken_when_the_owner_completes);
    tcase_add_test(tc, death_report_closes_that_incarnations_resources_and_claims);
    tcase_add_test(tc, reset_starts_a_new_epoch_and_a_slot_can_be_exhausted);
    tcase_add_test(tc, acquire_walks_reuse_create_and_wait);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
