/* SPDX-License-Identifier: MIT */
/*
 * Exchanges between real processes: a gibibyte as 64 KiB chunks with a checksum, a
 * PayloadFull wait woken by a release in another process, kill -9 of a producer and of
 * a reader followed by the death report, a session lease accepted by its owner in
 * another process, and 256 MiB relayed TCP -> arena -> TCP with registered buffers.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <orbit/uring.h>
#include "xfleet.h"
#include "exchange/exch_layout.h"

#define CTL_KIND   230
#define ARENA_KIND 231

static struct orbit_exchange_spec spec_of(uint32_t slot, uint32_t slots)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control = (struct orbit_stream_spec){ .kind = CTL_KIND, .lane_capacity = 8, .buffer_bytes = 16384 };
    s.a_to_b = (struct orbit_arena_spec){ .kind = ARENA_KIND, .slot_bytes = slot, .slots_per_lane = slots };
    return s;
}

/* ---- a gibibyte as 64 KiB chunks ---------------------------------------------------- */

#define GIB    (1ull << 30)
#define CHUNK  65536u
#define WORDS  (CHUNK / 8)

struct gib { const char *name; struct tp_pipe ticket, result; };

/* Side B receives the A->B flow in place and folds every word; reports chunks, bytes, sum. */
static int gib_reader(void *p)
{
    struct gib *g = p;
    struct orbit_exchange_spec spec = spec_of(4096, 1024);
    struct xf_end e = xf_take(g->name, 0x1001, &spec, g->ticket.rd);
    uint64_t h = 0xcbf29ce484222325ull, bytes = 0, chunks = 0;
    struct orbit_exchange_event ev;
    XF_OK(orbit_exchange_next(e.x, &ev, 60000));
    TP_CHECK(ev.type == ORBIT_EXCHANGE_START, "first event %d", ev.type);
    for (;;) {
        XF_OK(orbit_exchange_next(e.x, &ev, 60000));
        if (ev.type == ORBIT_EXCHANGE_FIN)
            break;
        TP_CHECK(ev.type == ORBIT_EXCHANGE_DATA && ev.chunk.len == CHUNK, "event %d len %zu", ev.type, ev.chunk.len);
        TP_CHECK(ev.chunk_id == chunks + 1, "chunk id %llu", (unsigned long long)ev.chunk_id);
        h = xf_fold(h, ev.chunk.data, WORDS);
        bytes += ev.chunk.len;
        chunks++;
        orbit_chunk_release(&ev.chunk);
    }
    tp_send_u64(g->result.wr, chunks);
    tp_send_u64(g->result.wr, bytes);
    tp_send_u64(g->result.wr, h);
    xf_end_close(&e);
    return 0;
}

START_TEST(a_gibibyte_as_64k_chunks_arrives_with_its_checksum)
{
    const char *name = tu_fleet_name("xgib");
    struct orbit_exchange_spec spec = spec_of(4096, 1024);
    struct orbit_ticket t;
    struct xf_end e = xf_create(name, 0x1000, &spec, &t);
    struct gib g = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(gib_reader, &g);
    tp_send_ticket(g.ticket.wr, &t);
    ck_assert_int_eq(orbit_exchange_send_start(e.x, NULL, 0, 60000), 0);
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t k = 0; k < GIB / CHUNK; k++) {
        struct orbit_reservation r;
        ck_assert_int_eq(orbit_exchange_reserve(e.x, CHUNK, 60000, &r), 0);
        xf_gen(k, r.data, WORDS);   /* produced in place: no copy on either side */
        h = xf_fold(h, r.data, WORDS);
        int rc = orbit_exchange_data(e.x, &r, CHUNK, 60000);
        ck_assert_msg(rc == 0, "data %llu: %s", (unsigned long long)k, orbit_strerror(rc));
    }
    ck_assert_int_eq(orbit_exchange_finish(e.x, 60000), 0);
    ck_assert_uint_eq(tp_recv_u64(g.result.rd), GIB / CHUNK);
    ck_assert_uint_eq(tp_recv_u64(g.result.rd), GIB);
    ck_assert_uint_eq(tp_recv_u64(g.result.rd), h);
    ck_assert_int_eq(tu_wait_child(pid, 120000), 0);
    struct orbit_arena_stats st;
    orbit_arena_stats(orbit_exchanges_arena(e.ex, ORBIT_FLOW_A_TO_B), &st);
    ck_assert_uint_eq(st.committed, GIB / CHUNK);
    ck_assert_uint_eq(st.bytes_committed, GIB);
    ck_assert_uint_eq(xf_lane_free(orbit_exchanges_arena(e.ex, ORBIT_FLOW_A_TO_B), 0), 1024);
    xf_end_close(&e);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- PayloadFull wait woken by a release in another process --------------------------- */

