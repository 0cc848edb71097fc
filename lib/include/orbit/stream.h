/* SPDX-License-Identifier: MIT */
/*
 * orbit/stream.h — bounded duplex byte streams between processes of a fleet.
 *
 * A stream has two sides. orbit_streams_create takes a slot in this node's
 * lane and returns the endpoint of side A plus a ticket naming side B; whoever
 * in the fleet opens that ticket holds side B. Each direction is its own ring
 * of spec.buffer_bytes: bytes arrive in order and without loss; a writer waits
 * while its ring is full and a reader while it is empty. A writer that is done
 * finishes (FIN: the reader drains, then reads 0); one that gives up resets
 * (the reader gets -ORBIT_ERESET, buffered bytes are dropped).
 *
 * Addresses: an orbit_id whose kind is the table's, node the creator's lane,
 * slot the slot in that lane and generation the slot's tenancy. A ticket adds
 * the side and the table's epoch. An id or ticket kept past its stream's end,
 * or past a reset_all, answers -ORBIT_ESTALE rather than reaching the slot's
 * next tenant.
 *
 * Waiting: blocking calls spin briefly (orbit_set_spin_ns) and then park on the
 * direction's futex word; a writer wakes its reader only when the reader may be
 * waiting (its ring was drained), a reader wakes its writer only when free space
 * crosses what the writer said it needs. io_uring callers use the prep calls of
 * <orbit/uring.h>; event loops use orbit_streams_readiness.
 *
 * Threads: a streams handle may be shared by the threads of a process. One
 * endpoint may be used by one reading thread and one writing thread at once;
 * close, rearm, finish and reset belong to the writing thread (close and rearm
 * only when no other call on the endpoint is running). Close every endpoint
 * before the handle, and every handle before orbit_fleet_leave.
 */
#ifndef ORBIT_STREAM_H
#define ORBIT_STREAM_H

#include <orbit/fleet.h>
#include <orbit/pool.h>   /* kept: programs that include only this header see the pool's names */

#ifdef __cplusplus
extern "C" {
#endif

#define ORBIT_STREAM_KIND 246
/*
 * A table's geometry. kind names the segment (a fleet may hold several stream
 * tables, one per kind; 255 is the fleet's own). lane_capacity: streams one
 * node can hold at once, a power of two up to 65536. buffer_bytes: bytes one
 * direction holds, a power of two up to 2^31. generation_limit: tenancies of
 * one slot per epoch (0: the full 24-bit field); a spent slot sits out until
 * the next reset_all. Every process opening a kind must pass the same spec.
 * Memory: the segment reserves fleet x lane x 2 x buffer_bytes of address
 * space, and holds the slots (320 bytes each, fleet x lane) from its
 * creation; a stream's two rings are populated when orbit_streams_create
 * first takes its slot, so a member holds the rings of the streams it made.
 */
struct orbit_stream_spec {
    uint8_t  kind;
    uint32_t lane_capacity;
    uint32_t buffer_bytes;
    uint32_t generation_limit;
    uint64_t resv[4];      /* zero; a later release may give it meaning */
};
#define ORBIT_STREAM_SPEC_DEFAULT { .kind = ORBIT_STREAM_KIND, .lane_capacity = 256, .buffer_bytes = 65536, \
                                   .generation_limit = 0, .resv = { 0 } }

enum orbit_side { ORBIT_SIDE_A, ORBIT_SIDE_B };
struct orbit_ticket { orbit_id id; enum orbit_side side; uint64_t epoch; };

/*
 * orbit_ticket_format - "<kind>:<node>:<counter>/<a|b>/<epoch>" plus a NUL.
 * Returns the length, -ORBIT_ETOOLARGE if len cannot hold it (64 bytes always
 * do), -ORBIT_EMALFORMED for NULL arguments or a bad side.
 * orbit_ticket_parse - the reverse (the id may also be "0x" + hex); anything
 * else is -ORBIT_EMALFORMED and *out is untouched.
 */
