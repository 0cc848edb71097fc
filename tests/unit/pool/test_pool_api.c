/* SPDX-License-Identifier: MIT */
/* Beyond the core protocol: specs, geometry, error paths, observers, policies, tenancy safety. */
#include <string.h>
#include "pool_common.h"
#include "pool/pool_layout.h"   /* the corruption test plays a bad writer */

START_TEST(spec_is_validated)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.backing = ORBIT_BACKING_PRIVATE;
    struct orbit_fleet *f;
    struct orbit_pool *p = NULL;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &f), 0);
    struct orbit_pool_spec bad[] = {
        { .kind = 255, .key_capacity = 256, .lane_capacity = 256, .generation_limit = 0 },                 /* the fleet's own kind */
        { .kind = 200, .key_capacity = 0, .lane_capacity = 256, .generation_limit = 0 },
        { .kind = 200, .key_capacity = 3, .lane_capacity = 256, .generation_limit = 0 },
        { .kind = 200, .key_capacity = 1u << 21, .lane_capacity = 256, .generation_limit = 0 },
        { .kind = 200, .key_capacity = 256, .lane_capacity = 0, .generation_limit = 0 },
        { .kind = 200, .key_capacity = 256, .lane_capacity = 48, .generation_limit = 0 },
        { .kind = 200, .key_capacity = 256, .lane_capacity = 131072, .generation_limit = 0 },
        { .kind = 200, .key_capacity = 256, .lane_capacity = 256, .generation_limit = 0x1000000 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(orbit_pool_open(f, &bad[i], &p), -ORBIT_EMALFORMED);
        ck_assert_uint_eq(orbit_pool_segment_size(&bad[i], 64), 0);
    }
    ck_assert_int_eq(orbit_pool_open(NULL, NULL, &p), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_open(f, NULL, NULL), -ORBIT_EMALFORMED);
    ck_assert_uint_gt(orbit_pool_segment_size(NULL, 64), 64u * 256 * 384);
    ck_assert_uint_eq(orbit_pool_segment_size(NULL, 0), 0);
    struct orbit_pool_spec one = { .kind = 201, .key_capacity = 1, .lane_capacity = 1, .generation_limit = 1 };   /* the smallest legal pool */
    ck_assert_int_eq(orbit_pool_open(f, &one, &p), 0);
    struct orbit_pool_spec got;
    orbit_pool_spec_of(p, &got);
    ck_assert_uint_eq(got.kind, 201);
    ck_assert_uint_eq(got.key_capacity, 1);
    ck_assert_uint_eq(got.generation_limit, 1);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(geometry_mismatch_is_refused_and_open_existing_reads_the_spec)
{
    const char *name = tu_fleet_name("pgeo");
    struct orbit_fleet *f = tu_join(name, 4, 0, 11, tu_backing());
    struct orbit_pool_spec spec = { .kind = 200, .key_capacity = 64, .lane_capacity = 32, .generation_limit = 4 };
    struct orbit_pool *p, *q;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    ck_assert_uint_eq(orbit_pool_kind(p), 200);
    struct orbit_pool_spec other = spec;
    other.key_capacity = 128;
    ck_assert_int_eq(orbit_pool_open(f, &other, &q), -ORBIT_EGEOMETRY);
    other = spec;
    other.generation_limit = 5;
    ck_assert_int_eq(orbit_pool_open(f, &other, &q), -ORBIT_EGEOMETRY);
    /* The same spec opens the same table. */
    ck_assert_int_eq(orbit_pool_open(f, &spec, &q), 0);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 2, &id), 0);
    ck_assert_int_eq(orbit_pool_candidates(q, KEY, NULL, 0), 1);
    orbit_pool_close(q);
    /* open_existing takes the spec from the segment. */
    ck_assert_int_eq(orbit_pool_open_existing(f, 200, &q), 0);
    struct orbit_pool_spec got;
    orbit_pool_spec_of(q, &got);
    ck_assert_uint_eq(got.key_capacity, 64);
    ck_assert_uint_eq(got.lane_capacity, 32);
    ck_assert_uint_eq(got.generation_limit, 4);
    ck_assert_int_eq(orbit_pool_candidates(q, KEY, NULL, 0), 1);
    orbit_pool_close(q);
    /* Independent specs are independent pools. */
    struct orbit_pool *d;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &d), 0);
    ck_assert_int_eq(orbit_pool_candidates(d, KEY, NULL, 0), 0);
    orbit_pool_reset_all(d);
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, NULL, 0), 1);
    orbit_pool_close(d);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(malformed_ids_and_arguments_are_refused)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease lease;
    struct orbit_execution ex;
    struct orbit_permit pm;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 0, &id), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_register(NULL, KEY, 1, &id), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &id), 0);
    orbit_id bad[] = {
        orbit_id_make(99, 0, orbit_id_generation(id), 0),                         /* other kind */
        orbit_id_make(ORBIT_POOL_KIND, 2, orbit_id_generation(id), 0),            /* node >= capacity */
        orbit_id_make(ORBIT_POOL_KIND, 0, orbit_id_generation(id), 256),          /* slot >= lane */
        orbit_id_make(ORBIT_POOL_KIND, 0, 0, orbit_id_slot(id)),                  /* generation 0 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(orbit_pool_reserve(e.p, bad[i], &lease), -ORBIT_EMALFORMED);
        ck_assert_int_eq(orbit_pool_unregister(e.p, bad[i]), -ORBIT_EMALFORMED);
        ck_assert_int_eq(orbit_pool_drain(e.p, bad[i]), -ORBIT_EMALFORMED);
        ck_assert_int_eq(orbit_pool_reconcile(e.p, bad[i], 0, 0), -ORBIT_EMALFORMED);
        lease = (struct orbit_lease){ .id = bad[i], .fence = 1, .epoch = orbit_pool_epoch(e.p) };
        ck_assert_int_eq(orbit_pool_accept(e.p, &lease, &ex), -ORBIT_EMALFORMED);
        ck_assert(!orbit_pool_is_current(e.p, &lease));
    }
    /* A lane no node ever used: nothing there to name. */
    orbit_id unused = orbit_id_make(ORBIT_POOL_KIND, 1, 1, 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, unused, &lease), -ORBIT_ESTALE);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_accept(e.p, NULL, &ex), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, KEY, 1, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_claim_create(NULL, KEY, 1, &pm), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_candidates(e.p, KEY, NULL, 3), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_owners(e.p, NULL, 3), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, NULL, NULL), -ORBIT_EMALFORMED);
    struct orbit_policy no_fn = { NULL, NULL };
    struct orbit_plan plan;
    ck_assert_int_eq(orbit_pool_acquire(e.p, KEY, NULL, &no_fn, &plan), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_wait_capacity(NULL, KEY, 0, 0, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_watch(NULL, KEY), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_pool_readiness(NULL), -ORBIT_EMALFORMED);
    /* NULL-tolerant voids. */
    orbit_execution_complete(NULL);
    orbit_permit_finish(NULL);
    orbit_pool_node_dead(NULL, 0, 1);
    orbit_pool_reset_all(NULL);
    orbit_pool_close(NULL);
    ex = (struct orbit_execution){ 0 };
    orbit_execution_complete(&ex);
    char text[ORBIT_KEY_TEXT_MAX];
    orbit_key k = { 0x1122334455667788ull, 0x99aabbccddeeff00ull };
    ck_assert_int_eq(orbit_key_format(k, text, sizeof text), 36);
    ck_assert_str_eq(text, "key:99aabbccddeeff001122334455667788");
    ck_assert_int_eq(orbit_key_format(k, text, 36), -ORBIT_ETOOLARGE);
    env_close(&e);
}
END_TEST

