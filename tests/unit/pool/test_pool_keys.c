/* SPDX-License-Identifier: MIT */
/* Key reclamation (tombstones, probe chains, a million keys), watches, readiness, io_uring waits, policies. */
#include <poll.h>
#include <orbit/uring.h>
#include "pool_common.h"

#define CHURN_KEYS  1000000u
#define CHURN_LIVE  128u

START_TEST(a_million_distinct_keys_pass_through_a_256_slot_key_table)
{
    struct orbit_pool_spec spec = { .kind = 220, .key_capacity = 256, .lane_capacity = 256, .generation_limit = 0 };
    struct env e = env_open(&spec);
    orbit_id live[CHURN_LIVE];
    /* Keep CHURN_LIVE keys live (half the table) while a million distinct ones come and go. */
    for (uint64_t n = 0; n < CHURN_KEYS; n++) {
        uint32_t at = (uint32_t)(n % CHURN_LIVE);
        if (n >= CHURN_LIVE)
            QUIET_CHECK(orbit_pool_unregister(e.p, live[at]) == 0, "unregister %llu", (unsigned long long)n);
        int rc = orbit_pool_register(e.p, key_n(n), 1, &live[at]);
        QUIET_CHECK(rc == 0, "key %llu: %s", (unsigned long long)n, orbit_strerror(rc));
        if (n % 4099 == 0) {
            /* Every live key is still found through its probe chain, with its counts. */
            for (uint64_t back = 0; back < CHURN_LIVE && back <= n; back++) {
                orbit_key k = key_n(n - back);
                uint32_t l = 0, c = 9;
                orbit_pool_budget(e.p, k, &l, &c);
                QUIET_CHECK(orbit_pool_candidates(e.p, k, NULL, 0) == 1 && l == 1 && c == 0,
                            "key %llu lost at %llu", (unsigned long long)(n - back), (unsigned long long)n);
            }
            struct orbit_pool_key_table kt;
            orbit_pool_key_table(e.p, &kt);
            QUIET_CHECK(kt.live == (n + 1 < CHURN_LIVE ? n + 1 : CHURN_LIVE), "live keys %u", kt.live);
            /* Tombstones are reused or swept: they never pile up past a quarter of the table. */
            QUIET_CHECK(kt.tombstones < 64, "tombstones %u at %llu", kt.tombstones, (unsigned long long)n);
        }
    }
    for (uint32_t i = 0; i < CHURN_LIVE; i++)
        ck_assert_int_eq(orbit_pool_unregister(e.p, live[i]), 0);
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(e.p, &kt);
    ck_assert_uint_eq(kt.live, 0);
    ck_assert_uint_eq(kt.capacity, 256);
    struct orbit_pool_stats st;
    orbit_pool_stats(e.p, &st);
    ck_assert_uint_eq(st.key_inserts, CHURN_KEYS);
    ck_assert_uint_eq(st.key_reclaims, CHURN_KEYS);
    /* A gone key reads as empty and can come back. */
    assert_budget(e.p, key_n(5), 0, 0);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(e.p, key_n(5), 1, &id), 0);
    env_close(&e);
}
END_TEST