int orbit_ticket_format(const struct orbit_ticket *, char *buf, size_t len);  /* "<id>/b/<epoch>"; returns length */
int orbit_ticket_parse(const char *text, struct orbit_ticket *out);            /* -ORBIT_EMALFORMED */

struct orbit_streams; struct orbit_endpoint;

/*
 * orbit_streams_open - open (creating if needed) the table spec names (NULL:
 * ORBIT_STREAM_SPEC_DEFAULT) as this process's node and incarnation.
 * Errors: -ORBIT_EMALFORMED (bad spec), -ORBIT_EGEOMETRY (the kind exists
 * with another spec or is another table), -ORBIT_ECORRUPT, -ORBIT_ETOOLARGE
 * (absurd geometry), -ENOMEM (the creator found no room for the slots;
 * orbit_last_error names the bytes asked, the mount and its room). On an
 * observer fleet (orbit_fleet_observe) it creates nothing: the table must
 * exist (else -ENOENT) with this spec (else -ORBIT_EGEOMETRY). Through an
 * observer fleet the handle may inspect, report deaths and reset, but create,
 * open_ticket, take_offer, wait_offer and readiness are -ORBIT_ENOTOWNER.
 * orbit_streams_open_existing - open the table of that kind with the geometry
 * its segment records (tools, death reports); -ENOENT if there is none.
 *
 * Testing only: with ORBIT_TEST_STREAM_PARK=installing in the environment at
 * open, orbit_streams_create through this handle stops the process with
 * SIGSTOP after taking a slot and before publishing it, so a test can kill -9
 * it there (its death report gives the slot back); with "opening",
 * orbit_streams_open_ticket stops after stamping itself on the side and
 * before claiming it (its death report frees the side for the next opener).
 */
int  orbit_streams_open(struct orbit_fleet *, const struct orbit_stream_spec *spec /* NULL = default */, struct orbit_streams **out);
int  orbit_streams_open_existing(struct orbit_fleet *, uint8_t kind, struct orbit_streams **out);
/* Closes the handle and its readiness descriptor. Endpoints must be closed first. */
void orbit_streams_close(struct orbit_streams *);
/* The epoch every ticket minted now carries. */
uint64_t orbit_streams_epoch(struct orbit_streams *);

/*
 * orbit_streams_create - take the lowest free slot of this node's lane: *a is
 * side A, *b_ticket names side B. -ORBIT_EFULL when every slot of the lane is
 * held or spent for this epoch.
 * orbit_streams_open_ticket - hold the side a ticket names. Each side is held
 * once per tenancy: -ORBIT_ECLAIMED if it is held or was held and released,
 * -ORBIT_ESTALE for an ended stream or another epoch, -ORBIT_EMALFORMED for an
 * id that is not of this table.
 * orbit_streams_is_live - whether the id names a live stream now.
 */
int  orbit_streams_create(struct orbit_streams *, struct orbit_endpoint **a, struct orbit_ticket *b_ticket);
int  orbit_streams_open_ticket(struct orbit_streams *, const struct orbit_ticket *, struct orbit_endpoint **out);
bool orbit_streams_is_live(struct orbit_streams *, orbit_id);

/*
 * Offers: discovery, not a claim. orbit_streams_offer marks the stream as
 * offered to to_node (a slot carries one offer at a time: a later offer
 * replaces one not yet taken), wakes one of the threads of that node asleep
 * in orbit_streams_wait_offer (one offer, one taker: no thundering herd; a
 * woken thread that leaves offers behind passes a wake on), every io_uring
 * offer waiter, and rings its doorbell (its readiness fd). -ORBIT_ESTALE if the ticket's stream has ended.
 * orbit_streams_take_offer returns the next offer to this node as a side-B
 * ticket, once; offers whose stream ended meanwhile are skipped; -ORBIT_EAGAIN
 * when there is none. orbit_streams_wait_offer waits for one (-ORBIT_ETIMEDOUT).
 */
