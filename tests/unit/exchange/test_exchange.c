/* SPDX-License-Identifier: MIT */
/*
 * Check suite for the payload arena and paired exchanges: geometry, the
 * chunk life (reserve, commit, shorten, cancel, consume exactly once, release),
 * descriptor validation, the per-flow state machine, backpressure, readiness,
 * io_uring waits, close and death bookkeeping, pool session binding.
 */
#include <poll.h>
#include <pthread.h>
#include <orbit/exchange.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "exchange/exch_layout.h"

#define CTL_KIND    221
#define ARENA_KIND  222
#define ARENA2_KIND 223
#define SLOT        1024u
#define SLOTS       16u

/* ---- fixture ------------------------------------------------------------------ */

struct fx { struct orbit_fleet *f; struct orbit_exchanges *ex; struct orbit_arena *ar; };

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

static struct orbit_exchange_spec spec_of(uint32_t slot, uint32_t slots, uint32_t ring)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control = (struct orbit_stream_spec){ .kind = CTL_KIND, .lane_capacity = 8, .buffer_bytes = ring };
    s.a_to_b = (struct orbit_arena_spec){ .kind = ARENA_KIND, .slot_bytes = slot, .slots_per_lane = slots };
    return s;
}

static struct fx fx_spec(const struct orbit_exchange_spec *spec)
{
    struct fx x = { join_private(7), NULL, NULL };
    int rc = orbit_exchanges_open(x.f, spec, &x.ex);
    ck_assert_msg(rc == 0, "exchanges open: %s", orbit_strerror(rc));
    x.ar = orbit_exchanges_arena(x.ex, ORBIT_FLOW_A_TO_B);
    ck_assert_ptr_nonnull(x.ar);
    return x;
}

static struct fx fx_open(void)
{
    struct orbit_exchange_spec s = spec_of(SLOT, SLOTS, 4096);
    return fx_spec(&s);
}

static void fx_close(struct fx *x)
{
    orbit_exchanges_close(x->ex);
    orbit_fleet_leave(x->f);
}

static uint32_t lane_free(struct orbit_arena *a, uint16_t node)
{
    struct orbit_arena_lane_info li[4];
    ssize_t n = orbit_arena_lanes(a, li, 4);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n && i < 4; i++)
        if (li[i].node == node)
            return li[i].free;
    struct orbit_arena_spec sp;
    orbit_arena_spec(a, &sp);
    return sp.slots_per_lane;   /* a lane not listed is all free */
}

static void fill(void *p, size_t n, unsigned seed)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 9));
}

static bool same(const void *p, size_t n, unsigned seed)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)(seed * 31 + i * 7 + (i >> 9)))
            return false;
    return true;
}

/* Reserve, fill with seed, commit len bytes. */
static struct orbit_chunk_desc put_chunk(struct orbit_arena *a, size_t len, unsigned seed)
{
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(a, len, &r), 0);
    fill(r.data, len, seed);
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_commit(&r, len, &d), 0);
    ck_assert(r.done);
    return d;
}

static void pair(struct orbit_exchanges *ex, struct orbit_exchange **a, struct orbit_exchange **b)
{
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_exchange_create(ex, a, &t), 0);
    ck_assert_int_eq(orbit_exchange_open(ex, &t, b), 0);
}

/* ---- geometry ------------------------------------------------------------------ */

START_TEST(bad_specs_are_refused)
{
    struct orbit_fleet *f = join_private(1);
    struct orbit_arena *a;
    struct orbit_arena_spec bad[] = {
        { .kind = 255, .slot_bytes = 4096, .slots_per_lane = 16 },
        { .kind = 0, .slot_bytes = 4096, .slots_per_lane = 16 },
        { .kind = 10, .slot_bytes = 1000, .slots_per_lane = 16 },
        { .kind = 10, .slot_bytes = 32, .slots_per_lane = 16 },
        { .kind = 10, .slot_bytes = 4096, .slots_per_lane = 0 },
        { .kind = 10, .slot_bytes = 4096, .slots_per_lane = 3 },
        { .kind = 10, .slot_bytes = 4096, .slots_per_lane = 1u << 25 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(orbit_arena_open(f, &bad[i], &a), -ORBIT_EMALFORMED);
    struct orbit_arena_spec huge = { .kind = 10, .slot_bytes = 1u << 20, .slots_per_lane = 2048 };   /* 2 GiB lane */
    ck_assert_int_eq(orbit_arena_open(f, &huge, &a), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_arena_open(NULL, NULL, &a), -ORBIT_EMALFORMED);

    struct orbit_exchanges *ex;
    struct orbit_exchange_spec s = spec_of(SLOT, SLOTS, 4096);
    s.a_to_b.kind = CTL_KIND;                       /* control and arena collide */
    ck_assert_int_eq(orbit_exchanges_open(f, &s, &ex), -ORBIT_EMALFORMED);
    s = spec_of(SLOT, SLOTS, 4096);
    s.b_to_a = (struct orbit_arena_spec){ .kind = ARENA_KIND, .slot_bytes = SLOT, .slots_per_lane = SLOTS };   /* directional, same kind */
    ck_assert_int_eq(orbit_exchanges_open(f, &s, &ex), -ORBIT_EMALFORMED);
    s = spec_of(SLOT, SLOTS, 32);                   /* a ring that cannot hold one event */
    ck_assert_int_eq(orbit_exchanges_open(f, &s, &ex), -ORBIT_EMALFORMED);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(a_peer_with_other_geometry_is_refused)
{
    const char *name = tu_fleet_name("xgeo");
    struct orbit_fleet *f0 = tu_join(name, 2, 0, 11, tu_backing());
    struct orbit_fleet *f1 = tu_join(name, 2, 1, 22, tu_backing());
    struct orbit_arena *a0, *a1;
    struct orbit_arena_spec sp = { .kind = ARENA_KIND, .slot_bytes = 4096, .slots_per_lane = 64 },
        other = { .kind = ARENA_KIND, .slot_bytes = 2048, .slots_per_lane = 64 };
    ck_assert_int_eq(orbit_arena_open(f0, &sp, &a0), 0);
    ck_assert_int_eq(orbit_arena_open(f1, &other, &a1), -ORBIT_EGEOMETRY);
    other = (struct orbit_arena_spec){ .kind = ARENA_KIND, .slot_bytes = 4096, .slots_per_lane = 128 };
    ck_assert_int_eq(orbit_arena_open(f1, &other, &a1), -ORBIT_EGEOMETRY);
    /* A streams table under the arena's kind is another table. */
    struct orbit_streams *s;
    struct orbit_stream_spec ss = { .kind = ARENA_KIND, .lane_capacity = 4, .buffer_bytes = 4096 };
    ck_assert_int_eq(orbit_streams_open(f1, &ss, &s), -ORBIT_EGEOMETRY);
    /* open_existing takes the geometry the segment records. */
    ck_assert_int_eq(orbit_arena_open_existing(f1, ARENA_KIND, &a1), 0);
    struct orbit_arena_spec got;
    ck_assert_int_eq(orbit_arena_spec(a1, &got), 0);
    ck_assert_uint_eq(got.slot_bytes, 4096);
    ck_assert_uint_eq(got.slots_per_lane, 64);
    ck_assert_uint_eq(orbit_arena_kind(a1), ARENA_KIND);
    /* A chunk of node 0 read through node 1's handle. */
    struct orbit_chunk_desc d = put_chunk(a0, 5000, 3);
    struct orbit_arena *a1b;
    ck_assert_int_eq(orbit_arena_open(f1, &sp, &a1b), 0);
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(a1b, &d, &c), 0);
    ck_assert_uint_eq(c.len, 5000);
    ck_assert(same(c.data, c.len, 3));
    orbit_chunk_release(&c);
    ck_assert_uint_eq(lane_free(a0, 0), 64);
    orbit_arena_close(a1b);
    orbit_arena_close(a1);
    orbit_arena_close(a0);
    orbit_fleet_leave(f1);
    orbit_fleet_leave(f0);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- the chunk life ------------------------------------------------------------- */

START_TEST(reserve_fill_commit_consume_release)
{
    struct fx x = fx_open();
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 2500, &r), 0);
    ck_assert_uint_eq(r.slot_count, 3);
    ck_assert_uint_eq(r.capacity, 3 * SLOT);
    ck_assert(!r.done);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 3);
    fill(r.data, 2500, 9);
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_commit(&r, 2500, &d), 0);
    ck_assert_uint_eq(d.arena_kind, ARENA_KIND);
    ck_assert_uint_eq(d.node, 0);
    ck_assert_uint_eq(d.slot_count, 3);
    ck_assert_uint_eq(d.len, 2500);
    ck_assert_uint_ne(d.generation, 0);
    ck_assert_int_eq(orbit_arena_commit(&r, 2500, &d), -ORBIT_EMALFORMED);   /* done */
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c), 0);
    ck_assert(!c.released);
    ck_assert_uint_eq(c.len, 2500);
    ck_assert(same(c.data, 2500, 9));
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 3);
    orbit_chunk_release(&c);
    ck_assert(c.released);
    orbit_chunk_release(&c);   /* idempotent */
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    struct orbit_arena_stats st;
    orbit_arena_stats(x.ar, &st);
    ck_assert_uint_eq(st.reserved, 1);
    ck_assert_uint_eq(st.committed, 1);
    ck_assert_uint_eq(st.consumed, 1);
    ck_assert_uint_eq(st.released, 1);
    ck_assert_uint_eq(st.bytes_committed, 2500);
    ck_assert_uint_eq(st.bytes_consumed, 2500);
    fx_close(&x);
}
END_TEST

