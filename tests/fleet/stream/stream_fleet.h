/* SPDX-License-Identifier: MIT */
/* Helpers for the multi-process stream tests: children, pipes, tickets as text. */
#ifndef STREAM_FLEET_H
#define STREAM_FLEET_H

#include <stdarg.h>
#include <orbit/stream.h>
#include "proc.h"

#define SF_CAPACITY 8

static inline struct orbit_fleet *sf_join(const char *name, int node, uint64_t inc)
{
    return tp_join(name, SF_CAPACITY, node, inc);
}

static inline struct orbit_streams *sf_streams(struct orbit_fleet *f, const struct orbit_stream_spec *spec)
{
    struct orbit_streams *s = NULL;
    int rc = orbit_streams_open(f, spec, &s);
    if (rc != 0)
        tp_die("streams open: %s", orbit_strerror(rc));
    return s;
}

/* The creating side of a two-process test: node 0 of fleet name, its streams, one stream. */
struct sf_creator {
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
};

static inline struct sf_creator sf_create(const char *name, uint64_t inc)
{
    struct sf_creator c = { .f = tu_join(name, SF_CAPACITY, 0, inc, tu_backing()) };
    ck_assert_int_eq(orbit_streams_open(c.f, NULL, &c.s), 0);
    ck_assert_int_eq(orbit_streams_create(c.s, &c.a, &c.t), 0);
    return c;
}

/* The taking side, in a child: node 1 of fleet name, its streams, the stream whose ticket
 * arrives on ticket_fd. */
struct sf_taker {
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_endpoint *b;
};

static inline struct sf_taker sf_take(const char *name, uint64_t inc, int ticket_fd)
{
    struct sf_taker k = { .f = sf_join(name, 1, inc) };
    k.s = sf_streams(k.f, NULL);
    struct orbit_ticket t = tp_recv_ticket(ticket_fd);
    TP_CHECK(orbit_streams_open_ticket(k.s, &t, &k.b) == 0, "open the ticket");
    return k;
}

/* Close what sf_take opened (the fleet stays: the creator unlinks it). */
static inline void sf_taker_close(struct sf_taker *k)
{
    orbit_endpoint_close(k->b);
    orbit_streams_close(k->s);
    orbit_fleet_leave(k->f);
}

/* Close what sf_create opened and unlink the fleet (before a test's verdicts: no segment left). */
static inline void sf_creator_close(struct sf_creator *c, const char *name)
{
    orbit_endpoint_close(c->a);
    orbit_streams_close(c->s);
    orbit_fleet_leave(c->f);
    orbit_fleet_unlink(name);
}

#endif
