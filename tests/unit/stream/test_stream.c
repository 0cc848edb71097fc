/* SPDX-License-Identifier: MIT */
/* Check suite for streams: the stream protocol's scenarios plus the error paths of stream.h. */
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <orbit/stream.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "stream/stream_layout.h"

#define LANE   256u
#define RING   65536u

/* ---- fixture ------------------------------------------------------------- */

struct fx { struct orbit_fleet *f; struct orbit_streams *s; };

static struct orbit_fleet *join_private(uint64_t incarnation)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.incarnation = incarnation;
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(NULL, &o, &f);
    ck_assert_msg(rc == 0, "private join: %s", orbit_strerror(rc));
    return f;
}

static struct fx fx_spec(const struct orbit_stream_spec *spec)
{
    struct fx x = { join_private(1), NULL };
    int rc = orbit_streams_open(x.f, spec, &x.s);
    ck_assert_msg(rc == 0, "streams open: %s", orbit_strerror(rc));
    return x;
}

static struct fx fx_open(void) { return fx_spec(NULL); }

static struct fx fx_small(uint32_t lane, uint32_t ring)
{
    struct orbit_stream_spec spec = { .kind = 200, .lane_capacity = lane, .buffer_bytes = ring };
    return fx_spec(&spec);
}

static void fx_close(struct fx *x)
{
    orbit_streams_close(x->s);
    orbit_fleet_leave(x->f);
}

/* A stream with both sides open: *a created, *b opened from the ticket. */
static struct orbit_ticket pair(struct orbit_streams *s, struct orbit_endpoint **a, struct orbit_endpoint **b)
{
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(s, a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(s, &t, b), 0);
    return t;
}

/* Read until FIN; returns the byte count. */
static size_t read_to_end(struct orbit_endpoint *ep, unsigned char *out, size_t cap, size_t step)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = orbit_endpoint_read(ep, out + got, step < cap - got ? step : cap - got, 5000);
        ck_assert_msg(n >= 0, "read: %s", orbit_strerror((int)n));
        if (n == 0)
            return got;
        got += (size_t)n;
    }
}

/* Until a waiter has armed the direction's parked flag (it is asleep or about to be). */
static void await_parked(struct orb_waitword *w)
{
    for (int i = 0; i < 5000 && !atomic_load(&w->parked); i++)
        tu_sleep_ms(1);
    ck_assert_uint_eq(atomic_load(&w->parked), 1);
}

/* Until n threads sleep in wait_offer on this offers word. */
static void await_sleepers(struct stream_offers *o, uint32_t n)
{
    for (int i = 0; i < 5000 && atomic_load(&o->sleepers) != n; i++)
        tu_sleep_ms(1);
    ck_assert_uint_eq(atomic_load(&o->sleepers), n);
}

static struct orbit_stream_stats stats_of(struct orbit_streams *s)
{
    struct orbit_stream_stats st;
    orbit_streams_stats(s, &st);
    return st;
}

/* ---- the protocol's scenarios ------------------------------------------------ */

START_TEST(bytes_cross_in_order_and_end_cleanly)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(x.s, &a, &t), 0);
    ck_assert_int_eq(t.side, ORBIT_SIDE_B);
    ck_assert_uint_eq(orbit_id_node(t.id), 0);
    ck_assert_uint_eq(orbit_id_kind(t.id), ORBIT_STREAM_KIND);
    ck_assert_uint_eq(t.epoch, orbit_streams_epoch(x.s));
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &b), 0);
    ck_assert_int_eq(orbit_endpoint_side(a), ORBIT_SIDE_A);
    ck_assert_int_eq(orbit_endpoint_side(b), ORBIT_SIDE_B);
    ck_assert_uint_eq(orbit_endpoint_id(a), t.id);

    ck_assert_int_eq(orbit_endpoint_write_all(a, "hello, ", 7, -1), 0);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "world", 5, -1), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    unsigned char out[64];
    size_t n = read_to_end(b, out, sizeof out, 4);
    ck_assert_uint_eq(n, 12);
    ck_assert_mem_eq(out, "hello, world", 12);
    ck_assert_int_eq(orbit_endpoint_read(b, out, 4, 0), 0);   /* FIN stays a clean end */

    /* The other direction is its own thing. */
    ck_assert_int_eq(orbit_endpoint_write_all(b, "back", 4, -1), 0);
    ck_assert_int_eq(orbit_endpoint_read(a, out, 16, -1), 4);
    ck_assert_mem_eq(out, "back", 4);

    struct orbit_stream_stats st = stats_of(x.s);
    ck_assert_uint_eq(st.bytes_written, 16);
    ck_assert_uint_eq(st.bytes_read, 16);
    /* Each end counts its own bytes; a closed end's stay in the handle's figures. */
    orbit_endpoint_close(a);
    st = stats_of(x.s);
    ck_assert_uint_eq(st.bytes_written, 16);
    ck_assert_uint_eq(st.bytes_read, 16);
    orbit_endpoint_close(b);
    st = stats_of(x.s);
    ck_assert_uint_eq(st.bytes_written, 16);
    ck_assert_uint_eq(st.bytes_read, 16);
    fx_close(&x);
}
END_TEST

START_TEST(a_ticket_prints_and_parses)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a;
    struct orbit_ticket t, back;
    ck_assert_int_eq(orbit_streams_create(x.s, &a, &t), 0);
    char text[64];
    int len = orbit_ticket_format(&t, text, sizeof text);
    ck_assert_int_gt(len, 0);
    ck_assert_uint_eq(strlen(text), (size_t)len);
    ck_assert_ptr_nonnull(strstr(text, "/b/"));
    ck_assert_int_eq(orbit_ticket_parse(text, &back), 0);
    ck_assert_uint_eq(back.id, t.id);
    ck_assert_int_eq(back.side, t.side);
    ck_assert_uint_eq(back.epoch, t.epoch);

    /* Exact text form, and the hex id form. */
    struct orbit_ticket k = { orbit_id_make(246, 3, 2, 5), ORBIT_SIDE_A, 77 };
    ck_assert_int_eq(orbit_ticket_format(&k, text, sizeof text), 17);
    ck_assert_str_eq(text, "246:3:131077/a/77");
    ck_assert_int_eq(orbit_ticket_parse("0xf600030000020005/b/9", &back), 0);
    ck_assert_uint_eq(back.id, k.id);
    ck_assert_int_eq(back.side, ORBIT_SIDE_B);
    ck_assert_uint_eq(back.epoch, 9);

    /* Too small a buffer, and bad arguments. */
    ck_assert_int_eq(orbit_ticket_format(&k, text, 17), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_ticket_format(&k, text, 18), 17);
    struct orbit_ticket bad = k;
    bad.side = (enum orbit_side)7;
    ck_assert_int_eq(orbit_ticket_format(&bad, text, sizeof text), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_ticket_format(NULL, text, sizeof text), -ORBIT_EMALFORMED);

    static const char *malformed[] = {
        "nope", "x/b", "", "/b/1", "246:3:131077/c/77", "246:3:131077/b/", "246:3:131077/b/x",
        "246:3:131077//77", "246:3:131077/b/77/", "246:3/b/77", "256:3:1/b/77",
        "246:3:1/b/18446744073709551616", "246:3:1/b/-1", "246:3:1/ab/1", " 246:3:1/b/1",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        back.epoch = 12345;
        ck_assert_msg(orbit_ticket_parse(malformed[i], &back) == -ORBIT_EMALFORMED, "%s", malformed[i]);
        ck_assert_uint_eq(back.epoch, 12345);   /* untouched */
    }
    char longtext[200];
    memset(longtext, '1', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    ck_assert_int_eq(orbit_ticket_parse(longtext, &back), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_ticket_parse(NULL, &back), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_ticket_parse("246:3:1/b/1", NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_ticket_parse("18446744073709551615:0:0/b/1", &back), -ORBIT_EMALFORMED);
    orbit_endpoint_close(a);
    fx_close(&x);
}
END_TEST

START_TEST(a_side_is_held_once_and_a_released_stream_goes_stale)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b, *again = NULL;
    struct orbit_ticket t = pair(x.s, &a, &b);
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &again), -ORBIT_ECLAIMED);
    ck_assert_ptr_null(again);
    struct orbit_ticket ta = t;
    ta.side = ORBIT_SIDE_A;
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &ta, &again), -ORBIT_ECLAIMED);
    ck_assert(orbit_streams_is_live(x.s, t.id));

    orbit_endpoint_close(a);
    /* A's writer went without finishing: B reads a reset. */
    unsigned char buf[1];
    ck_assert_int_eq(orbit_endpoint_read(b, buf, 1, -1), -ORBIT_ERESET);
    ck_assert_int_eq(orbit_endpoint_try_write(b, "x", 1), -ORBIT_EPEERGONE);
    ck_assert(orbit_streams_is_live(x.s, t.id));
    orbit_endpoint_close(b);
    ck_assert(!orbit_streams_is_live(x.s, t.id));
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &again), -ORBIT_ESTALE);

    /* Reuse: the slot comes back under a new generation and the old ticket stays stale. */
    for (unsigned i = 0; i < LANE - 1; i++) {
        struct orbit_endpoint *e;
        struct orbit_ticket u;
        ck_assert_int_eq(orbit_streams_create(x.s, &e, &u), 0);
        orbit_endpoint_close(e);
    }
    struct orbit_endpoint *a2;
    struct orbit_ticket t2;
    ck_assert_int_eq(orbit_streams_create(x.s, &a2, &t2), 0);
    ck_assert_uint_eq(orbit_id_slot(t2.id), orbit_id_slot(t.id));
    ck_assert_uint_ne(orbit_id_generation(t2.id), orbit_id_generation(t.id));
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &again), -ORBIT_ESTALE);
    ck_assert(!orbit_streams_is_live(x.s, t.id));
    ck_assert(orbit_streams_is_live(x.s, t2.id));
    orbit_endpoint_close(a2);
    fx_close(&x);
}
END_TEST

