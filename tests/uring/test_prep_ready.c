/* SPDX-License-Identifier: MIT */
/*
 * The io_uring prep contract, through a real ring: a prep that returns 1
 * (ready now) or an error has filled the SQE it was given as a plain NOP, so
 * a loop that submits every SQE it took sees one completion with res 0 and
 * the user_data it set after the prep. Each SQE is dirtied first, as a reused
 * slot is: another opcode, a bad fd, link, drain and fixed-file flags.
 * Without the kernel's futex ops a prep may answer -ORBIT_ENOTSUP instead of 1:
 * its SQE must be a NOP all the same.
 */
#include <string.h>
#include <orbit/orbit.h>
#include <orbit/uring.h>
#include "testutil.h"

static struct io_uring ring;
static struct orbit_fleet *fleet;
static __u64 next_tag = 0x5eed0001;

static void setup(void)
{
    ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
    ck_assert_int_eq(orbit_fleet_join(NULL, NULL, &fleet), 0);
}

static void teardown(void)
{
    orbit_fleet_leave(fleet);
    io_uring_queue_exit(&ring);
}

/* An SQE holding what a reused slot may hold: anything but a NOP. */
static struct io_uring_sqe *dirty_sqe(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    ck_assert_ptr_nonnull(sqe);
    memset(sqe, 0xa5, sizeof *sqe);
    sqe->opcode = IORING_OP_READ;
    sqe->fd = 12345;
    sqe->flags = IOSQE_IO_LINK | IOSQE_IO_DRAIN | IOSQE_FIXED_FILE;
    return sqe;
}

/* Submit the SQE the prep left (user_data set after it) and expect one NOP completion. */
static void expect_nop_completion(struct io_uring_sqe *sqe, const char *what)
{
    ck_assert_msg(sqe->opcode == IORING_OP_NOP, "%s: opcode %u, not a NOP", what, sqe->opcode);
    ck_assert_msg(sqe->flags == 0, "%s: flags 0x%x left on the NOP", what, sqe->flags);
    __u64 tag = next_tag++;
    sqe->user_data = tag;
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct io_uring_cqe *cqe;
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_msg(cqe->res == 0, "%s: res %d", what, cqe->res);
    ck_assert_msg(cqe->user_data == tag, "%s: user_data %llx, want %llx", what,
                  (unsigned long long)cqe->user_data, (unsigned long long)tag);
    io_uring_cqe_seen(&ring, cqe);
    ck_assert_msg(io_uring_peek_cqe(&ring, &cqe) == -EAGAIN, "%s: a second completion", what);
}

/* rc of a prep whose thing is ready now: 1, or -ORBIT_ENOTSUP without futex ops. */
static void expect_ready(int rc, struct io_uring_sqe *sqe, const char *what)
{
    bool ok = rc == 1 || (!orbit_uring_futex_supported() && rc == -ORBIT_ENOTSUP);
    ck_assert_msg(ok, "%s: rc %d (%s)", what, rc, orbit_strerror(rc));
    expect_nop_completion(sqe, what);
}

static void expect_error(int rc, int want, struct io_uring_sqe *sqe, const char *what)
{
    ck_assert_msg(rc == want, "%s: rc %d (%s), want %d", what, rc, orbit_strerror(rc), want);
    expect_nop_completion(sqe, what);
}

START_TEST(endpoint_preps_ready_now_leave_a_nop)
{
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(fleet, NULL, &s), 0);
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(s, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(s, &t, &b), 0);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "hello", 5, 1000), 0);

    struct io_uring_sqe *sqe = dirty_sqe();
    expect_ready(orbit_endpoint_prep_wait_readable(b, sqe), sqe, "readable");
    sqe = dirty_sqe();
    expect_ready(orbit_endpoint_prep_wait_readable_exact(b, 5, sqe), sqe, "readable_exact");
    sqe = dirty_sqe();
    expect_ready(orbit_endpoint_prep_wait_writable(a, sqe), sqe, "writable");
    sqe = dirty_sqe();
    expect_ready(orbit_endpoint_prep_wait_writable_exact(a, 64, sqe), sqe, "writable_exact");
    sqe = dirty_sqe();
    expect_error(orbit_endpoint_prep_wait_readable_exact(b, 1u << 30, sqe), -ORBIT_ETOOLARGE, sqe,
                 "readable_exact above the ring");
    sqe = dirty_sqe();
    expect_error(orbit_endpoint_prep_wait_writable(NULL, sqe), -ORBIT_EMALFORMED, sqe, "writable(NULL)");

    orbit_endpoint_close(b);
    orbit_endpoint_close(a);
    orbit_streams_close(s);
}
END_TEST

