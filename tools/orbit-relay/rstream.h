/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: requests relayed through an orbit stream to the
 * worker that owns the upstream their lease names (rstream.c). The
 * requester writes the frame and the request, offers the stream to the
 * owner, reads its status frame, and hands the response it relays to a
 * sink, as an upstream would.
 */
#ifndef ORBIT_RELAY_RSTREAM_H
#define ORBIT_RELAY_RSTREAM_H

#include "peer.h"
#include "sink.h"
#include "up_types.h"

#define RS_OUT 16384   /* a piece of the relayed response */

struct rstream {
    struct loop_obj o;
    struct orbit_endpoint *ep;
    struct sink *sink;              /* who reads the response, until it ends */
    struct orbit_lease lease;
    struct orbit_ticket ticket;
    enum { RS_WRITE, RS_STATUS, RS_BODY } phase;
    bool wait_armed, offered;
    bool refused;                   /* the owner refused before sending the request */
    bool idempotent;                /* the request may be sent twice */
    bool timed_out;                 /* the owner's response timed out, or the owner's answer did */
    bool handing;                   /* a piece is with the sink until it says drained */
    size_t wlen, woff;
    int64_t started;
    size_t body_bytes;
    struct rstream *next, *prev;    /* every live rstream */
    char *frame;                    /* the frame, then the request */
    char out[RS_OUT];
};

struct rs_set {
    struct loop *l;
    struct loop_kind kind;
    struct orbit_streams *streams;
    struct orbit_pool *pool;
    struct rstream *list;
    int n;
};

void rs_set_init(struct rs_set *s, struct loop *l, struct orbit_streams *streams, struct orbit_pool *pool);
/* Relays job to the owner of lease's upstream, the response to sink: 0 and *out, or a
 * negative code (the lease is abandoned: its owner's reconcile ages it out). */
int  rs_start(struct rs_set *s, const struct orbit_lease *lease, const struct up_job *job, struct sink *sink,
              struct rstream **out);
/* The sink took the piece handed to it: the next one, or the end. */
void rs_drained(struct rs_set *s, struct rstream *rs);
/* The sink goes away: the stream ends. */
void rs_abandon(struct rs_set *s, struct rstream *rs);
/* Requests whose owner vanished before answering, or never answered. */
void rs_check_leases(struct rs_set *s);
/* A request waits for its owner's answer (it waits on the pool key too). */
bool rs_waiting(const struct rs_set *s);
/* Without futex waits: every stream tries again (the streams' readiness descriptor moved). */
void rs_poke_all(struct rs_set *s);
/* The worker exits: every endpoint is closed. */
void rs_close_all(struct rs_set *s);

#endif
