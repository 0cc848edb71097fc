/* SPDX-License-Identifier: MIT */
/* The owner's reconcile: aged reservations and lost executions give their units back. */
#include "resource.h"

/* The entries an aging pass took, with their fences and the pair's fence before it began. */
struct aged { uint32_t bits; bool held; uint64_t pair_fence; uint64_t fence[POOL_PENDING]; };

/*
 * Age the pending entries older than grace. An entry with its bit set but no
 * stamp belongs to a reserver mid-way (or one that died there): it is stamped
 * now and ages like the rest; grace 0 ages it at once.
 */
static void age_entries(struct pool_resource *r, uint64_t grace_ms, struct aged *a)
{
    uint64_t now = orb_wall_ms_coarse();   /* the clock the stamps were taken with */
    /* The pair's fence first: a lease already lapped then can no longer be accepted by the pair. */
    a->pair_fence = atomic_load(&r->fence);
    a->bits = 0;
    uint32_t bits = units_bits(atomic_load(&r->units));
    for (uint32_t b = 0; b < POOL_PENDING; b++) {
        struct pool_pending *e = &r->pending[b];
        uint64_t f = atomic_load(&e->fence), since = atomic_load(&e->since);
        if (!(bits & (1u << b))) {
            /* Free but showing a fence (a late stamp, a wipe cut short, a fold whose folder died
             * before its release): reserves skip it until it reads 0. The CAS names the fence,
             * so a holder that took it since keeps its own. A released one is free as it is. */
            if (f != 0 && f != FENCE_TAKEN && !(entry_held(f) && entry_released(r, b, f))) {
                atomic_store(&e->since, 0);   /* clobbering a new holder's stamp only delays its aging */
                atomic_compare_exchange_strong(&e->fence, &f, 0);
            }
            continue;
        }
        /* Being freed, or accepted (a held entry is reconcile's, not aging's). One showing a
         * released fence is a new holder's before its publish: aged like an unpublished one. */
        if (f == FENCE_TAKEN || (entry_held(f) && !entry_released(r, b, f)))
            continue;
        /* Unstamped, or a late complete's DONE over the stamp: stamped now, naming no holder
         * (a death report leaves such an entry to aging). */
        if ((since == 0 || (since & SINCE_DONE)) && grace_ms != 0) {
            atomic_compare_exchange_strong(&e->since, &since, now);
            continue;
        }
        /* Stamps are clock ticks (coarse): grace 0 ages at once, whatever the tick says. */
        uint64_t at = since_ms(since);
        if (grace_ms != 0 && since != 0 && (now <= at || now - at <= grace_ms))
            continue;
        /* Taking the fence excludes an accept through the entry: one of the two frees it. */
        if (!atomic_compare_exchange_strong(&e->fence, &f, FENCE_TAKEN))
            continue;
        /* Wiped while its bit is still set, by CAS: an accept by the pair may have freed it and
         * wiped it meanwhile, and a reserver taken it since. */
        atomic_store(&e->since, 0);
        uint64_t taken = FENCE_TAKEN;
        atomic_compare_exchange_strong(&e->fence, &taken, 0);
        a->bits |= 1u << b;
        a->fence[b] = f;
    }
}

/*
 * The aged bits the reconcile CAS may clear at pair fence `now`. A young lease
 * (fewer than 16 fences old when aging began) may have been accepted by the
 * pair meanwhile and its entry retaken: its bit is cleared only while no
 * fence can have landed there since (an unpublished one, fence 0: only while
 * no fence was given at all). A bit left set is aged again later.
 */
static uint32_t aged_clearable(const struct aged *a, uint64_t now)
{
    if (!POOL_PAIR_CAS || a->held)
        return a->bits;   /* every accept goes through the entry */
    uint32_t out = 0;
    for (uint32_t b = 0; b < POOL_PENDING; b++) {
        uint64_t f = a->fence[b];
        if (!(a->bits & (1u << b)))
            continue;
        if (f == 0 ? now == a->pair_fence : (a->pair_fence - f >= POOL_PENDING || now - f < POOL_PENDING))
            out |= 1u << b;
    }
    return out;
}

/*
 * The held entries under the owner's count: DONE ones are folded; ACTIVE ones
 * are kept while active covers them (*counted = active - held), otherwise all
 * reclaimed (*counted = active: their executions complete by the counted path,
 * or, caught mid-complete, leave a unit for the next reconcile). Returns the
 * bits kept; *cleared the held entries whose bits go.
 */
static uint32_t reconcile_held(struct pool_resource *r, uint32_t bits, uint32_t *counted, uint32_t *cleared)
{
    uint32_t held;
    struct folded done;
    held_entries(r, bits, &held, &done);
    *cleared = done.bits;
    if (bits_count(held) <= *counted)
        *counted -= bits_count(held);
    else
        *cleared |= held;
    return bits & ~*cleared;
}

/* Wipe held entries whose bits the reconcile CAS cleared, by CAS: an ager may have wiped one
 * meanwhile and a reserver taken it since. */
static void wipe_reclaimed(struct pool_resource *r, uint32_t cleared)
{
    for (; cleared; cleared &= cleared - 1) {
        _Atomic uint64_t *e = &r->pending[__builtin_ctz(cleared)].fence;
        uint64_t f = atomic_load(e);
        if (entry_held(f))
            atomic_compare_exchange_strong(e, &f, 0);
    }
}

int orbit_pool_reconcile(struct orbit_pool *p, orbit_id id, uint32_t active, uint64_t grace_ms)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    struct pool_resource *r;
    uint64_t index;
    uint32_t w;
    rc = owned(p, id, &r, &index, &w);
    if (rc < 0)
        return pool_id_refused(p, rc, id);
    if (active > atomic_load(&r->capacity))   /* more active than it can hold: not the owner's truth */
        return orb_fail(-ORBIT_EMALFORMED, "active %u is more than the resource's capacity %llu", active,
                        (unsigned long long)atomic_load(&r->capacity));
    uint32_t gen = RES_GEN(w);
    struct aged a;
    a.held = holds_entries(atomic_load(&r->capacity));
    age_entries(r, grace_ms, &a);
    struct hot h = hot_load(r);
    uint64_t next;
    uint32_t cleared = 0;
    bool freed;
    for (;;) {
        if (units_tag(h.units) != gen_tag(gen))
            return pool_id_refused(p, -ORBIT_ESTALE, id);
        uint32_t bits = units_bits(h.units) & ~aged_clearable(&a, h.fence), counted = active;
        if (a.held)
            bits = reconcile_held(r, bits, &counted, &cleared);
        next = units_make(gen, bits, counted);
        /* Held entries count in both pairs' bits: the new pair's active field is counted. */
        freed = units_reserved(next) + (uint64_t)counted < units_reserved(h.units) + (uint64_t)units_active(h.units);
        /* One CAS frees the aged entries' bits and states the owner's active count; the pair
         * CAS also proves the fence the bits were judged at. */
        if (POOL_PAIR_CAS ? hot_cas(r, &h, (struct hot){ next, h.fence })
                          : atomic_compare_exchange_weak(&r->units, &h.units, next))
            break;
    }
    wipe_reclaimed(r, cleared);
    if (freed)
        orb_count(&p->ctr, POOL_CTR_RECLAIMED, units_reserved(h.units) + (uint64_t)units_active(h.units) -
                                                   units_reserved(next) - (uint64_t)units_active(next));
    if (freed)   /* units came back: waiters on the key re-check */
        pool_key_changed(p, atomic_load(&r->key_index));
    return 0;
}
