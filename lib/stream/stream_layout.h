/* SPDX-License-Identifier: MIT */
/*
 * Streams: the shared layout of a stream table and the process-local handles.
 *
 * Segment (offsets from the segment base; the 4 KiB orb_seg_header first):
 *   offers   fleet_capacity x offer_bytes   per target node: offer waitword +
 *                                           bitmap of lanes holding an offer
 *   slots    fleet_capacity x lane_capacity x struct stream_slot
 *   rings    2 MiB aligned; slot i direction d at rings + (2i + d) * buffer_bytes
 *
 * Slot i lives in lane i / lane_capacity (the creator's node). Direction 0
 * carries A -> B, direction 1 B -> A: a side writes the direction of its own
 * index and reads the other.
 */
#ifndef ORB_STREAM_LAYOUT_H
#define ORB_STREAM_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/stream.h>
#include "core/fastpath.h"
#include "core/fleet_internal.h"
#include "core/guard.h"
#include "core/segment.h"
#include "core/table_base.h"
#include "core/wait.h"

#define ORB_TABLE_STREAMS     3u   /* the segment header's table_type */
#define STREAM_LAYOUT_VERSION 3u
#define STREAM_RINGS_ALIGN    (2u << 20)
#define STREAM_NODE_NONE      0xffffu

/* tenancy = generation << 2 | state: one load tells whether a handle is current. */
enum { SLOT_EMPTY = 0, SLOT_LIVE = 1, SLOT_EXHAUSTED = 2, SLOT_INSTALLING = 3 };
#define TENANCY(gen, state)  (((uint32_t)(gen) << 2) | (uint32_t)(state))
#define TENANCY_GEN(t)       ((uint32_t)(t) >> 2)
#define TENANCY_STATE(t)     ((uint32_t)(t) & 3u)

enum { SIDE_FREE = 0, SIDE_CLAIMED = 1, SIDE_RELEASED = 2, SIDE_DEAD = 3 };

/* Direction flags (the public ORBIT_STREAM_* values are the same bits). */
#define DIR_FIN         1u
#define DIR_RESET       2u
#define DIR_READER_GONE 4u
#define DIR_CLOSE_WATCH 8u

/* linger_until of a slot whose stream never lingers (an exchange's control stream). */
#define STREAM_LINGER_OFF UINT64_MAX

/* The offer word's low half: to_node + 1, and the bit a take sets (the target stays named). */
#define STREAM_OFFER_NODE_MASK 0xffffu
#define STREAM_OFFER_TAKEN     0x80000000u

/* Doorbell interest: which end of a direction wants its node's doorbell rung. */
#define WATCH_READER 1u
#define WATCH_WRITER 2u

/* One direction: two cache lines so the reader's tail never shares the writer's. */
struct stream_dir {
    /* Written by the writer (and by waiters arming `parked`); read by the reader. */
    _Atomic uint64_t head;            /* bytes ever published */
    struct orb_waitword wait;         /* both ends park here; never both at once */
    _Atomic uint32_t flags;           /* DIR_* */
    _Atomic uint32_t writer_need;     /* free bytes a waiting writer wants; 0 = any */
    _Atomic uint32_t watch;           /* WATCH_*: ring that end's doorbell on a change */
    _Atomic uint32_t writer_cpu;      /* CPU a writer last waited from (a hint) */
    /* A copy of the last small write beside head (the ring holds the bytes too):
     * a reader whose [tail, head) it covers copies from this line, the one it
     * already fetched for head, and never moves the ring's line between CPUs. */
    _Atomic uint64_t copy_end;        /* head after those bytes; 0 while they change */
    _Atomic uint64_t copy_len;        /* 1..STREAM_LINE_COPY */
    _Atomic uint64_t copy_word[2];
    /* Written by the reader only. */
    _Alignas(64) _Atomic uint64_t tail; /* bytes ever consumed */
    _Atomic uint32_t reader_need;     /* queued bytes a waiting reader wants; 0 = any */
    _Atomic uint32_t reader_cpu;      /* CPU a reader last waited from (a hint) */
    uint8_t pad2[48];
};
_Static_assert(sizeof(struct stream_dir) == 128, "a direction is two cache lines");
#define STREAM_LINE_COPY 16u            /* bytes of copy_word */
/* Up to this many bytes are copied inline: a message of a line or less (an exchange's event,
 * a 64-byte ping-pong) costs no call into memcpy and takes the fast paths. */
#define STREAM_SMALL_COPY 64u

struct stream_slot {
    _Atomic uint32_t tenancy;         /* TENANCY(generation, SLOT_*) */
    _Atomic uint32_t claimed[2];      /* SIDE_* per side */
    _Atomic uint32_t node[2];         /* holder's node, STREAM_NODE_NONE when none */
    uint32_t pad0;
    _Atomic uint64_t incarnation[2];  /* holder's incarnation */
    _Atomic uint64_t offer;           /* generation << 32 | (to_node + 1), | STREAM_OFFER_TAKEN once
                                       * taken; 0: none */
    _Atomic uint64_t linger_until;    /* CLOCK_REALTIME ms: a lingering stream's end (linger.c) */
    uint8_t pad1[8];
    struct stream_dir dir[2];
};
_Static_assert(sizeof(struct stream_slot) == 320, "slot is five cache lines");

