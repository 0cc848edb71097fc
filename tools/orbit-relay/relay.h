/* SPDX-License-Identifier: MIT */
/* orbit-relay: the demo fleet. Shared declarations of its parts. */
#ifndef ORBIT_RELAY_H
#define ORBIT_RELAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>
#include <liburing.h>
#include <orbit/fleet.h>
#include <orbit/pool.h>
#include <orbit/stream.h>

/* ---- options ----------------------------------------------------------- */

struct relay_opts {
    const char *fleet;           /* fleet name */
    struct sockaddr_in listen;   /* where workers accept */
    int listen_fd;               /* this worker's SO_REUSEPORT listener (the supervisor's) */
    struct sockaddr_in upstream; /* the backend */
    int workers;                 /* worker processes */
    int upstreams;               /* creation budget per backend (max_live) */
    size_t max_head;             /* request head limit (431 beyond) */
    size_t max_body;             /* request body limit, 0 none (413 beyond, before reading it) */
    int header_timeout_ms;       /* a request head (or a body's next bytes) must arrive within this */
    int idle_timeout_ms;         /* an idle keep-alive connection is closed after this */
    int connect_timeout_ms;      /* upstream connect */
    int response_timeout_ms;     /* upstream response head after the request went out */
    int drain_timeout_ms;        /* a stopping worker exits once idle, or after this */
    const char *control;         /* the supervisor's control socket (upgrades), or NULL */
    bool upgrade;                /* take over from the relay of the fleet at control */
    uint16_t fleet_capacity;     /* nodes of the fleet workers join; 0: relay_fleet_capacity(workers) */
    bool restart;                /* the supervisor replaces a dead worker */
    bool self_reap;              /* the supervisor runs orbit_fleet_reap on a death */
    bool report_deaths;          /* the supervisor reports its dead workers (off: the demo shows the reaper) */
    bool quiet;
    bool pinned;                 /* a worker: its supervisor pinned it to one CPU */
};

/* ---- small helpers (util.c) -------------------------------------------- */

void relay_opts_defaults(struct relay_opts *o);
int64_t relay_now_ns(void);
void relay_format_addr(const struct sockaddr_in *a, char *buf, size_t len);
int relay_listen_socket(const struct sockaddr_in *a, bool reuseport);
int relay_cpu_count(void);
/* An ORBIT_RELAY_* switch: set, and not "0". */
bool relay_env_on(const char *name);
/* A request the relay holds whole (its head and a body of at most RELAY_STREAM_MIN): at most this long. */
size_t relay_buffered_max(const struct relay_opts *o);
#define RELAY_STREAM_MIN (64u << 10)         /* bodies beyond this stream through */
/* Gets an SQE, submitting once if the SQ is full; never NULL for a ring of sane size. */
struct io_uring_sqe *relay_sqe(struct io_uring *ring);

/* Latency histogram (the load generator's): log-linear buckets, ~1.6% resolution, 1 ns .. ~70 s. */
#define HIST_SUB 64
#define HIST_BUCKETS (37 * HIST_SUB)
struct relay_hist { uint64_t count, max_ns; uint64_t b[HIST_BUCKETS]; };
void relay_hist_add(struct relay_hist *h, uint64_t ns);
uint64_t relay_hist_percentile(const struct relay_hist *h, double p);

/* ---- shared statistics (stats.c): /dev/shm/orbit-relay.<fleet> --------- */

#define RELAY_STATS_MAGIC   0x79616c6572626f72ull   /* "orbrelay" */
#define RELAY_STATS_VERSION 4
#define RELAY_STATS_SLOTS   64

enum relay_slot_state { SLOT_FREE, SLOT_STARTING, SLOT_RUNNING, SLOT_EXITED, SLOT_KILLED };

