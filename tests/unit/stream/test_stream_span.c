/* SPDX-License-Identifier: MIT */
/*
 * Check suite for streams in place (orbit_endpoint_write_span, _commit,
 * _read_span, _consume): the spans are the ring at the right offsets, wrap
 * into two, publish and give back only what is committed and consumed, mix
 * with the copying calls, refuse what the spans did not give, wait, wake and
 * end like the copying calls, and carry random messages between threads.
 */
#include <pthread.h>
#include <orbit/stream.h>
#include "testutil.h"
#include "stream/stream_layout.h"

#define RING 4096u

struct fx { struct orbit_fleet *f; struct orbit_streams *s; struct orbit_endpoint *a, *b; };

static struct fx fx_open(void)
{
    struct fx x;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &x.f), 0);
    struct orbit_stream_spec spec = { .kind = 201, .lane_capacity = 4, .buffer_bytes = RING };
    ck_assert_int_eq(orbit_streams_open(x.f, &spec, &x.s), 0);
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(x.s, &x.a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &x.b), 0);
    return x;
}

static void fx_close(struct fx *x)
{
    orbit_endpoint_close(x->a);
    orbit_endpoint_close(x->b);
    orbit_streams_close(x->s);
    orbit_fleet_leave(x->f);
}

static unsigned char byte_at(unsigned seed, size_t i) { return (unsigned char)(seed * 131 + i * 7 + (i >> 8)); }

/* Fill len bytes of the spans (in order) with seed's pattern. */
static void fill_spans(const struct orbit_span *sp, int n, size_t len, unsigned seed)
{
    size_t k = 0;
    for (int i = 0; i < n && k < len; i++)
        for (size_t j = 0; j < sp[i].len && k < len; j++, k++)
            ((unsigned char *)sp[i].data)[j] = byte_at(seed, k);
    ck_assert_uint_eq(k, len);
}

static bool spans_hold(const struct orbit_span *sp, int n, size_t len, unsigned seed)
{
    size_t k = 0;
    for (int i = 0; i < n && k < len; i++)
        for (size_t j = 0; j < sp[i].len && k < len; j++, k++)
            if (((const unsigned char *)sp[i].data)[j] != byte_at(seed, k))
                return false;
    return k == len;
}

static size_t total(const struct orbit_span *sp, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += sp[i].len;
    return t;
}

START_TEST(spans_are_the_ring_and_wrap_into_two)
{
    struct fx x = fx_open();
    struct orbit_span w[2], r[2];
    unsigned char *ring_a = x.a->wr_ring;
    /* All the ring is free: one span, at its start. */
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, 0, w), 1);
    ck_assert_ptr_eq(w[0].data, ring_a);
    ck_assert_uint_eq(w[0].len, RING);
    ck_assert_ptr_null(w[1].data);
    fill_spans(w, 1, 100, 1);
    /* Nothing is published before the commit. */
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 0, r), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 100), 0);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 0, r), 1);
    ck_assert_ptr_eq(r[0].data, ring_a);   /* the bytes where the writer put them */
    ck_assert_uint_eq(r[0].len, 100);
    ck_assert(spans_hold(r, 1, 100, 1));
    /* Consumed in two steps; the rest is still queued where it was. */
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 60), 0);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 0, r), 1);
    ck_assert_ptr_eq(r[0].data, ring_a + 60);
    ck_assert_uint_eq(r[0].len, 40);
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 40), 0);
    /* Now head = tail = 100: the free space wraps. */
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, RING, 0, w), 2);
    ck_assert_ptr_eq(w[0].data, ring_a + 100);
    ck_assert_uint_eq(w[0].len, RING - 100);
    ck_assert_ptr_eq(w[1].data, ring_a);
    ck_assert_uint_eq(w[1].len, 100);
    fill_spans(w, 2, RING - 50, 2);
    /* Committed in two parts without another write_span. */
    ck_assert_int_eq(orbit_endpoint_commit(x.a, RING - 200), 0);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 150), 0);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, RING - 50, 0, r), 2);
    ck_assert_uint_eq(total(r, 2), RING - 50);
    ck_assert_uint_eq(r[0].len, RING - 100);
    ck_assert(spans_hold(r, 2, RING - 50, 2));
    ck_assert_int_eq(orbit_endpoint_consume(x.b, RING - 50), 0);
    struct orbit_stream_stats st;
    orbit_streams_stats(x.s, &st);
    ck_assert_uint_eq(st.bytes_written, 100 + RING - 50);
    ck_assert_uint_eq(st.bytes_read, 100 + RING - 50);
    fx_close(&x);
}
END_TEST

