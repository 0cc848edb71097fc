/* SPDX-License-Identifier: MIT */
/* Streams between real processes: bulk transfer, kill -9, offers, readiness, io_uring, races. */
#include <poll.h>
#include <signal.h>
#include <orbit/uring.h>
#include "stream_fleet.h"
#include "stream/stream_layout.h"

/* ---- a gibibyte in random sizes -------------------------------------------- */

#define GIB   (1ull << 30)
#define BLOCK (1u << 20)

static void gen_block(uint64_t k, uint64_t *w)
{
    for (size_t i = 0; i < BLOCK / 8; i++)
        w[i] = tp_mix(k * (BLOCK / 8) + i);
}

static uint64_t fold(uint64_t h, const uint64_t *w)
{
    for (size_t i = 0; i < BLOCK / 8; i++)
        h = (h ^ w[i]) * 0x100000001b3ull;
    return h;
}

/* 1 byte .. 1 MiB, spread over every power of two. */
static size_t random_size(uint64_t *rng)
{
    *rng = tp_mix(*rng);
    return 1 + (size_t)((*rng >> 8) % (1ull << (*rng % 21)));
}

struct gib { const char *name; struct tp_pipe ticket, result; };

static int gib_writer(void *p)
{
    struct gib *x = p;
    struct sf_taker tk = sf_take(x->name, 0x1001, x->ticket.rd);
    uint64_t *blk = aligned_alloc(64, BLOCK), h = 0xcbf29ce484222325ull, rng = 0x1234567;
    for (uint64_t k = 0; k < GIB / BLOCK; k++) {
        gen_block(k, blk);
        h = fold(h, blk);
        for (size_t off = 0; off < BLOCK;) {
            size_t n = random_size(&rng);
            n = n < BLOCK - off ? n : BLOCK - off;
            int rc = orbit_endpoint_write_all(tk.b, (unsigned char *)blk + off, n, 60000);
            TP_CHECK(rc == 0, "write_all: %s", orbit_strerror(rc));
            off += n;
        }
    }
    TP_CHECK(orbit_endpoint_finish(tk.b) == 0, "finish");
    tp_send_u64(x->result.wr, h);
    sf_taker_close(&tk);
    free(blk);
    return 0;
}

START_TEST(a_gibibyte_of_random_sizes_arrives_byte_exact)
{
    const char *name = tu_fleet_name("sgib");
    struct sf_creator cr = sf_create(name, 0x1000);
    struct gib x = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(gib_writer, &x);
    tp_send_ticket(x.ticket.wr, &cr.t);

    unsigned char *staging = aligned_alloc(64, BLOCK);
    uint64_t *expect = aligned_alloc(64, BLOCK), h = 0xcbf29ce484222325ull, rng = 0x7654321, got = 0, k = 0;
    size_t off = 0;
    for (;;) {
        size_t n = random_size(&rng);
        n = n < BLOCK - off ? n : BLOCK - off;
        ssize_t r = orbit_endpoint_read(cr.a, staging + off, n, 60000);
        ck_assert_msg(r >= 0, "read: %s", orbit_strerror((int)r));
        if (r == 0)
            break;
        off += (size_t)r;
        got += (uint64_t)r;
        if (off == BLOCK) {
            gen_block(k, expect);
            ck_assert_msg(memcmp(staging, expect, BLOCK) == 0, "block %llu differs", (unsigned long long)k);
            h = fold(h, (const uint64_t *)(void *)staging);
            k++;
            off = 0;
        }
    }
    ck_assert_uint_eq(got, GIB);
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(tp_recv_u64(x.result.rd), h);   /* the writer's checksum of what it sent */
    ck_assert_int_eq(tu_wait_child(pid, 120000), 0);
    struct orbit_stream_stats st;
    orbit_streams_stats(cr.s, &st);
    ck_assert_uint_eq(st.bytes_read, GIB);
    free(staging);
    free(expect);
    sf_creator_close(&cr, name);
}
END_TEST

/* ---- kill -9 mid-transfer ----------------------------------------------------- */

