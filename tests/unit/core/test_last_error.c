/* SPDX-License-Identifier: MIT */
/*
 * Every failure names its cause: each public call that returns int or
 * ssize_t (every one the installed headers declare: the test reads them with
 * ctags; liborbit-reaper's reaper.h aside, and a call missing from the table below fails it) is driven into a
 * failure, and orbit_last_error() must then be a sentence that begins with
 * the call's name and says more than it. The cases a newcomer meets first
 * name what differs: the two capacities or specs, the id, the fleet, the
 * bytes asked and available.
 */
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <orbit/orbit.h>
#include "testutil.h"

static const orbit_key KEY = { 7, 7 };
static const orbit_id BOGUS = 0x00f7000000ffffffull;   /* a pool id no slot has had */

struct fx {
    char name[ORBIT_FLEET_NAME_MAX + 1], missing[ORBIT_FLEET_NAME_MAX + 1];
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    struct orbit_endpoint *a, *b;
    struct orbit_exchanges *ex;
    struct orbit_exchange *xa, *xb;
    struct orbit_arena *arena;
    struct orbit_admission *adm;
    orbit_id res;
    struct io_uring_sqe sqe;
    char said[512];               /* a sentence a child process saw, for calls driven in one */
    char buf[1 << 16];
};

#define STREAM_SPEC { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8, .buffer_bytes = 4096 }
#define EXCH_SPEC { .control = { .kind = 221, .lane_capacity = 8, .buffer_bytes = 4096 }, \
                    .a_to_b = { .kind = 222, .slot_bytes = 1024, .slots_per_lane = 8 } }

static void fx_open(struct fx *x)
{
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", tu_fleet_name("lasterr"));
    snprintf(x->missing, sizeof x->missing, "%s", tu_fleet_name("nofleet"));
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    ck_assert_int_eq(orbit_fleet_join(x->name, &o, &x->f), 0);
    ck_assert_int_eq(orbit_pool_open(x->f, NULL, &x->pool), 0);
    ck_assert_int_eq(orbit_pool_register(x->pool, KEY, 2, &x->res), 0);
    struct orbit_stream_spec ss = STREAM_SPEC;
    ck_assert_int_eq(orbit_streams_open(x->f, &ss, &x->streams), 0);
    struct orbit_ticket t;
    ck_assert_int_eq(orbit_streams_create(x->streams, &x->a, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(x->streams, &t, &x->b), 0);
    struct orbit_exchange_spec es = EXCH_SPEC;
    ck_assert_int_eq(orbit_exchanges_open(x->f, &es, &x->ex), 0);
    ck_assert_int_eq(orbit_exchange_create(x->ex, &x->xa, &t), 0);
    ck_assert_int_eq(orbit_exchange_open(x->ex, &t, &x->xb), 0);
    x->arena = orbit_exchanges_arena(x->ex, ORBIT_FLOW_A_TO_B);
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
    orbit_fleet_unlink(x->name);
}

/* ---- one failure per call ---------------------------------------------------------- */

#define DRIVE(call, ...) static int d_##call(struct fx *x) { (void)x; return (int)(__VA_ARGS__); }

static const struct orbit_ticket BAD_TICKET = { .id = 0x00f6000000ffffffull, .side = ORBIT_SIDE_B, .epoch = 1 };

/* fleet.h */
DRIVE(orbit_id_format, orbit_id_format(BOGUS, x->buf, 3))
DRIVE(orbit_id_parse, orbit_id_parse("not:an:id:at-all", &(orbit_id){ 0 }))
static int d_orbit_fleet_join(struct fx *x)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;   /* the fleet was made with 4 */
    struct orbit_fleet *f;
    return orbit_fleet_join(x->name, &o, &f);
}
DRIVE(orbit_fleet_observe, orbit_fleet_observe(x->missing, &(struct orbit_fleet *){ NULL }))
DRIVE(orbit_fleet_observe_opts, orbit_fleet_observe_opts(x->missing, &(struct orbit_observe_opts){ .ready_wait_ms = 0 },
                                                         &(struct orbit_fleet *){ NULL }))
DRIVE(orbit_fleet_reap, orbit_fleet_reap(NULL))
DRIVE(orbit_fleet_wait_node_death, orbit_fleet_wait_node_death(x->f, orbit_fleet_node(x->f),
                                                               orbit_fleet_incarnation(x->f), 0))
