/* SPDX-License-Identifier: MIT */
/*
 * The key table: lock-free lookup and references, locked insert and sweep,
 * reclamation of keys nothing refers to, change signalling and watches.
 */
#include <stdlib.h>
#include <string.h>
#include "keys.h"

#define NO_SLOT UINT32_MAX
#define HOLD_TRIES 1000   /* a key reclaimed and reinserted under us this often: give up */

static uint32_t key_home(const struct orbit_pool *p, orbit_key key)
{
    uint64_t x = key.lo ^ (key.hi * 0x9e3779b97f4a7c15ull);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 32;
    return (uint32_t)x & p->key_mask;
}

static bool key_matches(struct pool_key *k, orbit_key key)
{
    return atomic_load_explicit(&k->key_lo, memory_order_relaxed) == key.lo &&
           atomic_load_explicit(&k->key_hi, memory_order_relaxed) == key.hi;
}

void pool_key_unref(struct orbit_pool *p, uint32_t i, uint64_t n)
{
    if (i > p->key_mask || n == 0)
        return;
    struct pool_key *k = pool_key_at(p, i);
    /* Read while a reference is still held: the tenancy cannot change before our CAS. */
    uint64_t tag = atomic_load(&k->tag);
    uint64_t r = atomic_load(&k->refs), next;
    do {
        /* Closed or short: a reset cleared what we held; never go below zero. */
        if ((r & REFS_CLOSED) || REFS_PLAIN(r) == 0)
            return;
        next = r - (REFS_PLAIN(r) > n ? n : REFS_PLAIN(r));
        /* Dropping the last reference closes the slot in the same CAS: nobody can pin it after. */
        if (REFS_COUNT(next) == 0)
            next = REFS_CLOSED;
    } while (!atomic_compare_exchange_weak(&k->refs, &r, next));
    if (next == REFS_CLOSED)
        pool_key_reclaim(p, i, tag);
}

/* One plain reference on slot i if it is still the tenancy `tag`. */
static bool key_ref_if(struct orbit_pool *p, uint32_t i, uint64_t tag)
{
    struct pool_key *k = pool_key_at(p, i);
    uint64_t r = atomic_load(&k->refs);
    do {
        if ((r & REFS_CLOSED) || REFS_PLAIN(r) == 0xffffffffull)
            return false;
    } while (!atomic_compare_exchange_weak(&k->refs, &r, r + 1));
    /* The reference is in; if the tenancy moved meanwhile it is not ours to keep. */
    if (atomic_load(&k->tag) != tag) {
        pool_key_unref(p, i, 1);
        return false;
    }
    return true;
}

/* Probe from the key's home to the first EMPTY slot for a LIVE tenancy of key. */
static int key_probe(struct orbit_pool *p, orbit_key key, bool take_ref, uint32_t *index, uint64_t *tag_out)
{
    uint32_t home = key_home(p, key);
    for (uint32_t n = 0; n <= p->key_mask; n++) {
        uint32_t i = (home + n) & p->key_mask;
        struct pool_key *k = pool_key_at(p, i);
        /* Acquire: the digest written before LIVE was published is the one we compare. */
        uint64_t tag = atomic_load_explicit(&k->tag, memory_order_acquire);
        unsigned st = KEY_TAG_STATE(tag);
        if (st == KEY_EMPTY)
            break;
        if (st != KEY_LIVE || !key_matches(k, key))
            continue;
        if (!take_ref) {
            if (atomic_load(&k->refs) & REFS_CLOSED)
                continue;   /* dying: a snapshot of it would read as empty */
            *index = i;
            *tag_out = tag;
            return 0;
        }
        if (key_ref_if(p, i, tag)) {
            *index = i;
            return 0;
        }
        /* Dying: a new tenancy of this key may sit further along or be inserted. */
    }
    return -ENOENT;
}

