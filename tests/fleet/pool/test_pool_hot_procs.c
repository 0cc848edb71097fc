/* SPDX-License-Identifier: MIT */
/*
 * The pool's hot path across real processes: three reserver processes and
 * the owner on one resource never over-admit, every lease (young or lapped)
 * is accepted once; a free entry left showing a fence is skipped by reserves
 * until the owner's reconcile clears it.
 */
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <orbit/pool.h>
#include "testutil.h"
#include "pool/pool_layout.h"   /* the stale-entry test plays a bad writer */

static const orbit_key KEY = { 0x40770, 7 };

#define QUIET_CHECK(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)
#define CHILD_CHECK(cond, code) \
    do { if (!(cond)) { fprintf(stderr, "child %d: %s failed (exit %d)\n", (int)getpid(), #cond, code); _exit(code); } } while (0)

enum { RESERVERS = 3, OPS = 20000, CAP = 3, LEASES = RESERVERS * OPS, DEFER_EVERY = 97 };

struct board {                      /* reservers -> owner, in shared anonymous memory */
    _Atomic int held;               /* units reservers hold: from reserve until the owner completes */
    _Atomic int most;
    _Atomic uint32_t next;
    _Atomic int accepted_all;       /* the owner took every lease: reservers may leave now */
    _Atomic uint8_t ready[LEASES];
    struct orbit_lease lease[LEASES];
};

static struct orbit_pool *open_pool(struct orbit_fleet *f)
{
    struct orbit_pool *p = NULL;
    int rc = orbit_pool_open(f, NULL, &p);
    ck_assert_msg(rc == 0, "pool open: %s", orbit_strerror(rc));
    return p;
}

static void reserver(const char *name, int node, orbit_id id, struct board *b)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.node = node;
    o.incarnation = (uint64_t)node + 10;
    o.backing = tu_backing();
    struct orbit_fleet *f;
    struct orbit_pool *p;
    CHILD_CHECK(orbit_fleet_join(name, &o, &f) == 0, 90);
    CHILD_CHECK(orbit_pool_open(f, NULL, &p) == 0, 91);
    for (int n = 0; n < OPS;) {
        struct orbit_lease l;
        int rc = orbit_pool_reserve(p, id, &l);
        if (rc == -ORBIT_EBUSY) {
            sched_yield();
            continue;
        }
        CHILD_CHECK(rc == 0, 2);
        int held = atomic_fetch_add(&b->held, 1) + 1, most = atomic_load(&b->most);
        while (held > most && !atomic_compare_exchange_weak(&b->most, &most, held))
            ;
        uint32_t i = atomic_fetch_add(&b->next, 1);
        CHILD_CHECK(i < LEASES, 3);
        b->lease[i] = l;
        atomic_store(&b->ready[i], 1);
        n++;
    }
    /* A leave gives back the life's unaccepted reservations: stay until the owner took them. */
    int64_t deadline = tu_now_ns() + 210 * 1000000000ll;
    while (!atomic_load(&b->accepted_all) && tu_now_ns() < deadline)
        tu_sleep_ms(1);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    _exit(0);
}

static void accept_once(struct orbit_pool *p, struct board *b, const struct orbit_lease *l, uint32_t i)
{
    struct orbit_execution ex, dup;
    int rc = orbit_pool_accept(p, l, &ex);
    QUIET_CHECK(rc == 0, "lease %u (fence %llu): accept: %s", i, (unsigned long long)l->fence, orbit_strerror(rc));
    rc = orbit_pool_accept(p, l, &dup);
    QUIET_CHECK(rc == -ORBIT_ENOTRESERVED, "lease %u: second accept: %s", i, orbit_strerror(rc));
    atomic_fetch_sub(&b->held, 1);   /* before the unit goes back: never counts low */
    orbit_execution_complete(&ex);
}

START_TEST(three_reserver_processes_never_over_admit_and_each_lease_is_accepted_once)
{
    const char *name = tu_fleet_name("phot");
    struct orbit_fleet *f = tu_join(name, 8, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    struct board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(b, MAP_FAILED);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, CAP, &id), 0);
    pid_t kids[RESERVERS];
    for (int k = 0; k < RESERVERS; k++) {
        kids[k] = fork();
        ck_assert_int_ge(kids[k], 0);
        if (kids[k] == 0)
            reserver(name, k + 1, id, b);
    }
    /* Every DEFER_EVERY-th lease waits until 20 later ones went through: it is lapped by then. */
    struct orbit_lease deferred = { 0 };
    uint32_t deferred_at = 0, lapped = 0;
    bool holding = false;
    int64_t deadline = tu_now_ns() + 200 * 1000000000ll;
    for (uint32_t i = 0; i < LEASES; i++) {
        while (!atomic_load(&b->ready[i])) {
            QUIET_CHECK(tu_now_ns() < deadline, "lease %u never came", i);
            sched_yield();
        }
        struct orbit_lease l = b->lease[i];
        if (!holding && i % DEFER_EVERY == 0) {
            deferred = l;
            deferred_at = i;
            holding = true;
            continue;
        }
        accept_once(p, b, &l, i);
        if (holding && i - deferred_at >= 20) {
            accept_once(p, b, &deferred, deferred_at);
            holding = false;
            lapped++;
        }
    }
    if (holding)
        accept_once(p, b, &deferred, deferred_at);
    atomic_store(&b->accepted_all, 1);
    for (int k = 0; k < RESERVERS; k++)
        ck_assert_int_eq(tu_wait_child(kids[k], 60000), 0);
    ck_assert_int_le(atomic_load(&b->most), CAP);
    ck_assert_int_ge(atomic_load(&b->most), 1);
    ck_assert_uint_ge(lapped, LEASES / DEFER_EVERY / 2);
    struct orbit_candidate c;
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, &c, 1), 1);
    ck_assert_uint_eq(c.reserved, 0);
    ck_assert_uint_eq(c.active, 0);
    munmap(b, sizeof *b);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