START_TEST(spans_mix_with_the_copying_calls)
{
    struct fx x = fx_open();
    struct orbit_span sp[2];
    unsigned char buf[RING];
    /* Written in place, read by copy. */
    ck_assert_int_ge(orbit_endpoint_write_span(x.a, 300, 0, sp), 1);
    fill_spans(sp, 2, 300, 3);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 300), 0);
    ck_assert_int_eq(orbit_endpoint_read(x.b, buf, sizeof buf, 0), 300);
    for (size_t i = 0; i < 300; i++)
        ck_assert_uint_eq(buf[i], byte_at(3, i));
    /* Written by copy, read in place. */
    for (size_t i = 0; i < 500; i++)
        buf[i] = byte_at(4, i);
    ck_assert_int_eq(orbit_endpoint_write(x.a, buf, 500, 0), 500);
    int n = orbit_endpoint_read_span(x.b, 500, 0, sp);
    ck_assert_int_ge(n, 1);
    ck_assert(spans_hold(sp, n, 500, 4));
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 500), 0);
    /* A copying write after write_span takes the spans' start: commit only the rest. */
    ck_assert_int_ge(orbit_endpoint_write_span(x.a, 1, 0, sp), 1);
    size_t given = total(sp, 2);
    ck_assert_int_eq(orbit_endpoint_write(x.a, buf, 10, 0), 10);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, given - 9), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, given - 10), 0);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 1), -ORBIT_EMALFORMED);   /* the spans are all committed */
    fx_close(&x);
}
END_TEST

START_TEST(what_the_spans_did_not_give_is_refused)
{
    struct fx x = fx_open();
    struct orbit_span sp[2];
    /* No span yet: nothing to commit or consume. */
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 1), -ORBIT_EMALFORMED);
    ck_assert_str_ne(orbit_last_error(), "");
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 0), 0);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, 0, sp), 1);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, RING + 1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 64), 0);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 0, sp), 1);
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 65), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 64), 0);
    /* Bad arguments. */
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, RING + 1, 0, sp), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, RING + 1, 0, sp), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, 0, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, -2, sp), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_write_span(NULL, 1, 0, sp), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_commit(NULL, 1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_consume(NULL, 1), -ORBIT_EMALFORMED);
    fx_close(&x);
}
END_TEST

START_TEST(spans_wait_and_end_like_the_copying_calls)
{
    struct fx x = fx_open();
    struct orbit_span sp[2];
    /* Empty: a try and a timed read. */
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 0, sp), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 20, sp), -ORBIT_ETIMEDOUT);
    /* Full: the writer waits the same way. */
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, RING, 0, sp), 1);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, RING - 10), 0);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 11, 0, sp), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 11, 20, sp), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 10, 0, sp), 1);
    ck_assert_uint_eq(sp[0].len, 10);
    /* Fewer than min queued: a wait, until the writer finishes; then what is there. */
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, RING, 0, sp), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_finish(x.a), 0);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, 0, sp), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 1), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, RING, 0, sp), 1);
    ck_assert_uint_eq(sp[0].len, RING - 10);
    ck_assert_int_eq(orbit_endpoint_consume(x.b, RING - 10), 0);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, -1, sp), 0);   /* the clean end */
    /* B's direction: reset, and the reader gone. */
    ck_assert_int_eq(orbit_endpoint_write_span(x.b, 1, 0, sp), 1);
    ck_assert_int_eq(orbit_endpoint_commit(x.b, 5), 0);
    orbit_endpoint_reset(x.b);
    ck_assert_int_eq(orbit_endpoint_read_span(x.a, 1, 0, sp), -ORBIT_ERESET);
    fx_close(&x);
    x = fx_open();
    orbit_endpoint_stop_reading(x.b);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, -1, sp), -ORBIT_EPEERGONE);
    fx_close(&x);
}
END_TEST

/* ---- between threads ------------------------------------------------------- */

struct waiter { struct orbit_endpoint *ep; size_t min; int rc; struct orbit_span sp[2]; bool write; };

static void *wait_span(void *p)
{
    struct waiter *w = p;
    w->rc = w->write ? orbit_endpoint_write_span(w->ep, w->min, 5000, w->sp)
                     : orbit_endpoint_read_span(w->ep, w->min, 5000, w->sp);
    return NULL;
}

static void await_parked(struct orb_waitword *w)
{
    for (int i = 0; i < 5000 && !atomic_load(&w->parked); i++)
        tu_sleep_ms(1);
    ck_assert_uint_eq(atomic_load(&w->parked), 1);
}

/* A reader parked in read_span wakes at the commit that gives it min bytes; a writer parked in
 * write_span at the consume that frees its min. */