int pool_key_find(struct orbit_pool *p, orbit_key key, uint32_t *index)
{
    uint64_t tag;
    return key_probe(p, key, true, index, &tag);
}

int pool_key_peek(struct orbit_pool *p, orbit_key key, uint32_t *index)
{
    uint64_t tag;
    return key_probe(p, key, false, index, &tag);
}

/* ---- the lock: inserts and sweeps ---- */

/*
 * Lock held: LIVE with REFS_CLOSED is a reclaim between its two steps (or a
 * reclaimer that died there); LIVE with nothing at all, an inserter that died
 * before its pin (a live one holds this lock until pinned). Finish either so
 * the slot can be used again; a pinner racing the close loses it by CAS.
 * Returns the slot's state afterwards.
 */
static unsigned key_settle_locked(struct orbit_pool *p, struct pool_key *k)
{
    uint64_t tag = atomic_load(&k->tag), none = 0;
    if (KEY_TAG_STATE(tag) == KEY_LIVE && atomic_load(&k->refs) == 0)
        atomic_compare_exchange_strong(&k->refs, &none, REFS_CLOSED);
    if (KEY_TAG_STATE(tag) == KEY_LIVE && atomic_load(&k->refs) == REFS_CLOSED &&
        atomic_compare_exchange_strong(&k->tag, &tag, KEY_TAG(KEY_TAG_SEQ(tag), KEY_TOMB))) {
        atomic_fetch_add_explicit(&p->hdr->tombstones, 1, memory_order_relaxed);
        return KEY_TOMB;
    }
    return KEY_TAG_STATE(atomic_load(&k->tag));
}

/* One tombstone fewer (reused or swept); the count is a hint, never below zero. */
static void tombstone_gone(struct orbit_pool *p)
{
    uint32_t t = atomic_load_explicit(&p->hdr->tombstones, memory_order_relaxed);
    while (t && !atomic_compare_exchange_weak(&p->hdr->tombstones, &t, t - 1))
        ;
}

/* A holder died mid-insert: its CLAIMING slot never became a key. */
static void key_repair_locked(struct orbit_pool *p)
{
    for (uint32_t i = 0; i <= p->key_mask; i++) {
        struct pool_key *k = pool_key_at(p, i);
        uint64_t tag = atomic_load(&k->tag);
        if (KEY_TAG_STATE(tag) != KEY_CLAIMING)
            continue;
        atomic_store(&k->refs, REFS_CLOSED);
        atomic_store(&k->tag, KEY_TAG(KEY_TAG_SEQ(tag), KEY_TOMB));
        atomic_fetch_add_explicit(&p->hdr->tombstones, 1, memory_order_relaxed);
    }
}

/*
 * 0 held, or -ORBIT_ECORRUPT: the word is not one a holder writes, or a live
 * holder kept it past the bound. A dead holder's lock is taken over and what
 * it left half-inserted is repaired first.
 */
int pool_key_lock(struct orbit_pool *p)
{
    int rc = orb_lock_take(&p->hdr->key_lock.l, ORB_LOCK_BOUND_MS);
    if (rc == ORB_LOCK_RECOVERED) {
        key_repair_locked(p);
        return 0;
    }
    return rc == ORB_LOCK_TAKEN ? 0 : -ORBIT_ECORRUPT;
}

void pool_key_unlock(struct orbit_pool *p)
{
    orb_lock_give(&p->hdr->key_lock.l);
}

/*
 * Tombstones no live key's probe chain passes through become EMPTY again, so
 * misses stay short however many keys have come and gone. Lock held: no
 * insert runs; concurrent reclaims only make more slots unneeded.
 */