#define KILL_SPEC { .kind = 231, .lane_capacity = 1, .buffer_bytes = 65536 }
static unsigned char pattern(uint64_t pos) { return (unsigned char)(pos * 131 + (pos >> 11)); }

struct killx { const char *name; struct tp_pipe ticket, progress, verdict, ticket2; };

/* Writes the pattern until killed (limit 0) or for `limit` bytes, then FIN. */
static int pattern_writer(struct orbit_endpoint *b, uint64_t limit)
{
    unsigned char buf[65536];
    uint64_t pos = 0, rng = 99;
    while (limit == 0 || pos < limit) {
        size_t n = 1 + (size_t)((rng = tp_mix(rng)) % sizeof buf);
        if (limit && n > limit - pos)
            n = (size_t)(limit - pos);
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(pos + i);
        int rc = orbit_endpoint_write_all(b, buf, n, 60000);
        TP_CHECK(rc == 0, "pattern write: %s", orbit_strerror(rc));
        pos += n;
    }
    return orbit_endpoint_finish(b);
}

static int victim_writer(void *p)
{
    struct killx *x = p;
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_fleet *f = sf_join(x->name, 2, 0x3001);
    struct orbit_streams *s = sf_streams(f, &spec);
    struct orbit_ticket t = tp_recv_ticket(x->ticket.rd);
    struct orbit_endpoint *b;
    TP_CHECK(orbit_streams_open_ticket(s, &t, &b) == 0, "victim open");
    pattern_writer(b, 0);
    return 3;   /* never: it is killed */
}

static int second_writer(void *p)
{
    struct killx *x = p;
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_fleet *f = sf_join(x->name, 2, 0x3002);   /* the freed node, a new life */
    struct orbit_streams *s = sf_streams(f, &spec);
    struct orbit_ticket t = tp_recv_ticket(x->ticket2.rd);
    struct orbit_endpoint *b;
    TP_CHECK(orbit_streams_open_ticket(s, &t, &b) == 0, "second open");
    TP_CHECK(pattern_writer(b, 1 << 20) == 0, "second finish");
    orbit_endpoint_close(b);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}

/* Reads and checks the pattern; returns the read call's terminal code, *pos the bytes. */
static ssize_t pattern_reader(struct orbit_endpoint *a, uint64_t *pos, int progress_fd)
{
    unsigned char buf[65536];
    bool told = false;
    for (;;) {
        ssize_t r = orbit_endpoint_read(a, buf, sizeof buf, 60000);
        if (r <= 0)
            return r;
        for (ssize_t i = 0; i < r; i++)
            TP_CHECK(buf[i] == pattern(*pos + (uint64_t)i), "byte %llu wrong", (unsigned long long)(*pos + (uint64_t)i));
        *pos += (uint64_t)r;
        if (!told && *pos >= (1u << 20) && progress_fd >= 0) {
            tp_send_u64(progress_fd, *pos);
            told = true;
        }
    }
}

static int surviving_reader(void *p)
{
    struct killx *x = p;
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_fleet *f = sf_join(x->name, 1, 0x2001);
    struct orbit_streams *s = sf_streams(f, &spec);
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    TP_CHECK(orbit_streams_create(s, &a, &t) == 0, "create");
    tp_send_ticket(x->ticket.wr, &t);
    uint64_t pos = 0;
    ssize_t end = pattern_reader(a, &pos, x->progress.wr);
    tp_send_u64(x->verdict.wr, (uint64_t)-end);
    orbit_endpoint_close(a);

    /* The one slot of the lane, reused under the next generation. */
    struct orbit_ticket t2;
    TP_CHECK(orbit_streams_create(s, &a, &t2) == 0, "create again");
    TP_CHECK(orbit_id_slot(t2.id) == 0 && orbit_id_generation(t2.id) == orbit_id_generation(t.id) + 1,
             "slot %u generation %u", orbit_id_slot(t2.id), orbit_id_generation(t2.id));
    tp_send_ticket(x->ticket2.wr, &t2);
    pos = 0;
    end = pattern_reader(a, &pos, -1);
    TP_CHECK(end == 0 && pos == (1u << 20), "second transfer: %zd after %llu", end, (unsigned long long)pos);
    orbit_endpoint_close(a);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "re");
    if (!fp)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] ? p[2] : '?';
}