START_TEST(a_commit_and_a_consume_wake_the_parked_end)
{
    orbit_set_spin_ns(0);   /* park at once */
    struct fx x = fx_open();
    struct orbit_span sp[2];
    struct waiter r = { .ep = x.b, .min = 200 };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_span, &r), 0);
    await_parked(&x.b->rd->wait);
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, 0, sp), 1);
    fill_spans(sp, 1, 200, 5);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 100), 0);   /* not enough yet */
    tu_sleep_ms(20);
    ck_assert_int_eq(atomic_load(&x.b->rd->wait.parked), 1);
    ck_assert_int_eq(orbit_endpoint_commit(x.a, 100), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(r.rc, 1);
    ck_assert(spans_hold(r.sp, 1, 200, 5));
    /* Fill the ring, then a writer waits for 300 bytes of room. */
    ck_assert_int_eq(orbit_endpoint_write_span(x.a, 1, 0, sp), 1);   /* [200, RING): the reader kept 200 */
    ck_assert_int_eq(orbit_endpoint_commit(x.a, total(sp, 1)), 0);
    struct waiter w = { .ep = x.a, .min = 300, .write = true };
    ck_assert_int_eq(pthread_create(&t, NULL, wait_span, &w), 0);
    await_parked(&x.a->wr->wait);
    ck_assert_int_eq(orbit_endpoint_read_span(x.b, 1, 0, sp), 1);
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 299), 0);   /* not enough yet */
    tu_sleep_ms(20);
    ck_assert_int_eq(atomic_load(&x.a->wr->wait.parked), 1);
    ck_assert_int_eq(orbit_endpoint_consume(x.b, 1), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.rc, 1);
    ck_assert_uint_eq(total(w.sp, 2), 300);
    fx_close(&x);
    orbit_set_spin_ns(2000);
}
END_TEST

#define MESSAGES 3000

static void *span_writer(void *p)
{
    struct orbit_endpoint *ep = p;
    unsigned rng = 12345;
    for (unsigned m = 0; m < MESSAGES; m++) {
        rng = rng * 1103515245u + 12345u;
        size_t len = 1 + (rng >> 8) % (RING - 1);
        uint32_t hdr[2] = { m, (uint32_t)len };
        struct orbit_span sp[2];
        /* A header and the message, written in place, each committed whole. */
        int n = orbit_endpoint_write_span(ep, sizeof hdr, 5000, sp);
        if (n < 1)
            return (void *)1;
        for (size_t k = 0, i = 0; k < sizeof hdr; k++) {
            if (k == sp[0].len)
                i = 1;
            ((unsigned char *)sp[i].data)[i ? k - sp[0].len : k] = ((unsigned char *)hdr)[k];
        }
        if (orbit_endpoint_commit(ep, sizeof hdr) != 0 || orbit_endpoint_write_span(ep, len, 5000, sp) < 1)
            return (void *)2;
        for (size_t k = 0, i = 0, j = 0; k < len; k++, j++) {   /* no Check asserts off the main thread */
            if (j == sp[i].len)
                i++, j = 0;
            ((unsigned char *)sp[i].data)[j] = byte_at(m, k);
        }
        if (orbit_endpoint_commit(ep, len) != 0)
            return (void *)3;
    }
    return orbit_endpoint_finish(ep) == 0 ? NULL : (void *)4;
}

START_TEST(random_messages_cross_in_place_between_threads)
{
    struct fx x = fx_open();
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, span_writer, x.a), 0);
    unsigned m = 0;
    for (;; m++) {
        struct orbit_span sp[2];
        uint32_t hdr[2];
        int n = orbit_endpoint_read_span(x.b, sizeof hdr, 5000, sp);
        ck_assert_int_ge(n, 0);
        if (n == 0)
            break;
        for (size_t k = 0; k < sizeof hdr; k++)
            ((unsigned char *)hdr)[k] = k < sp[0].len ? ((unsigned char *)sp[0].data)[k]
                                                       : ((unsigned char *)sp[1].data)[k - sp[0].len];
        ck_assert_uint_eq(hdr[0], m);
        ck_assert_int_eq(orbit_endpoint_consume(x.b, sizeof hdr), 0);
        ck_assert_int_ge(orbit_endpoint_read_span(x.b, hdr[1], 5000, sp), 1);
        ck_assert_msg(spans_hold(sp, 2, hdr[1], m), "message %u of %u bytes", m, hdr[1]);
        ck_assert_int_eq(orbit_endpoint_consume(x.b, hdr[1]), 0);
    }
    void *rc;
    ck_assert_int_eq(pthread_join(t, &rc), 0);
    ck_assert_ptr_null(rc);
    ck_assert_uint_eq(m, MESSAGES);
    fx_close(&x);
}
END_TEST

static Suite *span_suite(void)
{
    Suite *s = suite_create("stream_span");
    TCase *t = tcase_create("in place");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, spans_are_the_ring_and_wrap_into_two);
    tcase_add_test(t, spans_mix_with_the_copying_calls);
    tcase_add_test(t, what_the_spans_did_not_give_is_refused);
    tcase_add_test(t, spans_wait_and_end_like_the_copying_calls);
    tcase_add_test(t, a_commit_and_a_consume_wake_the_parked_end);
    tcase_add_test(t, random_messages_cross_in_place_between_threads);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(span_suite());
}
