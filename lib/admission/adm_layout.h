/* SPDX-License-Identifier: MIT */
/*
 * The admission ledger's shared layout (private to lib/admission and its tests).
 *
 * Segment table (after the 4 KiB segment header), each part 64-byte aligned:
 *   struct adm_ledger                       lock, counters, the spare list, wake word
 *   struct adm_domain   [max_domains]       id, capacity, used, availability epoch
 *   struct adm_lane     [fleet_capacity]    a node's free list of claim records, a line each
 *   struct adm_record   [max_claims]        claim records, record_bytes each
 *
 * Free records are on singly linked lists threaded through their serial
 * word: the spare list (records no node has used yet, and what repair
 * frees) and one list per node, where a released record goes back to the
 * node that claimed it. A node claims from its own list first, so its
 * records, and the line of its list head, stay in its own cache.
 *
 * Everything except the atomics below is read and written only under the
 * ledger's lock ("the mutex": bounded, validated, a dead holder's lock taken
 * over and repaired, see core/lock.h). The atomics (poisoned, closed,
 * change_epoch, the wake word) are also read without it by waiters and
 * inspectors.
 */
#ifndef ORB_ADMISSION_LAYOUT_H
#define ORB_ADMISSION_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/admission.h>
#include "core/fastpath.h"
#include "core/fleet_internal.h"
#include "core/guard.h"
#include "core/lock.h"
#include "core/segment.h"
#include "core/table_base.h"
#include "core/wait.h"

#define ORB_TABLE_ADMISSION 4u   /* the segment header's table_type */
#define ADM_LAYOUT_VERSION 6u   /* another version of the layout above is -ORBIT_EGEOMETRY */
#define ADM_DOMAINS_MAX    1024u        /* spec.max_domains upper bound */
#define ADM_CLAIMS_MAX     (1u << 20)   /* spec.max_claims upper bound */
#define ADM_TABLE_MAX      (1ull << 30) /* table bytes upper bound */

/* Geometry as stored in the segment header; compared byte for byte by openers. */
struct adm_geometry {
    uint32_t layout;            /* ADM_LAYOUT_VERSION */
    uint32_t max_domains;
    uint32_t max_claims;
    uint32_t record_bytes;
    uint32_t fleet_capacity;    /* lanes */
    uint32_t resv;              /* 0 */
    uint64_t retained_max;      /* 0: retention disabled */
};

/* Why a ledger was poisoned (ledger->poisoned); 0 means healthy. */
enum adm_poison {
    ADM_OK = 0,
    ADM_POISON_SERIAL,          /* serial counter exhausted */
    ADM_POISON_EPOCH,           /* change or availability epoch exhausted */
    ADM_POISON_USAGE,           /* used above capacity, or a sum overflowed */
    ADM_POISON_RETAINED,        /* retained bytes above the cap, or below a release */
    ADM_POISON_RECORD,          /* a live record disagrees with a claim or the ledger */
    ADM_POISON_HALF_WRITTEN,    /* a holder died while writing a record */
    ADM_POISON_LAYOUT,          /* a shared index or count failed a bounds check */
    ADM_POISON_MUTEX,           /* the lock word is one no holder writes */
};

/*
 * Everything a claim or a release writes is on the first line, the lock's: a
 * holder that owns the lock owns the line, and a process taking the lock
 * over moves one line, not three. What a giver reads after its give (the
 * lock's sleepers count, the epoch a waiter wants) is on the second line,
 * with the wake word: it moves only when someone may sleep, so it stays in
 * every member's cache, while the first line may already be on its way to
 * the next holder (a read of it there would wait for the line to come back).
 * Waiters read the atomics without the lock.
 */
struct adm_ledger {
    struct orb_lock lock;               /* the ledger's lock (a flock: gives are stores) */
    _Atomic uint32_t poisoned;          /* enum adm_poison; set once, never cleared */
    _Atomic uint32_t closed;            /* shutdown: no new claims */
    uint32_t n_domains;                 /* domains [0, n_domains) are set up */
    uint32_t live_claims;               /* records in state LIVE */
    uint32_t spare_head;                /* the spare list's first record, ADM_NO_SLOT when empty */
    uint32_t pad;
    uint64_t next_serial;               /* next serial to hand out; starts at random in [1, 2^62] */
    uint64_t retained_bytes;            /* sum of live records' retained bytes */
    _Atomic uint64_t change_epoch;      /* the "release epoch" of results; only grows */
    _Alignas(64) struct orb_waitword change;  /* moves when a waiter may sleep for a change, or on poison */
    _Atomic uint32_t lock_sleepers;     /* the lock's sleepers count (orb_flock_take) */
    _Atomic uint64_t epoch_wanted;      /* highest epoch a sleeping waiter wants (see admission.c) */
    uint64_t repairs;                   /* EOWNERDEAD repairs done */
};
_Static_assert(offsetof(struct adm_ledger, change) == 64, "the hot fields fill one line");
_Static_assert(offsetof(struct adm_ledger, epoch_wanted) < 128, "what a giver reads after its give: one line");

