/* SPDX-License-Identifier: MIT */
/*
 * Multi-process tests of the admission ledger: contested random claims from 4
 * processes, racing claims checked against the racers' own count, kill -9 of a holder, kill -9 inside the ledger mutex, and a
 * deferred claimer in another process woken by a release (futex and io_uring).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <orbit/admission.h>
#include <orbit/reaper.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "admission/adm_layout.h"

#define PARK_ENV "ORBIT_TEST_ADMISSION_PARK_IN_MUTEX"

/* ---- helpers (children report through exit codes; no Check asserts there) ---- */

/* Children open the parent's ledger with the spec it was created with. */
static int child_open(const char *name, int32_t node, uint64_t inc, struct orbit_fleet **f,
                      struct orbit_admission **a)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.node = node;
    o.incarnation = inc;
    o.backing = tu_backing();
    int rc = orbit_fleet_join(name, &o, f);
    if (rc == 0 && (rc = orbit_admission_open_existing(*f, ORBIT_ADMISSION_KIND, a)) < 0)
        orbit_fleet_leave(*f);
    return rc;
}

static void child_close(struct orbit_fleet *f, struct orbit_admission *a)
{
    orbit_admission_close(a);
    orbit_fleet_leave(f);
}

static struct orbit_admission *parent_open(const char *name, struct orbit_fleet **f, uint64_t retained)
{
    *f = tu_join(name, 8, 0, 1000, tu_backing());
    struct orbit_admission_spec spec = ORBIT_ADMISSION_SPEC_DEFAULT;
    spec.retained_max_bytes = retained;
    struct orbit_admission *a;
    ck_assert_int_eq(orbit_admission_open(*f, &spec, &a), 0);
    return a;
}

static uint64_t used_of(struct orbit_admission *a, uint32_t dom)
{
    struct orbit_domain_info d[16];
    ssize_t n = orbit_admission_domains(a, d, 16);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n && i < 16; i++)
        if (d[i].domain == dom)
            return d[i].used;
    ck_abort_msg("domain %u missing", dom);
    return 0;
}

static struct orbit_admission_info info_of(struct orbit_admission *a)
{
    struct orbit_admission_info in;
    ck_assert_int_eq(orbit_admission_info(a, &in), 0);
    return in;
}

/* The process's scheduler state letter from /proc/<pid>/stat ('S' sleeping...). */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Bounded: until the other process armed the wake word and sleeps. */
static void until_parked(struct orbit_admission *a, pid_t pid)
{
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&a->ledger->change.parked) == 1 && proc_state(pid) == 'S')
            return;
        tu_sleep_ms(1);
    }
    ck_abort_msg("process %d never parked", (int)pid);
}

/* ---- 4 processes, 100,000 random multi-domain rounds in all ------------- */

#define STRESS_PROCS   4
#define STRESS_ROUNDS  100000
#define STRESS_HOLD    3
#define STRESS_RETAIN  20
static const uint32_t stress_dom[3] = { 100, 200, 300 };
static const uint64_t stress_cap[3] = { 12, 8, 5 };

struct stress_report { long claimed, released, deferred, skipped, rejected, waits; };

struct holding { struct orbit_claim c[STRESS_HOLD]; uint64_t units[STRESS_HOLD][3]; int n; };

/* Every domain within capacity, and covering at least what this process holds. */
static int stress_check(struct orbit_admission *a, const struct holding *h)
{
    struct orbit_domain_info d[4];
    if (orbit_admission_domains(a, d, 4) != 3)
        return 10;
    for (int i = 0; i < 3; i++) {
        uint64_t mine = 0;
        for (int k = 0; k < h->n; k++)
            mine += h->units[k][i];
        if (d[i].domain != stress_dom[i] || d[i].used > d[i].capacity || d[i].used < mine)
            return 11;
    }
    return orbit_admission_retained_bytes(a) <= STRESS_RETAIN ? 0 : 12;
}

static int stress_release_oldest(struct orbit_admission *a, struct holding *h, struct stress_report *rep)
{
    if (orbit_admission_release(a, &h->c[0]) != 0)
        return 13;
    h->n--;
    memmove(&h->c[0], &h->c[1], sizeof h->c[0] * (size_t)h->n);
    memmove(&h->units[0], &h->units[1], sizeof h->units[0] * (size_t)h->n);
    rep->released++;
    return 0;
}

/* A random demand on 1..3 distinct domains; now and then one entry above capacity. */
static size_t stress_demand(unsigned *seed, struct orbit_units *u, uint64_t *per_dom, uint64_t *fee, bool *too_big)
{
    size_t n = 0;
    *fee = 0;
    *too_big = rand_r(seed) % 64 == 0;
    int first = rand_r(seed) % 3, count = 1 + rand_r(seed) % 3;
    memset(per_dom, 0, sizeof(uint64_t) * 3);
    for (int k = 0; k < count; k++) {
        int i = (first + k) % 3;
        uint64_t units = 1 + (uint64_t)rand_r(seed) % (stress_cap[i] / 2);
        if (*too_big && k == 0)
            units = stress_cap[i] + 1;
        u[n++] = (struct orbit_units){ stress_dom[i], units };
        per_dom[i] = units;
        *fee += units;
    }
    if (rand_r(seed) % 4 != 0)
        *fee = 0;   /* three in four are ordinary claims */
    return n;
}