static void cycle(struct orbit_pool *p, orbit_id id, uint64_t *fence)
{
    struct orbit_lease l;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_reserve(p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(p, &l, &ex), 0);
    orbit_execution_complete(&ex);
    *fence = l.fence;
}

START_TEST(a_free_entry_left_showing_a_fence_is_skipped_until_reconcile_clears_it)
{
    const char *name = tu_fleet_name("pstale");
    struct orbit_fleet *f = tu_join(name, 8, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    orbit_id id;
    uint64_t fence;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    cycle(p, id, &fence);
    struct pool_resource *r = pool_res_at(p, (uint64_t)orbit_id_node(id) * p->geo.lane_capacity + orbit_id_slot(id));
    /* An accept cut short after its CAS leaves the next entry showing an old fence. */
    uint32_t stale = (uint32_t)((fence + 1) % POOL_PENDING);
    atomic_store(&r->pending[stale].fence, fence);
    for (int lap = 0; lap < 2; lap++) {
        uint64_t next;
        cycle(p, id, &next);
        ck_assert_uint_eq(next, fence + 2);   /* the stale entry's fence is skipped */
        fence = next;
        for (unsigned i = 0; i < POOL_PENDING - 2; i++)
            cycle(p, id, &fence);
        ck_assert_uint_eq((fence + 1) % POOL_PENDING, stale);
    }
    ck_assert_int_eq(orbit_pool_reconcile(p, id, 0, 60000), 0);
    ck_assert_uint_eq(atomic_load(&r->pending[stale].fence), 0);
    uint64_t next;
    cycle(p, id, &next);
    ck_assert_uint_eq(next, fence + 1);   /* taken again */
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-hot-procs");
    TCase *tc = tcase_create("procs");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, three_reserver_processes_never_over_admit_and_each_lease_is_accepted_once);
    tcase_add_test(tc, a_free_entry_left_showing_a_fence_is_skipped_until_reconcile_clears_it);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
