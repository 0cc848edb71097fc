/* SPDX-License-Identifier: MIT */
/*
 * The admission ledger's shared layout (private to lib/admission and its tests).
 *
 * Segment table (after the 4 KiB segment header), each part 64-byte aligned:
 *   struct adm_ledger                       lock, counters, wake word
 *   struct adm_domain   [max_domains]       id, capacity, used, availability epoch
 *   uint32_t            [max_claims]        free-slot stack (slot indexes)
 *   struct adm_record   [max_claims]        claim records, record_bytes each
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
#define ADM_LAYOUT_VERSION 5u   /* another version of the layout above is -ORBIT_EGEOMETRY */
#define ADM_DOMAINS_MAX    1024u        /* spec.max_domains upper bound */
#define ADM_CLAIMS_MAX     (1u << 20)   /* spec.max_claims upper bound */
#define ADM_TABLE_MAX      (1ull << 30) /* table bytes upper bound */

/* Geometry as stored in the segment header; compared byte for byte by openers. */
struct adm_geometry {
    uint32_t layout;            /* ADM_LAYOUT_VERSION */
    uint32_t max_domains;
    uint32_t max_claims;
    uint32_t record_bytes;
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
 * Everything a claim or a release touches is on the first line, the lock's:
 * a holder that owns the lock owns the line, and a process taking the lock
 * over moves one line, not three. Waiters read the atomics there without the
 * lock; only the wake word, which moves just when someone may sleep, has a
 * line of its own.
 */
struct adm_ledger {
    struct orb_lock lock;               /* the ledger's lock (a flock: gives are stores) */
    _Atomic uint32_t lock_sleepers;     /* the lock's sleepers count (orb_flock_take) */
    _Atomic uint32_t poisoned;          /* enum adm_poison; set once, never cleared */
    _Atomic uint32_t closed;            /* shutdown: no new claims */
    uint32_t n_domains;                 /* domains [0, n_domains) are set up */
    uint32_t live_claims;               /* records in state LIVE */
    uint32_t free_top;                  /* free stack holds [0, free_top) */
    uint64_t next_serial;               /* next serial to hand out; starts at random in [1, 2^62] */
    uint64_t retained_bytes;            /* sum of live records' retained bytes */
    _Atomic uint64_t change_epoch;      /* the "release epoch" of results; only grows */
    _Atomic uint64_t epoch_wanted;      /* highest epoch a sleeping waiter wants (see admission.c) */
    _Alignas(64) struct orb_waitword change;  /* moves when a waiter may sleep for a change, or on poison */
    uint64_t repairs;                   /* EOWNERDEAD repairs done */
};
_Static_assert(offsetof(struct adm_ledger, change) == 64, "the hot fields fill one line");

struct adm_domain {
    uint32_t id;
    uint32_t pad;
    uint64_t capacity;
    uint64_t used;
    uint64_t availability_epoch;        /* advances when this domain's free units grow */
};

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

struct adm_record {
    _Atomic uint32_t state;             /* enum adm_record_state */
    uint32_t n_units;
    uint16_t node;
    uint16_t pad16;
    uint32_t pad32;
    uint64_t incarnation;
    uint64_t serial;
    uint64_t retained_bytes;
    uint64_t pad64;
    struct adm_unit units[];            /* n_units entries, up to max_domains */
};
_Static_assert(sizeof(struct adm_record) == 48, "record header is 48 bytes");

/* Where each part starts, from the geometry (process-local, trusted). */
struct adm_offsets {
    size_t domains, free_stack, records, table_bytes;   /* table_bytes: without segment header */
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
    uint32_t *free_stack;
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
int  adm_geometry_make(const struct orbit_admission_spec *spec, struct adm_geometry *out);
int  adm_offsets(const struct adm_geometry *geo, struct adm_offsets *out);
/* How the base opens a ledger (admission.c); the ops name it (ops.c). */
extern const struct orb_table_kind adm_kind;
/* Index of a set-up domain id, or -1 (under the mutex; n_domains already bounds-checked). */
int64_t adm_domain_find(const struct orbit_admission *a, uint32_t id);

/*
 * Lock and repair (lock.c). adm_lock: 0 held, or -ORBIT_EPOISONED (a lock
 * word no holder writes poisons the ledger), -ORBIT_ECORRUPT (a live holder
 * kept it past ORB_LOCK_BOUND_MS); with inspect, -ORBIT_ETIMEDOUT instead of
 * the latter (tools must not hang on a stopped holder), and
 * ADM_INSPECT_UNLOCKED for a forged word (the poisoned ledger is read as is).
 * adm_inspect_done(a, what adm_lock returned) ends an inspection.
 */
#define ADM_INSPECT_UNLOCKED 1
int  adm_lock_slow(struct orbit_admission *a, int taken, bool inspect);   /* orb_lock_take's result */
void adm_inspect_done(struct orbit_admission *a, int locked);
void adm_poison(struct orbit_admission *a, enum adm_poison why);   /* under the mutex */
void adm_park_stop(void);
/* Advance the change epoch by one (under the mutex): false when it cannot (then poisoned). */
bool adm_advance_epoch(struct orbit_admission *a);
void adm_repair(struct orbit_admission *a);
void adm_wake(struct orbit_admission *a);

static inline int adm_lock(struct orbit_admission *a, bool inspect)
{
    int rc = orb_flock_take_inline(&a->ledger->lock, &a->ledger->lock_sleepers, ORB_LOCK_BOUND_MS);
    return rc == ORB_LOCK_TAKEN ? 0 : adm_lock_slow(a, rc, inspect);
}

static inline void adm_unlock(struct orbit_admission *a)
{
    orb_flock_give(&a->ledger->lock, &a->ledger->lock_sleepers);
}

/* After a give that advanced the change epoch to epoch: wake a waiter that wants it (lock.c). */
static inline void adm_wake_wanted(struct orbit_admission *a, uint64_t epoch)
{
    if (atomic_load_explicit(&a->ledger->epoch_wanted, memory_order_relaxed) >= epoch)
        adm_wake(a);
}

static inline bool adm_is_poisoned(const struct orbit_admission *a)
{
    return atomic_load_explicit(&a->ledger->poisoned, memory_order_acquire) != ADM_OK;
}

/* A test hook point; nothing in a build without the test hooks (park is never set there). */
static inline void adm_park_here(const struct orbit_admission *a, enum adm_park point)
{
#ifdef ORBIT_TEST_HOOKS
    if (orb_unlikely(a->park != ADM_PARK_NONE) && a->park == point)
        adm_park_stop();
#else
    (void)a;
    (void)point;
#endif
}

/* Death accounting (account.c), for the table ops. */
struct orbit_reclaim;
void adm_account(void *table, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);

/* Release of one live record (release.c), under the mutex. 0, or -ORBIT_EPOISONED. */
int  adm_release_record(struct orbit_admission *a, uint32_t slot);
/* node_dead for the death dispatch: 0, or the lock's error (the node stays REAPING). */
int  adm_node_dead(struct orbit_admission *a, uint16_t node, uint64_t incarnation);

#endif
