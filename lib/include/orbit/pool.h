/* SPDX-License-Identifier: MIT */
/*
 * orbit/pool.h — fleet-wide resource leases, reservations and creation budgets.
 *
 * A resource is something one process owns and others may use through it (an
 * upstream connection, a worker, a slot in anything with a limit). The owner
 * registers it under a key (the caller's 128-bit digest of "what this is
 * usable for") with a capacity. Any process of the fleet reads the
 * candidates for a key, picks one by its own policy and reserves one unit:
 * one compare-and-swap that hands back a lease or says -ORBIT_EBUSY. The
 * owner accepts the lease, does the work, and completing the execution gives
 * the unit back and wakes the key. A caller that gives up frees nothing: only
 * the owner knows when the resource is idle, so a reservation the owner never
 * saw is aged out by the owner's reconcile (a dead caller's unaccepted ones
 * are freed by its death report, orbit_pool_node_dead).
 *
 * A per-key creation budget (claim_create) keeps a fleet that finds a key
 * empty from creating everything at once. Waiters park on the key's change
 * word (futex, io_uring FUTEX_WAIT, or the readiness eventfd via watch).
 *
 * The table lives in its own segment "orbit.<fleet>.<kind>" (kind 247 by
 * default; several independent pools per fleet through specs). A key with
 * nothing live, creating or held is reclaimed, so churning keys never fill
 * the key table.
 *
 * Thread safety: every call is safe on a shared handle from several threads,
 * except orbit_pool_close (last call) and orbit_pool_reset_all (quiescent
 * fleet only). Value structs (lease, execution, permit, plan) are plain data;
 * complete/finish one of them from one thread at a time.
 */
#ifndef ORBIT_POOL_H
#define ORBIT_POOL_H

#include <orbit/fleet.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORBIT_POOL_KIND 247
/*
 * A pool's geometry. Every process opening a kind must pass the same spec
 * (else -ORBIT_EGEOMETRY). key_capacity: distinct keys at once, a power of
 * two, at most 2^20. lane_capacity: resources one node can register at once,
 * a power of two, at most 65536. generation_limit: tenancies a resource slot
 * gives per epoch before it sits out until reset_all (0 = 2^24 - 1, the id
 * field; tests use 4). kind 255 is the fleet's own and is refused.
 */
struct orbit_pool_spec {
    uint8_t  kind;
    uint32_t key_capacity;
    uint32_t lane_capacity;
    uint32_t generation_limit;
    uint64_t resv[4];      /* zero; a later release may give it meaning */
};
#define ORBIT_POOL_SPEC_DEFAULT { .kind = ORBIT_POOL_KIND, .key_capacity = 256, .lane_capacity = 256, \
                                 .generation_limit = 0, .resv = { 0 } }
/* Unaccepted reservations one resource holds at once (16): an owner this far behind refuses more. */
extern const unsigned ORBIT_PENDING_RESERVATIONS;

typedef struct { uint64_t lo, hi; } orbit_key;          /* the caller's 128-bit digest */
enum orbit_state { ORBIT_LIVE, ORBIT_DRAINING };
/* One resource usable for a key, as the fleet sees it: a snapshot, never a reservation. */
struct orbit_candidate { orbit_id id; uint16_t owner; uint64_t owner_incarnation; bool local;
                         enum orbit_state state; uint32_t capacity, reserved, active; uint64_t last_reserve_ms; };
/* Reserved capacity on one resource. fence is strictly increasing per resource slot. */
struct orbit_lease     { orbit_id id; uint64_t fence; uint16_t holder; uint64_t holder_incarnation;
                         uint64_t epoch; };   /* the pool epoch it was taken in: another epoch's lease is -ORBIT_ESTALE */
/* The owner's guard over one accepted lease; orbit_execution_complete gives the unit back. */
struct orbit_execution { struct orbit_pool *pool; struct orbit_lease lease; bool done; };
/* One unit of a key's creation budget; orbit_permit_finish gives it back. */
struct orbit_permit    { struct orbit_pool *pool; uint32_t key_index; bool done; };
/* max_live: live + being-created resources per key, fleet-wide. attempts: lost races before WAIT. */
struct orbit_limits    { uint32_t max_live; uint32_t attempts; };
#define ORBIT_LIMITS_DEFAULT { .max_live = 1, .attempts = 4 }