/* Per target node: parked offer-takers and the lanes holding offers for it. */
struct stream_offers {
    struct orb_waitword wait;         /* parked: io_uring waiters (an offer wakes them all) */
    _Atomic uint32_t sleepers;        /* futex waiters in wait_offer: an offer wakes one. A
                                       * sleeper killed while counted leaves it high: offers to
                                       * the node then pay a futex call that wakes nobody */
    uint32_t pad;
    _Atomic uint64_t lanes[];         /* bit L set: lane L may hold an offer */
};

/* Compared byte for byte with an existing segment's header. */
struct stream_geometry {
    uint32_t layout_version;
    uint32_t lane_capacity;
    uint32_t buffer_bytes;
    uint32_t generation_limit;        /* effective (0 in a spec means the full field) */
    uint32_t slot_bytes;
    uint32_t offer_bytes;
};

struct stream_layout {
    size_t offers_off, slots_off, rings_off, total;
    size_t total_slots, lane_ring_bytes;
    uint32_t offer_bytes, lane_words;
};


/* Test hook points (ORBIT_TEST_STREAM_PARK): the process stops itself there. */
enum stream_park { STREAM_PARK_NONE, STREAM_PARK_INSTALLING, STREAM_PARK_OPENING };
void stream_park_here(const struct orbit_streams *s, enum stream_park point);

/* The streams' own counters (core/counters.h), after the ones every table has. */
enum {
    STREAM_CTR_BYTES_WRITTEN = ORB_CTR_TABLE_FIRST,
    STREAM_CTR_BYTES_READ,
    STREAM_CTR_FRAMES_WRITTEN,        /* exact writes: a frame whole or nothing */
    STREAM_CTR_FRAMES_READ,
    STREAM_CTR_RESETS,
    STREAM_CTR_CREATED,
    STREAM_CTR_OPENED,                /* tickets opened: the B sides taken */
    STREAM_CTR_END
};

struct orbit_streams {
    ORB_TABLE_BASE;                   /* fleet, seg, kind, node (NONE: observer), lock, stats, ctr, ... */
    struct stream_layout lay;
    uint32_t fleet_capacity, lane_capacity, buffer_bytes, generation_limit;
    unsigned char *offers;
    struct stream_slot *slots;
    unsigned char *rings;
    _Atomic uint64_t *epoch;
    enum stream_park park;            /* testing: ORBIT_TEST_STREAM_PARK at open */
    bool linger_off;                  /* its streams never linger (an exchange's control table) */
    struct orb_spin offer_spin;
    _Atomic uint64_t rings_ready[(ORBIT_ID_SLOT_MAX + 1u) / 64];   /* our lane's slots whose rings this
                                                                    * handle pre-faulted */
};
/* The handle's own counts (its tally): orbit_streams_stats' bytes. */
enum { STREAM_TALLY_WRITTEN, STREAM_TALLY_READ };

struct orbit_endpoint {
    struct orbit_streams *s;
    struct stream_slot *slot;
    uint32_t fork_generation;         /* its table's (core/guard.h) */
    struct stream_dir *rd, *wr;       /* the direction read, the one written */
    unsigned char *rd_ring, *wr_ring;
    orbit_id id;
    uint64_t epoch;                   /* table epoch at create/open */
    uint32_t live;                    /* TENANCY(generation, SLOT_LIVE) */
    uint32_t index;
    enum orbit_side side;
    bool write_shut;                  /* this end finished or reset its direction */
    uint64_t tail_seen;               /* writer's last look at wr->tail: room it surely has */
    struct orb_spin read_spin, write_spin;
    _Atomic uint32_t waits;           /* waits since the peer's CPU was last looked at */
    _Atomic bool peer_here;           /* that look: the peer waits from our CPU (do not spin) */
};

/* Every public call on a streams table or an endpoint begins here (core/guard.h). */
static inline int streams_enter(const struct orbit_streams *s, const char *call)
{
    return orb_enter(s ? &s->fork_generation : (const uint32_t *)0, call, "streams handle");
}
static inline int endpoint_enter(const struct orbit_endpoint *ep, const char *call)
{
    /* Its table's word, which the SIGBUS guard poisons when the streams file shrinks. */
    return orb_enter(ep && ep->s ? &ep->s->fork_generation : (const uint32_t *)0, call, "endpoint");
}

/* ---- account.c: the streams' death accounting (table ops) ---- */
struct orbit_reclaim;
void stream_account(void *table, uint16_t node, uint64_t incarnation, struct orbit_reclaim *out);