START_TEST(argument_errors)
{
    struct fx x = fx_open();
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, SLOT * SLOTS + 1, &r), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_arena_reserve(x.ar, SLOT * SLOTS + 1, 0, &r), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_arena_try_reserve(NULL, 10, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, SLOT * SLOTS, &r), 0);   /* a whole lane is fine */
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_commit(&r, 0, &d), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_arena_commit(&r, SLOT * SLOTS + 1, &d), -ORBIT_EMALFORMED);
    ck_assert(!r.done);   /* refused commits change nothing */
    orbit_arena_cancel(&r);
    ck_assert(r.done);
    orbit_arena_cancel(&r);
    ck_assert_int_eq(orbit_arena_consume(x.ar, NULL, NULL), -ORBIT_EMALFORMED);
    struct orbit_fixed_buf fb;
    ck_assert_int_eq(orbit_reservation_fixed(&r, &fb), -ORBIT_EMALFORMED);
    fx_close(&x);
}
END_TEST

START_TEST(consumption_is_exactly_once)
{
    struct fx x = fx_open();
    struct orbit_chunk_desc d = put_chunk(x.ar, 100, 1);
    struct orbit_chunk c1, c2;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c1), 0);
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c2), -ORBIT_ESTALE);
    orbit_chunk_release(&c1);
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c2), -ORBIT_ESTALE);
    /* The slot's next tenant is not reachable through the old descriptor. */
    struct orbit_chunk_desc d2 = put_chunk(x.ar, 100, 2);
    ck_assert_uint_ne(d2.generation, d.generation);
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c2), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_arena_withdraw(x.ar, &d), -ORBIT_ESTALE);
    /* Withdraw: the producer takes back what nobody consumed, once. */
    ck_assert_int_eq(orbit_arena_withdraw(x.ar, &d2), 0);
    ck_assert_int_eq(orbit_arena_withdraw(x.ar, &d2), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d2, &c2), -ORBIT_ESTALE);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

/* Threads race to consume one descriptor: exactly one wins, every round. */
struct race { struct orbit_arena *a; struct orbit_chunk_desc d; pthread_barrier_t *go; int won; };

static void *race_consume(void *p)
{
    struct race *r = p;
    pthread_barrier_wait(r->go);
    struct orbit_chunk c;
    int rc = orbit_arena_consume(r->a, &r->d, &c);
    r->won = rc == 0;
    if (rc == 0)
        orbit_chunk_release(&c);
    else
        ck_assert_int_eq(rc, -ORBIT_ESTALE);
    return NULL;
}

START_TEST(racing_consumers_one_winner)
{
    struct fx x = fx_open();
    for (int round = 0; round < 200; round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 4);
        struct race r[4];
        pthread_t t[4];
        struct orbit_chunk_desc d = put_chunk(x.ar, 3000, (unsigned)round);
        for (int i = 0; i < 4; i++) {
            r[i] = (struct race){ x.ar, d, &go, 0 };
            pthread_create(&t[i], NULL, race_consume, &r[i]);
        }
        int winners = 0;
        for (int i = 0; i < 4; i++) {
            pthread_join(t[i], NULL);
            winners += r[i].won;
        }
        ck_assert_int_eq(winners, 1);
        pthread_barrier_destroy(&go);
    }
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(credit_returns_by_release_and_by_cancel)
{
    struct fx x = fx_open();
    struct orbit_reservation r[SLOTS / 4], extra;
    for (unsigned i = 0; i < SLOTS / 4; i++)
        ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 4 * SLOT, &r[i]), 0);
    ck_assert_uint_eq(lane_free(x.ar, 0), 0);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 1, &extra), -ORBIT_EPAYLOADFULL);
    ck_assert_int_eq(orbit_arena_reserve(x.ar, 1, 0, &extra), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_arena_reserve(x.ar, 1, 20, &extra), -ORBIT_ETIMEDOUT);
    struct orbit_arena_stats st;
    orbit_arena_stats(x.ar, &st);
    ck_assert_uint_eq(st.full, 1);
    /* Cancel returns credit. */
    orbit_arena_cancel(&r[1]);
    ck_assert_uint_eq(lane_free(x.ar, 0), 4);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 4 * SLOT, &extra), 0);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 1, &r[1]), -ORBIT_EPAYLOADFULL);
    /* Release returns credit. */
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_commit(&r[2], 4 * SLOT, &d), 0);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 1, &r[1]), -ORBIT_EPAYLOADFULL);   /* committed: still held */
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c), 0);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 1, &r[1]), -ORBIT_EPAYLOADFULL);   /* being read */
    orbit_chunk_release(&c);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 4 * SLOT, &r[2]), 0);
    orbit_arena_cancel(&r[0]);
    orbit_arena_cancel(&r[2]);
    orbit_arena_cancel(&r[3]);
    orbit_arena_cancel(&extra);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    orbit_arena_stats(x.ar, &st);
    ck_assert_uint_eq(st.cancelled, 5);
    fx_close(&x);
}
END_TEST

