/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: a long response body by splice (splice.c), for upstream.c. */
#ifndef ORBIT_RELAY_SPLICE_H
#define ORBIT_RELAY_SPLICE_H

#include "up_types.h"

/* Room for the next receive: a response's first reads are short while its body may be spliced. */
size_t splice_recv_room(const struct loop *l, const struct upstream *up);
/* A first read cut short by splice_recv_room whose head is in (the body from start on): when
 * the body's rest is not for splice, what of it is in the socket already is read now. */
void splice_read_rest_now(const struct loop *l, struct upstream *up, size_t start);
/* The response's body, its head read, goes on by splice: true once the pipe is made. */
bool splice_ready(const struct loop *l, struct upstream *up);
void splice_pipe_close(struct upstream *up);

/* Where splice_move stopped. */
enum splice_stop {
    SPLICE_DONE,       /* the body is all in the client's socket */
    SPLICE_WAIT,       /* for the backend (a poll, UP_OP_POLL) or the client's socket (CONN_SENT) */
    SPLICE_OFF,        /* the kernel splices no socket: off for good, read the rest as usual */
    SPLICE_CUT,        /* the backend's stream ended (or failed) before the body's end */
    SPLICE_BROKEN,     /* the client's socket failed: *err */
    SPLICE_NO_READER,  /* the sink let go: nobody reads the rest */
};
/* Moves the body on, from the backend's socket through the pipe to the sink's socket. */
enum splice_stop splice_move(struct loop *l, struct upstream *up, int *err);

#endif