static int stress_round(struct orbit_admission *a, unsigned *seed, struct holding *h, struct stress_report *rep)
{
    struct orbit_units u[3];
    uint64_t per_dom[3], fee;
    bool too_big;
    size_t n = stress_demand(seed, u, per_dom, &fee, &too_big);
    struct orbit_demand d = { .claim = u, .n_claim = n, .retained_bytes = fee };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(a, &d, &r) != 0)
        return 20;
    if (too_big != (r.outcome == ORBIT_ADMIT_REJECTED))
        return 21;
    switch (r.outcome) {
    case ORBIT_ADMIT_CLAIMED:
        rep->claimed++;
        if (h->n == STRESS_HOLD && stress_release_oldest(a, h, rep))
            return 22;
        h->c[h->n] = r.claim;
        memcpy(h->units[h->n++], per_dom, sizeof per_dom);
        return 0;
    case ORBIT_ADMIT_DEFERRED:
        rep->deferred++;
        if (h->n > 0)
            return stress_release_oldest(a, h, rep);
        /* Holding nothing: whoever blocks us holds claims and never waits, so a release comes. */
        rep->waits++;
        return orbit_admission_wait(a, r.release_epoch, 10000, NULL) == 0 ? 0 : 23;
    case ORBIT_ADMIT_SKIPPED:
        rep->skipped++;
        return fee != 0 && r.skip == ORBIT_SKIP_CAPACITY ? 0 : 24;
    case ORBIT_ADMIT_REJECTED:
        rep->rejected++;
        return 0;
    }
    return 25;
}

static int stress_child(const char *name, int idx, int report_fd, struct tu_gate *gate)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    if (child_open(name, -1, 0, &f, &a) != 0)
        return 2;
    tu_gate_pass(gate);
    unsigned seed = (unsigned)getpid() * 2654435761u + (unsigned)idx;
    struct holding h = { .n = 0 };
    struct stress_report rep = { 0 };
    int rc = 0;
    for (long i = 0; i < STRESS_ROUNDS / STRESS_PROCS && rc == 0; i++) {
        rc = stress_round(a, &seed, &h, &rep);
        if (rc == 0)
            rc = stress_check(a, &h);
    }
    while (rc == 0 && h.n > 0)
        rc = stress_release_oldest(a, &h, &rep);
    if (write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        rc = 3;
    child_close(f, a);
    return rc;
}

START_TEST(test_stress_4proc)
{
    const char *name = tu_fleet_name("adm-stress");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, STRESS_RETAIN);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(orbit_admission_set_capacity(a, stress_dom[i], stress_cap[i]), 0);
    uint64_t e0 = orbit_admission_epoch(a), s0 = info_of(a).next_serial;
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    struct tu_gate gate;
    tu_gate_init(&gate);
    pid_t pid[STRESS_PROCS];
    for (int i = 0; i < STRESS_PROCS; i++)
        if ((pid[i] = fork()) == 0)
            _exit(stress_child(name, i, fds[1], &gate));
    tu_gate_open(&gate, STRESS_PROCS);
    for (int i = 0; i < STRESS_PROCS; i++)
        ck_assert_int_eq(tu_wait_child(pid[i], 300000), 0);
    struct stress_report sum = { 0 }, rep;
    for (int i = 0; i < STRESS_PROCS; i++) {
        ck_assert_int_eq(read(fds[0], &rep, sizeof rep), (ssize_t)sizeof rep);
        sum.claimed += rep.claimed;
        sum.released += rep.released;
        sum.deferred += rep.deferred;
        sum.skipped += rep.skipped;
        sum.rejected += rep.rejected;
        sum.waits += rep.waits;
    }
    fprintf(stderr, "stress: %ld claimed, %ld released, %ld deferred (%ld waits), %ld skipped, %ld rejected\n",
            sum.claimed, sum.released, sum.deferred, sum.waits, sum.skipped, sum.rejected);
    ck_assert_int_eq(sum.claimed + sum.deferred + sum.skipped + sum.rejected, STRESS_ROUNDS);
    ck_assert_int_eq(sum.claimed, sum.released);
    ck_assert_int_gt(sum.deferred, 0);   /* the demands did contend */
    /* Every release advanced the epoch exactly once; nothing else did. */
    ck_assert_uint_eq(orbit_admission_epoch(a), e0 + (uint64_t)sum.released);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(used_of(a, stress_dom[i]), 0);
    struct orbit_admission_info in = info_of(a);
    ck_assert_uint_eq(in.live_claims, 0);
    ck_assert_uint_eq(in.retained_bytes, 0);
    ck_assert_uint_eq(in.next_serial, s0 + (uint64_t)sum.claimed);
    ck_assert(!in.poisoned);
    ck_assert_uint_eq(in.repairs, 0);
    close(fds[0]);
    close(fds[1]);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST


/* ---- racing claims: never over capacity, all or nothing, every wait woken ---- */

#define RACE_PROCS  4
#define RACE_ROUNDS 20000
static const uint32_t race_dom[2] = { 7, 8 };
static const uint64_t race_cap[2] = { 3, 2 };