START_TEST(a_run_is_contiguous)
{
    struct fx x = fx_open();
    struct orbit_reservation r[SLOTS], big;
    for (unsigned i = 0; i < SLOTS; i++)
        ck_assert_int_eq(orbit_arena_try_reserve(x.ar, SLOT, &r[i]), 0);
    /* Free every other slot: half the lane is free, but no run of two. */
    for (unsigned i = 0; i < SLOTS; i += 2)
        orbit_arena_cancel(&r[i]);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS / 2);
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, SLOT + 1, &big), -ORBIT_EPAYLOADFULL);
    orbit_arena_cancel(&r[5]);   /* slots 4, 5, 6 free now */
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 3 * SLOT, &big), 0);
    ck_assert_uint_eq(big.first_slot, 4);
    orbit_arena_cancel(&big);
    for (unsigned i = 1; i < SLOTS; i += 2)
        orbit_arena_cancel(&r[i]);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(a_commit_that_shortens_frees_the_tail)
{
    struct fx x = fx_open();
    struct orbit_reservation r, r2;
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 8 * SLOT, &r), 0);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 8);
    fill(r.data, SLOT + 1, 5);
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_commit(&r, SLOT + 1, &d), 0);
    ck_assert_uint_eq(d.slot_count, 2);   /* minimal extent */
    ck_assert_uint_eq(d.len, SLOT + 1);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 2);
    /* The freed tail is a run again at once. */
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 14 * SLOT, &r2), 0);
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c), 0);
    ck_assert_uint_eq(c.len, SLOT + 1);
    ck_assert(same(c.data, c.len, 5));
    orbit_chunk_release(&c);
    orbit_arena_cancel(&r2);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(a_corrupted_descriptor_is_refused)
{
    struct fx x = fx_open();
    struct orbit_chunk_desc good = put_chunk(x.ar, 3 * SLOT - 10, 4), d;
    struct orbit_chunk c;
#define REFUSED(mutation, code) do { d = good; mutation; \
        ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c), code); } while (0)
    REFUSED(d.arena_kind = ARENA_KIND + 1, -ORBIT_ECORRUPT);
    REFUSED(d.node = 2, -ORBIT_ECORRUPT);                          /* outside the fleet */
    REFUSED(d.node = 0xffff, -ORBIT_ECORRUPT);
    REFUSED(d.first_slot = SLOTS, -ORBIT_ECORRUPT);                /* outside the lane */
    REFUSED(d.first_slot = 0xffffffffu, -ORBIT_ECORRUPT);
    REFUSED(d.slot_count = 0, -ORBIT_ECORRUPT);
    REFUSED(d.slot_count = SLOTS, -ORBIT_ECORRUPT);                /* run past the lane end */
    REFUSED(d.slot_count = 0xffffffffu, -ORBIT_ECORRUPT);
    REFUSED(d.len = 0, -ORBIT_ECORRUPT);
    REFUSED(d.len = 3 * SLOT + 1, -ORBIT_ECORRUPT);                /* longer than the run */
    REFUSED(d.len = 2 * SLOT, -ORBIT_ECORRUPT);                    /* not a minimal extent */
    REFUSED(d.generation = 0, -ORBIT_ECORRUPT);
    REFUSED(d.generation = 1ull << 50, -ORBIT_ECORRUPT);
    REFUSED(d.generation = good.generation + 1, -ORBIT_ESTALE);    /* not this allocation */
    REFUSED((d.slot_count = 2, d.len = 2 * SLOT - 3), -ORBIT_ECORRUPT);   /* disagrees with the slot */
    REFUSED(d.len = good.len - 1, -ORBIT_ECORRUPT);
    REFUSED(d.first_slot = good.first_slot + 1, -ORBIT_ESTALE);    /* a tail is not a chunk */
    /* Nothing above took the chunk: the real descriptor still works. */
    ck_assert_int_eq(orbit_arena_consume(x.ar, &good, &c), 0);
    ck_assert(same(c.data, c.len, 4));
    orbit_chunk_release(&c);
    /* A garbled tail in shared memory is caught before a pointer is formed. */
    struct orbit_chunk_desc g = put_chunk(x.ar, 2 * SLOT, 6);
    struct arena_slot *tail = &x.ar->slots[g.first_slot + 1];
    uint64_t saved = atomic_load(&tail->tag);
    atomic_store(&tail->tag, ATAG(g.generation + 7, ASLOT_TAIL, 0));
    ck_assert_int_eq(orbit_arena_consume(x.ar, &g, &c), -ORBIT_ECORRUPT);
    atomic_store(&tail->tag, saved);
    ck_assert_int_eq(orbit_arena_consume(x.ar, &g, &c), 0);
    orbit_chunk_release(&c);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
#undef REFUSED
    fx_close(&x);
}
END_TEST

START_TEST(reset_all_makes_everything_stale)
{
    struct fx x = fx_open();
    uint64_t e0 = orbit_arena_epoch(x.ar);
    struct orbit_chunk_desc d = put_chunk(x.ar, 10, 1), d2 = put_chunk(x.ar, 10, 2), d3;
    struct orbit_chunk held;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d2, &held), 0);
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 10, &r), 0);
    orbit_arena_reset_all(x.ar);
    ck_assert_uint_gt(orbit_arena_epoch(x.ar), e0);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_arena_commit(&r, 10, &d3), -ORBIT_ESTALE);
    ck_assert(r.done);
    orbit_chunk_release(&held);   /* touches nothing of the next tenant */
    d3 = put_chunk(x.ar, 10, 3);
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d3, &c), 0);
    orbit_chunk_release(&c);
    fx_close(&x);
}
END_TEST

/* ---- death ---------------------------------------------------------------------- */

START_TEST(node_dead_returns_a_producers_chunks_and_a_readers_holdings)
{
    const char *name = tu_fleet_name("xdead");
    struct orbit_fleet *f0 = tu_join(name, 2, 0, 100, tu_backing());
    struct orbit_fleet *f1 = tu_join(name, 2, 1, 200, tu_backing());
    struct orbit_arena_spec sp = { .kind = ARENA_KIND, .slot_bytes = SLOT, .slots_per_lane = SLOTS };
    struct orbit_arena *p, *rd;
    ck_assert_int_eq(orbit_arena_open(f0, &sp, &p), 0);
    ck_assert_int_eq(orbit_arena_open(f1, &sp, &rd), 0);
    /* Producer (node 0, life 100): a reservation, two unread chunks, one held by node 1. */
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(p, 2 * SLOT, &r), 0);
    struct orbit_chunk_desc unread1 = put_chunk(p, SLOT, 1), unread2 = put_chunk(p, 3 * SLOT, 2);
    struct orbit_chunk_desc held = put_chunk(p, 2 * SLOT, 3);
    struct orbit_chunk hc;
    ck_assert_int_eq(orbit_arena_consume(rd, &held, &hc), 0);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 8);
    /* Another life of node 0 is untouched. */
    orbit_arena_node_dead(rd, 0, 999);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 8);
    orbit_arena_node_dead(rd, 0, 100);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 2);   /* only the held chunk remains */
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(rd, &unread1, &c), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_arena_consume(rd, &unread2, &c), -ORBIT_ESTALE);
    ck_assert(same(hc.data, hc.len, 3));   /* still valid for the surviving reader */
    orbit_chunk_release(&hc);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS);
    /* A dead reader's holdings go back to the (live) producer. */
    struct orbit_chunk_desc d1 = put_chunk(p, SLOT, 4), d2 = put_chunk(p, SLOT, 5);
    struct orbit_chunk h1, h2;
    ck_assert_int_eq(orbit_arena_consume(rd, &d1, &h1), 0);
    ck_assert_int_eq(orbit_arena_consume(p, &d2, &h2), 0);   /* node 0 reads its own */
    orbit_arena_node_dead(p, 1, 201);                       /* another life: nothing */
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 2);
    orbit_arena_node_dead(p, 1, 200);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 1);
    /* A reader killed between its consume CAS and its stamp: the run still comes back. */
    struct orbit_chunk_desc d3 = put_chunk(p, SLOT, 6);
    struct orbit_chunk h3;
    ck_assert_int_eq(orbit_arena_consume(rd, &d3, &h3), 0);
    atomic_store(&p->slots[d3.first_slot].reader_inc, 0);
    orbit_arena_node_dead(p, 1, 200);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 1);
    struct orbit_arena_stats st;
    orbit_arena_stats(p, &st);
    ck_assert_uint_ge(st.reclaimed, 1);
    orbit_chunk_release(&h1);   /* reclaimed: a no-op */
    orbit_chunk_release(&h2);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS);
    /* The cancelled-by-death reservation is done for its owner. */
    struct orbit_chunk_desc dd;
    ck_assert_int_eq(orbit_arena_commit(&r, 1, &dd), -ORBIT_ESTALE);
    orbit_arena_close(rd);
    orbit_arena_close(p);
    orbit_fleet_leave(f1);
    orbit_fleet_leave(f0);
    orbit_fleet_unlink(name);
}
END_TEST

/*
 * A run left RECLAIMING: its freer was killed between taking it and freeing it
 * (a reader inside release, or a reporter inside node_dead). The head names the
 * node the work was for; the next report for that node finishes it.
 */
