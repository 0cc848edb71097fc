/* SPDX-License-Identifier: MIT */
/*
 * orbit/exchange.h — paired exchanges: a control stream of fixed-size events
 * plus a zero-copy payload arena in shared memory.
 *
 * THE ARENA
 * A payload arena is its own segment ("orbit.<fleet>.<kind>", default kind
 * 244). Every node of the fleet owns one lane of slots_per_lane slots of
 * slot_bytes each; only that node allocates in it, first fit from the lane's
 * start (the slots a release just freed, still in cache, are filled next).
 * A chunk is one contiguous run of slots in the producer's own lane, never a
 * chain. Its life:
 *
 *   reserve(len)      the producer takes a run of ceil(len / slot_bytes)
 *                     free slots; nothing is visible to anyone yet
 *   fill in place     write the bytes (memcpy, read(2), READ_FIXED/RECV ...)
 *   commit(len')      len' <= reserved bytes: the chunk becomes LIVE and a
 *                     descriptor names it; slots past len' are freed at once
 *   cancel            instead of commit: the run is freed (credit returns)
 *   consume(desc)     the receiver validates the descriptor and takes the
 *                     chunk exactly once (one CAS on its first slot); it
 *                     reads the bytes in place
 *   release           the run is freed and only the producer's lane credit
 *                     word is signalled (one wake for its waiters, if any)
 *
 * Every field of a descriptor that came through shared memory is checked
 * against the arena before a pointer is formed: arena kind, node inside the
 * fleet, run inside the lane, a minimal extent for len, the generation of
 * every slot of the run, and the length and owner recorded in its first slot.
 * A descriptor that fails is -ORBIT_ECORRUPT; one whose chunk is gone
 * (consumed already, released, withdrawn, reclaimed) is -ORBIT_ESTALE.
 *
 * Backpressure: a lane with no free run that long is -ORBIT_EPAYLOADFULL from
 * the try forms; the blocking forms park on the lane's credit word (after a
 * bounded spin, see orbit_set_spin_ns) until a release or cancel frees
 * slots; io_uring callers prep a FUTEX_WAIT on it; event loops use the
 * readiness descriptor. A chunk longer than a lane is -ORBIT_ETOOLARGE.
 *
 * Death: orbit_arena_node_dead(node, incarnation) frees that life's
 * unpublished reservations and its published chunks nobody has taken, and
 * the chunks it held as a reader. Chunks a surviving reader holds stay valid
 * until that reader releases them.
 *
 * EXCHANGES
 * An exchanges handle joins one control stream table (an ordinary orbit
 * streams table, default kind 243, carrying 64-byte events) with a payload
 * arena shared by both directions, or two directional arenas with their own
 * geometry and credit. orbit_exchange_create takes a control stream in this
 * node's lane and returns side A plus a ticket for side B; whoever opens the
 * ticket holds side B. Side A sends the A->B flow and receives B->A; side B
 * the reverse. Each flow runs its own state machine:
 *
 *   NEW --START [metadata chunk]--> OPEN --DATA(chunk)*--> FIN
 *   NEW or OPEN --RESET(u32 code)--> RESET
 *
 * The flows are independent: either side may start first, one may finish
 * while the other is still open (early response, concurrent upload, full
 * duplex). Chunk ids count from 1 per flow (a START metadata chunk takes
 * id 1) and must arrive in order. A receiver that meets a lifecycle
 * violation (START twice, DATA before START or after FIN, an id out of
 * order) gets -ORBIT_EMALFORMED, a frame or descriptor that fails its checks
 * -ORBIT_ECORRUPT; either ends that flow for the receiver (later calls
 * return the same error) and never crashes it.
 *
 * Pool session binding: orbit_exchange_open_session carries a remote lease
 * in the START of an exchange offered to the resource owner's node;
 * orbit_exchange_accept_session accepts it with orbit_pool_accept exactly
 * once before the metadata or any later byte is exposed.
 *
 * io_uring zero copy: orbit_arena_register_buffers registers every lane of
 * the mapping as a fixed buffer (buffer index = lane = node) in one call;
 * orbit_reservation_fixed and orbit_chunk_fixed give the (index, address)
 * pair for READ_FIXED / RECV into a reserved chunk and WRITE_FIXED / SEND
 * from a received one, so a body goes socket -> shared memory -> socket with
 * no user-space copy.
 *
 * Conventions (as in every orbit header): calls return 0 or a count, or a negated ORBIT_E*
 * code; timeout_ms -1 waits forever, 0 tries once (-ORBIT_ETIMEDOUT); the
 * try_* forms never block and return -ORBIT_EAGAIN (control ring) or
 * -ORBIT_EPAYLOADFULL (arena). Handles are opaque; reservations, chunks,
 * descriptors, events and sessions are value structs the caller owns.
 *
 * Threads: arena and exchanges handles may be shared by the threads of a
 * process. One exchange endpoint may be used by one sending thread and one
 * receiving thread at once; close only when no other call on it runs. A
 * reservation or chunk belongs to one thread at a time. Close endpoints
 * before their handle and handles before orbit_fleet_leave; chunks and
 * reservations must be released or cancelled before their arena handle is
 * closed.
 */
