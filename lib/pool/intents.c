/* SPDX-License-Identifier: MIT */
/*
 * Per-key op locks and the nodes' intents: pins and counts move only under a
 * key's op lock, described first in the acting node's intent entry, so that
 * whoever takes the lock over from a dead holder settles the op exactly once.
 */
#include <sched.h>
#include <string.h>
#include "pool_layout.h"

static void intents_settle_key(struct orbit_pool *p, uint32_t i);

/* 0 held, or -ORBIT_ECORRUPT. Taken over from a dead holder: its op is settled first. */
static int op_lock_within(struct orbit_pool *p, uint32_t i, int bound_ms)
{
    int rc = orb_lock_take(&pool_key_at(p, i)->op_lock, bound_ms);
    if (rc == ORB_LOCK_RECOVERED) {
        intents_settle_key(p, i);
        return 0;
    }
    return rc == ORB_LOCK_TAKEN ? 0 : -ORBIT_ECORRUPT;
}

int pool_key_op_lock(struct orbit_pool *p, uint32_t i)
{
    return op_lock_within(p, i, ORB_LOCK_BOUND_MS);
}

/* A free entry of node's; NULL when none frees up within the bound (forged busy words). */
static struct pool_intent *intent_take(struct orbit_pool *p, uint16_t node)
{
    struct pool_intent *e = pool_intents_of(p, node);
    int64_t end = 0;   /* the clock is read only once the first pass found none */
    for (;;) {
        for (unsigned n = 0; n < POOL_INTENTS; n++) {
            uint32_t free_entry = 0;
            if (atomic_compare_exchange_strong(&e[n].busy, &free_entry, 1))
                return &e[n];
        }
        if (end == 0)
            end = orb_now_ns() + (int64_t)ORB_LOCK_BOUND_MS * 1000000;
        else if (orb_now_ns() > end)
            return NULL;
        sched_yield();   /* more of the node's threads mid-op than entries: they take microseconds */
    }
}

static int keyop_begin(struct orbit_pool *p, uint16_t node, uint32_t i, uint32_t op, uint64_t res,
                       int bound_ms, struct pool_keyop *out)
{
    if (node >= p->geo.fleet_capacity || i > p->key_mask)
        return -ORBIT_ECORRUPT;
    struct pool_intent *e = intent_take(p, node);
    if (!e)
        return -ORBIT_ECORRUPT;
    int rc = op_lock_within(p, i, bound_ms);
    if (rc < 0) {
        atomic_store(&e->busy, 0);
        return rc;
    }
    struct pool_key *k = pool_key_at(p, i);
    atomic_store_explicit(&e->key, i, memory_order_relaxed);
    atomic_store_explicit(&e->holds, atomic_load(pool_holds(p, node, i)), memory_order_relaxed);
    atomic_store_explicit(&e->claims, atomic_load(pool_claims(p, node, i)), memory_order_relaxed);
    atomic_store_explicit(&e->pins, REFS_PINS(atomic_load(&k->refs)), memory_order_relaxed);
    atomic_store_explicit(&e->counts, atomic_load(&k->counts), memory_order_relaxed);
    atomic_store_explicit(&e->res, res, memory_order_relaxed);
    atomic_store_explicit(&e->bits, 0, memory_order_relaxed);
    /* seq_cst, after the values: a settler that reads the op name reads what it names. */
    atomic_store(&e->op, op);
    *out = (struct pool_keyop){ e, i };
    return 0;
}

int pool_keyop_begin(struct orbit_pool *p, uint16_t node, uint32_t i, uint32_t op, uint64_t res,
                     struct pool_keyop *out)
{
    return keyop_begin(p, node, i, op, res, ORB_LOCK_BOUND_MS, out);
}

int pool_keyop_try(struct orbit_pool *p, uint16_t node, uint32_t i, uint32_t op, uint64_t res,
                   struct pool_keyop *out)
{
    return keyop_begin(p, node, i, op, res, 0, out);   /* a spin and a few yields, no sleep */
}

void pool_keyop_end(struct orbit_pool *p, struct pool_keyop *op)
{
    /* Done before the lock goes: whoever takes it next finds nothing to settle. */
    atomic_store(&op->e->op, INTENT_NONE);
    orb_lock_give(&pool_key_at(p, op->key)->op_lock);
    atomic_store(&op->e->busy, 0);
}