enum orbit_decision_kind { ORBIT_DECIDE_REUSE, ORBIT_DECIDE_CREATE, ORBIT_DECIDE_WAIT, ORBIT_DECIDE_REJECT };
struct orbit_decision  { enum orbit_decision_kind kind; orbit_id reuse; int reason; };
/*
 * A policy picks from a snapshot: candidates c[0..n), the key's live and
 * creating counts, the caller's limits. It is called again with a fresh
 * snapshot after a lost race, and once more before a WAIT plan. It must not
 * call back into the pool.
 */
struct orbit_policy    { struct orbit_decision (*decide)(void *ctx, orbit_key key,
                           const struct orbit_candidate *c, size_t n, uint32_t live, uint32_t creating,
                           const struct orbit_limits *limits);
                         void *ctx; };
/*
 * local_first: the least used (reserved + active, then least recently
 * reserved) usable local candidate, else the least used usable remote one,
 * else CREATE within max_live, else WAIT. local_only: local candidates only
 * (least used, first found on ties), else CREATE within budget, else WAIT.
 * least_loaded: the usable candidate with the most free units, then the least
 * recently reserved (then local, then table order), else CREATE, else WAIT.
 * "Usable" = LIVE with a free unit. None of them rejects.
 */
extern const struct orbit_policy orbit_policy_local_first, orbit_policy_local_only, orbit_policy_least_loaded;
/* Reasons a REJECT may carry (a caller's policy may use its own values >= 100). */
enum orbit_reject_reason { ORBIT_REASON_NOTHING_TO_USE = 1, ORBIT_REASON_SATURATED = 2, ORBIT_REASON_POLICY = 3 };

enum orbit_plan_kind { ORBIT_PLAN_LOCAL_REUSE, ORBIT_PLAN_REMOTE_REUSE, ORBIT_PLAN_CREATE, ORBIT_PLAN_WAIT, ORBIT_PLAN_REJECT };
struct orbit_plan { enum orbit_plan_kind kind; struct orbit_lease lease; struct orbit_permit permit;
                    uint32_t version; int reason; };

struct orbit_pool;

/*
 * orbit_pool_open - open (creating if needed) the pool table spec names in
 * this fleet; spec NULL is ORBIT_POOL_SPEC_DEFAULT. A member pre-faults its
 * own resource lane here. On an observer fleet it only opens an existing
 * table (-ENOENT when there is none). Errors: -ORBIT_EMALFORMED (bad spec or argument),
 * -ORBIT_EGEOMETRY (the kind exists with another spec or table type),
 * -ORBIT_ECORRUPT, -ENOMEM (no huge pages for the lane), -EACCES.
 *
 * Testing only: with ORBIT_TEST_POOL_PARK set at open to "hold", "release",
 * "claim", "finish", "register", "uncount", "return", "watch", "deliver",
 * "fold" or "acquire_wait", calls through this handle stop the process with
 * SIGSTOP between two steps of that key update (a key pinned but not yet in
 * the holds row, and the reverse; creating counted but no claim row, and the
 * reverse; a resource counted but no member bit, and the reverse; a death
 * report's rows given back but not yet zeroed; a watch's reference taken but
 * no watcher bit; a delivery's watcher bits taken but not their references; a
 * reserve's CAS that folded completed entries, before it releases them; an
 * acquire's WAIT decided but the key's version not yet read), so a test can
 * kill -9 it there or change the key under it.
 */
int  orbit_pool_open(struct orbit_fleet *, const struct orbit_pool_spec *spec /* NULL = default */, struct orbit_pool **out);
/*
 * orbit_pool_open_existing - open an existing pool of that kind, reading its
 * spec from the segment (tools, supervisors, observers). -ENOENT when there
 * is none, -ORBIT_EGEOMETRY when the kind is another table type or version,
 * -ORBIT_ECORRUPT when the stored geometry fails validation.
 */
int  orbit_pool_open_existing(struct orbit_fleet *, uint8_t kind, struct orbit_pool **out);
/* Closes the handle and its readiness descriptor. Keys this node watches stay watched. */
void orbit_pool_close(struct orbit_pool *);

/*
 * orbit_pool_register - make a resource this node owns visible under key
 * with capacity concurrent leases (1 = exclusive). Errors: -ORBIT_EMALFORMED
 * (capacity 0), -ORBIT_ENOTOWNER (observer handle: no node), -ORBIT_EKEYFULL,
 * -ORBIT_EFULL (no slot left in this node's lane this epoch), -ORBIT_ECORRUPT
 * (a new key needs the key-table lock and its word is one no holder writes,
 * or a live holder kept it 2 s; a dead holder's lock is taken over and its
 * half-done insert undone; orbit_pool_reset_all starts the lock over).
 */