START_TEST(a_killed_writer_resets_the_parked_reader_and_the_slot_is_reused)
{
    const char *name = tu_fleet_name("skill");
    struct orbit_fleet *f = tu_join(name, SF_CAPACITY, 0, 0x1001, tu_backing());
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), 0);
    struct killx x = { name, tp_pipe(), tp_pipe(), tp_pipe(), tp_pipe() };
    pid_t reader = tp_spawn(surviving_reader, &x);
    pid_t victim = tp_spawn(victim_writer, &x);
    ck_assert_uint_ge(tp_recv_u64(x.progress.rd), 1u << 20);   /* mid-transfer */
    tp_kill(victim);

    /* The reader drains what the victim left and parks on the empty ring. */
    struct stream_dir *d = &s->slots[1].dir[1];   /* lane 1, slot 0; B -> A */
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&d->head) == atomic_load(&d->tail) && atomic_load(&d->wait.parked) &&
            proc_state(reader) == 'S')
            break;
        tu_sleep_ms(1);
    }
    ck_assert_uint_eq(atomic_load(&d->head), atomic_load(&d->tail));
    ck_assert_uint_eq(atomic_load(&d->wait.parked), 1);
    ck_assert_int_eq(proc_state(reader), 'S');
    struct orbit_owner own[4];
    ck_assert_int_eq(orbit_streams_owners(s, own, 4), 2);

    /* The supervisor's report, through every table of the fleet. */
    ck_assert_int_eq(orbit_fleet_node_dead(f, 2, 0x3001), 0);
    ssize_t n = orbit_streams_owners(s, own, 4);
    for (ssize_t i = 0; i < n; i++)
        ck_assert_msg(own[i].node != 2, "the dead writer still holds a side");
    ck_assert_uint_eq(tp_recv_u64(x.verdict.rd), ORBIT_ERESET);

    pid_t second = tp_spawn(second_writer, &x);
    ck_assert_int_eq(tu_wait_child(second, 60000), 0);
    ck_assert_int_eq(tu_wait_child(reader, 60000), 0);
    ck_assert_int_eq(orbit_streams_owners(s, own, 4), 0);
    orbit_streams_close(s);
    tp_fleet_end(f, name);
}
END_TEST

/* ---- offers and readiness across processes ------------------------------------ */

struct offerx { const char *name; struct tp_pipe to_child, to_parent; };

static void await_readable(int fd)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    TP_CHECK(poll(&pfd, 1, 20000) == 1, "readiness never fired");
    TP_CHECK(orbit_readiness_drain(fd) == 0, "drain");
}

static int offer_taker(void *p)
{
    struct offerx *x = p;
    struct orbit_fleet *f = sf_join(x->name, 1, 0x4001);
    struct orbit_streams *s = sf_streams(f, NULL);
    int fd = orbit_streams_readiness(s);
    TP_CHECK(fd >= 0, "readiness: %s", orbit_strerror(fd));
    struct orbit_ticket t;
    TP_CHECK(orbit_streams_take_offer(s, &t) == -ORBIT_EAGAIN, "offer before any");
    tp_send_u64(x->to_parent.wr, 1);   /* ready for the offer */
    int rc;
    while ((rc = orbit_streams_take_offer(s, &t)) == -ORBIT_EAGAIN)
        await_readable(fd);
    TP_CHECK(rc == 0, "take_offer: %s", orbit_strerror(rc));
    struct orbit_endpoint *b;
    TP_CHECK(orbit_streams_open_ticket(s, &t, &b) == 0, "open offered");

    char buf[16];
    TP_CHECK(orbit_endpoint_try_read(b, buf, sizeof buf) == -ORBIT_EAGAIN, "data too early");
    tp_send_u64(x->to_parent.wr, 2);   /* registered: now write */
    size_t got = 0;
    while (got < 5) {
        ssize_t r = orbit_endpoint_try_read(b, buf + got, sizeof buf - got);
        if (r == -ORBIT_EAGAIN) {
            await_readable(fd);
            continue;
        }
        TP_CHECK(r > 0, "try_read: %zd", r);
        got += (size_t)r;
    }
    TP_CHECK(memcmp(buf, "hello", 5) == 0, "hello");
    TP_CHECK(orbit_endpoint_write_all(b, "world", 5, 10000) == 0 && orbit_endpoint_finish(b) == 0, "reply");

    /* The second offer through the blocking wait. */
    TP_CHECK(orbit_streams_wait_offer(s, 20000, &t) == 0, "wait_offer");
    struct orbit_endpoint *b2;
    TP_CHECK(orbit_streams_open_ticket(s, &t, &b2) == 0, "open second");
    TP_CHECK(orbit_endpoint_read_exact(b2, buf, 4, 20000) == 0 && memcmp(buf, "ping", 4) == 0, "ping");
    orbit_endpoint_close(b);
    orbit_endpoint_close(b2);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}

