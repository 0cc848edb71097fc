/* SPDX-License-Identifier: MIT */
/*
 * The pool segment's layout and the handle (private to lib/pool).
 *
 * Table bytes, after the 4 KiB segment header:
 *   pool_header                        magic, tombstone hint, the key-table lock
 *   pool_lane[fleet]                   per node: allocation cursor, lane pre-faulted flag
 *   holds[fleet][key_capacity]  u32    key references a node holds (waits, permits, ops)
 *   claims[fleet][key_capacity] u32    creation claims a node holds
 *   intents[fleet][POOL_INTENTS] x 64 B  what a node is doing under a key's op lock
 *   keys[key_capacity] x 64 B          pool_key: dense, so a probe chain is contiguous
 *   bitmaps[key_capacity] x key_stride watcher bitmap (fleet bits) + member bitmap (fleet x lane)
 *   resources[fleet][lane] x 640 B     pool_resource
 *
 * Keys: open addressing (linear probing) on the 128-bit digest. A key slot is
 * EMPTY, CLAIMING (being inserted, under the lock), LIVE or TOMB (reclaimed).
 * Its refs word counts everything that keeps it, in two fields: pins (a
 * member's holds, one per node whose holds row is non-zero; live resources;
 * watch bits) and plain references (observers); dropping the last one sets
 * REFS_CLOSED in the same CAS, after which nobody can take a reference and
 * the slot becomes TOMB. Inserts and tombstone sweeps take the key lock;
 * lookups and plain references are lock-free.
 *
 * Pins and counts move only under the key's op lock, with an intent: the
 * node's entry names the key and holds the pins, counts and rows from before
 * the op. A process killed mid-op leaves the lock to a dead pid: whoever takes
 * it over (a member, or the node's death report) compares and settles the
 * op, so each count moves exactly once. A settle cut short is settled again.
 * Watcher bits and their pins move together under the op lock too (a watch
 * sets a bit, a delivery takes bits and rings their nodes), so watch_count is
 * exact there; changers read it lock-free and only try the lock to deliver
 * (without it they ring, and the bits stay with their pins).
 *
 * Versions: the change word moves only when someone may look: a version
 * handed out (watched == changes), a parked waiter or a watch. A change
 * nobody looks at writes nothing on the key's line, so owners driving
 * resources of one key share the line read-only.
 *
 * Resources: a slot's state word carries its generation, so every CAS on it
 * names one tenancy; its units word carries the generation's low 16 bits and
 * a bit per pending-reservation entry. Units and fence sit side by side: one
 * 16-byte CAS takes a unit, the entry and the fence together (fence f always
 * lands in entry f % 16; busy entries' fences are skipped, never given), and
 * one moves a young lease (fewer than 16 fences old) to active by the pair
 * alone. An older one goes through its entry's CAS. A freed entry is wiped
 * (fence 0) before a reserver takes it again: one still showing a fence is
 * skipped, and the owner's reconcile clears it if its wiper never came.
 * A slot goes EMPTY/CLOSED -> ALLOCATING -> LIVE <-> DRAINING -> CLOSING ->
 * CLOSED (or EXHAUSTED at the generation limit).
 *
 * Held entries (capacity <= 16, with the pair CAS): an accepted lease keeps
 * its entry and its bit, so a triple is two RMWs. Entry states, by its fence
 * word e and its since word s, bit set throughout:
 *   PENDING  e = f                  reserve's pair CAS, then stamp, then e (release)
 *   ACTIVE   e = f|HELD             accept: CAS f -> f|HELD, the exactly-once step
 *   DONE     e = f|HELD, s = f|DONE complete: one plain store of s (release)
 * and free (bit clear, e = 0 once wiped, or e = f|HELD once released[b] = f).
 * A reserver folds DONE entries: its own pair CAS clears their bits (they
 * count as free in its capacity check), then it releases them (released[b] =
 * f, release): a reserver takes an entry showing 0, or f|HELD with released f.
 * Only folders write released[b], each the fence the entry was folded at (the
 * owner wipes by CAS instead: what its reconcile folds, and a dead folder's
 * entries), so a late release names a fence the entry no longer shows. A set bit whose entry shows
 * a released f|HELD is a new holder's before its publish: a pending
 * reservation, aged as an unpublished one. Fences never repeat in a slot, so a
 * late complete (its entry reclaimed and retaken) writes a DONE nobody
 * matches; it only costs the new holder its stamp (restamped by aging). An
 * accept re-reads the pair after its CAS: tag and bit still there, or its
 * lease was voided (ended tenancy, aged). complete takes the held path only
 * when e = f|HELD (only f's accept writes that), else gives back a counted
 * unit as before. Aging leaves accepted leases' entries alone; reconcile folds DONE
 * ones, keeps ACTIVE ones while the owner's count covers them (counted =
 * active - held) and otherwise reclaims them all (counted = active): an
 * execution whose entry was reclaimed then completes through the counted
 * path. Capacity > 16 (or no pair CAS) keeps the counted path: accept frees
 * the entry and complete decrements active. A reserver killed between its
 * fold and the release leaves a free entry showing f|HELD, released[b]
 * older: skipped by reserves, wiped by the owner's aging (CAS). The DONE
 * store is not fenced in a member registered for global membarriers: a
 * waiter about to sleep runs the membarrier and folds the key's DONE entries
 * (pool_key_fold_after_fence).
 *
 * Death: node_dead settles the node's intents, closes the incarnation's slots,
 * frees the unaccepted reservations that incarnation holds on every slot of
 * the pool (whoever owns it), returns the node's holds, claims and watches (a
 * close or register cut short is finished from the slot's state) and wakes
 * every key. A reserve names its holder in its entry before the publish:
 * since carries its node (+1, above the ms) and holder its incarnation, so a
 * report for an earlier life of the node, or for another node, matches
 * nothing of it. A reporter frees a published PENDING entry f it matches the
 * way an accept takes it, so the two exclude each other: held entries and
 * lapped leases (and every entry without the pair CAS) by the entry's CAS f
 * -> TAKEN (which also excludes aging and another reporter), then the bit,
 * then the wipe; a young counted lease by the pair CAS that clears its bit
 * (a young accept's step: one of the two wins; aging tolerates it as it
 * tolerates that accept), then the wipe. A late accept of a freed lease
 * finds its fence gone (ENOTRESERVED); a later lease in the entry shows
 * another fence. Wipes are CASes on what the entry showed, so a reporter
 * that ends late never clears a later holder's words. The windows: a
 * reserver killed between its unit CAS and its publish leaves an entry
 * showing 0 (or a released f|HELD) whose holder is not yet known: the
 * report leaves it, and the owner's reconcile stamps it and ages it like any
 * unstamped entry. ACTIVE and DONE entries (accepted leases) are the
 * owner's, never the reserver's report's. A stamp lost to aging's restamp
 * or a late DONE names no node: that entry, too, is left to aging. A
 * watcher killed between its bit's pin and the bit, or a deliverer between
 * taking bits and their pins, is settled from its intent like any op.
 */