int  orbit_pool_register(struct orbit_pool *, orbit_key, uint32_t capacity, orbit_id *out);
/*
 * orbit_pool_unregister / _drain - owner only. unregister ends the resource
 * (outstanding leases become -ORBIT_ESTALE); drain refuses new leases
 * (-ORBIT_EDRAINING) and lets running work finish. Errors: -ORBIT_EMALFORMED
 * (not an id of this pool), -ORBIT_ESTALE (ended), -ORBIT_ENOTOWNER.
 */
int  orbit_pool_unregister(struct orbit_pool *, orbit_id);
int  orbit_pool_drain(struct orbit_pool *, orbit_id);
/*
 * orbit_pool_reconcile - the owner's truth: the active count becomes active,
 * and every reservation older than grace_ms that nobody brought to the owner
 * is aged out (its unit returns; a late accept of it is -ORBIT_ENOTRESERVED).
 * Accepted leases that keep their entries (capacity <= 16) count in active:
 * completed ones are folded, running ones kept while active covers them, else
 * all reclaimed (their completes then give back counted units).
 * Errors as for unregister, and -ORBIT_EMALFORMED for active above the
 * resource's capacity.
 */
int  orbit_pool_reconcile(struct orbit_pool *, orbit_id, uint32_t active, uint64_t grace_ms);
/* Every resource registered under key, in table order: fills up to max, returns how many exist. */
ssize_t orbit_pool_candidates(struct orbit_pool *, orbit_key, struct orbit_candidate *out, size_t max); /* returns how many exist */
/*
 * orbit_pool_reserve - one unit of the resource's capacity. Checks, in order:
 * an id of this pool (-ORBIT_EMALFORMED), the resource is live in the id's
 * generation (-ORBIT_ESTALE), not draining (-ORBIT_EDRAINING), a free unit and
 * a free pending-reservation entry, taken by one CAS (-ORBIT_EBUSY), still the
 * same generation afterwards (-ORBIT_ESTALE). Any node may reserve.
 */
int  orbit_pool_reserve(struct orbit_pool *, orbit_id, struct orbit_lease *out);
/*
 * orbit_pool_accept - the owner takes a lease a caller brought it: the unit
 * moves from reserved to active exactly once per fence. Errors in order:
 * -ORBIT_EMALFORMED, -ORBIT_ESTALE (other epoch, ended generation),
 * -ORBIT_ENOTOWNER, -ORBIT_EDRAINING, -ORBIT_ENOTRESERVED (accepted already,
 * aged out, or never reserved). On failure *out is a finished execution.
 */
int  orbit_pool_accept(struct orbit_pool *, const struct orbit_lease *, struct orbit_execution *out);
/*
 * Gives the execution's unit back and wakes the key; touches nothing of a
 * later tenant. At capacity <= 16 (with a 16-byte CAS) an accepted lease keeps
 * its pending entry, and completing is one store that marks it done: the
 * unit counts as free at once, and the next reserve, a waiter or the owner's
 * reconcile folds it.
 */
void orbit_execution_complete(struct orbit_execution *);        /* idempotent */
/* The resource is live in the lease's generation and epoch. */
bool orbit_pool_is_current(struct orbit_pool *, const struct orbit_lease *);
/*
 * orbit_pool_claim_create - one unit of the key's creation budget: live plus
 * in-progress stay under max_live fleet-wide. Errors: -ORBIT_EBUDGET,
 * -ORBIT_EKEYFULL, -ORBIT_ENOTOWNER (observer). On failure *out is a finished
 * permit, so orbit_permit_finish on it is harmless.
 */
int  orbit_pool_claim_create(struct orbit_pool *, orbit_key, uint32_t max_live, struct orbit_permit *out);
void orbit_permit_finish(struct orbit_permit *);                /* idempotent; also the "drop" */
/* The key's live and in-progress counts (0, 0 for a key the table does not hold). */
void orbit_pool_budget(struct orbit_pool *, orbit_key, uint32_t *live, uint32_t *creating);
/* The key's change count, what wait_capacity waits past. -ORBIT_EKEYFULL when it cannot be held. */
int  orbit_pool_version(struct orbit_pool *, orbit_key, uint32_t *out);
/*
 * orbit_pool_wait_capacity - park until the key's change count differs from
 * since (a release, an unregister, a closed resource, a finished claim).
 * Coalescing; a change may be spurious, so re-check. *now receives the count
 * (also on timeout). timeout_ms: -1 forever, 0 check once. -ORBIT_ETIMEDOUT.
 * Before it sleeps it folds the key's completed executions: finding one, it
 * returns 0 with *now possibly equal to since (room came back).
 */
