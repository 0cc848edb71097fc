/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: a client's socket (conn.c), on the loop. Reads go
 * where their reader asks, through a multishot receive into provided
 * buffers (what comes before it asks waits in a stash) or a plain receive;
 * a send is one piece of bytes, or of a pipe (splice), until all of it went.
 * What completes is returned to the conn's owner, which calls nothing of it
 * back from here.
 */
#ifndef ORBIT_RELAY_CONN_H
#define ORBIT_RELAY_CONN_H

#include "loop.h"

#define CONN_ZC_MIN    16384         /* sends this long go zero-copy (WF_ZC) */
#define CONN_STASH_MAX (256u << 10)  /* received ahead of the reader: the receive pauses past this */

/* The conn's operations on its owner's object. */
enum conn_op { CONN_OP_RECV = 1, CONN_OP_MRECV, CONN_OP_SEND, CONN_OP_POLL };

struct conn {
    struct loop_obj o;              /* the owner's object: its first member */
    int fd;                         /* a direct descriptor's index when direct */
    bool direct;
    bool closing;                   /* shut down: nothing more is asked of it */
    bool recv_armed, send_armed;    /* a read, a send in progress */
    /* multishot receive: what came in that nobody asked for yet, and who asks */
    bool ms_armed, ms_paused, ms_eof, ms_off, on_ready;
    int ms_err;
    char *rd_dst; size_t rd_n;      /* where the bytes asked for go (recv_armed) */
    char *stash; size_t stash_len, stash_off, stash_cap;
    struct conn *ready_next;
    int zc_res;                     /* a zero-copy send: its result waits for its notification */
    /* the send in progress: out_len bytes at out, or in the pipe pipe_rd (splice) */
    const char *out; size_t out_len, out_off;
    int pipe_rd;
    int64_t t_send;                 /* the send began or last made progress */
};

/* A worker's conns: the loop, and the conns whose stash holds what their reader asked for. */
struct conn_set {
    struct loop *l;
    struct conn *ready;
};

/* What a completion (conn_on_cqe) or a stash (conn_ready_take) brought the owner. */
enum conn_event {
    CONN_NOTHING,
    CONN_READ,                      /* res > 0 bytes at the read's dst, or res <= 0: the end or an error */
    CONN_SENT,                      /* res > 0: the piece went whole; res <= 0: the socket failed */
};

/* A new conn on a socket the loop accepted; its object already joined the loop. */
void conn_init(struct conn *c, int fd, bool direct);
void conn_free(struct conn *c);
/* Asks for up to n bytes at dst: a receive, or the stash's next bytes (conn_ready_take). */
void conn_read(struct conn_set *s, struct conn *c, char *dst, size_t n);
/* A piece of n bytes at p goes out (zero-copy when long and on; CONN_SENT at its end). */
void conn_send(struct loop *l, struct conn *c, const char *p, size_t n);
/* n bytes at p sent now by the worker itself (so a splice may follow within the turn):
 * 1 all went; 0 the rest goes as an io_uring send (CONN_SENT); -errno the socket failed. */
int  conn_send_now(struct loop *l, struct conn *c, const char *p, size_t n);
/* n bytes waiting in the pipe pipe_rd go by splice: 1 all went now; 0 the socket is full
 * (a poll for room goes on, CONN_SENT at the end); -errno the socket failed. */
int  conn_send_pipe(struct loop *l, struct conn *c, int pipe_rd, size_t n);
/* Both directions end (what is pending completes); with close_too the descriptor goes. */
void conn_shutdown(struct loop *l, struct conn *c, bool close_too);
/* Stashed bytes nobody asked for yet. */
size_t conn_stash_avail(const struct conn *c);
/* A completion of one of the conn's operations (CONN_OP_*). */
enum conn_event conn_on_cqe(struct conn_set *s, struct conn *c, unsigned op, int res, uint32_t flags, int *out);
/* After the completions' batch: the next conn whose reader's bytes were stashed (NULL: none),
 * and what it brought (*ev, *res). */
struct conn *conn_ready_take(struct conn_set *s, enum conn_event *ev, int *res);

#endif