static void key_sweep_locked(struct orbit_pool *p)
{
    uint32_t cap = p->key_mask + 1;
    uint64_t *needed = calloc((cap + 63) / 64, sizeof *needed);
    if (!needed)
        return;
    for (uint32_t i = 0; i < cap; i++) {
        struct pool_key *k = pool_key_at(p, i);
        if (key_settle_locked(p, k) != KEY_LIVE)
            continue;
        orbit_key key = { atomic_load(&k->key_lo), atomic_load(&k->key_hi) };
        for (uint32_t j = key_home(p, key); j != i; j = (j + 1) & p->key_mask)
            needed[j / 64] |= 1ull << (j % 64);
    }
    for (uint32_t i = 0; i < cap; i++) {
        struct pool_key *k = pool_key_at(p, i);
        uint64_t tag = atomic_load(&k->tag);
        if (KEY_TAG_STATE(tag) == KEY_TOMB && !(needed[i / 64] & (1ull << (i % 64))) &&
            atomic_compare_exchange_strong(&k->tag, &tag, KEY_TAG(KEY_TAG_SEQ(tag), KEY_EMPTY)))
            tombstone_gone(p);
    }
    free(needed);
    atomic_fetch_add_explicit(&p->key_sweeps, 1, memory_order_relaxed);
}

/* The first TOMB or EMPTY slot on the key's chain, or NO_SLOT. Lock held. */
static uint32_t key_free_slot(struct orbit_pool *p, orbit_key key)
{
    uint32_t home = key_home(p, key), found = NO_SLOT;
    for (uint32_t n = 0; n <= p->key_mask; n++) {
        uint32_t i = (home + n) & p->key_mask;
        unsigned st = key_settle_locked(p, pool_key_at(p, i));
        if (st == KEY_TOMB && found == NO_SLOT)
            found = i;
        if (st == KEY_EMPTY) {
            if (found == NO_SLOT)
                found = i;
            break;
        }
    }
    return found;
}

static void bitmap_clear(_Atomic uint64_t *w, uint32_t words)
{
    for (uint32_t i = 0; i < words; i++)
        if (atomic_load_explicit(&w[i], memory_order_relaxed))
            atomic_store_explicit(&w[i], 0, memory_order_relaxed);
}

/* Make slot i the key's new tenancy holding refs (1 plain, or 0: the caller pins next). Both locks held. */
static uint64_t key_install_locked(struct orbit_pool *p, uint32_t i, orbit_key key, uint64_t refs)
{
    struct pool_key *k = pool_key_at(p, i);
    uint64_t tag = atomic_load(&k->tag);
    if (KEY_TAG_STATE(tag) == KEY_TOMB)
        tombstone_gone(p);
    atomic_store(&k->tag, KEY_TAG(KEY_TAG_SEQ(tag) + 1, KEY_CLAIMING));
    atomic_store_explicit(&k->key_lo, key.lo, memory_order_relaxed);
    atomic_store_explicit(&k->key_hi, key.hi, memory_order_relaxed);
    atomic_store_explicit(&k->counts, 0, memory_order_relaxed);
    atomic_store_explicit(&k->watch_count, 0, memory_order_relaxed);
    bitmap_clear(pool_key_watchers(p, i), p->watch_words);
    bitmap_clear(pool_key_members(p, i), p->member_words);
    /* The slot is closed (nobody can pin it): the first reference is stored, not added. */
    atomic_store(&k->refs, refs);
    /* Release: digest, counts and bitmaps are visible before a prober sees LIVE. */
    atomic_store_explicit(&k->tag, KEY_TAG(KEY_TAG_SEQ(tag) + 1, KEY_LIVE), memory_order_release);
    atomic_fetch_add_explicit(&p->key_inserts, 1, memory_order_relaxed);
    return KEY_TAG(KEY_TAG_SEQ(tag) + 1, KEY_LIVE);
}

/* ---- holds: a node's pin, counted in its holds row ---- */

static void node_release(struct orbit_pool *p, uint16_t node, uint32_t i);

