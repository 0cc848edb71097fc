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

#endif
