/* SPDX-License-Identifier: MIT */
/*
 * The kill -9 scenario, on every table, with each backend: a
 * member holds pool resources with a reservation and a creation claim, both
 * sides of a stream with unread bytes, one side of a stream whose peer (in
 * another process) is parked reading, and admission claims; it is killed;
 * the reaper gives everything back. It also holds payload arena runs: one
 * reserved, one committed and unread, and one of the test's it is reading;
 * the report counts those three. 100 kills per backend, kill -> last
 * reclaim latency printed as p50/p99.
 */
#include <orbit/pool.h>
#include <orbit/stream.h>
#include <orbit/admission.h>
#include <orbit/exchange.h>
#include "death_util.h"

#define KILLS 100
#define CAPACITY 8
#define DOM_BYTES 1
#define DOM_SLOTS 2

static const orbit_key KEY = { 0x6f72626974ull, 0xdeadull };
static const struct orbit_pool_spec POOL_SPEC = { .kind = ORBIT_POOL_KIND, .key_capacity = 16,
                                                  .lane_capacity = 8, .generation_limit = 0 };
static const struct orbit_stream_spec STREAM_SPEC = { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8,
                                                      .buffer_bytes = 4096, .generation_limit = 0 };
static const struct orbit_admission_spec ADM_SPEC = { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4,
                                                      .max_claims = 64, .retained_max_bytes = 0 };

#define SLOT_BYTES 1024u
static const struct orbit_arena_spec ARENA_SPEC = { .kind = ORBIT_ARENA_KIND, .slot_bytes = SLOT_BYTES,
                                                    .slots_per_lane = 64 };
/* The victim's arena runs: reserved 3 slots, committed 5 slots, reading 1 slot of the test's. */
#define RESERVED_LEN  (2 * SLOT_BYTES + 1)
#define COMMITTED_LEN (4 * SLOT_BYTES + 7)
#define READ_LEN      100u
#define ARENA_CHUNKS  3u
#define ARENA_BYTES   ((3u + 5u + 1u) * SLOT_BYTES)

struct tables { struct orbit_fleet *f; struct orbit_pool *pool; struct orbit_streams *streams;
                struct orbit_admission *adm; struct orbit_arena *arena; };

/* Join and open the three tables; in a child any failure exits with code. */
static int tables_open(const char *fleet, struct tables *t)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.backing = tu_backing();
    int rc = orbit_fleet_join(fleet, &o, &t->f);
    if (rc == 0)
        rc = orbit_pool_open(t->f, &POOL_SPEC, &t->pool);
    if (rc == 0)
        rc = orbit_streams_open(t->f, &STREAM_SPEC, &t->streams);
    if (rc == 0)
        rc = orbit_admission_open(t->f, &ADM_SPEC, &t->adm);
    if (rc == 0)
        rc = orbit_arena_open(t->f, &ARENA_SPEC, &t->arena);
    return rc;
}

static void tables_close(struct tables *t)
{
    orbit_arena_close(t->arena);
    orbit_admission_close(t->adm);
    orbit_streams_close(t->streams);
    orbit_pool_close(t->pool);
    orbit_fleet_leave(t->f);
}

static bool claimed(struct orbit_admission *adm, const struct orbit_units *u, size_t n)
{
    struct orbit_demand d = { .claim = u, .n_claim = n };
    struct orbit_admit_result res;
    return orbit_admission_try_claim(adm, &d, &res) == 0 && res.outcome == ORBIT_ADMIT_CLAIMED;
}

/* Arena runs: one reserved, one committed unread, and the test's chunk (arg) taken to read. */
static bool hold_arena(struct orbit_arena *arena, const struct orbit_chunk_desc *theirs)
{
    struct orbit_reservation r1, r2;
    struct orbit_chunk_desc mine;
    struct orbit_chunk reading;
    if (orbit_arena_try_reserve(arena, RESERVED_LEN, &r1) != 0 ||
        orbit_arena_try_reserve(arena, COMMITTED_LEN, &r2) != 0)
        return false;
    memset(r2.data, 'c', COMMITTED_LEN);
    return orbit_arena_commit(&r2, COMMITTED_LEN, &mine) == 0 &&
           orbit_arena_consume(arena, theirs, &reading) == 0 && reading.len == READ_LEN;
}

/*
 * The victim: takes a share of every table, sends node, then the ticket of
 * side B of its second stream (id, epoch), and waits to be killed.
 */