/* node's hold on tenancy tag of slot i: 0, 1 when it ended (look again), or an error. */
static int node_hold(struct orbit_pool *p, uint16_t node, uint32_t i, uint64_t tag)
{
    _Atomic uint32_t *row = pool_holds(p, node, i);
    uint32_t v = atomic_load(row);
    /* A non-zero row is the node's pin: the tenancy cannot end under it. */
    while (v > 0 && v < UINT32_MAX) {
        if (!atomic_compare_exchange_weak(row, &v, v + 1))
            continue;
        if (atomic_load(&pool_key_at(p, i)->tag) == tag)
            return 0;
        node_release(p, node, i);   /* pinned on a later tenancy than the one we looked up */
        return 1;
    }
    struct pool_keyop op;
    int rc = pool_keyop_begin(p, node, i, INTENT_HOLD, 0, &op);
    if (rc < 0)
        return rc;
    v = atomic_load(row);
    if (atomic_load(&pool_key_at(p, i)->tag) != tag)
        rc = 1;
    else if (v == UINT32_MAX)
        rc = -ORBIT_ECORRUPT;
    else if (v > 0)
        atomic_fetch_add(row, 1);   /* another thread of ours pinned it meanwhile */
    else if (!pool_key_pin_locked(p, i, tag))
        rc = 1;
    else {
        pool_park_here(p, POOL_PARK_HOLD);
        atomic_store(row, 1);   /* only under the lock does a row leave zero */
    }
    pool_keyop_end(p, &op);
    return rc;
}

static void node_release(struct orbit_pool *p, uint16_t node, uint32_t i)
{
    _Atomic uint32_t *row = pool_holds(p, node, i);
    uint32_t v = atomic_load(row);
    for (;;) {
        if (v == 0)
            return;   /* node_dead or a reset returned it already */
        if (v == 1)
            break;
        if (atomic_compare_exchange_weak(row, &v, v - 1))
            return;   /* not the last: the pin stays */
    }
    struct pool_keyop op;
    if (pool_keyop_begin(p, node, i, INTENT_RELEASE, 0, &op) < 0)
        return;   /* a forged lock word: the hold stays until reset_all */
    /* Under the lock a row moves only up from non-zero (another thread's fast hold). */
    v = atomic_load(row);
    while (v > 0 && !atomic_compare_exchange_weak(row, &v, v - 1))
        ;
    if (v == 1) {
        pool_park_here(p, POOL_PARK_RELEASE);
        pool_key_unpin_locked(p, i);
    }
    pool_keyop_end(p, &op);
}

/* ---- inserts ---- */

/*
 * Insert the key if absent (both locks held while it is installed). A member
 * pins it before the key lock goes: 0 held, 1 present already (look again).
 * An observer gets a plain reference.
 */
static int key_insert(struct orbit_pool *p, orbit_key key, uint32_t *index)
{
    int rc = pool_key_lock(p);
    if (rc < 0)
        return rc;
    uint64_t tag;
    /* Under the lock no other insert runs: a second look decides present or absent. */
    if (key_probe(p, key, p->observer, index, &tag) == 0) {
        pool_key_unlock(p);
        return p->observer ? 0 : 1;
    }
    uint32_t i = key_free_slot(p, key);
    /* Tombstones lengthen every miss: past a quarter of the table, sweep them. */
    uint32_t many = (p->key_mask + 1) / 4 ? (p->key_mask + 1) / 4 : 1;
    if (i == NO_SLOT || atomic_load_explicit(&p->hdr->tombstones, memory_order_relaxed) >= many) {
        key_sweep_locked(p);
        i = key_free_slot(p, key);
    }
    if (i == NO_SLOT)
        rc = orb_fail(-ORBIT_EKEYFULL, "every one of the pool's %u key slots is taken (key_capacity)",
                      p->key_mask + 1);
    else if ((rc = pool_key_op_lock(p, i)) == 0) {
        tag = key_install_locked(p, i, key, p->observer ? 1 : 0);
        orb_lock_give(&pool_key_at(p, i)->op_lock);
        /* Nothing can close it before our pin: settles run under the key lock we hold. */
        rc = p->observer ? 0 : node_hold(p, p->node, i, tag);
    }
    pool_key_unlock(p);
    *index = i;
    return rc;
}