START_TEST(a_run_left_reclaiming_is_finished_by_the_next_report)
{
    const char *name = tu_fleet_name("xcut");
    struct orbit_fleet *f0 = tu_join(name, 2, 0, 100, tu_backing());
    struct orbit_fleet *f1 = tu_join(name, 2, 1, 200, tu_backing());
    struct orbit_arena_spec sp = { .kind = ARENA_KIND, .slot_bytes = SLOT, .slots_per_lane = SLOTS };
    struct orbit_arena *p, *rd;
    ck_assert_int_eq(orbit_arena_open(f0, &sp, &p), 0);
    ck_assert_int_eq(orbit_arena_open(f1, &sp, &rd), 0);
    /* Reader (node 1) killed inside its release: the run is RECLAIMING for node 1. */
    struct orbit_chunk_desc d = put_chunk(p, 2 * SLOT, 1);
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(rd, &d, &c), 0);
    atomic_store(&p->slots[d.first_slot].tag, ATAG(d.generation, ASLOT_RECLAIMING, 1));
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 2);
    orbit_arena_node_dead(p, 1, 200);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS);
    /* A reporter for node 0 killed inside node_dead after taking an unread chunk. */
    struct orbit_chunk_desc u = put_chunk(p, 3 * SLOT, 2);
    atomic_store(&p->slots[u.first_slot].tag, ATAG(u.generation, ASLOT_RECLAIMING, 0));
    orbit_arena_node_dead(rd, 0, 100);   /* the next report for node 0 */
    ck_assert_uint_eq(lane_free(p, 0), SLOTS);
    /* A live node's own RECLAIMING (mid-release) is not another node's to finish. */
    struct orbit_chunk_desc v = put_chunk(p, SLOT, 3);
    atomic_store(&p->slots[v.first_slot].tag, ATAG(v.generation, ASLOT_RECLAIMING, 0));
    orbit_arena_node_dead(p, 1, 200);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS - 1);
    orbit_arena_node_dead(rd, 0, 100);
    ck_assert_uint_eq(lane_free(p, 0), SLOTS);
    orbit_arena_close(rd);
    orbit_arena_close(p);
    orbit_fleet_leave(f1);
    orbit_fleet_leave(f0);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- exchanges: the state machine --------------------------------------------------- */

static void expect_event(struct orbit_exchange *x, enum orbit_exchange_event_type type, uint64_t id,
                         size_t len, unsigned seed)
{
    struct orbit_exchange_event ev;
    int rc = orbit_exchange_try_next(x, &ev);
    ck_assert_msg(rc == 0, "next: %s", orbit_strerror(rc));
    ck_assert_int_eq(ev.type, type);
    ck_assert_uint_eq(ev.chunk_id, id);
    if (len == 0) {
        ck_assert(ev.chunk.released);
    } else {
        ck_assert(!ev.chunk.released);
        ck_assert_uint_eq(ev.chunk.len, len);
        ck_assert(same(ev.chunk.data, len, seed));
        orbit_chunk_release(&ev.chunk);
    }
}

static void send_meta(struct orbit_exchange *x, size_t len, unsigned seed)
{
    unsigned char buf[SLOT];
    fill(buf, len, seed);
    ck_assert_int_eq(orbit_exchange_send_start(x, buf, len, 1000), 0);
}

static void send_data(struct orbit_exchange *x, size_t len, unsigned seed)
{
    unsigned char buf[4 * SLOT];
    fill(buf, len, seed);
    ck_assert_int_eq(orbit_exchange_send_data(x, buf, len, 1000), 0);
}

START_TEST(a_round_trip)
{
    struct fx x = fx_open();
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    ck_assert_uint_eq(orbit_exchange_id(a), orbit_exchange_id(b));
    ck_assert_int_eq(orbit_exchange_side(b), ORBIT_SIDE_B);
    ck_assert_int_eq(orbit_exchange_send_state(a), ORBIT_FLOW_NEW);
    unsigned char meta[100];
    fill(meta, sizeof meta, 77);
    ck_assert_int_eq(orbit_exchange_send_start(a, meta, sizeof meta, 1000), 0);
    ck_assert_int_eq(orbit_exchange_send_state(a), ORBIT_FLOW_OPEN);
    send_data(a, 3000, 1);
    send_data(a, 1, 2);
    ck_assert_int_eq(orbit_exchange_finish(a, 1000), 0);
    ck_assert_int_eq(orbit_exchange_send_state(a), ORBIT_FLOW_FINISHED);
    expect_event(b, ORBIT_EXCHANGE_START, 1, 100, 77);
    ck_assert_int_eq(orbit_exchange_recv_state(b), ORBIT_FLOW_OPEN);
    expect_event(b, ORBIT_EXCHANGE_DATA, 2, 3000, 1);
    expect_event(b, ORBIT_EXCHANGE_DATA, 3, 1, 2);
    expect_event(b, ORBIT_EXCHANGE_FIN, 0, 0, 0);
    ck_assert_int_eq(orbit_exchange_recv_state(b), ORBIT_FLOW_FINISHED);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), -ORBIT_ECLOSED);
    /* The response. */
    ck_assert_int_eq(orbit_exchange_send_start(b, NULL, 0, 1000), 0);
    send_data(b, 2048, 3);
    ck_assert_int_eq(orbit_exchange_finish(b, 1000), 0);
    expect_event(a, ORBIT_EXCHANGE_START, 0, 0, 0);
    expect_event(a, ORBIT_EXCHANGE_DATA, 1, 2048, 3);   /* no metadata: DATA starts at id 1 */
    expect_event(a, ORBIT_EXCHANGE_FIN, 0, 0, 0);
    struct orbit_exchange_stats st;
    orbit_exchanges_stats(x.ex, &st);
    ck_assert_uint_eq(st.chunks_sent, 4);
    ck_assert_uint_eq(st.chunks_received, 4);
    ck_assert_uint_eq(st.bytes_sent, 100 + 3000 + 1 + 2048);
    ck_assert_uint_eq(st.bytes_received, 100 + 3000 + 1 + 2048);
    ck_assert_uint_eq(st.events_sent, 7);
    ck_assert_uint_eq(st.events_received, 7);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(early_response_and_full_duplex)
{
    struct fx x = fx_open();
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    /* B answers before A has said anything, and finishes first. */
    send_meta(b, 1, 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 1000), 0);
    /* Interleaved both ways. */
    for (unsigned i = 0; i < 6; i++) {
        send_data(a, 100 + i, 10 + i);
        send_data(b, 200 + i, 20 + i);
    }
    ck_assert_int_eq(orbit_exchange_finish(b, 1000), 0);
    expect_event(a, ORBIT_EXCHANGE_START, 1, 1, 0);
    for (unsigned i = 0; i < 6; i++) {
        expect_event(b, i == 0 ? ORBIT_EXCHANGE_START : ORBIT_EXCHANGE_DATA, i == 0 ? 0 : i, i == 0 ? 0 : 99 + i,
                     9 + i);
        expect_event(a, ORBIT_EXCHANGE_DATA, 2 + i, 200 + i, 20 + i);
    }
    expect_event(b, ORBIT_EXCHANGE_DATA, 6, 105, 15);
    expect_event(a, ORBIT_EXCHANGE_FIN, 0, 0, 0);
    /* A's flow is still open after B's finished. */
    send_data(a, 7, 30);
    ck_assert_int_eq(orbit_exchange_reset(a, 503, 1000), 0);
    expect_event(b, ORBIT_EXCHANGE_DATA, 7, 7, 30);
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_RESET);
    ck_assert_uint_eq(ev.reset_code, 503);
    ck_assert(ev.chunk.released);
    ck_assert_int_eq(orbit_exchange_recv_state(b), ORBIT_FLOW_RESET);
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), -ORBIT_ECLOSED);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(the_sender_refuses_lifecycle_violations)
{
    struct fx x = fx_open();
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_send_data(a, "x", 1, 0), -ORBIT_EMALFORMED);   /* DATA before START */
    ck_assert_int_eq(orbit_exchange_finish(a, 0), -ORBIT_EMALFORMED);              /* FIN before START */
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), -ORBIT_EMALFORMED);  /* START twice */
    ck_assert_int_eq(orbit_exchange_send_data(a, "x", 0, 0), -ORBIT_EMALFORMED);   /* empty DATA */
    ck_assert_int_eq(orbit_exchange_send_data(a, NULL, 5, 0), -ORBIT_EMALFORMED);
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_exchange_try_reserve(a, SLOT * SLOTS + 1, &r), -ORBIT_ETOOLARGE);
    ck_assert_int_eq(orbit_exchange_try_data(a, NULL, 1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_finish(a, 0), 0);
    ck_assert_int_eq(orbit_exchange_send_data(a, "x", 1, 0), -ORBIT_ECLOSED);      /* DATA after FIN */
    ck_assert_int_eq(orbit_exchange_finish(a, 0), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_exchange_reset(a, 1, 0), -ORBIT_ECLOSED);
    ck_assert_int_eq(orbit_exchange_try_reserve(a, 1, &r), -ORBIT_ECLOSED);
    /* A reservation of another arena is not this flow's. */
    struct orbit_arena *other;
    struct orbit_arena_spec sp = { .kind = ARENA2_KIND, .slot_bytes = SLOT, .slots_per_lane = SLOTS };
    ck_assert_int_eq(orbit_arena_open(x.f, &sp, &other), 0);
    ck_assert_int_eq(orbit_arena_try_reserve(other, 10, &r), 0);
    ck_assert_int_eq(orbit_exchange_try_start(b, &r, 10), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_send_state(b), ORBIT_FLOW_NEW);
    orbit_arena_cancel(&r);
    orbit_arena_close(other);
    expect_event(b, ORBIT_EXCHANGE_START, 0, 0, 0);
    expect_event(b, ORBIT_EXCHANGE_FIN, 0, 0, 0);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    fx_close(&x);
}
END_TEST