static void victim(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    struct tables t;
    orbit_id id;
    struct orbit_lease lease;
    struct orbit_permit permit;
    struct orbit_endpoint *a1, *b1, *a2;
    struct orbit_ticket t1, t2;
    const struct orbit_units c1[] = { { DOM_BYTES, 300 }, { DOM_SLOTS, 2 } }, c2[] = { { DOM_BYTES, 100 } };
    if (tables_open(fleet, &t) != 0)
        _exit(90);
    if (orbit_pool_register(t.pool, KEY, 4, &id) != 0 || orbit_pool_reserve(t.pool, id, &lease) != 0 ||
        orbit_pool_claim_create(t.pool, KEY, 8, &permit) != 0)
        _exit(91);
    if (!claimed(t.adm, c1, 2) || !claimed(t.adm, c2, 1))
        _exit(92);
    if (!hold_arena(t.arena, arg))
        _exit(96);
    if (orbit_streams_create(t.streams, &a1, &t1) != 0 || orbit_streams_open_ticket(t.streams, &t1, &b1) != 0 ||
        orbit_endpoint_write_all(a1, "0123456789", 10, 1000) != 0 ||
        orbit_endpoint_write_all(b1, "abcdefghijklmnopqrst", 20, 1000) != 0 ||
        orbit_streams_create(t.streams, &a2, &t2) != 0)
        _exit(93);
    member_ready(ready_fd, orbit_fleet_node(t.f));
    member_ready(ready_fd, t2.id);
    member_ready(ready_fd, t2.epoch);
    member_command(cmd_fd);   /* killed while waiting here */
    _exit(0);
}

/* The peer: holds side B of the victim's second stream and parks reading it. */
static void peer(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    const struct orbit_ticket *ticket = arg;
    struct tables t;
    struct orbit_endpoint *b;
    char buf[16];
    if (tables_open(fleet, &t) != 0 || orbit_streams_open_ticket(t.streams, ticket, &b) != 0)
        _exit(94);
    member_ready(ready_fd, orbit_fleet_node(t.f));
    ssize_t r = orbit_endpoint_read(b, buf, sizeof buf, 20000);   /* parks until the victim's end */
    member_ready(ready_fd, (uint64_t)(int64_t)r);
    if (member_command(cmd_fd) != 'L')
        _exit(95);
    orbit_endpoint_close(b);
    tables_close(&t);
    _exit(0);
}

static uint64_t domain_used(struct orbit_admission *adm, uint32_t domain)
{
    struct orbit_domain_info info[4];
    ssize_t n = orbit_admission_domains(adm, info, 4);
    for (ssize_t i = 0; i < n && i < 4; i++)
        if (info[i].domain == domain)
            return info[i].used;
    ck_abort_msg("no domain %u", domain);
    return 0;
}

static bool owns_streams(struct orbit_streams *s, uint16_t node, uint64_t incarnation)
{
    struct orbit_owner o[CAPACITY * 2];
    ssize_t n = orbit_streams_owners(s, o, CAPACITY * 2);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n && i < CAPACITY * 2; i++)
        if (o[i].node == node && o[i].incarnation == incarnation)
            return true;
    return false;
}

/* What the victim holds, as the tables show it before the kill. */
static void check_held(struct tables *t, uint16_t node, uint64_t incarnation)
{
    uint32_t live, creating;
    ck_assert_int_eq(orbit_pool_candidates(t->pool, KEY, NULL, 0), 1);
    orbit_pool_budget(t->pool, KEY, &live, &creating);
    ck_assert_uint_eq(live, 1);
    ck_assert_uint_eq(creating, 1);
    ck_assert_uint_eq(domain_used(t->adm, DOM_BYTES), 400);
    ck_assert_uint_eq(domain_used(t->adm, DOM_SLOTS), 2);
    ck_assert(owns_streams(t->streams, node, incarnation));
    ck_assert_int_eq(orbit_arena_chunks(t->arena, NULL, 0), ARENA_CHUNKS);
}

/* Everything back after the death. */
static void check_reclaimed(struct tables *t, struct orbit_fleet *obs, uint16_t node, uint64_t incarnation)
{
    uint32_t live, creating;
    ck_assert_int_eq(orbit_pool_candidates(t->pool, KEY, NULL, 0), 0);
    orbit_pool_budget(t->pool, KEY, &live, &creating);
    ck_assert_uint_eq(live, 0);
    ck_assert_uint_eq(creating, 0);
    ck_assert_uint_eq(domain_used(t->adm, DOM_BYTES), 0);
    ck_assert_uint_eq(domain_used(t->adm, DOM_SLOTS), 0);
    ck_assert(!owns_streams(t->streams, node, incarnation));
    ck_assert_int_eq(orbit_arena_chunks(t->arena, NULL, 0), 0);   /* the test's chunk came back too */
    ck_assert_int_eq(node_info(obs, node).state, ORBIT_NODE_FREE);
}