/* What the racers hold, counted by themselves outside the ledger (MAP_SHARED). */
struct race_shadow { _Atomic uint64_t held[2]; _Atomic long claimed, deferred, waits; _Atomic int opened; };

/* Adds (or takes back) a claim's units; 1 when a domain would be above its capacity. */
static int race_account(struct race_shadow *sh, const uint64_t *units, bool add)
{
    int over = 0;
    for (int i = 0; i < 2; i++) {
        if (!add) {
            atomic_fetch_sub(&sh->held[i], units[i]);
            continue;
        }
        over |= atomic_fetch_add(&sh->held[i], units[i]) + units[i] > race_cap[i];
    }
    return over;
}

/*
 * The opening move contends for sure: everyone claims a unit of domain 7
 * (capacity 3); holders keep it until all four have tried, so one is
 * deferred and must be woken by a release from another process.
 */
static int race_open(struct orbit_admission *a, struct race_shadow *sh)
{
    const uint64_t units[2] = { 1, 0 };
    struct orbit_units u = { race_dom[0], 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(a, &d, &r) != 0)
        return 15;
    atomic_fetch_add(&sh->opened, 1);
    if (r.outcome == ORBIT_ADMIT_DEFERRED) {
        atomic_fetch_add(&sh->deferred, 1);
        atomic_fetch_add(&sh->waits, 1);
        return orbit_admission_wait(a, r.release_epoch, 10000, NULL) == 0 ? 0 : 16;
    }
    if (r.outcome != ORBIT_ADMIT_CLAIMED || race_account(sh, units, true))
        return 17;
    for (int64_t t0 = tu_now_ns(); atomic_load(&sh->opened) < RACE_PROCS; sched_yield())
        if (tu_now_ns() - t0 > 10000000000)
            return 18;
    race_account(sh, units, false);
    return orbit_admission_release(a, &r.claim) == 0 ? 0 : 19;
}

/* Claims {7:1..2, 8:1} or {8:1..2} or {7:1}, holds it a moment, gives it back. */
static int race_child(const char *name, int idx, struct race_shadow *sh, struct tu_gate *gate)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    if (child_open(name, -1, 0, &f, &a) != 0)
        return 2;
    tu_gate_pass(gate);
    unsigned seed = (unsigned)getpid() * 2654435761u + (unsigned)idx;
    int rc = race_open(a, sh);
    for (long i = 0; i < RACE_ROUNDS && rc == 0; i++) {
        int kind = rand_r(&seed) % 3;
        uint64_t units[2] = { kind == 1 ? 0 : 1 + (uint64_t)(kind == 0 && rand_r(&seed) % 2),
                              kind == 2 ? 0 : 1 + (uint64_t)(kind == 1 && rand_r(&seed) % 2) };
        struct orbit_units u[2];
        size_t n = 0;
        for (int k = 0; k < 2; k++)
            if (units[k])
                u[n++] = (struct orbit_units){ race_dom[k], units[k] };
        struct orbit_demand d = { .claim = u, .n_claim = n };
        struct orbit_admit_result r;
        if (orbit_admission_try_claim(a, &d, &r) != 0)
            rc = 10;
        else if (r.outcome == ORBIT_ADMIT_DEFERRED) {
            atomic_fetch_add(&sh->deferred, 1);
            /* Others hold what blocks us and give it back without waiting: a release comes. */
            if (rand_r(&seed) % 4 == 0) {
                atomic_fetch_add(&sh->waits, 1);
                rc = orbit_admission_wait(a, r.release_epoch, 10000, NULL) == 0 ? 0 : 11;
            }
        } else if (r.outcome != ORBIT_ADMIT_CLAIMED)
            rc = 12;
        else {
            atomic_fetch_add(&sh->claimed, 1);
            rc = race_account(sh, units, true) ? 13 : 0;
            if (i % 64 == 0)
                sched_yield();
            race_account(sh, units, false);
            if (orbit_admission_release(a, &r.claim) != 0)
                rc = 14;
        }
    }
    child_close(f, a);
    return rc;
}