int  orbit_pool_wait_capacity(struct orbit_pool *, orbit_key, uint32_t since, int timeout_ms, uint32_t *now);
/* Its io_uring form, by the prep contract of <orbit/uring.h>. */
struct io_uring_sqe;
int  orbit_pool_prep_wait_capacity(struct orbit_pool *, orbit_key, uint32_t since, struct io_uring_sqe *);
/*
 * orbit_pool_acquire - one decision for key: snapshot, ask policy (NULL =
 * local_first; limits NULL = ORBIT_LIMITS_DEFAULT), then reserve or claim what
 * it chose. A lost race (-ORBIT_EBUSY, -ORBIT_ESTALE, -ORBIT_EDRAINING,
 * -ORBIT_EBUDGET) is retried with a fresh snapshot up to limits->attempts
 * times, then the plan is WAIT with the key's version. That version is read
 * before a last look, so a WAIT plan's version never already includes room.
 * A LOCAL/REMOTE_REUSE plan holds a lease, a CREATE plan holds a permit the
 * caller must finish.
 */
int  orbit_pool_acquire(struct orbit_pool *, orbit_key, const struct orbit_limits *, const struct orbit_policy *, struct orbit_plan *out);
/*
 * orbit_pool_owners - every (node, incarnation) that owns a resource here,
 * sorted: who is in the table, not who is alive. Fills up to max, returns how
 * many exist.
 */
ssize_t orbit_pool_owners(struct orbit_pool *, struct orbit_owner *out, size_t max);
/*
 * orbit_pool_node_dead - a confirmed death: every resource that incarnation of
 * node owned is closed, and the creation claims and key holds the node had
 * are returned (claims are counted per node, so whichever incarnation is
 * named). Every unaccepted reservation that incarnation holds, on any
 * resource of the pool, is freed (a late accept of it is
 * -ORBIT_ENOTRESERVED); leases an owner accepted stay the owner's, and a
 * reservation its reserver was killed before publishing is left to the
 * owner's reconcile. Every key's waiters are woken once (see
 * orbit_fleet_node_dead). A key
 * update the node (or an earlier report) was killed in the middle of is
 * finished or undone first, so each count moves exactly once; a key lock
 * a live member keeps past the bound leaves that part to the next report
 * (orbit_fleet_node_dead then fails with -ORBIT_ECORRUPT).
 * Works on observer handles.
 */
void orbit_pool_node_dead(struct orbit_pool *, uint16_t node, uint64_t incarnation);
/* Clears the table and starts a new epoch: quiescent owner boot only. */
void orbit_pool_reset_all(struct orbit_pool *);
uint64_t orbit_pool_epoch(struct orbit_pool *);
/*
 * orbit_pool_watch - ring this node's doorbell (and so the readiness fd) on
 * the key's next change. One-shot: re-arm before each wait, BEFORE the
 * attempt it guards (watch, try, poll), or use orbit_pool_watch_since.
 * -ORBIT_ENOTOWNER on an observer handle, -ORBIT_EKEYFULL.
 */
int  orbit_pool_watch(struct orbit_pool *, orbit_key);          /* ring this node's doorbell on changes */
/*
 * orbit_pool_readiness - an eventfd that becomes readable when this node's
 * doorbell moves (a watched key changed). Edge-triggered and coalescing:
 * orbit_readiness_drain(fd), then retry. One per handle (-ORBIT_EBUSY on a
 * second call); orbit_pool_close closes it.
 */
int  orbit_pool_readiness(struct orbit_pool *);                 /* eventfd; -ORBIT_EBUSY on a second call */

/* ---- more calls: watches, identity, sizes, statistics, inspection ----- */

/* watch, and ring the doorbell at once if the key already moved past since. */
int  orbit_pool_watch_since(struct orbit_pool *, orbit_key, uint32_t since);
uint8_t  orbit_pool_kind(const struct orbit_pool *);
uint16_t orbit_pool_node(const struct orbit_pool *);          /* ORBIT_NODE_NONE for observers */
uint64_t orbit_pool_incarnation(const struct orbit_pool *);
void orbit_pool_spec_of(const struct orbit_pool *, struct orbit_pool_spec *out);  /* effective limit */
/* Bytes a pool segment with this spec takes in a fleet of fleet_capacity nodes (0: bad spec). */
size_t orbit_pool_segment_size(const struct orbit_pool_spec *, uint16_t fleet_capacity);