/* One pin on the tenancy tag of slot i, or false (it ended). Op lock held. */
bool pool_key_pin_locked(struct orbit_pool *p, uint32_t i, uint64_t tag)
{
    struct pool_key *k = pool_key_at(p, i);
    /* Installs take the op lock: tag LIVE here and refs open at the CAS name one tenancy. */
    if (atomic_load(&k->tag) != tag)
        return false;
    uint64_t r = atomic_load(&k->refs);
    do {
        if ((r & REFS_CLOSED) || REFS_PINS(r) >= REFS_PINS_MAX)
            return false;
    } while (!atomic_compare_exchange_weak(&k->refs, &r, r + REFS_PIN));
    return true;
}

void pool_key_pin_held(struct orbit_pool *p, uint32_t i)
{
    /* A hold keeps the tenancy, so the current tag is ours. */
    pool_key_pin_locked(p, i, atomic_load(&pool_key_at(p, i)->tag));
}

void pool_key_unpin_locked(struct orbit_pool *p, uint32_t i)
{
    pool_key_unpin_n_locked(p, i, 1);
}

/* n pins off in one CAS (fewer if fewer are there: forged bits never go below zero). */
void pool_key_unpin_n_locked(struct orbit_pool *p, uint32_t i, uint64_t n)
{
    struct pool_key *k = pool_key_at(p, i);
    uint64_t tag = atomic_load(&k->tag);   /* read while pinned: the tenancy cannot change first */
    uint64_t r = atomic_load(&k->refs), next;
    do {
        if ((r & REFS_CLOSED) || REFS_PINS(r) == 0 || n == 0)
            return;
        next = r - REFS_PIN * (REFS_PINS(r) < n ? REFS_PINS(r) : n);
        /* The last reference closes the slot in the same CAS, as a plain unref does. */
        if (REFS_COUNT(next) == 0)
            next = REFS_CLOSED;
    } while (!atomic_compare_exchange_weak(&k->refs, &r, next));
    if (next == REFS_CLOSED)
        pool_key_reclaim(p, i, tag);
}

static bool watch_bit_set(struct orbit_pool *p, uint32_t i, uint16_t node)
{
    return atomic_load(&pool_key_watchers(p, i)[node / 64]) & (1ull << (node % 64));
}

/* Watcher bits move only under the op lock: a dead watcher's or deliverer's op settled here. */
static void watch_settle(struct orbit_pool *p, uint16_t node, struct pool_intent *e, bool pins_moved)
{
    uint32_t i = atomic_load(&e->key);
    uint64_t bits = atomic_load(&e->bits), w = atomic_load(&e->res);
    if (atomic_load(&e->op) == INTENT_WATCH) {
        /* The pin first, the bit last: a pin without its bit is undone (its watcher is dead). */
        if (pins_moved && !watch_bit_set(p, i, node))
            pool_key_unpin_locked(p, i);
    } else if (bits && w < p->watch_words && !pins_moved) {
        /* The pins go last: unmoved, the delivery is done again (rings are idempotent). */
        pool_watch_ring(p, (uint32_t)w, bits);
        atomic_fetch_and(&pool_key_watchers(p, i)[w], ~bits);
        pool_key_unpin_n_locked(p, i, (uint64_t)__builtin_popcountll(bits));
    }
    pool_watch_recount(p, i);
}

static bool member_bit_set(struct orbit_pool *p, uint32_t i, uint64_t res)
{
    return res < p->total_resources &&
           (atomic_load(&pool_key_members(p, i)[res / 64]) & (1ull << (res % 64)));
}

/*
 * Finish or undo what node's op on key i did before its process (or reporter)
 * died, so that each count moved exactly once. Op lock held, taken over from
 * the dead: nobody moved pins or counts since, so "moved" is exact. Settling
 * is idempotent: a settle cut short is settled again by the next taker.
 */
