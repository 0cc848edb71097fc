/* SPDX-License-Identifier: MIT */
/* Helpers for the multi-process exchange tests (children and pipes come from proc.h). */
#ifndef XFLEET_H
#define XFLEET_H

#include <orbit/exchange.h>
#include "proc.h"

#define XF_CAPACITY 4
#define XF_OK(call) do { int rc_ = (call); TP_CHECK(rc_ == 0, "%s: %s", #call, orbit_strerror(rc_)); } while (0)

static inline struct orbit_fleet *xf_join(const char *name, int node, uint64_t inc)
{
    return tp_join(name, XF_CAPACITY, node, inc);
}

static inline struct orbit_exchanges *xf_exchanges(struct orbit_fleet *f, const struct orbit_exchange_spec *spec)
{
    struct orbit_exchanges *ex = NULL;
    int rc = orbit_exchanges_open(f, spec, &ex);
    if (rc != 0)
        tp_die("exchanges open: %s", orbit_strerror(rc));
    return ex;
}

/* Words k*n .. k*n+n-1 of the pattern into w. */
static inline void xf_gen(uint64_t k, uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] = tp_mix(k * n + i);
}

static inline uint64_t xf_fold(uint64_t h, const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001b3ull;
    return h;
}

static inline uint32_t xf_lane_free(struct orbit_arena *a, uint16_t node)
{
    struct orbit_arena_lane_info li[XF_CAPACITY];
    ssize_t n = orbit_arena_lanes(a, li, XF_CAPACITY);
    for (ssize_t i = 0; i < n && i < XF_CAPACITY; i++)
        if (li[i].node == node)
            return li[i].free;
    struct orbit_arena_spec sp;
    orbit_arena_spec(a, &sp);
    return sp.slots_per_lane;
}

/* One side of an exchange in a test process: its fleet handle, its exchanges, its end. */
struct xf_end {
    struct orbit_fleet *f;
    struct orbit_exchanges *ex;
    struct orbit_exchange *x;
};

/* The test's side A: node 0 of fleet name, an exchange created, its ticket in *t. */
static inline struct xf_end xf_create(const char *name, uint64_t inc, const struct orbit_exchange_spec *spec,
                                      struct orbit_ticket *t)
{
    struct xf_end e = { .f = tu_join(name, XF_CAPACITY, 0, inc, tu_backing()) };
    ck_assert_int_eq(orbit_exchanges_open(e.f, spec, &e.ex), 0);
    ck_assert_int_eq(orbit_exchange_create(e.ex, &e.x, t), 0);
    return e;
}

/* A child's side B: node 1 of fleet name, the exchange whose ticket arrives on ticket_fd. */
static inline struct xf_end xf_take(const char *name, uint64_t inc, const struct orbit_exchange_spec *spec,
                                    int ticket_fd)
{
    struct xf_end e = { .f = xf_join(name, 1, inc) };
    e.ex = xf_exchanges(e.f, spec);
    struct orbit_ticket t = tp_recv_ticket(ticket_fd);
    XF_OK(orbit_exchange_open(e.ex, &t, &e.x));
    return e;
}

/* The end, its exchanges and its fleet handle closed (the fleet stays: the test unlinks it). */
static inline void xf_end_close(struct xf_end *e)
{
    orbit_exchange_close(e->x);
    orbit_exchanges_close(e->ex);
    orbit_fleet_leave(e->f);
}

#endif