static void check_report(const struct orbit_reaper_death *d, uint16_t node, uint64_t incarnation)
{
    ck_assert_uint_eq(d->node, node);
    ck_assert_uint_eq(d->incarnation, incarnation);
    ck_assert(d->accounted);
    ck_assert_uint_eq(d->reclaimed.tables, 4);
    ck_assert_uint_eq(d->reclaimed.pool_resources, 1);
    ck_assert_uint_eq(d->reclaimed.pool_units, 4);
    ck_assert_uint_eq(d->reclaimed.pool_leases, 1);
    ck_assert_uint_eq(d->reclaimed.pool_creating, 1);
    ck_assert_uint_eq(d->reclaimed.stream_sides, 3);
    ck_assert_uint_eq(d->reclaimed.stream_unread, 30);
    ck_assert_uint_eq(d->reclaimed.admission_claims, 2);
    ck_assert_uint_eq(d->reclaimed.admission_units, 402);
    ck_assert_uint_eq(d->reclaimed.arena_chunks, ARENA_CHUNKS);
    ck_assert_uint_eq(d->reclaimed.arena_bytes, ARENA_BYTES);
}

/* A plain chunk of the test's lane for the victim to read. */
static struct orbit_chunk_desc test_chunk(struct tables *t)
{
    struct orbit_reservation r;
    struct orbit_chunk_desc d;
    ck_assert_int_eq(orbit_arena_try_reserve(t->arena, READ_LEN, &r), 0);
    memset(r.data, 't', READ_LEN);
    ck_assert_int_eq(orbit_arena_commit(&r, READ_LEN, &d), 0);
    return d;
}

/* One kill: returns kill -> last reclaim in ns. */
static uint64_t one_kill(struct orbit_reaper *r, struct deaths *c, struct tables *t,
                         struct orbit_fleet *obs, const char *name)
{
    struct orbit_chunk_desc theirs = test_chunk(t);
    struct member v = member_fork(name, victim, &theirs);
    uint16_t node = (uint16_t)member_wait_ready(&v);
    struct orbit_ticket ticket = { .side = ORBIT_SIDE_B };
    ticket.id = member_wait_ready(&v);
    ticket.epoch = member_wait_ready(&v);
    struct member p = member_fork(name, peer, &ticket);
    member_wait_ready(&p);
    ck_assert_int_eq(orbit_reaper_rescan(r), 3);   /* the test, the victim and the peer */
    uint64_t incarnation = node_info(obs, node).incarnation;
    check_held(t, node, incarnation);

    int before = c->n;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(kill(v.pid, SIGKILL), 0);
    deaths_wait(r, c, before + 1, 10000);
    const struct orbit_reaper_death *d = &c->d[before];
    uint64_t latency = d->reclaimed_ns - (uint64_t)t0;
    if (getenv("DEATH_TRACE"))
        printf("kill->detect %lld us, detect->reclaimed %lld us\n",
               (long long)(d->detected_ns - (uint64_t)t0) / 1000,
               (long long)(d->reclaimed_ns - d->detected_ns) / 1000);
    check_report(d, node, incarnation);
    check_reclaimed(t, obs, node, incarnation);
    ck_assert_int_eq((int64_t)member_wait_ready(&p), -ORBIT_ERESET);   /* the parked peer woke */
    member_send(&p, 'L');
    ck_assert_int_eq(member_reap(&p), 0);
    ck_assert_int_eq(member_reap(&v), 128 + SIGKILL);
    return latency;
}

START_TEST(test_kill9_reclaims_every_table)
{
    struct orbit_reaper *r = death_open(_i);
    if (!r)
        return;
    struct deaths *c = calloc(1, sizeof *c);
    ck_assert_int_eq(orbit_reaper_on_death(r, deaths_collect, c, ORBIT_REAPER_ACCOUNT), 0);
    const char *name = tu_fleet_name("tables");
    struct tables t;
    ck_assert_int_eq(tables_open(name, &t), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(t.adm, DOM_BYTES, 1000), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(t.adm, DOM_SLOTS, 10), 0);
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_reaper_watch(r, name), 0);

    uint64_t lat[KILLS];
    for (int i = 0; i < KILLS; i++) {
        if (c->n >= DEATHS_MAX - 1)
            c->n = 0;
        lat[i] = one_kill(r, c, &t, obs, name);
    }
    ck_assert_int_eq(orbit_reaper_rescan(r), 1);   /* only the test itself is left */
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.deaths, KILLS);
    printf("death latency, every table (%s): kill -> last reclaim p50 %.1f us, p99 %.1f us over %d kills\n",
           orbit_reaper_backend_name(death_backends[_i]), (double)percentile(lat, KILLS, 0.50) / 1e3,
           (double)percentile(lat, KILLS, 0.99) / 1e3, KILLS);
    orbit_reaper_close(r);
    orbit_fleet_leave(obs);
    tables_close(&t);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    free(c);
}
END_TEST

static Suite *tables_suite(void)
{
    Suite *s = suite_create("death-tables");
    TCase *tc = tcase_create("scenario");
    tcase_set_timeout(tc, 240);
    TCase *bpf = tu_optional_tcase("bpf");
    tcase_set_timeout(bpf, 240);
    DEATH_ADD_BACKENDS(tc, bpf, test_kill9_reclaims_every_table);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, bpf);
    return s;
}

int main(void)
{
    return tu_run(tables_suite());
}
