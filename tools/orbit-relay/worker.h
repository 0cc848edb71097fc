/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: the objects of one worker's io_uring loop. */
#ifndef ORBIT_RELAY_WORKER_H
#define ORBIT_RELAY_WORKER_H

#include "conn.h"
#include "share.h"
#include "sink.h"
#include "upstream.h"
#include "httpmsg.h"
#include "loop.h"
#include "relay.h"

#define W_IN      16384            /* client input: the first buffer (it grows) */
#define W_OUT     16384            /* relayed-response buffer (remote path) */
#define W_RETRIES 8                /* attempts of one request before 502 */
#define W_TICK_MS  200             /* housekeeping: reconcile, lease checks, gauges */
#define W_DRAIN_IDLE_MS 1000       /* stopping: a connection idle this long is closed */
#define W_CHUNK_HEAD 16            /* a streamed chunked piece: room for its size line before it */
#define W_CHUNK_TAIL 8             /* ... and for CRLF and the last chunk after it */
#define W_OWN_WAIT_MIN 8           /* own upstreams, all busy, that a request waits for rather than borrow */

/* Operations, the top byte of user_data; the rest names an object and its generation. */
enum w_op {
    OP_IGNORE = 0, OP_ACCEPT,
    OP_EP_WAIT, OP_OFFER_WAIT, OP_POOL_WAIT, OP_TIMER, OP_READY_STREAMS, OP_READY_POOL,
};

struct client;
struct upstream;
struct rstream;
struct ostream;


struct client {
    struct conn conn;               /* its socket; conn.o is the client's object */
    enum { C_READ, C_QUEUED, C_CREATE, C_LOCAL, C_REMOTE, C_ERROR } state;
    bool keepalive, head_method;
    bool http10, idempotent;        /* the current request's */
    int retries;
    int fail_status;                /* answered when the request fails before a byte went out */
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
    struct upstream *up;            /* C_LOCAL / C_CREATE */
    struct rstream *rs;             /* C_REMOTE */
    bool resp_started, resp_done;
    struct sink sink;               /* the response's reader, for its source */
    struct client *qnext, *qprev;   /* the pool wait queue */
    bool queued;
    char err[256];
};

struct rstream {
    struct loop_obj o;
    struct orbit_endpoint *ep;
    struct client *c;
    struct orbit_lease lease;
    struct orbit_ticket ticket;
    enum { RS_WRITE, RS_STATUS, RS_BODY } phase;
    bool wait_armed, offered;
    bool refused;                   /* the owner refused before sending the request */
    size_t wlen, woff;
    int64_t started;
    size_t body_bytes;
    struct rstream *next, *prev;    /* every live rstream */
    char *frame;                    /* the frame, then the request */
    char out[W_OUT];
};

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
    int32_t status;
    char status_frame[16];
    struct ostream *next, *prev;
    char head[48];
    uint16_t flags;                 /* RELAY_F_* */
    char *req;
};

/* The frame that opens a relay stream: the lease and the request's length. */
#define RELAY_FRAME_MAGIC 0x31594c52u   /* "RLY1" */
#define RELAY_STATUS_MAGIC 0x32594c52u  /* "RLY2" */
/* The request's flags, in the frame. */
#define RELAY_F_HEAD       1u
#define RELAY_F_IDEMPOTENT 2u
#define RELAY_F_HTTP10     4u
#define RELAY_F_KEEPALIVE  8u
/* The status frame: 0 and flags (RELAY_S_CLOSE: the client's connection closes after this
 * response), a negative code (refused before sending: try again), or RELAY_STATUS_SENT/TIMEOUT. */
#define RELAY_S_CLOSE      1u
#define RELAY_STATUS_SENT  1   /* failed after the request reached the backend */
#define RELAY_STATUS_TIMEOUT 2 /* ... by the response timeout: 504 */
void relay_frame_encode(char out[48], const struct orbit_lease *l, uint32_t req_len, uint16_t flags);
int  relay_frame_decode(const char in[48], struct orbit_lease *l, uint32_t *req_len, uint16_t *flags);