START_TEST(offers_and_readiness_work_across_processes)
{
    const char *name = tu_fleet_name("soffer");
    struct orbit_fleet *f = tu_join(name, SF_CAPACITY, 0, 0x1002, tu_backing());
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    struct orbit_endpoint *a, *a2;
    struct orbit_ticket t, t2;
    ck_assert_int_eq(orbit_streams_create(s, &a, &t), 0);
    ck_assert_int_eq(orbit_streams_create(s, &a2, &t2), 0);
    struct offerx x = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(offer_taker, &x);
    ck_assert_uint_eq(tp_recv_u64(x.to_parent.rd), 1);
    ck_assert_int_eq(orbit_streams_offer(s, &t, 1), 0);
    ck_assert_uint_eq(tp_recv_u64(x.to_parent.rd), 2);
    ck_assert_int_eq(orbit_endpoint_write_all(a, "hello", 5, 10000), 0);
    char buf[16];
    ck_assert_int_eq(orbit_endpoint_read_exact(a, buf, 5, 20000), 0);
    ck_assert_mem_eq(buf, "world", 5);
    ck_assert_int_eq(orbit_endpoint_read(a, buf, sizeof buf, 20000), 0);
    ck_assert_int_eq(orbit_streams_offer(s, &t2, 1), 0);
    ck_assert_int_eq(orbit_endpoint_write_all(a2, "ping", 4, 10000), 0);
    ck_assert_int_eq(tu_wait_child(pid, 60000), 0);
    /* Two offers and the watched write: each rang the child's doorbell once. */
    struct orbit_stream_stats st;
    orbit_streams_stats(s, &st);
    ck_assert_uint_eq(st.doorbells, 3);
    orbit_endpoint_close(a);
    orbit_endpoint_close(a2);
    orbit_streams_close(s);
    tp_fleet_end(f, name);
}
END_TEST

/* ---- an io_uring reader woken by another process ------------------------------ */

static int uring_reader(void *p)
{
    struct offerx *x = p;
    struct sf_taker tk = sf_take(x->name, 0x5001, x->to_child.rd);
    struct io_uring ring;
    TP_CHECK(io_uring_queue_init(4, &ring, 0) == 0, "ring");
    for (uint64_t round = 0; round < 2; round++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        sqe->user_data = 100 + round;
        int rc = orbit_endpoint_prep_wait_readable(tk.b, sqe);
        TP_CHECK(rc == 0, "prep: %d", rc);
        TP_CHECK(io_uring_submit(&ring) == 1, "submit");
        tp_send_u64(x->to_parent.wr, round);   /* the FUTEX_WAIT is in the kernel */
        struct io_uring_cqe *cqe;
        TP_CHECK(io_uring_wait_cqe(&ring, &cqe) == 0, "cqe");
        TP_CHECK(cqe->user_data == 100 + round && cqe->res == 0, "woken: data %llu res %d",
                 (unsigned long long)cqe->user_data, cqe->res);
        io_uring_cqe_seen(&ring, cqe);
        char buf[8];
        TP_CHECK(orbit_endpoint_try_read(tk.b, buf, sizeof buf) == 6 && memcmp(buf, "round", 5) == 0 &&
                 buf[5] == (char)('0' + round), "payload");
    }
    struct orbit_stream_stats st;
    orbit_streams_stats(tk.s, &st);
    TP_CHECK(st.parks == 2, "parks %llu", (unsigned long long)st.parks);
    io_uring_queue_exit(&ring);
    sf_taker_close(&tk);
    return 0;
}

