/* SPDX-License-Identifier: MIT */
/*
 * Parks per ring-ful: the wake protocol's design figure, pinned. A bulk transfer
 * between two processes wakes its reader only when a ring it drained refills
 * and its writer only when room crosses the writer's need, after a bounded
 * spin: together they park at most about twice per ring-ful, whether the
 * reader blocks in futex(2) or waits through io_uring. The counts come from
 * orbit_streams_stats (parks: futex sleeps and io_uring waits filled), not
 * from a clock.
 *
 * Hand-offs on one CPU: a ping-pong between two processes pinned to the same
 * CPU, where a waiter's peer runs only once the waiter stops. Each waiter yields
 * the CPU to its peer rather than parking, so the pair parks in a small share
 * of its round trips (a waiter that parked at once would park on every one).
 */
#include <sched.h>
#include <orbit/uring.h>
#include "stream_fleet.h"

#define TOTAL (256ull << 20)
#define CHUNK 65536u
#define RING  65536u
#define PARKS_PER_RINGFUL_MAX 2.5

struct wk { const char *name; struct tp_pipe ticket, result; };

static int bulk_writer(void *p)
{
    struct wk *x = p;
    struct sf_taker k = sf_take(x->name, 0x7001, x->ticket.rd);
    static unsigned char chunk[CHUNK];
    for (size_t i = 0; i < CHUNK; i++)
        chunk[i] = (unsigned char)(i * 7);
    for (uint64_t sent = 0; sent < TOTAL; sent += CHUNK) {
        int rc = orbit_endpoint_write_all(k.b, chunk, CHUNK, 60000);
        TP_CHECK(rc == 0, "write_all: %s", orbit_strerror(rc));
    }
    TP_CHECK(orbit_endpoint_finish(k.b) == 0, "finish");
    struct orbit_stream_stats st;
    orbit_streams_stats(k.s, &st);
    tp_send_u64(x->result.wr, st.parks);
    orbit_endpoint_close(k.b);
    orbit_streams_close(k.s);
    orbit_fleet_leave(k.f);
    return 0;
}

/* Reads to FIN with blocking calls; returns the bytes. */
static uint64_t drain_blocking(struct orbit_endpoint *a, unsigned char *buf)
{
    uint64_t got = 0;
    for (;;) {
        ssize_t r = orbit_endpoint_read(a, buf, CHUNK, 60000);
        ck_assert_msg(r >= 0, "read: %s", orbit_strerror((int)r));
        if (r == 0)
            return got;
        got += (uint64_t)r;
    }
}

/* Reads to FIN the way an io_uring server does: try, and on EAGAIN a FUTEX_WAIT SQE. */
static uint64_t drain_uring(struct orbit_endpoint *a, unsigned char *buf)
{
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(4, &ring, 0), 0);
    uint64_t got = 0;
    for (;;) {
        ssize_t r = orbit_endpoint_try_read(a, buf, CHUNK);
        if (r > 0) {
            got += (uint64_t)r;
            continue;
        }
        if (r == 0)
            break;
        ck_assert_int_eq(r, -ORBIT_EAGAIN);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        int rc = orbit_endpoint_prep_wait_readable(a, sqe);
        ck_assert_msg(rc == 0 || rc == 1, "prep: %s", orbit_strerror(rc));
        if (rc == 1) {
            io_uring_prep_nop(sqe);   /* the SQE was taken; give it something harmless */
            sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
        }
        ck_assert_int_ge(io_uring_submit_and_wait(&ring, rc == 0 ? 1 : 0), 1);
        struct io_uring_cqe *cqe;
        while (io_uring_peek_cqe(&ring, &cqe) == 0)
            io_uring_cqe_seen(&ring, cqe);
    }
    io_uring_queue_exit(&ring);
    return got;
}

static void transfer(bool uring)
{
    const char *name = tu_fleet_name(uring ? "swaku" : "swakb");
    struct sf_creator c = sf_create(name, 0x7000);
    struct wk x = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(bulk_writer, &x);
    tp_send_ticket(x.ticket.wr, &c.t);
    static unsigned char buf[CHUNK];
    uint64_t got = uring ? drain_uring(c.a, buf) : drain_blocking(c.a, buf);
    uint64_t writer_parks = tp_recv_u64(x.result.rd);
    int child = tu_wait_child(pid, 60000);
    struct orbit_stream_stats st;
    orbit_streams_stats(c.s, &st);
    sf_creator_close(&c, name);

    ck_assert_uint_eq(got, TOTAL);
    ck_assert_int_eq(child, 0);
    double ringfuls = (double)TOTAL / RING;
    double per = (double)(st.parks + writer_parks) / ringfuls;
    fprintf(stderr, "%s reader: parks reader %llu writer %llu, %.3f per ring-ful (bound %.1f)\n",
            uring ? "io_uring" : "blocking", (unsigned long long)st.parks,
            (unsigned long long)writer_parks, per, PARKS_PER_RINGFUL_MAX);
    ck_assert_msg(per <= PARKS_PER_RINGFUL_MAX, "%.3f parks per ring-ful", per);
}

