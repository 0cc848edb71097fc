/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: what a requester (rstream.c) and the owner of the
 * upstream it leased (ostream.c) share on the orbit stream between them
 * (peer.c): the frame that opens the stream (the lease, the request's
 * length and flags), the status frame the owner answers with, and the wait
 * for an endpoint's direction.
 */
#ifndef ORBIT_RELAY_PEER_H
#define ORBIT_RELAY_PEER_H

#include "loop.h"

#define PEER_FRAME_LEN  48
#define PEER_STATUS_LEN 16
#define PEER_LANE       256           /* relay_stream_spec.lane_capacity: streams a node */
#define PEER_FRAME_MAGIC  0x31594c52u /* "RLY1" */
#define PEER_STATUS_MAGIC 0x32594c52u /* "RLY2" */
/* The request's flags, in the frame. */
#define PEER_F_HEAD       1u
#define PEER_F_IDEMPOTENT 2u
#define PEER_F_HTTP10     4u
#define PEER_F_KEEPALIVE  8u
/* The status frame: 0 and flags (PEER_S_CLOSE: the client's connection closes after this
 * response), a negative code (refused before sending: try again), or PEER_STATUS_SENT/TIMEOUT. */
#define PEER_S_CLOSE          1u
#define PEER_STATUS_SENT      1   /* failed after the request reached the backend */
#define PEER_STATUS_TIMEOUT   2   /* ... by the response timeout: 504 */

/* A stream's operation on its object: a FUTEX_WAIT on one of its directions. */
#define PEER_OP_WAIT 1

void peer_frame_encode(char out[PEER_FRAME_LEN], const struct orbit_lease *l, uint32_t req_len, uint16_t flags);
int  peer_frame_decode(const char in[PEER_FRAME_LEN], struct orbit_lease *l, uint32_t *req_len, uint16_t *flags);
void peer_status_encode(char out[PEER_STATUS_LEN], int32_t status, uint32_t flags);
/* -1 when in is no status frame. */
int  peer_status_decode(const char in[PEER_STATUS_LEN], int32_t *status, uint32_t *flags);

/*
 * After a try_* call said EAGAIN: arms a FUTEX_WAIT (PEER_OP_WAIT on o) on the
 * direction and returns 1, or returns 0 when it is ready already (try again
 * now). Without the futex ops nothing is armed: the streams' readiness
 * descriptor covers every endpoint whose last try_* said EAGAIN, and the
 * object is stepped again when it fires. -1: the wait cannot be armed (the
 * next try_* will say why not).
 */
int peer_wait(struct loop *l, struct loop_obj *o, struct orbit_endpoint *ep, bool write, size_t need, bool *armed);

#endif