START_TEST(an_io_uring_reader_is_woken_by_another_process)
{
    const char *name = tu_fleet_name("suring");
    struct sf_creator cr = sf_create(name, 0x1003);
    if (!orbit_uring_futex_supported()) {   /* io_uring disabled here: the prep says so */
        struct io_uring_sqe sqe;
        ck_assert_int_eq(orbit_endpoint_prep_wait_readable(cr.a, &sqe), -ORBIT_ENOTSUP);
        orbit_endpoint_close(cr.a);
        orbit_streams_close(cr.s);
        orbit_fleet_leave(cr.f);
        orbit_fleet_unlink(name);
        return;
    }
    struct offerx x = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(uring_reader, &x);
    tp_send_ticket(x.to_child.wr, &cr.t);

    ck_assert_uint_eq(tp_recv_u64(x.to_parent.rd), 0);
    ck_assert_int_eq(orbit_endpoint_write_all(cr.a, "round0", 6, 10000), 0);   /* futex(2) wake */
    ck_assert_uint_eq(tp_recv_u64(x.to_parent.rd), 1);
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(4, &ring, 0), 0);
    ck_assert_int_eq(orbit_uring_attach_wakes(&ring), 0);
    ck_assert_int_eq(orbit_endpoint_write_all(cr.a, "round1", 6, 10000), 0);   /* FUTEX_WAKE SQE queued */
    orbit_uring_detach_wakes();
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    ck_assert_int_eq(tu_wait_child(pid, 60000), 0);
    struct orbit_stream_stats st;
    orbit_streams_stats(cr.s, &st);
    ck_assert_uint_eq(st.wakes, 2);
    io_uring_queue_exit(&ring);
    sf_creator_close(&cr, name);
}
END_TEST

/* ---- a waker killed mid-wake --------------------------------------------------- */

/*
 * A waker that took a sleeper's parked flag and died before its FUTEX_WAKE
 * went out would leave that sleeper deaf: later signals skip the wake, since
 * parked reads 0. Here the waker's wakes sit in an io_uring batch it never
 * submits, so the loss is certain; the death report must wake the sleepers.
 * Node 1 waits in orbit_streams_wait_offer, node 3 in poll(2) on its
 * readiness eventfd (the doorbell); node 2 offers to both and is killed.
 */
struct midwake { const char *name; int node; struct tp_pipe to_parent; };

static int midwake_waiter(void *p)
{
    struct midwake *x = p;
    struct orbit_fleet *f = sf_join(x->name, x->node, 0x7000 + (uint64_t)x->node);
    struct orbit_streams *s = sf_streams(f, NULL);
    int fd = x->node == 3 ? orbit_streams_readiness(s) : -1;
    TP_CHECK(x->node != 3 || fd >= 0, "readiness: %s", orbit_strerror(fd));
    tp_send_u64(x->to_parent.wr, 1);   /* about to park */
    for (;;) {
        struct orbit_ticket t;
        int rc;
        if (fd < 0) {
            rc = orbit_streams_wait_offer(s, 10000, &t);
        } else {
            struct pollfd pfd = { fd, POLLIN, 0 };
            TP_CHECK(poll(&pfd, 1, 10000) == 1, "readiness never fired");
            orbit_readiness_drain(fd);
            rc = orbit_streams_take_offer(s, &t);
            if (rc == -ORBIT_EAGAIN)
                continue;   /* woken by the report: the dead one's offer is gone */
        }
        TP_CHECK(rc == 0, "wait_offer: %s", orbit_strerror(rc));
        tp_send_u64(x->to_parent.wr, t.id);
        if (orbit_id_node(t.id) == 0)
            break;          /* the live offerer's: done */
    }
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}