/* xorshift: a reproducible stream for the model test. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

START_TEST(a_tiny_key_table_matches_a_model_under_random_churn)
{
    enum { KEYS = 40, CAP = 16, STEPS = 200000 };
    struct orbit_pool_spec spec = { .kind = 221, .key_capacity = CAP, .lane_capacity = 256, .generation_limit = 0 };
    struct env e = env_open(&spec);
    orbit_id ids[KEYS][4];
    uint32_t live[KEYS] = { 0 };
    struct orbit_permit permits[KEYS];
    bool claimed[KEYS] = { false };
    uint64_t seed = 0x5eed1234abcdull;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = rng_next(&seed);
        uint32_t k = (uint32_t)(r % KEYS), op = (uint32_t)((r >> 8) % 3);
        uint32_t distinct = 0;
        for (int i = 0; i < KEYS; i++)
            distinct += live[i] > 0 || claimed[i];
        bool present = live[k] > 0 || claimed[k];
        if (op == 0 && live[k] < 4) {
            int rc = orbit_pool_register(e.p, key_n(k), 1, &ids[k][live[k]]);
            if (!present && distinct == CAP) {
                QUIET_CHECK(rc == -ORBIT_EKEYFULL, "step %d: full table gave %d", step, rc);
                continue;
            }
            QUIET_CHECK(rc == 0, "step %d register: %s", step, orbit_strerror(rc));
            live[k]++;
        } else if (op == 1 && live[k] > 0) {
            QUIET_CHECK(orbit_pool_unregister(e.p, ids[k][--live[k]]) == 0, "step %d unregister", step);
        } else if (op == 2) {
            if (claimed[k]) {
                orbit_permit_finish(&permits[k]);
                claimed[k] = false;
            } else {
                int rc = orbit_pool_claim_create(e.p, key_n(k), 100, &permits[k]);
                QUIET_CHECK(rc == (!present && distinct == CAP ? -ORBIT_EKEYFULL : 0), "step %d claim %d", step, rc);
                claimed[k] = rc == 0;
            }
        }
        if (step % 997 == 0)
            for (int i = 0; i < KEYS; i++) {
                uint32_t l = 99, c = 99;
                orbit_pool_budget(e.p, key_n((uint64_t)i), &l, &c);
                QUIET_CHECK(l == live[i] && c == (claimed[i] ? 1u : 0u), "step %d key %d budget", step, i);
                QUIET_CHECK(orbit_pool_candidates(e.p, key_n((uint64_t)i), NULL, 0) == live[i],
                            "step %d key %d candidates", step, i);
            }
    }
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(e.p, &kt);
    uint32_t distinct = 0;
    for (int i = 0; i < KEYS; i++)
        distinct += live[i] > 0 || claimed[i];
    ck_assert_uint_eq(kt.live, distinct);
    ck_assert_uint_eq(kt.live + kt.tombstones + kt.empty, CAP);
    struct orbit_pool_key_info info[CAP];
    ck_assert_int_eq(orbit_pool_keys(e.p, info, CAP), distinct);
    struct orbit_pool_stats st;
    orbit_pool_stats(e.p, &st);
    ck_assert_uint_gt(st.key_sweeps, 0);   /* the sweep ran, and the model still matched */
    env_close(&e);
}
END_TEST

struct churner { struct orbit_pool *p; uint64_t seed; int failures; };

/* Register/unregister, claim/finish, version and waits on 8 keys that fill an 8-slot table. */
static void *churn_thread(void *arg)
{
    struct churner *c = arg;
    for (int i = 0; i < 40000; i++) {
        uint64_t r = rng_next(&c->seed);
        orbit_key k = key_n(r % 8);
        orbit_id id;
        struct orbit_permit pm;
        uint32_t v;
        switch ((r >> 8) % 4) {
        case 0: {
            struct orbit_lease l;
            struct orbit_execution ex;
            c->failures += orbit_pool_register(c->p, k, 1, &id) != 0;
            c->failures += orbit_pool_candidates(c->p, k, NULL, 0) < 1;
            c->failures += orbit_pool_reserve(c->p, id, &l) != 0;
            c->failures += orbit_pool_accept(c->p, &l, &ex) != 0;
            orbit_execution_complete(&ex);
            c->failures += orbit_pool_unregister(c->p, id) != 0;
            break;
        }
        case 1:
            c->failures += orbit_pool_claim_create(c->p, k, 100, &pm) != 0;
            orbit_permit_finish(&pm);
            break;
        case 2:
            c->failures += orbit_pool_version(c->p, k, &v) != 0;
            break;
        default: {
            int rc = orbit_pool_wait_capacity(c->p, k, 0, 0, &v);
            c->failures += rc != 0 && rc != -ORBIT_ETIMEDOUT;
            break;
        }
        }
    }
    return NULL;
}

START_TEST(threads_churning_keys_in_a_full_table_never_see_it_full)
{
    struct orbit_pool_spec spec = { .kind = 222, .key_capacity = 8, .lane_capacity = 256, .generation_limit = 0 };
    struct env e = env_open(&spec);
    struct churner c[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (struct churner){ e.p, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), 0 };
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn_thread, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(c[i].failures, 0);
    }
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(e.p, &kt);
    ck_assert_uint_eq(kt.live, 0);
    for (uint64_t k = 0; k < 8; k++)
        assert_budget(e.p, key_n(k), 0, 0);
    env_close(&e);
}
END_TEST