START_TEST(key_and_lane_capacity_errors)
{
    struct orbit_pool_spec spec = { .kind = 210, .key_capacity = 16, .lane_capacity = 4, .generation_limit = 0 };
    struct env e = env_open(&spec);
    orbit_id ids[16], id;
    struct orbit_permit pm;
    uint32_t v;
    for (uint64_t i = 0; i < 4; i++)
        ck_assert_int_eq(orbit_pool_register(e.p, key_n(i), 1, &ids[i]), 0);
    ck_assert_int_eq(orbit_pool_register(e.p, key_n(99), 1, &id), -ORBIT_EFULL);
    assert_budget(e.p, key_n(99), 0, 0);   /* the refused register left no key behind */
    for (uint64_t i = 4; i < 16; i++)
        ck_assert_int_eq(orbit_pool_claim_create(e.p, key_n(i), 1, &pm), 0);   /* held on purpose */
    struct orbit_pool_key_table kt;
    orbit_pool_key_table(e.p, &kt);
    ck_assert_uint_eq(kt.live, 16);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, key_n(16), 1, &pm), -ORBIT_EKEYFULL);
    ck_assert_int_eq(orbit_pool_version(e.p, key_n(16), &v), -ORBIT_EKEYFULL);
    ck_assert_int_eq(orbit_pool_watch(e.p, key_n(16)), -ORBIT_EKEYFULL);
    ck_assert_int_eq(orbit_pool_wait_capacity(e.p, key_n(16), 0, 0, &v), -ORBIT_EKEYFULL);
    ck_assert_int_eq(orbit_pool_unregister(e.p, ids[0]), 0);
    ck_assert_int_eq(orbit_pool_claim_create(e.p, key_n(16), 1, &pm), 0);
    env_close(&e);
}
END_TEST