int  orbit_streams_offer(struct orbit_streams *, const struct orbit_ticket *, uint16_t to_node);
int  orbit_streams_take_offer(struct orbit_streams *, struct orbit_ticket *out);             /* -ORBIT_EAGAIN: none */
int  orbit_streams_wait_offer(struct orbit_streams *, int timeout_ms, struct orbit_ticket *out);
/* Its io_uring form, by the prep contract of <orbit/uring.h>. */
struct io_uring_sqe;
int  orbit_streams_prep_wait_offer(struct orbit_streams *, struct io_uring_sqe *);

/*
 * orbit_streams_owners - every (node, incarnation) holding a side of a live
 * stream, sorted, without duplicates; who is in the table, not who is alive.
 * Fills up to max; returns how many there are.
 * orbit_streams_node_dead - a confirmed death: every side held by exactly that
 * node and incarnation, in any lane, ends. Its unfinished writes become RESET,
 * its reads READER_GONE; a parked peer wakes with an error and keeps the slot
 * until it closes. Another incarnation of the node is untouched. Every node's
 * offers waiters are woken once (see orbit_fleet_node_dead).
 * orbit_streams_supersede - this process took over its node: end every side
 * held by any other incarnation of this node. Call before creating anything.
 * orbit_streams_reset_all - quiescent owner boot: a new epoch, every slot
 * empty; every earlier endpoint, id and ticket answers -ORBIT_ESTALE.
 */
ssize_t orbit_streams_owners(struct orbit_streams *, struct orbit_owner *out, size_t max);
void orbit_streams_node_dead(struct orbit_streams *, uint16_t node, uint64_t incarnation);
void orbit_streams_supersede(struct orbit_streams *);
void orbit_streams_reset_all(struct orbit_streams *);

/*
 * orbit_streams_readiness - an eventfd that becomes readable when an offer is
 * made to this node, or when something changes (data, room, FIN, RESET,
 * reader gone, death, end) on an endpoint of this handle whose last try_*
 * call returned -ORBIT_EAGAIN (and, after orbit_endpoint_peer_closed
 * returned 0, when that peer departs). Edge-triggered and coalescing: after
 * orbit_readiness_drain, retry the try_* calls. One per handle: a second call
 * is -ORBIT_EBUSY. orbit_streams_close closes it.
 */
int  orbit_streams_readiness(struct orbit_streams *);

orbit_id        orbit_endpoint_id(const struct orbit_endpoint *);
enum orbit_side orbit_endpoint_side(const struct orbit_endpoint *);
/*
 * orbit_endpoint_peer - the node and incarnation holding the other side, to
 * watch its life beside a readable wait (orbit_fleet_prep_wait_node_death).
 * 0; -ORBIT_EAGAIN (nobody opened it yet), -ORBIT_EPEERGONE (released or
 * ended by a death report), -ORBIT_ESTALE (this endpoint's tenancy ended),
 * -ORBIT_ECORRUPT, -ORBIT_EMALFORMED.
 */
int orbit_endpoint_peer(const struct orbit_endpoint *, struct orbit_owner *out);

/*
 * Reads. try_read returns what is queued now (up to len): > 0 bytes, 0 at a
 * clean end (FIN and drained; also for len 0), -ORBIT_EAGAIN when empty,
 * -ORBIT_ERESET after the writer reset or died, -ORBIT_ESTALE when the stream
 * ended under this endpoint, -ORBIT_ECORRUPT when the shared counters fail
 * their bounds. try_read_exact consumes exactly len bytes or nothing:
 * -ORBIT_ETOOLARGE if len exceeds the ring, -ORBIT_EMALFORMED if FIN came
 * before the frame completed. read waits up to timeout_ms (-1 forever) for
 * the first byte: -ORBIT_ETIMEDOUT.
 */
ssize_t orbit_endpoint_try_read(struct orbit_endpoint *, void *buf, size_t len);   /* 0 = clean end (FIN) */
int     orbit_endpoint_try_read_exact(struct orbit_endpoint *, void *buf, size_t len);
ssize_t orbit_endpoint_read(struct orbit_endpoint *, void *buf, size_t len, int timeout_ms);
/* Waits for the whole frame; the try_read_exact errors, or -ORBIT_ETIMEDOUT. */
int     orbit_endpoint_read_exact(struct orbit_endpoint *, void *buf, size_t len, int timeout_ms);

