/* SPDX-License-Identifier: MIT */
/*
 * A process killed inside unregister (CLOSING, its key counts and reference
 * still in, or already out) or inside register (ALLOCATING, already counted)
 * leaves a slot only its death report can finish: node_dead must take the
 * slot out of its key exactly once and free it.
 */
#include <orbit/pool.h>
#include "testutil.h"
#include "pool/pool_layout.h"

static const orbit_key KEY = { 5, 55 };

/* The state a killed closer or registrar leaves, played on a live resource. */
static void cut_short(struct orbit_pool *p, uint64_t index, int variant)
{
    struct pool_resource *r = pool_res_at(p, index);
    uint32_t w = atomic_load(&r->state), ki = atomic_load(&r->key_index);
    if (variant == 2) {   /* register: counted, member bit set, LIVE never stored */
        atomic_store(&r->state, RES_WORD(RES_GEN(w), RES_ALLOCATING));
        return;
    }
    atomic_store(&r->state, RES_WORD(RES_GEN(w), RES_CLOSING));   /* close: the CAS done */
    if (variant == 1) {   /* ... and the key side too, then killed before CLOSED */
        struct pool_keyop op;
        ck_assert_int_eq(pool_keyop_begin(p, 1, ki, INTENT_UNCOUNT, index, &op), 0);
        atomic_fetch_and(&pool_key_members(p, ki)[index / 64], ~(1ull << (index % 64)));
        pool_counts_add(&pool_key_at(p, ki)->counts, -1, 0);
        pool_key_unpin_locked(p, ki);
        pool_keyop_end(p, &op);
    }
}

static void assert_key_empty(struct orbit_pool *p)
{
    uint32_t live = 9, creating = 9;
    orbit_pool_budget(p, KEY, &live, &creating);
    ck_assert_uint_eq(live, 0);
    ck_assert_uint_eq(creating, 0);
    struct orbit_pool_key_info k[8];
    ssize_t n = orbit_pool_keys(p, k, 8);
    for (ssize_t i = 0; i < n && i < 8; i++)
        ck_assert_msg(!k[i].live && !k[i].creating && !k[i].refs, "key slot %u: live %u creating %u refs %u",
                      k[i].index, k[i].live, k[i].creating, k[i].refs);
}

/* _i: 0 close cut short before the key side, 1 after it, 2 register cut short before LIVE. */
START_TEST(a_close_or_register_cut_short_is_finished_by_node_dead)
{
    const char *name = tu_fleet_name("cutshort");
    struct orbit_fleet *f = tu_join(name, 4, 1, 111, tu_backing());
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &p), 0);
    orbit_id other, id;
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &other), 0);
    ck_assert_int_eq(orbit_pool_unregister(p, other), 0);
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);
    uint64_t index = (uint64_t)orbit_id_node(id) * p->geo.lane_capacity + orbit_id_slot(id);
    cut_short(p, index, _i);
    orbit_pool_node_dead(p, 1, 111);
    uint32_t st = RES_STATE(atomic_load(&pool_res_at(p, index)->state));
    ck_assert_msg(st == RES_CLOSED || st == RES_EXHAUSTED, "slot left in state %u", st);
    assert_key_empty(p);
    orbit_pool_node_dead(p, 1, 111);   /* reported again: nothing more to take out */
    assert_key_empty(p);
    ck_assert_int_eq(orbit_pool_register(p, KEY, 1, &id), 0);   /* the key and the lane work on */
    uint32_t live, creating;
    orbit_pool_budget(p, KEY, &live, &creating);
    ck_assert_uint_eq(live, 1);
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_cut_short");
    TCase *tc = tcase_create("cut_short");
    tcase_add_loop_test(tc, a_close_or_register_cut_short_is_finished_by_node_dead, 0, 3);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