START_TEST(completing_after_the_slot_was_reinstalled_touches_nothing)
{
    struct orbit_pool_spec spec = { .kind = 211, .key_capacity = 16, .lane_capacity = 1, .generation_limit = 0 };   /* one slot: a re-register reuses it */
    struct env e = env_open(&spec);
    orbit_id old, fresh;
    struct orbit_lease l1, l2;
    struct orbit_execution ex_old, ex_new;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &old), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, old, &l1), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &l1, &ex_old), 0);
    ck_assert_int_eq(orbit_pool_unregister(e.p, old), 0);
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 1, &fresh), 0);
    ck_assert_uint_eq(orbit_id_slot(fresh), orbit_id_slot(old));
    ck_assert_int_eq(orbit_pool_reserve(e.p, fresh, &l2), 0);
    ck_assert_uint_gt(l2.fence, l1.fence);   /* fences never restart on a slot */
    ck_assert_int_eq(orbit_pool_accept(e.p, &l2, &ex_new), 0);
    orbit_execution_complete(&ex_old);
    ck_assert_uint_eq(only_candidate(e.p, KEY).active, 1);
    orbit_execution_complete(&ex_new);
    ck_assert_uint_eq(only_candidate(e.p, KEY).active, 0);
    /* A lease of another epoch is stale even on a live slot. */
    struct orbit_lease l3;
    ck_assert_int_eq(orbit_pool_reserve(e.p, fresh, &l3), 0);
    l3.epoch--;
    ck_assert_int_eq(orbit_pool_accept(e.p, &l3, &ex_new), -ORBIT_ESTALE);
    ck_assert(!orbit_pool_is_current(e.p, &l3));
    env_close(&e);
}
END_TEST

START_TEST(reconcile_sets_the_owners_truth_and_wakes_the_key)
{
    struct env e = env_open(NULL);
    orbit_id id;
    struct orbit_lease l;
    struct orbit_execution ex;
    uint32_t v0, v1, v2;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 4, &id), 0);
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &l, &ex), 0);
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &v0), 0);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 3, 60000), 0);
    struct orbit_candidate c = only_candidate(e.p, KEY);
    ck_assert_uint_eq(c.active, 3);
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &v1), 0);
    ck_assert_uint_eq(v1, v0);   /* nothing freed: no change */
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 60000), 0);
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &v2), 0);
    ck_assert_uint_gt(v2, v1);   /* units came back: waiters are told */
    orbit_execution_complete(&ex);   /* the owner said 0: nothing left to give back */
    ck_assert_uint_eq(only_candidate(e.p, KEY).active, 0);
    /* Grace 0 ages every unaccepted reservation. */
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 0), 0);
    tu_sleep_ms(2);
    ck_assert_int_eq(orbit_pool_reconcile(e.p, id, 0, 0), 0);
    ck_assert_uint_eq(only_candidate(e.p, KEY).reserved, 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &l, &ex), -ORBIT_ENOTRESERVED);
    env_close(&e);
}
END_TEST

