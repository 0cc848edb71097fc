/* SPDX-License-Identifier: MIT */
/*
 * Exchange and payload arena: shared layout and process-local handles.
 *
 * Arena segment (offsets from the segment base; the 4 KiB orb_seg_header first):
 *   lanes    fleet_capacity x struct arena_lane       credit word, doorbell interest,
 *                                                     the owner's generation counter
 *   slots    fleet_capacity x slots_per_lane x struct arena_slot   (64 B each)
 *   payload  2 MiB aligned; lane L slot s at payload + (L * slots_per_lane + s) * slot_bytes
 *
 * A slot's tag packs generation:48 | reader node:12 | state:4, so one CAS checks the
 * allocation's generation and moves its state. Only the first slot of a run moves
 * RESERVED -> LIVE -> READING; the others are TAIL of the same generation.
 */
#ifndef ORB_EXCH_LAYOUT_H
#define ORB_EXCH_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/exchange.h>
#include "core/fleet_internal.h"
#include "core/guard.h"
#include "core/segment.h"
#include "core/table_base.h"
#include "core/wait.h"

#define ORB_TABLE_ARENA       5u   /* the segment header's table_type */
#define ARENA_LAYOUT_VERSION  1u
#define ARENA_PAYLOAD_ALIGN   (2u << 20)
#define ARENA_GEN_MAX         ((1ull << 48) - 1)

/* A head's reader field names READING's reader, and RECLAIMING's actor: the node whose
 * work freeing the run is (the caller's, or the dead node a report acts for). A report
 * for that node finishes a RECLAIMING its actor or reporter was killed in. */
enum { ASLOT_FREE = 0, ASLOT_RESERVED = 1, ASLOT_LIVE = 2, ASLOT_READING = 3, ASLOT_RECLAIMING = 4,
       ASLOT_TAIL = 5 };

#define ATAG(gen, state, reader) (((uint64_t)(gen) << 16) | ((uint64_t)((reader) & 0xfffu) << 4) | \
                                  (uint64_t)(state))
#define ATAG_STATE(t)  ((unsigned)((t) & 0xfu))
#define ATAG_READER(t) ((uint16_t)(((t) >> 4) & 0xfffu))
#define ATAG_GEN(t)    ((uint64_t)(t) >> 16)

/* One slot's bookkeeping; head-only fields are meaningful on a run's first slot. */
struct arena_slot {
    _Atomic uint64_t tag;
    _Atomic uint64_t producer_inc;    /* the life that allocated it; 0 while free */
    _Atomic uint64_t reader_inc;      /* the life reading it: stamped right after the consume CAS */
    _Atomic uint64_t exchange;        /* head: control stream id it was committed to; 0 plain */
    _Atomic uint32_t len;             /* head: committed bytes */
    _Atomic uint32_t count;           /* head: slots in the run */
    _Atomic uint32_t flow;            /* head: 1 A->B, 2 B->A, 0 plain */
    uint8_t pad[20];
};
_Static_assert(sizeof(struct arena_slot) == 64, "a slot's bookkeeping is one cache line");

/* Per lane: the credit line every releaser touches, then the owner's own line. */
struct arena_lane {
    struct orb_waitword credit;       /* bumped when slots of this lane are freed */
    _Atomic uint32_t watch;           /* 1: ring the owner's doorbell at the next free */
    uint32_t pad0;
    uint8_t pad1[48];
    _Alignas(64) _Atomic uint64_t next_generation;   /* the owner's allocation counter */
    uint8_t pad2[56];
};
_Static_assert(sizeof(struct arena_lane) == 128, "a lane header is two cache lines");

/* Compared byte for byte with an existing segment's header. */
struct arena_geometry {
    uint32_t layout_version;
    uint32_t slot_bytes;
    uint32_t slots_per_lane;
    uint32_t slot_meta_bytes;
    uint32_t lane_header_bytes;
    uint32_t reserved;
};

struct arena_layout {
    size_t lanes_off, slots_off, payload_off, total;
    size_t lane_bytes, total_slots;
};