/*
 * A reference this node holds, counted in its holds row so that node_dead
 * can return it if the process dies holding it. Observers hold plain refs.
 */
int pool_key_hold(struct orbit_pool *p, orbit_key key, uint32_t *index)
{
    if (p->observer) {
        int rc = pool_key_find(p, key, index);
        return rc < 0 ? key_insert(p, key, index) : 0;
    }
    for (unsigned n = 0; n < HOLD_TRIES; n++) {
        uint64_t tag;
        int rc = key_probe(p, key, false, index, &tag);
        rc = rc < 0 ? key_insert(p, key, index) : node_hold(p, p->node, *index, tag);
        if (rc <= 0)
            return rc;
    }
    return orb_fail(-ORBIT_EAGAIN, "the key's slot kept being taken and reclaimed under us (%u tries): try again",
                    HOLD_TRIES);
}

void pool_key_release(struct orbit_pool *p, uint32_t i)
{
    if (i > p->key_mask)
        return;
    if (p->observer)
        pool_key_unref(p, i, 1);
    else
        node_release(p, p->node, i);
}

/* ---- changes and watches ---- */

/*
 * Take the watcher bits `mask` of word w, ring those nodes and drop their pins,
 * under the op lock with a DELIVER intent of `actor` (this node, or the dead
 * node its reporter acts for). Without one (an observer, or a lock that could
 * not be taken) it only rings: the bits stay, each with its pin, and ring
 * again. A changer only tries the lock (`report` false): a stopped or hostile
 * holder never stalls a release or a complete; a death report waits its bound.
 */
static int deliver_word(struct orbit_pool *p, uint16_t actor, uint32_t i, uint32_t w, uint64_t mask,
                        bool report)
{
    _Atomic uint64_t *word = &pool_key_watchers(p, i)[w];
    struct pool_keyop op;
    int rc = actor == ORBIT_NODE_NONE ? -ORBIT_ENOTOWNER
             : report ? pool_keyop_begin(p, actor, i, INTENT_DELIVER, w, &op)
                      : pool_keyop_try(p, actor, i, INTENT_DELIVER, w, &op);
    if (rc < 0) {
        pool_watch_ring(p, w, atomic_load(word) & mask);
        return rc;
    }
    uint64_t bits = atomic_load(word) & mask;
    /* Named before any step: a settle rings, clears and unpins these if the pins did not move. */
    atomic_store(&op.e->bits, bits);
    if (bits) {
        pool_watch_ring(p, w, bits);   /* under the lock: a deliverer killed after it rang all */
        atomic_fetch_and(word, ~bits);
        pool_watch_recount(p, i);
        pool_park_here(p, POOL_PARK_DELIVER);
        /* Last: the pins moved is what tells a settle the delivery is done. */
        pool_key_unpin_n_locked(p, i, (uint64_t)__builtin_popcountll(bits));
    }
    pool_keyop_end(p, &op);
    return 0;
}

/*
 * The current version, registered: a change published after this returns
 * moves the word past it. A CAS, not a store: a late registrant never puts
 * back an older version over a newer one (it fails and reads again).
 */
uint32_t pool_key_version(struct pool_key *k)
{
    for (;;) {
        uint32_t w = atomic_load(&k->watched), c = atomic_load(&k->wait.changes);
        if (w != c && !atomic_compare_exchange_strong(&k->watched, &w, c))
            continue;
        /* watched == c was published (seq_cst) before this load: a notifier after it bumps. */
        if (atomic_load(&k->wait.changes) == c)
            return c;
    }
}

/*
 * After a change published by a seq_cst RMW: move the word only if a version
 * equal to it was handed out, or a waiter parked; ring watchers. Otherwise
 * nothing is written to the key's line.
 */
