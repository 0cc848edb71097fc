/* SPDX-License-Identifier: MIT */
/*
 * A stream whose last holder let go of its side (its release, or a reporter
 * ending it) and was killed before vacating the slot: the next death report
 * vacates it, so the slot is not lost.
 */
#include <orbit/stream.h>
#include "testutil.h"
#include "stream/stream_layout.h"

/* _i: side A left RELEASED (a closer killed), or DEAD (a reporter killed), after B closed
 * (0, 1) or with B never opened (2, 3). */
START_TEST(an_abandoned_live_slot_is_vacated_by_the_next_death_report)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), 0);
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(s, &a, &t), 0);
    if (_i < 2) {
        ck_assert_int_eq(orbit_streams_open_ticket(s, &t, &b), 0);
        orbit_endpoint_close(b);   /* B released while A still held: the slot stays live */
    }
    ck_assert_int_eq(orbit_streams_list(s, NULL, 0), 1);
    atomic_store(&a->slot->claimed[0], _i % 2 == 0 ? SIDE_RELEASED : SIDE_DEAD);   /* then cut short */
    orbit_streams_node_dead(s, 1, 12345);   /* any death report: another node's */
    ck_assert_int_eq(orbit_streams_list(s, NULL, 0), 0);
    ck_assert(!orbit_streams_is_live(s, t.id));
    orbit_endpoint_close(a);   /* its side was let go already: nothing more */
    ck_assert_int_eq(orbit_streams_list(s, NULL, 0), 0);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
}
END_TEST

/* A slot with one side never opened (an offered stream) is not abandoned: left alone. */
START_TEST(a_stream_waiting_for_its_opener_is_left_alone)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), 0);
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(s, &a, &t), 0);
    ck_assert_int_eq(orbit_endpoint_write_exact(a, "hello", 5, 0), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    orbit_streams_node_dead(s, 1, 12345);
    ck_assert_int_eq(orbit_streams_list(s, NULL, 0), 1);
    ck_assert_int_eq(orbit_streams_open_ticket(s, &t, &b), 0);
    char buf[8];
    ck_assert_int_eq(orbit_endpoint_read_exact(b, buf, 5, 0), 0);
    ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
    orbit_endpoint_close(b);
    orbit_endpoint_close(a);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("stream_cut_short");
    TCase *tc = tcase_create("cut_short");
    tcase_add_loop_test(tc, an_abandoned_live_slot_is_vacated_by_the_next_death_report, 0, 4);
    tcase_add_test(tc, a_stream_waiting_for_its_opener_is_left_alone);
    suite_add_tcase(su, tc);
    return tu_run(su);
}