/* A raw control stream: side A writes hand-made events, side B is an exchange. */
struct raw { struct orbit_endpoint *a; struct orbit_exchange *b; orbit_id id; };

static struct raw raw_pair(struct fx *x)
{
    struct raw r;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(orbit_exchanges_streams(x->ex), &r.a, &t), 0);
    ck_assert_int_eq(orbit_exchange_open(x->ex, &t, &r.b), 0);
    r.id = t.id;
    return r;
}

static void raw_event(struct raw *r, uint8_t event, uint64_t chunk_id, const struct orbit_chunk_desc *d,
                      uint32_t code)
{
    struct xframe f = { .event = event, .flow = ORBIT_FLOW_A_TO_B, .exchange = r->id, .chunk_id = chunk_id,
                        .reset_code = code };
    if (d) {
        f.flags = XFRAME_HAS_PAYLOAD;
        f.desc = *d;
    }
    unsigned char buf[XFRAME_BYTES];
    xframe_encode(&f, buf);
    ck_assert_int_eq(orbit_endpoint_write_exact(r->a, buf, sizeof buf, 1000), 0);
}

/* A chunk committed to the raw exchange's A->B flow. */
static struct orbit_chunk_desc raw_chunk(struct fx *x, struct raw *r, size_t len, unsigned seed)
{
    struct orbit_reservation res;
    ck_assert_int_eq(orbit_arena_try_reserve(x->ar, len, &res), 0);
    fill(res.data, len, seed);
    struct orbit_chunk_desc d;
    ck_assert_int_eq(arena_publish(&res, len, r->id, ORBIT_FLOW_A_TO_B, &d), 0);
    arena_settle(&res, &d);
    return d;
}

static void raw_close(struct raw *r)
{
    orbit_exchange_close(r->b);
    orbit_endpoint_close(r->a);
}

START_TEST(the_receiver_refuses_start_twice)
{
    struct fx x = fx_open();
    struct raw r = raw_pair(&x);
    raw_event(&r, ORBIT_EXCHANGE_START, 0, NULL, 0);
    struct orbit_chunk_desc d = raw_chunk(&x, &r, 500, 1);
    raw_event(&r, ORBIT_EXCHANGE_START, 1, &d, 0);
    expect_event(r.b, ORBIT_EXCHANGE_START, 0, 0, 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_exchange_recv_state(r.b), ORBIT_FLOW_FAILED);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_EMALFORMED);   /* sticky */
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);   /* the refused event's chunk went back */
    raw_close(&r);
    fx_close(&x);
}
END_TEST

START_TEST(the_receiver_refuses_data_before_start_and_after_fin)
{
    struct fx x = fx_open();
    struct raw r = raw_pair(&x);
    struct orbit_chunk_desc d = raw_chunk(&x, &r, 10, 1);
    raw_event(&r, ORBIT_EXCHANGE_DATA, 1, &d, 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_EMALFORMED);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    raw_close(&r);

    /* DATA after FIN: FIN ends the flow; the stray event's chunk returns at close. */
    r = raw_pair(&x);
    raw_event(&r, ORBIT_EXCHANGE_START, 0, NULL, 0);
    raw_event(&r, ORBIT_EXCHANGE_FIN, 0, NULL, 0);
    d = raw_chunk(&x, &r, 10, 2);
    raw_event(&r, ORBIT_EXCHANGE_DATA, 1, &d, 0);
    expect_event(r.b, ORBIT_EXCHANGE_START, 0, 0, 0);
    expect_event(r.b, ORBIT_EXCHANGE_FIN, 0, 0, 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_ECLOSED);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 1);
    raw_close(&r);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);

    /* FIN before START is a violation too. */
    r = raw_pair(&x);
    raw_event(&r, ORBIT_EXCHANGE_FIN, 0, NULL, 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_EMALFORMED);
    raw_close(&r);
    fx_close(&x);
}
END_TEST

START_TEST(the_receiver_refuses_an_out_of_order_chunk_id)
{
    struct fx x = fx_open();
    struct raw r = raw_pair(&x);
    raw_event(&r, ORBIT_EXCHANGE_START, 0, NULL, 0);
    struct orbit_chunk_desc d1 = raw_chunk(&x, &r, 10, 1), d3 = raw_chunk(&x, &r, 10, 3);
    raw_event(&r, ORBIT_EXCHANGE_DATA, 1, &d1, 0);
    raw_event(&r, ORBIT_EXCHANGE_DATA, 3, &d3, 0);   /* 2 is missing */
    expect_event(r.b, ORBIT_EXCHANGE_START, 0, 0, 0);
    expect_event(r.b, ORBIT_EXCHANGE_DATA, 1, 10, 1);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_EMALFORMED);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    raw_close(&r);
    /* A START whose metadata is not chunk 1. */
    r = raw_pair(&x);
    d1 = raw_chunk(&x, &r, 10, 1);
    raw_event(&r, ORBIT_EXCHANGE_START, 2, &d1, 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_EMALFORMED);
    raw_close(&r);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(corrupt_frames_and_descriptors_are_refused)
{
    struct fx x = fx_open();
    /* Bytes that are not an event. */
    struct raw r = raw_pair(&x);
    unsigned char junk[XFRAME_BYTES];
    memset(junk, 0x5a, sizeof junk);
    ck_assert_int_eq(orbit_endpoint_write_exact(r.a, junk, sizeof junk, 1000), 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_ECORRUPT);
    ck_assert_int_eq(orbit_exchange_recv_state(r.b), ORBIT_FLOW_FAILED);
    raw_close(&r);
    /* Every byte of a valid frame that must be zero, and the header fields. */
    struct xframe good = { .event = ORBIT_EXCHANGE_START, .flow = ORBIT_FLOW_A_TO_B, .exchange = 1 };
    unsigned char buf[XFRAME_BYTES];
    struct xframe out;
    xframe_encode(&good, buf);
    ck_assert_int_eq(xframe_decode(buf, &out), 0);
    for (unsigned i = 0; i < XFRAME_BYTES; i++) {
        if (i >= 8 && i < 16)
            continue;   /* the exchange id is free-form here */
        xframe_encode(&good, buf);
        buf[i] ^= 0x40;
        ck_assert_msg(xframe_decode(buf, &out) == -ORBIT_ECORRUPT, "byte %u", i);
    }
    good.event = ORBIT_EXCHANGE_DATA;   /* DATA without a chunk */
    xframe_encode(&good, buf);
    ck_assert_int_eq(xframe_decode(buf, &out), -ORBIT_ECORRUPT);
    /* Another exchange's id, or the wrong flow. */
    r = raw_pair(&x);
    struct xframe f = { .event = ORBIT_EXCHANGE_START, .flow = ORBIT_FLOW_A_TO_B, .exchange = r.id + 1 };
    xframe_encode(&f, buf);
    ck_assert_int_eq(orbit_endpoint_write_exact(r.a, buf, sizeof buf, 1000), 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_ECORRUPT);
    raw_close(&r);
    r = raw_pair(&x);
    f = (struct xframe){ .event = ORBIT_EXCHANGE_START, .flow = ORBIT_FLOW_B_TO_A, .exchange = r.id };
    xframe_encode(&f, buf);
    ck_assert_int_eq(orbit_endpoint_write_exact(r.a, buf, sizeof buf, 1000), 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_ECORRUPT);
    raw_close(&r);
    /* A descriptor pointing outside the lane, and one at a chunk of another exchange. */
    r = raw_pair(&x);
    raw_event(&r, ORBIT_EXCHANGE_START, 0, NULL, 0);
    struct orbit_chunk_desc d = raw_chunk(&x, &r, 10, 1), bad = d;
    bad.first_slot = SLOTS + 5;
    raw_event(&r, ORBIT_EXCHANGE_DATA, 1, &bad, 0);
    expect_event(r.b, ORBIT_EXCHANGE_START, 0, 0, 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_ECORRUPT);
    raw_close(&r);   /* our real chunk is still LIVE; the producer's flow never finished */
    ck_assert_int_eq(orbit_arena_withdraw(x.ar, &d), 0);
    struct raw r2 = raw_pair(&x);
    r = raw_pair(&x);
    d = raw_chunk(&x, &r2, 10, 1);   /* committed to r2 */
    raw_event(&r, ORBIT_EXCHANGE_START, 1, &d, 0);
    ck_assert_int_eq(orbit_exchange_try_next(r.b, &ev), -ORBIT_ECORRUPT);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 1);   /* not r's to give back */
    raw_close(&r);
    raw_close(&r2);
    ck_assert_int_eq(orbit_arena_withdraw(x.ar, &d), 0);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