DRIVE(orbit_fleet_prep_wait_doorbell, orbit_fleet_prep_wait_doorbell(x->f, NULL))
DRIVE(orbit_fleet_prep_wait_node_death, orbit_fleet_prep_wait_node_death(x->f, 99, 1, &x->sqe))
DRIVE(orbit_fleet_live_members, orbit_fleet_live_members(x->missing))
DRIVE(orbit_fleet_collect, orbit_fleet_collect(x->missing))
DRIVE(orbit_fleet_unlink, orbit_fleet_unlink(x->missing))
DRIVE(orbit_fleet_nodes, orbit_fleet_nodes(x->f, NULL, 4))
DRIVE(orbit_fleet_node_dead, orbit_fleet_node_dead(x->f, 99, 1))
DRIVE(orbit_fleet_segments, orbit_fleet_segments("no/such name", NULL, 0))
DRIVE(orbit_fleet_list, orbit_fleet_list(NULL, 4))
DRIVE(orbit_fleet_generations, orbit_fleet_generations("no/such name", NULL, 0))
DRIVE(orbit_fleet_generation_name, orbit_fleet_generation_name(x->name, 2, x->buf, 3))
/* inspect.h */
DRIVE(orbit_fleet_tables, orbit_fleet_tables(x->f, NULL, 4))
DRIVE(orbit_fleet_account, orbit_fleet_account(x->f, 0, 1, NULL))
DRIVE(orbit_fleet_reset_tables, orbit_fleet_reset_tables(NULL))
DRIVE(orbit_fleet_node_snapshot, orbit_fleet_node_snapshot(x->f, 99, &(struct orbit_node_snapshot){ 0 }))
DRIVE(orbit_fleet_replaced, orbit_fleet_replaced(NULL))
DRIVE(orbit_process_start_time, orbit_process_start_time(-7, &(uint64_t){ 0 }))
/* Only a /proc that will not show the process fails it: one with hidepid=1, read as another user. */
static int d_orbit_process_exiting(struct fx *x)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("proc", "/proc", "proc", 0, "hidepid=1") != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        int rc = orbit_process_exiting(1);
        dprintf(p[1], "%d %s", rc, orbit_last_error());
        _exit(0);
    }
    close(p[1]);
    ssize_t n = read(p[0], x->said, sizeof x->said - 1);
    close(p[0]);
    ck_assert_int_eq(tu_wait_child(pid, 10000), 0);
    x->said[n > 0 ? n : 0] = '\0';
    int rc = atoi(x->said);
    memmove(x->said, strchr(x->said, ' ') ? strchr(x->said, ' ') + 1 : "", strlen(x->said) + 1);
    return rc;
}
DRIVE(orbit_fleet_counters, orbit_fleet_counters(x->f, 77, 99, &(struct orbit_counters){ 0 }))
DRIVE(orbit_fleet_death_counters, orbit_fleet_death_counters(x->f, NULL))
/* pool.h */
static int d_orbit_pool_open(struct fx *x)
{
    struct orbit_pool_spec spec = ORBIT_POOL_SPEC_DEFAULT;
    spec.key_capacity = 512;   /* the pool was made with 256 */
    struct orbit_pool *p;
    return orbit_pool_open(x->f, &spec, &p);
}
DRIVE(orbit_pool_open_existing, orbit_pool_open_existing(x->f, 77, &(struct orbit_pool *){ NULL }))
DRIVE(orbit_pool_register, orbit_pool_register(x->pool, KEY, 0, &(orbit_id){ 0 }))
DRIVE(orbit_pool_unregister, orbit_pool_unregister(x->pool, BOGUS))
DRIVE(orbit_pool_drain, orbit_pool_drain(x->pool, BOGUS))
DRIVE(orbit_pool_reconcile, orbit_pool_reconcile(x->pool, BOGUS, 0, 0))
DRIVE(orbit_pool_candidates, orbit_pool_candidates(x->pool, KEY, NULL, 4))
DRIVE(orbit_pool_reserve, orbit_pool_reserve(x->pool, BOGUS, &(struct orbit_lease){ 0 }))
static int d_orbit_pool_accept(struct fx *x)
{
    struct orbit_lease l;
    struct orbit_execution e;
    ck_assert_int_eq(orbit_pool_reserve(x->pool, x->res, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(x->pool, &l, &e), 0);
    return orbit_pool_accept(x->pool, &l, &e);   /* accepted already */
}
DRIVE(orbit_pool_claim_create, orbit_pool_claim_create(x->pool, KEY, 0, &(struct orbit_permit){ 0 }))
DRIVE(orbit_pool_version, orbit_pool_version(x->pool, KEY, NULL))
static int d_orbit_pool_wait_capacity(struct fx *x)
{
    uint32_t v;
    ck_assert_int_eq(orbit_pool_version(x->pool, KEY, &v), 0);
    return orbit_pool_wait_capacity(x->pool, KEY, v, 0, &v);
}
DRIVE(orbit_pool_prep_wait_capacity, orbit_pool_prep_wait_capacity(x->pool, KEY, 0, NULL))
DRIVE(orbit_pool_acquire, orbit_pool_acquire(x->pool, KEY, NULL, NULL, NULL))
DRIVE(orbit_pool_owners, orbit_pool_owners(x->pool, NULL, 4))
DRIVE(orbit_pool_watch, orbit_pool_watch(NULL, KEY))
DRIVE(orbit_pool_readiness, orbit_pool_readiness(x->pool) < 0 ? -1 : orbit_pool_readiness(x->pool))
DRIVE(orbit_pool_watch_since, orbit_pool_watch_since(NULL, KEY, 0))
DRIVE(orbit_pool_keys, orbit_pool_keys(x->pool, NULL, 4))
DRIVE(orbit_key_format, orbit_key_format(KEY, x->buf, 8))
DRIVE(orbit_pool_leases, orbit_pool_leases(x->pool, BOGUS, NULL, 0))
DRIVE(orbit_pool_key_nodes, orbit_pool_key_nodes(x->pool, KEY, NULL, 4))
/* stream.h */
DRIVE(orbit_ticket_format, orbit_ticket_format(&BAD_TICKET, x->buf, 4))
DRIVE(orbit_ticket_parse, orbit_ticket_parse("ticket?", &(struct orbit_ticket){ 0 }))
static int d_orbit_streams_open(struct fx *x)
{
    struct orbit_stream_spec ss = STREAM_SPEC;
    ss.buffer_bytes = 8192;   /* the table was made with 4096 */
    struct orbit_streams *s;
    return orbit_streams_open(x->f, &ss, &s);
}
DRIVE(orbit_streams_open_existing, orbit_streams_open_existing(x->f, 77, &(struct orbit_streams *){ NULL }))
DRIVE(orbit_streams_create, orbit_streams_create(x->streams, NULL, &(struct orbit_ticket){ 0 }))
DRIVE(orbit_streams_open_ticket, orbit_streams_open_ticket(x->streams, &BAD_TICKET, &(struct orbit_endpoint *){ 0 }))
DRIVE(orbit_streams_offer, orbit_streams_offer(x->streams, &BAD_TICKET, 99))
DRIVE(orbit_streams_take_offer, orbit_streams_take_offer(x->streams, &(struct orbit_ticket){ 0 }))
DRIVE(orbit_streams_wait_offer, orbit_streams_wait_offer(x->streams, 0, &(struct orbit_ticket){ 0 }))
DRIVE(orbit_streams_prep_wait_offer, orbit_streams_prep_wait_offer(x->streams, NULL))
DRIVE(orbit_streams_owners, orbit_streams_owners(x->streams, NULL, 4))
DRIVE(orbit_streams_readiness, orbit_streams_readiness(x->streams) < 0 ? -1 : orbit_streams_readiness(x->streams))
DRIVE(orbit_endpoint_peer, orbit_endpoint_peer(x->a, NULL))
DRIVE(orbit_endpoint_try_read, orbit_endpoint_try_read(x->b, x->buf, 8))
DRIVE(orbit_endpoint_try_read_exact, orbit_endpoint_try_read_exact(x->b, x->buf, 8))
DRIVE(orbit_endpoint_read, orbit_endpoint_read(x->b, x->buf, 8, 0))
DRIVE(orbit_endpoint_read_exact, orbit_endpoint_read_exact(x->b, x->buf, 8192, 0))
static int d_orbit_endpoint_try_write(struct fx *x)
{
    ck_assert_int_eq(orbit_endpoint_try_write(x->a, x->buf, 4096), 4096);   /* the ring is full */
    return (int)orbit_endpoint_try_write(x->a, x->buf, 1);
}
DRIVE(orbit_endpoint_try_write_exact, orbit_endpoint_try_write_exact(x->a, x->buf, 8192))
DRIVE(orbit_endpoint_write, orbit_endpoint_write(x->a, x->buf, 8, -5))
DRIVE(orbit_endpoint_write_all, orbit_endpoint_write_all(x->a, NULL, 3, 0))
DRIVE(orbit_endpoint_write_exact, orbit_endpoint_write_exact(x->a, x->buf, 8192, 0))
DRIVE(orbit_endpoint_wait_readable, orbit_endpoint_wait_readable(x->b, 0))
DRIVE(orbit_endpoint_wait_writable, orbit_endpoint_wait_writable(x->a, -7))
DRIVE(orbit_endpoint_wait_writable_exact, orbit_endpoint_wait_writable_exact(x->a, 8192, 0))
DRIVE(orbit_endpoint_prep_wait_readable, orbit_endpoint_prep_wait_readable(x->b, NULL))
DRIVE(orbit_endpoint_prep_wait_writable, orbit_endpoint_prep_wait_writable(x->a, NULL))
DRIVE(orbit_endpoint_finish, orbit_endpoint_finish(NULL))
DRIVE(orbit_endpoint_rearm, orbit_endpoint_rearm(x->b))
DRIVE(orbit_endpoint_peer_closed, orbit_endpoint_peer_closed(NULL))
DRIVE(orbit_endpoint_wait_peer_closed, orbit_endpoint_wait_peer_closed(x->a, 0))
DRIVE(orbit_endpoint_prep_wait_readable_exact, orbit_endpoint_prep_wait_readable_exact(x->b, 8192, &x->sqe))
DRIVE(orbit_endpoint_prep_wait_writable_exact, orbit_endpoint_prep_wait_writable_exact(x->a, 8192, &x->sqe))
DRIVE(orbit_endpoint_write_span, orbit_endpoint_write_span(x->a, 8192, 0, (struct orbit_span[2]){ { 0 } }))
DRIVE(orbit_endpoint_commit, orbit_endpoint_commit(x->a, 9))
DRIVE(orbit_endpoint_read_span, orbit_endpoint_read_span(x->b, 1, 0, (struct orbit_span[2]){ { 0 } }))
DRIVE(orbit_endpoint_consume, orbit_endpoint_consume(x->b, 3))
DRIVE(orbit_streams_list, orbit_streams_list(x->streams, NULL, 4))
DRIVE(orbit_streams_spec, orbit_streams_spec(x->streams, NULL))
DRIVE(orbit_streams_rings, orbit_streams_rings(x->streams, BAD_TICKET.id, (struct orbit_stream_ring[2]){ 0 }))
/* admission.h */
static int d_orbit_admission_open(struct fx *x)
{
    struct orbit_admission_spec spec = ORBIT_ADMISSION_SPEC_DEFAULT;
    spec.max_domains = 8;   /* the ledger was made with 16 */
    struct orbit_admission *a;
    return orbit_admission_open(x->f, &spec, &a);
}
DRIVE(orbit_admission_open_existing, orbit_admission_open_existing(x->f, 77, &(struct orbit_admission *){ 0 }))
DRIVE(orbit_admission_set_capacity, orbit_admission_set_capacity(NULL, 1, 10))
DRIVE(orbit_admission_try_claim, orbit_admission_try_claim(x->adm, &(struct orbit_demand){ 0 },
                                                           &(struct orbit_admit_result){ 0 }))
DRIVE(orbit_admission_release, orbit_admission_release(x->adm, &(struct orbit_claim){ .serial = 12345 }))
DRIVE(orbit_admission_wait, orbit_admission_wait(x->adm, orbit_admission_epoch(x->adm), 0, &(uint64_t){ 0 }))
DRIVE(orbit_admission_prep_wait, orbit_admission_prep_wait(x->adm, 0, NULL))
DRIVE(orbit_admission_shutdown, orbit_admission_shutdown(NULL))
DRIVE(orbit_admission_reset_all, orbit_admission_reset_all(NULL))
DRIVE(orbit_admission_domains, orbit_admission_domains(x->adm, NULL, 4))
DRIVE(orbit_admission_claims, orbit_admission_claims(x->adm, NULL, 4))
DRIVE(orbit_admission_claim_units, orbit_admission_claim_units(x->adm, &(struct orbit_claim){ .serial = 12345 },
                                                               NULL, 0))
DRIVE(orbit_admission_info, orbit_admission_info(x->adm, NULL))
DRIVE(orbit_admission_waiting, orbit_admission_waiting(x->adm, NULL))
/* exchange.h */
static int d_orbit_arena_open(struct fx *x)
{
    struct orbit_arena_spec spec = { .kind = 222, .slot_bytes = 2048, .slots_per_lane = 8 };   /* made with 1024 */
    struct orbit_arena *a;
    return orbit_arena_open(x->f, &spec, &a);
}
DRIVE(orbit_arena_open_existing, orbit_arena_open_existing(x->f, 77, &(struct orbit_arena *){ 0 }))
DRIVE(orbit_arena_spec, orbit_arena_spec(x->arena, NULL))
DRIVE(orbit_arena_try_reserve, orbit_arena_try_reserve(x->arena, 1 << 20, &(struct orbit_reservation){ 0 }))
DRIVE(orbit_arena_reserve, orbit_arena_reserve(x->arena, 10, -5, &(struct orbit_reservation){ 0 }))
DRIVE(orbit_arena_commit, orbit_arena_commit(&(struct orbit_reservation){ 0 }, 1, &(struct orbit_chunk_desc){ 0 }))
DRIVE(orbit_arena_consume, orbit_arena_consume(x->arena, &(struct orbit_chunk_desc){ 0 }, &(struct orbit_chunk){ 0 }))
DRIVE(orbit_arena_withdraw, orbit_arena_withdraw(x->arena, &(struct orbit_chunk_desc){ 0 }))
DRIVE(orbit_arena_prep_wait_credit, orbit_arena_prep_wait_credit(x->arena, 10, NULL))
DRIVE(orbit_arena_readiness, orbit_arena_readiness(x->arena) < 0 ? -1 : orbit_arena_readiness(x->arena))
DRIVE(orbit_arena_register_buffers, orbit_arena_register_buffers(x->arena, NULL))
DRIVE(orbit_reservation_fixed, orbit_reservation_fixed(&(struct orbit_reservation){ 0 }, &(struct orbit_fixed_buf){ 0 }))
DRIVE(orbit_chunk_fixed, orbit_chunk_fixed(&(struct orbit_chunk){ 0 }, &(struct orbit_fixed_buf){ 0 }))
DRIVE(orbit_arena_lanes, orbit_arena_lanes(x->arena, NULL, 4))
DRIVE(orbit_arena_chunks, orbit_arena_chunks(x->arena, NULL, 4))
static int d_orbit_exchanges_open(struct fx *x)
{
    struct orbit_exchange_spec es = EXCH_SPEC;
    es.control.buffer_bytes = 8192;   /* the control table was made with 4096 */
    struct orbit_exchanges *ex;
    return orbit_exchanges_open(x->f, &es, &ex);
}
DRIVE(orbit_exchange_create, orbit_exchange_create(x->ex, NULL, &(struct orbit_ticket){ 0 }))
DRIVE(orbit_exchange_open, orbit_exchange_open(x->ex, &BAD_TICKET, &(struct orbit_exchange *){ 0 }))
DRIVE(orbit_exchanges_offer, orbit_exchanges_offer(x->ex, &BAD_TICKET, 99))
DRIVE(orbit_exchanges_take_offer, orbit_exchanges_take_offer(x->ex, &(struct orbit_ticket){ 0 }))
DRIVE(orbit_exchanges_wait_offer, orbit_exchanges_wait_offer(x->ex, 0, &(struct orbit_ticket){ 0 }))
DRIVE(orbit_exchange_peer, orbit_exchange_peer(x->xa, NULL))
DRIVE(orbit_exchange_try_reserve, orbit_exchange_try_reserve(x->xa, 1 << 20, &(struct orbit_reservation){ 0 }))
DRIVE(orbit_exchange_reserve, orbit_exchange_reserve(x->xa, 10, -5, &(struct orbit_reservation){ 0 }))
DRIVE(orbit_exchange_try_start, orbit_exchange_try_start(x->xa, &(struct orbit_reservation){ 0 }, 1))
DRIVE(orbit_exchange_start, orbit_exchange_start(x->xa, &(struct orbit_reservation){ 0 }, 1, 0))
DRIVE(orbit_exchange_try_data, orbit_exchange_try_data(x->xa, &(struct orbit_reservation){ 0 }, 1))
DRIVE(orbit_exchange_data, orbit_exchange_data(x->xa, &(struct orbit_reservation){ 0 }, 1, 0))
DRIVE(orbit_exchange_send_start, orbit_exchange_send_start(x->xa, NULL, 5, 0))
DRIVE(orbit_exchange_send_data, orbit_exchange_send_data(x->xa, "x", 1, 0))
DRIVE(orbit_exchange_try_send_data, orbit_exchange_try_send_data(x->xa, "x", 1))
DRIVE(orbit_exchange_try_finish, orbit_exchange_try_finish(x->xa))
DRIVE(orbit_exchange_finish, orbit_exchange_finish(NULL, 0))
DRIVE(orbit_exchange_try_reset, orbit_exchange_try_reset(NULL, 1))
DRIVE(orbit_exchange_reset, orbit_exchange_reset(NULL, 1, 0))
DRIVE(orbit_exchange_try_next, orbit_exchange_try_next(x->xb, &(struct orbit_exchange_event){ 0 }))
DRIVE(orbit_exchange_next, orbit_exchange_next(x->xb, &(struct orbit_exchange_event){ 0 }, 0))
DRIVE(orbit_exchange_prep_wait_event, orbit_exchange_prep_wait_event(x->xb, NULL))
DRIVE(orbit_exchange_prep_wait_credit, orbit_exchange_prep_wait_credit(x->xa, 1, NULL))
DRIVE(orbit_exchange_prep_wait_sendable, orbit_exchange_prep_wait_sendable(x->xa, NULL))
DRIVE(orbit_exchanges_prep_wait_offer, orbit_exchanges_prep_wait_offer(x->ex, NULL))
DRIVE(orbit_exchanges_readiness, orbit_exchanges_readiness(x->ex) < 0 ? -1 : orbit_exchanges_readiness(x->ex))
DRIVE(orbit_exchange_open_session, orbit_exchange_open_session(x->ex, &(struct orbit_lease){ 0 }, NULL, 0, 0, NULL))
DRIVE(orbit_exchange_accept_session, orbit_exchange_accept_session(x->ex, x->pool, &BAD_TICKET, 0,
                                                                   &(struct orbit_session){ 0 }))
DRIVE(orbit_exchange_wait_session, orbit_exchange_wait_session(x->ex, x->pool, 0, &(struct orbit_session){ 0 }))
/* uring.h */
DRIVE(orbit_uring_attach_wakes, orbit_uring_attach_wakes(NULL))
DRIVE(orbit_readiness_drain, orbit_readiness_drain(-1))
DRIVE(orbit_uring_refusal, orbit_uring_refusal(-EPERM, NULL, 16))
#define W(call) { #call, d_##call }
static const struct walk { const char *call; int (*drive)(struct fx *); } walks[] = {
    W(orbit_id_format), W(orbit_id_parse), W(orbit_fleet_join), W(orbit_fleet_observe), W(orbit_fleet_reap),
    W(orbit_fleet_observe_opts),
    W(orbit_fleet_wait_node_death), W(orbit_fleet_prep_wait_doorbell), W(orbit_fleet_prep_wait_node_death),
    W(orbit_fleet_live_members), W(orbit_fleet_collect), W(orbit_fleet_unlink), W(orbit_fleet_nodes),
    W(orbit_fleet_node_dead), W(orbit_fleet_segments), W(orbit_fleet_list),
    W(orbit_fleet_generations), W(orbit_fleet_generation_name),
    W(orbit_fleet_tables), W(orbit_fleet_account), W(orbit_fleet_reset_tables), W(orbit_fleet_node_snapshot),
    W(orbit_fleet_replaced), W(orbit_process_start_time), W(orbit_process_exiting), W(orbit_fleet_counters),
    W(orbit_fleet_death_counters),
    W(orbit_pool_open), W(orbit_pool_open_existing), W(orbit_pool_register), W(orbit_pool_unregister),
    W(orbit_pool_drain), W(orbit_pool_reconcile), W(orbit_pool_candidates), W(orbit_pool_reserve),
    W(orbit_pool_accept), W(orbit_pool_claim_create), W(orbit_pool_version), W(orbit_pool_wait_capacity),
    W(orbit_pool_prep_wait_capacity), W(orbit_pool_acquire), W(orbit_pool_owners), W(orbit_pool_watch),
    W(orbit_pool_readiness), W(orbit_pool_watch_since), W(orbit_pool_keys), W(orbit_key_format),
    W(orbit_pool_leases), W(orbit_pool_key_nodes),
    W(orbit_ticket_format), W(orbit_ticket_parse), W(orbit_streams_open), W(orbit_streams_open_existing),
    W(orbit_streams_create), W(orbit_streams_open_ticket), W(orbit_streams_offer), W(orbit_streams_take_offer),
    W(orbit_streams_wait_offer), W(orbit_streams_prep_wait_offer), W(orbit_streams_owners),
    W(orbit_streams_readiness), W(orbit_endpoint_peer), W(orbit_endpoint_try_read),
    W(orbit_endpoint_try_read_exact), W(orbit_endpoint_read), W(orbit_endpoint_read_exact),
    W(orbit_endpoint_try_write), W(orbit_endpoint_try_write_exact), W(orbit_endpoint_write),
    W(orbit_endpoint_write_all), W(orbit_endpoint_write_exact), W(orbit_endpoint_wait_readable),
    W(orbit_endpoint_wait_writable), W(orbit_endpoint_wait_writable_exact), W(orbit_endpoint_prep_wait_readable),
    W(orbit_endpoint_prep_wait_writable), W(orbit_endpoint_finish), W(orbit_endpoint_rearm),
    W(orbit_endpoint_peer_closed), W(orbit_endpoint_wait_peer_closed), W(orbit_endpoint_prep_wait_readable_exact),
    W(orbit_endpoint_prep_wait_writable_exact), W(orbit_endpoint_write_span), W(orbit_endpoint_commit),
    W(orbit_endpoint_read_span), W(orbit_endpoint_consume), W(orbit_streams_list), W(orbit_streams_spec), W(orbit_streams_rings),
    W(orbit_admission_open), W(orbit_admission_open_existing), W(orbit_admission_set_capacity),
    W(orbit_admission_try_claim), W(orbit_admission_release), W(orbit_admission_wait), W(orbit_admission_prep_wait),
    W(orbit_admission_shutdown), W(orbit_admission_reset_all), W(orbit_admission_domains),
    W(orbit_admission_claims), W(orbit_admission_claim_units), W(orbit_admission_info), W(orbit_admission_waiting),
    W(orbit_arena_open), W(orbit_arena_open_existing), W(orbit_arena_spec), W(orbit_arena_try_reserve),
    W(orbit_arena_reserve), W(orbit_arena_commit), W(orbit_arena_consume), W(orbit_arena_withdraw),
    W(orbit_arena_prep_wait_credit), W(orbit_arena_readiness), W(orbit_arena_register_buffers),
    W(orbit_reservation_fixed), W(orbit_chunk_fixed), W(orbit_arena_lanes), W(orbit_arena_chunks),
    W(orbit_exchanges_open), W(orbit_exchange_create), W(orbit_exchange_open), W(orbit_exchanges_offer),
    W(orbit_exchanges_take_offer), W(orbit_exchanges_wait_offer), W(orbit_exchange_peer),
    W(orbit_exchange_try_reserve), W(orbit_exchange_reserve), W(orbit_exchange_try_start), W(orbit_exchange_start),
    W(orbit_exchange_try_data), W(orbit_exchange_data), W(orbit_exchange_send_start), W(orbit_exchange_send_data),
    W(orbit_exchange_try_send_data), W(orbit_exchange_try_finish), W(orbit_exchange_finish),
    W(orbit_exchange_try_reset), W(orbit_exchange_reset), W(orbit_exchange_try_next), W(orbit_exchange_next),
    W(orbit_exchange_prep_wait_event), W(orbit_exchange_prep_wait_credit), W(orbit_exchange_prep_wait_sendable),
    W(orbit_exchanges_prep_wait_offer), W(orbit_exchanges_readiness), W(orbit_exchange_open_session),
    W(orbit_exchange_accept_session), W(orbit_exchange_wait_session),
    W(orbit_uring_attach_wakes), W(orbit_readiness_drain), W(orbit_uring_refusal),
};
#define N_WALKS (sizeof walks / sizeof walks[0])

/* _i: one call. A failure whose sentence is empty or does not begin with the call's name fails. */
START_TEST(each_call_names_itself_and_its_cause_when_it_fails)
{
    const struct walk *w = &walks[_i];
    struct fx x;
    fx_open(&x);
    int rc = w->drive(&x);
    char said[512];
    snprintf(said, sizeof said, "%s", x.said[0] ? x.said : orbit_last_error());
    size_t n = strlen(w->call);
    ck_assert_msg(rc < 0, "%s: returned %d, not a failure", w->call, rc);
    ck_assert_msg(strncmp(said, w->call, n) == 0 && said[n] == ':' && strlen(said) > n + 8,
                  "%s returned %d (%s); orbit_last_error() is \"%s\"", w->call, rc, orbit_strerror(rc), said);
    fx_close(&x);
}
END_TEST

/* Every int- or ssize_t-returning call an installed header declares has its row above. */
START_TEST(every_call_that_can_fail_is_walked)
{
    const char *dir = getenv("ORBIT_HEADERS");
    ck_assert_ptr_nonnull(dir);
    char cmd[1024];
    /* liborbit's headers; <orbit/reaper.h> is liborbit-reaper's, whose calls do not set the sentence yet. */
    snprintf(cmd, sizeof cmd, "ctags-universal -x --c-kinds=p --language-force=C --_xformat='%%N %%t' "
             "$(ls %s/*.h | grep -v '/reaper\\.h$')", dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[256], missing[4096] = "";
    size_t seen = 0;
    while (fgets(line, sizeof line, p)) {
        char name[128], type[64];
        if (sscanf(line, "%127s %63s", name, type) != 2 ||
            (strcmp(type, "typename:int") != 0 && strcmp(type, "typename:ssize_t") != 0))
            continue;
        seen++;
        bool found = false;
        for (size_t i = 0; i < N_WALKS && !found; i++)
            found = strcmp(walks[i].call, name) == 0;
        if (!found)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", name);
    }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(!*missing, "no failure walked for:%s", missing);
    ck_assert_uint_eq(seen, N_WALKS);   /* and no row for a call the headers do not declare */
}
END_TEST

/* ---- the cases a newcomer meets first name both sides ------------------------------ */

static void said_has(const char *what, const char *a, const char *b)
{
    const char *s = orbit_last_error();
    ck_assert_msg(strstr(s, a) && (!b || strstr(s, b)), "%s: \"%s\" lacks \"%s\"%s%s", what, s, a,
                  b ? " or " : "", b ? b : "");
}

START_TEST(the_differences_are_named)
{
    struct fx x;
    fx_open(&x);
    ck_assert_int_eq(d_orbit_fleet_join(&x), -ORBIT_EGEOMETRY);
    said_has("join", "capacity 4", "8");
    ck_assert_int_eq(d_orbit_pool_open(&x), -ORBIT_EGEOMETRY);
    said_has("pool_open", "key_capacity 256", "512");
    ck_assert_int_eq(d_orbit_streams_open(&x), -ORBIT_EGEOMETRY);
    said_has("streams_open", "buffer_bytes 4096", "8192");
    ck_assert_int_eq(d_orbit_admission_open(&x), -ORBIT_EGEOMETRY);
    said_has("admission_open", "max_domains 16", "8");
    ck_assert_int_eq(d_orbit_arena_open(&x), -ORBIT_EGEOMETRY);
    said_has("arena_open", "slot_bytes 1024", "2048");
    char id[ORBIT_ID_TEXT_MAX];
    orbit_id_format(BOGUS, id, sizeof id);
    ck_assert_int_lt(d_orbit_pool_reserve(&x), 0);
    said_has("reserve", id, NULL);
    ck_assert_int_eq(d_orbit_fleet_observe(&x), -ENOENT);
    said_has("observe", x.missing, "no fleet");
    ck_assert_int_eq(d_orbit_pool_open_existing(&x), -ENOENT);
    said_has("open_existing", "kind 77", x.name);
    ck_assert_int_eq(d_orbit_pool_accept(&x), -ORBIT_ENOTRESERVED);
    said_has("accept", "accepted", NULL);
    fx_close(&x);
}
END_TEST

/* A /dev/shm too small for a table: the bytes asked and the bytes free, and where. */
START_TEST(out_of_memory_says_how_much_and_where)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=4m") != 0) {
            fprintf(stderr, "mount namespace: %s\n", strerror(errno));
            _exit(2);
        }
        setenv("ORBIT_HUGETLB_DIR", "", 1);
        struct orbit_fleet *f;
        struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
        o.capacity = 2;
        if (orbit_fleet_join("small-shm", &o, &f) != 0)
            _exit(3);
        struct orbit_arena_spec spec = { .kind = 200, .slot_bytes = 65536, .slots_per_lane = 64 };
        struct orbit_arena *a;
        /* 2 lanes of 4 MiB: the table opens (payload pages are taken as runs reach them), and a
         * run of a whole lane is more than the mount holds. */
        if (orbit_arena_open(f, &spec, &a) != 0)
            _exit(4);
        struct orbit_reservation r;
        int rc = orbit_arena_try_reserve(a, 64u * 65536u, &r);
        const char *s = orbit_last_error();
        printf("%d %s\n", rc, s);
        bool ok = rc == -ENOMEM && strncmp(s, "orbit_arena_try_reserve: ", 25) == 0 && strstr(s, "/dev/shm") &&
                  strstr(s, "bytes") && strstr(s, "free");
        _exit(ok ? 0 : 1);
    }
    ck_assert_int_eq(tu_wait_child(pid, 20000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("last_error");
    TCase *tc = tcase_create("walk");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, each_call_names_itself_and_its_cause_when_it_fails, 0, (int)N_WALKS);
    tcase_add_test(tc, every_call_that_can_fail_is_walked);
    tcase_add_test(tc, the_differences_are_named);
    tcase_add_test(tc, out_of_memory_says_how_much_and_where);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