struct adm_domain {
    uint32_t id;
    uint32_t pad;
    uint64_t capacity;
    uint64_t used;
    uint64_t availability_epoch;        /* advances when this domain's free units grow */
};

/* A node's free records: released records of its claims go back here (a line per node). */
struct adm_lane {
    uint32_t free_head;                 /* first free record, ADM_NO_SLOT when empty */
    uint32_t pad[15];
};
_Static_assert(sizeof(struct adm_lane) == 64, "a lane is a line");

#define ADM_NO_SLOT UINT32_MAX          /* the end of a free list */

/* Record states: only LIVE records hold capacity. */
enum adm_record_state {
    ADM_REC_FREE = 0,
    ADM_REC_WRITING = 1,                /* being filled by a claimer: unproven */
    ADM_REC_LIVE = 2,
    ADM_REC_RELEASING = 3,              /* a release is taking it apart: counts as gone */
};

struct adm_unit {
    uint32_t domain_index;              /* index into the domain table, not the id */
    uint32_t pad;
    uint64_t units;
};

/* A demand entry resolved to its domain's index. */
struct adm_want { uint32_t index; uint64_t units; };

/* A claim record: its header and two units fill one line (the common claim writes one line). */
struct adm_record {
    _Atomic uint32_t state;             /* enum adm_record_state */
    uint16_t node;
    uint16_t n_units;                   /* up to max_domains (1024) */
    uint64_t incarnation;
    union {
        uint64_t serial;                /* LIVE, WRITING, RELEASING */
        uint64_t next_free;             /* FREE: the next record of its free list, or ADM_NO_SLOT */
    };
    uint64_t retained_bytes;
    struct adm_unit units[];            /* n_units entries, up to max_domains */
};
_Static_assert(sizeof(struct adm_record) == 32, "record header is 32 bytes");

/* Where each part starts, from the geometry (process-local, trusted). */
struct adm_offsets {
    size_t domains, lanes, records, table_bytes;   /* table_bytes: without segment header */
};

/* Test hook points (ORBIT_TEST_ADMISSION_PARK_IN_MUTEX). */
enum adm_park {
    ADM_PARK_NONE = 0,
    ADM_PARK_CLAIM_WRITING,             /* record half-written */
    ADM_PARK_CLAIM_COMMIT,              /* record live, used partly charged */
    ADM_PARK_RELEASE,                   /* record releasing, used partly returned */
};

#define ADM_HINTS 64u                   /* domain id -> index cache entries (a power of two) */

/* The admission ledger's own counters (core/counters.h), after the ones every table has. */
enum {
    ADM_CTR_CLAIMS = ORB_CTR_TABLE_FIRST,   /* claims granted */
    ADM_CTR_DEFERRED,                       /* refused for now: a domain lacked free units */
    ADM_CTR_SKIPPED,                        /* refused: over a cap (retained or per-domain) */
    ADM_CTR_REJECTED,                       /* refused: can never fit (more than the maximum) */
    ADM_CTR_WAITS,                          /* orbit_admission_wait calls */
    ADM_CTR_RELEASES,
    ADM_CTR_END
};

struct orbit_admission {
    ORB_TABLE_BASE;                     /* fleet, seg, kind, node (NONE: observer), lock, stats, ctr, ... */
    struct adm_ledger *ledger;
    struct adm_domain *domains;
    struct adm_lane *lanes;             /* geo.fleet_capacity of them */
    unsigned char *records;
    struct adm_geometry geo;            /* trusted bounds: never re-read from shared memory */
    uint64_t *scratch;                  /* max_domains sums; used only under the mutex */
    struct adm_want *want;              /* 2 * max_domains resolved entries; only under the mutex */
    uint32_t hint[ADM_HINTS];           /* id's last index + 1 (0: none); checked before use */
    enum adm_park park;
    struct orb_spin spin;
};

/* Every public call on an admission handle begins here (core/guard.h). */
static inline int adm_enter(const struct orbit_admission *a, const char *call)
{
    return orb_enter(a ? &a->fork_generation : (const uint32_t *)0, call, "admission handle");
}