START_TEST(another_node_is_not_the_owner)
{
    const char *name = tu_fleet_name("powner");
    struct orbit_fleet *fa = tu_join(name, 4, 0, 100, tu_backing());
    struct orbit_fleet *fb = tu_join(name, 4, 1, 200, tu_backing());
    struct orbit_pool *a, *b;
    ck_assert_int_eq(orbit_pool_open(fa, NULL, &a), 0);
    ck_assert_int_eq(orbit_pool_open(fb, NULL, &b), 0);
    ck_assert_uint_eq(orbit_pool_node(b), 1);
    ck_assert_uint_eq(orbit_pool_incarnation(b), 200);
    orbit_id id;
    struct orbit_lease lease;
    struct orbit_execution ex;
    struct orbit_plan plan;
    ck_assert_int_eq(orbit_pool_register(a, KEY, 2, &id), 0);
    ck_assert_int_eq(orbit_pool_unregister(b, id), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_drain(b, id), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_reconcile(b, id, 0, 0), -ORBIT_ENOTOWNER);
    /* b sees a remote candidate, reserves through acquire, and a accepts. */
    struct orbit_candidate c = only_candidate(b, KEY);
    ck_assert(!c.local);
    ck_assert_uint_eq(c.owner, 0);
    ck_assert_uint_eq(c.owner_incarnation, 100);
    ck_assert_int_eq(orbit_pool_acquire(b, KEY, NULL, NULL, &plan), 0);
    ck_assert_int_eq(plan.kind, ORBIT_PLAN_REMOTE_REUSE);
    ck_assert_uint_eq(plan.lease.holder, 1);
    ck_assert_uint_eq(plan.lease.holder_incarnation, 200);
    ck_assert_int_eq(orbit_pool_accept(b, &plan.lease, &ex), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_accept(a, &plan.lease, &ex), 0);
    ck_assert_uint_eq(only_candidate(b, KEY).active, 1);
    orbit_execution_complete(&ex);
    ck_assert_int_eq(orbit_pool_reserve(b, id, &lease), 0);
    struct orbit_owner ow[4];
    ck_assert_int_eq(orbit_pool_owners(b, ow, 4), 1);
    ck_assert_uint_eq(ow[0].node, 0);
    ck_assert_uint_eq(ow[0].incarnation, 100);
    /* An observer inspects and reports deaths but owns nothing. */
    struct orbit_fleet *obs;
    struct orbit_pool *o;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_pool_open(obs, NULL, &o), 0);   /* it exists: opened as it is */
    orbit_pool_close(o);
    ck_assert_int_eq(orbit_pool_open_existing(obs, ORBIT_POOL_KIND, &o), 0);
    ck_assert_uint_eq(orbit_pool_node(o), ORBIT_NODE_NONE);
    orbit_id oid;
    struct orbit_permit pm;
    ck_assert_int_eq(orbit_pool_register(o, KEY, 1, &oid), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_claim_create(o, KEY, 9, &pm), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_watch(o, KEY), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_accept(o, &lease, &ex), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_pool_candidates(o, KEY, NULL, 0), 1);
    uint32_t v;
    ck_assert_int_eq(orbit_pool_version(o, KEY, &v), 0);
    orbit_pool_node_dead(o, 0, 100);
    ck_assert_int_eq(orbit_pool_candidates(a, KEY, NULL, 0), 0);
    ck_assert(!orbit_pool_is_current(b, &lease));
    orbit_pool_close(o);
    orbit_fleet_leave(obs);
    orbit_pool_close(a);
    orbit_pool_close(b);
    orbit_fleet_leave(fa);
    orbit_fleet_leave(fb);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(shared_values_that_fail_a_bounds_check_are_refused)
{
    const char *name = tu_fleet_name("pcorrupt");
    struct orbit_fleet *f = tu_join(name, 3, 0, 5, tu_backing());   /* 3 x 16 = 48 resources */
    struct orbit_pool_spec spec = { .kind = 240, .key_capacity = 16, .lane_capacity = 16, .generation_limit = 0 };
    struct orbit_pool *p, *q;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &p), 0);
    orbit_id id, other;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &other), 0);
    /* A key index out of range in a slot: the slot ends, no key is touched, and it is said. */
    struct pool_resource *r = pool_res_at(p, orbit_id_slot(id));
    atomic_store(&r->key_index, 0xfffffff0u);
    ck_assert_int_eq(orbit_pool_unregister(p, id), -ORBIT_ECORRUPT);
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, NULL, 0), 1);   /* the other is untouched */
    /* Member bits past the table and watcher bits past the fleet are never followed. */
    uint32_t ki;
    ck_assert_int_eq(pool_key_peek(p, KEY, &ki), 0);
    atomic_fetch_or(&pool_key_members(p, ki)[0], 1ull << 63);    /* resource 63 of 48 */
    atomic_fetch_or(&pool_key_members(p, ki)[0], 1ull << 40);    /* lane 2: never pre-faulted */
    atomic_fetch_or(&pool_key_watchers(p, ki)[0], 1ull << 63);   /* node 63 of 3 */
    atomic_fetch_add(&pool_key_at(p, ki)->watch_count, 1);
    atomic_fetch_add(&pool_key_at(p, ki)->refs, REFS_PIN);   /* a watch bit's pin */
    ck_assert_int_eq(orbit_pool_candidates(p, KEY, NULL, 0), 1);
    ck_assert_int_eq(orbit_pool_unregister(p, other), 0);   /* delivers the bogus watch: no ring */
    /* A table whose header is not a pool's is refused on open. */
    p->hdr->magic ^= 1;
    ck_assert_int_eq(orbit_pool_open_existing(f, 240, &q), -ORBIT_ECORRUPT);
    ck_assert_int_eq(orbit_pool_open(f, &spec, &q), -ORBIT_ECORRUPT);
    p->hdr->magic ^= 1;
    ck_assert_int_eq(orbit_pool_open(f, &spec, &q), 0);
    orbit_pool_close(q);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/*
 * Design figure: an uncontended reserve -> accept -> complete nobody waits
 * for writes nothing on the key's line (no change-word bump, no wake); once
 * a version was handed out, the next completion moves the word past it.
 */
