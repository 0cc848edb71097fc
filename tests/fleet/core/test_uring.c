/* SPDX-License-Identifier: MIT */
/* io_uring FUTEX_WAIT beside a socket read, and readiness eventfds, across processes. */
#include <poll.h>
#include <sys/socket.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "core/fleet_internal.h"
#include "core/readiness.h"

static void wait_parked(struct orbit_fleet *f, uint16_t node)
{
    while (atomic_load(&f->nodes[node].doorbell.parked) == 0)
        tu_sleep_ms(1);
}

START_TEST(a_ring_parked_on_a_doorbell_beside_a_socket_read_wakes_on_a_remote_change)
{
    if (!orbit_uring_futex_supported()) {
        tu_skip("this kernel lacks IORING_OP_FUTEX_WAIT");
        return;
    }
    const char *name = tu_fleet_name("uring");
    struct orbit_fleet *me = tu_join(name, 2, 0, 0, tu_backing());
    int sv[2], report[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(pipe(report), 0);
    pid_t kid = fork();
    if (kid == 0) {
        struct orbit_fleet *f = tu_join(name, 2, 1, 0, tu_backing());
        struct io_uring ring;
        char buf[16];
        if (io_uring_queue_init(8, &ring, 0) != 0) _exit(2);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        io_uring_prep_recv(sqe, sv[1], buf, sizeof buf, 0);
        sqe->user_data = 1;
        sqe = io_uring_get_sqe(&ring);
        sqe->user_data = 2;
        if (orbit_fleet_prep_wait_doorbell(f, sqe) != 0) _exit(3);
        if (sqe->user_data != 2) _exit(4);
        io_uring_submit(&ring);   /* one io_uring_enter: the socket read and the futex wait */
        struct io_uring_cqe *cqe;
        long got[2];
        for (int i = 0; i < 2; i++) {
            if (io_uring_wait_cqe(&ring, &cqe) != 0) _exit(5);
            got[i] = (long)cqe->user_data * 1000 + (cqe->res > 0 ? 1 : cqe->res == 0 ? 0 : 9);
            io_uring_cqe_seen(&ring, cqe);
            if (write(report[1], &got[i], sizeof got[i]) != sizeof got[i]) _exit(6);
        }
        io_uring_queue_exit(&ring);
        orbit_fleet_leave(f);
        _exit(0);
    }
    wait_parked(me, 1);
    tu_sleep_ms(20);
    orb_fleet_ring_doorbell(me, 1, NULL);
    long got;
    ck_assert_int_eq(read(report[0], &got, sizeof got), (ssize_t)sizeof got);
    ck_assert_int_eq(got, 2000);             /* the futex wait completed first, with 0 */
    ck_assert_int_eq(write(sv[0], "hello", 5), 5);
    ck_assert_int_eq(read(report[0], &got, sizeof got), (ssize_t)sizeof got);
    ck_assert_int_eq(got, 1001);             /* then the socket read, with bytes */
    ck_assert_int_eq(tu_wait_child(kid, 5000), 0);
    orbit_fleet_leave(me);
    orbit_fleet_unlink(name);
}
END_TEST

/* Child: a readiness fd on its doorbell must turn readable on each remote ring, and only then. */
static int readiness_child(const char *name, int to_parent, int from_parent)
{
    struct orbit_fleet *f = tu_join(name, 2, 1, 0, tu_backing());
    int fd = orb_readiness_open(&f->nodes[1].doorbell);
    if (fd < 0)
        return 10;
    struct pollfd p = { fd, POLLIN, 0 };
    for (int round = 0; round < 3; round++) {
        char c = 'r';
        if (poll(&p, 1, 50) != 0)
            return 11;                        /* nothing rang yet: not readable */
        if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1)
            return 12;
        if (poll(&p, 1, 5000) != 1 || !(p.revents & POLLIN))
            return 13;                        /* the ring made it readable */
        if (orbit_readiness_drain(fd) != 0)
            return 14;
    }
    orb_readiness_close(fd);
    if (orbit_readiness_drain(fd) != -ORBIT_EMALFORMED)
        return 15;
    orbit_fleet_leave(f);
    return 0;
}

static void readiness_across_processes(bool force_thread)
{
    const char *name = tu_fleet_name(force_thread ? "ready-thr" : "ready-ring");
    struct orbit_fleet *me = tu_join(name, 2, 0, 0, tu_backing());
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    pid_t kid = fork();
    if (kid == 0) {
        if (force_thread)
            setenv("ORBIT_DISABLE_URING_FUTEX", "1", 1);
        _exit(readiness_child(name, up[1], down[0]));
    }
    for (int round = 0; round < 3; round++) {
        char c;
        ck_assert_int_eq(read(up[0], &c, 1), 1);
        wait_parked(me, 1);
        orb_fleet_ring_doorbell(me, 1, NULL);
        ck_assert_int_eq(write(down[1], &c, 1), 1);
    }
    ck_assert_int_eq(tu_wait_child(kid, 20000), 0);
    orbit_fleet_leave(me);
    orbit_fleet_unlink(name);
}

START_TEST(a_readiness_fd_turns_readable_when_another_process_rings_the_doorbell)
{
    readiness_across_processes(false);
}
END_TEST

START_TEST(the_readiness_fallback_thread_does_the_same_without_io_uring_futex)
{
    readiness_across_processes(true);
}
END_TEST

START_TEST(prep_wait_doorbell_refuses_an_observer)
{
    const char *name = tu_fleet_name("obs");
    struct orbit_fleet *me = tu_join(name, 2, 0, 0, tu_backing()), *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    struct io_uring_sqe sqe;
    memset(&sqe, 0, sizeof sqe);
    ck_assert_int_eq(orbit_fleet_prep_wait_doorbell(obs, &sqe), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_prep_wait_doorbell(me, NULL), -ORBIT_EMALFORMED);
    orbit_fleet_leave(obs);
    orbit_fleet_leave(me);
    orbit_fleet_unlink(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("uring");
    TCase *tc = tcase_create("uring");
    tcase_set_timeout(tc, 120);
    TCase *futex_ops = tu_optional_tcase("uring_futex_ops");
    tcase_set_timeout(futex_ops, 120);
    tcase_add_test(futex_ops, a_ring_parked_on_a_doorbell_beside_a_socket_read_wakes_on_a_remote_change);
    suite_add_tcase(s, futex_ops);
    tcase_add_test(tc, a_readiness_fd_turns_readable_when_another_process_rings_the_doorbell);
    tcase_add_test(tc, the_readiness_fallback_thread_does_the_same_without_io_uring_futex);
    tcase_add_test(tc, prep_wait_doorbell_refuses_an_observer);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
