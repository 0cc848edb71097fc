/* SPDX-License-Identifier: MIT */
/*
 * A handle's own counts (core/tally.h): exact over any number of threads,
 * kept when a thread ends, cells handed to later threads rather than made
 * anew, a destroyed tally's thread entries never matching a later one; and
 * through the public calls, orbit_streams_stats exact with several threads.
 */
#include <pthread.h>
#include <orbit/orbit.h>
#include "testutil.h"
#include "core/tally.h"

#define THREADS 4
#define ADDS    20000

struct adder { struct orb_tally *t; unsigned count; uint64_t n; };

static void *add_main(void *arg)
{
    struct adder *a = arg;
    for (int i = 0; i < ADDS; i++)
        orb_tally_add(a->t, a->count, a->n);
    return NULL;
}

static unsigned cells_of(struct orb_tally *t)
{
    unsigned n = 0;
    for (struct orb_tally_cell *c = t->cells; c; c = c->next)
        n++;
    return n;
}

START_TEST(counts_are_exact_across_threads_and_outlive_them)
{
    struct orb_tally t;
    orb_tally_init(&t);
    for (int round = 0; round < 5; round++) {
        pthread_t th[THREADS];
        struct adder a[THREADS];
        for (int i = 0; i < THREADS; i++) {
            a[i] = (struct adder){ &t, (unsigned)i % 2, (uint64_t)i + 1 };
            ck_assert_int_eq(pthread_create(&th[i], NULL, add_main, &a[i]), 0);
        }
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        /* Threads that ended left their cells to the next ones: churn adds none. */
        ck_assert_uint_le(cells_of(&t), THREADS);
    }
    orb_tally_add(&t, 2, 7);   /* this thread too */
    uint64_t v[3];
    orb_tally_read(&t, v, 3);
    ck_assert_uint_eq(v[0], 5ull * ADDS * (1 + 3));
    ck_assert_uint_eq(v[1], 5ull * ADDS * (2 + 4));
    ck_assert_uint_eq(v[2], 7);
    orb_tally_destroy(&t);
}
END_TEST

START_TEST(a_tally_made_again_at_the_same_address_starts_from_zero)
{
    struct orb_tally t;
    orb_tally_init(&t);
    orb_tally_add(&t, 0, 5);
    orb_tally_destroy(&t);
    orb_tally_init(&t);   /* same address: this thread's entry names the old tally's id */
    orb_tally_add(&t, 0, 1);
    uint64_t v;
    orb_tally_read(&t, &v, 1);
    ck_assert_uint_eq(v, 1);
    orb_tally_destroy(&t);
}
END_TEST

START_TEST(many_tallies_on_one_thread_keep_their_own_counts)
{
    enum { N = 3 * ORB_TALLY_WAYS };
    static struct orb_tally t[N];
    for (int i = 0; i < N; i++)
        orb_tally_init(&t[i]);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < N; i++)
            orb_tally_add(&t[i], 0, (uint64_t)i + 1);
    for (int i = 0; i < N; i++) {
        uint64_t v;
        orb_tally_read(&t[i], &v, 1);
        ck_assert_uint_eq(v, 3ull * ((uint64_t)i + 1));
        ck_assert_uint_eq(cells_of(&t[i]), 1);   /* entries evicted, the cell found again */
        orb_tally_destroy(&t[i]);
    }
}
END_TEST

struct pair { struct orbit_streams *s; int rounds; };

/* One stream of its own: write a byte and read it back, rounds times. */
static void *echo_main(void *arg)
{
    struct pair *p = arg;
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    char c = 'x', got;
    ck_assert_int_eq(orbit_streams_create(p->s, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(p->s, &t, &b), 0);
    for (int i = 0; i < p->rounds; i++) {
        ck_assert_int_eq(orbit_endpoint_write(a, &c, 1, -1), 1);
        ck_assert_int_eq(orbit_endpoint_read(b, &got, 1, -1), 1);
    }
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    return NULL;
}

START_TEST(stream_stats_are_exact_with_several_threads)
{
    struct orbit_fleet *f;
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_fleet_join(NULL, NULL, &f), 0);
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    struct pair p = { s, 3000 };
    for (int round = 0; round < 3; round++) {
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, echo_main, &p), 0);
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
    }
    struct orbit_stream_stats st;
    orbit_streams_stats(s, &st);
    ck_assert_uint_eq(st.bytes_written, 3ull * THREADS * 3000);
    ck_assert_uint_eq(st.bytes_read, 3ull * THREADS * 3000);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tally");
    TCase *tc = tcase_create("tally");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, counts_are_exact_across_threads_and_outlive_them);
    tcase_add_test(tc, a_tally_made_again_at_the_same_address_starts_from_zero);
    tcase_add_test(tc, many_tallies_on_one_thread_keep_their_own_counts);
    tcase_add_test(tc, stream_stats_are_exact_with_several_threads);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