/* This handle's counters since it was opened. */
struct orbit_pool_stats {
    uint64_t parks, wakes, doorbells;       /* wait protocol */
    uint64_t key_inserts, key_reclaims, key_sweeps;
    uint64_t resv[6];      /* zero; a later release may give it meaning */
};
void orbit_pool_stats(struct orbit_pool *, struct orbit_pool_stats *out);

/* Key table occupancy (a snapshot). */
struct orbit_pool_key_table { uint32_t capacity, live, tombstones, empty; uint64_t resv[2]; /* zero */ };
void orbit_pool_key_table(struct orbit_pool *, struct orbit_pool_key_table *out);
/* One live key: counts, holders (refs) and change count. */
struct orbit_pool_key_info {
    orbit_key key;
    uint32_t index, live, creating, refs, version, watchers;
    uint64_t resv[2];      /* zero; a later release may give it meaning */
};
/* Live keys in table order: fills up to max, returns how many exist. */
ssize_t orbit_pool_keys(struct orbit_pool *, struct orbit_pool_key_info *out, size_t max);
/* "key:" + 32 hex digits (hi then lo) + NUL: needs 37 bytes; returns the length or -ORBIT_ETOOLARGE. */
#define ORBIT_KEY_TEXT_MAX 40
int  orbit_key_format(orbit_key, char *buf, size_t len);
/*
 * orbit_key_from_bytes - the key of len bytes at data: their XXH3-128 digest
 * (xxHash 0.8's XXH3_128bits, seed 0; lo is its low 64 bits, hi its high 64),
 * the same in every process, release and host, so programs written in any
 * language can agree on a key. Not a cryptographic digest: where a client
 * chooses the bytes and colliding keys matter, hash them with a keyed digest
 * of your own. data may be NULL only when len is 0 (the key of no bytes).
 * orbit_key_from_string - the key of a C string's bytes, its NUL excluded
 * (NULL: the key of no bytes). Neither can fail.
 */
orbit_key orbit_key_from_bytes(const void *data, size_t len);
orbit_key orbit_key_from_string(const char *s);

/* ---- holders and waiters (for tools: orbitctl show) --------------------- */

enum orbit_lease_state { ORBIT_LEASE_PENDING = 1, ORBIT_LEASE_ACTIVE = 2 };
/* One unit a resource has given out and not had back: a reservation or an accepted lease. */
struct orbit_lease_info {
    uint64_t fence;              /* the lease's fence; 0 while its reserver has not published it */
    enum orbit_lease_state state;
    uint16_t node;               /* the reserver's node; ORBIT_NODE_NONE when not known */
    uint64_t incarnation;        /* the reserver's incarnation; 0 when not known */
    uint64_t reserved_ms;        /* CLOCK_REALTIME ms (coarse) of the reserve; 0 when not known */
    uint64_t resv[4];            /* zero */
};
/*
 * orbit_pool_leases - the reservations and accepted leases one resource has
 * out, in entry order (a racy snapshot). A completed lease is a free unit
 * and is not listed. An accepted lease on a resource of capacity above
 * ORBIT_PENDING_RESERVATIONS keeps no entry: it counts in
 * orbit_candidate.active only. Fills up to max, returns how many there are;
 * -ORBIT_EMALFORMED (not an id of this pool, out NULL with max),
 * -ORBIT_ESTALE (the resource ended), -ORBIT_ECORRUPT (an entry names a node
 * outside the fleet).
 */
ssize_t orbit_pool_leases(struct orbit_pool *, orbit_id, struct orbit_lease_info *out, size_t max);

/* One node with a stake in a key. */
struct orbit_pool_key_node {
    uint16_t node;
    uint32_t waits;              /* references beyond its permits: waits in wait_capacity, ops */
    uint32_t creating;           /* creation permits it holds */
    bool     watching;           /* its doorbell rings on the key's next change */
    uint64_t resv[2];            /* zero */
};
/*
 * orbit_pool_key_nodes - every node that waits on, creates for or watches
 * the key, in node order (a racy snapshot). Fills up to max, returns how
 * many there are (0 for a key the table does not hold); -ORBIT_EMALFORMED
 * (out NULL with max), -ORBIT_ECORRUPT (a row count past every bound).
 */
ssize_t orbit_pool_key_nodes(struct orbit_pool *, orbit_key, struct orbit_pool_key_node *out, size_t max);

#ifdef __cplusplus
}
#endif
#endif