static inline struct adm_record *adm_record(const struct orbit_admission *a, uint32_t slot)
{
    return (struct adm_record *)(void *)(a->records + (size_t)slot * a->geo.record_bytes);
}

/* Layout arithmetic (admission.c). -ORBIT_EMALFORMED when out of bounds. */
int  adm_geometry_make(const struct orbit_admission_spec *spec, uint16_t fleet_capacity,
                      struct adm_geometry *out);
int  adm_offsets(const struct adm_geometry *geo, struct adm_offsets *out);
/* How the base opens a ledger (admission.c); the ops name it (ops.c). */
extern const struct orb_table_kind adm_kind;
/* Index of a set-up domain id, or -1 (under the mutex; n_domains already bounds-checked). */
int64_t adm_domain_find(const struct orbit_admission *a, uint32_t id);

/* ---- free lists (under the ledger's lock) -------------------------------- */

#define ADM_BAD_SLOT (UINT32_MAX - 1)   /* a list that names a record out of range or not FREE */

/* The first record of the list at *head, taken off it; ADM_NO_SLOT when the list is empty;
 * ADM_BAD_SLOT (nothing changed) when the list is broken: the caller poisons. */
static inline uint32_t adm_list_pop(const struct orbit_admission *a, uint32_t *head)
{
    uint32_t s = *head;
    if (s >= a->geo.max_claims)
        return s == ADM_NO_SLOT ? ADM_NO_SLOT : ADM_BAD_SLOT;
    const struct adm_record *r = adm_record(a, s);
    uint64_t next = r->next_free;
    /* A link is a shared value: in range or the end, and only a FREE record is on a list. */
    if ((next >= a->geo.max_claims && next != ADM_NO_SLOT) ||
        atomic_load_explicit(&r->state, memory_order_relaxed) != ADM_REC_FREE)
        return ADM_BAD_SLOT;
    *head = (uint32_t)next;
    return s;
}

/* Puts the FREE record at slot first on the list at *head. */
static inline void adm_list_push(const struct orbit_admission *a, uint32_t *head, uint32_t slot)
{
    adm_record(a, slot)->next_free = *head;
    *head = slot;
}

/* A free record for a claim of this handle's node: its own list, the spare list, then any
 * node's (records.c). ADM_NO_SLOT: none (the caller checked live_claims < max_claims, so
 * that is a broken count), ADM_BAD_SLOT: a broken list. */
uint32_t adm_take_free(struct orbit_admission *a);
/* Rebuilds every list from the records' states (repair): each non-LIVE record becomes FREE
 * on the spare list; every node's list is emptied. */
void adm_lists_rebuild(struct orbit_admission *a);

/* ---- claims ---------------------------------------------------------------- */

/* check_vector's verdict on a claim of one or two entries, without the call: true only where
 * it would return 0 (anything else goes to check_vector, which names what is wrong). */
static inline bool adm_claim_small_ok(const struct orbit_units *v, size_t n, uint32_t max_domains)
{
    if (!v || n - 1 > 1 || n > max_domains || v[0].units == 0)   /* n - 1 > 1: n is not 1 or 2 */
        return false;
    return n == 1 || (v[1].units != 0 && v[1].domain != v[0].domain);
}

/* A claim entry the ledger may refuse, or a domain that is broken (over capacity, epoch spent). */
static inline bool adm_claim_troubled(uint64_t cap, uint64_t used, uint64_t epoch, uint64_t units)
{
    return used > cap || units > cap - used || epoch == UINT64_MAX;
}

/* Argument checks of a demand that need no ledger (claim.c): 0 or -ORBIT_EMALFORMED, named. */
int  adm_check_demand(const struct orbit_admission *a, const struct orbit_demand *d);
/* A claim judged in the documented order, then counted (claim.c). locked: the caller holds
 * the lock already (the one-pass path looked and declined); the lock is given either way. */
int  adm_claim_decided(struct orbit_admission *a, const struct orbit_demand *d, struct orbit_admit_result *out,
                       bool locked);

/* Death accounting (account.c), for the table ops. */
struct orbit_reclaim;
void adm_account(void *table, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);

/* Release of one live record (release.c), under the mutex. 0, or -ORBIT_EPOISONED. */
int  adm_release_record(struct orbit_admission *a, uint32_t slot);
/* node_dead for the death dispatch: 0, or the lock's error (the node stays REAPING). */
int  adm_node_dead(struct orbit_admission *a, uint16_t node, uint64_t incarnation);

#endif