START_TEST(a_reset_starts_a_new_epoch_and_refuses_old_tickets)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *a2, *b2, *old_b;
    struct orbit_ticket t, t2;
    ck_assert_int_eq(orbit_streams_create(x.s, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &old_b), 0);
    uint64_t before = orbit_streams_epoch(x.s);
    orbit_streams_reset_all(x.s);
    ck_assert_uint_gt(orbit_streams_epoch(x.s), before);
    /* Same slot, reinstalled from generation one: only the epoch tells them apart. */
    ck_assert_int_eq(orbit_streams_create(x.s, &a2, &t2), 0);
    ck_assert_uint_eq(t2.id, t.id);
    ck_assert_uint_ne(t2.epoch, t.epoch);
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &b2), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 0), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t2, &b2), 0);

    /* The old endpoints answer stale and closing them leaves the new tenant alone. */
    unsigned char buf[4];
    ck_assert_int_eq(orbit_endpoint_try_write(a, "x", 1), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_endpoint_try_read(old_b, buf, 4), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_endpoint_finish(a), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_endpoint_wait_readable(old_b, -1), -ORBIT_ESTALE);
    orbit_endpoint_close(a);
    orbit_endpoint_close(old_b);
    ck_assert(orbit_streams_is_live(x.s, t2.id));
    ck_assert_int_eq(orbit_endpoint_write_all(a2, "new", 3, -1), 0);
    ck_assert_int_eq(orbit_endpoint_read(b2, buf, 4, -1), 3);
    ck_assert_mem_eq(buf, "new", 3);
    orbit_endpoint_close(a2);
    orbit_endpoint_close(b2);
    fx_close(&x);
}
END_TEST

START_TEST(a_slot_whose_generation_runs_out_is_not_reused)
{
    struct orbit_stream_spec spec = ORBIT_STREAM_SPEC_DEFAULT;
    spec.generation_limit = 4;
    struct fx x = fx_spec(&spec);
    struct orbit_endpoint *e;
    struct orbit_ticket t;
    for (unsigned i = 0; i < LANE * 4; i++) {
        ck_assert_int_eq(orbit_streams_create(x.s, &e, &t), 0);
        ck_assert_uint_le(orbit_id_generation(t.id), 4);
        orbit_endpoint_close(e);
    }
    ck_assert_int_eq(orbit_streams_create(x.s, &e, &t), -ORBIT_EFULL);
    /* An id beyond the limit is not an id of this table. */
    struct orbit_ticket beyond = { orbit_id_make(ORBIT_STREAM_KIND, 0, 5, 0), ORBIT_SIDE_B,
                                   orbit_streams_epoch(x.s) };
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &beyond, &e), -ORBIT_EMALFORMED);
    orbit_streams_reset_all(x.s);
    ck_assert_int_eq(orbit_streams_create(x.s, &e, &t), 0);
    ck_assert_uint_eq(orbit_id_generation(t.id), 1);
    orbit_endpoint_close(e);
    fx_close(&x);
}
END_TEST

START_TEST(a_full_ring_blocks_the_writer_and_wraps_correctly)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    static unsigned char filler[RING], tail[RING], wrapped[RING], rest[5];
    memset(filler, 7, sizeof filler);
    ck_assert_int_eq(orbit_endpoint_try_write(a, filler, RING), RING);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "x", 1), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_write(a, "x", 1, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_wait_writable(a, 10), -ORBIT_ETIMEDOUT);

    ck_assert_int_eq(orbit_endpoint_read(b, wrapped, RING - 5, -1), RING - 5);
    /* Room again; the next write wraps around the end of the ring. */
    for (unsigned i = 0; i < RING; i++)
        tail[i] = (unsigned char)i;
    ck_assert_int_eq(orbit_endpoint_wait_writable(a, 0), 0);
    ck_assert_int_eq(orbit_endpoint_try_write(a, tail, RING), RING - 5);
    ck_assert_int_eq(orbit_endpoint_read(b, rest, 5, -1), 5);
    ck_assert_mem_eq(rest, filler, 5);
    size_t got = 0;
    while (got < RING - 5) {
        ssize_t n = orbit_endpoint_read(b, wrapped + got, RING - got, -1);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    ck_assert_uint_eq(got, RING - 5);
    ck_assert_mem_eq(wrapped, tail, got);
    ck_assert_int_eq(orbit_endpoint_try_read(b, rest, 1), -ORBIT_EAGAIN);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(exact_frames_never_publish_or_consume_a_prefix)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    static unsigned char filler[RING - 32], consumed[RING - 32], big[RING + 1];
    unsigned char nine[64], three[32], frame[64];
    memset(filler, 7, sizeof filler);
    memset(nine, 9, sizeof nine);
    memset(three, 3, sizeof three);
    ck_assert_int_eq(orbit_endpoint_try_write_exact(a, filler, sizeof filler), 0);
    ck_assert_int_eq(orbit_endpoint_try_write_exact(a, nine, 64), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_write_exact(a, nine, 64, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_wait_writable_exact(a, 64, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_wait_writable_exact(a, 32, 0), 0);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, consumed, sizeof consumed), 0);
    ck_assert_mem_eq(consumed, filler, sizeof filler);
    ck_assert_int_eq(orbit_endpoint_try_read(b, frame, 1), -ORBIT_EAGAIN);

    ck_assert_int_eq(orbit_endpoint_try_write_exact(a, three, 32), 0);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, frame, 64), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_read_exact(b, frame, 64, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, frame, 32), 0);
    ck_assert_mem_eq(frame, three, 32);

    /* A frame above the ring can never be whole; zero bytes always are. */
    ck_assert_int_eq(orbit_endpoint_try_write_exact(a, big, sizeof big), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_endpoint_write_exact(a, big, sizeof big, -1), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, big, sizeof big), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_endpoint_wait_writable_exact(a, RING + 1, -1), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_endpoint_try_write_exact(a, NULL, 0), 0);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, NULL, 0), 0);
    ck_assert_int_eq(orbit_endpoint_try_write(a, NULL, 0), 0);
    ck_assert_int_eq(orbit_endpoint_try_write(a, NULL, 5), -ORBIT_EMALFORMED);

    /* FIN before the frame completed: the frame is malformed, the rest still reads. */
    ck_assert_int_eq(orbit_endpoint_write_all(a, three, 10, -1), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, frame, 11), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_read_exact(b, frame, 11, -1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_read_exact(b, frame, 10, -1), 0);
    ck_assert_int_eq(orbit_endpoint_try_read(b, frame, 1), 0);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

struct reader_arg { struct orbit_endpoint *ep; unsigned char buf[64]; ssize_t n; size_t exact; };

static void *reader_main(void *p)
{
    struct reader_arg *r = p;
    if (r->exact)
        r->n = orbit_endpoint_read_exact(r->ep, r->buf, r->exact, 10000);
    else
        r->n = orbit_endpoint_read(r->ep, r->buf, sizeof r->buf, 10000);
    return NULL;
}