#define PP_ROUNDS 4000u
#define PP_PARKS_SHARE_MAX 0.10   /* parks per round trip, both sides together */

/* Pin the calling process to cpu; false when it may not run there. */
static bool pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
}

static int first_allowed_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return -1;
}

struct echo { const char *name; int cpu; struct tp_pipe ticket, result; };

static int echo_on_cpu(void *p)
{
    struct echo *x = p;
    TP_CHECK(pin_to(x->cpu), "pin the echo to CPU %d", x->cpu);
    struct sf_taker k = sf_take(x->name, 0x7101, x->ticket.rd);
    unsigned char byte;
    for (unsigned i = 0; i < PP_ROUNDS; i++) {
        TP_CHECK(orbit_endpoint_read(k.b, &byte, 1, 60000) == 1, "echo read %u", i);
        TP_CHECK(orbit_endpoint_write(k.b, &byte, 1, 60000) == 1, "echo write %u", i);
    }
    struct orbit_stream_stats st;
    orbit_streams_stats(k.s, &st);
    tp_send_u64(x->result.wr, st.parks);
    TP_CHECK(orbit_endpoint_finish(k.b) == 0, "finish");
    orbit_endpoint_close(k.b);
    orbit_streams_close(k.s);
    orbit_fleet_leave(k.f);
    return 0;
}

START_TEST(a_ping_pong_on_one_cpu_hands_off_rather_than_parks)
{
    int cpu = first_allowed_cpu();
    ck_assert_int_ge(cpu, 0);
    cpu_set_t saved;
    ck_assert_int_eq(sched_getaffinity(0, sizeof saved, &saved), 0);
    const char *name = tu_fleet_name("swak1");
    struct sf_creator c = sf_create(name, 0x7100);
    struct echo x = { name, cpu, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(echo_on_cpu, &x);
    ck_assert(pin_to(cpu));
    tp_send_ticket(x.ticket.wr, &c.t);
    unsigned char byte = 7;
    unsigned done = 0;
    for (; done < PP_ROUNDS; done++)
        if (orbit_endpoint_write(c.a, &byte, 1, 60000) != 1 || orbit_endpoint_read(c.a, &byte, 1, 60000) != 1)
            break;
    uint64_t echo_parks = tp_recv_u64(x.result.rd);
    int child = tu_wait_child(pid, 60000);
    sched_setaffinity(0, sizeof saved, &saved);
    struct orbit_stream_stats st;
    orbit_streams_stats(c.s, &st);
    sf_creator_close(&c, name);

    ck_assert_uint_eq(done, PP_ROUNDS);
    ck_assert_int_eq(child, 0);
    double share = (double)(st.parks + echo_parks) / PP_ROUNDS;
    fprintf(stderr, "one CPU (%d): parks pinger %llu echo %llu in %u round trips, %.3f per round trip (bound %.2f)\n",
            cpu, (unsigned long long)st.parks, (unsigned long long)echo_parks, PP_ROUNDS, share,
            PP_PARKS_SHARE_MAX);
    ck_assert_msg(share <= PP_PARKS_SHARE_MAX, "%.3f parks per round trip on one CPU", share);
}
END_TEST

START_TEST(a_blocking_transfer_parks_at_most_twice_per_ringful) { transfer(false); }
END_TEST

START_TEST(an_io_uring_reader_parks_at_most_twice_per_ringful)
{
    if (!orbit_uring_futex_supported()) {
        tu_skip("an_io_uring_reader_parks: no io_uring futex ops");
        return;
    }
    transfer(true);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream-wakeups");
    TCase *tc = tcase_create("parks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_blocking_transfer_parks_at_most_twice_per_ringful);
    tcase_add_test(tc, a_ping_pong_on_one_cpu_hands_off_rather_than_parks);
    suite_add_tcase(s, tc);
    TCase *futex_ops = tu_optional_tcase("uring_futex_ops");
    tcase_set_timeout(futex_ops, 300);
    tcase_add_test(futex_ops, an_io_uring_reader_parks_at_most_twice_per_ringful);
    suite_add_tcase(s, futex_ops);
    return tu_run(s);
}