/* One worker life's counters, written by that worker only (gauges marked). */
struct relay_worker_stats {
    _Atomic int32_t  pid;
    _Atomic uint32_t state;          /* enum relay_slot_state, written by the supervisor */
    _Atomic uint32_t node;
    _Atomic uint32_t features;       /* the worker's io_uring features in use (WF_* in worker.h) */
    _Atomic uint64_t incarnation;
    _Atomic uint64_t accepted;       /* client connections */
    _Atomic uint64_t conns_open;     /* gauge */
    _Atomic uint64_t requests;       /* responses relayed from the backend */
    _Atomic uint64_t errors;         /* error responses this worker made (502, 503...) */
    _Atomic uint64_t local_leases;   /* leases on this worker's own upstreams */
    _Atomic uint64_t remote_leases;  /* leases on another worker's upstream */
    _Atomic uint64_t served_remote;  /* requests relayed for another worker */
    _Atomic uint64_t serving_remote; /* gauge: remote requests being served */
    _Atomic uint64_t streams;        /* streams created */
    _Atomic uint64_t retries;        /* a lease or stream failed before any byte: tried again */
    _Atomic uint64_t aborted;        /* client connections cut after a partial response */
    _Atomic uint64_t upstreams_created;
    _Atomic uint64_t upstreams_open; /* gauge */
    _Atomic uint64_t upstream_failures;
    _Atomic uint64_t pool_waits;     /* acquire said WAIT */
    _Atomic uint64_t refused;        /* offered leases this owner could not accept */
    _Atomic uint64_t futex_waits;    /* FUTEX_WAIT SQEs submitted */
    _Atomic uint64_t submits;        /* io_uring_enter calls */
    _Atomic uint64_t inflight;       /* gauge: client requests not yet answered */
    _Atomic uint64_t queued;         /* gauge: requests waiting for pool capacity */
    _Atomic uint64_t accept_pauses;  /* accepts paused: out of descriptors */
    _Atomic uint64_t quiet_waits;    /* pool waits for our own upstreams, with no FUTEX_WAIT armed */
    _Atomic uint32_t features_off;   /* ... and those an ORBIT_RELAY_NO_* variable turned off */
    _Atomic uint64_t spliced;        /* responses whose body went on by splice, not through a buffer */
    uint8_t pad[20];
};

struct relay_stats {
    uint64_t magic;
    uint32_t version, slots;
    int32_t  supervisor_pid;
    uint16_t listen_port;
    uint16_t workers;
    uint32_t upstreams;
    char     fleet[ORBIT_FLEET_NAME_MAX + 8];
    char     backend[48];
    _Atomic uint64_t spawned, deaths, restarts, supervisor_reaps;
    _Atomic uint64_t death_reports;  /* dead workers the supervisor reported to the fleet */
    struct relay_worker_stats w[RELAY_STATS_SLOTS];
};

/* The counters summed over every slot, and the gauges (summed over running slots only). */
#define RELAY_STATS_COUNTERS(X) X(accepted) X(requests) X(errors) X(local_leases) X(remote_leases) \
    X(served_remote) X(streams) X(retries) X(aborted) X(upstreams_created) X(upstream_failures) X(pool_waits) \
    X(refused) X(futex_waits) X(submits) X(quiet_waits) X(spliced)
#define RELAY_STATS_GAUGES(X) X(conns_open) X(serving_remote) X(upstreams_open) X(inflight) X(queued)

/* staged: beside the fleet's path until relay_stats_publish (a successor's, in an upgrade). */
int  relay_stats_create(const char *fleet, bool staged, struct relay_stats **out);
int  relay_stats_publish(const char *fleet);
int  relay_stats_open(const char *fleet, struct relay_stats **out);   /* read-only use */
void relay_stats_unmap(struct relay_stats *);
void relay_stats_unlink(const char *fleet, bool staged);
/* Sum of every slot's counters into *out (gauges only over running slots). */
void relay_stats_total(const struct relay_stats *, struct relay_worker_stats *out);
#define STAT_ADD(w, field, n) atomic_fetch_add_explicit(&(w)->field, (n), memory_order_relaxed)
#define STAT_SUB(w, field, n) atomic_fetch_sub_explicit(&(w)->field, (n), memory_order_relaxed)
#define STAT_GET(w, field)    atomic_load_explicit(&(w)->field, memory_order_relaxed)

/* ---- the fleet's tables ------------------------------------------------ */

/* Every process of a relay fleet opens the tables with these specs. */
extern const struct orbit_pool_spec relay_pool_spec;
extern const struct orbit_stream_spec relay_stream_spec;
/* The pool key of a backend: a 128-bit digest of its address. */
orbit_key relay_backend_key(const struct sockaddr_in *a);
uint16_t relay_fleet_capacity(int workers);

#endif