START_TEST(a_blocked_reader_is_woken_by_a_write_in_another_thread)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    struct reader_arg r = { .ep = b };
    pthread_t th;
    pthread_create(&th, NULL, reader_main, &r);
    await_parked(&b->rd->wait);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "ping", 4, -1), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(r.n, 4);
    ck_assert_mem_eq(r.buf, "ping", 4);
    /* One transition, one wake: the empty ring the reader parked on became non-empty. */
    ck_assert_uint_eq(stats_of(x.s).wakes, 1);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(a_reader_gone_fails_the_writer_and_a_lane_fills_up)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    orbit_endpoint_stop_reading(b);
    ck_assert_int_eq(orbit_endpoint_write(a, "nobody", 6, -1), -ORBIT_EPEERGONE);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "nobody", 6, -1), -ORBIT_EPEERGONE);
    ck_assert_int_eq(orbit_endpoint_wait_writable(a, -1), 0);   /* ended: the write says why */
    /* B still writes the other way: stop_reading keeps the slot. */
    ck_assert_int_eq(orbit_endpoint_write_all(b, "ok", 2, -1), 0);

    struct orbit_endpoint *held[LANE];
    struct orbit_ticket t;
    held[0] = a;
    for (unsigned i = 1; i < LANE; i++)
        ck_assert_int_eq(orbit_streams_create(x.s, &held[i], &t), 0);
    struct orbit_endpoint *none;
    ck_assert_int_eq(orbit_streams_create(x.s, &none, &t), -ORBIT_EFULL);
    for (unsigned i = 0; i < LANE; i++)
        orbit_endpoint_close(held[i]);
    orbit_endpoint_close(b);
    ck_assert_int_eq(orbit_streams_create(x.s, &none, &t), 0);
    orbit_endpoint_close(none);
    fx_close(&x);
}
END_TEST

START_TEST(a_death_report_ends_that_incarnations_sides_only)
{
    struct fx x = fx_open();   /* node 0, incarnation 1: both sides are stamped with it */
    struct orbit_endpoint *a, *b, *again;
    struct orbit_ticket t = pair(x.s, &a, &b);
    ck_assert_int_eq(orbit_endpoint_write_all(b, "partial", 7, -1), 0);

    orbit_streams_node_dead(x.s, 0, 2);   /* another incarnation: nothing happens */
    orbit_streams_node_dead(x.s, 1, 1);   /* another node: nothing */
    orbit_streams_node_dead(x.s, 9, 1);   /* outside the fleet: ignored */
    struct reader_arg r = { .ep = a };
    ck_assert_int_eq(orbit_endpoint_read(a, r.buf, 16, -1), 7);
    ck_assert_mem_eq(r.buf, "partial", 7);

    pthread_t th;
    pthread_create(&th, NULL, reader_main, &r);
    await_parked(&a->rd->wait);
    orbit_streams_node_dead(x.s, 0, 1);
    pthread_join(th, NULL);
    /* The reader wakes on the reset; both sides ended, so the slot empties at once. */
    ck_assert_msg(r.n == -ORBIT_ERESET || r.n == -ORBIT_ESTALE, "woke with %zd", r.n);
    ck_assert_int_eq(orbit_endpoint_try_write(b, "x", 1), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &again), -ORBIT_ESTALE);
    ck_assert(!orbit_streams_is_live(x.s, t.id));
    orbit_endpoint_close(b);
    orbit_endpoint_close(a);
    struct orbit_owner own[2];
    ck_assert_int_eq(orbit_streams_owners(x.s, own, 2), 0);
    fx_close(&x);
}
END_TEST

/* The two-incarnation case: the survivor keeps the slot and reads a reset. */
START_TEST(a_death_report_leaves_the_survivor_a_reset)
{
    const char *name = tu_fleet_name("sdead");
    struct orbit_fleet *f0 = tu_join(name, 2, 0, 11, tu_backing());
    struct orbit_fleet *f1 = tu_join(name, 2, 1, 22, tu_backing());
    struct orbit_streams *s0, *s1;
    ck_assert_int_eq(orbit_streams_open(f0, NULL, &s0), 0);
    ck_assert_int_eq(orbit_streams_open(f1, NULL, &s1), 0);
    struct orbit_endpoint *a, *b, *again;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(s0, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(s1, &t, &b), 0);
    struct orbit_owner own[4];
    ck_assert_int_eq(orbit_streams_owners(s0, own, 4), 2);
    ck_assert_uint_eq(own[0].node, 0);
    ck_assert_uint_eq(own[0].incarnation, 11);
    ck_assert_uint_eq(own[1].node, 1);
    ck_assert_uint_eq(own[1].incarnation, 22);
    ck_assert_int_eq(orbit_streams_owners(s0, own, 1), 2);   /* counts past max */

    ck_assert_int_eq(orbit_endpoint_write_all(b, "unfinished", 10, -1), 0);
    struct reader_arg r = { .ep = a };
    ck_assert_int_eq(orbit_endpoint_read(a, r.buf, 64, -1), 10);
    pthread_t th;
    pthread_create(&th, NULL, reader_main, &r);
    await_parked(&a->rd->wait);
    orbit_streams_node_dead(s0, 1, 21);   /* wrong incarnation: nothing */
    orbit_streams_node_dead(s0, 1, 22);
    pthread_join(th, NULL);
    ck_assert_int_eq(r.n, -ORBIT_ERESET);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "x", 1), -ORBIT_EPEERGONE);
    ck_assert(orbit_streams_is_live(s0, t.id));   /* the survivor keeps it */
    ck_assert_int_eq(orbit_streams_open_ticket(s1, &t, &again), -ORBIT_ECLAIMED);
    ck_assert_int_eq(orbit_endpoint_rearm(a), -ORBIT_ESTALE);   /* B died: not reusable */
    ck_assert_int_eq(orbit_streams_owners(s0, own, 4), 1);
    ck_assert_uint_eq(own[0].incarnation, 11);
    /* The dead side's stale handle touches nothing. */
    orbit_endpoint_close(b);
    ck_assert(orbit_streams_is_live(s0, t.id));
    orbit_endpoint_close(a);
    ck_assert(!orbit_streams_is_live(s0, t.id));
    ck_assert_int_eq(orbit_streams_owners(s0, own, 4), 0);
    orbit_streams_close(s0);
    orbit_streams_close(s1);
    orbit_fleet_leave(f0);
    orbit_fleet_leave(f1);
    orbit_fleet_unlink(name);
}
END_TEST

struct offer_arg { struct orbit_streams *s; struct orbit_ticket t; int rc; };

static void *offer_waiter(void *p)
{
    struct offer_arg *o = p;
    o->rc = orbit_streams_wait_offer(o->s, 10000, &o->t);
    return NULL;
}

/*
 * Design figure: one offer wakes one of the threads asleep in wait_offer,
 * not all of them (no thundering herd); each later offer wakes the next.
 */
START_TEST(an_offer_wakes_one_offer_waiter_not_every_one)
{
    struct fx x = fx_open();
    enum { WAITERS = 4 };
    struct offer_arg o[WAITERS];
    pthread_t th[WAITERS];
    struct stream_offers *offers = stream_offers_of(x.s, 0);
    for (int i = 0; i < WAITERS; i++) {
        o[i] = (struct offer_arg){ .s = x.s, .rc = 1 };
        pthread_create(&th[i], NULL, offer_waiter, &o[i]);
    }
    await_sleepers(offers, WAITERS);
    tu_sleep_ms(20);   /* counted, then asleep in the kernel */
    struct orbit_stream_stats s0 = stats_of(x.s);
    struct orbit_endpoint *a[WAITERS];
    struct orbit_ticket t[WAITERS];
    for (int n = 1; n <= WAITERS; n++) {
        ck_assert_int_eq(orbit_streams_create(x.s, &a[n - 1], &t[n - 1]), 0);
        ck_assert_int_eq(orbit_streams_offer(x.s, &t[n - 1], 0), 0);
        await_sleepers(offers, (uint32_t)(WAITERS - n));
        tu_sleep_ms(20);   /* a herd would show here: woken, re-parked */
        struct orbit_stream_stats s1 = stats_of(x.s);
        ck_assert_uint_eq(s1.parks - s0.parks, (uint64_t)n);   /* only the takers came back */
        ck_assert_uint_eq(atomic_load(&offers->sleepers), (uint32_t)(WAITERS - n));
    }
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(o[i].rc, 0);
    }
    for (int i = 0; i < WAITERS; i++)
        orbit_endpoint_close(a[i]);
    fx_close(&x);
}
END_TEST