#ifndef ORB_POOL_LAYOUT_H
#define ORB_POOL_LAYOUT_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/pool.h>
#include "core/fastpath.h"
#include "core/fleet_internal.h"
#include "core/guard.h"
#include "core/lock.h"
#include "core/table_base.h"

#define ORB_TABLE_POOL       2                    /* the segment header's table_type */
#define POOL_MAGIC           0x4c4f4f50u          /* "POOL" */
#define POOL_LAYOUT_VERSION  8u   /* another version of the layout above is -ORBIT_EGEOMETRY */
#define POOL_PENDING         16u

/* The pool's own counters (core/counters.h), after the ones every table has. */
enum {
    POOL_CTR_RESERVATIONS = ORB_CTR_TABLE_FIRST,
    POOL_CTR_BUSY,                /* reserves refused: every unit taken or pending */
    POOL_CTR_STALE,               /* reserves refused: the tenancy ended or drains */
    POOL_CTR_ACCEPTS,
    POOL_CTR_COMPLETIONS,
    POOL_CTR_RECLAIMED,           /* units reconcile gave back (aged reservations, lost executions) */
    POOL_CTR_CREATION_CLAIMS,
    POOL_CTR_END
};
#define POOL_INTENTS         8u                   /* per node: threads mid-way under op locks */
#define POOL_GEN_MAX         ORBIT_ID_GENERATION_MAX
#define POOL_KEY_CAP_MAX     (1u << 20)
#define POOL_LANE_CAP_MAX    (ORBIT_ID_SLOT_MAX + 1u)

/* Compared byte for byte with an existing segment: every field is explicit. */
struct pool_geometry {
    uint32_t layout_version;
    uint32_t key_capacity;
    uint32_t lane_capacity;
    uint32_t generation_limit;    /* effective: 1..POOL_GEN_MAX */
    uint32_t fleet_capacity;
    uint32_t pending;
    uint32_t key_stride;          /* bytes of one key's bitmaps */
    uint32_t resource_bytes;
};

