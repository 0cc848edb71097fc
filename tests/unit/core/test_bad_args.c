/* SPDX-License-Identifier: MIT */
/*
 * Arguments out of range are -ORBIT_EMALFORMED before anything happens: a gid
 * outside -1 and 0..4294967294, a timeout below -1 on every timed call, a
 * reconciled active count above the resource's capacity; orbit_strerror is
 * defined for every int.
 */
#include <limits.h>
#include <string.h>
#include <orbit/admission.h>
#include <orbit/exchange.h>
#include <orbit/pool.h>
#include <orbit/stream.h>
#include "testutil.h"

static const orbit_key KEY = { 7, 7 };

START_TEST(a_gid_out_of_range_is_malformed)
{
    static const int64_t bad[] = { -2, 4294967295LL, 4294967296LL, 1LL << 40, INT64_MIN, INT64_MAX };
    const char *name = tu_fleet_name("gid");
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    struct orbit_fleet *f;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.gid = bad[i];
        ck_assert_int_eq(orbit_fleet_join(name, &o, &f), -ORBIT_EMALFORMED);
    }
    ck_assert_int_eq(orbit_fleet_unlink(name), -ENOENT);   /* nothing was created */
    o.gid = 4294967294LL;   /* the largest gid: valid (chown may still refuse it) */
    o.capacity = 2;
    int rc = orbit_fleet_join(NULL, &o, &f);
    ck_assert_int_eq(rc, 0);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(strerror_is_defined_for_every_int)
{
    ck_assert_ptr_nonnull(orbit_strerror(INT_MIN));
    ck_assert_ptr_nonnull(orbit_strerror(INT_MAX));
    ck_assert_str_eq(orbit_strerror(-ORBIT_EMALFORMED), orbit_strerror(ORBIT_EMALFORMED));
}
END_TEST

struct fx {
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    struct orbit_endpoint *a, *b;
    struct orbit_exchanges *ex;
    struct orbit_exchange *xa, *xb;
    struct orbit_admission *adm;
    orbit_id res;
};

static void fx_open(struct fx *x)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &x->f), 0);
    ck_assert_int_eq(orbit_pool_open(x->f, NULL, &x->pool), 0);
    ck_assert_int_eq(orbit_pool_register(x->pool, KEY, 2, &x->res), 0);
    struct orbit_stream_spec ss = ORBIT_STREAM_SPEC_DEFAULT;
    ss.lane_capacity = 8;
    ss.buffer_bytes = 4096;
    ck_assert_int_eq(orbit_streams_open(x->f, &ss, &x->streams), 0);
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(x->streams, &x->a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(x->streams, &t, &x->b), 0);
    struct orbit_exchange_spec es = ORBIT_EXCHANGE_SPEC_DEFAULT;
    es.control = (struct orbit_stream_spec){ .kind = 221, .lane_capacity = 8, .buffer_bytes = 4096 };
    es.a_to_b = (struct orbit_arena_spec){ .kind = 222, .slot_bytes = 1024, .slots_per_lane = 8 };
    ck_assert_int_eq(orbit_exchanges_open(x->f, &es, &x->ex), 0);
    ck_assert_int_eq(orbit_exchange_create(x->ex, &x->xa, &t), 0);
    ck_assert_int_eq(orbit_exchange_open(x->ex, &t, &x->xb), 0);
    ck_assert_int_eq(orbit_admission_open(x->f, NULL, &x->adm), 0);
}

static void fx_close(struct fx *x)
{
    orbit_admission_close(x->adm);
    orbit_exchange_close(x->xb);
    orbit_exchange_close(x->xa);
    orbit_exchanges_close(x->ex);
    orbit_endpoint_close(x->b);
    orbit_endpoint_close(x->a);
    orbit_streams_close(x->streams);
    orbit_pool_close(x->pool);
    orbit_fleet_leave(x->f);
}