/* ---- backpressure, close, readiness, io_uring --------------------------------------- */

START_TEST(a_full_control_ring_keeps_the_reservation)
{
    struct orbit_exchange_spec s = spec_of(SLOT, SLOTS, 128);   /* two events */
    struct fx x = fx_spec(&s);
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_try_start(a, NULL, 0), 0);
    send_data(a, 10, 1);
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_exchange_try_reserve(a, 2 * SLOT, &r), 0);
    fill(r.data, 1500, 2);
    ck_assert_int_eq(orbit_exchange_try_data(a, &r, 1500), -ORBIT_EAGAIN);
    ck_assert(!r.done);
    ck_assert_uint_eq(r.slot_count, 2);
    ck_assert_int_eq(orbit_exchange_data(a, &r, 1500, 10), -ORBIT_ETIMEDOUT);
    ck_assert(!r.done);
    ck_assert_int_eq(orbit_exchange_try_send_data(a, "z", 1), -ORBIT_EAGAIN);   /* nothing kept */
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 3);
    ck_assert_int_eq(orbit_exchange_try_finish(a), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_exchange_try_reset(a, 9), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_exchange_finish(a, 0), -ORBIT_ETIMEDOUT);
    ck_assert_int_eq(orbit_exchange_send_state(a), ORBIT_FLOW_OPEN);
    if (orbit_uring_futex_supported()) {
        struct io_uring ring;
        ck_assert_int_eq(io_uring_queue_init(4, &ring, 0), 0);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        ck_assert_int_eq(orbit_exchange_prep_wait_sendable(a, sqe), 0);   /* room comes with a read */
        ck_assert_int_eq(io_uring_submit(&ring), 1);
        expect_event(b, ORBIT_EXCHANGE_START, 0, 0, 0);
        struct io_uring_cqe *cqe;
        ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
        io_uring_cqe_seen(&ring, cqe);
        io_uring_queue_exit(&ring);
    } else {
        expect_event(b, ORBIT_EXCHANGE_START, 0, 0, 0);
    }
    ck_assert_int_eq(orbit_exchange_try_data(a, &r, 1500), 0);   /* the same reservation, retried */
    ck_assert(r.done);
    expect_event(b, ORBIT_EXCHANGE_DATA, 1, 10, 1);
    expect_event(b, ORBIT_EXCHANGE_DATA, 2, 1500, 2);
    ck_assert_int_eq(orbit_exchange_try_reset(a, 9), 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_RESET);
    ck_assert_uint_eq(ev.reset_code, 9);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(closing_returns_every_chunk)
{
    struct fx x = fx_open();
    struct orbit_exchange *a, *b;
    /* The sender gives up mid-flow: its queued chunks come back, the receiver sees RESET. */
    pair(x.ex, &a, &b);
    send_meta(a, 1, 0);
    send_data(a, 3 * SLOT, 1);
    send_data(a, SLOT, 2);
    expect_event(b, ORBIT_EXCHANGE_START, 1, 1, 0);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 4);
    orbit_exchange_close(a);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), -ORBIT_ERESET);
    orbit_exchange_close(b);
    /* The receiver leaves with events queued: their chunks come back. */
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    send_data(a, 2 * SLOT, 1);
    send_data(a, 2 * SLOT, 2);
    ck_assert_int_eq(orbit_exchange_finish(a, 0), 0);
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);   /* held by the application */
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_DATA);
    orbit_exchange_close(b);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 2);        /* only the held chunk */
    ck_assert(same(ev.chunk.data, ev.chunk.len, 1));         /* valid after close */
    orbit_chunk_release(&ev.chunk);
    ck_assert_int_eq(orbit_exchange_send_data(a, "x", 1, 0), -ORBIT_ECLOSED);
    orbit_exchange_close(a);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    /* A sender whose receiver already left: the publish fails, nothing stays reserved. */
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    orbit_exchange_close(b);
    ck_assert_int_eq(orbit_exchange_send_data(a, "x", 1, 0), -ORBIT_EPEERGONE);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    orbit_exchange_close(a);
    /* Finished, then closed before the receiver ever opened: the stream ends, chunks return. */
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_exchange_create(x.ex, &a, &t), 0);
    ck_assert_int_eq(orbit_exchange_send_start(a, "m", 1, 0), 0);
    ck_assert_int_eq(orbit_exchange_finish(a, 0), 0);
    orbit_exchange_close(a);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    fx_close(&x);
}
END_TEST

START_TEST(directional_arenas_keep_their_own_credit)
{
    struct orbit_exchange_spec s = spec_of(SLOT, SLOTS, 4096);
    s.b_to_a = (struct orbit_arena_spec){ .kind = ARENA2_KIND, .slot_bytes = 4 * SLOT, .slots_per_lane = 4 };
    struct fx x = fx_spec(&s);
    struct orbit_arena *ba = orbit_exchanges_arena(x.ex, ORBIT_FLOW_B_TO_A);
    ck_assert_ptr_ne(ba, x.ar);
    ck_assert_uint_eq(orbit_arena_kind(ba), ARENA2_KIND);
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_send_start(b, NULL, 0, 0), 0);
    struct orbit_reservation r[4], more;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(orbit_exchange_try_reserve(b, 4 * SLOT, &r[i]), 0);
    ck_assert_int_eq(orbit_exchange_try_reserve(b, 1, &more), -ORBIT_EPAYLOADFULL);
    ck_assert_int_eq(orbit_exchange_try_reserve(a, SLOT * SLOTS, &more), 0);   /* the other arena */
    orbit_arena_cancel(&more);
    fill(r[0].data, 4 * SLOT, 8);
    ck_assert_int_eq(orbit_exchange_try_data(b, &r[0], 4 * SLOT), 0);
    expect_event(a, ORBIT_EXCHANGE_START, 0, 0, 0);
    expect_event(a, ORBIT_EXCHANGE_DATA, 1, 4 * SLOT, 8);
    ck_assert_int_eq(orbit_exchange_try_reserve(b, 1, &more), 0);
    orbit_arena_cancel(&more);
    for (int i = 1; i < 4; i++)
        orbit_arena_cancel(&r[i]);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    fx_close(&x);
}
END_TEST

