/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: requests a peer relays to us because their lease names
 * one of our upstreams (ostream.c, the owner's side of rstream.c). We take
 * the stream offered to us, read the frame and the request, accept the lease
 * and run the request on that upstream, whose response goes into the stream
 * (the ostream is the upstream's sink).
 */
#ifndef ORBIT_RELAY_OSTREAM_H
#define ORBIT_RELAY_OSTREAM_H

#include "peer.h"
#include "upstream.h"

struct ostream {
    struct loop_obj o;
    struct orbit_endpoint *ep;
    struct orbit_lease lease;
    enum { OS_HEAD, OS_REQ, OS_RUN, OS_CLOSING } phase;
    bool wait_armed, status_sent, peer_gone, writing;
    struct upstream *up;
    struct sink sink;               /* the upstream's response, into the stream */
    size_t req_len, req_got;
    const char *wbuf; size_t wlen, woff;
    char status_frame[PEER_STATUS_LEN];
    struct ostream *next, *prev;
    char head[PEER_FRAME_LEN];
    uint16_t flags;                 /* PEER_F_* */
    char *req;
};

struct os_set {
    struct loop *l;
    struct loop_kind kind;          /* the streams' */
    struct loop_kind offers_kind;   /* the wait on our offers word's */
    struct loop_obj offers;
    struct orbit_streams *streams;
    struct orbit_fleet *fleet;
    struct up_set *ups;
    struct ostream *list;
    int n;
    bool offer_armed;
};

/* 0, or -ENOMEM (the offers' wait could not join the loop). */
int  os_set_init(struct os_set *s, struct loop *l, struct orbit_streams *streams, struct orbit_fleet *fleet,
                 struct up_set *ups);
/* Takes the streams offered to us. A stopping worker takes them too: each carries a lease
 * granted before its upstreams drained (up_stop), and once they are served it has
 * nothing more to take. */
void os_take_offers(struct os_set *s);
/* Keeps a FUTEX_WAIT on our offers word in the ring (the tick tries again if it gives up). */
void os_arm_offer_wait(struct os_set *s);
/* At the tick: an offers wait that gave up for a moment is armed again. */
void os_tick(struct os_set *s);
/* Without futex waits: every stream tries again (the streams' readiness descriptor moved). */
void os_poke_all(struct os_set *s);
/* The worker exits: every endpoint is closed. */
void os_close_all(struct os_set *s);

#endif