#define SMALL_SLOTS 8u

struct full { const char *name; struct tp_pipe ticket, go, result; };

static int full_reader(void *p)
{
    struct full *x = p;
    struct orbit_exchange_spec spec = spec_of(4096, SMALL_SLOTS);
    struct xf_end e = xf_take(x->name, 0x2001, &spec, x->ticket.rd);
    /* Wait until the producer sleeps on its lane's credit word, then release one chunk. */
    struct orbit_arena *ar = orbit_exchanges_arena(e.ex, ORBIT_FLOW_A_TO_B);
    TP_CHECK(tp_recv_u64(x->go.rd) == 1, "go");
    for (int i = 0; atomic_load(&ar->lanes[0].credit.parked) == 0; i++) {
        TP_CHECK(i < 20000, "producer never parked");
        tu_sleep_ms(1);
    }
    struct orbit_exchange_event ev;
    uint64_t chunks = 0;
    XF_OK(orbit_exchange_next(e.x, &ev, 10000));   /* START */
    for (;;) {
        XF_OK(orbit_exchange_next(e.x, &ev, 10000));
        if (ev.type == ORBIT_EXCHANGE_FIN)
            break;
        chunks++;
        orbit_chunk_release(&ev.chunk);
    }
    struct orbit_arena_stats st;
    orbit_arena_stats(ar, &st);
    tp_send_u64(x->result.wr, chunks);
    tp_send_u64(x->result.wr, st.wakes);
    xf_end_close(&e);
    return 0;
}