struct pool_header {
    uint32_t magic;
    uint32_t version;
    _Atomic uint32_t tombstones;  /* a hint: reclaimed key slots not yet swept or reused */
    uint8_t  pad0[52];
    union {
        struct orb_lock l;        /* key inserts and sweeps: bounded, dead holders recovered */
        uint8_t bytes[64];
    } key_lock;
};
_Static_assert(sizeof(struct pool_header) == 128, "pool header is two lines");

struct pool_lane {
    _Atomic uint32_t cursor;      /* next slot to try: tenancies rotate through the lane */
    _Atomic uint32_t populated;   /* the node pre-faulted its lane: others may read it */
    uint8_t pad[56];
};

/* ---- keys ---- */
enum { KEY_EMPTY = 0, KEY_CLAIMING = 1, KEY_LIVE = 2, KEY_TOMB = 3 };
#define KEY_TAG(seq, state)   (((uint64_t)(seq) << 8) | (uint64_t)(state))
#define KEY_TAG_STATE(t)      ((unsigned)((t) & 0xff))
#define KEY_TAG_SEQ(t)        ((t) >> 8)
#define REFS_CLOSED           (1ull << 63)
#define REFS_COUNT(r)         ((r) & ~REFS_CLOSED)          /* zero: nothing keeps the key */
#define REFS_PIN              (1ull << 32)                  /* pins: bits 32..62, under the op lock */
#define REFS_PINS(r)          (REFS_COUNT(r) >> 32)
#define REFS_PINS_MAX         ((1ull << 31) - 1)
#define REFS_PLAIN(r)         ((r) & 0xffffffffull)         /* plain: bits 0..31, lock-free */

struct pool_key {
    _Atomic uint64_t tag;         /* seq << 8 | state; seq moves on every new tenancy */
    _Atomic uint64_t refs;        /* REFS_CLOSED | references */
    _Atomic uint64_t key_lo, key_hi;
    _Atomic uint64_t counts;      /* live << 32 | creating: one CAS sees both */
    struct orb_waitword wait;     /* the key's change word */
    _Atomic uint32_t watch_count; /* >= watcher bits set: skip the bitmap when 0 */
    _Atomic uint32_t watched;     /* the last version handed out: a change past it must bump */
    struct orb_lock op_lock;      /* pins and counts move under it, with an intent */
};
_Static_assert(sizeof(struct pool_key) == 64, "key slot head is one cache line");

static inline uint64_t pool_pack(uint32_t hi, uint32_t lo) { return ((uint64_t)hi << 32) | lo; }
static inline uint32_t pool_hi(uint64_t v) { return (uint32_t)(v >> 32); }
static inline uint32_t pool_lo(uint64_t v) { return (uint32_t)v; }

/* ---- intents ---- */
enum { INTENT_NONE = 0, INTENT_HOLD, INTENT_RELEASE, INTENT_CLAIM, INTENT_FINISH, INTENT_REGISTER,
       INTENT_UNCOUNT, INTENT_RETURN, INTENT_WATCH, INTENT_DELIVER, INTENT_LAST = INTENT_DELIVER };

/* One op under a key's op lock, on behalf of a node (by one of its threads, or its reporter). */
struct pool_intent {
    _Atomic uint32_t busy;        /* taken by one thread for one op */
    _Atomic uint32_t op;          /* INTENT_*: named once the values below are in, cleared before unlock */
    _Atomic uint32_t key;         /* the key slot whose op lock is held */
    _Atomic uint32_t holds;       /* the node's holds row on the key before the op */
    _Atomic uint32_t claims;      /* its claims row before */
    uint32_t pad0;
    _Atomic uint64_t pins;        /* REFS_PINS of the key before */
    _Atomic uint64_t counts;      /* the key's counts before */
    _Atomic uint64_t res;         /* the resource index (register, uncount); the word (deliver) */
    _Atomic uint64_t bits;        /* deliver: the watcher bits it takes, 0 until read */
    uint8_t pad1[8];
};
_Static_assert(sizeof(struct pool_intent) == 64, "an intent is one line");

/* ---- resources ---- */
enum { RES_EMPTY = 0, RES_LIVE = 1, RES_DRAINING = 2, RES_CLOSED = 3, RES_EXHAUSTED = 4,
       RES_ALLOCATING = 5, RES_CLOSING = 6 };
