/* SPDX-License-Identifier: MIT */
/*
 * The pool across real processes: contested creation claims, a million
 * reserve/accept/complete operations from two processes on one resource,
 * kill -9 of an owner then node_dead, a remote lease carried to its owner,
 * readiness in another process, and reservers killed mid-way.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <orbit/pool.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "pool/pool_layout.h"   /* the lock-repair test plays a half-finished insert */

static const orbit_key KEY = { 0xC0FFEE, 0 };
static const orbit_key KEY2 = { 0xBEEF, 2 };
static const orbit_key KEY3 = { 0xBEEF, 3 };
static const orbit_key KEY4 = { 0xBEEF, 4 };

/* ck_assert reports every passing check through a write(2): hot loops check quietly. */
#define QUIET_CHECK(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* Children report through exit codes: 0 ok, anything else names the step that failed. */
#define CHILD_CHECK(cond, code) \
    do { if (!(cond)) { fprintf(stderr, "child %d: %s failed (exit %d)\n", (int)getpid(), #cond, code); _exit(code); } } while (0)

static struct orbit_pool *open_pool(struct orbit_fleet *f)
{
    struct orbit_pool *p = NULL;
    int rc = orbit_pool_open(f, NULL, &p);
    ck_assert_msg(rc == 0, "pool open: %s", orbit_strerror(rc));
    return p;
}

/* In a forked child: join the fleet as node (or any) and open the default pool, or exit. */
static struct orbit_pool *child_pool(const char *name, int32_t node, uint64_t inc, struct orbit_fleet **f)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 16;
    o.node = node;
    o.incarnation = inc;
    o.backing = tu_backing();
    struct orbit_pool *p;
    if (orbit_fleet_join(name, &o, f) != 0)
        _exit(90);
    if (orbit_pool_open(*f, NULL, &p) != 0)
        _exit(91);
    return p;
}

static void read_exact(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
}

static uint32_t budget_creating(struct orbit_pool *p, orbit_key k)
{
    uint32_t live, creating;
    orbit_pool_budget(p, k, &live, &creating);
    return creating;
}

static uint32_t budget_live(struct orbit_pool *p, orbit_key k)
{
    uint32_t live, creating;
    orbit_pool_budget(p, k, &live, &creating);
    return live;
}

/* ---- 8 processes race claim_create(key, 3) ---- */

START_TEST(eight_processes_race_for_three_creation_claims)
{
    const char *name = tu_fleet_name("pclaim");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    struct tu_gate start, release;
    int results[2];
    tu_gate_init(&start);
    tu_gate_init(&release);
    ck_assert_int_eq(pipe(results), 0);
    pid_t kids[8];
    for (int i = 0; i < 8; i++) {
        kids[i] = fork();
        ck_assert_int_ge(kids[i], 0);
        if (kids[i] == 0) {
            struct orbit_fleet *cf;
            struct orbit_pool *cp = child_pool(name, -1, 0, &cf);
            struct orbit_permit permit;
            tu_gate_pass(&start);
            int rc = orbit_pool_claim_create(cp, KEY, 3, &permit);
            char r = rc == 0 ? 'W' : rc == -ORBIT_EBUDGET ? 'L' : 'E';
            CHILD_CHECK(write(results[1], &r, 1) == 1, 2);
            tu_gate_pass(&release);   /* hold the permit until every racer has tried */
            orbit_permit_finish(&permit);   /* a refused permit is finished already */
            orbit_pool_close(cp);
            orbit_fleet_leave(cf);
            _exit(0);
        }
    }
    tu_gate_open(&start, 8);
    int won = 0, lost = 0;
    for (int i = 0; i < 8; i++) {
        char r;
        read_exact(results[0], &r, 1);
        won += r == 'W';
        lost += r == 'L';
    }
    ck_assert_int_eq(won, 3);
    ck_assert_int_eq(lost, 5);
    ck_assert_uint_eq(budget_creating(p, KEY), 3);
    tu_gate_open(&release, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(tu_wait_child(kids[i], 30000), 0);
    ck_assert_uint_eq(budget_creating(p, KEY), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- two processes, a million operations, capacity 4 ---- */

#define HAMMER_OPS   1000000u  /* per process: two million in all */
#define HAMMER_CAP   4u
#define RING_SLOTS   16u

struct lease_ring {                 /* B -> A, in shared anonymous memory */
    _Atomic uint64_t head, tail;
    _Atomic uint64_t accepted;       /* of B's leases, those A has accepted */
    _Atomic int done;
    _Atomic uint32_t max_seen;
    struct orbit_lease slot[RING_SLOTS];
};

/* reserved + active of the only candidate, from one snapshot; records the maximum seen. */
static uint32_t in_use(struct orbit_pool *p, struct lease_ring *ring)
{
    struct orbit_candidate c;
    if (orbit_pool_candidates(p, KEY, &c, 1) != 1)
        return UINT32_MAX;
    uint32_t used = c.reserved + c.active, seen = atomic_load(&ring->max_seen);
    while (used > seen && !atomic_compare_exchange_weak(&ring->max_seen, &seen, used))
        ;
    return used;
}

static void hammer_reserver(const char *name, orbit_id id, struct lease_ring *ring)
{
    struct orbit_fleet *f;
    struct orbit_pool *p = child_pool(name, 1, 2, &f);
    orbit_set_spin_ns(50000);   /* the owner frees a unit within microseconds: spin before parking */
    for (uint32_t n = 0; n < HAMMER_OPS;) {
        uint32_t since;
        CHILD_CHECK(orbit_pool_version(p, KEY, &since) == 0, 3);
        struct orbit_lease lease;
        int rc = orbit_pool_reserve(p, id, &lease);
        if (rc == -ORBIT_EBUSY) {
            /* Capacity comes back only when the owner completes: park until the key moves. */
            CHILD_CHECK(orbit_pool_wait_capacity(p, KEY, since, 10000, NULL) == 0, 4);
            continue;
        }
        CHILD_CHECK(rc == 0, 5);
        CHILD_CHECK(in_use(p, ring) <= HAMMER_CAP, 6);
        uint64_t head = atomic_load(&ring->head);
        while (head - atomic_load(&ring->tail) == RING_SLOTS)
            sched_yield();   /* cannot happen with capacity 4; bounded by it */
        ring->slot[head % RING_SLOTS] = lease;
        atomic_store(&ring->head, head + 1);
        n++;
    }
    atomic_store(&ring->done, 1);
    /* A leave gives back the reservations this life still holds, as a death does: the
     * leases still on their way to the owner must be accepted first (bounded: 60 s). */
    for (int ms = 0; atomic_load(&ring->accepted) != HAMMER_OPS; ms++) {
        CHILD_CHECK(ms < 60000, 7);
        tu_sleep_ms(1);
    }
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    _exit(0);
}

static void accept_and_complete(struct orbit_pool *p, const struct orbit_lease *lease, struct lease_ring *ring)
{
    struct orbit_execution ex;
    int rc = orbit_pool_accept(p, lease, &ex);
    QUIET_CHECK(rc == 0, "accept: %s", orbit_strerror(rc));
    QUIET_CHECK(in_use(p, ring) <= HAMMER_CAP, "over capacity after accept");
    orbit_execution_complete(&ex);
}

START_TEST(two_processes_hammer_one_resource_of_capacity_four)
{
    const char *name = tu_fleet_name("phammer");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    struct lease_ring *ring = mmap(NULL, sizeof *ring, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(ring, MAP_FAILED);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, HAMMER_CAP, &id), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0)
        hammer_reserver(name, id, ring);
    /* The owner: accept and complete every lease B brings, and run its own in between. */
    uint32_t own = 0, theirs = 0;
    for (;;) {
        uint64_t tail = atomic_load(&ring->tail);
        if (tail != atomic_load(&ring->head)) {
            struct orbit_lease lease = ring->slot[tail % RING_SLOTS];
            atomic_store(&ring->tail, tail + 1);
            accept_and_complete(p, &lease, ring);
            atomic_fetch_add(&ring->accepted, 1);
            theirs++;
            continue;
        }
        if (own < HAMMER_OPS) {
            struct orbit_lease lease;
            int rc = orbit_pool_reserve(p, id, &lease);
            if (rc == -ORBIT_EBUSY)
                continue;   /* B holds the units: its leases are ours to complete */
            QUIET_CHECK(rc == 0, "reserve: %s", orbit_strerror(rc));
            QUIET_CHECK(in_use(p, ring) <= HAMMER_CAP, "over capacity after reserve");
            accept_and_complete(p, &lease, ring);
            own++;
            continue;
        }
        if (atomic_load(&ring->done) && atomic_load(&ring->tail) == atomic_load(&ring->head))
            break;
        sched_yield();
    }
    ck_assert_int_eq(tu_wait_child(kid, 120000), 0);
    ck_assert_uint_eq(own + theirs, 2 * HAMMER_OPS);
    ck_assert_uint_le(atomic_load(&ring->max_seen), HAMMER_CAP);
    ck_assert_uint_ge(atomic_load(&ring->max_seen), 1);
    struct orbit_candidate c;
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, &c, 1), 1);
    ck_assert_uint_eq(c.reserved + c.active, 0);
    munmap(ring, sizeof *ring);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- kill -9 of an owner that holds resources, units, claims, watches and a wait ---- */

static void owner_then_sleep(const char *name, int ready_fd)
{
    struct orbit_fleet *f;
    struct orbit_pool *p = child_pool(name, 1, 42, &f);
    orbit_id ids[3];
    struct orbit_lease lease;
    struct orbit_execution ex;
    struct orbit_permit permits[2];
    for (int i = 0; i < 3; i++) {
        CHILD_CHECK(orbit_pool_register(p, KEY, 2, &ids[i]) == 0, 10);
        CHILD_CHECK(orbit_pool_reserve(p, ids[i], &lease) == 0, 11);
        CHILD_CHECK(orbit_pool_accept(p, &lease, &ex) == 0, 12);   /* active, never completed */
    }
    CHILD_CHECK(orbit_pool_reserve(p, ids[0], &lease) == 0, 13);    /* reserved, never accepted */
    for (int i = 0; i < 2; i++)
        CHILD_CHECK(orbit_pool_claim_create(p, KEY2, 5, &permits[i]) == 0, 14);
    CHILD_CHECK(orbit_pool_watch(p, KEY3) == 0, 15);
    CHILD_CHECK(write(ready_fd, &ids[1], sizeof ids[1]) == (ssize_t)sizeof ids[1], 16);
    uint32_t since;
    CHILD_CHECK(orbit_pool_version(p, KEY4, &since) == 0, 17);
    orbit_pool_wait_capacity(p, KEY4, since, -1, NULL);   /* parked holding KEY4 until killed */
    _exit(18);
}

/* Everything the dead owner had is back: no unit, claim or key reference left. */
static void assert_owner_gone(struct orbit_pool *p, const struct orbit_lease *remote)
{
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, NULL, 0), 0);
    ck_assert_uint_eq(budget_live(p, KEY), 0);
    ck_assert_uint_eq(budget_creating(p, KEY2), 0);
    struct orbit_owner ow[4];
    ck_assert_int_eq(orbit_pool_owners(p, ow, 4), 0);
    ck_assert(!orbit_pool_is_current(p, remote));
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(p, &kt);
    ck_assert_uint_eq(kt.live, 0);   /* KEY..KEY4 all reclaimed: holds and watches returned */
    /* The budget is whole again: max_live claims fit. */
    struct orbit_permit pm[5];
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(orbit_pool_claim_create(p, KEY2, 5, &pm[i]), 0);
    for (int i = 0; i < 5; i++)
        orbit_permit_finish(&pm[i]);
}

static pid_t spawn_owner(const char *name, struct orbit_pool *p, struct orbit_lease *remote)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0)
        owner_then_sleep(name, ready[1]);
    orbit_id id;
    read_exact(ready[0], &id, sizeof id);
    close(ready[0]);
    close(ready[1]);
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, NULL, 0), 3);
    ck_assert_uint_eq(budget_live(p, KEY), 3);
    ck_assert_uint_eq(budget_creating(p, KEY2), 2);
    ck_assert_int_eq(orbit_pool_reserve(p, id, remote), 0);   /* a lease of ours on its resource */
    struct orbit_owner ow[4];
    ck_assert_int_eq(orbit_pool_owners(p, ow, 4), 1);
    ck_assert_uint_eq(ow[0].node, 1);
    ck_assert_uint_eq(ow[0].incarnation, 42);
    struct orbit_pool_key_table kt;
    for (int i = 0; i < 10000; i++) {   /* KEY4 exists once the child is in its wait */
        orbit_pool_key_table(p, &kt);
        if (kt.live == 4)
            break;
        tu_sleep_ms(1);
    }
    ck_assert_uint_eq(kt.live, 4);
    ck_assert_int_eq(kill(kid, SIGKILL), 0);
    ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
    return kid;
}

