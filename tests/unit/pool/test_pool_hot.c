/* SPDX-License-Identifier: MIT */
/*
 * The pool's hot path: one 16-byte CAS takes unit, entry and fence (fence f in
 * entry f % 16); a young lease is accepted by the pair, a lapped one through
 * its entry. Pinned here: the ring, exactly-once under racing accepts (young
 * and lapped), a recycled entry never accepting an old fence, racing
 * reservers never over-admitting, aging of a young and of a lapped entry.
 */
#include <sched.h>
#include "pool_common.h"

#define PENDING 16u   /* ORBIT_PENDING_RESERVATIONS */

static uint32_t free_of(struct orbit_pool *p)
{
    struct orbit_candidate c = only_candidate(p, KEY);
    return cand_free(&c);
}

static void cycle(struct orbit_pool *p, orbit_id id, uint64_t *fence)
{
    struct orbit_lease l;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_reserve(p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(p, &l, &ex), 0);
    orbit_execution_complete(&ex);
    if (fence)
        *fence = l.fence;
}

START_TEST(a_pending_lease_keeps_its_entry_and_later_fences_skip_it)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease held;
    ck_assert_uint_eq(ORBIT_PENDING_RESERVATIONS, PENDING);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 2, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &held), 0);
    ck_assert_uint_eq(held.fence, 1);
    uint64_t last = held.fence, skipped = 0;
    for (unsigned i = 0; i < 3 * PENDING; i++) {
        uint64_t f;
        cycle(e.p, id, &f);
        ck_assert_uint_gt(f, last);
        ck_assert_uint_ne(f % PENDING, held.fence % PENDING);   /* held's entry is never handed out */
        skipped += f - last - 1;
        last = f;
    }
    ck_assert_uint_eq(skipped, 3);   /* one fence per lap: the one that would land on held's entry */
    /* Lapped three times, still accepted once, through its entry. */
    struct orbit_execution ex, again;
    ck_assert_int_eq(orbit_pool_accept(e.p, &held, &ex), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &held, &again), -ORBIT_ENOTRESERVED);
    struct orbit_candidate c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(c.reserved, 0);
    ck_assert_uint_eq(c.active, 1);
    orbit_execution_complete(&ex);
    ck_assert_uint_eq(free_of(e.p), 2);
    env_close(&e);
}
END_TEST

START_TEST(a_recycled_entry_never_accepts_the_fence_it_held_before)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease old, now;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &old), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &old, &ex), 0);
    orbit_execution_complete(&ex);
    for (unsigned i = 0; i < PENDING - 1; i++)
        cycle(e.p, id, NULL);
    /* The next fence lands in old's entry again: old is refused, the new holder accepted. */
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &now), 0);
    ck_assert_uint_eq(now.fence, old.fence + PENDING);
    ck_assert_int_eq(orbit_pool_accept(e.p, &old, &ex), -ORBIT_ENOTRESERVED);
    ck_assert_uint_eq(only_candidate(e.p, KEY).reserved, 1);
    ck_assert_int_eq(orbit_pool_accept(e.p, &now, &ex), 0);
    orbit_execution_complete(&ex);
    /* A fence past the last one given, or one in a free entry, is not reserved either. */
    struct orbit_lease forged = now;
    forged.fence = now.fence + 1;
    ck_assert_int_eq(orbit_pool_accept(e.p, &forged, &ex), -ORBIT_ENOTRESERVED);
    forged.fence = now.fence - 1;
    ck_assert_int_eq(orbit_pool_accept(e.p, &forged, &ex), -ORBIT_ENOTRESERVED);
    forged.fence = UINT64_MAX;
    ck_assert_int_eq(orbit_pool_accept(e.p, &forged, &ex), -ORBIT_ENOTRESERVED);
    ck_assert_uint_eq(free_of(e.p), 1);
    env_close(&e);
}
END_TEST