START_TEST(test_racing_claims_never_exceed_capacity)
{
    const char *name = tu_fleet_name("adm-race");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(orbit_admission_set_capacity(a, race_dom[i], race_cap[i]), 0);
    struct race_shadow *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    struct tu_gate gate;
    tu_gate_init(&gate);
    pid_t pid[RACE_PROCS];
    for (int i = 0; i < RACE_PROCS; i++)
        if ((pid[i] = fork()) == 0)
            _exit(race_child(name, i, sh, &gate));
    tu_gate_open(&gate, RACE_PROCS);
    for (int i = 0; i < RACE_PROCS; i++)
        ck_assert_int_eq(tu_wait_child(pid[i], 300000), 0);   /* 13: over capacity; 11: a wait not woken */
    fprintf(stderr, "race: %ld claimed, %ld deferred, %ld waits\n", atomic_load(&sh->claimed),
            atomic_load(&sh->deferred), atomic_load(&sh->waits));
    ck_assert_int_gt(atomic_load(&sh->deferred), 0);   /* they did contend (the opening move, at least) */
    ck_assert_int_gt(atomic_load(&sh->claimed), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_uint_eq(used_of(a, race_dom[i]), 0);   /* all or nothing: no unit left behind */
    struct orbit_admission_info in = info_of(a);
    ck_assert_uint_eq(in.live_claims, 0);
    ck_assert(!in.poisoned);
    ck_assert_uint_eq(in.repairs, 0);
    tu_gate_close(&gate);
    munmap(sh, sizeof *sh);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- kill -9 while holding claims ---------------------------------------- */

/* Claims {1:10,2:20 fee 30} and {1:5}, reports, then blocks until killed or told to go. */
static int holder_child(const char *name, int32_t node, uint64_t inc, struct tu_gate *ready, struct tu_gate *go)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    if (child_open(name, node, inc, &f, &a) != 0)
        return 2;
    struct orbit_units u1[] = { { 1, 10 }, { 2, 20 } }, u2 = { 1, 5 };
    struct orbit_demand d1 = { .claim = u1, .n_claim = 2, .retained_bytes = 30 };
    struct orbit_demand d2 = { .claim = &u2, .n_claim = 1 };
    struct orbit_admit_result r1, r2;
    if (orbit_admission_try_claim(a, &d1, &r1) || r1.outcome != ORBIT_ADMIT_CLAIMED ||
        orbit_admission_try_claim(a, &d2, &r2) || r2.outcome != ORBIT_ADMIT_CLAIMED)
        return 3;
    tu_gate_open(ready, 1);
    tu_gate_pass(go);
    int rc = orbit_admission_release(a, &r1.claim) || orbit_admission_release(a, &r2.claim) ? 4 : 0;
    child_close(f, a);
    return rc;
}

/* 0: the parent reports the death itself; 1: orbit_fleet_reap finds it (dispatch). */
START_TEST(test_kill_holding)
{
    const char *name = tu_fleet_name("adm-kill");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 2, 100), 0);
    struct tu_gate ready, go;
    tu_gate_init(&ready);
    tu_gate_init(&go);
    pid_t victim = fork();
    if (victim == 0)
        _exit(holder_child(name, 5, 5005, &ready, &go));
    tu_gate_pass(&ready);
    pid_t survivor = fork();
    if (survivor == 0)
        _exit(holder_child(name, 6, 6006, &ready, &go));
    tu_gate_pass(&ready);
    ck_assert_uint_eq(used_of(a, 1), 30);
    ck_assert_uint_eq(used_of(a, 2), 40);
    ck_assert_uint_eq(orbit_admission_retained_bytes(a), 60);
    uint64_t e = orbit_admission_epoch(a);
    kill(victim, SIGKILL);
    ck_assert_int_eq(tu_wait_child(victim, 10000), 128 + SIGKILL);
    /* Dead, but its capacity is still charged until the death is reported. */
    ck_assert_uint_eq(used_of(a, 1), 30);
    if (_i == 0)
        orbit_admission_node_dead(a, 5, 5005);
    else
        ck_assert_int_eq(orbit_fleet_reap(f), 1);
    ck_assert_uint_eq(used_of(a, 1), 15);   /* the survivor's claims stay */
    ck_assert_uint_eq(used_of(a, 2), 20);
    ck_assert_uint_eq(orbit_admission_retained_bytes(a), 30);
    ck_assert_uint_eq(orbit_admission_epoch(a), e + 2);
    struct orbit_claim_info ci[4];
    ck_assert_int_eq(orbit_admission_claims(a, ci, 4), 2);
    ck_assert_uint_eq(ci[0].claim.node, 6);
    ck_assert_uint_eq(ci[1].claim.node, 6);
    /* Reported again: nothing more to release. */
    orbit_admission_node_dead(a, 5, 5005);
    ck_assert_uint_eq(orbit_admission_epoch(a), e + 2);
    tu_gate_open(&go, 1);
    ck_assert_int_eq(tu_wait_child(survivor, 10000), 0);
    ck_assert_uint_eq(used_of(a, 1), 0);
    ck_assert_uint_eq(used_of(a, 2), 0);
    ck_assert(!orbit_admission_poisoned(a));
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- kill -9 inside the mutex -------------------------------------------- */

static const char *park_point[3] = { "claim-commit", "release", "claim-writing" };

/*
 * Holds {1:5 fee 5} through a plain handle, then through a handle opened with
 * the park hook does the operation that stops inside the mutex: a claim of
 * {1:10,2:20}, or the release of such a claim made beforehand. Variants 0-2
 * give the big claim a retained fee of 30 (the general path); 3-5 give it
 * none, with the hooked handle's domain hints set (the one-pass path).
 */