#ifndef ORBIT_EXCHANGE_H
#define ORBIT_EXCHANGE_H

#include <orbit/fleet.h>
#include <orbit/pool.h>
#include <orbit/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring;
struct io_uring_sqe;

/* ==== the payload arena ================================================= */

#define ORBIT_ARENA_KIND            244
#define ORBIT_EXCHANGE_CONTROL_KIND 243

/*
 * An arena's geometry; every process opening a kind must pass the same spec
 * (else -ORBIT_EGEOMETRY). slot_bytes: a power of two from 64 to 2^30.
 * slots_per_lane: a power of two from 1 to 2^24. A lane (slot_bytes x
 * slots_per_lane) is at most 1 GiB: the largest chunk, and one io_uring
 * fixed buffer. kinds 0 and 255 (the fleet's) are refused. Memory: the segment
 * reserves fleet capacity x lane bytes of address space plus 64 bytes of
 * bookkeeping per slot (held by every fleet); a member's lane holds pages as
 * far as its chunks have reached (first fit from the lane's start).
 */
struct orbit_arena_spec {
    uint8_t  kind;
    uint32_t slot_bytes;
    uint32_t slots_per_lane;
    uint64_t resv[4];      /* zero; a later release may give it meaning */
};
#define ORBIT_ARENA_SPEC_DEFAULT { .kind = ORBIT_ARENA_KIND, .slot_bytes = 4096, .slots_per_lane = 1024, .resv = { 0 } }
#define ORBIT_ARENA_LANE_MAX (1u << 30)

/* Names one committed chunk: what travels in a DATA event (or any channel). */
struct orbit_chunk_desc {
    uint8_t  arena_kind;
    uint16_t node;          /* the producer: the lane the run lives in */
    uint32_t first_slot;    /* in that lane */
    uint32_t slot_count;    /* minimal: ceil(len / slot_bytes) */
    uint32_t len;           /* exact bytes, 1 .. slot_count * slot_bytes */
    uint64_t generation;    /* the allocation's generation (never 0) */
};

/* A run reserved in this node's lane, writable until committed or cancelled. */
struct orbit_reservation {
    struct orbit_arena *arena;
    void    *data;          /* capacity writable bytes */
    size_t   capacity;      /* slot_count * slot_bytes */
    uint32_t first_slot, slot_count;
    uint64_t generation;
    bool     done;          /* committed or cancelled: nothing more to do */
};

/* A chunk taken by a receiver: len bytes at data, read in place until released. */
struct orbit_chunk {
    struct orbit_arena *arena;
    const void *data;
    size_t   len;
    struct orbit_chunk_desc desc;
    bool     released;      /* true: nothing held (also for an event without payload) */
};

struct orbit_arena;

