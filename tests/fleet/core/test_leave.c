/* SPDX-License-Identifier: MIT */
/*
 * A leave gives back what the leaving life holds exactly as a death report
 * does, at once and with no reconcile: a member (a process of its own)
 * reserves a unit of another member's resource, holds side B of that
 * member's stream and an admission claim, and leaves without bringing the
 * lease to the owner or releasing anything. Right after its leave the unit is
 * free (reservable again, the owner's late accept refused), the stream's
 * writer sees its reader gone, the claim's units are free, nothing is left to
 * that life, and the fleet counts a leave, not a death.
 */
#include <orbit/admission.h>
#include <orbit/inspect.h>
#include <orbit/pool.h>
#include <orbit/stream.h>
#include "testutil.h"

#define CAPACITY 4
#define DOMAIN   7

static const orbit_key KEY = { 0x1ea5e, 0x9e };
static const struct orbit_stream_spec STREAMS = { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8,
                                                  .buffer_bytes = 4096 };

struct owner { const char *name; struct orbit_fleet *f; struct orbit_pool *pool; orbit_id res;
               struct orbit_streams *st; struct orbit_endpoint *a; struct orbit_ticket ticket;
               struct orbit_admission *adm; };

/* What the leaver reports back over a pipe: its life and the lease it took. */
struct took { uint16_t node; uint64_t incarnation; struct orbit_lease lease; };

/* In the child: take a share of every table, say so, then leave on a byte from go. */
static _Noreturn void leaver(struct owner *o, int report, int go)
{
    alarm(30);
    struct orbit_fleet_opts fo = ORBIT_FLEET_OPTS_DEFAULT;
    fo.capacity = CAPACITY;
    fo.backing = tu_backing();
    struct orbit_fleet *f;
    struct orbit_pool *p;
    struct orbit_streams *st;
    struct orbit_endpoint *b;
    struct orbit_admission *adm;
    struct took t;
    const struct orbit_units u[] = { { DOMAIN, 4 } };
    struct orbit_demand d = { .claim = u, .n_claim = 1 };
    struct orbit_admit_result r;
    if (orbit_fleet_join(o->name, &fo, &f) != 0 || orbit_pool_open(f, NULL, &p) != 0 ||
        orbit_pool_reserve(p, o->res, &t.lease) != 0 || orbit_streams_open(f, &STREAMS, &st) != 0 ||
        orbit_streams_open_ticket(st, &o->ticket, &b) != 0 || orbit_admission_open(f, NULL, &adm) != 0 ||
        orbit_admission_try_claim(adm, &d, &r) != 0 || r.outcome != ORBIT_ADMIT_CLAIMED)
        _exit(1);
    t.node = orbit_fleet_node(f);
    t.incarnation = orbit_fleet_incarnation(f);
    char c;
    if (write(report, &t, sizeof t) != (ssize_t)sizeof t || read(go, &c, 1) != 1)
        _exit(2);
    /* The handles close; the lease, side B (never closed) and the claim are left as they are. */
    orbit_admission_close(adm);
    orbit_streams_close(st);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    if (write(report, "l", 1) != 1)
        _exit(3);
    pause();   /* alive: only the leave can have given anything back */
    _exit(0);
}

static void owner_open(struct owner *o)
{
    o->name = tu_fleet_name("leave");
    o->f = tu_join(o->name, CAPACITY, 0, 0, tu_backing());
    ck_assert_int_eq(orbit_pool_open(o->f, NULL, &o->pool), 0);
    ck_assert_int_eq(orbit_pool_register(o->pool, KEY, 1, &o->res), 0);
    ck_assert_int_eq(orbit_streams_open(o->f, &STREAMS, &o->st), 0);
    ck_assert_int_eq(orbit_streams_create(o->st, &o->a, &o->ticket), 0);
    ck_assert_int_eq(orbit_admission_open(o->f, NULL, &o->adm), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(o->adm, DOMAIN, 4), 0);
}

static uint64_t domain_used(struct orbit_admission *adm)
{
    struct orbit_domain_info d[4];
    ck_assert_int_eq(orbit_admission_domains(adm, d, 4), 1);
    return d[0].used;
}

START_TEST(a_leave_gives_back_what_the_life_holds_at_once)
{
    struct owner o;
    owner_open(&o);
    int report[2], go[2];
    ck_assert_int_eq(pipe(report), 0);
    ck_assert_int_eq(pipe(go), 0);
    fflush(NULL);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0)
        leaver(&o, report[1], go[0]);
    struct took t;
    ck_assert_int_eq(read(report[0], &t, sizeof t), (ssize_t)sizeof t);
    struct orbit_candidate c;
    ck_assert_int_eq(orbit_pool_candidates(o.pool, KEY, &c, 1), 1);
    ck_assert_uint_eq(c.reserved, 1);   /* held by the leaver */
    ck_assert_uint_eq(domain_used(o.adm), 4);
    ck_assert_int_eq(orbit_endpoint_peer_closed(o.a), 0);
    struct orbit_death_counters before;
    ck_assert_int_eq(orbit_fleet_death_counters(o.f, &before), 0);

    char c1 = 'g';
    ck_assert_int_eq(write(go[1], &c1, 1), 1);
    ck_assert_int_eq(read(report[0], &c1, 1), 1);   /* left, and still running */

    ck_assert_int_eq(orbit_pool_candidates(o.pool, KEY, &c, 1), 1);
    ck_assert_msg(c.reserved == 0, "the leaver's reservation is still pending after its leave");
    struct orbit_execution e;
    ck_assert_int_eq(orbit_pool_accept(o.pool, &t.lease, &e), -ORBIT_ENOTRESERVED);
    struct orbit_lease mine;
    ck_assert_int_eq(orbit_pool_reserve(o.pool, o.res, &mine), 0);   /* the unit is free again */
    ck_assert_int_eq(orbit_pool_accept(o.pool, &mine, &e), 0);
    orbit_execution_complete(&e);
    ck_assert_uint_eq(domain_used(o.adm), 0);
    ck_assert_int_eq(orbit_endpoint_peer_closed(o.a), 1);
    ck_assert_int_eq(orbit_endpoint_try_write(o.a, "x", 1), -ORBIT_EPEERGONE);
    struct orbit_reclaim left;
    ck_assert_int_eq(orbit_fleet_account(o.f, t.node, t.incarnation, &left), 0);
    ck_assert_uint_eq(left.pool_reserved + left.stream_sides + left.admission_claims, 0);
    struct orbit_death_counters after;
    ck_assert_int_eq(orbit_fleet_death_counters(o.f, &after), 0);
    ck_assert_uint_eq(after.leaves, before.leaves + 1);
    ck_assert_uint_eq(after.deaths_reported, before.deaths_reported);
    ck_assert_int_eq(orbit_fleet_reap(o.f), 0);   /* nothing left for a report */

    kill(kid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(kid, 5000), 128 + SIGKILL);
    orbit_endpoint_close(o.a);
    orbit_admission_close(o.adm);
    orbit_streams_close(o.st);
    orbit_pool_close(o.pool);
    orbit_fleet_leave(o.f);
    ck_assert_int_eq(orbit_fleet_unlink(o.name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("leave");
    TCase *tc = tcase_create("leave");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_leave_gives_back_what_the_life_holds_at_once);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