START_TEST(a_payload_full_wait_is_woken_by_a_release_in_another_process)
{
    const char *name = tu_fleet_name("xfull");
    struct orbit_exchange_spec spec = spec_of(4096, SMALL_SLOTS);
    struct orbit_ticket t;
    struct xf_end e = xf_create(name, 0x2000, &spec, &t);
    struct full x = { name, tp_pipe(), tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(full_reader, &x);
    tp_send_ticket(x.ticket.wr, &t);
    ck_assert_int_eq(orbit_exchange_send_start(e.x, NULL, 0, 0), 0);
    unsigned char buf[8192] = { 0 };
    unsigned sent = 0;
    while (orbit_exchange_try_send_data(e.x, buf, sizeof buf) == 0)
        sent++;
    ck_assert_uint_eq(sent, SMALL_SLOTS / 2);
    ck_assert_int_eq(orbit_exchange_try_send_data(e.x, buf, sizeof buf), -ORBIT_EPAYLOADFULL);
    tp_send_u64(x.go.wr, 1);
    /* Blocks until the reader in the other process releases a chunk. */
    ck_assert_int_eq(orbit_exchange_send_data(e.x, buf, sizeof buf, 20000), 0);
    ck_assert_int_eq(orbit_exchange_finish(e.x, 10000), 0);
    ck_assert_uint_eq(tp_recv_u64(x.result.rd), sent + 1);
    ck_assert_uint_eq(tp_recv_u64(x.result.rd), 1);   /* the release woke the parked producer, once */
    ck_assert_int_eq(tu_wait_child(pid, 30000), 0);
    xf_end_close(&e);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- kill -9 of a producer ---------------------------------------------------------- */

struct victim { const char *name; struct tp_pipe ticket, ready; };

/* Sends START and 6 chunks B->A, keeps one more reserved, then waits to be killed. */
static int victim_producer(void *p)
{
    struct victim *v = p;
    struct orbit_exchange_spec spec = spec_of(4096, 64);
    struct xf_end e = xf_take(v->name, 0x3001, &spec, v->ticket.rd);
    XF_OK(orbit_exchange_send_start(e.x, NULL, 0, 1000));
    uint64_t w[1024];
    for (uint64_t k = 0; k < 6; k++) {
        xf_gen(k, w, 1024);
        XF_OK(orbit_exchange_send_data(e.x, w, sizeof w, 1000));   /* 8 KiB: two slots */
    }
    struct orbit_reservation r;
    XF_OK(orbit_exchange_reserve(e.x, 3 * 4096, 1000, &r));
    tp_send_u64(v->ready.wr, 1);
    for (;;)
        pause();
    return 3;   /* never: it is killed */
}

START_TEST(a_killed_producer_gives_back_what_no_survivor_holds)
{
    const char *name = tu_fleet_name("xkillp");
    struct orbit_exchange_spec spec = spec_of(4096, 64);
    struct orbit_ticket t;
    struct xf_end e = xf_create(name, 0x3000, &spec, &t);
    struct orbit_arena *ar = orbit_exchanges_arena(e.ex, ORBIT_FLOW_B_TO_A);
    struct victim v = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(victim_producer, &v);
    tp_send_ticket(v.ticket.wr, &t);
    ck_assert_uint_eq(tp_recv_u64(v.ready.rd), 1);
    struct orbit_exchange_event ev, held;
    ck_assert_int_eq(orbit_exchange_next(e.x, &ev, 5000), 0);
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_START);
    ck_assert_int_eq(orbit_exchange_next(e.x, &held, 5000), 0);   /* chunk 1: held by us */
    ck_assert_int_eq(orbit_exchange_next(e.x, &ev, 5000), 0);     /* chunk 2: released */
    orbit_chunk_release(&ev.chunk);
    ck_assert_uint_eq(xf_lane_free(ar, 1), 64 - 5 * 2 - 3);
    tp_kill_reported(e.f, pid, 1, 0x3001);
    /* Its reservation and its four unread chunks are back; the chunk we hold is not. */
    ck_assert_uint_eq(xf_lane_free(ar, 1), 64 - 2);
    uint64_t w[1024];
    xf_gen(0, w, 1024);
    ck_assert_uint_eq(held.chunk.len, sizeof w);
    ck_assert_mem_eq(held.chunk.data, w, sizeof w);
    /* The rest of the flow ended with the producer. */
    ck_assert_int_eq(orbit_exchange_next(e.x, &ev, 1000), -ORBIT_ERESET);
    orbit_chunk_release(&held.chunk);
    ck_assert_uint_eq(xf_lane_free(ar, 1), 64);
    xf_end_close(&e);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- kill -9 of a reader ----------------------------------------------------------- */

/* Takes START and three chunks without releasing them, then waits to be killed. */
static int victim_reader(void *p)
{
    struct victim *v = p;
    struct orbit_exchange_spec spec = spec_of(4096, 64);
    struct xf_end e = xf_take(v->name, 0x4001, &spec, v->ticket.rd);
    struct orbit_exchange_event ev;
    for (int i = 0; i < 4; i++)
        XF_OK(orbit_exchange_next(e.x, &ev, 5000));
    tp_send_u64(v->ready.wr, 1);
    for (;;)
        pause();
    return 3;   /* never: it is killed */
}

START_TEST(a_killed_reader_gives_back_what_it_held)
{
    const char *name = tu_fleet_name("xkillr");
    struct orbit_exchange_spec spec = spec_of(4096, 64);
    struct orbit_ticket t;
    struct xf_end e = xf_create(name, 0x4000, &spec, &t);
    struct orbit_arena *ar = orbit_exchanges_arena(e.ex, ORBIT_FLOW_A_TO_B);
    struct victim v = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(victim_reader, &v);
    tp_send_ticket(v.ticket.wr, &t);
    unsigned char buf[4 * 4096] = { 1 };
    ck_assert_int_eq(orbit_exchange_send_start(e.x, buf, 4096, 1000), 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(orbit_exchange_send_data(e.x, buf, sizeof buf, 1000), 0);
    ck_assert_uint_eq(tp_recv_u64(v.ready.rd), 1);   /* it holds START metadata + 3 chunks */
    ck_assert_uint_eq(xf_lane_free(ar, 0), 64 - 1 - 5 * 4);
    /* Another exchange, to a live reader, with a chunk queued: the death must not touch it. */
    struct orbit_exchange *a2, *b2;
    struct orbit_ticket t2;
    ck_assert_int_eq(orbit_exchange_create(e.ex, &a2, &t2), 0);
    ck_assert_int_eq(orbit_exchange_open(e.ex, &t2, &b2), 0);
    ck_assert_int_eq(orbit_exchange_send_start(a2, NULL, 0, 1000), 0);
    ck_assert_int_eq(orbit_exchange_send_data(a2, buf, 4096, 1000), 0);
    struct orbit_arena_lane_info li;
    ck_assert_int_eq(orbit_arena_lanes(ar, &li, 1), 1);
    ck_assert_uint_eq(li.reading, 1 + 3 * 4);
    ck_assert_uint_eq(li.live, 2 * 4 + 1);
    tp_kill_reported(e.f, pid, 1, 0x4001);
    /* What it held and what was queued for it are back with the producer. */
    ck_assert_uint_eq(xf_lane_free(ar, 0), 64 - 1);
    ck_assert_int_eq(orbit_exchange_send_data(e.x, buf, sizeof buf, 1000), -ORBIT_EPEERGONE);
    ck_assert_uint_eq(xf_lane_free(ar, 0), 64 - 1);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_next(b2, &ev, 1000), 0);
    ck_assert_int_eq(orbit_exchange_next(b2, &ev, 1000), 0);
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_DATA);
    ck_assert_mem_eq(ev.chunk.data, buf, 4096);
    orbit_chunk_release(&ev.chunk);
    ck_assert_uint_eq(xf_lane_free(ar, 0), 64);
    orbit_exchange_close(b2);
    orbit_exchange_close(a2);
    xf_end_close(&e);
    orbit_fleet_unlink(name);
}
END_TEST

/* ---- a session lease accepted by its owner in another process ------------------------- */

#define POOL_KIND 232
struct sess { const char *name; struct tp_pipe id, result; };

/* The caller: reserves a unit of the owner's resource and opens a session to it. */
static int session_caller(void *p)
{
    struct sess *s = p;
    struct orbit_exchange_spec spec = spec_of(4096, 64);
    struct orbit_pool_spec ps = { .kind = POOL_KIND, .key_capacity = 8, .lane_capacity = 8 };
    struct orbit_fleet *f = xf_join(s->name, 1, 0x5001);
    struct orbit_exchanges *ex = xf_exchanges(f, &spec);
    struct orbit_pool *pool;
    XF_OK(orbit_pool_open(f, &ps, &pool));
    orbit_id rid = tp_recv_u64(s->id.rd);
    struct orbit_lease lease;
    XF_OK(orbit_pool_reserve(pool, rid, &lease));
    struct orbit_exchange *a;
    XF_OK(orbit_exchange_open_session(ex, &lease, "hello", 5, 5000, &a));
    XF_OK(orbit_exchange_finish(a, 1000));
    struct orbit_exchange_event ev;
    XF_OK(orbit_exchange_next(a, &ev, 5000));
    TP_CHECK(ev.type == ORBIT_EXCHANGE_START && ev.chunk.len == 2 && memcmp(ev.chunk.data, "ok", 2) == 0,
             "reply");
    orbit_chunk_release(&ev.chunk);
    XF_OK(orbit_exchange_next(a, &ev, 5000));
    TP_CHECK(ev.type == ORBIT_EXCHANGE_FIN, "fin");
    tp_send_u64(s->result.wr, 1);
    orbit_exchange_close(a);
    orbit_pool_close(pool);
    orbit_exchanges_close(ex);
    orbit_fleet_leave(f);
    return 0;
}

START_TEST(a_remote_lease_is_accepted_by_its_owner)
{
    const char *name = tu_fleet_name("xsess");
    struct orbit_exchange_spec spec = spec_of(4096, 64);
    struct orbit_pool_spec ps = { .kind = POOL_KIND, .key_capacity = 8, .lane_capacity = 8 };
    struct orbit_fleet *f = tu_join(name, XF_CAPACITY, 0, 0x5000, tu_backing());
    struct orbit_exchanges *ex;
    ck_assert_int_eq(orbit_exchanges_open(f, &spec, &ex), 0);
    struct orbit_pool *pool;
    ck_assert_int_eq(orbit_pool_open(f, &ps, &pool), 0);
    orbit_id rid;
    ck_assert_int_eq(orbit_pool_register(pool, (orbit_key){ 9, 9 }, 1, &rid), 0);
    struct sess s = { name, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(session_caller, &s);
    tp_send_u64(s.id.wr, rid);
    struct orbit_session ses;
    ck_assert_int_eq(orbit_exchange_wait_session(ex, pool, 10000, &ses), 0);
    ck_assert_uint_eq(ses.execution.lease.holder, 1);
    ck_assert_uint_eq(ses.execution.lease.holder_incarnation, 0x5001);
    ck_assert_uint_eq(ses.metadata.len, 5);
    ck_assert_mem_eq(ses.metadata.data, "hello", 5);
    ck_assert_int_eq(orbit_exchange_send_start(ses.exchange, "ok", 2, 1000), 0);
    ck_assert_int_eq(orbit_exchange_finish(ses.exchange, 1000), 0);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_next(ses.exchange, &ev, 5000), 0);
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_FIN);
    ck_assert_uint_eq(tp_recv_u64(s.result.rd), 1);
    ck_assert_int_eq(tu_wait_child(pid, 10000), 0);
    orbit_session_end(&ses);
    struct orbit_candidate c;
    ck_assert_int_eq(orbit_pool_candidates(pool, (orbit_key){ 9, 9 }, &c, 1), 1);
    ck_assert_uint_eq(c.active + c.reserved, 0);
    orbit_pool_close(pool);
    orbit_exchanges_close(ex);
    tp_fleet_end(f, name);
}
END_TEST