static int parked_child(const char *name, int variant)
{
    struct orbit_fleet *f;
    struct orbit_admission *plain, *hooked;
    bool fast = variant >= 3;
    unsetenv(PARK_ENV);
    if (child_open(name, 5, 5005, &f, &plain) != 0)
        return 2;
    setenv(PARK_ENV, park_point[variant % 3], 1);
    if (orbit_admission_open_existing(f, ORBIT_ADMISSION_KIND, &hooked) != 0)
        return 3;
    if (fast) {   /* domains 1 and 2 are indexes 0 and 1: hint = index + 1 */
        hooked->hint[1 & (ADM_HINTS - 1)] = 1;
        hooked->hint[2 & (ADM_HINTS - 1)] = 2;
    }
    struct orbit_units held = { 1, 5 }, big[] = { { 1, 10 }, { 2, 20 } };
    struct orbit_demand dh = { .claim = &held, .n_claim = 1, .retained_bytes = 5 };
    struct orbit_demand db = { .claim = big, .n_claim = 2, .retained_bytes = fast ? 0 : 30 };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(plain, &dh, &r) || r.outcome != ORBIT_ADMIT_CLAIMED)
        return 4;
    if (variant % 3 == 1) {
        if (orbit_admission_try_claim(plain, &db, &r) || r.outcome != ORBIT_ADMIT_CLAIMED)
            return 5;
        orbit_admission_release(hooked, &r.claim);   /* stops inside */
    } else
        orbit_admission_try_claim(hooked, &db, &r);  /* stops inside */
    return 6;   /* only reached if resumed */
}

/* The raw shared state while the child is stopped: really mid-update. */
static void assert_mid_update(struct orbit_admission *a, int variant, pid_t holder)
{
    struct adm_domain *d = a->domains;   /* index 0: domain 1, index 1: domain 2 */
    ck_assert_int_eq(orb_lock_holder(&a->ledger->lock), holder);
    variant %= 3;
    if (variant == 0) {          /* record live, domain 1 charged, domain 2 not yet */
        ck_assert_uint_eq(d[0].used, 15);
        ck_assert_uint_eq(d[1].used, 0);
        ck_assert_uint_eq(a->ledger->live_claims, 1);
    } else if (variant == 1) {   /* record releasing, domain 1 given back, domain 2 not yet */
        ck_assert_uint_eq(d[0].used, 5);
        ck_assert_uint_eq(d[1].used, 20);
        ck_assert_uint_eq(a->ledger->live_claims, 2);
    } else {                     /* a record half-written, nothing charged */
        ck_assert_uint_eq(d[0].used, 5);
        ck_assert_uint_eq(d[1].used, 0);
    }
}

/* Every one of the ledger's max_claims records takes a claim, then none is left (-ORBIT_EFULL). */
static void all_records_claimable(struct orbit_admission *a)
{
    struct orbit_admission_info in = info_of(a);
    uint32_t n = in.spec.max_claims;
    struct orbit_claim *c = calloc(n, sizeof *c);
    struct orbit_units u = { 1, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100 + n), 0);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), 0);
        ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
        c[i] = r.claim;
    }
    ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), -ORBIT_EFULL);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_int_eq(orbit_admission_release(a, &c[i]), 0);
    ck_assert(!orbit_admission_poisoned(a));
    free(c);
}

START_TEST(test_kill_in_mutex)
{
    const char *name = tu_fleet_name("adm-mutex");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 2, 100), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(parked_child(name, _i));
    int st;
    ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
    ck_assert_msg(WIFSTOPPED(st), "child did not stop at %s (status %d)", park_point[_i % 3], st);
    assert_mid_update(a, _i, pid);
    if (_i % 3 == 0)   /* inspection gives up on a stopped holder instead of hanging */
        ck_assert_int_eq(orbit_admission_domains(a, NULL, 0), -ORBIT_ETIMEDOUT);
    uint64_t e = orbit_admission_epoch(a);
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* The next locker gets EOWNERDEAD and repairs (or poisons) before anything else. */
    struct orbit_admission_info in = info_of(a);
    ck_assert_uint_eq(in.repairs, 1);
    int point = _i % 3;
    uint64_t big_fee = _i >= 3 ? 0 : 30;
    if (point == 2) {
        ck_assert(in.poisoned);
        ck_assert_str_eq(in.poison_reason, "a holder died while writing a claim record");
        struct orbit_units u = { 1, 1 };
        struct orbit_demand d = { .claim = &u, .n_claim = 1 };
        struct orbit_admit_result r;
        ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), -ORBIT_EPOISONED);
        ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 200), -ORBIT_EPOISONED);
        ck_assert_int_eq(orbit_admission_wait(a, e, 0, NULL), -ORBIT_EPOISONED);
        orbit_admission_node_dead(a, 5, 5005);
        ck_assert(orbit_admission_poisoned(a));   /* fail-closed stays closed */
    } else {
        ck_assert(!in.poisoned);
        /* Recomputed from the live records: the committed claim counts, the released one not. */
        ck_assert_uint_eq(used_of(a, 1), point == 0 ? 15 : 5);
        ck_assert_uint_eq(used_of(a, 2), point == 0 ? 20 : 0);
        ck_assert_uint_eq(in.retained_bytes, point == 0 ? 5 + big_fee : 5);
        ck_assert_uint_eq(in.live_claims, point == 0 ? 2 : 1);
        ck_assert_uint_eq(in.change_epoch, e + 1);   /* the repair woke waiters */
        orbit_admission_node_dead(a, 5, 5005);
        ck_assert_uint_eq(used_of(a, 1), 0);
        ck_assert_uint_eq(used_of(a, 2), 0);
        in = info_of(a);
        ck_assert_uint_eq(in.live_claims, 0);
        ck_assert_uint_eq(in.retained_bytes, 0);
        ck_assert(!in.poisoned);
        /* And the ledger works on: the full capacity can be claimed again, and every
         * record (the repair rebuilt the free lists) holds a claim at once. */
        struct orbit_units u[] = { { 1, 100 }, { 2, 100 } };
        struct orbit_demand d = { .claim = u, .n_claim = 2 };
        struct orbit_admit_result r;
        ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), 0);
        ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
        ck_assert_int_eq(orbit_admission_release(a, &r.claim), 0);
        all_records_claimable(a);
    }
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- a deferred claimer in another process, woken by a release ----------- */

