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

#endif