START_TEST(watch_rings_the_doorbell_and_readiness_fires)
{
    const char *name = tu_fleet_name("pwatch");
    struct orbit_fleet *fa = tu_join(name, 4, 0, 1, tu_backing());
    struct orbit_fleet *fb = tu_join(name, 4, 1, 2, tu_backing());
    struct orbit_pool *a, *b;
    ck_assert_int_eq(orbit_pool_open(fa, NULL, &a), 0);
    ck_assert_int_eq(orbit_pool_open(fb, NULL, &b), 0);
    int fd = orbit_pool_readiness(b);
    ck_assert_int_ge(fd, 0);
    struct orbit_pool_stats s0, s1;
    orbit_id id;
    /* Unwatched: a change rings no doorbell. */
    orbit_pool_stats(a, &s0);
    ck_assert_int_eq(orbit_pool_register(a, KEY, 1, &id), 0);
    orbit_pool_stats(a, &s1);
    ck_assert_uint_eq(s1.doorbells, s0.doorbells);
    /* Watched twice: one watch, one reference. */
    ck_assert_int_eq(orbit_pool_watch(b, KEY), 0);
    ck_assert_int_eq(orbit_pool_watch(b, KEY), 0);
    struct orbit_pool_key_info ki[4];
    ck_assert_int_eq(orbit_pool_keys(a, ki, 4), 1);
    ck_assert_uint_eq(ki[0].watchers, 1);
    ck_assert_uint_eq(ki[0].refs, 2);   /* the resource and the watch */
    struct orbit_lease l;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_reserve(a, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(a, &l, &ex), 0);
    orbit_execution_complete(&ex);      /* a change: b's doorbell rings once, the watch is spent */
    orbit_pool_stats(a, &s0);
    ck_assert_uint_eq(s0.doorbells, s1.doorbells + 1);
    struct pollfd pfd = { fd, POLLIN, 0 };
    ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
    ck_assert_int_eq(orbit_pool_keys(a, ki, 4), 1);
    ck_assert_uint_eq(ki[0].watchers, 0);
    ck_assert_uint_eq(ki[0].refs, 1);
    ck_assert_int_eq(orbit_pool_reserve(a, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(a, &l, &ex), 0);
    orbit_execution_complete(&ex);
    orbit_pool_stats(a, &s1);
    ck_assert_uint_eq(s1.doorbells, s0.doorbells);   /* not re-armed: not rung */
    /* watch_since with a stale version rings at once. */
    uint32_t v;
    ck_assert_int_eq(orbit_pool_version(b, KEY, &v), 0);
    orbit_pool_stats(b, &s0);
    ck_assert_int_eq(orbit_pool_watch_since(b, KEY, v), 0);
    orbit_pool_stats(b, &s1);
    ck_assert_uint_eq(s1.doorbells, s0.doorbells);
    ck_assert_int_eq(orbit_pool_watch_since(b, KEY, v - 1), 0);
    orbit_pool_stats(b, &s1);
    ck_assert_uint_eq(s1.doorbells, s0.doorbells + 1);
    ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
    /* A watch on an empty key keeps it; node_dead of the watcher returns that reference. */
    orbit_key other = key_n(77);
    ck_assert_int_eq(orbit_pool_watch(b, other), 0);
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(a, &kt);
    ck_assert_uint_eq(kt.live, 2);
    orbit_pool_node_dead(a, 1, 999);
    orbit_pool_key_table(a, &kt);
    ck_assert_uint_eq(kt.live, 1);
    orbit_pool_close(b);   /* closes the readiness fd too */
    orbit_pool_close(a);
    orbit_fleet_leave(fa);
    orbit_fleet_leave(fb);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(prep_wait_capacity_completes_on_the_next_change)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease l;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &l, &ex), 0);
    uint32_t v;
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &v), 0);
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(4, &ring, 0), 0);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    ck_assert_ptr_nonnull(sqe);
    ck_assert_int_eq(orbit_pool_prep_wait_capacity(NULL, KEY, v, sqe), -ORBIT_EMALFORMED);
    if (!orbit_uring_futex_supported()) {
        ck_assert_int_eq(orbit_pool_prep_wait_capacity(e.p, KEY, v, sqe), -ORBIT_ENOTSUP);
        io_uring_queue_exit(&ring);
        orbit_execution_complete(&ex);
        env_close(&e);
        return;
    }
    /* Already past since: ready now, SQE untouched. */
    ck_assert_int_eq(orbit_pool_prep_wait_capacity(e.p, KEY, v - 1, sqe), 1);
    ck_assert_int_eq(orbit_pool_prep_wait_capacity(e.p, KEY, v, sqe), 0);
    io_uring_sqe_set_data64(sqe, 42);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = { 0, 20 * 1000000 };
    ck_assert_int_eq(io_uring_wait_cqe_timeout(&ring, &cqe, &ts), -ETIME);   /* no change yet */
    orbit_execution_complete(&ex);
    ts.tv_sec = 10;
    ck_assert_int_eq(io_uring_wait_cqe_timeout(&ring, &cqe, &ts), 0);
    ck_assert_uint_eq(io_uring_cqe_get_data64(cqe), 42);
    ck_assert(cqe->res == 0 || cqe->res == -EAGAIN);
    io_uring_cqe_seen(&ring, cqe);
    uint32_t now;
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &now), 0);
    ck_assert_uint_gt(now, v);
    io_uring_queue_exit(&ring);
    env_close(&e);
}
END_TEST