static int midwake_killed_waker(void *p)
{
    struct midwake *x = p;
    struct orbit_fleet *f = sf_join(x->name, 2, 0x7002);
    struct orbit_streams *s = sf_streams(f, NULL);
    struct io_uring ring;
    TP_CHECK(io_uring_queue_init(8, &ring, 0) == 0, "ring");
    TP_CHECK(orbit_uring_attach_wakes(&ring) == 0, "attach wakes");
    struct orbit_endpoint *a1, *a3;
    struct orbit_ticket t1, t3;
    TP_CHECK(orbit_streams_create(s, &a1, &t1) == 0 && orbit_streams_create(s, &a3, &t3) == 0, "create");
    TP_CHECK(orbit_streams_offer(s, &t1, 1) == 0 && orbit_streams_offer(s, &t3, 3) == 0, "offer");
    struct orbit_stream_stats st;
    orbit_streams_stats(s, &st);
    tp_send_u64(x->to_parent.wr, st.wakes);   /* wakes it took on itself, never submitted */
    pause();                                  /* killed here */
    return 0;
}

/* Until a wait_offer sleeper has counted itself (it is about to sleep, or asleep). */
static bool await_sleeping(_Atomic uint32_t *sleepers)
{
    for (int i = 0; i < 2000 && !atomic_load(sleepers); i++)
        tu_sleep_ms(5);
    return atomic_load(sleepers) != 0;
}

/* Until a waiter has armed that word (it is about to sleep, or asleep). */
static bool await_parked(struct orb_waitword *w)
{
    for (int i = 0; i < 2000 && !atomic_load(&w->parked); i++)
        tu_sleep_ms(5);
    return atomic_load(&w->parked) != 0;
}

static uint64_t recv_within(int fd, int timeout_ms)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    return poll(&pfd, 1, timeout_ms) == 1 ? tp_recv_u64(fd) : UINT64_MAX;
}

START_TEST(a_waker_killed_mid_wake_leaves_no_waiter_deaf)
{
    const char *name = tu_fleet_name("midwake");
    struct orbit_fleet *f = tu_join(name, SF_CAPACITY, 0, 0x7000, tu_backing());
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    if (!orbit_uring_futex_supported()) {   /* no wake batch to die with: nothing to show */
        tu_skip("a_waker_killed_mid_wake: no io_uring futex ops");
        orbit_streams_close(s);
        orbit_fleet_leave(f);
        orbit_fleet_unlink(name);
        return;
    }
    struct midwake w1 = { name, 1, tp_pipe() }, w3 = { name, 3, tp_pipe() }, k = { name, 2, tp_pipe() };
    pid_t p1 = tp_spawn(midwake_waiter, &w1), p3 = tp_spawn(midwake_waiter, &w3);
    ck_assert_uint_eq(tp_recv_u64(w1.to_parent.rd), 1);
    ck_assert_uint_eq(tp_recv_u64(w3.to_parent.rd), 1);
    ck_assert(await_sleeping(&stream_offers_of(s, 1)->sleepers));   /* wait_offer: counted */
    ck_assert(await_parked(&orb_fleet_record(f, 3)->doorbell));
    tu_sleep_ms(50);   /* armed; now also asleep in the kernel */
    pid_t pk = tp_spawn(midwake_killed_waker, &k);
    /* It woke node 1's sleeper (at once) and took node 3's doorbell flag into its batch. */
    ck_assert_uint_eq(tp_recv_u64(k.to_parent.rd), 2);
    tp_kill_reported(f, pk, 2, 0x7002);
    /* A live offer after the report reaches both. */
    struct orbit_endpoint *a1, *a3;
    struct orbit_ticket t1, t3;
    ck_assert_int_eq(orbit_streams_create(s, &a1, &t1), 0);
    ck_assert_int_eq(orbit_streams_create(s, &a3, &t3), 0);
    ck_assert_int_eq(orbit_streams_offer(s, &t1, 1), 0);
    ck_assert_int_eq(orbit_streams_offer(s, &t3, 3), 0);
    uint64_t got1, got3;
    while ((got1 = recv_within(w1.to_parent.rd, 3000)) != UINT64_MAX && got1 != t1.id)
        ck_assert_uint_eq(orbit_id_node(got1), 2);   /* only the dead one's may come first */
    while ((got3 = recv_within(w3.to_parent.rd, 3000)) != UINT64_MAX && got3 != t3.id)
        ck_assert_uint_eq(orbit_id_node(got3), 2);
    ck_assert_msg(got1 == t1.id, "the futex waiter stayed deaf after the report");
    ck_assert_msg(got3 == t3.id, "the readiness waiter stayed deaf after the report");
    ck_assert_int_eq(tu_wait_child(p1, 10000), 0);
    ck_assert_int_eq(tu_wait_child(p3, 10000), 0);
    orbit_endpoint_close(a1);
    orbit_endpoint_close(a3);
    orbit_streams_close(s);
    tp_fleet_end(f, name);
}
END_TEST