void pool_key_changed_after_rmw(struct orbit_pool *p, uint32_t i)
{
    if (i > p->key_mask)
        return;
    struct pool_key *k = pool_key_at(p, i);
    /* seq_cst loads after the publishing RMW pair with pool_key_version's CAS then load:
     * either it saw our change, or we see watched == changes and bump. */
    uint32_t c = atomic_load(&k->wait.changes);
    if (atomic_load(&k->watched) == c || atomic_load(&k->wait.parked))
        orb_wait_signal(&k->wait, &p->stats);
    /* watch_count is set before a watcher bit: a watch set after this load sees the change. */
    if (atomic_load(&k->watch_count) == 0)
        return;
    for (uint32_t w = 0; w < p->watch_words; w++)
        if (atomic_load_explicit(&pool_key_watchers(p, i)[w], memory_order_relaxed))
            deliver_word(p, p->node, i, w, ~0ull, false);
}

/* A change published by plain stores: the fence orders them before the loads above. */
void pool_key_changed(struct orbit_pool *p, uint32_t i)
{
    atomic_thread_fence(memory_order_seq_cst);
    pool_key_changed_after_rmw(p, i);
}

/* This node's bit on tenancy tag of slot i and its pin, once: 0, or 1 when it ended. */
static int watch_locked(struct orbit_pool *p, uint32_t i, uint64_t tag)
{
    struct pool_key *k = pool_key_at(p, i);
    _Atomic uint64_t *word = &pool_key_watchers(p, i)[p->node / 64];
    uint64_t bit = 1ull << (p->node % 64);
    /* Installs take the op lock we hold: a tag still ours names our key's tenancy. */
    if (atomic_load(&k->tag) != tag)
        return 1;
    if (atomic_load(word) & bit)
        return 0;   /* watched already: one bit, one pin (a set bit's pin keeps it open) */
    if (!pool_key_pin_locked(p, i, tag))
        return 1;   /* closed by its last plain reference: look again */
    /* Count, then the bit (seq_cst): a changer that sees the bit sees a non-zero count. The
     * bit last: a settle that finds the pin moved and no bit undoes the pin. */
    atomic_fetch_add(&k->watch_count, 1);
    pool_park_here(p, POOL_PARK_WATCH);
    atomic_fetch_or(word, bit);
    return 0;
}

static int watch_at(struct orbit_pool *p, uint32_t i, uint64_t tag)
{
    struct pool_keyop op;
    int rc = pool_keyop_begin(p, p->node, i, INTENT_WATCH, 0, &op);
    if (rc < 0)
        return rc;
    rc = watch_locked(p, i, tag);
    pool_keyop_end(p, &op);
    if (rc == 0)
        orb_lock_fence_others();   /* a store-published completion is seen from here, or sees our bit */
    return rc;
}

static int watch_key(struct orbit_pool *p, orbit_key key, uint32_t *index)
{
    if (!p)
        return orb_fail_text(-ORBIT_EMALFORMED, "the pool handle is NULL");
    if (p->observer)
        return orb_fail_text(-ORBIT_ENOTOWNER, "an observer has no doorbell to ring (join as a member)");
    /* No hold of its own: the bit's pin, taken under the op lock, is what keeps the key. */
    uint32_t held = NO_SLOT;
    int rc = 1;
    for (unsigned n = 0; n < HOLD_TRIES && rc > 0; n++) {
        uint64_t tag;
        uint32_t h;
        if (key_probe(p, key, false, index, &tag) == 0)
            rc = watch_at(p, *index, tag);
        else if (held == NO_SLOT && (rc = pool_key_hold(p, key, &h)) == 0) {
            held = h;   /* absent: inserted, and held until it is watched */
            rc = 1;
        }
    }
    if (held != NO_SLOT)
        pool_key_release(p, held);
    return rc > 0 ? -ORBIT_EAGAIN : rc;
}