struct orbit_arena {
    ORB_TABLE_BASE;                   /* fleet, seg, kind, node (NONE: observer), lock, stats, ctr, ... */
    struct arena_layout lay;
    uint32_t fleet_capacity, slot_bytes, slots_per_lane;
    struct arena_lane *lanes;
    struct arena_slot *slots;
    unsigned char *payload;
    _Atomic uint64_t *epoch;
    _Atomic uint64_t full_memo;       /* slots << 32 | credit changes of the last failed scan; 0 none */
    _Atomic uint32_t payload_ready;   /* our lane's slots [0, this) pre-faulted through this handle */
    struct orb_spin spin;
};
/* The handle's own counts (its tally): orbit_arena_stats'. */
enum { ARENA_TALLY_RESERVED, ARENA_TALLY_COMMITTED, ARENA_TALLY_CANCELLED, ARENA_TALLY_CONSUMED,
       ARENA_TALLY_RELEASED, ARENA_TALLY_RECLAIMED, ARENA_TALLY_FULL, ARENA_TALLY_BYTES_COMMITTED,
       ARENA_TALLY_BYTES_CONSUMED, ARENA_TALLY_END };
_Static_assert(ARENA_TALLY_END <= ORB_TALLY_MAX, "the arena's counts fit a tally");

/* ---- account.c: the arena's death accounting (table ops) ---- */
struct orbit_reclaim;
void arena_account(void *table, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);

/* ---- arena.c ---- */
static inline struct arena_slot *arena_slot_at(const struct orbit_arena *a, uint32_t node, uint32_t slot)
{
    return &a->slots[(size_t)node * a->slots_per_lane + slot];
}
static inline unsigned char *arena_data_at(const struct orbit_arena *a, uint32_t node, uint32_t slot)
{
    return a->payload + ((size_t)node * a->slots_per_lane + slot) * a->slot_bytes;
}
static inline bool arena_is_member(const struct orbit_arena *a)
{
    return a->node != ORBIT_NODE_NONE;
}
/* The arena's own counters (core/counters.h), after the ones every table has. */
enum {
    ARENA_CTR_RESERVED = ORB_CTR_TABLE_FIRST,   /* chunks reserved */
    ARENA_CTR_COMMITTED,
    ARENA_CTR_CONSUMED,
    ARENA_CTR_RELEASED,
    ARENA_CTR_RECLAIMED,
    ARENA_CTR_FULL,                             /* reserves refused: no run free in the lane */
    ARENA_CTR_CREDIT_WAITS,                     /* reserves that waited for credit */
    ARENA_CTR_BYTES_COMMITTED,
    ARENA_CTR_BYTES_CONSUMED,
    ARENA_CTR_END,
    ARENA_CTR_NONE = ARENA_CTR_END              /* counted in the handle only */
};
_Static_assert(ARENA_CTR_END <= ORB_CTR_VALUES, "the arena's counters fit a slot");

/* The handle's own counter c and, when it has one, the shared counter ctr. */
static inline void arena_count(struct orbit_arena *a, unsigned tally, unsigned ctr, uint64_t n)
{
    orb_tally_add(&a->tally, tally, n);
    if (ctr < ARENA_CTR_END)
        orb_count(&a->ctr, ctr, n);
}
/*
 * Pre-fault our lane's payload up to slot end (exclusive) before a chunk there
 * is handed out: first fit from the lane's start keeps that the lane's
 * high-water mark, so a lane costs what it has held at once. Per handle.
 * 0, or -ENOMEM naming the bytes and the mount.
 */
/* How the base opens an arena (arena.c); the ops name it (arena_death.c). */
extern const struct orb_table_kind arena_kind;
int  arena_payload_ready(struct orbit_arena *a, uint32_t end);
/* sweep.c: after a death, LIVE chunks whose receiver is gone or whose control stream ended. */
void arena_sweep_undeliverable(struct orbit_arena *a, uint16_t node, uint64_t inc);

/* ---- chunk.c ---- */
/* Free a run whose first slot this caller holds exclusively (RECLAIMING or RESERVED),
 * then signal the owner lane's credit. */
void arena_free_run(struct orbit_arena *a, uint32_t node, uint32_t first, uint64_t gen, uint32_t count);
/* Exchange-aware forms behind the public calls. */
/* Commit in three steps, so a descriptor that cannot be delivered leaves the reservation
 * as it was: publish (head LIVE, fields recorded), then settle (delivered: free the tail
 * past len, the reservation is done) or unpublish (not delivered: LIVE -> RESERVED). */
int  arena_publish(struct orbit_reservation *r, size_t len, orbit_id exchange, uint8_t flow,
                   struct orbit_chunk_desc *desc);