/*
 * orbit_arena_open - open (creating if needed) the arena spec names (NULL:
 * ORBIT_ARENA_SPEC_DEFAULT) as this process's node. Errors: -ORBIT_EMALFORMED
 * (bad spec), -ORBIT_EGEOMETRY (the kind exists with another spec or is
 * another table), -ORBIT_ECORRUPT, -ORBIT_ETOOLARGE (absurd geometry),
 * -ENOMEM (the creator found no room for the slots' bookkeeping;
 * orbit_last_error names the bytes and the mount). A reserve populates the
 * payload its run reaches first, and is -ENOMEM (the run given back, the
 * sentence naming the bytes and the mount) where the mount has no room.
 * On an observer fleet it creates nothing: the arena must exist (else -ENOENT)
 * with this spec (else -ORBIT_EGEOMETRY). Through an observer fleet the handle
 * may inspect, report deaths and reset, but reserve, consume, readiness and buffer registration are
 * -ORBIT_ENOTOWNER (a reader is accounted to its node, for death reports).
 * orbit_arena_open_existing - the arena of that kind with the geometry its
 * segment records (tools, death reports); -ENOENT if there is none.
 * orbit_arena_close - closes the handle and its readiness descriptor.
 */
int  orbit_arena_open(struct orbit_fleet *, const struct orbit_arena_spec *spec, struct orbit_arena **out);
int  orbit_arena_open_existing(struct orbit_fleet *, uint8_t kind, struct orbit_arena **out);
void orbit_arena_close(struct orbit_arena *);
int  orbit_arena_spec(const struct orbit_arena *, struct orbit_arena_spec *out);
uint8_t  orbit_arena_kind(const struct orbit_arena *);
uint64_t orbit_arena_epoch(struct orbit_arena *);

/*
 * orbit_arena_try_reserve - a run of ceil(len / slot_bytes) free slots in
 * this node's lane, or -ORBIT_EPAYLOADFULL when there is none now (and the
 * next release then rings this node's doorbell, see orbit_arena_readiness).
 * -ORBIT_ETOOLARGE when len exceeds a lane, -ORBIT_EMALFORMED for len 0 or
 * NULL arguments, -ORBIT_ENOTOWNER through an observer. *out is written only
 * on success.
 * orbit_arena_reserve - the same, waiting up to timeout_ms for credit: a
 * parked wait on this lane's credit word, woken by the release or cancel
 * that frees slots here (-ORBIT_ETIMEDOUT).
 */
int  orbit_arena_try_reserve(struct orbit_arena *, size_t len, struct orbit_reservation *out);
int  orbit_arena_reserve(struct orbit_arena *, size_t len, int timeout_ms, struct orbit_reservation *out);

/*
 * orbit_arena_commit - publish the first len bytes of a reservation (1 ..
 * capacity; fewer than reserved frees the slots past them) and describe the
 * chunk in *desc. The reservation is done. -ORBIT_EMALFORMED for len 0 or
 * over capacity, or a reservation already done (nothing changes then);
 * -ORBIT_ESTALE if the run was taken back meanwhile (reset_all, a death
 * report of this life).
 * orbit_arena_cancel - give an uncommitted reservation back (its credit
 * returns); idempotent, and a no-op on a done reservation.
 */
int  orbit_arena_commit(struct orbit_reservation *, size_t len, struct orbit_chunk_desc *desc);
void orbit_arena_cancel(struct orbit_reservation *);

/*
 * orbit_arena_consume - take the chunk a descriptor names, exactly once:
 * the first caller gets it (*out, bytes in place), every later one
 * -ORBIT_ESTALE. Validation as described above (-ORBIT_ECORRUPT); a chunk
 * committed to an exchange can be taken only through that exchange
 * (-ORBIT_ECORRUPT here). Any member of the fleet may consume; through an
 * observer it is -ORBIT_ENOTOWNER.
 * orbit_chunk_release - free the chunk's run and signal its producer's lane
 * credit; idempotent (sets released). A chunk whose run was reclaimed
 * meanwhile (reset_all, this reader reported dead) is left alone.
 * orbit_arena_withdraw - the producer takes back a committed chunk nobody
 * consumed (say its descriptor could not be delivered): 0, or -ORBIT_ESTALE
 * when it was consumed or is gone, -ORBIT_ECORRUPT for a bad descriptor,
 * -ORBIT_ENOTOWNER when the chunk is not in this node's lane.
 */