/* _i: the timeout (-2, INT_MIN). Each call would otherwise wait forever or go ahead. */
START_TEST(a_timeout_below_minus_one_is_malformed_on_every_timed_call)
{
    static const int timeouts[] = { -2, INT_MIN };
    int t = timeouts[_i];
    struct fx x;
    fx_open(&x);
    char buf[64] = { 0 };
    uint32_t now32;
    uint64_t now64;
    struct orbit_ticket tk;
    struct orbit_reservation res;
    struct orbit_exchange_event ev;
    struct orbit_exchange *xs;
    struct orbit_session session;
    struct orbit_lease lease;
    ck_assert_int_eq(orbit_pool_reserve(x.pool, x.res, &lease), 0);
    ck_assert_int_eq(orbit_pool_version(x.pool, KEY, &now32), 0);
    ck_assert_int_eq(orbit_pool_wait_capacity(x.pool, KEY, now32, t, &now32), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_streams_wait_offer(x.streams, t, &tk), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_read(x.b, buf, sizeof buf, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_read_exact(x.b, buf, sizeof buf, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_write(x.a, buf, sizeof buf, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_write_all(x.a, buf, sizeof buf, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_write_exact(x.a, buf, sizeof buf, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_wait_readable(x.b, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_wait_writable(x.a, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_wait_writable_exact(x.a, 8, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_wait_peer_closed(x.a, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchanges_wait_offer(x.ex, t, &tk), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_arena_reserve(orbit_exchanges_arena(x.ex, ORBIT_FLOW_A_TO_B), 64, t, &res),
                     -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_reserve(x.xa, 64, t, &res), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_try_reserve(x.xa, 64, &res), 0);
    ck_assert_int_eq(orbit_exchange_start(x.xa, &res, 8, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_data(x.xa, &res, 8, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_send_start(x.xa, buf, 8, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_send_data(x.xa, buf, 8, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_finish(x.xa, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_reset(x.xa, 1, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_next(x.xb, &ev, t), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_open_session(x.ex, &lease, buf, 8, t, &xs), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_accept_session(x.ex, x.pool, &tk, t, &session), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_wait_session(x.ex, x.pool, t, &session), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_wait(x.adm, orbit_admission_epoch(x.adm), t, &now64), -ORBIT_EMALFORMED);
    /* Nothing happened: the stream is empty, the exchange still NEW, the reservation still ours. */
    ck_assert_int_eq(orbit_endpoint_try_read(x.b, buf, sizeof buf), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_exchange_send_state(x.xa), ORBIT_FLOW_NEW);
    orbit_arena_cancel(&res);
    fx_close(&x);
}
END_TEST

START_TEST(reconcile_refuses_more_active_than_capacity)
{
    struct fx x;
    fx_open(&x);
    ck_assert_int_eq(orbit_pool_reconcile(x.pool, x.res, 3, 0), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_reconcile(x.pool, x.res, UINT32_MAX, 0), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_reconcile(x.pool, x.res, 2, 0), 0);
    struct orbit_lease l;
    ck_assert_int_eq(orbit_pool_reserve(x.pool, x.res, &l), -ORBIT_EBUSY);   /* 2 of 2 active */
    ck_assert_int_eq(orbit_pool_reconcile(x.pool, x.res, 0, 0), 0);
    ck_assert_int_eq(orbit_pool_reserve(x.pool, x.res, &l), 0);
    fx_close(&x);
}
END_TEST

/* orbit_last_error names the call and the rule, and is "" again after a call that succeeded. */
#define ck_last_error_has(call, what)                                                              \
    do {                                                                                           \
        const char *e_ = orbit_last_error();                                                       \
        ck_assert_msg(strstr(e_, call) && strstr(e_, what), "last error \"%s\": want %s, %s", e_, \
                      call, what);                                                                 \
    } while (0)

/* Every options and spec struct's reserved tail: a non-zero word is refused, named, and nothing opens. */
START_TEST(a_non_zero_reserved_word_is_refused_in_every_options_and_spec_struct)
{
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(NULL, NULL, &f), 0);
    for (size_t i = 0; i < 4; i++) {
        struct orbit_pool_spec ps = ORBIT_POOL_SPEC_DEFAULT;
        struct orbit_stream_spec ss = ORBIT_STREAM_SPEC_DEFAULT;
        struct orbit_admission_spec as = ORBIT_ADMISSION_SPEC_DEFAULT;
        struct orbit_arena_spec rs = ORBIT_ARENA_SPEC_DEFAULT;
        struct orbit_pool *pool = NULL;
        struct orbit_streams *streams = NULL;
        struct orbit_admission *adm = NULL;
        struct orbit_arena *arena = NULL;
        char field[16];
        snprintf(field, sizeof field, "resv[%zu]", i);
        ps.resv[i] = ss.resv[i] = as.resv[i] = rs.resv[i] = 1ull << (i * 16);
        ck_assert_int_eq(orbit_pool_open(f, &ps, &pool), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_pool_open", field);
        ck_assert_int_eq(orbit_streams_open(f, &ss, &streams), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_streams_open", field);
        ck_assert_int_eq(orbit_admission_open(f, &as, &adm), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_admission_open", field);
        ck_assert_int_eq(orbit_arena_open(f, &rs, &arena), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_arena_open", field);
        ck_assert(!pool && !streams && !adm && !arena);
        struct orbit_exchange_spec xs = ORBIT_EXCHANGE_SPEC_DEFAULT;
        struct orbit_exchanges *ex = NULL;
        xs.resv[i] = 1;
        ck_assert_int_eq(orbit_exchanges_open(f, &xs, &ex), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_exchanges_open", field);
        xs = (struct orbit_exchange_spec)ORBIT_EXCHANGE_SPEC_DEFAULT;
        xs.b_to_a.resv[i] = 1;   /* b_to_a.kind 0 (shared): its spec is never opened, still checked */
        ck_assert_int_eq(orbit_exchanges_open(f, &xs, &ex), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_exchanges_open", "b_to_a.resv");
        ck_assert_ptr_null(ex);
        struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
        struct orbit_fleet *g = NULL;
        if (i >= sizeof o.resv / sizeof o.resv[0])
            continue;   /* the fleet opts have three */
        o.resv[i] = 1;
        ck_assert_int_eq(orbit_fleet_join(NULL, &o, &g), -ORBIT_EMALFORMED);
        ck_last_error_has("orbit_fleet_join", field);
        ck_assert_ptr_null(g);
    }
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    struct orbit_fleet *g = NULL;
    o.resv32 = 1;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &g), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_fleet_join", "resv32");
    ck_assert_ptr_null(g);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(the_last_error_says_what_was_wrong)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join("my fleet", &o, &f), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_fleet_join", "name 'my fleet'");
    o.capacity = 0;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_fleet_join", "capacity 0");
    o = (struct orbit_fleet_opts)ORBIT_FLEET_OPTS_DEFAULT;
    o.mode = 0666;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_fleet_join", "mode 0666");
    o = (struct orbit_fleet_opts)ORBIT_FLEET_OPTS_DEFAULT;
    o.resv[2] = 1;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_fleet_join", "resv[2]");
    struct fx x;
    fx_open(&x);
    ck_assert_str_eq(orbit_last_error(), "");
    char buf[8];
    ck_assert_int_eq(orbit_endpoint_read(x.b, buf, sizeof buf, -5), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_endpoint_read", "timeout -5 ms");
    ck_assert_int_eq(orbit_endpoint_try_write(x.a, "x", 1), 1);
    ck_assert_str_eq(orbit_last_error(), "");
    ck_assert_int_eq(orbit_pool_reserve(x.pool, x.res, NULL), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_pool_reserve", "out is NULL");
    ck_assert_int_eq(orbit_pool_register(x.pool, KEY, 0, &x.res), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_pool_register", "capacity 0");
    ck_assert_int_eq(orbit_pool_reserve(NULL, x.res, NULL), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_pool_reserve", "pool handle is NULL");
    struct orbit_lease l;
    struct orbit_execution e;
    ck_assert_int_eq(orbit_pool_reserve(x.pool, x.res, &l), 0);
    ck_assert_str_eq(orbit_last_error(), "");
    ck_assert_int_eq(orbit_pool_accept(x.pool, &l, &e), 0);
    ck_assert_int_eq(orbit_pool_accept(x.pool, &l, &e), -ORBIT_ENOTRESERVED);
    ck_last_error_has("orbit_pool_accept", "not an unaccepted reservation");
    struct orbit_pool_spec ps = ORBIT_POOL_SPEC_DEFAULT;
    struct orbit_pool *p2;
    ps.key_capacity = 100;
    ck_assert_int_eq(orbit_pool_open(x.f, &ps, &p2), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_pool_open", "spec.key_capacity 100");
    struct orbit_ticket t = { 0 };
    struct orbit_endpoint *ep;
    ck_assert_int_eq(orbit_streams_open_ticket(x.streams, &t, &ep), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_streams_open_ticket", "ticket");
    struct orbit_admission_spec as = ORBIT_ADMISSION_SPEC_DEFAULT;
    struct orbit_admission *a2;
    as.max_domains = 0;
    ck_assert_int_eq(orbit_admission_open(x.f, &as, &a2), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_admission_open", "spec.max_domains 0");
    struct orbit_demand d = { 0 };
    struct orbit_admit_result r;
    ck_assert_int_eq(orbit_admission_try_claim(x.adm, &d, &r), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_admission_try_claim", "n_claim");
    struct orbit_arena_spec ars = ORBIT_ARENA_SPEC_DEFAULT;
    struct orbit_arena *ar;
    ars.slot_bytes = 100;
    ck_assert_int_eq(orbit_arena_open(x.f, &ars, &ar), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_arena_open", "spec.slot_bytes 100");
    ars = (struct orbit_arena_spec)ORBIT_ARENA_SPEC_DEFAULT;
    ars.slots_per_lane = 3;
    ck_assert_int_eq(orbit_arena_open(x.f, &ars, &ar), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_arena_open", "spec.slots_per_lane 3");
    orbit_execution_complete(&e);
    ck_assert_str_eq(orbit_last_error(), "");
    fx_close(&x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bad_args");
    TCase *tc = tcase_create("bad_args");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, a_gid_out_of_range_is_malformed);
    tcase_add_test(tc, strerror_is_defined_for_every_int);
    tcase_add_loop_test(tc, a_timeout_below_minus_one_is_malformed_on_every_timed_call, 0, 2);
    tcase_add_test(tc, reconcile_refuses_more_active_than_capacity);
    tcase_add_test(tc, the_last_error_says_what_was_wrong);
    tcase_add_test(tc, a_non_zero_reserved_word_is_refused_in_every_options_and_spec_struct);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