START_TEST(an_offer_is_taken_once_and_a_stale_offer_is_skipped)
{
    struct fx x = fx_open();
    struct orbit_ticket got, t, stale;
    struct orbit_endpoint *a, *gone;
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_streams_create(x.s, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 0), 0);
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), 0);
    ck_assert_uint_eq(got.id, t.id);
    ck_assert_int_eq(got.side, ORBIT_SIDE_B);
    ck_assert_uint_eq(got.epoch, t.epoch);
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);

    ck_assert_int_eq(orbit_streams_create(x.s, &gone, &stale), 0);
    ck_assert_int_eq(orbit_streams_offer(x.s, &stale, 0), 0);
    orbit_endpoint_close(gone);
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_streams_offer(x.s, &stale, 0), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 2), -ORBIT_EMALFORMED);   /* outside the fleet */
    ck_assert_int_eq(orbit_streams_wait_offer(x.s, 0, &got), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_streams_wait_offer(x.s, 20, &got), -ORBIT_ETIMEDOUT);

    /* Two offers from one lane: both are seen, once each. */
    struct orbit_endpoint *c;
    struct orbit_ticket tc;
    ck_assert_int_eq(orbit_streams_create(x.s, &c, &tc), 0);
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 0), 0);
    ck_assert_int_eq(orbit_streams_offer(x.s, &tc, 0), 0);
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), 0);
    orbit_id first = got.id;
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), 0);
    ck_assert(first != got.id && (first == t.id || first == tc.id) && (got.id == t.id || got.id == tc.id));
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);
    /* An offer to node 1 is not ours to take. */
    ck_assert_int_eq(orbit_streams_offer(x.s, &tc, 1), 0);
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);
    orbit_endpoint_close(c);

    struct offer_arg o = { .s = x.s };
    pthread_t th;
    pthread_create(&th, NULL, offer_waiter, &o);
    await_sleepers(stream_offers_of(x.s, 0), 1);
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 0), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(o.rc, 0);
    ck_assert_uint_eq(o.t.id, t.id);
    orbit_endpoint_close(a);
    fx_close(&x);
}
END_TEST

struct open_arg { struct orbit_streams *s; struct orbit_ticket t; pthread_barrier_t *go; int rc; };

static void *opener(void *p)
{
    struct open_arg *o = p;
    struct orbit_endpoint *ep = NULL;
    pthread_barrier_wait(o->go);
    o->rc = orbit_streams_open_ticket(o->s, &o->t, &ep);
    if (o->rc == 0)
        orbit_endpoint_close(ep);
    return NULL;
}

START_TEST(a_contested_claim_goes_to_exactly_one_opener)
{
    struct fx x = fx_open();
    for (int round = 0; round < 50; round++) {
        struct orbit_endpoint *a;
        struct orbit_ticket t;
        ck_assert_int_eq(orbit_streams_create(x.s, &a, &t), 0);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 4);
        struct open_arg o[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            o[i] = (struct open_arg){ x.s, t, &go, 1 };
            pthread_create(&th[i], NULL, opener, &o[i]);
        }
        int won = 0;
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            if (o[i].rc == 0)
                won++;
            else
                ck_assert_int_eq(o[i].rc, -ORBIT_ECLAIMED);
        }
        ck_assert_int_eq(won, 1);
        pthread_barrier_destroy(&go);
        orbit_endpoint_close(a);
    }
    fx_close(&x);
}
END_TEST

#define RANDOM_BYTES 300000u
struct writer_arg { struct orbit_endpoint *ep; const unsigned char *data; size_t len; int rc; };

static void *random_writer(void *p)
{
    struct writer_arg *w = p;
    size_t off = 0, step = 1;
    w->rc = 0;
    while (off < w->len && w->rc == 0) {
        size_t len = step < w->len - off ? step : w->len - off;
        w->rc = orbit_endpoint_write_all(w->ep, w->data + off, len, 10000);
        off += len;
        step = (step * 7 + 13) % 9001 + 1;
    }
    if (w->rc == 0)
        w->rc = orbit_endpoint_finish(w->ep);
    return NULL;
}

START_TEST(random_sizes_concatenate_exactly)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char *payload = malloc(RANDOM_BYTES), *out = malloc(RANDOM_BYTES + 4099);
    for (uint32_t i = 0; i < RANDOM_BYTES; i++)
        payload[i] = (unsigned char)((i * 2654435761u) >> 13);
    struct writer_arg w = { a, payload, RANDOM_BYTES, -1 };
    pthread_t th;
    pthread_create(&th, NULL, random_writer, &w);
    size_t got = 0, step = 3;
    for (;;) {
        ssize_t n = orbit_endpoint_read(b, out + got, step, 10000);
        ck_assert_int_ge(n, 0);
        if (n == 0)
            break;
        got += (size_t)n;
        ck_assert_uint_le(got, RANDOM_BYTES);
        step = (step * 5 + 11) % 4099 + 1;
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_uint_eq(got, RANDOM_BYTES);
    ck_assert_mem_eq(out, payload, RANDOM_BYTES);
    free(payload);
    free(out);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/* Small messages take the fast path, larger ones and wraps the general one: every size
 * from 1 to 64 bytes at every offset of a 64-byte ring arrives whole and in order,
 * through each pair of write and read calls. */
START_TEST(small_messages_cross_every_offset_of_a_small_ring)
{
    struct fx x = fx_small(4, 64);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char msg[STREAM_SMALL_COPY], got[STREAM_SMALL_COPY + 8];
    uint64_t sent = 0;
    for (size_t len = 1; len <= sizeof msg; len++) {
        for (unsigned off = 0; off < 64; off++) {
            for (size_t i = 0; i < len; i++)
                msg[i] = (unsigned char)(sent + i * 7 + len);
            unsigned way = (unsigned)(off + len) % 3;
            if (way == 0)
                ck_assert_int_eq(orbit_endpoint_write(a, msg, len, 0), (ssize_t)len);
            else if (way == 1)
                ck_assert_int_eq(orbit_endpoint_write_exact(a, msg, len, 0), 0);
            else
                ck_assert_int_eq(orbit_endpoint_try_write(a, msg, len), (ssize_t)len);
            memset(got, 0xee, sizeof got);
            if (way == 0)
                ck_assert_int_eq(orbit_endpoint_read_exact(b, got, len, 0), 0);
            else if (way == 1)
                ck_assert_int_eq(orbit_endpoint_read(b, got, sizeof got, 0), (ssize_t)len);
            else
                ck_assert_int_eq(orbit_endpoint_try_read(b, got, sizeof got), (ssize_t)len);
            ck_assert_mem_eq(got, msg, len);
            ck_assert_uint_eq(got[len], 0xee);   /* nothing past the message is written */
            sent += len;
            /* One byte more moves the next message to the next offset. */
            ck_assert_int_eq(orbit_endpoint_try_write(a, "+", 1), 1);
            ck_assert_int_eq(orbit_endpoint_try_read(b, got, 1), 1);
            ck_assert_uint_eq(got[0], '+');
        }
    }
    /* An empty ring refuses a try; a short frame waits; FIN after a small message ends it. */
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, 4), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "xy", 2), 2);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(b, got, 3), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    ck_assert_int_eq(orbit_endpoint_read_exact(b, got, 3, 0), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_read(b, got, 3, 0), 2);
    ck_assert_mem_eq(got, "xy", 2);
    ck_assert_int_eq(orbit_endpoint_read(b, got, 3, 0), 0);
    struct orbit_stream_stats st = stats_of(x.s);
    ck_assert_uint_eq(st.bytes_written, sent + 64 * sizeof msg + 2);
    ck_assert_uint_eq(st.bytes_read, st.bytes_written);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/*
 * A message of at most STREAM_LINE_COPY bytes written by the fast path is read
 * from the copy beside head: the ring's bytes, scribbled over here, are not
 * read. A copy being rewritten (copy_end 0), a longer message, or one the copy
 * does not cover comes from the ring.
 */