int  orbit_arena_consume(struct orbit_arena *, const struct orbit_chunk_desc *, struct orbit_chunk *out);
void orbit_chunk_release(struct orbit_chunk *);
int  orbit_arena_withdraw(struct orbit_arena *, const struct orbit_chunk_desc *);

/*
 * orbit_arena_prep_wait_credit - io_uring form of the credit wait (the prep
 * contract of <orbit/uring.h>): 1 when a run for len bytes is free now (the SQE
 * is a NOP), 0 when the SQE holds a FUTEX_WAIT on this lane's credit word
 * that completes at the next release or cancel here, -ORBIT_ETOOLARGE,
 * -ORBIT_ENOTOWNER, -ORBIT_ENOTSUP without the kernel's futex opcodes.
 * orbit_arena_readiness - an eventfd (one per handle; a second call is
 * -ORBIT_EBUSY) that becomes readable when credit returns to this node's
 * lane after a try_reserve returned -ORBIT_EPAYLOADFULL. Edge-triggered and
 * coalescing: orbit_readiness_drain, then retry.
 */
int  orbit_arena_prep_wait_credit(struct orbit_arena *, size_t len, struct io_uring_sqe *);
int  orbit_arena_readiness(struct orbit_arena *);

/*
 * io_uring fixed buffers. orbit_arena_register_buffers registers the whole
 * payload mapping with ring in one io_uring_register_buffers call, one
 * buffer per lane (buffer index = node), which pins it (every lane is faulted
 * in; -ENOMEM when huge pages run out). The ring must have no registered
 * buffers yet. Returns 0 or a negative code (-ORBIT_ENOTOWNER observer,
 * -EBUSY/-ENOMEM/... from the kernel).
 * orbit_reservation_fixed / orbit_chunk_fixed give the buffer index, the
 * address and the length to pass to io_uring_prep_read_fixed / recv (into a
 * reservation: len is its capacity) and io_uring_prep_write_fixed / send (from
 * a chunk: len is the chunk's). -ORBIT_EMALFORMED for a done reservation or a
 * released chunk.
 */
struct orbit_fixed_buf { int index; void *addr; size_t len; };
int  orbit_arena_register_buffers(struct orbit_arena *, struct io_uring *ring);
int  orbit_reservation_fixed(const struct orbit_reservation *, struct orbit_fixed_buf *out);
int  orbit_chunk_fixed(const struct orbit_chunk *, struct orbit_fixed_buf *out);

/*
 * orbit_arena_node_dead - a confirmed death of (node, incarnation): that
 * life's reservations and its committed chunks not yet consumed are freed;
 * chunks it was reading, in any lane, return to their producers, and so do
 * chunks committed to an exchange whose receiving side was that life (or
 * whose control stream has ended), since nobody can take them any more.
 * Chunks of that producer held by a live reader stay valid until released.
 * Another incarnation of the node is untouched. Every lane's credit waiters
 * are woken once (see orbit_fleet_node_dead).
 * orbit_arena_reset_all - quiescent owner boot: a new epoch and every slot
 * free; every older descriptor, reservation and chunk then reads stale.
 */
void orbit_arena_node_dead(struct orbit_arena *, uint16_t node, uint64_t incarnation);
void orbit_arena_reset_all(struct orbit_arena *);

/* ---- inspection (orbitctl) ---- */

struct orbit_arena_lane_info {
    uint16_t node;
    uint32_t free, reserved, live, reading, reclaiming;   /* slots, a racy snapshot */
    uint32_t chunks;                                      /* runs that are not free */
    uint64_t resv[2];      /* zero; a later release may give it meaning */
};
/* Lanes with any slot in use: fills up to max, returns how many there are. */
ssize_t orbit_arena_lanes(struct orbit_arena *, struct orbit_arena_lane_info *out, size_t max);