START_TEST(least_loaded_and_caller_policies)
{
    struct env e = env_open(NULL);
    orbit_id a, b, c;
    struct orbit_lease l;
    struct orbit_plan plan;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 2, &a), 0);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 4, &b), 0);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 4, &c), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, b, &l), 0);   /* b: 3 free, c: 4 free, a: 2 free */
    tu_sleep_ms(2);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &orbit_policy_least_loaded, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_LOCAL_REUSE);
    ck_assert_uint_eq(plan.lease.id, c);
    /* b and c have 3 free each: the least recently reserved (b) wins the tie. */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &orbit_policy_least_loaded, &plan), 0);
    ck_assert_uint_eq(plan.lease.id, b);
    /* Now a: 0 used (2 free), b: 2 used (2 free), c: 1 used (3 free). */
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &orbit_policy_local_first, &plan), 0);
    ck_assert_uint_eq(plan.lease.id, a);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &orbit_policy_least_loaded, &plan), 0);
    ck_assert_uint_eq(plan.lease.id, c);
    env_close(&e);
}
END_TEST

static struct orbit_decision reject_policy(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                           uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    (void)key, (void)c, (void)n, (void)live, (void)creating, (void)l;
    (*(int *)ctx)++;
    return (struct orbit_decision){ .kind = ORBIT_DECIDE_REJECT, .reason = 123 };
}

/* Always the first candidate, busy or not: every attempt loses. */
static struct orbit_decision stubborn_policy(void *ctx, orbit_key key, const struct orbit_candidate *c,
                                             size_t n, uint32_t live, uint32_t creating,
                                             const struct orbit_limits *l)
{
    (void)key, (void)live, (void)creating, (void)l;
    (*(int *)ctx)++;
    return n ? (struct orbit_decision){ .kind = ORBIT_DECIDE_REUSE, .reuse = c[0].id }
             : (struct orbit_decision){ .kind = ORBIT_DECIDE_CREATE };
}

static struct orbit_decision wait_policy(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n,
                                         uint32_t live, uint32_t creating, const struct orbit_limits *l)
{
    (void)key, (void)c, (void)n, (void)live, (void)creating, (void)l;
    (*(int *)ctx)++;
    return (struct orbit_decision){ .kind = ORBIT_DECIDE_WAIT };
}

