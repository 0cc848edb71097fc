/* SPDX-License-Identifier: MIT */
/* orbit-bench exchange: what the thread model (bench_exchange.c) and the event-loop
 * model (bench_exchange_loop.c) share. */
#ifndef ORBIT_BENCH_EXCHANGE_H
#define ORBIT_BENCH_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <orbit/exchange.h>

#define CTL_KIND    235
#define ARENA_KIND  236
#define STREAM_KIND 237
#define MAXC        8

enum transport { T_EXCH, T_STREAM, T_SOCK, T_COUNT };

/* How each process serves its concurrent exchanges: a thread (and fleet node) per exchange,
 * or one thread multiplexing all of them with try_* calls and one blocking wait. */
enum model { M_THREAD, M_LOOP, M_COUNT };

struct opts {
    uint64_t bytes, relay_bytes;
    bool json, touch, relay, roundtrip;
    int only;                        /* a transport, or -1 for all */
    int model;                       /* a model, or -1 for both */
    unsigned conc;                   /* 0: both */
    int pairs;                       /* runs of every cell beside its baselines */
    const char *plot;                /* --plot FILE (--scale), or NULL */
    int cpu[2];                      /* --cpus: client, server; -1: not pinned */
    size_t body, chunk;              /* 0: both */
    int procs;                       /* --procs N (0: none); --scale: -1 */
    char fleet[64];
};

struct cfg { unsigned conc; size_t body, chunk; };

/* GB/s of request + response bytes, and how often a process slept per round trip: futex
 * parks (thread model, orbit transports) or blocking poll(2) calls (loop model). */
struct rt_result { double gbps, sleeps_per_rt; };

uint64_t bx_touch_sum(const void *p, size_t n);
struct orbit_fleet *bx_join_node(const char *fleet, int node);
struct orbit_exchange_spec bx_exch_spec(void);
extern const struct orbit_stream_spec bx_stream_spec;
extern const char *const bx_transport_name[T_COUNT];

/* How a run's two processes talk: up (server to client) and down pipes for set-up and
 * results, and one socketpair per concurrent round trip for the socket transport. */
struct bx_channels { int up[2], down[2]; int fds[MAXC][2]; unsigned conc; };
bool bx_channels_open(struct bx_channels *ch, unsigned conc);   /* false: nothing is open */
void bx_channels_close(struct bx_channels *ch);
uint64_t bx_round_trips(const struct opts *o, struct cfg c);    /* per concurrent pair */
/* Fork the server side, which runs server(arg) and never returns, and send it the number
 * of round trips per pair over the down pipe; -1 (channels closed) if fork failed. */
pid_t bx_fork_server(const struct opts *o, struct bx_channels *ch, void (*server)(void *), void *arg,
                     uint64_t iters);
void bx_pin(const struct opts *o, int role);   /* 0 client, 1 server: to --cpus' CPU */

/* One round-trip configuration in the thread model: client here, server in a child. */
struct rt_result bx_thread_run(struct opts *o, struct cfg c, enum transport t);

/* The relay: TCP -> arena -> another process -> TCP, or splice(2) / read+write in one process. */
enum relay_kind { R_ARENA, R_SPLICE, R_COPY, R_COUNT };
#define RCHUNK 65536u
double bx_relay_run(struct opts *o, enum relay_kind kind);   /* GB/s, 0 if it failed */

/* --procs / --scale: `pairs` client/server pairs at once through t; GB/s of all, or -1. */
#define SCALE_PAIRS_MAX 64
struct scale_gate { _Atomic int ready, go, failed; double gbps[SCALE_PAIRS_MAX]; };
double bx_scale_once(struct opts *o, int pairs, enum transport t, struct scale_gate *g);

/* One round-trip configuration in the event-loop model: client here, server in a child. */
struct rt_result bx_loop_run(const struct opts *o, struct cfg c, enum transport t);

#endif