/* state word = generation << 8 | state: one load or CAS sees both. */
#define RES_WORD(gen, st)     (((uint32_t)(gen) << 8) | (uint32_t)(st))
#define RES_GEN(w)            ((uint32_t)(w) >> 8)
#define RES_STATE(w)          ((unsigned)((w) & 0xff))
#define RES_IN_USE(w)         (RES_STATE(w) == RES_LIVE || RES_STATE(w) == RES_DRAINING)

/*
 * units = tag:16 | pending bits:16 | active:32. tag is the generation's low
 * 16 bits, so a CAS made for one tenancy fails on the next; bit b set means
 * pending entry b holds one reserved unit (reserved = popcount).
 */
static inline uint64_t units_make(uint32_t tag, uint32_t bits, uint32_t active)
{
    return ((uint64_t)(tag & 0xffff) << 48) | ((uint64_t)(bits & 0xffff) << 32) | active;
}
static inline uint32_t units_tag(uint64_t u)    { return (uint32_t)(u >> 48); }
static inline uint32_t units_bits(uint64_t u)   { return (uint32_t)(u >> 32) & 0xffff; }
static inline uint32_t units_active(uint64_t u) { return (uint32_t)u; }
static inline uint32_t units_reserved(uint64_t u)
{
    uint32_t v = units_bits(u);   /* 16-bit popcount without a libgcc call */
    if (v == 0)
        return 0;                 /* the common case: nothing pending */
    v = v - ((v >> 1) & 0x5555u);
    v = (v & 0x3333u) + ((v >> 2) & 0x3333u);
    v = (v + (v >> 4)) & 0x0f0fu;
    return (v + (v >> 8)) & 0x1fu;
}
static inline uint32_t gen_tag(uint32_t gen)    { return gen & 0xffff; }

/* A 16-byte CAS on units and fence (cmpxchg16b): young accepts by the pair, held entries. */
#if defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16) && defined(__SIZEOF_INT128__) && !defined(ORB_POOL_NO_PAIR_CAS)
#define POOL_PAIR_CAS 1
#else
#define POOL_PAIR_CAS 0
#endif

#define FENCE_TAKEN UINT64_MAX    /* an entry being freed by accept or aging */
#define ENTRY_HELD  (1ull << 62)  /* fence word f|HELD: f accepted, its unit held by the entry */
#define SINCE_DONE  (1ull << 63)  /* since word f|DONE: f's execution completed */
/* An entry word of an accepted lease (FENCE_TAKEN, all ones, is not one). */
static inline bool entry_held(uint64_t e) { return (e & ENTRY_HELD) && e != FENCE_TAKEN; }

/*
 * The since word: 0 not stamped yet; a reserve's stamp, ms | (node + 1) << 48
 * (its clock tick and a member's node; 0 in the node field: none known); or
 * f|DONE. A node field fits below SINCE_DONE: nodes are < 4096.
 */
#define SINCE_NODE_SHIFT 48
#define SINCE_MS_MASK    ((1ull << SINCE_NODE_SHIFT) - 1)
_Static_assert(ORBIT_FLEET_CAPACITY_MAX < (1u << 14), "a node field stays below SINCE_DONE");
static inline uint64_t since_ms(uint64_t s) { return s & SINCE_MS_MASK; }
/* node + 1 of the member that stamped s, 0 for none (unstamped, restamped, DONE). */
static inline uint32_t since_node(uint64_t s)
{
    return s & SINCE_DONE ? 0 : (uint32_t)(s >> SINCE_NODE_SHIFT);
}

/* One pending-reservation entry: two to a cache line, everything a reserve writes in it. */
struct pool_pending {
    _Atomic uint64_t fence;       /* 0 free or not yet published, FENCE_TAKEN being freed */
    _Atomic uint64_t since;       /* see above */
    _Atomic uint64_t holder;      /* the incarnation of the reserver that stamped since */
    /* The fence the entry was folded at, once a reserver may take it again (held entries). */
    _Atomic uint64_t released;
};
_Static_assert(sizeof(struct pool_pending) == 32, "two entries to a line");