START_TEST(a_small_message_is_read_from_the_line_beside_head)
{
    struct fx x = fx_small(4, 64);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char got[32];
    ck_assert_int_eq(orbit_endpoint_try_write(a, "hello", 5), 5);
    ck_assert_uint_eq(atomic_load(&a->wr->copy_end), 5);
    memset(b->rd_ring, 'X', 5);
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, 2), 2);   /* part of the copy ... */
    ck_assert_mem_eq(got, "he", 2);
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, sizeof got), 3);   /* ... and its rest */
    ck_assert_mem_eq(got, "llo", 3);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "world", 5), 5);
    atomic_store(&a->wr->copy_end, 0);   /* as while the writer rewrites it */
    memset(b->rd_ring + 5, 'Y', 5);
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, sizeof got), 5);
    ck_assert_mem_eq(got, "YYYYY", 5);
    /* Two messages queued: the copy holds the second only, the ring both. */
    ck_assert_int_eq(orbit_endpoint_try_write(a, "ab", 2), 2);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "cd", 2), 2);
    memset(b->rd_ring + 10, 'Z', 4);
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, sizeof got), 4);
    ck_assert_mem_eq(got, "ZZZZ", 4);
    /* Past STREAM_LINE_COPY the copy is not written: the ring is read. */
    unsigned char big[STREAM_LINE_COPY + 1];
    memset(big, 'q', sizeof big);
    ck_assert_int_eq(orbit_endpoint_try_write(a, big, sizeof big), (ssize_t)sizeof big);
    ck_assert_uint_eq(atomic_load(&a->wr->copy_end), 14);
    memset(b->rd_ring + 14, 'W', sizeof big);
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, sizeof got), (ssize_t)sizeof big);
    ck_assert_uint_eq(got[0], 'W');
    /* A length no write stored is not believed. */
    ck_assert_int_eq(orbit_endpoint_try_write(a, "k", 1), 1);
    atomic_store(&a->wr->copy_len, STREAM_LINE_COPY + 1);
    b->rd_ring[14 + sizeof big] = 'V';
    ck_assert_int_eq(orbit_endpoint_try_read(b, got, sizeof got), 1);
    ck_assert_uint_eq(got[0], 'V');
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    /* A new stream in a slot starts with no copy: its head may reach the old copy's end. */
    struct orbit_endpoint *c, *d;
    pair(x.s, &c, &d);
    ck_assert_uint_eq(atomic_load(&c->wr->copy_end), 0);
    ck_assert_uint_eq(atomic_load(&d->wr->copy_end), 0);
    orbit_endpoint_close(c);
    orbit_endpoint_close(d);
    fx_close(&x);
}
END_TEST

/*
 * Every length the copy beside head holds, 1..STREAM_LINE_COPY, read from it
 * whole and in two parts (the ring scribbled over): copy_small's size classes
 * on the way in and out, and the reader's offset into the words, put every
 * byte where it was written.
 */