int orbit_pool_watch(struct orbit_pool *p, orbit_key key)
{
    uint32_t i;
    int rc = pool_enter(p, __func__);
    return rc < 0 ? rc : watch_key(p, key, &i);
}

int orbit_pool_watch_since(struct orbit_pool *p, orbit_key key, uint32_t since)
{
    uint32_t i;
    int rc = pool_enter(p, __func__);
    if (rc == 0)
        rc = watch_key(p, key, &i);
    if (rc < 0)
        return rc;
    /* The bit is set: a change from here rings; one before it is rung for now. */
    if (atomic_load(&pool_key_at(p, i)->wait.changes) != since)
        orb_fleet_ring_doorbell(p->fleet, p->node, &p->stats);
    return 0;
}

/* node_dead: return the node's holds and claims on every key, deliver its watches. */
/* The dead node's rows on key i back to the key, under the op lock with a RETURN intent. */
static int return_rows(struct orbit_pool *p, uint16_t node, uint32_t i)
{
    struct pool_keyop op;
    int rc = pool_keyop_begin(p, node, i, INTENT_RETURN, 0, &op);
    if (rc < 0)
        return rc;
    /* The rows as the intent recorded them (a settle on taking the lock may have moved them). */
    uint32_t claims = atomic_load(&op.e->claims), holds = atomic_load(&op.e->holds);
    if (claims)
        pool_counts_add(&pool_key_at(p, i)->counts, 0, -(int64_t)claims);
    if (holds)
        pool_key_unpin_locked(p, i);
    pool_park_here(p, POOL_PARK_RETURN);
    /* Zeroed last: a reporter killed before this is settled from the intent. */
    atomic_store(pool_holds(p, node, i), 0);
    atomic_store(pool_claims(p, node, i), 0);
    pool_keyop_end(p, &op);
    if (claims || holds)
        pool_key_changed(p, i);
    return 0;
}

int pool_key_return_node(struct orbit_pool *p, uint16_t node)
{
    if (node >= p->geo.fleet_capacity)
        return -ORBIT_EMALFORMED;
    int rc = 0;
    for (uint32_t i = 0; i <= p->key_mask; i++) {
        if (atomic_load(pool_claims(p, node, i)) || atomic_load(pool_holds(p, node, i))) {
            int r = return_rows(p, node, i);
            rc = rc < 0 ? rc : r;
        }
        /* Rung, and the bit and its pin taken: a later life of the node re-checks. Only a
         * delivery clears a bit, so one found clear needs no lock. */
        uint64_t bit = 1ull << (node % 64);
        if (atomic_load(&pool_key_watchers(p, i)[node / 64]) & bit) {
            int r = deliver_word(p, node, i, node / 64, bit, true);
            rc = rc < 0 ? rc : r;
        }
    }
    return rc;
}

/* reset_all's key part, lock held: every slot EMPTY under a new sequence, waiters woken. */
void pool_key_reset_locked(struct orbit_pool *p)
{
    atomic_store(&p->hdr->tombstones, 0);
    for (uint32_t i = 0; i <= p->key_mask; i++) {
        struct pool_key *k = pool_key_at(p, i);
        uint64_t tag = atomic_load(&k->tag);
        atomic_store(&k->refs, REFS_CLOSED);
        atomic_store(&k->counts, 0);
        atomic_store(&k->watch_count, 0);
        bitmap_clear(pool_key_watchers(p, i), p->watch_words);
        bitmap_clear(pool_key_members(p, i), p->member_words);
        orb_lock_init(&k->op_lock);   /* quiescent: a forged or stuck word starts over free */
        atomic_store(&k->tag, KEY_TAG(KEY_TAG_SEQ(tag) + 1, KEY_EMPTY));
        orb_wait_signal(&k->wait, &p->stats);
    }
}