struct pool_resource {
    _Atomic uint32_t state;       /* RES_WORD(generation, state) */
    _Atomic uint32_t uses;        /* tenancies this epoch */
    _Atomic uint32_t owner_node;
    _Atomic uint32_t capacity;
    _Atomic uint64_t owner_incarnation;
    _Atomic uint64_t key_lo, key_hi;
    _Atomic uint32_t key_index;
    uint32_t pad0;
    uint8_t pad1[16];
    /* second line: what every reserve/accept/complete touches */
    _Alignas(16) _Atomic uint64_t units;
    _Atomic uint64_t fence;       /* the last fence given: strictly increasing per slot, never reset */
    _Atomic uint64_t last_reserve_ms;
    uint8_t pad2[40];
    struct pool_pending pending[POOL_PENDING];
};
_Static_assert(sizeof(struct pool_resource) == 640, "resource slot is 128 + 16 x 32 bytes");
_Static_assert(offsetof(struct pool_resource, units) == 64 &&
               offsetof(struct pool_resource, fence) == 72, "units and fence: one 16-byte aligned pair");

/* Test hook points (ORBIT_TEST_POOL_PARK): the process stops itself there. */
enum pool_park { POOL_PARK_NONE, POOL_PARK_HOLD, POOL_PARK_RELEASE, POOL_PARK_CLAIM, POOL_PARK_FINISH,
                 POOL_PARK_REGISTER, POOL_PARK_UNCOUNT, POOL_PARK_RETURN, POOL_PARK_WATCH,
                 POOL_PARK_DELIVER, POOL_PARK_FOLD, POOL_PARK_ACQUIRE_WAIT };

/* ---- the handle ---- */
struct orbit_pool {
    ORB_TABLE_BASE;               /* fleet, seg, kind, observer, node, lock, stats, ctr, ... */
    struct pool_geometry geo;
    uint64_t stamp_node;          /* (node + 1) << SINCE_NODE_SHIFT for a member, 0 for observers */
    /* A member's own lane, which it pre-faulted at open: an id's top 24 bits (kind, node) equal
     * own_hi for a slot there (never for an observer: UINT32_MAX), own_lane its first slot. */
    uint32_t own_hi;
    struct pool_resource *own_lane;
    uint32_t key_mask, lane_mask;
    uint32_t watch_words, member_words;
    uint64_t total_resources;     /* fleet x lane */
    struct pool_header *hdr;
    struct pool_lane *lanes;
    _Atomic uint32_t *holds, *claims;
    struct pool_intent *intents;
    struct pool_key *keys;
    unsigned char *bitmaps;
    struct pool_resource *res;
    struct orb_spin spin;
    _Atomic uint64_t key_inserts, key_reclaims, key_sweeps;
    enum pool_park park;          /* testing: ORBIT_TEST_POOL_PARK at open */
};
/* Every public call on a pool, or on an execution or permit of it, begins here (core/guard.h). */
static inline int pool_enter(const struct orbit_pool *p, const char *call)
{
    return orb_enter(p ? &p->fork_generation : (const uint32_t *)0, call, "pool handle");
}

/* A test hook point: one compare on the hot path, the stop (raise) out of line; nothing at
 * all in a build without the test hooks (park is never set there). */
static inline void pool_park_here(const struct orbit_pool *p, enum pool_park point)
{
#ifdef ORBIT_TEST_HOOKS
    if (orb_unlikely(p->park == point))
        raise(SIGSTOP);
#else
    (void)p;
    (void)point;
#endif
}

/* Byte offsets of the sections inside the table (after the segment header). */
struct pool_sections {
    size_t lanes, holds, claims, intents, keys, bitmaps, res, end;
};
int  pool_sections_of(const struct pool_geometry *g, struct pool_sections *out);
/* How the base opens a pool (table.c); the ops name it (death.c). */
extern const struct orb_table_kind pool_kind;

static inline struct pool_key *pool_key_at(const struct orbit_pool *p, uint32_t i)
{
    return &p->keys[i];
}
static inline _Atomic uint64_t *pool_key_watchers(const struct orbit_pool *p, uint32_t i)
{
    return (_Atomic uint64_t *)(p->bitmaps + (size_t)i * p->geo.key_stride);
}
static inline _Atomic uint64_t *pool_key_members(const struct orbit_pool *p, uint32_t i)
{
    return pool_key_watchers(p, i) + p->watch_words;
}
static inline struct pool_resource *pool_res_at(const struct orbit_pool *p, uint64_t index)
{
    return &p->res[index];
}
static inline _Atomic uint32_t *pool_holds(const struct orbit_pool *p, uint32_t node, uint32_t key)
{
    return &p->holds[(size_t)node * p->geo.key_capacity + key];
}
static inline _Atomic uint32_t *pool_claims(const struct orbit_pool *p, uint32_t node, uint32_t key)
{
    return &p->claims[(size_t)node * p->geo.key_capacity + key];
}
static inline struct pool_intent *pool_intents_of(const struct orbit_pool *p, uint32_t node)
{
    return &p->intents[(size_t)node * POOL_INTENTS];
}
static inline uint64_t pool_epoch_now(const struct orbit_pool *p)
{
    return atomic_load_explicit(&orb_seg_hdr(&p->seg)->epoch, memory_order_acquire);
}