START_TEST(every_length_the_line_holds_reads_back_from_it)
{
    struct fx x = fx_small(4, 512);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char msg[STREAM_LINE_COPY], got[STREAM_LINE_COPY];
    uint64_t at = 0;
    for (size_t n = 1; n <= STREAM_LINE_COPY; n++) {
        for (size_t split = 0; split < (n > 1 ? 2u : 1u); split++) {
            for (size_t i = 0; i < n; i++)
                msg[i] = (unsigned char)(0x41 + 16 * split + i + n);
            ck_assert_int_eq(orbit_endpoint_try_write(a, msg, n), (ssize_t)n);
            ck_assert_uint_eq(atomic_load(&a->wr->copy_end), at + n);
            memset(b->rd_ring + at, 'X', n);
            memset(got, 0, sizeof got);
            size_t first = split ? n / 2 : n;
            ck_assert_int_eq(orbit_endpoint_try_read(b, got, first), (ssize_t)first);
            if (first < n)
                ck_assert_int_eq(orbit_endpoint_try_read(b, got + first, n - first), (ssize_t)(n - first));
            ck_assert_msg(memcmp(got, msg, n) == 0, "length %zu%s: bytes not the message's", n,
                          split ? " read in two parts" : "");
            at += n;
        }
    }
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/* The 64-byte lines of the streams segment that differ from snap; the first in *first. */
static size_t lines_changed(const struct orbit_streams *s, const unsigned char *snap, size_t *first)
{
    const unsigned char *now = s->seg.base;
    size_t n = 0;
    for (size_t off = 0; off + 64 <= s->seg.mapped; off += 64)
        if (memcmp(now + off, snap + off, 64) != 0 && n++ == 0)
            *first = off;
    return n;
}

/*
 * The design figure of a small message (design.md, "A message of up to 16
 * bytes rides beside head"): a fast-path write of 1..16 bytes changes two
 * lines of the segment, the direction's head line (head, the copy) and the
 * ring line it copies into; a read of it changes one, its tail's line. The
 * peer fetches the head line alone, so a spin ping-pong moves one line each way.
 */
START_TEST(a_small_message_writes_two_lines_and_its_read_one)
{
    struct fx x = fx_small(4, 512);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    size_t bytes = x.s->seg.mapped, first = 0;
    unsigned char *snap = malloc(bytes), got[STREAM_LINE_COPY];
    ck_assert_ptr_nonnull(snap);
    const unsigned char *base = x.s->seg.base;
    for (size_t n = 1; n <= STREAM_LINE_COPY; n += STREAM_LINE_COPY - 1) {
        memcpy(snap, base, bytes);
        ck_assert_int_eq(orbit_endpoint_write(a, "0123456789abcdef", n, -1), (ssize_t)n);
        ck_assert_uint_eq(lines_changed(x.s, snap, &first), 2);
        ck_assert_uint_eq(first, (size_t)((const unsigned char *)&a->wr->head - base));
        memcpy(snap, base, bytes);
        ck_assert_int_eq(orbit_endpoint_read(b, got, sizeof got, -1), (ssize_t)n);
        ck_assert_uint_eq(lines_changed(x.s, snap, &first), 1);
        ck_assert_uint_eq(first, (size_t)((const unsigned char *)&b->rd->tail - base));
    }
    free(snap);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

struct byte_stream { struct orbit_endpoint *ep; uint32_t total; int failed_at; };

/* Writes the byte sequence i % 251 in messages of 1..16 bytes (then one of 17..32). */
static void *sequence_writer(void *p)
{
    struct byte_stream *w = p;
    unsigned char msg[STREAM_SMALL_COPY];
    for (uint32_t sent = 0, k = 0; sent < w->total; k++) {
        uint32_t len = k % 7 == 6 ? STREAM_LINE_COPY + 1 + k % 16 : 1 + k % STREAM_LINE_COPY;
        if (len > w->total - sent)
            len = w->total - sent;
        for (uint32_t i = 0; i < len; i++)
            msg[i] = (unsigned char)((sent + i) % 251);
        if (orbit_endpoint_write_all(w->ep, msg, len, 10000) != 0) {
            w->failed_at = (int)sent;
            return NULL;
        }
        sent += len;
    }
    return NULL;
}

/*
 * A writer thread and a reader thread: whatever the copy beside head is doing
 * when the reader looks (being rewritten, a later message's), every byte read
 * is the one written there, in order.
 */
START_TEST(small_messages_keep_their_bytes_between_threads)
{
    struct fx x = fx_small(4, 256);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    struct byte_stream w = { .ep = a, .total = 400000, .failed_at = -1 };
    pthread_t th;
    pthread_create(&th, NULL, sequence_writer, &w);
    unsigned char got[STREAM_SMALL_COPY];
    uint32_t seen = 0, k = 0;
    while (seen < w.total) {
        size_t want = 1 + k++ % sizeof got;
        ssize_t n = orbit_endpoint_read(b, got, want, 10000);
        ck_assert_msg(n > 0, "read at byte %u: %zd", seen, n);
        for (ssize_t i = 0; i < n; i++, seen++)
            ck_assert_msg(got[i] == seen % 251, "byte %u: %u, not %u", seen, got[i], seen % 251);
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(w.failed_at, -1);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/* ---- specs, geometry, observers ------------------------------------------ */

START_TEST(specs_are_validated_and_kinds_are_independent)
{
    struct orbit_fleet *f = join_private(1);
    struct orbit_streams *s = NULL, *s2;
    static const struct orbit_stream_spec bad[] = {
        { .kind = 246, .lane_capacity = 3, .buffer_bytes = 65536, .generation_limit = 0 },
        { .kind = 246, .lane_capacity = 0, .buffer_bytes = 65536, .generation_limit = 0 },
        { .kind = 246, .lane_capacity = 131072, .buffer_bytes = 65536, .generation_limit = 0 },
        { .kind = 246, .lane_capacity = 256, .buffer_bytes = 0, .generation_limit = 0 },
        { .kind = 246, .lane_capacity = 256, .buffer_bytes = 1000, .generation_limit = 0 },
        { .kind = 246, .lane_capacity = 256, .buffer_bytes = 65536, .generation_limit = 0x1000000 },
        { .kind = 255, .lane_capacity = 256, .buffer_bytes = 65536, .generation_limit = 0 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_int_eq(orbit_streams_open(f, &bad[i], &s), -ORBIT_EMALFORMED);
    ck_assert_ptr_null(s);
    struct orbit_stream_spec absurd = { .kind = 246, .lane_capacity = 65536, .buffer_bytes = 1u << 31, .generation_limit = 0 };   /* 2^49 bytes of rings */
    ck_assert_int_eq(orbit_streams_open(f, &absurd, &s), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_streams_open(NULL, NULL, &s), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_streams_open(f, NULL, NULL), -ORBIT_EMALFORMED);

    struct orbit_stream_spec one = { .kind = 201, .lane_capacity = 4, .buffer_bytes = 4096, .generation_limit = 0 },
        other = { .kind = 201, .lane_capacity = 4, .buffer_bytes = 8192, .generation_limit = 0 },
        two = { .kind = 202, .lane_capacity = 8, .buffer_bytes = 1024, .generation_limit = 3 };
    ck_assert_int_eq(orbit_streams_open(f, &one, &s), 0);
    ck_assert_int_eq(orbit_streams_open(f, &other, &s2), -ORBIT_EGEOMETRY);
    ck_assert_int_eq(orbit_streams_open(f, &two, &s2), 0);
    struct orbit_stream_spec got;
    ck_assert_int_eq(orbit_streams_spec(s2, &got), 0);
    ck_assert_uint_eq(got.kind, 202);
    ck_assert_uint_eq(got.lane_capacity, 8);
    ck_assert_uint_eq(got.buffer_bytes, 1024);
    ck_assert_uint_eq(got.generation_limit, 3);
    ck_assert_uint_eq(orbit_streams_kind(s), 201);

    struct orbit_endpoint *a1, *a2;
    struct orbit_ticket t1, t2;
    ck_assert_int_eq(orbit_streams_create(s, &a1, &t1), 0);
    ck_assert_int_eq(orbit_streams_create(s2, &a2, &t2), 0);
    /* A ticket of one table is not an id of the other. */
    struct orbit_endpoint *wrong;
    ck_assert_int_eq(orbit_streams_open_ticket(s2, &t1, &wrong), -ORBIT_EMALFORMED);
    ck_assert(!orbit_streams_is_live(s2, t1.id));
    orbit_streams_reset_all(s2);
    ck_assert(orbit_streams_is_live(s, t1.id));
    ck_assert(!orbit_streams_is_live(s2, t2.id));
    orbit_endpoint_close(a1);
    orbit_endpoint_close(a2);
    orbit_streams_close(s);
    orbit_streams_close(s2);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(an_observer_inspects_and_reports_but_creates_nothing)
{
    const char *name = tu_fleet_name("sobs");
    struct orbit_fleet *f = tu_join(name, 2, 0, 5, tu_backing()), *obs;
    struct orbit_stream_spec spec = { .kind = 203, .lane_capacity = 4, .buffer_bytes = 4096, .generation_limit = 0 };
    struct orbit_streams *s, *o;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), 0);
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t = pair(s, &a, &b);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "12345", 5, -1), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);

    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_streams_open_existing(obs, 203, &o), 0);
    struct orbit_stream_spec got;
    ck_assert_int_eq(orbit_streams_spec(o, &got), 0);
    ck_assert_uint_eq(got.lane_capacity, 4);
    ck_assert_uint_eq(got.buffer_bytes, 4096);
    struct orbit_endpoint *none;
    struct orbit_ticket tn;
    ck_assert_int_eq(orbit_streams_create(o, &none, &tn), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_streams_open_ticket(o, &t, &none), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_streams_take_offer(o, &tn), -ORBIT_ENOTOWNER);

    struct orbit_stream_info info[2];
    ck_assert_int_eq(orbit_streams_list(o, info, 2), 1);
    ck_assert_uint_eq(info[0].id, t.id);
    ck_assert_int_eq(info[0].side[0].state, ORBIT_SIDE_CLAIMED);
    ck_assert_uint_eq(info[0].side[0].incarnation, 5);
    ck_assert_int_eq(info[0].side[1].state, ORBIT_SIDE_CLAIMED);
    ck_assert_uint_eq(info[0].dir[0].queued, 5);
    ck_assert_uint_eq(info[0].dir[0].flags, ORBIT_STREAM_FIN);
    ck_assert_uint_eq(info[0].dir[1].queued, 0);

    orbit_streams_node_dead(o, 0, 5);   /* an observer may report deaths */
    ck_assert(!orbit_streams_is_live(s, t.id));
    ck_assert_int_eq(orbit_streams_list(o, info, 2), 0);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    orbit_streams_close(o);
    orbit_fleet_leave(obs);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(shared_values_out_of_bounds_are_corruption)
{
    struct fx x = fx_small(4, 256);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char buf[8];
    /* A head more than a ring ahead of its tail cannot happen: refused, never followed. */
    atomic_store(&b->rd->head, 257);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), -ORBIT_ECORRUPT);
    ck_assert_int_eq(orbit_endpoint_read(b, buf, 8, 100), -ORBIT_ECORRUPT);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "x", 1), -ORBIT_ECORRUPT);
    ck_assert_int_eq(orbit_endpoint_write(a, "x", 1, 100), -ORBIT_ECORRUPT);
    atomic_store(&b->rd->head, 0);
    /* A holder node outside the fleet is never used to ring a doorbell. */
    atomic_store(&a->slot->node[1], 4000);
    atomic_store(&a->wr->watch, WATCH_READER | WATCH_WRITER);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "x", 1), 1);
    ck_assert_uint_eq(stats_of(x.s).doorbells, 0);
    atomic_store(&a->slot->node[1], 0);
    /* Offer bits for lanes outside the fleet and garbage offer words are skipped. */
    struct stream_offers *o = stream_offers_of(x.s, 0);
    atomic_store(&o->lanes[0], 1ull << 40);
    struct orbit_ticket got;
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);
    ck_assert_uint_eq(atomic_load(&o->lanes[0]), 0);
    atomic_store(&x.s->slots[1].offer, ((uint64_t)0xfffffff << 32) | 1);
    atomic_store(&o->lanes[0], 1);
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), -ORBIT_EAGAIN);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    /* A linger deadline past the longest linger (garbled, or a previous release's never-linger
     * mark) counts as over: the opener finds the linger ended instead of a stream kept forever. */
    const uint64_t garbled[] = { UINT64_MAX, UINT64_MAX / 2 };
    for (size_t k = 0; k < sizeof garbled / sizeof garbled[0]; k++) {
        struct orbit_ticket t;
        ck_assert_int_eq(orbit_streams_create(x.s, &a, &t), 0);
        ck_assert_int_eq(orbit_endpoint_finish(a), 0);
        struct stream_slot *slot = a->slot;
        orbit_endpoint_close(a);
        ck_assert_uint_ne(atomic_load(&slot->linger_until), 0);   /* lingering */
        atomic_store(&slot->linger_until, garbled[k]);
        ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &b), -ORBIT_ESTALE);
    }
    fx_close(&x);
}
END_TEST

/* ---- finish, reset, rearm, timeouts ---------------------------------------- */