/* ---- 256 MiB: TCP -> arena -> another process's TCP socket --------------------------- */

#define RELAY_BYTES (256ull << 20)
#define BLOCK       (1u << 20)

struct relay { const char *name; int l_in, l_out; struct tp_pipe in_stats, out_stats; };

static int listen_loopback(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(s, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s, 4), 0);
    return s;
}

static int connect_to(int listener)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(listener, (struct sockaddr *)&a, &len) < 0)
        return -1;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    return s;
}

/* One io_uring op and its result. */
static int ring_run(struct io_uring *ring)
{
    struct io_uring_cqe *cqe;
    if (io_uring_submit_and_wait(ring, 1) < 0 || io_uring_wait_cqe(ring, &cqe) < 0)
        return -EIO;
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

static int relay_source(void *p)
{
    struct relay *r = p;
    int s = connect_to(r->l_in);
    TP_CHECK(s >= 0, "source connect");
    uint64_t *blk = malloc(BLOCK);
    for (uint64_t k = 0; k < RELAY_BYTES / BLOCK; k++) {
        xf_gen(k, blk, BLOCK / 8);
        for (size_t off = 0; off < BLOCK;) {
            ssize_t w = write(s, (char *)blk + off, BLOCK - off);
            TP_CHECK(w > 0, "source write");
            off += (size_t)w;
        }
    }
    close(s);
    free(blk);
    return 0;
}

/* Socket -> reserved chunk with READ_FIXED, commit what arrived (a shortened chunk). */
static int relay_in(void *p)
{
    struct relay *r = p;
    struct orbit_exchange_spec spec = spec_of(4096, 2048);
    struct orbit_fleet *f = xf_join(r->name, 1, 0x6001);
    struct orbit_exchanges *ex = xf_exchanges(f, &spec);
    struct io_uring ring;
    XF_OK(io_uring_queue_init(8, &ring, 0));
    XF_OK(orbit_arena_register_buffers(orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B), &ring));
    int s = accept4(r->l_in, NULL, NULL, SOCK_CLOEXEC);
    TP_CHECK(s >= 0, "accept");
    struct orbit_exchange *a;
    struct orbit_ticket t;
    XF_OK(orbit_exchange_create(ex, &a, &t));
    XF_OK(orbit_exchange_send_start(a, NULL, 0, 1000));
    XF_OK(orbit_exchanges_offer(ex, &t, 2));
    uint64_t bytes = 0, chunks = 0;
    for (;;) {
        struct orbit_reservation res;
        struct orbit_fixed_buf fb;
        XF_OK(orbit_exchange_reserve(a, CHUNK, 30000, &res));
        XF_OK(orbit_reservation_fixed(&res, &fb));
        io_uring_prep_read_fixed(io_uring_get_sqe(&ring), s, fb.addr, CHUNK, 0, fb.index);
        int n = ring_run(&ring);
        TP_CHECK(n >= 0, "read_fixed: %s", strerror(-n));
        if (n == 0) {
            orbit_arena_cancel(&res);
            break;
        }
        XF_OK(orbit_exchange_data(a, &res, (size_t)n, 30000));
        bytes += (uint64_t)n;
        chunks++;
    }
    XF_OK(orbit_exchange_finish(a, 30000));
    struct orbit_exchange_event ev;
    do   /* the far side's START and FIN: it has written everything out */
        XF_OK(orbit_exchange_next(a, &ev, 60000));
    while (ev.type != ORBIT_EXCHANGE_FIN);
    tp_send_u64(r->in_stats.wr, bytes);
    tp_send_u64(r->in_stats.wr, chunks);
    close(s);
    orbit_exchange_close(a);
    io_uring_queue_exit(&ring);
    orbit_exchanges_close(ex);
    orbit_fleet_leave(f);
    return 0;
}

