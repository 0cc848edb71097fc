/* SPDX-License-Identifier: MIT */
/*
 * One reaper, two fleets: a fleet whose report cannot finish (a live member
 * of A stopped inside A's admission ledger lock, so the report of A's dead
 * member waits out the lock's 2 s bound and is retried) must not delay the
 * reclaim of a death in fleet B. A's death is reclaimed once its lock holder
 * lets go. Both backends; the reaper runs in a thread of the test.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <orbit/admission.h>
#include "death_util.h"

#define CAPACITY   8
#define DOMAIN     1
#define VICTIM     1      /* node of the member killed -9, in A and in B */
#define PARKER     6      /* node of A's member stopped inside the ledger lock */
#define B_BOUND_MS 500    /* B's kill -> reclaim, well below the lock's 2 s bound */
#define PARK_ENV   "ORBIT_TEST_ADMISSION_PARK_IN_MUTEX"

static const struct orbit_admission_spec ADM_SPEC = { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4,
                                                      .max_claims = 64, .retained_max_bytes = 0 };

/* ---- members (children report by exit code; they die with the test) ---------- */

static pid_t fork_member(void)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
        _exit(99);   /* the test is gone already: no stray member */
    return pid;
}

static int member_open(const char *fleet, int32_t node, struct orbit_fleet **f, struct orbit_admission **a)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.node = node;
    o.backing = tu_backing();
    int rc = orbit_fleet_join(fleet, &o, f);
    if (rc == 0 && (rc = orbit_admission_open_existing(*f, ORBIT_ADMISSION_KIND, a)) < 0)
        orbit_fleet_leave(*f);
    return rc;
}

static bool claim(struct orbit_admission *a, uint64_t units, struct orbit_claim *out)
{
    struct orbit_units u = { DOMAIN, units };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    if (orbit_admission_try_claim(a, &d, &r) != 0 || r.outcome != ORBIT_ADMIT_CLAIMED)
        return false;
    *out = r.claim;
    return true;
}

/* Joins node VICTIM, claims 5 units, says so on the gate, waits to be killed. */
static pid_t spawn_victim(const char *fleet, struct tu_gate *ready)
{
    pid_t pid = fork_member();
    if (pid > 0)
        return pid;
    struct orbit_fleet *f;
    struct orbit_admission *a;
    struct orbit_claim c;
    if (member_open(fleet, VICTIM, &f, &a) != 0 || !claim(a, 5, &c))
        _exit(2);
    tu_gate_open(ready, 1);
    for (;;)
        pause();
}