enum orbit_chunk_state { ORBIT_CHUNK_RESERVED = 1, ORBIT_CHUNK_LIVE = 2, ORBIT_CHUNK_READING = 3,
                         ORBIT_CHUNK_RECLAIMING = 4 };
struct orbit_chunk_info {
    struct orbit_chunk_desc desc;
    enum orbit_chunk_state state;
    orbit_id exchange;      /* the exchange it was committed to; 0: a plain arena commit */
    uint8_t  flow;          /* 1 A->B, 2 B->A, 0 plain */
    uint16_t reader;        /* READING: the reader's node */
    uint64_t producer_incarnation, reader_incarnation;
    uint64_t resv[2];      /* zero; a later release may give it meaning */
};
/* Runs in use (first slots), lane by lane: fills up to max, returns how many. */
ssize_t orbit_arena_chunks(struct orbit_arena *, struct orbit_chunk_info *out, size_t max);

/* Counters of this handle since it was opened. */
struct orbit_arena_stats {
    uint64_t reserved, committed, cancelled, consumed, released, reclaimed;
    uint64_t full;          /* try_reserve answers of -ORBIT_EPAYLOADFULL */
    uint64_t bytes_committed, bytes_consumed;
    uint64_t parks, wakes, doorbells;
    uint64_t resv[6];      /* zero; a later release may give it meaning */
};
void orbit_arena_stats(struct orbit_arena *, struct orbit_arena_stats *out);

/* ==== exchanges ========================================================== */

/*
 * An exchanges table: the control streams table (its own kind; buffer_bytes
 * of at least 64, one event) and the arena each flow uses. b_to_a.kind == 0
 * means one arena shared by both flows (a_to_b); otherwise two directional
 * arenas with their own geometry and credit. The control kind and the arena
 * kinds must differ (-ORBIT_EMALFORMED).
 */
struct orbit_exchange_spec {
    struct orbit_stream_spec control;
    struct orbit_arena_spec a_to_b;
    struct orbit_arena_spec b_to_a;
    uint64_t resv[4];      /* zero; a later release may give it meaning */
};
#define ORBIT_EXCHANGE_SPEC_DEFAULT {                                                      \
    .control = { .kind = ORBIT_EXCHANGE_CONTROL_KIND, .lane_capacity = 256,                \
                 .buffer_bytes = 16384, .generation_limit = 0, .resv = { 0 } },            \
    .a_to_b = ORBIT_ARENA_SPEC_DEFAULT,                                                    \
    .b_to_a = { .kind = 0, .slot_bytes = 0, .slots_per_lane = 0, .resv = { 0 } }, .resv = { 0 } }

enum orbit_flow { ORBIT_FLOW_A_TO_B = 1, ORBIT_FLOW_B_TO_A = 2 };

enum orbit_exchange_event_type {
    ORBIT_EXCHANGE_START = 1, ORBIT_EXCHANGE_DATA = 2, ORBIT_EXCHANGE_FIN = 3, ORBIT_EXCHANGE_RESET = 4,
};

/* One received event. chunk is held (released == false) for DATA, and for a
 * START that carried metadata; release it with orbit_chunk_release. */
struct orbit_exchange_event {
    enum orbit_exchange_event_type type;
    uint64_t chunk_id;      /* 1, 2, ... per flow; 0 when the event has no chunk */
    struct orbit_chunk chunk;
    uint32_t reset_code;    /* RESET: the application's code */
};

enum orbit_exchange_state { ORBIT_FLOW_NEW, ORBIT_FLOW_OPEN, ORBIT_FLOW_FINISHED, ORBIT_FLOW_RESET,
                            ORBIT_FLOW_FAILED /* receive side: a violation or corrupt frame */ };

struct orbit_exchanges;
struct orbit_exchange;