/* Received chunk -> socket with WRITE_FIXED, released once written. */
static int relay_out(void *p)
{
    struct relay *r = p;
    struct orbit_exchange_spec spec = spec_of(4096, 2048);
    struct orbit_fleet *f = xf_join(r->name, 2, 0x6002);
    struct orbit_exchanges *ex = xf_exchanges(f, &spec);
    struct io_uring ring;
    XF_OK(io_uring_queue_init(8, &ring, 0));
    XF_OK(orbit_arena_register_buffers(orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B), &ring));
    int s = connect_to(r->l_out);
    TP_CHECK(s >= 0, "sink connect");
    struct orbit_ticket t;
    XF_OK(orbit_exchanges_wait_offer(ex, 30000, &t));
    struct orbit_exchange *b;
    XF_OK(orbit_exchange_open(ex, &t, &b));
    struct orbit_exchange_event ev;
    uint64_t bytes = 0;
    for (;;) {
        XF_OK(orbit_exchange_next(b, &ev, 30000));
        if (ev.type == ORBIT_EXCHANGE_FIN)
            break;
        if (ev.type != ORBIT_EXCHANGE_DATA)
            continue;
        struct orbit_fixed_buf fb;
        XF_OK(orbit_chunk_fixed(&ev.chunk, &fb));
        for (size_t off = 0; off < fb.len;) {
            io_uring_prep_write_fixed(io_uring_get_sqe(&ring), s, (char *)fb.addr + off,
                                      (unsigned)(fb.len - off), 0, fb.index);
            int n = ring_run(&ring);
            TP_CHECK(n > 0, "write_fixed: %s", strerror(-n));
            off += (size_t)n;
        }
        bytes += fb.len;
        orbit_chunk_release(&ev.chunk);
    }
    XF_OK(orbit_exchange_send_start(b, NULL, 0, 1000));
    XF_OK(orbit_exchange_finish(b, 1000));
    tp_send_u64(r->out_stats.wr, bytes);
    shutdown(s, SHUT_WR);
    close(s);
    orbit_exchange_close(b);
    io_uring_queue_exit(&ring);
    orbit_exchanges_close(ex);
    orbit_fleet_leave(f);
    return 0;
}

