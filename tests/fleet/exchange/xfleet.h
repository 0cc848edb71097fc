/* SPDX-License-Identifier: MIT */
/* Helpers for the multi-process exchange tests: children, pipes, tickets, joins. */
#ifndef XFLEET_H
#define XFLEET_H

#include <stdarg.h>
#include <orbit/exchange.h>
#include "testutil.h"

#define XF_CAPACITY 4

/* In a child: report and exit non-zero (Check asserts belong to the parent). */
static inline void xf_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "child %d: ", (int)getpid());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    _exit(1);
}
#define XF_CHECK(cond, ...) do { if (!(cond)) xf_die(__VA_ARGS__); } while (0)
#define XF_OK(call) do { int rc_ = (call); XF_CHECK(rc_ == 0, "%s: %s", #call, orbit_strerror(rc_)); } while (0)

static inline pid_t xf_spawn(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

struct xf_pipe { int rd, wr; };
static inline struct xf_pipe xf_pipe(void)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    return (struct xf_pipe){ fd[0], fd[1] };
}

static inline void xf_send(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            xf_die("pipe write failed");
        c += w;
        n -= (size_t)w;
    }
}

static inline bool xf_recv(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

static inline void xf_send_u64(int fd, uint64_t v) { xf_send(fd, &v, sizeof v); }
static inline uint64_t xf_recv_u64(int fd)
{
    uint64_t v = UINT64_MAX;
    return xf_recv(fd, &v, sizeof v) ? v : UINT64_MAX;
}

/* Tickets cross the pipe in their text form, as they would cross any setup channel. */
static inline void xf_send_ticket(int fd, const struct orbit_ticket *t)
{
    char text[64] = { 0 };
    if (orbit_ticket_format(t, text, sizeof text) < 0)
        xf_die("ticket format");
    xf_send(fd, text, sizeof text);
}

static inline struct orbit_ticket xf_recv_ticket(int fd)
{
    char text[64];
    struct orbit_ticket t;
    if (!xf_recv(fd, text, sizeof text) || (text[63] = '\0', orbit_ticket_parse(text, &t)) != 0)
        xf_die("ticket receive/parse");
    return t;
}

/* Join (in a child: die on failure). */
static inline struct orbit_fleet *xf_join(const char *name, int node, uint64_t inc)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = XF_CAPACITY;
    o.node = node;
    o.incarnation = inc;
    o.backing = tu_backing();
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(name, &o, &f);
    if (rc != 0)
        xf_die("join %s node %d: %s", name, node, orbit_strerror(rc));
    return f;
}

static inline struct orbit_exchanges *xf_exchanges(struct orbit_fleet *f, const struct orbit_exchange_spec *spec)
{
    struct orbit_exchanges *ex = NULL;
    int rc = orbit_exchanges_open(f, spec, &ex);
    if (rc != 0)
        xf_die("exchanges open: %s", orbit_strerror(rc));
    return ex;
}

/* Deterministic pseudo-random words (splitmix64). */
static inline uint64_t xf_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Words k*n .. k*n+n-1 of the pattern into w. */
static inline void xf_gen(uint64_t k, uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] = xf_mix(k * n + i);
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