/*
 * orbit_exchanges_open - open the control streams table and the arena(s)
 * (spec NULL: ORBIT_EXCHANGE_SPEC_DEFAULT) as this process's node. Errors of
 * orbit_streams_open and orbit_arena_open, and -ORBIT_EMALFORMED for kinds
 * that collide or a control ring under 64 bytes. On an observer fleet it
 * creates nothing: its tables must exist (else -ENOENT) with this spec.
 * orbit_exchanges_close - closes the handle, its tables and its readiness
 * descriptor; close its endpoints first.
 * orbit_exchanges_streams / orbit_exchanges_arena - the tables inside (for
 * offers, stats, inspection); owned by the exchanges handle.
 */
int  orbit_exchanges_open(struct orbit_fleet *, const struct orbit_exchange_spec *spec,
                          struct orbit_exchanges **out);
void orbit_exchanges_close(struct orbit_exchanges *);
struct orbit_streams *orbit_exchanges_streams(struct orbit_exchanges *);
struct orbit_arena   *orbit_exchanges_arena(struct orbit_exchanges *, enum orbit_flow);

/*
 * orbit_exchange_create - a control stream in this node's lane: *a is side A,
 * *b_ticket names side B (errors of orbit_streams_create).
 * orbit_exchange_open - hold side B (errors of orbit_streams_open_ticket; a
 * side-A ticket is -ORBIT_EMALFORMED).
 * Offers as in streams: orbit_exchanges_offer marks the exchange as offered
 * to to_node; take_offer / wait_offer return the next side-B ticket offered
 * to this node (-ORBIT_EAGAIN / -ORBIT_ETIMEDOUT).
 */
int  orbit_exchange_create(struct orbit_exchanges *, struct orbit_exchange **a, struct orbit_ticket *b_ticket);
int  orbit_exchange_open(struct orbit_exchanges *, const struct orbit_ticket *, struct orbit_exchange **b);
int  orbit_exchanges_offer(struct orbit_exchanges *, const struct orbit_ticket *, uint16_t to_node);
int  orbit_exchanges_take_offer(struct orbit_exchanges *, struct orbit_ticket *out);
int  orbit_exchanges_wait_offer(struct orbit_exchanges *, int timeout_ms, struct orbit_ticket *out);

orbit_id        orbit_exchange_id(const struct orbit_exchange *);
enum orbit_side orbit_exchange_side(const struct orbit_exchange *);
/* The peer's node and incarnation (its control stream side): as orbit_endpoint_peer. */
int             orbit_exchange_peer(const struct orbit_exchange *, struct orbit_owner *out);
enum orbit_exchange_state orbit_exchange_send_state(const struct orbit_exchange *);
enum orbit_exchange_state orbit_exchange_recv_state(const struct orbit_exchange *);

/*
 * Sending, zero-copy form. orbit_exchange_try_reserve / orbit_exchange_reserve
 * take a run in this node's lane of the arena this side sends through
 * (orbit_arena_try_reserve / orbit_arena_reserve; -ORBIT_ECLOSED once this
 * flow has finished or reset). Fill it, then commit it as the START metadata
 * or as one DATA chunk:
 *
 * orbit_exchange_try_start / orbit_exchange_start - START, with res NULL (no
 *   metadata) or the first len bytes of res (1 .. capacity; the rest is
 *   freed). -ORBIT_EMALFORMED if START was sent already, -ORBIT_ECLOSED
 *   after FIN or RESET.
 * orbit_exchange_try_data / orbit_exchange_data - DATA with the first len
 *   bytes of res as the next chunk. -ORBIT_EMALFORMED before START,
 *   -ORBIT_ECLOSED after FIN or RESET.
 *
 * Publication: when the control ring has no room the try forms return
 * -ORBIT_EAGAIN and the blocking forms wait up to timeout_ms
 * (-ORBIT_ETIMEDOUT); either way the reservation is kept, untouched, for a
 * retry. -ORBIT_EPEERGONE (the receiver closed, stopped or died),
 * -ORBIT_ERESET and -ORBIT_ESTALE mean the flow cannot carry it: the
 * reservation is cancelled (done). On success the reservation is done and
 * the chunk belongs to the receiver.
 *
 * Copy forms: orbit_exchange_send_start / orbit_exchange_send_data reserve
 * (waiting for credit), copy len bytes and commit, within one timeout_ms;
 * orbit_exchange_try_send_data never waits (-ORBIT_EPAYLOADFULL,
 * -ORBIT_EAGAIN: nothing was sent). len 0 sends START without metadata; DATA
 * needs len >= 1. A chunk over a lane is -ORBIT_ETOOLARGE.
 *
 * orbit_exchange_try_finish / orbit_exchange_finish - FIN (-ORBIT_EMALFORMED
 * before START, -ORBIT_ECLOSED after FIN or RESET).
 * orbit_exchange_try_reset / orbit_exchange_reset - RESET with the
 * application's code, from NEW or OPEN (-ORBIT_ECLOSED after FIN or RESET).
 */