/*
 * Writes. try_write copies what fits now: the count, -ORBIT_EAGAIN when the
 * ring is full, -ORBIT_ECLOSED after this end finished or reset, -ORBIT_ERESET
 * when the direction was reset (this side was reported dead), -ORBIT_EPEERGONE
 * when the reader stopped reading, closed or died, -ORBIT_ESTALE. Large writes
 * are published a quarter ring at a time so the reader drains as we copy.
 * try_write_exact publishes all len bytes or nothing (-ORBIT_ETOOLARGE above
 * the ring). write waits for room for at least one byte; write_all waits until
 * everything is written (on an error, a prefix may already be published);
 * write_exact waits for room for the whole frame. One timeout_ms bounds each call.
 */
ssize_t orbit_endpoint_try_write(struct orbit_endpoint *, const void *buf, size_t len);
int     orbit_endpoint_try_write_exact(struct orbit_endpoint *, const void *buf, size_t len);
ssize_t orbit_endpoint_write(struct orbit_endpoint *, const void *buf, size_t len, int timeout_ms);
int     orbit_endpoint_write_all(struct orbit_endpoint *, const void *buf, size_t len, int timeout_ms);
int     orbit_endpoint_write_exact(struct orbit_endpoint *, const void *buf, size_t len, int timeout_ms);

/*
 * Waits: 0 once a read (write; an exact write of `needed` bytes) would make
 * progress or the direction has ended (so the next call reports why);
 * -ORBIT_ETIMEDOUT, -ORBIT_ESTALE, -ORBIT_ETOOLARGE (needed > ring).
 */
int     orbit_endpoint_wait_readable(struct orbit_endpoint *, int timeout_ms);
int     orbit_endpoint_wait_writable(struct orbit_endpoint *, int timeout_ms);
int     orbit_endpoint_wait_writable_exact(struct orbit_endpoint *, size_t needed, int timeout_ms);
/* Their io_uring forms, by the prep contract of <orbit/uring.h>. */
int     orbit_endpoint_prep_wait_readable(struct orbit_endpoint *, struct io_uring_sqe *);
int     orbit_endpoint_prep_wait_writable(struct orbit_endpoint *, struct io_uring_sqe *);

/*
 * finish: FIN on this side's direction (idempotent); the reader drains, then
 * reads 0. reset: RESET; the reader gets -ORBIT_ERESET and queued bytes are
 * dropped. stop_reading: READER_GONE on the direction this side reads, keeping
 * the slot; the peer's writes fail with -ORBIT_EPEERGONE. rearm (side A only,
 * else -ORBIT_EMALFORMED): after side B closed, clear both directions and let
 * the same ticket be opened again: -ORBIT_EAGAIN while B still holds it,
 * -ORBIT_ESTALE if B never opened or died (close the endpoint instead).
 * close: an unfinished writer resets, the reader is gone, the side is released;
 * the slot empties once neither side is held. Frees the endpoint.
 * A finished side A whose side B was never opened lingers (as a pipe's bytes
 * do): its close (or its death, or its leave) keeps the stream, and the
 * ticket's opener reads every byte, then 0. The linger ends when that
 * opener lets go, or, unopened, ORBIT_STREAM_LINGER_MS (default 30000; 0:
 * none) after A let go, or when the node it was offered to dies or leaves;
 * an opener after that gets -ORBIT_ESTALE. Exchanges' control streams never
 * linger.
 */
int     orbit_endpoint_finish(struct orbit_endpoint *);      /* FIN */
void    orbit_endpoint_reset(struct orbit_endpoint *);       /* RESET */
void    orbit_endpoint_stop_reading(struct orbit_endpoint *);/* READER_GONE, keeps the slot */
int     orbit_endpoint_rearm(struct orbit_endpoint *);       /* side A only */
void    orbit_endpoint_close(struct orbit_endpoint *);       /* unfinished writer resets; reader gone; side released */