START_TEST(kill_minus_nine_then_node_dead_returns_every_unit_and_claim)
{
    const char *name = tu_fleet_name("pkill");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    struct orbit_lease remote;
    spawn_owner(name, p, &remote);
    /* Dead but not yet reported: the table still counts it. */
    ck_assert_uint_eq(budget_live(p, KEY), 3);
    orbit_pool_node_dead(p, 1, 41);   /* another life of node 1: its resources stay */
    ck_assert_uint_eq(budget_live(p, KEY), 3);
    orbit_pool_node_dead(p, 1, 42);
    assert_owner_gone(p, &remote);
    orbit_pool_node_dead(p, 1, 42);   /* reported twice: nothing more to return */
    assert_owner_gone(p, &remote);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(kill_minus_nine_then_a_fleet_reap_cleans_the_pool)
{
    const char *name = tu_fleet_name("preap");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    struct orbit_lease remote;
    spawn_owner(name, p, &remote);
    /* The fleet's own sweep finds the dead node and runs node_dead on the pool segment. */
    ck_assert_int_eq(orbit_fleet_reap(f), 1);
    assert_owner_gone(p, &remote);
    ck_assert_int_eq(orbit_fleet_reap(f), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- a remote lease carried to its owner ---- */

static void remote_caller(const char *name, int to_owner, int from_owner)
{
    struct orbit_fleet *f;
    struct orbit_pool *p = child_pool(name, 1, 7, &f);
    struct orbit_plan plan;
    CHILD_CHECK(orbit_pool_acquire(p, KEY, NULL, NULL, &plan) == 0, 20);
    CHILD_CHECK(plan.kind == ORBIT_PLAN_REMOTE_REUSE, 21);
    CHILD_CHECK(plan.lease.holder == 1 && plan.lease.holder_incarnation == 7, 22);
    struct orbit_execution ex;
    CHILD_CHECK(orbit_pool_accept(p, &plan.lease, &ex) == -ORBIT_ENOTOWNER, 23);
    uint32_t since;
    CHILD_CHECK(orbit_pool_version(p, KEY, &since) == 0, 24);
    CHILD_CHECK(write(to_owner, &plan.lease, sizeof plan.lease) == (ssize_t)sizeof plan.lease, 25);
    char ack;
    CHILD_CHECK(read(from_owner, &ack, 1) == 1 && ack == 'A', 26);
    struct orbit_candidate c;
    CHILD_CHECK(orbit_pool_candidates(p, KEY, &c, 1) == 1 && c.active == 1 && c.reserved == 0, 27);
    /* The owner completes: capacity returns and the key wakes us. */
    struct orbit_lease again;
    while (orbit_pool_reserve(p, plan.lease.id, &again) == -ORBIT_EBUSY) {
        CHILD_CHECK(orbit_pool_wait_capacity(p, KEY, since, 10000, &since) == 0, 28);
    }
    CHILD_CHECK(again.fence > plan.lease.fence, 29);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    _exit(0);
}

START_TEST(remote_lease_is_carried_to_the_owner_and_accepted_there)
{
    const char *name = tu_fleet_name("premote");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    int to_owner[2], from_owner[2];
    ck_assert_int_eq(pipe(to_owner), 0);
    ck_assert_int_eq(pipe(from_owner), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0)
        remote_caller(name, to_owner[1], from_owner[0]);
    struct orbit_lease lease;
    read_exact(to_owner[0], &lease, sizeof lease);
    ck_assert_uint_eq(lease.id, id);
    ck_assert(orbit_pool_is_current(p, &lease));
    struct orbit_execution ex, twice;
    ck_assert_int_eq(orbit_pool_accept(p, &lease, &ex), 0);
    ck_assert_int_eq(orbit_pool_accept(p, &lease, &twice), -ORBIT_ENOTRESERVED);
    char ack = 'A';
    ck_assert_int_eq(write(from_owner[1], &ack, 1), 1);
    /* Complete once the caller has seen the work running. */
    for (int i = 0; i < 10000; i++) {
        struct orbit_pool_key_info ki;
        ck_assert_int_eq(orbit_pool_keys(p, &ki, 1), 1);
        if (ki.refs >= 2)
            break;   /* the caller holds the key: it is in its wait */
        tu_sleep_ms(1);
    }
    orbit_execution_complete(&ex);
    ck_assert_int_eq(tu_wait_child(kid, 30000), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- readiness in another process ---- */

START_TEST(a_watching_process_is_signalled_through_its_readiness_fd)
{
    const char *name = tu_fleet_name("pready");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        struct orbit_fleet *cf;
        struct orbit_pool *cp = child_pool(name, 1, 9, &cf);
        int fd = orbit_pool_readiness(cp);
        CHILD_CHECK(fd >= 0, 30);
        CHILD_CHECK(orbit_pool_watch(cp, KEY) == 0, 31);   /* watch, then check, then wait */
        CHILD_CHECK(orbit_pool_candidates(cp, KEY, NULL, 0) == 0, 32);
        char c = 'R';
        CHILD_CHECK(write(ready[1], &c, 1) == 1, 33);
        struct pollfd pfd = { fd, POLLIN, 0 };
        CHILD_CHECK(poll(&pfd, 1, 20000) == 1, 34);
        CHILD_CHECK(orbit_readiness_drain(fd) == 0, 35);
        CHILD_CHECK(orbit_pool_candidates(cp, KEY, NULL, 0) == 1, 36);
        orbit_pool_close(cp);
        orbit_fleet_leave(cf);
        _exit(0);
    }
    char c;
    read_exact(ready[0], &c, 1);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    ck_assert_int_eq(tu_wait_child(kid, 30000), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- reservers killed at random points: the owner's reconcile gets every unit back ---- */

#define RESERVER_KILLS 12

static void endless_reserver(const char *name, int node, uint64_t inc, orbit_id id, int ready_fd)
{
    struct orbit_fleet *f;
    struct orbit_pool *p = child_pool(name, node, inc, &f);
    char c = 'R';
    CHILD_CHECK(write(ready_fd, &c, 1) == 1, 40);
    /* Reserve forever and bring nothing to the owner: only its aging frees these units. */
    for (;;) {
        struct orbit_lease l;
        int rc = orbit_pool_reserve(p, id, &l);
        CHILD_CHECK(rc == 0 || rc == -ORBIT_EBUSY, 41);
    }
}

START_TEST(reservers_killed_mid_way_leak_nothing_past_reconcile)
{
    const char *name = tu_fleet_name("pabandon");
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p = open_pool(f);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 8, &id), 0);
    uint64_t seed = (uint64_t)getpid() * 2654435761u;
    for (int round = 0; round < RESERVER_KILLS; round++) {
        int node = 1 + round % 8, ready[2];
        uint64_t inc = 1000 + (uint64_t)round;
        ck_assert_int_eq(pipe(ready), 0);
        pid_t kid = fork();
        ck_assert_int_ge(kid, 0);
        if (kid == 0)
            endless_reserver(name, node, inc, id, ready[1]);
        char c;
        read_exact(ready[0], &c, 1);
        close(ready[0]);
        close(ready[1]);
        /* Age everything while it reserves, so it keeps reserving, for a random while. */
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t until = tu_now_ns() + (int64_t)((seed >> 33) % 3000000);
        while (tu_now_ns() < until)
            ck_assert_int_eq(orbit_pool_reconcile(p, id, 0, 0), 0);
        kill(kid, SIGKILL);
        ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
        ck_assert_int_eq(orbit_fleet_node_dead(f, (uint16_t)node, inc), 0);
        /* Grace 0, twice: an entry caught unstamped is stamped by the first and aged by the second. */
        ck_assert_int_eq(orbit_pool_reconcile(p, id, 0, 0), 0);
        tu_sleep_ms(2);
        ck_assert_int_eq(orbit_pool_reconcile(p, id, 0, 0), 0);
        struct orbit_candidate cand;
        ck_assert_int_eq(orbit_pool_candidates(p, KEY, &cand, 1), 1);
        ck_assert_uint_eq(cand.reserved + cand.active, 0);
    }
    /* All eight units usable again. */
    struct orbit_lease l[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(orbit_pool_reserve(p, id, &l[i]), 0);
    ck_assert_int_eq(orbit_pool_reserve(p, id, &l[0]), -ORBIT_EBUSY);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- two processes churn eight keys through an eight-slot key table ---- */

static struct orbit_pool *child_pool_spec(const char *name, int32_t node, uint64_t inc,
                                          const struct orbit_pool_spec *spec, struct orbit_fleet **f)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 16;
    o.node = node;
    o.incarnation = inc;
    o.backing = tu_backing();
    struct orbit_pool *p;
    if (orbit_fleet_join(name, &o, f) != 0)
        _exit(90);
    if (orbit_pool_open(*f, spec, &p) != 0)
        _exit(91);
    return p;
}

static orbit_key key_n(uint64_t n) { return (orbit_key){ n * 0x9e3779b97f4a7c15ull + 1, n }; }

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void key_churner(const char *name, int node, const struct orbit_pool_spec *spec, struct tu_gate *g)
{
    struct orbit_fleet *f;
    struct orbit_pool *p = child_pool_spec(name, node, 500 + (uint64_t)node, spec, &f);
    uint64_t seed = 0x1234567ull * (uint64_t)(node + 1);
    tu_gate_pass(g);
    for (int i = 0; i < 60000; i++) {
        uint64_t r = rng_next(&seed);
        orbit_key k = key_n(r % 8);
        orbit_id id;
        struct orbit_permit pm;
        struct orbit_lease l;
        struct orbit_execution ex;
        uint32_t v;
        int rc;
        switch ((r >> 8) % 4) {
        case 0:
            CHILD_CHECK(orbit_pool_register(p, k, 1, &id) == 0, 50);
            CHILD_CHECK(orbit_pool_candidates(p, k, NULL, 0) >= 1, 51);
            CHILD_CHECK(orbit_pool_reserve(p, id, &l) == 0, 52);
            CHILD_CHECK(orbit_pool_accept(p, &l, &ex) == 0, 53);
            orbit_execution_complete(&ex);
            CHILD_CHECK(orbit_pool_unregister(p, id) == 0, 54);
            break;
        case 1:
            rc = orbit_pool_claim_create(p, k, 100, &pm);
            if (rc != 0)
                fprintf(stderr, "claim_create: %s\n", orbit_strerror(rc));
            CHILD_CHECK(rc == 0, 55);
            orbit_permit_finish(&pm);
            break;
        case 2:
            CHILD_CHECK(orbit_pool_version(p, k, &v) == 0, 56);
            orbit_pool_wait_capacity(p, k, v, 0, &v);   /* times out or sees a change: both fine */
            break;
        default:
            CHILD_CHECK(orbit_pool_watch(p, k) == 0, 58);
            break;
        }
    }
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    _exit(0);
}

START_TEST(two_processes_churn_keys_through_a_full_key_table)
{
    const char *name = tu_fleet_name("pchurn");
    struct orbit_pool_spec spec = { .kind = 230, .key_capacity = 8, .lane_capacity = 64, .generation_limit = 0 };
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    struct tu_gate g;
    tu_gate_init(&g);
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        ck_assert_int_ge(kids[i], 0);
        if (kids[i] == 0)
            key_churner(name, i + 1, &spec, &g);
    }
    tu_gate_open(&g, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(tu_wait_child(kids[i], 120000), 0);
    /* Watches may still hold keys: a change delivers them; then every key is gone. */
    for (uint64_t k = 0; k < 8; k++) {
        orbit_id id;
        ck_assert_int_eq(orbit_pool_register(p, key_n(k), 1, &id), 0);
        ck_assert_int_eq(orbit_pool_unregister(p, id), 0);
        uint32_t live, creating;
        orbit_pool_budget(p, key_n(k), &live, &creating);
        ck_assert_uint_eq(live + creating, 0);
    }
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(p, &kt);
    ck_assert_uint_eq(kt.live, 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- a process killed while it may hold the key-table lock ---- */

#define LOCK_KILLS 10

START_TEST(a_process_killed_holding_the_key_lock_leaves_the_table_usable)
{
    const char *name = tu_fleet_name("plock");
    struct orbit_pool_spec spec = { .kind = 231, .key_capacity = 16, .lane_capacity = 64, .generation_limit = 0 };
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < LOCK_KILLS; round++) {
        int ready[2];
        ck_assert_int_eq(pipe(ready), 0);
        pid_t kid = fork();
        ck_assert_int_ge(kid, 0);
        if (kid == 0) {
            struct orbit_fleet *cf;
            struct orbit_pool *cp = child_pool_spec(name, 1, 700 + (uint64_t)round, &spec, &cf);
            char c = 'R';
            CHILD_CHECK(write(ready[1], &c, 1) == 1, 60);
            /* Every register inserts a fresh key (under the lock), every unregister reclaims it. */
            for (uint64_t n = 1000000 * (uint64_t)(round + 1);; n++) {
                orbit_id id;
                CHILD_CHECK(orbit_pool_register(cp, key_n(n), 1, &id) == 0, 61);
                CHILD_CHECK(orbit_pool_unregister(cp, id) == 0, 62);
            }
        }
        char c;
        read_exact(ready[0], &c, 1);
        close(ready[0]);
        close(ready[1]);
        seed = rng_next(&seed);
        struct timespec ts = { 0, (long)(seed % 3000000) };
        nanosleep(&ts, NULL);
        kill(kid, SIGKILL);
        ck_assert_int_eq(tu_wait_child(kid, 10000), 128 + SIGKILL);
        ck_assert_int_eq(orbit_fleet_node_dead(f, 1, 700 + (uint64_t)round), 0);
        /* An insert takes the lock: recovered if the child died holding it. */
        orbit_id id;
        ck_assert_int_eq(orbit_pool_register(p, key_n((uint64_t)round), 1, &id), 0);
        ck_assert_int_eq(orbit_pool_unregister(p, id), 0);
        /* No slot is left half-inserted: every non-free slot is a listed key. */
        struct orbit_pool_key_table kt;
        orbit_pool_key_table(p, &kt);
        ck_assert_int_eq(orbit_pool_keys(p, NULL, 0), kt.live);
    }
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- the same, made certain: a child dies holding the lock with a slot half-inserted ---- */

START_TEST(a_lock_holder_that_died_mid_insert_is_repaired_by_the_next_locker)
{
    const char *name = tu_fleet_name("prepair");
    struct orbit_pool_spec spec = { .kind = 232, .key_capacity = 4, .lane_capacity = 64, .generation_limit = 0 };
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        struct orbit_fleet *cf;
        struct orbit_pool *cp = child_pool_spec(name, 1, 800, &spec, &cf);
        CHILD_CHECK(pool_key_lock(cp) == 0, 70);
        /* What an insert looks like between its first and last store, in every slot. */
        for (uint32_t i = 0; i < 4; i++) {
            struct pool_key *k = pool_key_at(cp, i);
            atomic_store(&k->tag, KEY_TAG(KEY_TAG_SEQ(atomic_load(&k->tag)) + 1, KEY_CLAIMING));
            atomic_store(&k->refs, 1);
        }
        _exit(0);   /* dies holding the robust lock */
    }
    ck_assert_int_eq(tu_wait_child(kid, 10000), 0);
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(p, &kt);
    ck_assert_uint_eq(kt.live, 4);   /* four half-inserted slots: the table looks full */
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);   /* takes the lock: EOWNERDEAD, repair */
    orbit_pool_key_table(p, &kt);
    ck_assert_uint_eq(kt.live, 1);
    ck_assert_int_eq(orbit_pool_keys(p, NULL, 0), 1);
    ck_assert_int_eq(orbit_pool_unregister(p, id), 0);
    /* The lock is consistent again: more inserts work. */
    for (uint64_t n = 0; n < 4; n++)
        ck_assert_int_eq(orbit_pool_register(p, key_n(n), 1, &id), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- the key lock: bounded and validated ---- */

/*
 * Garbage over the key lock's word: an insert answers -ORBIT_ECORRUPT at
 * once instead of blocking (in a child the parent bounds: a hang fails the
 * test); lookups of existing keys never lock and keep working; the owner's
 * reset_all starts the lock over.
 */
START_TEST(garbage_over_the_key_lock_is_refused_not_waited_on)
{
    const char *name = tu_fleet_name("pgarbage");
    struct orbit_pool_spec spec = { .kind = 233, .key_capacity = 16, .lane_capacity = 64 };
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        struct orbit_fleet *cf;
        struct orbit_pool *cp = child_pool_spec(name, 1, 900, &spec, &cf);
        memset(cp->hdr->key_lock.bytes, 0xa5, 16);
        orbit_id other;
        CHILD_CHECK(orbit_pool_register(cp, key_n(77), 1, &other) == -ORBIT_ECORRUPT, 80);
        CHILD_CHECK(orbit_pool_candidates(cp, KEY, NULL, 0) == 1, 81);
        _exit(0);
    }
    ck_assert_int_eq(tu_wait_child(kid, 10000), 0);
    orbit_pool_reset_all(p);
    ck_assert_int_eq(orbit_pool_register(p, key_n(78), 1, &id), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

struct blocked_insert { struct orbit_pool *p; int rc; _Atomic int done; };

static void *insert_thread(void *arg)
{
    struct blocked_insert *b = arg;
    orbit_id id;
    b->rc = orbit_pool_register(b->p, key_n(4242), 1, &id);
    atomic_store(&b->done, 1);
    return NULL;
}

/*
 * An insert blocked behind a holder that is then killed -9 (a zombie, not
 * yet reaped) takes the lock over and finishes within the bound; a live
 * holder that never lets go ends the insert with -ORBIT_ECORRUPT.
 */
START_TEST(a_waiter_takes_over_the_key_lock_of_a_holder_killed_mid_lock)
{
    const char *name = tu_fleet_name("ptakeover");
    struct orbit_pool_spec spec = { .kind = 234, .key_capacity = 16, .lane_capacity = 64 };
    struct orbit_fleet *f = tu_join(name, 16, 0, 1, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        struct orbit_fleet *cf;
        struct orbit_pool *cp = child_pool_spec(name, 1, 901, &spec, &cf);
        CHILD_CHECK(pool_key_lock(cp) == 0, 90);
        raise(SIGSTOP);
        _exit(91);
    }
    int st;
    ck_assert_int_eq(waitpid(kid, &st, WUNTRACED), kid);
    ck_assert(WIFSTOPPED(st));
    ck_assert_int_eq(orb_lock_holder(&p->hdr->key_lock.l), kid);
    orbit_id id;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_pool_register(p, key_n(4241), 1, &id), -ORBIT_ECORRUPT);
    ck_assert_int_lt(tu_now_ns() - t0, 20000000000);   /* the bound, not forever */
    struct blocked_insert b = { .p = p };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, insert_thread, &b), 0);
    tu_sleep_ms(50);
    ck_assert_int_eq(atomic_load(&b.done), 0);
    kill(kid, SIGKILL);
    for (int i = 0; i < 500 && !atomic_load(&b.done); i++)
        tu_sleep_ms(2);
    ck_assert_int_eq(atomic_load(&b.done), 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_int_eq(waitpid(kid, &st, 0), kid);
    ck_assert_int_eq(orb_lock_holder(&p->hdr->key_lock.l), 0);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-fleet");
    /* One case per test: CK_RUN_CASE=<name> runs one alone. */
    const struct { const char *name; const TTest *test; } tests[] = {
        { "eight_processes_race_for_three_creation_claims", eight_processes_race_for_three_creation_claims },
        { "two_processes_hammer_one_resource_of_capacity_four", two_processes_hammer_one_resource_of_capacity_four },
        { "kill_minus_nine_then_node_dead_returns_every_unit_and_claim", kill_minus_nine_then_node_dead_returns_every_unit_and_claim },
        { "kill_minus_nine_then_a_fleet_reap_cleans_the_pool", kill_minus_nine_then_a_fleet_reap_cleans_the_pool },
        { "remote_lease_is_carried_to_the_owner_and_accepted_there", remote_lease_is_carried_to_the_owner_and_accepted_there },
        { "a_watching_process_is_signalled_through_its_readiness_fd", a_watching_process_is_signalled_through_its_readiness_fd },
        { "reservers_killed_mid_way_leak_nothing_past_reconcile", reservers_killed_mid_way_leak_nothing_past_reconcile },
        { "two_processes_churn_keys_through_a_full_key_table", two_processes_churn_keys_through_a_full_key_table },
        { "a_process_killed_holding_the_key_lock_leaves_the_table_usable", a_process_killed_holding_the_key_lock_leaves_the_table_usable },
        { "a_lock_holder_that_died_mid_insert_is_repaired_by_the_next_locker", a_lock_holder_that_died_mid_insert_is_repaired_by_the_next_locker },
        { "garbage_over_the_key_lock_is_refused_not_waited_on", garbage_over_the_key_lock_is_refused_not_waited_on },
        { "a_waiter_takes_over_the_key_lock_of_a_holder_killed_mid_lock", a_waiter_takes_over_the_key_lock_of_a_holder_killed_mid_lock },
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return tu_run(s);
}