int  orbit_exchange_try_reserve(struct orbit_exchange *, size_t len, struct orbit_reservation *out);
int  orbit_exchange_reserve(struct orbit_exchange *, size_t len, int timeout_ms, struct orbit_reservation *out);
int  orbit_exchange_try_start(struct orbit_exchange *, struct orbit_reservation *res, size_t len);
int  orbit_exchange_start(struct orbit_exchange *, struct orbit_reservation *res, size_t len, int timeout_ms);
int  orbit_exchange_try_data(struct orbit_exchange *, struct orbit_reservation *res, size_t len);
int  orbit_exchange_data(struct orbit_exchange *, struct orbit_reservation *res, size_t len, int timeout_ms);
int  orbit_exchange_send_start(struct orbit_exchange *, const void *meta, size_t len, int timeout_ms);
int  orbit_exchange_send_data(struct orbit_exchange *, const void *buf, size_t len, int timeout_ms);
int  orbit_exchange_try_send_data(struct orbit_exchange *, const void *buf, size_t len);
int  orbit_exchange_try_finish(struct orbit_exchange *);
int  orbit_exchange_finish(struct orbit_exchange *, int timeout_ms);
int  orbit_exchange_try_reset(struct orbit_exchange *, uint32_t code);
int  orbit_exchange_reset(struct orbit_exchange *, uint32_t code, int timeout_ms);

/*
 * Receiving. orbit_exchange_try_next returns the next event of the flow this
 * side receives: 0 and *ev, or -ORBIT_EAGAIN when none is queued (the next
 * one then rings this node's doorbell). After FIN or RESET: -ORBIT_ECLOSED.
 * -ORBIT_EMALFORMED (lifecycle violation) and -ORBIT_ECORRUPT (a frame or
 * descriptor failed its checks) end the flow for this receiver; any chunk
 * the bad event named is released. -ORBIT_ERESET when the control stream
 * itself ended before FIN or RESET (the peer closed without finishing, or
 * died), -ORBIT_ESTALE when it ended under us. orbit_exchange_next waits up
 * to timeout_ms (-ORBIT_ETIMEDOUT).
 */
int  orbit_exchange_try_next(struct orbit_exchange *, struct orbit_exchange_event *ev);
int  orbit_exchange_next(struct orbit_exchange *, struct orbit_exchange_event *ev, int timeout_ms);

/*
 * io_uring forms (<orbit/uring.h> conventions: 1 ready now and the SQE is a
 * NOP, 0 the SQE holds a FUTEX_WAIT, or a negative code and a NOP):
 * prep_wait_event completes when the next event (or the control stream's
 * end) is there; prep_wait_credit when this side's lane may hold a run for
 * len bytes; prep_wait_sendable when the control ring has room for an event.
 */
int  orbit_exchange_prep_wait_event(struct orbit_exchange *, struct io_uring_sqe *);
int  orbit_exchange_prep_wait_credit(struct orbit_exchange *, size_t len, struct io_uring_sqe *);
int  orbit_exchange_prep_wait_sendable(struct orbit_exchange *, struct io_uring_sqe *);
int  orbit_exchanges_prep_wait_offer(struct orbit_exchanges *, struct io_uring_sqe *);