static bool readable(int fd, int ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, ms) == 1;
}

START_TEST(readiness_for_credit_and_events)
{
    struct fx x = fx_open();
    int fd = orbit_exchanges_readiness(x.ex);
    ck_assert_int_ge(fd, 0);
    int afd = orbit_arena_readiness(x.ar);
    ck_assert_int_ge(afd, 0);
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), -ORBIT_EAGAIN);
    orbit_readiness_drain(fd);
    ck_assert(!readable(fd, 0));
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    ck_assert(readable(fd, 2000));   /* an event for a receiver that found nothing */
    orbit_readiness_drain(fd);
    orbit_readiness_drain(afd);
    expect_event(b, ORBIT_EXCHANGE_START, 0, 0, 0);
    /* Credit: fill the lane, hear about the release. */
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_exchange_try_reserve(a, SLOT * SLOTS, &r), 0);
    ck_assert_int_eq(orbit_exchange_try_data(a, &r, SLOT * SLOTS), 0);
    struct orbit_reservation more;
    ck_assert_int_eq(orbit_exchange_try_reserve(a, 1, &more), -ORBIT_EPAYLOADFULL);
    orbit_readiness_drain(fd);
    orbit_readiness_drain(afd);
    ck_assert(!readable(afd, 0));
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);
    orbit_chunk_release(&ev.chunk);
    ck_assert(readable(afd, 2000));
    ck_assert(readable(fd, 2000));
    struct orbit_arena_stats st;
    orbit_arena_stats(x.ar, &st);
    ck_assert_uint_ge(st.doorbells, 1);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(io_uring_waits_for_credit_and_events)
{
    if (!orbit_uring_futex_supported()) {
        struct fx x = fx_open();
        struct io_uring_sqe sqe;
        ck_assert_int_eq(orbit_arena_prep_wait_credit(x.ar, 1, &sqe), -ORBIT_ENOTSUP);
        fx_close(&x);
        return;
    }
    struct fx x = fx_open();
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    ck_assert_int_eq(orbit_arena_prep_wait_credit(x.ar, SLOT, sqe), 1);   /* free now */
    ck_assert_int_eq(orbit_arena_prep_wait_credit(x.ar, SLOT * SLOTS + 1, sqe), -ORBIT_ETOOLARGE);
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_prep_wait_sendable(a, sqe), 1);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    ck_assert_int_eq(orbit_exchange_prep_wait_event(b, sqe), 1);
    expect_event(b, ORBIT_EXCHANGE_START, 0, 0, 0);
    /* Nothing queued: a FUTEX_WAIT that completes when A sends. */
    sqe->user_data = 42;
    ck_assert_int_eq(orbit_exchange_prep_wait_event(b, sqe), 0);
    ck_assert_uint_eq(sqe->user_data, 42);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_exchange_try_reserve(a, SLOT * SLOTS, &r), 0);
    ck_assert_int_eq(orbit_exchange_try_data(a, &r, SLOT * SLOTS), 0);
    struct io_uring_cqe *cqe;
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_uint_eq(cqe->user_data, 42);
    io_uring_cqe_seen(&ring, cqe);
    /* The lane is full: a credit wait that completes at the release. */
    sqe = io_uring_get_sqe(&ring);
    sqe->user_data = 43;
    ck_assert_int_eq(orbit_exchange_prep_wait_credit(a, SLOT, sqe), 0);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);
    orbit_chunk_release(&ev.chunk);
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_uint_eq(cqe->user_data, 43);
    io_uring_cqe_seen(&ring, cqe);
    sqe = io_uring_get_sqe(&ring);
    ck_assert_int_eq(orbit_arena_prep_wait_credit(x.ar, SLOT * SLOTS, sqe), 1);
    io_uring_queue_exit(&ring);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    fx_close(&x);
}
END_TEST

START_TEST(fixed_buffers_cover_the_lanes)
{
    struct fx x = fx_open();
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
    ck_assert_int_eq(orbit_arena_register_buffers(x.ar, &ring), 0);
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 3000, &r), 0);
    struct orbit_fixed_buf fb;
    ck_assert_int_eq(orbit_reservation_fixed(&r, &fb), 0);
    ck_assert_int_eq(fb.index, 0);
    ck_assert_ptr_eq(fb.addr, r.data);
    ck_assert_uint_eq(fb.len, 3 * SLOT);
    /* READ_FIXED from a pipe into the reservation, WRITE_FIXED of the chunk back out. */
    int p[2], q[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(q), 0);
    unsigned char msg[3000], back[3000];
    fill(msg, sizeof msg, 12);
    ck_assert_int_eq(write(p[1], msg, sizeof msg), (ssize_t)sizeof msg);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read_fixed(sqe, p[0], fb.addr, (unsigned)fb.len, 0, fb.index);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct io_uring_cqe *cqe;
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_int_eq(cqe->res, 3000);
    io_uring_cqe_seen(&ring, cqe);
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_commit(&r, 3000, &d), 0);
    ck_assert_int_eq(orbit_reservation_fixed(&r, &fb), -ORBIT_EMALFORMED);
    struct orbit_chunk c;
    ck_assert_int_eq(orbit_arena_consume(x.ar, &d, &c), 0);
    ck_assert_int_eq(orbit_chunk_fixed(&c, &fb), 0);
    ck_assert_uint_eq(fb.len, 3000);
    sqe = io_uring_get_sqe(&ring);
    io_uring_prep_write_fixed(sqe, q[1], fb.addr, (unsigned)fb.len, 0, fb.index);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_int_eq(cqe->res, 3000);
    io_uring_cqe_seen(&ring, cqe);
    ck_assert_int_eq(read(q[0], back, sizeof back), (ssize_t)sizeof back);
    ck_assert_mem_eq(back, msg, sizeof msg);
    orbit_chunk_release(&c);
    ck_assert_int_eq(orbit_chunk_fixed(&c, &fb), -ORBIT_EMALFORMED);
    io_uring_queue_exit(&ring);
    close(p[0]); close(p[1]); close(q[0]); close(q[1]);
    fx_close(&x);
}
END_TEST

START_TEST(inspection_lists_lanes_and_exchanges)
{
    struct fx x = fx_open();
    struct orbit_exchange *a, *b;
    pair(x.ex, &a, &b);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    send_data(a, 2 * SLOT, 1);
    send_data(a, SLOT, 2);
    struct orbit_exchange_event ev;
    expect_event(b, ORBIT_EXCHANGE_START, 0, 0, 0);
    ck_assert_int_eq(orbit_exchange_try_next(b, &ev), 0);   /* held */
    struct orbit_reservation r;
    ck_assert_int_eq(orbit_arena_try_reserve(x.ar, 3 * SLOT, &r), 0);
    struct orbit_arena_lane_info li[2];
    ck_assert_int_eq(orbit_arena_lanes(x.ar, li, 2), 1);
    ck_assert_uint_eq(li[0].node, 0);
    ck_assert_uint_eq(li[0].reading, 2);
    ck_assert_uint_eq(li[0].live, 1);
    ck_assert_uint_eq(li[0].reserved, 3);
    ck_assert_uint_eq(li[0].free, SLOTS - 6);
    ck_assert_uint_eq(li[0].chunks, 3);
    struct orbit_chunk_info ci[8];
    ck_assert_int_eq(orbit_arena_chunks(x.ar, ci, 8), 3);
    int reading = 0, live = 0, reserved = 0;
    for (int i = 0; i < 3; i++) {
        reading += ci[i].state == ORBIT_CHUNK_READING;
        live += ci[i].state == ORBIT_CHUNK_LIVE;
        reserved += ci[i].state == ORBIT_CHUNK_RESERVED;
        if (ci[i].state != ORBIT_CHUNK_RESERVED) {
            ck_assert_uint_eq(ci[i].exchange, orbit_exchange_id(a));
            ck_assert_uint_eq(ci[i].flow, ORBIT_FLOW_A_TO_B);
            ck_assert_uint_eq(ci[i].producer_incarnation, 7);
        }
        if (ci[i].state == ORBIT_CHUNK_READING)
            ck_assert_uint_eq(ci[i].reader_incarnation, 7);
    }
    ck_assert_int_eq(reading + live + reserved, 3);
    ck_assert_int_eq(reading, 1);
    orbit_chunk_release(&ev.chunk);
    orbit_arena_cancel(&r);
    orbit_exchange_close(a);
    orbit_exchange_close(b);
    ck_assert_int_eq(orbit_arena_lanes(x.ar, li, 2), 0);
    ck_assert_int_eq(orbit_arena_chunks(x.ar, ci, 8), 0);
    fx_close(&x);
}
END_TEST