START_TEST(an_unwatched_triple_writes_nothing_on_the_key_line)
{
    struct env e = env_open(NULL);
    orbit_id id;
    ck_assert_int_eq(orbit_pool_register(e.p, KEY, 4, &id), 0);
    uint32_t ki;
    ck_assert_int_eq(pool_key_peek(e.p, KEY, &ki), 0);
    struct pool_key *k = pool_key_at(e.p, ki);
    struct pool_key before;
    memcpy(&before, k, sizeof before);
    struct orbit_pool_stats s0, s1;
    orbit_pool_stats(e.p, &s0);
    for (int i = 0; i < 1000; i++) {
        struct orbit_lease l;
        struct orbit_execution ex;
        QUIET_CHECK(orbit_pool_reserve(e.p, id, &l) == 0, "reserve %d", i);
        QUIET_CHECK(orbit_pool_accept(e.p, &l, &ex) == 0, "accept %d", i);
        orbit_execution_complete(&ex);
    }
    orbit_pool_stats(e.p, &s1);
    ck_assert_int_eq(memcmp(&before, k, sizeof before), 0);   /* the line, byte for byte */
    ck_assert_uint_eq(s1.wakes, s0.wakes);
    uint32_t v0, v1;
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &v0), 0);
    struct orbit_lease l;
    struct orbit_execution ex;
    ck_assert_int_eq(orbit_pool_reserve(e.p, id, &l), 0);
    ck_assert_int_eq(orbit_pool_accept(e.p, &l, &ex), 0);
    orbit_execution_complete(&ex);
    ck_assert_int_eq(orbit_pool_version(e.p, KEY, &v1), 0);
    ck_assert_uint_ne(v1, v0);   /* a version was out: the completion moved past it */
    env_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool-api");
    TCase *tc = tcase("api", 60);
    tcase_add_test(tc, spec_is_validated);
    tcase_add_test(tc, geometry_mismatch_is_refused_and_open_existing_reads_the_spec);
    tcase_add_test(tc, malformed_ids_and_arguments_are_refused);
    tcase_add_test(tc, key_and_lane_capacity_errors);
    tcase_add_test(tc, completing_after_the_slot_was_reinstalled_touches_nothing);
    tcase_add_test(tc, reconcile_sets_the_owners_truth_and_wakes_the_key);
    tcase_add_test(tc, another_node_is_not_the_owner);
    tcase_add_test(tc, shared_values_that_fail_a_bounds_check_are_refused);
    tcase_add_test(tc, an_unwatched_triple_writes_nothing_on_the_key_line);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