void arena_settle(struct orbit_reservation *r, const struct orbit_chunk_desc *d);
int  arena_unpublish(struct orbit_reservation *r);
bool arena_desc_live(const struct orbit_arena *a, const struct orbit_chunk_desc *d);
int  arena_take(struct orbit_arena *a, const struct orbit_chunk_desc *d, orbit_id exchange, uint8_t flow,
                struct orbit_chunk *out);
int  arena_check_desc(const struct orbit_arena *a, const struct orbit_chunk_desc *d);
/* Producer side: take back committed chunks of this exchange (and flow) nobody consumed. */
void arena_withdraw_exchange(struct orbit_arena *a, orbit_id exchange, uint8_t flow);
int  arena_pred_credit(void *ctx);
struct arena_want { struct orbit_arena *a; uint32_t count; struct orbit_reservation *out; bool take, waited; };

/* ---- exchange control frames (frame.c) ---- */
#define XFRAME_BYTES    64u
#define XFRAME_MAGIC    0x4358454fu   /* "OEXC" little-endian */
#define XFRAME_VERSION  1u
#define XFRAME_HAS_PAYLOAD 1u

struct xframe {
    uint8_t  event;                   /* ORBIT_EXCHANGE_* */
    uint8_t  flow;                    /* ORBIT_FLOW_* */
    uint8_t  flags;                   /* XFRAME_HAS_PAYLOAD */
    orbit_id exchange;
    uint64_t chunk_id;
    struct orbit_chunk_desc desc;     /* with HAS_PAYLOAD */
    uint32_t reset_code;
};
void xframe_encode(const struct xframe *f, unsigned char out[XFRAME_BYTES]);
/* -ORBIT_ECORRUPT for anything but a well-formed frame. */
int  xframe_decode(const unsigned char in[XFRAME_BYTES], struct xframe *f);

/* ---- exchanges ---- */
/* A table made of tables: no segment of its own; the base gives it its fleet, fork
 * generation, readiness descriptor and tally (orbit_exchanges_stats' counts). */
struct orbit_exchanges {
    ORB_TABLE_BASE;
    struct orbit_streams *control;
    struct orbit_arena *arena[2];     /* [0] A->B, [1] B->A (the same handle when shared) */
};
enum { EXCH_TALLY_EVENTS_SENT, EXCH_TALLY_EVENTS_RECEIVED, EXCH_TALLY_CHUNKS_SENT, EXCH_TALLY_CHUNKS_RECEIVED,
       EXCH_TALLY_BYTES_SENT, EXCH_TALLY_BYTES_RECEIVED, EXCH_TALLY_END };

struct orbit_exchange {
    struct orbit_exchanges *ex;
    struct orbit_endpoint *ctl;
    uint32_t fork_generation;         /* its table's (core/guard.h) */
    orbit_id id;
    enum orbit_side side;
    struct orbit_arena *out, *in;     /* the arenas this side sends and receives through */
    uint8_t out_flow, in_flow;
    enum orbit_exchange_state send_state, recv_state;
    uint64_t send_next, recv_next;    /* next chunk id per flow */
    int recv_error;                   /* sticky, once the receive flow failed */
    bool ctl_finished;                /* FIN sent on the control stream */
    uint64_t chunks_out;              /* chunks this side committed */
    struct orbit_chunk_desc last_desc;/* the latest of them */
};

/* Every public call on an arena, exchange table or exchange, or on a reservation or chunk of
 * an arena, begins here (core/guard.h). */
static inline int arena_enter(const struct orbit_arena *a, const char *call)
{
    return orb_enter(a ? &a->fork_generation : (const uint32_t *)0, call, "arena handle");
}
static inline int reservation_enter(const struct orbit_reservation *r, const char *call)
{
    return orb_enter(r && r->arena ? &r->arena->fork_generation : (const uint32_t *)0, call,
                     "reservation (or its arena)");
}
static inline int chunk_enter(const struct orbit_chunk *c, const char *call)
{
    return orb_enter(c && c->arena ? &c->arena->fork_generation : (const uint32_t *)0, call,
                     "chunk (or its arena)");
}
static inline int exchanges_enter(const struct orbit_exchanges *ex, const char *call)
{
    return orb_enter(ex ? &ex->fork_generation : (const uint32_t *)0, call, "exchanges handle");
}
static inline int exchange_enter(const struct orbit_exchange *x, const char *call)
{
    return orb_enter(x ? &x->fork_generation : (const uint32_t *)0, call, "exchange");
}

#endif
