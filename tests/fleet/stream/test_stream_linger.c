/* SPDX-License-Identifier: MIT */
/*
 * A stream's bytes and FIN outlive its writer, as a pipe's do: a child
 * creates a stream, offers it to the parent, writes, finishes and closes
 * (then leaves and exits, or is killed -9 before it closes) before the
 * parent ever looks. The parent then takes the offer, opens it, reads every
 * byte and then the end. The linger is bounded: it ends ORBIT_STREAM_LINGER_MS
 * after the writer let go, or when the node it was offered to dies or
 * leaves, and the slot is free again. A writer that closes unfinished still
 * resets: nothing lingers.
 */
#include <orbit/inspect.h>
#include <orbit/stream.h>
#include "testutil.h"

#define CAPACITY 4
#define RING 4096u
#define BYTES (RING - 7u)   /* a ring all but full: every page of it written */

static const struct orbit_stream_spec SPEC = { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8,
                                               .buffer_bytes = RING };

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131u + 7u); }

enum ending { CLOSE_LEAVE_EXIT, FINISH_THEN_KILLED, CLOSE_UNFINISHED };

/* The writer, a process of its own: one stream offered to `to`, written, then ended as told. */
static pid_t writer(const char *name, uint16_t to, enum ending how, int done)
{
    fflush(NULL);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid != 0)
        return kid;
    alarm(30);
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.backing = tu_backing();
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    unsigned char buf[BYTES];
    for (size_t i = 0; i < BYTES; i++)
        buf[i] = pattern(i);
    if (orbit_fleet_join(name, &o, &f) != 0 || orbit_streams_open(f, &SPEC, &s) != 0 ||
        orbit_streams_create(s, &a, &t) != 0 || orbit_streams_offer(s, &t, to) != 0 ||
        orbit_endpoint_write_all(a, buf, BYTES, 1000) != 0)
        _exit(1);
    if (how != CLOSE_UNFINISHED && orbit_endpoint_finish(a) != 0)
        _exit(2);
    char c = 'd';
    if (how == FINISH_THEN_KILLED) {
        if (write(done, &c, 1) != 1)
            _exit(3);
        pause();   /* killed -9 here, side A still held */
    }
    orbit_endpoint_close(a);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    _exit(write(done, &c, 1) == 1 ? 0 : 3);
}

struct reader { const char *name; struct orbit_fleet *f; struct orbit_streams *s; int done[2]; };

static void reader_open(struct reader *r, const char *tag)
{
    r->name = strdup(tu_fleet_name(tag));
    r->f = tu_join(r->name, CAPACITY, 0, 0, tu_backing());
    ck_assert_int_eq(orbit_streams_open(r->f, &SPEC, &r->s), 0);
    ck_assert_int_eq(pipe(r->done), 0);
}

static void reader_close(struct reader *r)
{
    orbit_streams_close(r->s);
    orbit_fleet_leave(r->f);
    ck_assert_int_eq(orbit_fleet_unlink(r->name), 0);
    close(r->done[0]);
    close(r->done[1]);
    free((void *)r->name);
}

/* Take the offer, open it, read every byte and then the clean end. */
static void read_it_whole(struct reader *r)
{
    struct orbit_ticket t;
    struct orbit_endpoint *b;
    ck_assert_msg(orbit_streams_wait_offer(r->s, 1000, &t) == 0, "no offer: %s", orbit_last_error());
    ck_assert_msg(orbit_streams_open_ticket(r->s, &t, &b) == 0, "open: %s", orbit_last_error());
    static unsigned char got[BYTES];
    size_t n = 0;
    while (n < BYTES) {
        ssize_t k = orbit_endpoint_read(b, got + n, BYTES - n, 1000);
        ck_assert_msg(k > 0, "read after %zu bytes: %s", n, orbit_strerror((int)k));
        n += (size_t)k;
    }
    for (size_t i = 0; i < BYTES; i++)
        ck_assert_uint_eq(got[i], pattern(i));
    unsigned char more;
    ck_assert_int_eq(orbit_endpoint_read(b, &more, 1, 1000), 0);   /* FIN: the clean end */
    ck_assert_int_eq(orbit_endpoint_try_write(b, "x", 1), -ORBIT_EPEERGONE);
    orbit_endpoint_close(b);
    ck_assert_int_eq(orbit_streams_list(r->s, NULL, 0), 0);   /* read and closed: the slot is free */
}

START_TEST(bytes_written_finished_and_closed_before_the_peer_opens_are_read_whole)
{
    struct reader r;
    reader_open(&r, "linger");
    pid_t w = writer(r.name, 0, CLOSE_LEAVE_EXIT, r.done[1]);
    ck_assert_int_eq(tu_wait_child(w, 10000), 0);   /* finished, closed, left, gone */
    read_it_whole(&r);
    reader_close(&r);
}
END_TEST