START_TEST(a_skipped_fence_is_never_reserved)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease held, l;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 2, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &held), 0);
    uint64_t prev = held.fence, skipped = 0;
    while (!skipped) {
        cycle(e.p, id, &l.fence);
        if (l.fence != prev + 1)
            skipped = prev + 1;
        prev = l.fence;
    }
    /* The fence that would have landed on held's entry: young, its entry holds held. */
    l = held;
    l.fence = skipped;
    ck_assert_int_eq(orbit_pool_accept(e.p, &l, &ex), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_pool_accept(e.p, &held, &ex), 0);
    orbit_execution_complete(&ex);
    env_close(&e);
}
END_TEST

START_TEST(aging_frees_young_and_lapped_entries_and_their_leases_are_refused)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease lapped, young, fresh;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 3, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &lapped), 0);
    for (unsigned i = 0; i < PENDING + 2; i++)
        cycle(e.p, id, NULL);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &young), 0);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 0), 0);   /* grace 0: both go */
    ck_assert_uint_eq(only_candidate(e.p, KEY).reserved, 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &lapped, &ex), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_pool_accept(e.p, &young, &ex), -ORBIT_ENOTRESERVED);
    /* The entries are free again: a full round of leases goes through. */
    for (unsigned i = 0; i < 2 * PENDING; i++)
        cycle(e.p, id, NULL);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &fresh), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &fresh, &ex), 0);
    orbit_execution_complete(&ex);
    ck_assert_uint_eq(free_of(e.p), 3);
    env_close(&e);
}
END_TEST

/* ---- racing accepts of one lease: exactly one wins, young or lapped ---- */

enum { ACCEPTERS = 4, RACES = 400 };

struct accept_race {
    struct orbit_pool *p;
    _Atomic unsigned round;          /* accepters start when it moves */
    _Atomic unsigned arrived, won, refused, other;
    struct orbit_lease lease;        /* written before round moves */
    struct orbit_execution ex[ACCEPTERS];
    _Atomic int stop;
};

struct accepter { struct accept_race *r; int index; };

static void *accept_thread(void *arg)
{
    struct accepter *a = arg;
    struct accept_race *r = a->r;
    for (unsigned seen = 0;;) {
        unsigned round;
        while ((round = atomic_load(&r->round)) == seen && !atomic_load(&r->stop))
            sched_yield();
        if (atomic_load(&r->stop))
            return NULL;
        seen = round;
        struct orbit_lease lease = r->lease;
        struct orbit_execution ex;
        int rc = orbit_pool_accept(r->p, &lease, &ex);
        if (rc == 0) {
            r->ex[a->index] = ex;
            atomic_fetch_add(&r->won, 1);
        } else
            atomic_fetch_add(rc == -ORBIT_ENOTRESERVED ? &r->refused : &r->other, 1);
        atomic_fetch_add(&r->arrived, 1);
    }
}

static void racing_accepts(bool lapped)
{
    struct env e = env_open(NULL);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 2, &id), 0);
    struct accept_race *r = calloc(1, sizeof *r);
    r->p = e.p;
    pthread_t t[ACCEPTERS];
    struct accepter a[ACCEPTERS];
    for (int i = 0; i < ACCEPTERS; i++) {
        a[i] = (struct accepter){ r, i };
        ck_assert_int_eq(pthread_create(&t[i], NULL, accept_thread, &a[i]), 0);
    }
    for (unsigned round = 1; round <= RACES; round++) {
        QUIET_CHECK(orbit_pool_reserve(e.p, id, &r->lease) == 0, "reserve %u", round);
        if (lapped)   /* the lease falls 16 fences behind: accepted through its entry */
            for (unsigned i = 0; i < PENDING; i++)
                cycle(e.p, id, NULL);
        atomic_store(&r->arrived, 0);
        atomic_store(&r->won, 0);
        atomic_store(&r->round, round);
        while (atomic_load(&r->arrived) < ACCEPTERS)
            sched_yield();
        QUIET_CHECK(atomic_load(&r->won) == 1, "round %u: %u accepts won", round, atomic_load(&r->won));
        QUIET_CHECK(atomic_load(&r->other) == 0, "round %u: an accept failed otherwise", round);
        for (int i = 0; i < ACCEPTERS; i++)
            if (r->ex[i].pool) {
                orbit_execution_complete(&r->ex[i]);
                r->ex[i] = (struct orbit_execution){ 0 };
            }
        struct orbit_candidate c = only_candidate(e.p, KEY);
        QUIET_CHECK(c.reserved == 0 && c.active == 0, "round %u: %u reserved, %u active", round,
                    c.reserved, c.active);
    }
    atomic_store(&r->stop, 1);
    for (int i = 0; i < ACCEPTERS; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(atomic_load(&r->refused), (unsigned)RACES * (ACCEPTERS - 1));
    free(r);
    env_close(&e);
}