/*
 * orbit_endpoint_peer_closed - 1 if the reader of this side's writes has gone
 * (stopped, closed, reset or died); 0 if not, and from then on its departure
 * also rings this node's doorbell (until a rearm). A clean FIN is not
 * departure. orbit_endpoint_wait_peer_closed waits for it (0, -ORBIT_ETIMEDOUT).
 */
int     orbit_endpoint_peer_closed(struct orbit_endpoint *);
int     orbit_endpoint_wait_peer_closed(struct orbit_endpoint *, int timeout_ms);

/*
 * io_uring forms of read_exact and wait_writable_exact, by the prep contract
 * of <orbit/uring.h>: 0 the SQE holds a FUTEX_WAIT
 * that completes once `needed` bytes are queued (free), 1 ready now (the SQE
 * is a NOP), -ORBIT_ETOOLARGE above the ring, -ORBIT_ENOTSUP without the
 * kernel's futex opcodes. A bulk io_uring writer states a quarter ring here
 * so it is woken once per refill rather than for every byte freed.
 */
int     orbit_endpoint_prep_wait_readable_exact(struct orbit_endpoint *, size_t needed, struct io_uring_sqe *);
int     orbit_endpoint_prep_wait_writable_exact(struct orbit_endpoint *, size_t needed, struct io_uring_sqe *);

/* Counters of this handle since it was opened: bytes through its endpoints,
 * parks (futex sleeps and io_uring waits filled), wakes issued, doorbells rung. */
struct orbit_stream_stats {
    uint64_t bytes_written, bytes_read, parks, wakes, doorbells;
    uint64_t resv[6];      /* zero; a later release may give it meaning */
};
void orbit_streams_stats(struct orbit_streams *, struct orbit_stream_stats *out);  /* this process's counters */

/* ---- inspection (orbitctl) ------------------------------------------------ */

enum orbit_side_state { ORBIT_SIDE_FREE, ORBIT_SIDE_CLAIMED, ORBIT_SIDE_RELEASED, ORBIT_SIDE_DEAD };
#define ORBIT_STREAM_FIN         1u
#define ORBIT_STREAM_RESET       2u
#define ORBIT_STREAM_READER_GONE 4u
#define ORBIT_STREAM_CLOSE_WATCH 8u
struct orbit_stream_info {
    orbit_id id;
    struct { enum orbit_side_state state; uint16_t node; uint64_t incarnation; } side[2];
    struct { uint64_t queued; uint32_t flags; } dir[2];   /* dir[0]: A -> B, dir[1]: B -> A */
    uint64_t resv[2];      /* zero; a later release may give it meaning */
};
/* Live streams, a racy snapshot: fills up to max, returns how many there are. */
ssize_t orbit_streams_list(struct orbit_streams *, struct orbit_stream_info *out, size_t max);
uint8_t orbit_streams_kind(const struct orbit_streams *);
int     orbit_streams_spec(const struct orbit_streams *, struct orbit_stream_spec *out);

/* One direction of a live stream's ring, for tools (a racy snapshot). */
struct orbit_stream_ring {
    uint32_t capacity;           /* ring bytes */
    uint32_t queued;             /* bytes written and not yet read */
    uint32_t flags;              /* ORBIT_STREAM_* */
    bool     reader_waits;       /* its reader is parked or watching, for more than is queued */
    bool     writer_waits;       /* its writer is parked or watching, for more room than is free */
    uint32_t reader_need;        /* bytes the reader's last wait asked for */
    uint32_t writer_need;        /* free bytes the writer's last wait asked for */
    uint64_t resv[2];            /* zero */
};
/*
 * orbit_streams_rings - both directions of stream id (out[0]: A -> B,
 * out[1]: B -> A). A waiter that gave up leaves its mark until the next
 * wake, so a "waits" is a hint. 0; -ORBIT_EMALFORMED (not an id of this
 * table, out NULL), -ORBIT_ESTALE (not live in that generation),
 * -ORBIT_ECORRUPT (more queued than the ring holds).
 */
int orbit_streams_rings(struct orbit_streams *, orbit_id, struct orbit_stream_ring out[2]);

#ifdef __cplusplus
}
#endif
#endif