START_TEST(finish_and_reset_end_a_direction)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char buf[16];
    ck_assert_int_eq(orbit_endpoint_write_all(a, "abc", 3, -1), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);   /* idempotent */
    ck_assert_int_eq(orbit_endpoint_try_write(a, "d", 1), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "d", 1, -1), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_endpoint_wait_writable(a, -1), 0);
    ck_assert_int_eq(orbit_endpoint_wait_readable(b, -1), 0);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 2), 2);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf + 2, 16), 1);
    ck_assert_mem_eq(buf, "abc", 3);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 16), 0);
    ck_assert_int_eq(orbit_endpoint_read(b, buf, 16, -1), 0);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 0), 0);

    /* A reset drops what is queued: the reader gets the error, not the bytes. */
    ck_assert_int_eq(orbit_endpoint_write_all(b, "queued", 6, -1), 0);
    orbit_endpoint_reset(b);
    ck_assert_int_eq(orbit_endpoint_try_read(a, buf, 16), -ORBIT_ERESET);
    ck_assert_int_eq(orbit_endpoint_read(a, buf, 16, -1), -ORBIT_ERESET);
    ck_assert_int_eq(orbit_endpoint_wait_readable(a, 0), 0);
    ck_assert_int_eq(orbit_endpoint_try_write(b, "x", 1), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_endpoint_try_read_exact(a, buf, 4), -ORBIT_ERESET);
    /* NULL handles are refused, never followed. */
    ck_assert_int_eq(orbit_endpoint_try_read(NULL, buf, 1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_finish(NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_wait_readable(NULL, 0), -ORBIT_EMALFORMED);
    orbit_endpoint_reset(NULL);
    orbit_endpoint_close(NULL);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(rearm_reuses_the_slot_after_the_far_side_let_go)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b, *never, *b2;
    struct orbit_ticket t = pair(x.s, &a, &b), tn;
    unsigned char buf[16];
    ck_assert_int_eq(orbit_endpoint_rearm(b), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_endpoint_rearm(a), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "req", 3, -1), 0);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    ck_assert_int_eq(orbit_endpoint_write_all(b, "resp", 4, -1), 0);
    ck_assert_int_eq(orbit_endpoint_finish(b), 0);
    ck_assert_int_eq(orbit_endpoint_read(b, buf, 16, -1), 3);
    orbit_endpoint_close(b);
    ck_assert_int_eq(orbit_endpoint_read(a, buf, 16, -1), 4);
    ck_assert_int_eq(orbit_endpoint_read(a, buf, 16, -1), 0);

    ck_assert_int_eq(orbit_endpoint_rearm(a), 0);
    ck_assert(orbit_streams_is_live(x.s, t.id));
    ck_assert_int_eq(orbit_streams_open_ticket(x.s, &t, &b2), 0);   /* the same ticket */
    ck_assert_int_eq(orbit_endpoint_try_read(a, buf, 16), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "again", 5, -1), 0);   /* FIN cleared too */
    ck_assert_int_eq(orbit_endpoint_read(b2, buf, 16, -1), 5);
    ck_assert_mem_eq(buf, "again", 5);
    orbit_endpoint_close(b2);
    orbit_endpoint_close(a);
    ck_assert(!orbit_streams_is_live(x.s, t.id));

    /* A far side that never opened: not reusable (a late open may still come). */
    ck_assert_int_eq(orbit_streams_create(x.s, &never, &tn), 0);
    ck_assert_int_eq(orbit_endpoint_rearm(never), -ORBIT_ESTALE);
    orbit_endpoint_close(never);
    ck_assert_int_eq(orbit_endpoint_rearm(NULL), -ORBIT_EMALFORMED);
    fx_close(&x);
}
END_TEST

START_TEST(timed_calls_time_out_and_try_calls_do_not_wait)
{
    struct fx x = fx_small(4, 64);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char buf[128] = { 0 };
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_endpoint_read(b, buf, 1, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_read(b, buf, 1, 30), -ORBIT_ETIMEDOUT);
    ck_assert_int_ge(tu_now_ns() - t0, 30 * 1000000);
    ck_assert_int_eq(orbit_endpoint_wait_readable(b, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 1), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_write(a, buf, 128, 0), 64);   /* what fits */
    ck_assert_int_eq(orbit_endpoint_write_all(a, buf, 1, 20), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_wait_writable(a, 20), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_endpoint_wait_peer_closed(a, 0), -ORBIT_ETIMEDOUT);
    struct orbit_ticket got;
    ck_assert_int_eq(orbit_streams_wait_offer(x.s, 0, &got), -ORBIT_ETIMEDOUT);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/* ---- wakes ------------------------------------------------------------------ */

struct room_arg { struct orbit_endpoint *ep; size_t need; int rc; };

static void *exact_waiter(void *p)
{
    struct room_arg *r = p;
    r->rc = orbit_endpoint_wait_writable_exact(r->ep, r->need, 10000);
    return NULL;
}

START_TEST(a_writer_is_woken_once_when_room_crosses_its_need)
{
    struct fx x = fx_small(4, 128);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char fill[128] = { 0 }, buf[10];
    ck_assert_int_eq(orbit_endpoint_try_write(a, fill, 128), 128);
    struct room_arg r = { a, 100, -1 };
    pthread_t th;
    pthread_create(&th, NULL, exact_waiter, &r);
    await_parked(&a->wr->wait);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 10), 10);
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, 0);
    /* Ten consumes, one crossing of the stated need: exactly one wake. */
    ck_assert_uint_eq(stats_of(x.s).wakes, 1);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(an_exact_reader_is_woken_once_when_its_frame_is_whole)
{
    struct fx x = fx_small(4, 128);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char piece[10];
    struct reader_arg r = { .ep = b, .exact = 50 };
    pthread_t th;
    pthread_create(&th, NULL, reader_main, &r);
    await_parked(&b->rd->wait);
    for (int i = 0; i < 5; i++) {
        memset(piece, 'a' + i, sizeof piece);
        ck_assert_int_eq(orbit_endpoint_try_write(a, piece, 10), 10);
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(r.n, 0);
    ck_assert_uint_eq(r.buf[0], 'a');
    ck_assert_uint_eq(r.buf[49], 'e');
    ck_assert_uint_eq(stats_of(x.s).wakes, 1);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/* Nobody parked and nobody watching: publications touch no wake word at all. */
START_TEST(writes_and_reads_nobody_waits_for_signal_nothing)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    unsigned char buf[RING] = { 0 };
    uint32_t w0 = atomic_load(&a->wr->wait.changes), r0 = atomic_load(&b->wr->wait.changes);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(orbit_endpoint_try_write(a, buf, 100), 100);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 500), 500);
    ck_assert_int_eq(orbit_endpoint_try_write(a, buf, RING), RING - 500);   /* fills the ring */
    ck_assert_int_eq(orbit_endpoint_read(b, buf, RING, 0), RING);           /* full to empty */
    ck_assert_uint_eq(atomic_load(&a->wr->wait.changes), w0);
    ck_assert_uint_eq(atomic_load(&b->wr->wait.changes), r0);
    struct orbit_stream_stats st = stats_of(x.s);
    ck_assert_uint_eq(st.wakes, 0);
    ck_assert_uint_eq(st.doorbells, 0);
    ck_assert_uint_eq(st.parks, 0);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/* ---- readiness, io_uring, peer departure ------------------------------------ */

static bool fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

START_TEST(readiness_follows_failed_tries_and_offers)
{
    struct fx x = fx_open();
    int fd = orbit_streams_readiness(x.s);
    ck_assert_int_ge(fd, 0);
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t = pair(x.s, &a, &b);
    unsigned char buf[8];
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
    ck_assert(!fd_readable(fd, 0));

    /* Nobody asked: a write rings no doorbell. */
    ck_assert_int_eq(orbit_endpoint_try_write(a, "1", 1), 1);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), 1);
    ck_assert_uint_eq(stats_of(x.s).doorbells, 0);
    ck_assert(!fd_readable(fd, 20));

    /* A try that found nothing registers: the next write rings, once. */
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "2", 1), 1);
    ck_assert(fd_readable(fd, 5000));
    ck_assert_uint_eq(stats_of(x.s).doorbells, 1);
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
    ck_assert_int_eq(orbit_endpoint_try_write(a, "3", 1), 1);
    ck_assert_uint_eq(stats_of(x.s).doorbells, 1);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), 2);

    /* A full ring registers the writer; room rings it. */
    static unsigned char fill[RING];
    ck_assert_int_eq(orbit_endpoint_try_write(a, fill, RING), RING);
    ck_assert_int_eq(orbit_endpoint_try_write(a, fill, 1), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), 8);
    ck_assert(fd_readable(fd, 5000));
    ck_assert_uint_eq(stats_of(x.s).doorbells, 2);
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);

    /* An offer to this node rings it. */
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 0), 0);
    ck_assert(fd_readable(fd, 5000));
    ck_assert_uint_eq(stats_of(x.s).doorbells, 3);
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);

    /* FIN after a failed try rings too. */
    static unsigned char sink[RING];
    ck_assert_int_eq(orbit_endpoint_read(b, sink, RING, -1), RING - 8);
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_endpoint_finish(a), 0);
    ck_assert(fd_readable(fd, 5000));
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 8), 0);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(peer_departure_is_seen_and_rings)
{
    struct fx x = fx_open();
    int fd = orbit_streams_readiness(x.s);
    ck_assert_int_ge(fd, 0);
    struct orbit_endpoint *a, *b;
    pair(x.s, &a, &b);
    ck_assert_int_eq(orbit_endpoint_finish(b), 0);
    ck_assert_int_eq(orbit_endpoint_peer_closed(a), 0);   /* B's FIN is not departure */
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
    orbit_endpoint_close(b);
    ck_assert_int_eq(orbit_endpoint_peer_closed(a), 1);
    ck_assert_int_eq(orbit_endpoint_wait_peer_closed(a, -1), 0);
    ck_assert(fd_readable(fd, 5000));
    ck_assert_int_eq(orbit_endpoint_peer_closed(NULL), -ORBIT_EMALFORMED);
    orbit_endpoint_close(a);
    fx_close(&x);
}
END_TEST