/* Deferred on domain 1, reports, waits (futex or io_uring), then claims; exit 0 on success. */
static int deferred_child(const char *name, bool uring, int report_fd)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    if (child_open(name, 4, 4004, &f, &a) != 0)
        return 2;
    struct orbit_units u = { 1, 10 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(a, &d, &r) || r.outcome != ORBIT_ADMIT_DEFERRED || r.blocker_domain != 1)
        return 3;
    char one = 1;
    if (write(report_fd, &one, 1) != 1)
        return 4;
    if (uring) {
        struct io_uring ring;
        struct io_uring_cqe *cqe;
        if (io_uring_queue_init(2, &ring, 0) != 0)
            return 5;
        if (orbit_admission_prep_wait(a, r.release_epoch, io_uring_get_sqe(&ring)) != 0 ||
            io_uring_submit(&ring) != 1 || io_uring_wait_cqe(&ring, &cqe) != 0 || cqe->res != 0)
            return 6;
        io_uring_queue_exit(&ring);
    } else {
        uint64_t now = 0;
        if (orbit_admission_wait(a, r.release_epoch, 20000, &now) != 0 || now <= r.release_epoch)
            return 7;
        struct orbit_admission_stats st;
        orbit_admission_stats(a, &st);
        if (st.parks < 1)
            return 8;   /* it must really have slept in the kernel */
    }
    if (orbit_admission_try_claim(a, &d, &r) || r.outcome != ORBIT_ADMIT_CLAIMED ||
        orbit_admission_release(a, &r.claim))
        return 9;
    child_close(f, a);
    return 0;
}

