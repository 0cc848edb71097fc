/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: who reads a response. An upstream (upstream.c) or a
 * stream from the worker that owns one (rstream.c) hands a response to a
 * sink piece by piece, and tells it how the response ended; the sink says
 * when it took a piece by calling its source back (up_drained, rs_drained),
 * downward. The floor that reads (the client's request, a peer's stream)
 * implements the operations; the sources name none of it.
 */
#ifndef ORBIT_RELAY_SINK_H
#define ORBIT_RELAY_SINK_H

#include <stdbool.h>
#include <stddef.h>

struct conn;
struct sink;

/* How a response failed. */
enum sink_fail {
    SINK_RETRY,        /* nothing reached the reader, and the request may go again */
    SINK_BAD_GATEWAY,  /* nothing reached the reader; the request may not go again: 502 */
    SINK_TIMEOUT,      /* ... the backend did not answer in time: 504 */
    SINK_CUT,          /* part of the response reached the reader: its connection is cut */
    SINK_REFUSED,      /* no source could be had (out of memory or streams): 503 */
};

struct sink_ops {
    /* n bytes at p, a piece of the response (interim: a 1xx head before the final one);
     * the sink calls its source back once it took them. */
    void (*piece)(struct sink *k, const char *p, size_t n, bool interim);
    /* The response ended whole; k->close says whether the reader's connection closes after it. */
    void (*done)(struct sink *k);
    void (*failed)(struct sink *k, enum sink_fail how);
    /* A request whose body streams: the source sent what it had, the next piece may come. */
    void (*more)(struct sink *k);
    /* The reader's socket (k->conn) failed while the source wrote to it directly (splice). */
    void (*broken)(struct sink *k, int err);
    /* The sink answers someone who sees the lease end (a peer, through a stream): it hears
     * of a failure before the upstream leaves the pool, so its answer is there first. */
    bool answer_first;
};

struct sink {
    const struct sink_ops *ops;
    struct conn *conn;   /* the reader's socket, which a source may splice into; NULL: none */
    bool close;          /* set by the source: the reader's connection closes after this response */
};

#endif