static void *late_write(void *p)
{
    struct orbit_endpoint *a = p;
    tu_sleep_ms(20);
    orbit_endpoint_write_all(a, "io", 2, -1);
    return NULL;
}

START_TEST(io_uring_waits_complete_on_the_next_change)
{
    struct fx x = fx_open();
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t = pair(x.s, &a, &b);
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    sqe->user_data = 42;
    if (!orbit_uring_futex_supported()) {
        ck_assert_int_eq(orbit_endpoint_prep_wait_readable(b, sqe), -ORBIT_ENOTSUP);
        io_uring_queue_exit(&ring);
        fx_close(&x);
        return;
    }
    ck_assert_int_eq(orbit_endpoint_prep_wait_writable(a, sqe), 1);   /* room now: untouched */
    ck_assert_int_eq(orbit_endpoint_prep_wait_readable(b, sqe), 0);
    ck_assert_uint_eq(sqe->user_data, 42);
    uint64_t parks = stats_of(x.s).parks;
    pthread_t th;
    pthread_create(&th, NULL, late_write, a);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct io_uring_cqe *cqe;
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_uint_eq(cqe->user_data, 42);
    io_uring_cqe_seen(&ring, cqe);
    pthread_join(th, NULL);
    ck_assert_uint_eq(parks, 1);   /* a filled SQE counts as a park */
    unsigned char buf[4];
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 4), 2);
    ck_assert_int_eq(orbit_endpoint_prep_wait_readable(NULL, sqe), -ORBIT_EMALFORMED);

    /* Offers: pending now is 1, none is a filled SQE completed by the next offer. */
    sqe = io_uring_get_sqe(&ring);
    sqe->user_data = 7;
    ck_assert_int_eq(orbit_streams_prep_wait_offer(x.s, sqe), 0);
    ck_assert_int_eq(orbit_streams_offer(x.s, &t, 0), 0);
    ck_assert_int_eq(io_uring_submit_and_wait(&ring, 1), 1);
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_uint_eq(cqe->user_data, 7);
    io_uring_cqe_seen(&ring, cqe);
    sqe = io_uring_get_sqe(&ring);
    ck_assert_int_eq(orbit_streams_prep_wait_offer(x.s, sqe), 1);
    struct orbit_ticket got;
    ck_assert_int_eq(orbit_streams_take_offer(x.s, &got), 0);
    ck_assert_uint_eq(got.id, t.id);
    io_uring_queue_exit(&ring);
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    fx_close(&x);
}
END_TEST

/*
 * A leave or a death report ends every side its life held, so what supersede
 * is for is a side an earlier life of the node still holds past them (a
 * report cut short, or a life that left under an orbit before leaves gave
 * back): planted here by stamping a stream's side A with incarnation 100.
 */
START_TEST(supersede_ends_what_an_earlier_life_held)
{
    const char *name = tu_fleet_name("ssup");
    struct orbit_streams *s_new, *s_peer;
    struct orbit_endpoint *b, *old_a;
    struct orbit_ticket t;
    struct orbit_fleet *peer = tu_join(name, 2, 1, 7, tu_backing());
    ck_assert_int_eq(orbit_streams_open(peer, NULL, &s_peer), 0);

    /* The node's life now (a supervisor restarted it under node 0). */
    struct orbit_fleet *again = tu_join(name, 2, 0, 101, tu_backing());
    struct orbit_fleet *twice;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.node = 0;
    o.backing = tu_backing();
    ck_assert_int_eq(orbit_fleet_join(name, &o, &twice), -ORBIT_ECLAIMED);   /* held here already */
    ck_assert_int_eq(orbit_streams_open(again, NULL, &s_new), 0);
    ck_assert_int_eq(orbit_streams_create(s_new, &old_a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(s_peer, &t, &b), 0);
    atomic_store(&old_a->slot->incarnation[0], 100);   /* side A: the earlier life's */
    struct orbit_endpoint *mine;
    struct orbit_ticket tm;
    ck_assert_int_eq(orbit_streams_create(s_new, &mine, &tm), 0);
    orbit_streams_supersede(s_new);
    unsigned char buf[4];
    ck_assert_int_eq(orbit_endpoint_try_read(b, buf, 4), -ORBIT_ERESET);
    ck_assert_int_eq(orbit_endpoint_try_write(b, "x", 1), -ORBIT_EPEERGONE);
    ck_assert(orbit_streams_is_live(s_new, tm.id));   /* our own life's stream stays */
    struct orbit_owner own[4];
    ck_assert_int_eq(orbit_streams_owners(s_new, own, 4), 2);
    ck_assert_uint_eq(own[0].node, 0);
    ck_assert_uint_eq(own[0].incarnation, 101);
    ck_assert_uint_eq(own[1].node, 1);
    orbit_endpoint_close(mine);
    orbit_endpoint_close(b);
    ck_assert(!orbit_streams_is_live(s_new, t.id));
    orbit_endpoint_close(old_a);   /* its side was ended: closing it changes nothing */
    orbit_streams_close(s_new);
    orbit_streams_close(s_peer);
    orbit_fleet_leave(again);
    orbit_fleet_leave(peer);
    orbit_fleet_unlink(name);
}
END_TEST

static Suite *stream_suite(void)
{
    Suite *s = suite_create("stream");
    TCase *seed = tcase_create("seed");
    tcase_set_timeout(seed, 120);
    tcase_add_test(seed, bytes_cross_in_order_and_end_cleanly);
    tcase_add_test(seed, a_ticket_prints_and_parses);
    tcase_add_test(seed, a_side_is_held_once_and_a_released_stream_goes_stale);
    tcase_add_test(seed, a_reset_starts_a_new_epoch_and_refuses_old_tickets);
    tcase_add_test(seed, a_slot_whose_generation_runs_out_is_not_reused);
    tcase_add_test(seed, a_full_ring_blocks_the_writer_and_wraps_correctly);
    tcase_add_test(seed, exact_frames_never_publish_or_consume_a_prefix);
    tcase_add_test(seed, a_blocked_reader_is_woken_by_a_write_in_another_thread);
    tcase_add_test(seed, a_reader_gone_fails_the_writer_and_a_lane_fills_up);
    tcase_add_test(seed, a_death_report_ends_that_incarnations_sides_only);
    tcase_add_test(seed, a_death_report_leaves_the_survivor_a_reset);
    tcase_add_test(seed, an_offer_is_taken_once_and_a_stale_offer_is_skipped);
    tcase_add_test(seed, an_offer_wakes_one_offer_waiter_not_every_one);
    tcase_add_test(seed, a_contested_claim_goes_to_exactly_one_opener);
    tcase_add_test(seed, random_sizes_concatenate_exactly);
    tcase_add_test(seed, small_messages_cross_every_offset_of_a_small_ring);
    tcase_add_test(seed, a_small_message_is_read_from_the_line_beside_head);
    tcase_add_test(seed, small_messages_keep_their_bytes_between_threads);
    tcase_add_test(seed, every_length_the_line_holds_reads_back_from_it);
    tcase_add_test(seed, a_small_message_writes_two_lines_and_its_read_one);
    suite_add_tcase(s, seed);

    TCase *more = tcase_create("contract");
    tcase_set_timeout(more, 120);
    tcase_add_test(more, specs_are_validated_and_kinds_are_independent);
    tcase_add_test(more, an_observer_inspects_and_reports_but_creates_nothing);
    tcase_add_test(more, shared_values_out_of_bounds_are_corruption);
    tcase_add_test(more, finish_and_reset_end_a_direction);
    tcase_add_test(more, rearm_reuses_the_slot_after_the_far_side_let_go);
    tcase_add_test(more, timed_calls_time_out_and_try_calls_do_not_wait);
    tcase_add_test(more, a_writer_is_woken_once_when_room_crosses_its_need);
    tcase_add_test(more, an_exact_reader_is_woken_once_when_its_frame_is_whole);
    tcase_add_test(more, writes_and_reads_nobody_waits_for_signal_nothing);
    tcase_add_test(more, readiness_follows_failed_tries_and_offers);
    tcase_add_test(more, peer_departure_is_seen_and_rings);
    tcase_add_test(more, io_uring_waits_complete_on_the_next_change);
    tcase_add_test(more, supersede_ends_what_an_earlier_life_held);
    suite_add_tcase(s, more);
    return s;
}

int main(void)
{
    return tu_run(stream_suite());
}