/* 0: orbit_admission_wait (futex); 1: orbit_admission_prep_wait in an io_uring. */
START_TEST(test_deferred_woken_across_processes)
{
    if (_i == 1 && !orbit_uring_futex_supported()) {
        struct orbit_fleet *pf = NULL;
        const char *pn = tu_fleet_name("adm-nouring");
        struct orbit_admission *pa = parent_open(pn, &pf, 0);
        struct io_uring_sqe sqe;
        ck_assert_int_eq(orbit_admission_prep_wait(pa, 0, &sqe), -ORBIT_ENOTSUP);
        orbit_admission_close(pa);
        orbit_fleet_leave(pf);
        orbit_fleet_unlink(pn);
        return;
    }
    const char *name = tu_fleet_name("adm-wake");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 10), 0);
    struct orbit_units u = { 1, 10 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(deferred_child(name, _i == 1, fds[1]));
    char c;
    ck_assert_int_eq(read(fds[0], &c, 1), 1);
    until_parked(a, pid);
    ck_assert_int_eq(orbit_admission_release(a, &r.claim), 0);
    ck_assert_int_eq(tu_wait_child(pid, 30000), 0);
    struct orbit_admission_stats st;
    orbit_admission_stats(a, &st);
    ck_assert_uint_eq(st.wakes, 1);   /* the release found it parked and woke it */
    ck_assert_uint_eq(used_of(a, 1), 0);
    close(fds[0]);
    close(fds[1]);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- the ledger's lock: bounded, validated ------------------------------- */

/*
 * A member writes garbage over the lock word (the first bytes of the
 * ledger). Every call that locks ends at once: the ledger is poisoned (no
 * holder writes such a word), nothing blocks. Run in a child the parent
 * bounds, so a hang fails the test instead of stalling it.
 */
static int garbage_child(const char *name)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    if (child_open(name, 3, 3003, &f, &a) != 0)
        return 2;
    memset((void *)&a->ledger->lock, 0xde, sizeof a->ledger->lock);
    struct orbit_units u = { 1, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    int64_t t0 = tu_now_ns();
    if (orbit_admission_try_claim(a, &d, &r) != -ORBIT_EPOISONED)
        return 3;
    if (orbit_admission_set_capacity(a, 1, 50) != -ORBIT_EPOISONED)
        return 4;
    orbit_admission_node_dead(a, 5, 5005);
    if (!orbit_admission_poisoned(a) || tu_now_ns() - t0 > 1000000000)
        return 5;
    struct orbit_admission_info in;
    if (orbit_admission_info(a, &in) != 0 || strcmp(in.poison_reason, "ledger lock word forged") != 0)
        return 6;
    child_close(f, a);
    return 0;
}

START_TEST(test_garbage_lock_word_poisons_without_blocking)
{
    const char *name = tu_fleet_name("adm-garbage");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(garbage_child(name));
    ck_assert_int_eq(tu_wait_child(pid, 10000), 0);
    ck_assert(orbit_admission_poisoned(a));
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/*
 * A live holder that never lets go (stopped inside the lock): a claim gives
 * up with -ORBIT_ECORRUPT after the bound instead of blocking, and leaves the
 * ledger healthy; once the holder is killed, the next claim takes the lock
 * over and repairs.
 */
START_TEST(test_stuck_holder_bounds_every_lock)
{
    const char *name = tu_fleet_name("adm-stuck");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 2, 100), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(parked_child(name, 0));
    int st;
    ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
    ck_assert(WIFSTOPPED(st));
    struct orbit_units u = { 1, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), -ORBIT_ECORRUPT);
    int64_t took = tu_now_ns() - t0;
    ck_assert_int_ge(took, 1000000000);    /* a live holder is waited for, */
    ck_assert_int_lt(took, 20000000000);   /* but not forever */
    ck_assert(!orbit_admission_poisoned(a));
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_int_eq(orbit_admission_try_claim(a, &d, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_uint_eq(info_of(a).repairs, 1);
    ck_assert(!orbit_admission_poisoned(a));
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/*
 * A waiter already blocked on the lock when the holder is killed -9 (and not
 * yet reaped: a zombie counts as gone) takes the lock over, repairs and
 * claims, well within the bound.
 */
struct blocked_claim { struct orbit_admission *a; int rc; struct orbit_admit_result r; _Atomic int done; };

static void *claim_thread(void *arg)
{
    struct blocked_claim *b = arg;
    struct orbit_units u = { 1, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    b->rc = orbit_admission_try_claim(b->a, &d, &b->r);
    atomic_store(&b->done, 1);
    return NULL;
}

START_TEST(test_waiter_recovers_a_holder_killed_mid_lock)
{
    const char *name = tu_fleet_name("adm-zombie");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 2, 100), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(parked_child(name, 1));
    int st;
    ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
    ck_assert(WIFSTOPPED(st));
    struct blocked_claim b = { .a = a };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, claim_thread, &b), 0);
    tu_sleep_ms(50);
    ck_assert_int_eq(atomic_load(&b.done), 0);   /* blocked behind the stopped holder */
    kill(pid, SIGKILL);
    for (int i = 0; i < 500 && !atomic_load(&b.done); i++)
        tu_sleep_ms(2);
    ck_assert_int_eq(atomic_load(&b.done), 1);   /* taken over within a second, unreaped */
    pthread_join(t, NULL);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_int_eq(b.r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    struct orbit_admission_info in = info_of(a);
    ck_assert_uint_eq(in.repairs, 1);
    ck_assert(!in.poisoned);
    ck_assert_uint_eq(used_of(a, 1), 5 + 1);   /* the cut-short release finished: only {1:5} and ours */
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- a reporter killed inside orbit_fleet_node_dead ---------------------- */

/* Holds {1:5} on node 1 until killed. */
static int victim_child(const char *name, struct tu_gate *ready)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    unsetenv(PARK_ENV);
    if (child_open(name, 1, 1001, &f, &a) != 0)
        return 2;
    struct orbit_units u = { 1, 5 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(a, &d, &r) || r.outcome != ORBIT_ADMIT_CLAIMED)
        return 3;
    tu_gate_open(ready, 1);
    for (;;)
        pause();
}

/* Stops inside the ledger mutex (claim-commit); resumed, releases its claim and leaves. */
static int mutex_parker_child(const char *name)
{
    struct orbit_fleet *f;
    struct orbit_admission *a;
    setenv(PARK_ENV, "claim-commit", 1);
    if (child_open(name, 6, 6006, &f, &a) != 0)
        return 2;
    struct orbit_units u = { 1, 10 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(a, &d, &r) || r.outcome != ORBIT_ADMIT_CLAIMED)
        return 3;
    if (orbit_admission_release(a, &r.claim) != 0)
        return 4;
    child_close(f, a);
    return 0;
}

/* Node 1 (life 1001) claims {1:5} and is killed -9 holding it. */
static void kill_a_claim_holder(const char *name)
{
    struct tu_gate ready;
    tu_gate_init(&ready);
    pid_t victim = fork();
    if (victim == 0)
        _exit(victim_child(name, &ready));
    tu_gate_pass(&ready);
    tu_gate_close(&ready);
    kill(victim, SIGKILL);
    ck_assert_int_eq(tu_wait_child(victim, 10000), 128 + SIGKILL);
}

/* A member (node 6) stopped inside the ledger mutex; SIGCONT lets it finish and exit 0. */
static pid_t park_in_mutex(const char *name)
{
    pid_t parker = fork();
    if (parker == 0)
        _exit(mutex_parker_child(name));
    int st;
    ck_assert_int_eq(waitpid(parker, &st, WUNTRACED), parker);
    ck_assert(WIFSTOPPED(st));
    return parker;
}

/* Reports node 1 dead: blocks on the parked holder's mutex until killed. */
static int reporter_child(const char *name)
{
    struct orbit_fleet *obs;
    if (orbit_fleet_observe(name, &obs) != 0)
        return 2;
    orbit_fleet_node_dead(obs, 1, 1001);
    return 5;   /* only reached if the mutex came free */
}

/* Bounded: until node's state word reads want and pid sleeps. */
static void until_state(struct orbit_fleet *f, uint16_t node, uint32_t want, pid_t pid)
{
    for (int i = 0; i < 10000; i++) {
        if (atomic_load(&f->nodes[node].state) == want && proc_state(pid) == 'S')
            return;
        tu_sleep_ms(1);
    }
    ck_abort_msg("node %u never reached state %u", node, want);
}

/*
 * The report is finished by the next: 0 orbit_fleet_reap, 1 orbit_fleet_node_dead,
 * 2 a joiner of exactly that node, 3 a first-free joiner, 4 orbit-reaper's pass (pidfd).
 */
START_TEST(test_reporter_killed_mid_report)
{
    const char *name = tu_fleet_name("adm-reporter");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    kill_a_claim_holder(name);
    ck_assert_uint_eq(used_of(a, 1), 5);
    pid_t parker = park_in_mutex(name);
    pid_t reporter = fork();
    if (reporter == 0)
        _exit(reporter_child(name));
    until_state(f, 1, 3, reporter);   /* the reporter took the node and sleeps on the mutex */
    kill(reporter, SIGKILL);
    ck_assert_int_eq(tu_wait_child(reporter, 10000), 128 + SIGKILL);
    kill(parker, SIGCONT);
    ck_assert_int_eq(tu_wait_child(parker, 10000), 0);
    ck_assert_uint_eq(used_of(a, 1), 5);   /* the victim's claim: still charged */

    struct orbit_fleet *joined = NULL;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.backing = tu_backing();
    if (_i == 0) {
        ck_assert_int_eq(orbit_fleet_reap(f), 1);
    } else if (_i == 1) {
        ck_assert_int_eq(orbit_fleet_node_dead(f, 1, 1001), 0);
    } else if (_i == 4) {
        struct orbit_reaper *r;
        ck_assert_int_eq(orbit_reaper_open(ORBIT_REAPER_PIDFD, &r), 0);
        ck_assert_int_eq(orbit_reaper_watch(r, name), 0);
        for (int i = 0; i < 500 && atomic_load(&f->nodes[1].state) != ORBIT_NODE_FREE; i++)
            ck_assert_int_ge(orbit_reaper_process(r, 10), 0);
        orbit_reaper_close(r);
    } else {
        o.node = _i == 2 ? 1 : -1;
        ck_assert_int_eq(orbit_fleet_join(name, &o, &joined), 0);
        ck_assert_uint_eq(orbit_fleet_node(joined), 1);
    }
    ck_assert_uint_eq(used_of(a, 1), 0);
    ck_assert_uint_eq(info_of(a).live_claims, 0);
    ck_assert_int_eq(orbit_fleet_reap(f), 0);   /* done once */
    if (!joined) {
        ck_assert_uint_eq(atomic_load(&f->nodes[1].state), ORBIT_NODE_FREE);
        o.node = 1;
        ck_assert_int_eq(orbit_fleet_join(name, &o, &joined), 0);
    }
    ck_assert_uint_eq(atomic_load(&f->nodes[1].state), ORBIT_NODE_LIVE);
    orbit_fleet_leave(joined);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/*
 * A death reported while a live member holds the ledger past the lock's bound
 * (stopped inside it): the ledger cannot give the claim back yet, so the report
 * fails and the node stays REAPING, never freed with the claim left charged.
 * Once the holder moves on, the next reap finishes the report.
 */
START_TEST(test_node_dead_on_a_stuck_ledger_is_finished_later)
{
    const char *name = tu_fleet_name("adm-stuck-report");
    struct orbit_fleet *f;
    struct orbit_admission *a = parent_open(name, &f, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 100), 0);
    kill_a_claim_holder(name);
    pid_t parker = park_in_mutex(name);
    int rc = orbit_fleet_node_dead(f, 1, 1001);
    ck_assert_msg(rc < 0, "node_dead on a held ledger returned %d", rc);
    ck_assert_uint_ne(atomic_load(&f->nodes[1].state), ORBIT_NODE_FREE);

    kill(parker, SIGCONT);
    ck_assert_int_eq(tu_wait_child(parker, 10000), 0);
    ck_assert_uint_eq(used_of(a, 1), 5);   /* the victim's claim: still charged, and still owed */
    ck_assert_int_eq(orbit_fleet_reap(f), 1);   /* the report is finished */
    ck_assert_uint_eq(used_of(a, 1), 0);
    ck_assert_uint_eq(atomic_load(&f->nodes[1].state), ORBIT_NODE_FREE);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

static Suite *fleet_suite(void)
{
    Suite *s = suite_create("admission-fleet");
    TCase *t = tcase_create("processes");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_stress_4proc);
    tcase_add_test(t, test_racing_claims_never_exceed_capacity);
    tcase_add_loop_test(t, test_kill_holding, 0, 2);
    tcase_add_loop_test(t, test_kill_in_mutex, 0, 6);
    tcase_add_loop_test(t, test_deferred_woken_across_processes, 0, 2);
    tcase_add_loop_test(t, test_reporter_killed_mid_report, 0, 5);
    tcase_add_test(t, test_node_dead_on_a_stuck_ledger_is_finished_later);
    tcase_add_test(t, test_garbage_lock_word_poisons_without_blocking);
    tcase_add_test(t, test_stuck_holder_bounds_every_lock);
    tcase_add_test(t, test_waiter_recovers_a_holder_killed_mid_lock);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(fleet_suite());
}
