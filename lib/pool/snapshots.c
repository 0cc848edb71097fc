/* SPDX-License-Identifier: MIT */
/* Snapshots of the resources: the candidates for a key (a policy's input) and their owners. */
#include <stdlib.h>
#include "resource.h"

static bool candidate_at(struct orbit_pool *p, uint64_t index, orbit_key key, struct orbit_candidate *c)
{
    struct pool_resource *r = pool_res_at(p, index);
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    if (!RES_IN_USE(w) || atomic_load(&r->key_lo) != key.lo || atomic_load(&r->key_hi) != key.hi)
        return false;
    uint64_t u = atomic_load(&r->units);
    if (units_tag(u) != gen_tag(RES_GEN(w)))
        return false;   /* changed tenancy between the two loads */
    uint32_t held = 0;   /* accepted leases in their entries: active; DONE ones: free */
    struct folded done = { .bits = 0 };
    if (units_bits(u))
        held_entries(r, units_bits(u), &held, &done);
    uint16_t node = (uint16_t)(index / p->geo.lane_capacity);
    *c = (struct orbit_candidate){
        .id = orbit_id_make(p->kind, node, RES_GEN(w), (uint32_t)(index & p->lane_mask)),
        .owner = node, .owner_incarnation = atomic_load(&r->owner_incarnation),
        .local = node == p->node, .state = RES_STATE(w) == RES_LIVE ? ORBIT_LIVE : ORBIT_DRAINING,
        .capacity = atomic_load(&r->capacity), .reserved = bits_count(units_bits(u) & ~(held | done.bits)),
        .active = units_active(u) + bits_count(held), .last_reserve_ms = atomic_load(&r->last_reserve_ms) };
    return true;
}

ssize_t orbit_pool_candidates(struct orbit_pool *p, orbit_key key, struct orbit_candidate *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    uint32_t ki;
    if (pool_key_peek(p, key, &ki) < 0)
        return 0;
    _Atomic uint64_t *members = pool_key_members(p, ki);
    size_t n = 0;
    for (uint32_t wi = 0; wi < p->member_words; wi++) {
        for (uint64_t bits = atomic_load(&members[wi]); bits; bits &= bits - 1) {
            uint64_t index = (uint64_t)wi * 64 + (uint64_t)__builtin_ctzll(bits);
            struct orbit_candidate c;
            /* A member bit is shared data: only an index inside a populated lane is read. */
            if (index >= p->total_resources || !lane_ready(p, (uint32_t)(index / p->geo.lane_capacity)) ||
                !candidate_at(p, index, key, &c))
                continue;
            if (n < max)
                out[n] = c;
            n++;
        }
    }
    return (ssize_t)n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

ssize_t orbit_pool_owners(struct orbit_pool *p, struct orbit_owner *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    uint64_t *incs = malloc((size_t)p->geo.lane_capacity * sizeof *incs);
    if (!incs)
        return -ENOMEM;
    size_t n = 0;
    for (uint32_t node = 0; node < p->geo.fleet_capacity; node++) {
        if (!lane_ready(p, node))
            continue;
        size_t m = 0;
        for (uint32_t s = 0; s < p->geo.lane_capacity; s++) {
            struct pool_resource *r = pool_res_at(p, (uint64_t)node * p->geo.lane_capacity + s);
            if (RES_IN_USE(atomic_load_explicit(&r->state, memory_order_acquire)))
                incs[m++] = atomic_load(&r->owner_incarnation);
        }
        qsort(incs, m, sizeof *incs, cmp_u64);
        for (size_t i = 0; i < m; i++) {
            if (i && incs[i] == incs[i - 1])
                continue;
            if (n < max)
                out[n] = (struct orbit_owner){ .node = (uint16_t)node, .incarnation = incs[i] };
            n++;
        }
    }
    free(incs);
    return (ssize_t)n;
}