START_TEST(offer_prep_ready_now_leaves_a_nop)
{
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(fleet, NULL, &s), 0);
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(s, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_offer(s, &t, orbit_fleet_node(fleet)), 0);

    struct io_uring_sqe *sqe = dirty_sqe();
    expect_ready(orbit_streams_prep_wait_offer(s, sqe), sqe, "streams offer");

    orbit_endpoint_close(a);
    orbit_streams_close(s);
}
END_TEST

START_TEST(pool_prep_ready_now_leaves_a_nop)
{
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(fleet, NULL, &p), 0);
    orbit_key key = { 7, 9 };
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, key, 2, &id), 0);
    uint32_t version;
    ck_assert_int_eq(orbit_pool_version(p, key, &version), 0);

    struct io_uring_sqe *sqe = dirty_sqe();   /* the key moved past `since`: ready */
    expect_ready(orbit_pool_prep_wait_capacity(p, key, version - 1, sqe), sqe, "pool capacity");
    sqe = dirty_sqe();
    expect_error(orbit_pool_prep_wait_capacity(NULL, key, version, sqe), -ORBIT_EMALFORMED, sqe,
                 "pool capacity(NULL)");
    orbit_pool_close(p);
}
END_TEST

START_TEST(admission_prep_ready_now_leaves_a_nop)
{
    struct orbit_admission *adm;
    ck_assert_int_eq(orbit_admission_open(fleet, NULL, &adm), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(adm, 1, 10), 0);
    struct orbit_units u = { 1, 3 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(orbit_admission_try_claim(adm, &d, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_int_eq(orbit_admission_release(adm, &r.claim), 0);   /* a release moves the epoch */
    uint64_t now = 0;
    ck_assert_int_eq(orbit_admission_wait(adm, 0, 0, &now), 0);
    ck_assert_uint_gt(now, 0);

    struct io_uring_sqe *sqe = dirty_sqe();
    expect_ready(orbit_admission_prep_wait(adm, now - 1, sqe), sqe, "admission");
    orbit_admission_close(adm);
}
END_TEST

START_TEST(exchange_preps_ready_now_leave_a_nop)
{
    struct orbit_exchanges *ex;
    ck_assert_int_eq(orbit_exchanges_open(fleet, NULL, &ex), 0);
    struct orbit_exchange *a, *b;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_exchange_create(ex, &a, &t), 0);
    ck_assert_int_eq(orbit_exchanges_offer(ex, &t, orbit_fleet_node(fleet)), 0);

    struct io_uring_sqe *sqe = dirty_sqe();
    expect_ready(orbit_exchanges_prep_wait_offer(ex, sqe), sqe, "exchanges offer");
    struct orbit_ticket got;
    ck_assert_int_eq(orbit_exchanges_take_offer(ex, &got), 0);
    ck_assert_int_eq(orbit_exchange_open(ex, &got, &b), 0);

    sqe = dirty_sqe();
    expect_ready(orbit_exchange_prep_wait_sendable(a, sqe), sqe, "exchange sendable");
    sqe = dirty_sqe();
    expect_ready(orbit_exchange_prep_wait_credit(a, 4096, sqe), sqe, "exchange credit");
    sqe = dirty_sqe();
    expect_ready(orbit_arena_prep_wait_credit(orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B), 4096, sqe), sqe, "arena credit");

    ck_assert_int_eq(orbit_exchange_send_start(a, "m", 1, 1000), 0);
    sqe = dirty_sqe();
    expect_ready(orbit_exchange_prep_wait_event(b, sqe), sqe, "exchange event");
    sqe = dirty_sqe();
    expect_error(orbit_exchange_prep_wait_credit(a, 0, sqe), -ORBIT_EMALFORMED, sqe, "credit of 0 bytes");

    orbit_exchange_close(b);
    orbit_exchange_close(a);
    orbit_exchanges_close(ex);
}
END_TEST

START_TEST(doorbell_prep_errors_leave_a_nop)
{
    struct io_uring_sqe *sqe = dirty_sqe();
    expect_error(orbit_fleet_prep_wait_doorbell(NULL, sqe), -ORBIT_EMALFORMED, sqe, "doorbell(NULL)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("uring_prep_ready");
    TCase *tc = tcase_create("ready_now");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, endpoint_preps_ready_now_leave_a_nop);
    tcase_add_test(tc, offer_prep_ready_now_leaves_a_nop);
    tcase_add_test(tc, pool_prep_ready_now_leaves_a_nop);
    tcase_add_test(tc, admission_prep_ready_now_leaves_a_nop);
    tcase_add_test(tc, exchange_preps_ready_now_leave_a_nop);
    tcase_add_test(tc, doorbell_prep_errors_leave_a_nop);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