START_TEST(bytes_of_a_writer_killed_after_finishing_are_read_whole)
{
    struct reader r;
    reader_open(&r, "lingerkill");
    pid_t w = writer(r.name, 0, FINISH_THEN_KILLED, r.done[1]);
    char c;
    ck_assert_int_eq(read(r.done[0], &c, 1), 1);
    kill(w, SIGKILL);
    ck_assert_int_eq(tu_wait_child(w, 10000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_reap(r.f), 1);   /* its report ends side A, finished: no reset */
    read_it_whole(&r);
    reader_close(&r);
}
END_TEST

START_TEST(a_writer_closed_unfinished_still_resets)
{
    struct reader r;
    reader_open(&r, "lingerreset");
    pid_t w = writer(r.name, 0, CLOSE_UNFINISHED, r.done[1]);
    ck_assert_int_eq(tu_wait_child(w, 10000), 0);
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_take_offer(r.s, &t), -ORBIT_EAGAIN);   /* its stream ended */
    ck_assert_int_eq(orbit_streams_list(r.s, NULL, 0), 0);
    reader_close(&r);
}
END_TEST

/* Nobody opens it: ORBIT_STREAM_LINGER_MS after the close, it is over and its slot free. */
START_TEST(an_unopened_stream_lingers_no_longer_than_its_bound)
{
    struct reader r;
    reader_open(&r, "lingerbound");
    setenv("ORBIT_STREAM_LINGER_MS", "300", 1);   /* read by the writer: it sets the deadline */
    pid_t w = writer(r.name, 0, CLOSE_LEAVE_EXIT, r.done[1]);
    unsetenv("ORBIT_STREAM_LINGER_MS");
    ck_assert_int_eq(tu_wait_child(w, 10000), 0);
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_take_offer(r.s, &t), 0);
    ck_assert_int_eq(orbit_streams_list(r.s, NULL, 0), 1);   /* lingering */
    tu_sleep_ms(400);
    struct orbit_endpoint *b;
    ck_assert_int_eq(orbit_streams_open_ticket(r.s, &t, &b), -ORBIT_ESTALE);
    ck_assert_msg(strstr(orbit_last_error(), "linger"), "last error: %s", orbit_last_error());
    ck_assert_int_eq(orbit_streams_list(r.s, NULL, 0), 0);   /* over: the slot is free */
    reader_close(&r);
}
END_TEST

/* Offered to a node whose life ends (killed -9 and reported, or its leave): the linger ends. */
START_TEST(a_stream_offered_to_a_node_that_dies_or_leaves_stops_lingering)
{
    for (int leaves = 0; leaves < 2; leaves++) {
        struct reader r;
        reader_open(&r, "lingerpeer");
        int hold[2];
        ck_assert_int_eq(pipe(hold), 0);
        fflush(NULL);
        pid_t peer = fork();   /* the node the stream is offered to: joins as node 1, waits */
        ck_assert_int_ge(peer, 0);
        if (peer == 0) {
            alarm(30);
            close(hold[1]);
            struct orbit_fleet *f = tu_join(r.name, CAPACITY, 1, 0, tu_backing());
            char c = 'j';
            if (write(r.done[1], &c, 1) != 1)
                _exit(1);
            while (read(hold[0], &c, 1) > 0) {}
            orbit_fleet_leave(f);
            _exit(0);
        }
        close(hold[0]);
        char c;
        ck_assert_int_eq(read(r.done[0], &c, 1), 1);
        pid_t w = writer(r.name, 1, CLOSE_LEAVE_EXIT, r.done[1]);
        ck_assert_int_eq(tu_wait_child(w, 10000), 0);
        ck_assert_int_eq(read(r.done[0], &c, 1), 1);
        ck_assert_int_eq(orbit_streams_list(r.s, NULL, 0), 1);   /* lingering for node 1 */
        if (leaves) {
            close(hold[1]);
            ck_assert_int_eq(tu_wait_child(peer, 10000), 0);
        } else {
            kill(peer, SIGKILL);
            ck_assert_int_eq(tu_wait_child(peer, 10000), 128 + SIGKILL);
            ck_assert_int_eq(orbit_fleet_reap(r.f), 1);
            close(hold[1]);
        }
        ck_assert_msg(orbit_streams_list(r.s, NULL, 0) == 0, "the stream lingers on after node 1 %s",
                      leaves ? "left" : "died");
        reader_close(&r);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream_linger");
    TCase *tc = tcase_create("linger");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bytes_written_finished_and_closed_before_the_peer_opens_are_read_whole);
    tcase_add_test(tc, bytes_of_a_writer_killed_after_finishing_are_read_whole);
    tcase_add_test(tc, a_writer_closed_unfinished_still_resets);
    tcase_add_test(tc, an_unopened_stream_lingers_no_longer_than_its_bound);
    tcase_add_test(tc, a_stream_offered_to_a_node_that_dies_or_leaves_stops_lingering);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