/* ---- table.c ---- */
static inline uint64_t stream_epoch(const struct orbit_streams *s)
{
    return atomic_load_explicit(s->epoch, memory_order_acquire);
}
static inline struct stream_offers *stream_offers_of(const struct orbit_streams *s, uint32_t node)
{
    return (struct stream_offers *)(void *)(s->offers + (size_t)node * s->lay.offer_bytes);
}
static inline unsigned char *stream_ring(const struct orbit_streams *s, size_t index, unsigned dir)
{
    return s->rings + (index * 2 + dir) * (size_t)s->buffer_bytes;
}
static inline bool stream_is_member(const struct orbit_streams *s)
{
    return s->node != ORBIT_NODE_NONE;
}

/*
 * Pre-fault the two rings of the slot at index (of our lane) before a create
 * publishes anything there, once per slot and handle: a member's lane costs
 * the rings it uses, and no later touch of them, by either side, can SIGBUS.
 * 0, or -ENOMEM naming the bytes and the mount.
 */
/* How the base opens a streams table (table.c); the ops name it (death.c). */
extern const struct orb_table_kind streams_kind;
int  stream_rings_ready(struct orbit_streams *s, size_t index);

/* ---- slots.c ---- */
int  stream_locate(const struct orbit_streams *s, orbit_id id, size_t *index);
/* Inline: every read and write of an endpoint begins here. */
static inline int stream_ep_check(const struct orbit_endpoint *ep)
{
    if (stream_epoch(ep->s) != ep->epoch ||
        atomic_load_explicit(&ep->slot->tenancy, memory_order_acquire) != ep->live)
        return -ORBIT_ESTALE;
    return 0;
}
/* The sentence of a refusal any endpoint call may meet (ended stream, garbled ring), unless
 * the call said more already; returns rc (slots.c). */
int  stream_said(int rc) ORB_COLD;
void stream_dir_clear(struct stream_dir *d);
/* A change an end may be waiting for: wake parked waiters, ring watchers in mask. */
void stream_dir_wake(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t mask);
/* Whether a waiter is parked on the direction or watching it for mask (seq_cst loads).
 * Inline: every publication asks it. */
static inline bool stream_dir_waiting(struct stream_dir *d, uint32_t mask)
{
    return atomic_load(&d->wait.parked) || (atomic_load(&d->watch) & mask);
}
/* Set flag on a direction; the first setter wakes both ends. */
void stream_raise(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t flag);
/* Empty the slot when the side other than `gone` no longer holds it. */
void stream_vacate_if_unheld(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                             unsigned other);
/* End one claimed side as a death does: unfinished writes reset, reads gone. */
void stream_end_side(struct orbit_streams *s, struct stream_slot *slot, uint32_t live, unsigned side);

/* ---- linger.c: a finished writer's bytes wait for an unopened side B ---- */
/* ORBIT_STREAM_LINGER_MS (default 30000, 0: no linger), read once. */
uint32_t stream_linger_ms(void);
/* Side A is letting go: the linger's deadline, stored before its let-go CAS. */
void stream_linger_mark(struct stream_slot *slot);
/* A let go after FIN (no RESET) and B was never opened. */
bool stream_lingers(struct stream_slot *slot);
/* Its linger is over: past the deadline, or the node it was offered to holds no LIVE life
 * (dead: a report of that life, whatever the record says yet). */
bool stream_linger_over(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                        const struct orbit_owner *dead);
/* End it: B FREE -> DEAD (no opener after), then vacate. False when an opener came first. */
bool stream_linger_end(struct orbit_streams *s, struct stream_slot *slot, uint32_t live);
/* If slot (read live) lingers and its linger is over, end it: true when this call did. */
bool stream_linger_expire(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                          const struct orbit_owner *dead);

/* ---- ring.c ---- */
int  stream_pred_readable(void *ep);
struct stream_room { struct orbit_endpoint *ep; uint32_t need; };
int  stream_pred_room(void *room);
void stream_reader_need(struct orbit_endpoint *ep, uint32_t need);
void stream_writer_need(struct orbit_endpoint *ep, uint32_t need);
/* Before a wait: note the CPU this waiter parks from (see wake_or_defer in ring.c). */
void stream_note_cpu(_Atomic uint32_t *hint);
/*
 * Does the peer of ep last wait from the CPU we run on (its waits' CPU hints)?
 * Looked at every STREAM_PEER_LOOK waits: the hints share lines the peer
 * writes on every transfer, so a look costs a cache miss.
 */
#define STREAM_PEER_LOOK 32u
bool stream_peer_here(struct orbit_endpoint *ep);
/*
 * The whole wait: pred, then orb_wait_spin, or when spin_here is false (a peer
 * that shares our CPU runs only once we stop) a few yields that hand it the
 * CPU; then orb_wait_park_until. The CPU is noted before yielding and before
 * parking, not before a spin.
 */
int  stream_wait(struct orb_waitword *w, orb_wait_pred pred, void *ctx, const struct orb_deadline *deadline,
                 struct orb_spin *spin, bool spin_here, _Atomic uint32_t *cpu_hint, struct orb_wait_stats *stats);

/* ---- offer.c ---- */
int  stream_pred_offer_pending(void *s);

#endif
