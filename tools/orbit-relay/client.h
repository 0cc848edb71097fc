/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: client connections (client.c), the proxy's top. Each
 * reads requests off its socket (conn.c), checks and rewrites them (the
 * HTTP layer), hands each to the dispatcher (dispatch.c) and sends the
 * response it relays, or an error of its own.
 */
#ifndef ORBIT_RELAY_CLIENT_H
#define ORBIT_RELAY_CLIENT_H

#include "conn.h"
#include "dispatch.h"
#include "httpmsg.h"

#define CLIENT_IN            16384   /* client input: the first buffer (it grows) */
#define CLIENT_CHUNK_HEAD    16      /* a streamed chunked piece: room for its size line before it */
#define CLIENT_CHUNK_TAIL    8       /* ... and for CRLF and the last chunk after it */
#define CLIENT_DRAIN_IDLE_MS 1000    /* stopping: a connection idle this long is closed */

struct client {
    struct conn conn;               /* its socket; conn.o is the client's object */
    struct disp_req rq;             /* the request in flight, with the dispatcher */
    enum { C_READ, C_RUN, C_ERROR } state;
    bool keepalive, head_method;
    bool http10, idempotent;        /* the current request's */
    int deferred_status;            /* an error to answer once our 100 Continue is out */
    int64_t t_idle, t_head, t_read; /* idle since; first byte of the head; last body bytes */
    char *in; size_t in_cap;        /* client input: grows up to one request's limit */
    size_t in_len, used;            /* input bytes; bytes of the current request */
    struct hm_msg msg;              /* the request being read */
    bool head_done, continue_sent;
    bool streaming;                 /* the body goes on to the upstream as it arrives */
    uint64_t stream_left;           /* body bytes still to come from the client */
    size_t body_scan, body_out;     /* input framed so far; payload kept (de-chunked) */
    char *req; size_t req_cap;      /* the request as forwarded */
    size_t req_len;
    char err[256];
};

struct client_set {
    struct loop *l;
    struct loop_kind kind;          /* the clients' */
    struct loop_kind accept_kind;   /* the listener's accepts' */
    struct loop_obj accept;
    struct conn_set conns;
    struct disp *d;
    int lfd;                        /* the worker's listener, -1 once it stops accepting */
    bool accept_armed;
    bool accept_paused;             /* out of descriptors: the tick or a close re-arms it */
    int n;                          /* open connections */
};

/* 0, or -ENOMEM (the accepts could not join the loop). */
int  client_set_init(struct client_set *s, struct loop *l, struct disp *d, int lfd);
/* One accept, or a multishot one that stays armed. */
void client_accept_arm(struct client_set *s);
/* A paused accept tries again (at the tick). */
void client_accept_resume(struct client_set *s);
/* The worker stops: no more accepts (the listener stays open in the supervisor). */
void client_accept_stop(struct client_set *s);
/* After the completions' batch: reads the conns' stashes answered are handed on. */
void client_ready_run(struct client_set *s);

#endif