/*
 * Nobody looks at key k: no version equal to its word handed out, nobody
 * parked, no watch. A changer that finds this (after its publishing RMW or
 * fence) writes nothing; pool_key_changed_after_rmw repeats these loads.
 */
static inline bool pool_key_unlooked(struct pool_key *k)
{
    uint32_t c = atomic_load(&k->wait.changes);
    return atomic_load(&k->watched) != c && !atomic_load(&k->wait.parked) &&
           atomic_load(&k->watch_count) == 0;
}

/* ---- account.c: the pool's death accounting (table ops) ---- */
struct orbit_reclaim;
void pool_account(void *table, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);

/* ---- keys.c ---- */
int  pool_key_find(struct orbit_pool *p, orbit_key key, uint32_t *index);   /* takes a plain ref */
int  pool_key_peek(struct orbit_pool *p, orbit_key key, uint32_t *index);   /* no ref: snapshots */
int  pool_key_hold(struct orbit_pool *p, orbit_key key, uint32_t *index);   /* find or insert + hold */
void pool_key_release(struct orbit_pool *p, uint32_t index);                /* drops one hold */
void pool_key_unref(struct orbit_pool *p, uint32_t index, uint64_t n);
void pool_key_changed(struct orbit_pool *p, uint32_t index);
void pool_key_changed_after_rmw(struct orbit_pool *p, uint32_t index);
uint32_t pool_key_version(struct pool_key *k);                              /* registered */
int  pool_key_return_node(struct orbit_pool *p, uint16_t node);             /* node_dead's key part */
void pool_watch_ring(struct orbit_pool *p, uint32_t word, uint64_t bits); /* ring those watchers */
void pool_watch_recount(struct orbit_pool *p, uint32_t index);             /* op lock held */
int  pool_intents_settle_node(struct orbit_pool *p, uint16_t node);         /* node_dead's first step */
void pool_intents_reset(struct orbit_pool *p);

/* ---- intents.c: op locks, pins, intents ---- */
int  pool_key_op_lock(struct orbit_pool *p, uint32_t index);                /* a dead holder's op settled */
bool pool_key_pin_locked(struct orbit_pool *p, uint32_t index, uint64_t tag); /* op lock held */
void pool_key_reclaim(struct orbit_pool *p, uint32_t index, uint64_t tag);  /* keys.c: last ref gone */
/* An op under key i's op lock with node's intent entry (see "Pins and counts" above). */
struct pool_keyop { struct pool_intent *e; uint32_t key; };
int  pool_keyop_begin(struct orbit_pool *p, uint16_t node, uint32_t key, uint32_t op, uint64_t res,
                      struct pool_keyop *out);
/* The same, but only if the lock comes within a spin (-ORBIT_ECORRUPT otherwise): changers. */
int  pool_keyop_try(struct orbit_pool *p, uint16_t node, uint32_t key, uint32_t op, uint64_t res,
                    struct pool_keyop *out);
void pool_keyop_end(struct orbit_pool *p, struct pool_keyop *op);
void pool_key_pin_held(struct orbit_pool *p, uint32_t index);               /* op lock and a hold held */
void pool_key_unpin_locked(struct orbit_pool *p, uint32_t index);           /* op lock held */
void pool_key_unpin_n_locked(struct orbit_pool *p, uint32_t index, uint64_t n); /* op lock held */
void pool_key_reset_locked(struct orbit_pool *p);
int  pool_key_lock(struct orbit_pool *p);
void pool_key_unlock(struct orbit_pool *p);
bool pool_counts_add(_Atomic uint64_t *counts, int64_t live, int64_t creating);

/* ---- reserve.c ---- */
/* A waiter about to sleep: every store-published completion visible (membarrier), then
 * the DONE entries of key index i's resources folded; whether any were (a change its
 * version may not show: once, as the fold makes it a plain free unit). *fenced false:
 * the membarrier was refused to this process, and a completion may be missed. */
bool pool_key_fold_after_fence(struct orbit_pool *p, uint32_t i, bool *fenced);

/* ---- refusals.c ---- */
/* Why a call on resource id was refused with rc, for orbit_last_error; returns rc. */
int pool_id_refused(const struct orbit_pool *p, int rc, orbit_id id);

#endif