/* One worker: joins the fleet, serves on o->listen_fd until SIGTERM (worker.c). */
int worker_main(const struct relay_opts *o, struct relay_stats *st, int slot, int ready_fd);

/* ---- the worker and its modules ----------------------------------------- */

#define W_LANE 256   /* relay_stream_spec.lane_capacity and relay_pool_spec.lane_capacity */


/* The worker of one of its objects, by the kind the worker keeps in field. */
#define WORKER_OF(obj, field) ((struct worker *)(void *)((char *)(obj)->kind - offsetof(struct worker, field)))

struct worker {
    struct loop loop;               /* the ring, the objects, the clock, stopping */
    const struct relay_opts *o;
    struct relay_worker_stats *st;
    struct loop_kind k_client, k_rstream, k_ostream;
    struct loop_kind k_accept, k_timer, k_offers, k_pool_wait, k_ready_streams, k_ready_pool;
    struct loop_obj accept_obj, timer_obj, offers_obj, pool_wait_obj, ready_streams_obj, ready_pool_obj;
    struct orbit_fleet *fleet;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    orbit_key key;
    struct orbit_limits limits;
    int lfd;
    bool accept_paused;             /* out of descriptors: the tick or a close re-arms it */
    int64_t stop_deadline;
    /* the pool wait queue (FIFO) and what is armed */
    struct client *qhead, *qtail;
    bool pool_armed, offer_armed;
    bool decided_own;               /* the last acquire's WAIT was fair_decide's wait for our own */
    bool wait_own;                  /* ... and so the queue's head waits for our own upstreams */
    struct share share;             /* our share of the budget */
    struct up_set ups;              /* our upstreams */
    int n_clients, n_rs, n_os;
    struct orbit_policy policy;
    struct rstream *rs_list;
    struct ostream *os_list;
    /* readiness mode */
    int rfd_streams, rfd_pool;
    bool rfd_streams_armed, rfd_pool_armed;
    struct __kernel_timespec tick;
    bool accept_armed;
    struct conn_set conns;          /* the clients' sockets */
};

/* clients (client.c) */
void queue_remove(struct worker *w, struct client *c);
void queue_push(struct worker *w, struct client *c);
void client_close(struct worker *w, struct client *c);
void client_send(struct worker *w, struct client *c, const char *p, size_t n);
void client_send_interim(struct worker *w, struct client *c, const char *p, size_t n);
void client_error(struct worker *w, struct client *c, int status, const char *reason, bool close);
void client_resp_done(struct worker *w, struct client *c);
void client_job_failed(struct worker *w, struct client *c, bool retryable);
void client_on_send(struct worker *w, struct client *c, int res);
int client_send_now(struct worker *w, struct client *c, const char *p, size_t n);
int client_send_pipe(struct worker *w, struct client *c, int pipe_rd, size_t n);
void client_on_recv(struct worker *w, struct client *c, int res);
void client_on_cqe(struct worker *w, struct client *c, unsigned op, int res, uint32_t flags);
void client_ready_run(struct worker *w);
void accept_arm(struct worker *w);
void accept_resume(struct worker *w);
void client_check_timeouts(struct worker *w, struct client *c, int64_t now);
struct up_job client_job(const struct client *c);
void on_accept(struct worker *w, int res, uint32_t flags);

/* relay streams (streams.c) */
void rs_fail(struct worker *w, struct rstream *rs, bool retryable);
void rs_start(struct worker *w, struct client *c, const struct orbit_lease *lease);
void rs_step(struct worker *w, struct rstream *rs);
void rs_check_leases(struct worker *w);
void os_write_step(struct worker *w, struct ostream *os);
void os_step(struct worker *w, struct ostream *os);
void take_offers(struct worker *w);
void arm_offer_wait(struct worker *w);

/* the pool (pool.c) */
struct orbit_decision fair_decide(void *ctx, orbit_key key, const struct orbit_candidate *c, size_t n, uint32_t live, uint32_t creating, const struct orbit_limits *limits);
void dispatch(struct worker *w, struct client *c);
void sweep(struct worker *w);
extern const struct up_hooks worker_up_hooks;

#endif
