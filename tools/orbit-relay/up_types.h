/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: an upstream, a connection to the backend this worker
 * dialled and registered in the pool, and the job it runs: the state
 * upstream.c (its life and its jobs) and splice.c (a long body moved by
 * splice) share.
 */
#ifndef ORBIT_RELAY_UP_TYPES_H
#define ORBIT_RELAY_UP_TYPES_H

#include "conn.h"
#include "httpmsg.h"
#include "loop.h"
#include "sink.h"

#define UP_BUF          (256u << 10)  /* receive buffer: a 64 KiB body and its head in one recv */
#define UP_HEAD         16384         /* a response head's limit */
#define UP_LANE         256           /* relay_pool_spec.lane_capacity: our upstreams' slots */
#define UP_SPLICE_FIRST 16384         /* with splice: a response's first reads take this much, then ... */
#define UP_SPLICE_MIN   (16u << 10)   /* ... a Content-Length body with this much still to come is spliced */
#define UP_SPLICE_MAX   (1u << 20)    /* one splice into the pipe moves at most this much */

/* An upstream's operations on the loop. */
enum up_op { UP_OP_CONNECT = 1, UP_OP_SEND, UP_OP_RECV, UP_OP_POLL };

/* What an upstream needs to know of the request it carries. */
struct up_job {
    const char *req; size_t req_len;
    bool head_req;                  /* HEAD: the response has no body */
    bool idempotent;                /* may be sent again after reaching the backend */
    bool http10, keepalive;         /* the client's version and wish to keep its connection */
    bool more;                      /* the client's body follows req (streamed) */
};

struct upstream {
    struct loop_obj o;
    int fd;
    orbit_id id;
    bool registered, busy, broken, reused;
    struct orbit_execution exec;
    struct orbit_permit permit;     /* while connecting */
    void *creator;                  /* who asked for it, while connecting (up_create) */
    struct sockaddr_in addr;
    int64_t t_start;                /* connect or request start, for the timeouts */
    /* the job */
    struct up_job job;
    size_t req_off;
    bool sent_any;                  /* a byte of the request went to the backend */
    bool timed_out;
    bool linked;                    /* a linked send and receive are in flight (up_send) */
    bool handing;                   /* a piece is with the sink until it says drained */
    int idle_at;                    /* its place in the worker's idle list, or -1 */
    struct sink *sink;              /* who reads the response, or NULL: drained into the void */
    size_t len;                     /* bytes in buf */
    struct hm_msg msg;              /* the response */
    bool head_done, keepalive, close_client;
    size_t hout_len;                /* the rewritten head, not yet handed on */
    const char *body; size_t body_len;   /* body bytes in buf not yet handed on */
    size_t delivered;
    bool splicing;                  /* the body goes on by splice (WF_SPLICE, splice.c) */
    bool capped;                    /* the receive in flight was cut short for splice's sake */
    int pipe_rd, pipe_wr;           /* its pipe, made at the first splice; -1 before */
    size_t pipe_len;                /* bytes in the pipe the sink has not taken */
    char hout[2 * UP_HEAD + 128];   /* the heads, and the body when it cannot go before them */
    char buf[UP_BUF];
};

#endif