START_TEST(acquire_carries_out_a_callers_policy_and_gives_up_after_its_attempts)
{
    struct env e = env_open(NULL);
    int calls = 0;
    struct orbit_policy reject = { reject_policy, &calls };
    struct orbit_plan plan;
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &reject, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_REJECT);
    ck_assert_int_eq(plan.reason, 123);
    ck_assert_int_eq(calls, 1);
    orbit_id id;
    struct orbit_lease l;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l), 0);
    calls = 0;
    struct orbit_policy stubborn = { stubborn_policy, &calls };
    struct orbit_limits lim = { .max_live = 5, .attempts = 3 };
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &lim, &stubborn, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_WAIT);
    ck_assert_int_eq(calls, 3 + 1);   /* its attempts, then a last look after the version */
    lim.attempts = 0;   /* at least one attempt */
    calls = 0;
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &lim, &stubborn, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_WAIT);
    ck_assert_int_eq(calls, 1 + 1);
    calls = 0;
    struct orbit_policy waits = { wait_policy, &calls };
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, &lim, &waits, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_WAIT);
    ck_assert_int_eq(calls, 2);   /* WAIT, then once more after the version: one attempt */
    /* Many candidates: the snapshot grows past its stack buffer. */
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &orbit_policy_local_only, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_LOCAL_REUSE);
    struct orbit_candidate cs[64];
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, cs, 64), 41);
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, cs, 2), 41);
    env_close(&e);
}
END_TEST

/* XXH3-128 with seed 0, as xxhsum -H2 prints it: hi then lo. "" is xxHash's published value. */
static void expect_key(orbit_key k, const char *want)
{
    char text[ORBIT_KEY_TEXT_MAX];
    ck_assert_int_eq(orbit_key_format(k, text, sizeof text), 36);
    ck_assert_str_eq(text + 4, want);
}

START_TEST(keys_from_bytes_are_the_xxh3_128_digest_and_stable)
{
    expect_key(orbit_key_from_string(""), "99aa06d3014798d86001c324468d497f");
    expect_key(orbit_key_from_bytes(NULL, 0), "99aa06d3014798d86001c324468d497f");
    expect_key(orbit_key_from_string(NULL), "99aa06d3014798d86001c324468d497f");
    expect_key(orbit_key_from_string("hello"), "b5e9c1ad071b3e7fc779cfaa5e523818");
    expect_key(orbit_key_from_string("db-primary:5432"), "c68d4969ea14bab95a5c3290bf17bccb");
    orbit_key a = orbit_key_from_bytes("db-primary:5432\0tail", 15), b = orbit_key_from_string("db-primary:5432");
    ck_assert(a.lo == b.lo && a.hi == b.hi);   /* the string's key is its bytes' key */
    unsigned char big[1000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7);
    orbit_key c = orbit_key_from_bytes(big, sizeof big), d = orbit_key_from_bytes(big, sizeof big - 1);
    ck_assert(c.lo != d.lo || c.hi != d.hi);
    /* A key made from bytes works as any key: a resource registered under it is found by it. */
    struct env e = env_open(NULL);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(e.p, orbit_key_from_string("db-primary:5432"), 1, &id), 0);
    struct orbit_candidate cand;
    ck_assert_int_eq(orbit_pool_candidates(e.p, b, &cand, 1), 1);
    ck_assert_uint_eq(cand.id, id);
    env_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-keys");
    /* One case per test: CK_RUN_CASE=<name> runs one alone. */
    const struct { const char *name; const TTest *test; } tests[] = {
        { "a_million_distinct_keys_pass_through_a_256_slot_key_table", a_million_distinct_keys_pass_through_a_256_slot_key_table },
        { "a_tiny_key_table_matches_a_model_under_random_churn", a_tiny_key_table_matches_a_model_under_random_churn },
        { "threads_churning_keys_in_a_full_table_never_see_it_full", threads_churning_keys_in_a_full_table_never_see_it_full },
        { "watch_rings_the_doorbell_and_readiness_fires", watch_rings_the_doorbell_and_readiness_fires },
        { "prep_wait_capacity_completes_on_the_next_change", prep_wait_capacity_completes_on_the_next_change },
        { "least_loaded_and_caller_policies", least_loaded_and_caller_policies },
        { "acquire_carries_out_a_callers_policy_and_gives_up_after_its_attempts", acquire_carries_out_a_callers_policy_and_gives_up_after_its_attempts },
        { "keys_from_bytes_are_the_xxh3_128_digest_and_stable", keys_from_bytes_are_the_xxh3_128_digest_and_stable },
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return tu_run(s);
}