/* ---- a contested open across processes ----------------------------------------- */

#define RACE_SPEC { .kind = 232, .lane_capacity = 4, .buffer_bytes = 4096 }
#define RACERS 5
struct racex { const char *name; int node; struct tp_pipe ticket, ready, gate; };

static int racer(void *p)
{
    struct racex *x = p;
    struct orbit_stream_spec spec = RACE_SPEC;
    struct orbit_fleet *f = sf_join(x->name, x->node, 0x6000 + (uint64_t)x->node);
    struct orbit_streams *s = sf_streams(f, &spec);
    struct orbit_ticket t = tp_recv_ticket(x->ticket.rd);
    tp_send_u64(x->ready.wr, (uint64_t)x->node);
    char go;
    TP_CHECK(read(x->gate.rd, &go, 1) == 1, "gate");
    struct orbit_endpoint *b;
    int rc = orbit_streams_open_ticket(s, &t, &b);
    if (rc == 0)
        orbit_endpoint_close(b);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return rc == 0 ? 0 : rc == -ORBIT_ECLAIMED ? 1 : 2;
}

START_TEST(a_contested_open_across_processes_goes_to_exactly_one)
{
    const char *name = tu_fleet_name("srace");
    struct orbit_fleet *f = tu_join(name, SF_CAPACITY, 0, 0x1004, tu_backing());
    struct orbit_stream_spec spec = RACE_SPEC;
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), 0);
    for (int round = 0; round < 8; round++) {
        struct orbit_endpoint *a;
        struct orbit_ticket t;
        ck_assert_int_eq(orbit_streams_create(s, &a, &t), 0);
        struct racex x[RACERS];
        struct tp_pipe ready = tp_pipe(), gate = tp_pipe();
        pid_t pid[RACERS];
        for (int i = 0; i < RACERS; i++) {
            x[i] = (struct racex){ name, i + 1, tp_pipe(), ready, gate };
            pid[i] = tp_spawn(racer, &x[i]);
            tp_send_ticket(x[i].ticket.wr, &t);
        }
        for (int i = 0; i < RACERS; i++)
            ck_assert_uint_lt(tp_recv_u64(ready.rd), SF_CAPACITY);
        ck_assert_int_eq(write(gate.wr, "ggggg", RACERS), RACERS);
        int won = 0;
        for (int i = 0; i < RACERS; i++) {
            int code = tu_wait_child(pid[i], 30000);
            ck_assert_msg(code == 0 || code == 1, "racer exit %d", code);
            won += code == 0;
            close(x[i].ticket.rd);
            close(x[i].ticket.wr);
        }
        ck_assert_int_eq(won, 1);
        orbit_endpoint_close(a);
        ck_assert(!orbit_streams_is_live(s, t.id));   /* the winner released, then we did */
        close(ready.rd); close(ready.wr); close(gate.rd); close(gate.wr);
    }
    orbit_streams_close(s);
    tp_fleet_end(f, name);
}
END_TEST

/* ---- a creator killed between taking a slot and publishing it ------------------ */