/* ---- pool session binding ---------------------------------------------------------- */

START_TEST(a_session_lease_is_accepted_once_before_metadata)
{
    struct fx x = fx_open();
    struct orbit_pool *pool;
    struct orbit_pool_spec ps = { .kind = 224, .key_capacity = 8, .lane_capacity = 8 };
    ck_assert_int_eq(orbit_pool_open(x.f, &ps, &pool), 0);
    orbit_key key = { 1, 2 };
    orbit_id rid;
    ck_assert_int_eq(orbit_pool_register(pool, key, 2, &rid), 0);
    struct orbit_lease lease;
    ck_assert_int_eq(orbit_pool_reserve(pool, rid, &lease), 0);
    struct orbit_exchange *a;
    ck_assert_int_eq(orbit_exchange_open_session(x.ex, &lease, "GET /", 5, 1000, &a), 0);
    struct orbit_session s;
    ck_assert_int_eq(orbit_exchange_wait_session(x.ex, pool, 1000, &s), 0);
    ck_assert_ptr_nonnull(s.exchange);
    ck_assert(!s.execution.done);
    ck_assert_uint_eq(s.execution.lease.fence, lease.fence);
    ck_assert_uint_eq(s.metadata.len, 5);
    ck_assert_mem_eq(s.metadata.data, "GET /", 5);
    struct orbit_candidate cand;
    ck_assert_int_eq(orbit_pool_candidates(pool, key, &cand, 1), 1);
    ck_assert_uint_eq(cand.active, 1);
    ck_assert_uint_eq(cand.reserved, 0);
    /* The owner answers on its side of the exchange. */
    send_meta(s.exchange, 3, 200);
    ck_assert_int_eq(orbit_exchange_finish(s.exchange, 0), 0);
    expect_event(a, ORBIT_EXCHANGE_START, 1, 3, 200);
    /* The same lease carried again is not accepted twice. */
    struct orbit_exchange *a2;
    ck_assert_int_eq(orbit_exchange_open_session(x.ex, &lease, NULL, 0, 1000, &a2), 0);
    struct orbit_session s2;
    ck_assert_int_eq(orbit_exchange_wait_session(x.ex, pool, 1000, &s2), -ORBIT_ENOTRESERVED);
    ck_assert_ptr_null(s2.exchange);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_next(a2, &ev, 1000), -ORBIT_ERESET);
    orbit_exchange_close(a2);
    orbit_session_end(&s);
    orbit_session_end(&s);   /* idempotent */
    ck_assert_int_eq(orbit_pool_candidates(pool, key, &cand, 1), 1);
    ck_assert_uint_eq(cand.active, 0);
    /* A START without a lease frame is refused before anything is accepted. */
    struct orbit_exchange *c;
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_exchange_create(x.ex, &c, &t), 0);
    ck_assert_int_eq(orbit_exchange_send_start(c, "short", 5, 0), 0);
    ck_assert_int_eq(orbit_exchange_accept_session(x.ex, pool, &t, 1000, &s2), -ORBIT_EMALFORMED);
    orbit_exchange_close(c);
    ck_assert_int_eq(orbit_exchange_wait_session(x.ex, pool, 0, &s2), -ORBIT_ETIMEDOUT);
    orbit_exchange_close(a);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);
    orbit_pool_close(pool);
    fx_close(&x);
}
END_TEST

/* Side A that finished and closed before B opened ends the exchange: the offer is skipped,
 * the ticket is stale and the body's chunks return to the lane. A sender that waits for B's
 * close instead sees its receive direction end with -ORBIT_ERESET. */
START_TEST(closing_side_a_before_b_opens_ends_the_exchange)
{
    struct fx x = fx_open();
    struct orbit_exchange *a, *b;
    struct orbit_ticket t, offered;
    ck_assert_int_eq(orbit_exchange_create(x.ex, &a, &t), 0);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    ck_assert_int_eq(orbit_exchange_send_data(a, "body", 4, 0), 0);
    ck_assert_int_eq(orbit_exchange_finish(a, 0), 0);
    ck_assert_int_eq(orbit_exchanges_offer(x.ex, &t, 0), 0);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS - 1);
    orbit_exchange_close(a);
    ck_assert_int_eq(orbit_exchanges_take_offer(x.ex, &offered), -ORBIT_EAGAIN);
    ck_assert_int_eq(orbit_exchange_open(x.ex, &t, &b), -ORBIT_ESTALE);
    ck_assert_uint_eq(lane_free(x.ar, 0), SLOTS);

    ck_assert_int_eq(orbit_exchange_create(x.ex, &a, &t), 0);
    ck_assert_int_eq(orbit_exchange_send_start(a, NULL, 0, 0), 0);
    ck_assert_int_eq(orbit_exchange_finish(a, 0), 0);
    ck_assert_int_eq(orbit_exchange_open(x.ex, &t, &b), 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_try_next(a, &ev), -ORBIT_EAGAIN);
    orbit_exchange_close(b);
    ck_assert_int_eq(orbit_exchange_next(a, &ev, 1000), -ORBIT_ERESET);
    orbit_exchange_close(a);
    fx_close(&x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exchange");
    TCase *t = tcase_create("arena");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, bad_specs_are_refused);
    tcase_add_test(t, closing_side_a_before_b_opens_ends_the_exchange);
    tcase_add_test(t, a_peer_with_other_geometry_is_refused);
    tcase_add_test(t, reserve_fill_commit_consume_release);
    tcase_add_test(t, argument_errors);
    tcase_add_test(t, consumption_is_exactly_once);
    tcase_add_test(t, racing_consumers_one_winner);
    tcase_add_test(t, credit_returns_by_release_and_by_cancel);
    tcase_add_test(t, a_run_is_contiguous);
    tcase_add_test(t, a_commit_that_shortens_frees_the_tail);
    tcase_add_test(t, a_corrupted_descriptor_is_refused);
    tcase_add_test(t, reset_all_makes_everything_stale);
    tcase_add_test(t, node_dead_returns_a_producers_chunks_and_a_readers_holdings);
    tcase_add_test(t, a_run_left_reclaiming_is_finished_by_the_next_report);
    suite_add_tcase(s, t);
    t = tcase_create("exchange");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, a_round_trip);
    tcase_add_test(t, early_response_and_full_duplex);
    tcase_add_test(t, the_sender_refuses_lifecycle_violations);
    tcase_add_test(t, the_receiver_refuses_start_twice);
    tcase_add_test(t, the_receiver_refuses_data_before_start_and_after_fin);
    tcase_add_test(t, the_receiver_refuses_an_out_of_order_chunk_id);
    tcase_add_test(t, corrupt_frames_and_descriptors_are_refused);
    tcase_add_test(t, a_full_control_ring_keeps_the_reservation);
    tcase_add_test(t, closing_returns_every_chunk);
    tcase_add_test(t, directional_arenas_keep_their_own_credit);
    tcase_add_test(t, readiness_for_credit_and_events);
    tcase_add_test(t, io_uring_waits_for_credit_and_events);
    tcase_add_test(t, fixed_buffers_cover_the_lanes);
    tcase_add_test(t, inspection_lists_lanes_and_exchanges);
    tcase_add_test(t, a_session_lease_is_accepted_once_before_metadata);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
