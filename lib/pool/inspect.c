/* SPDX-License-Identifier: MIT */
/* Who holds a resource's units and who waits on a key: snapshots for tools. */
#include "pool_layout.h"

/* The resource an id names, live in the id's generation; bounds from the handle. */
static int resource_of(struct orbit_pool *p, orbit_id id, struct pool_resource **out, uint32_t *word)
{
    if (orbit_id_kind(id) != p->kind || orbit_id_node(id) >= p->geo.fleet_capacity ||
        orbit_id_slot(id) >= p->geo.lane_capacity || orbit_id_generation(id) == 0)
        return orb_fail(-ORBIT_EMALFORMED, "orbit_pool_leases: not an id of this pool");
    if (!atomic_load_explicit(&p->lanes[orbit_id_node(id)].populated, memory_order_acquire))
        return orb_fail_text(-ORBIT_ESTALE, "no such live resource (nothing was ever registered in its lane)");
    struct pool_resource *r = pool_res_at(p, (uint64_t)orbit_id_node(id) * p->geo.lane_capacity + orbit_id_slot(id));
    uint32_t w = atomic_load_explicit(&r->state, memory_order_acquire);
    if (RES_GEN(w) != orbit_id_generation(id) || !RES_IN_USE(w))
        return orb_fail_text(-ORBIT_ESTALE, "no such live resource (unregistered, or its owner died or left)");
    *out = r;
    *word = w;
    return 0;
}

/* The stamp's holder: node and incarnation, or none known; -ORBIT_ECORRUPT past the fleet. */
static int stamp_holder(const struct orbit_pool *p, uint64_t since, uint64_t holder, struct orbit_lease_info *li)
{
    uint32_t n1 = since_node(since);
    li->node = ORBIT_NODE_NONE;
    if (since == 0 || (since & SINCE_DONE) || n1 == 0)
        return 0;   /* unstamped, restamped by aging, or reserved by an observer */
    if (n1 - 1 >= p->geo.fleet_capacity)
        return orb_fail(-ORBIT_ECORRUPT, "orbit_pool_leases: an entry names node %u of %u", n1 - 1,
                        p->geo.fleet_capacity);
    li->node = (uint16_t)(n1 - 1);
    li->incarnation = holder;
    li->reserved_ms = since_ms(since);
    return 0;
}

/*
 * Entry b of a set bit, as a lease: 1 listed, 0 not a lease (completed, being
 * freed). The fence is read first (acquire: the publish that names it carries
 * its stamp and holder), then the stamp.
 */
static int entry_lease(const struct orbit_pool *p, struct pool_resource *r, uint32_t b, struct orbit_lease_info *li)
{
    struct pool_pending *e = &r->pending[b];
    uint64_t f = atomic_load_explicit(&e->fence, memory_order_acquire);
    uint64_t since = atomic_load_explicit(&e->since, memory_order_acquire);
    uint64_t holder = atomic_load_explicit(&e->holder, memory_order_relaxed);
    *li = (struct orbit_lease_info){ .state = ORBIT_LEASE_PENDING, .node = ORBIT_NODE_NONE };
    if (f == FENCE_TAKEN)
        return 0;   /* an accept or an aging is freeing it */
    bool released = entry_held(f) &&
        atomic_load_explicit(&e->released, memory_order_acquire) == (f & ~ENTRY_HELD);
    if (f == 0 || released)
        return 1;   /* a reserver between its unit CAS and its publish: holder not known yet */
    if (entry_held(f)) {
        if (since == ((f & ~ENTRY_HELD) | SINCE_DONE))
            return 0;   /* completed: a free unit, folded by the next reserve */
        li->state = ORBIT_LEASE_ACTIVE;
        f &= ~ENTRY_HELD;
    }
    li->fence = f;
    int rc = stamp_holder(p, since, holder, li);
    return rc < 0 ? rc : 1;
}

ssize_t orbit_pool_leases(struct orbit_pool *p, orbit_id id, struct orbit_lease_info *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    struct pool_resource *r = NULL;
    uint32_t w = 0;
    if ((rc = resource_of(p, id, &r, &w)) < 0)
        return rc;
    uint64_t u = atomic_load_explicit(&r->units, memory_order_acquire);
    if (units_tag(u) != gen_tag(RES_GEN(w)))
        return -ORBIT_ESTALE;   /* another tenancy between the two loads */
    size_t n = 0;
    for (uint32_t bits = units_bits(u); bits; bits &= bits - 1) {
        struct orbit_lease_info li;
        int got = entry_lease(p, r, (uint32_t)__builtin_ctz(bits), &li);
        if (got < 0)
            return got;
        if (got && n < max)
            out[n] = li;
        n += (size_t)got;
    }
    /* The slot ended while we read: what we saw may be a later tenant's. */
    if (atomic_load_explicit(&r->state, memory_order_acquire) != w)
        return -ORBIT_ESTALE;
    return (ssize_t)n;
}

/* A node's rows and watcher bit for key slot ki: 1, 0 when it has no stake in it, or < 0. */
static int key_node(const struct orbit_pool *p, uint32_t ki, uint32_t node, struct orbit_pool_key_node *kn)
{
    uint32_t holds = atomic_load(pool_holds(p, node, ki)), claims = atomic_load(pool_claims(p, node, ki));
    uint64_t bits = atomic_load(&pool_key_watchers(p, ki)[node / 64]);
    bool watching = (bits >> (node % 64)) & 1;
    if (holds == 0 && claims == 0 && !watching)
        return 0;
    /* Every permit holds the key once (claims <= holds); a watch pins, but holds nothing.
     * A row past half the range is one driven below zero: no process holds that many. */
    if (claims > UINT32_MAX / 2 || holds > UINT32_MAX / 2)
        return orb_fail(-ORBIT_ECORRUPT, "orbit_pool_key_nodes: node %u rows %u/%u", node, holds, claims);
    *kn = (struct orbit_pool_key_node){ .node = (uint16_t)node, .waits = holds > claims ? holds - claims : 0,
                                        .creating = claims, .watching = watching };
    return 1;
}

ssize_t orbit_pool_key_nodes(struct orbit_pool *p, orbit_key key, struct orbit_pool_key_node *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    uint32_t ki;
    if (pool_key_peek(p, key, &ki) < 0 || ki > p->key_mask)
        return 0;
    size_t n = 0;
    for (uint32_t node = 0; node < p->geo.fleet_capacity; node++) {
        struct orbit_pool_key_node kn;
        int got = key_node(p, ki, node, &kn);
        if (got < 0)
            return got;
        if (got && n < max)
            out[n] = kn;
        n += (size_t)got;
    }
    return (ssize_t)n;
}