static void intent_settle(struct orbit_pool *p, uint16_t node, struct pool_intent *e)
{
    uint32_t op = atomic_load(&e->op), i = atomic_load(&e->key);
    if (op == INTENT_NONE || op > INTENT_LAST || i > p->key_mask) {
        atomic_store(&e->op, INTENT_NONE);   /* nothing named, or a forged entry */
        return;
    }
    struct pool_key *k = pool_key_at(p, i);
    _Atomic uint32_t *holds = pool_holds(p, node, i), *claims = pool_claims(p, node, i);
    uint64_t counts_then = atomic_load(&e->counts), res = atomic_load(&e->res);
    bool pins_moved = REFS_PINS(atomic_load(&k->refs)) != atomic_load(&e->pins);
    bool counts_moved = atomic_load(&k->counts) != counts_then;
    if (op == INTENT_HOLD || op == INTENT_RELEASE) {
        /* The node holds a pin iff its row says so: the report returns it with the row. */
        bool pinned = (op == INTENT_HOLD) == pins_moved;
        if (pinned != (atomic_load(holds) != 0))
            atomic_store(holds, pinned ? 1 : 0);
    } else if (op == INTENT_CLAIM || op == INTENT_FINISH) {
        /* creating moves with the claims row: make up the difference. */
        int64_t rows = (int64_t)atomic_load(claims) - (int64_t)atomic_load(&e->claims);
        int64_t counted = (int64_t)pool_lo(atomic_load(&k->counts)) - (int64_t)pool_lo(counts_then);
        pool_counts_add(&k->counts, 0, rows - counted);
    } else if (op == INTENT_REGISTER && !member_bit_set(p, i, res)) {
        /* The bit comes last: without it the resource is not in; undo what is. */
        if (counts_moved)
            pool_counts_add(&k->counts, -1, 0);
        if (pins_moved)
            pool_key_unpin_locked(p, i);
    } else if (op == INTENT_UNCOUNT && !member_bit_set(p, i, res)) {
        /* The bit goes first: without it the resource is out; finish taking it out. */
        if (!counts_moved)
            pool_counts_add(&k->counts, -1, 0);
        if (!pins_moved)
            pool_key_unpin_locked(p, i);
    } else if (op == INTENT_WATCH || op == INTENT_DELIVER) {
        watch_settle(p, node, e, pins_moved);
    } else if (op == INTENT_RETURN) {
        uint32_t c = atomic_load(&e->claims);
        if (c && !counts_moved)
            pool_counts_add(&k->counts, 0, -(int64_t)c);
        if (atomic_load(&e->holds) && !pins_moved)
            pool_key_unpin_locked(p, i);
        atomic_store(holds, 0);
        atomic_store(claims, 0);
    }
    atomic_store(&e->op, INTENT_NONE);
}

/* Op lock of i taken over from a dead holder: settle whatever op names it (at most one). */
static void intents_settle_key(struct orbit_pool *p, uint32_t i)
{
    for (uint32_t node = 0; node < p->geo.fleet_capacity; node++) {
        struct pool_intent *e = pool_intents_of(p, node);
        for (unsigned n = 0; n < POOL_INTENTS; n++)
            if (atomic_load(&e[n].op) != INTENT_NONE && atomic_load(&e[n].key) == i)
                intent_settle(p, (uint16_t)node, &e[n]);
    }
}

int pool_intents_settle_node(struct orbit_pool *p, uint16_t node)
{
    struct pool_intent *e = pool_intents_of(p, node);
    int rc = 0;
    for (unsigned n = 0; n < POOL_INTENTS; n++) {
        uint32_t i = atomic_load(&e[n].key);
        if (atomic_load(&e[n].op) == INTENT_NONE || i > p->key_mask) {
            atomic_store(&e[n].op, INTENT_NONE);
            continue;
        }
        if (pool_key_op_lock(p, i) < 0) {
            rc = -ORBIT_ECORRUPT;   /* the next report tries again */
            continue;
        }
        /* Under the lock: settled already if the take-over was ours or someone's before. */
        if (atomic_load(&e[n].key) == i)
            intent_settle(p, node, &e[n]);
        orb_lock_give(&pool_key_at(p, i)->op_lock);
    }
    /* The node's threads are gone: every entry is free again (the report takes some). */
    for (unsigned n = 0; n < POOL_INTENTS && rc == 0; n++)
        atomic_store(&e[n].busy, 0);
    return rc;
}

void pool_intents_reset(struct orbit_pool *p)
{
    memset(p->intents, 0, (size_t)p->geo.fleet_capacity * POOL_INTENTS * sizeof *p->intents);
}