static int installing_creator(void *p)
{
    const char *name = p;
    setenv("ORBIT_TEST_STREAM_PARK", "installing", 1);
    struct orbit_fleet *f = sf_join(name, 1, 0x4001);
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_streams *s = sf_streams(f, &spec);
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    orbit_streams_create(s, &a, &t);   /* stops itself after taking the slot */
    return 3;                         /* only reached if resumed */
}

START_TEST(a_creator_killed_mid_install_gives_its_slot_back)
{
    const char *name = tu_fleet_name("sinstall");
    struct orbit_fleet *f = tu_join(name, SF_CAPACITY, 0, 0x1001, tu_backing());
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), 0);
    pid_t kid = tp_spawn(installing_creator, (void *)name);
    tp_await_stopped(kid);
    size_t first = 1 * (size_t)s->lane_capacity;   /* node 1's lane, its lowest slot */
    ck_assert_uint_eq(TENANCY_STATE(atomic_load(&s->slots[first].tenancy)), SLOT_INSTALLING);
    tp_kill_reported(f, kid, 1, 0x4001);
    ck_assert_uint_eq(TENANCY_STATE(atomic_load(&s->slots[first].tenancy)), SLOT_EMPTY);
    orbit_streams_close(s);
    tp_fleet_end(f, name);
}
END_TEST

/* ---- an opener killed between taking side B and stamping itself on it ------------ */

struct opening { const char *name; struct orbit_ticket t; };

static int opening_opener(void *p)
{
    struct opening *o = p;
    setenv("ORBIT_TEST_STREAM_PARK", "opening", 1);
    struct orbit_fleet *f = sf_join(o->name, 2, 0x4002);
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_streams *s = sf_streams(f, &spec);
    struct orbit_endpoint *b;
    orbit_streams_open_ticket(s, &o->t, &b);   /* stops itself half-way through the open */
    return 3;                                  /* only reached if resumed */
}

START_TEST(an_opener_killed_mid_open_leaves_the_side_to_its_death_report)
{
    const char *name = tu_fleet_name("sopening");
    struct orbit_fleet *f = tu_join(name, SF_CAPACITY, 0, 0x1001, tu_backing());
    struct orbit_stream_spec spec = KILL_SPEC;
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), 0);
    struct orbit_endpoint *a, *b;
    struct opening o = { name, { 0 } };
    ck_assert_int_eq(orbit_streams_create(s, &a, &o.t), 0);
    pid_t kid = tp_spawn(opening_opener, &o);
    tp_await_stopped(kid);
    tp_kill_reported(f, kid, 2, 0x4002);
    /* The side never reached its opener: the ticket opens for the next one. */
    ck_assert_int_eq(orbit_streams_open_ticket(s, &o.t, &b), 0);
    orbit_endpoint_close(b);
    orbit_endpoint_close(a);
    ck_assert(!orbit_streams_is_live(s, o.t.id));   /* both let go: the slot is free */
    ck_assert_int_eq(orbit_streams_owners(s, NULL, 0), 0);
    orbit_streams_close(s);
    tp_fleet_end(f, name);
}
END_TEST

static Suite *fleet_suite(void)
{
    Suite *s = suite_create("stream-fleet");
    TCase *tc = tcase_create("processes");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_gibibyte_of_random_sizes_arrives_byte_exact);
    tcase_add_test(tc, a_killed_writer_resets_the_parked_reader_and_the_slot_is_reused);
    tcase_add_test(tc, offers_and_readiness_work_across_processes);
    tcase_add_test(tc, an_io_uring_reader_is_woken_by_another_process);
    tcase_add_test(tc, a_contested_open_across_processes_goes_to_exactly_one);
    tcase_add_test(tc, a_creator_killed_mid_install_gives_its_slot_back);
    tcase_add_test(tc, an_opener_killed_mid_open_leaves_the_side_to_its_death_report);
    suite_add_tcase(s, tc);
    TCase *futex_ops = tu_optional_tcase("uring_futex_ops");
    tcase_set_timeout(futex_ops, 300);
    tcase_add_test(futex_ops, a_waker_killed_mid_wake_leaves_no_waiter_deaf);
    suite_add_tcase(s, futex_ops);
    return s;
}

int main(void)
{
    return tu_run(fleet_suite());
}