/*
 * orbit_exchanges_readiness - an eventfd (one per handle; a second call is
 * -ORBIT_EBUSY) readable when an offer is made to this node, when something
 * happens on an exchange of this handle whose last try_* call returned
 * -ORBIT_EAGAIN, or when credit returns to this node's lane after a
 * -ORBIT_EPAYLOADFULL. Edge-triggered: orbit_readiness_drain, then retry.
 */
int  orbit_exchanges_readiness(struct orbit_exchanges *);

/*
 * orbit_exchange_close - end this side. An unfinished sending flow is reset
 * (the peer's receive gets -ORBIT_ERESET) and its chunks nobody consumed
 * return to the arena; events still queued for this side are discarded and
 * their chunks released; the control stream side is released. Chunks taken
 * from this exchange before stay valid until released. Frees the endpoint.
 * Closing side A before side B has opened ends the exchange even after FIN:
 * its offer is skipped and orbit_exchange_open of its ticket is
 * -ORBIT_ESTALE. A sender that must know its body is delivered waits for the
 * receiver first (orbit_exchange_next ends with -ORBIT_ERESET when B closes).
 */
void orbit_exchange_close(struct orbit_exchange *);

struct orbit_exchange_stats {
    uint64_t events_sent, events_received, chunks_sent, chunks_received;
    uint64_t bytes_sent, bytes_received;
    uint64_t resv[6];      /* zero; a later release may give it meaning */
};
/* Counters of this handle since it was opened (arena counters: orbit_arena_stats). */
void orbit_exchanges_stats(struct orbit_exchanges *, struct orbit_exchange_stats *out);

/* ==== pool session binding ============================================== */

/*
 * The lease frame that opens a session's START payload (little-endian):
 * "PSES", version 1, 0, holder node u16, resource id u64, fence u64, holder
 * incarnation u64, pool epoch u64; application metadata follows it.
 */
#define ORBIT_SESSION_FRAME_BYTES 40

struct orbit_session {
    struct orbit_exchange *exchange;    /* side B: receives A->B, sends B->A */
    struct orbit_execution execution;   /* the accepted lease: complete it when done */
    struct orbit_chunk metadata;        /* the caller's metadata, in place (len may be 0) */
};

/*
 * orbit_exchange_open_session - for a remote lease (orbit_pool_reserve or a
 * REMOTE_REUSE plan): create an exchange, send START carrying the lease
 * frame and meta (waiting for credit and control room up to timeout_ms),
 * and offer side B to the resource owner's node (orbit_id_node(lease->id)).
 * *a is side A. Errors of create, reserve, start and offer; nothing is
 * offered on error. A lease that is never accepted is aged out by the
 * owner's orbit_pool_reconcile.
 * orbit_exchange_accept_session - on the owner: open side B of ticket, wait
 * up to timeout_ms for its first event, which must be START with a lease
 * frame (-ORBIT_EMALFORMED otherwise: bad magic or version, short payload,
 * another event), then orbit_pool_accept it exactly once (its errors:
 * -ORBIT_ESTALE, -ORBIT_ENOTRESERVED (accepted already), -ORBIT_ENOTOWNER,
 * -ORBIT_EDRAINING ...) before anything of the metadata is exposed. On any
 * error the exchange is closed (side A's receive then ends with
 * -ORBIT_ERESET) and *out holds nothing.
 * orbit_exchange_wait_session - wait_offer, then accept_session.
 * orbit_session_end - release the metadata, complete the execution and close
 * the exchange (each only if still held); idempotent.
 */
int  orbit_exchange_open_session(struct orbit_exchanges *, const struct orbit_lease *,
                                 const void *meta, size_t len, int timeout_ms, struct orbit_exchange **a);
int  orbit_exchange_accept_session(struct orbit_exchanges *, struct orbit_pool *, const struct orbit_ticket *,
                                   int timeout_ms, struct orbit_session *out);
int  orbit_exchange_wait_session(struct orbit_exchanges *, struct orbit_pool *, int timeout_ms,
                                 struct orbit_session *out);
void orbit_session_end(struct orbit_session *);

#ifdef __cplusplus
}
#endif
#endif