/* Joins node PARKER and stops itself inside the ledger lock; resumed, gives back and leaves. */
static pid_t spawn_parker(const char *fleet)
{
    pid_t pid = fork_member();
    if (pid == 0) {
        struct orbit_fleet *f;
        struct orbit_admission *a;
        struct orbit_claim c;
        setenv(PARK_ENV, "claim-commit", 1);
        if (member_open(fleet, PARKER, &f, &a) != 0 || !claim(a, 10, &c))
            _exit(2);
        if (orbit_admission_release(a, &c) != 0)
            _exit(3);
        orbit_admission_close(a);
        orbit_fleet_leave(f);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
    ck_assert_msg(WIFSTOPPED(st), "the parker ended (status %d) instead of stopping in the lock", st);
    return pid;
}

/* ---- the reaper, run by a thread of the test ---------------------------------- */

struct driver {
    struct orbit_reaper *r;
    pthread_t thread;
    atomic_bool stop;
    atomic_int error;              /* the first negative process return */
    pthread_mutex_t lock;          /* guards c and deferrals (callbacks run in the driver thread) */
    struct deaths c;
    int deferrals;
    struct orbit_reaper_deferral first_deferral;
    char deferred_fleet[ORBIT_FLEET_NAME_MAX + 1];
};

static void on_death(void *ctx, const struct orbit_reaper_death *d)
{
    struct driver *dr = ctx;
    pthread_mutex_lock(&dr->lock);
    deaths_collect(&dr->c, d);
    pthread_mutex_unlock(&dr->lock);
}

static void on_deferral(void *ctx, const struct orbit_reaper_deferral *d)
{
    struct driver *dr = ctx;
    pthread_mutex_lock(&dr->lock);
    if (dr->deferrals++ == 0) {
        dr->first_deferral = *d;
        snprintf(dr->deferred_fleet, sizeof dr->deferred_fleet, "%s", d->fleet);
        dr->first_deferral.fleet = dr->deferred_fleet;
    }
    pthread_mutex_unlock(&dr->lock);
}

/* The first deferral reported, waited for up to timeout_ms; false if none. */
static bool first_deferral(struct driver *dr, int timeout_ms, struct orbit_reaper_deferral *out)
{
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    do {
        pthread_mutex_lock(&dr->lock);
        bool got = dr->deferrals > 0;
        if (got)
            *out = dr->first_deferral;
        pthread_mutex_unlock(&dr->lock);
        if (got)
            return true;
        tu_sleep_ms(2);
    } while (tu_now_ns() < end);
    return false;
}

static void *drive(void *arg)
{
    struct driver *dr = arg;
    while (!atomic_load(&dr->stop)) {
        int rc = orbit_reaper_process(dr->r, 20);
        if (rc < 0 && rc != -EINTR && atomic_load(&dr->error) == 0)
            atomic_store(&dr->error, rc);
    }
    return NULL;
}

/* The reclaim of (fleet, node) as reported, waited for up to timeout_ms; false if none. */
static bool death_of(struct driver *dr, const char *fleet, uint16_t node, int timeout_ms,
                     struct orbit_reaper_death *out)
{
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    do {
        pthread_mutex_lock(&dr->lock);
        for (int i = 0; i < dr->c.n; i++)
            if (strcmp(dr->c.fleet[i], fleet) == 0 && dr->c.d[i].node == node) {
                *out = dr->c.d[i];
                pthread_mutex_unlock(&dr->lock);
                return true;
            }
        pthread_mutex_unlock(&dr->lock);
        tu_sleep_ms(2);
    } while (tu_now_ns() < end);
    return false;
}

/* ---- the fleets ------------------------------------------------------------------ */

struct fleet { const char *name; struct orbit_fleet *f; struct orbit_admission *a; pid_t victim; };

/* The test joins as node 0 and makes the ledger (100 units); the victim holds 5 of them. */
static void fleet_make(struct fleet *fl, const char *tag)
{
    fl->name = strdup(tu_fleet_name(tag));
    fl->f = tu_join(fl->name, CAPACITY, 0, 0, tu_backing());
    ck_assert_int_eq(orbit_admission_open(fl->f, &ADM_SPEC, &fl->a), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(fl->a, DOMAIN, 100), 0);
    struct tu_gate ready;
    tu_gate_init(&ready);
    fl->victim = spawn_victim(fl->name, &ready);
    tu_gate_pass(&ready);
    tu_gate_close(&ready);
}

static uint64_t used(struct fleet *fl)
{
    struct orbit_domain_info d[4];
    ck_assert_int_eq(orbit_admission_domains(fl->a, d, 4), 1);
    return d[0].used;
}

static uint32_t node_state(struct fleet *fl, uint16_t node)
{
    struct orbit_node_snapshot s;
    for (int i = 0; i < 1000; i++)
        if (orbit_fleet_node_snapshot(fl->f, node, &s) == 0)
            return s.state;
    ck_abort_msg("node %u of %s never read consistently", node, fl->name);
}

static void kill_victim(struct fleet *fl)
{
    kill(fl->victim, SIGKILL);
    ck_assert_int_eq(tu_wait_child(fl->victim, 10000), 128 + SIGKILL);
}

/* Until A's report has started (its node left LIVE) and so waits on the held lock. */
static void until_report_started(struct fleet *fl)
{
    for (int i = 0; i < 2000 && node_state(fl, VICTIM) == ORBIT_NODE_LIVE; i++)
        tu_sleep_ms(1);
    ck_assert_msg(node_state(fl, VICTIM) != ORBIT_NODE_LIVE, "A's death was not taken up within 2 s");
}

static void fleet_end(struct fleet *fl)
{
    orbit_admission_close(fl->a);
    orbit_fleet_leave(fl->f);
    ck_assert_int_eq(orbit_fleet_unlink(fl->name), 0);
    free((void *)fl->name);
}

START_TEST(test_stuck_fleet_delays_no_other)
{
    struct driver *dr = calloc(1, sizeof *dr);
    ck_assert_ptr_nonnull(dr);
    if (!(dr->r = death_open(_i))) {
        free(dr);
        return;
    }
    pthread_mutex_init(&dr->lock, NULL);
    ck_assert_int_eq(orbit_reaper_on_death(dr->r, on_death, dr, 0), 0);
    ck_assert_int_eq(orbit_reaper_on_deferral(dr->r, on_deferral, dr), 0);
    struct fleet a, b;
    fleet_make(&a, "indep-a");
    fleet_make(&b, "indep-b");
    pid_t parker = spawn_parker(a.name);
    ck_assert_int_eq(orbit_reaper_watch(dr->r, a.name), 0);
    ck_assert_int_eq(orbit_reaper_watch(dr->r, b.name), 0);
    ck_assert_int_ge(orbit_reaper_process(dr->r, 0), 0);   /* both victims watched */
    ck_assert_int_eq(pthread_create(&dr->thread, NULL, drive, dr), 0);

    kill_victim(&a);
    until_report_started(&a);
    int64_t b_killed = tu_now_ns();
    kill_victim(&b);
    struct orbit_reaper_death db, da;
    bool b_done = death_of(dr, b.name, VICTIM, 8000, &db);
    int64_t b_ms = ((b_done ? (int64_t)db.reclaimed_ns : tu_now_ns()) - b_killed) / 1000000;
    fprintf(stderr, "%s: B's kill -> reclaim %lld ms while A's lock is held\n",
            orbit_reaper_backend_name(death_backends[_i]), (long long)b_ms);
    ck_assert_msg(b_done && b_ms <= B_BOUND_MS,
                  "B's death took %lld ms to reclaim (bound %d ms) while A's ledger lock was held%s",
                  (long long)b_ms, B_BOUND_MS, b_done ? "" : " (never, within 8 s)");
    ck_assert_uint_eq(used(&b), 0);
    ck_assert_uint_eq(node_state(&b, VICTIM), ORBIT_NODE_FREE);
    ck_assert_uint_ne(node_state(&a, VICTIM), ORBIT_NODE_FREE);   /* A's report: still owed */

    /* Held past the lock's bound: A's report is deferred (said so), and retried later. */
    struct orbit_reaper_deferral df;
    ck_assert_msg(first_deferral(dr, 5000, &df), "A's report was not deferred within 5 s");
    ck_assert_str_eq(df.fleet, a.name);
    ck_assert_uint_eq(df.node, VICTIM);
    ck_assert(df.death);
    ck_assert_int_eq(df.error, -ORBIT_ECORRUPT);
    ck_assert_uint_eq(df.attempts, 1);
    ck_assert_uint_gt(df.retry_ms, 0);
    ck_assert_msg(!death_of(dr, a.name, VICTIM, 0, &da), "A's death reported while its share is still owed");

    int64_t let_go = tu_now_ns();
    kill(parker, SIGCONT);
    ck_assert_int_eq(tu_wait_child(parker, 10000), 0);
    ck_assert_msg(death_of(dr, a.name, VICTIM, 6000, &da), "A's death was not reclaimed within 6 s of its lock's release");
    fprintf(stderr, "%s: A's lock released -> A's reclaim %lld ms (%u tries)\n",
            orbit_reaper_backend_name(death_backends[_i]),
            (long long)(((int64_t)da.reclaimed_ns - let_go) / 1000000), da.attempts);
    ck_assert_uint_ge(da.attempts, 2);
    ck_assert_uint_ge(da.reclaimed_ns, df.deferred_ns);
    ck_assert_uint_eq(used(&a), 0);
    ck_assert_uint_eq(node_state(&a, VICTIM), ORBIT_NODE_FREE);

    atomic_store(&dr->stop, true);
    ck_assert_int_eq(pthread_join(dr->thread, NULL), 0);
    ck_assert_int_eq(atomic_load(&dr->error), 0);
    orbit_reaper_close(dr->r);
    fleet_end(&a);
    fleet_end(&b);
    pthread_mutex_destroy(&dr->lock);
    free(dr);
}
END_TEST

static Suite *fleets_suite(void)
{
    Suite *s = suite_create("death-fleets");
    TCase *tc = tcase_create("independence");
    tcase_set_timeout(tc, 60);
    TCase *bpf = tu_optional_tcase("bpf");
    tcase_set_timeout(bpf, 60);
    DEATH_ADD_BACKENDS(tc, bpf, test_stuck_fleet_delays_no_other);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, bpf);
    return s;
}

int main(void)
{
    return tu_run(fleets_suite());
}