START_TEST(racing_accepts_of_a_young_lease_win_once)
{
    racing_accepts(false);
}
END_TEST

START_TEST(racing_accepts_of_a_lapped_lease_win_once)
{
    racing_accepts(true);
}
END_TEST

/* ---- racing reservers and accepters never over-admit ---- */

enum { RESERVERS = 4, CAPACITY = 3, TRIPLES = 20000 };

struct admit_race {
    struct orbit_pool *p;
    orbit_id id;
    _Atomic int held;                /* units the threads hold: reserved or active */
    _Atomic int most;
    _Atomic unsigned accepted, refused, busy;
};

static void note_most(struct admit_race *r, int held)
{
    int m = atomic_load(&r->most);
    while (held > m && !atomic_compare_exchange_weak(&r->most, &m, held))
        ;
}

/* Reserve, accept (half the time twice), complete: a lease counts from reserve to complete. */
static void *admit_thread(void *arg)
{
    struct admit_race *r = arg;
    for (int i = 0; i < TRIPLES; i++) {
        struct orbit_lease l;
        struct orbit_execution ex, dup;
        int rc = orbit_pool_reserve(r->p, r->id, &l);
        if (rc == -ORBIT_EBUSY) {
            atomic_fetch_add(&r->busy, 1);
            continue;
        }
        if (rc != 0)
            return (void *)1;
        note_most(r, atomic_fetch_add(&r->held, 1) + 1);
        if (orbit_pool_accept(r->p, &l, &ex) != 0)
            return (void *)2;
        atomic_fetch_add(&r->accepted, 1);
        if ((i & 1) && orbit_pool_accept(r->p, &l, &dup) != -ORBIT_ENOTRESERVED)
            return (void *)3;
        atomic_fetch_sub(&r->held, 1);   /* before the unit goes back: never counts low */
        orbit_execution_complete(&ex);
    }
    return NULL;
}

START_TEST(racing_reservers_never_over_admit)
{
    struct env e = env_open(NULL);
    struct admit_race r = { .p = e.p };
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, CAPACITY, &r.id), 0);
    pthread_t t[RESERVERS];
    for (int i = 0; i < RESERVERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, admit_thread, &r), 0);
    for (int i = 0; i < RESERVERS; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_int_le(atomic_load(&r.most), CAPACITY);
    ck_assert_uint_eq(atomic_load(&r.accepted) + atomic_load(&r.busy), (unsigned)RESERVERS * TRIPLES);
    struct orbit_candidate c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(c.reserved, 0);
    ck_assert_uint_eq(c.active, 0);
    env_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-hot");
    TCase *tc = tcase("hot", 240);
    tcase_add_test(tc, a_pending_lease_keeps_its_entry_and_later_fences_skip_it);
    tcase_add_test(tc, a_recycled_entry_never_accepts_the_fence_it_held_before);
    tcase_add_test(tc, a_skipped_fence_is_never_reserved);
    tcase_add_test(tc, aging_frees_young_and_lapped_entries_and_their_leases_are_refused);
    tcase_add_test(tc, racing_accepts_of_a_young_lease_win_once);
    tcase_add_test(tc, racing_accepts_of_a_lapped_lease_win_once);
    tcase_add_test(tc, racing_reservers_never_over_admit);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