START_TEST(a_body_relayed_tcp_to_arena_to_tcp_with_registered_buffers)
{
    const char *name = tu_fleet_name("xrelay");
    struct orbit_fleet *f = tu_join(name, XF_CAPACITY, 0, 0x6000, tu_backing());
    struct orbit_exchange_spec spec = spec_of(4096, 2048);
    struct orbit_exchanges *ex;
    ck_assert_int_eq(orbit_exchanges_open(f, &spec, &ex), 0);   /* create the tables before the children */
    struct relay r = { name, listen_loopback(), listen_loopback(), tp_pipe(), tp_pipe() };
    pid_t out = tp_spawn(relay_out, &r);
    int sink = accept4(r.l_out, NULL, NULL, SOCK_CLOEXEC);
    ck_assert_int_ge(sink, 0);
    pid_t in = tp_spawn(relay_in, &r), src = tp_spawn(relay_source, &r);
    uint64_t *got = malloc(BLOCK), *want = malloc(BLOCK), total = 0;
    for (uint64_t k = 0;; k++) {
        size_t fill = 0;
        while (fill < BLOCK) {
            ssize_t n = read(sink, (char *)got + fill, BLOCK - fill);
            ck_assert_int_ge(n, 0);
            if (n == 0)
                break;
            fill += (size_t)n;
        }
        total += fill;
        if (fill == 0)
            break;
        ck_assert_uint_eq(fill, BLOCK);
        xf_gen(k, want, BLOCK / 8);
        ck_assert_msg(memcmp(got, want, BLOCK) == 0, "block %llu differs", (unsigned long long)k);
    }
    ck_assert_uint_eq(total, RELAY_BYTES);
    ck_assert_int_eq(tu_wait_child(src, 60000), 0);
    ck_assert_int_eq(tu_wait_child(in, 60000), 0);
    ck_assert_int_eq(tu_wait_child(out, 60000), 0);
    uint64_t in_bytes = tp_recv_u64(r.in_stats.rd), chunks = tp_recv_u64(r.in_stats.rd),
             out_bytes = tp_recv_u64(r.out_stats.rd);
    ck_assert_uint_eq(in_bytes, RELAY_BYTES);
    ck_assert_uint_eq(out_bytes, RELAY_BYTES);
    ck_assert_uint_ge(chunks, RELAY_BYTES / CHUNK);
    ck_assert_uint_eq(xf_lane_free(orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B), 1), 2048);
    free(got);
    free(want);
    close(sink);
    close(r.l_in);
    close(r.l_out);
    orbit_exchanges_close(ex);
    tp_fleet_end(f, name);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exchange_fleet");
    TCase *t = tcase_create("fleet");
    tcase_set_timeout(t, 240);
    tcase_add_test(t, a_gibibyte_as_64k_chunks_arrives_with_its_checksum);
    tcase_add_test(t, a_payload_full_wait_is_woken_by_a_release_in_another_process);
    tcase_add_test(t, a_killed_producer_gives_back_what_no_survivor_holds);
    tcase_add_test(t, a_killed_reader_gives_back_what_it_held);
    tcase_add_test(t, a_remote_lease_is_accepted_by_its_owner);
    tcase_add_test(t, a_body_relayed_tcp_to_arena_to_tcp_with_registered_buffers);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
