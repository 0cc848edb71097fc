/* SPDX-License-Identifier: MIT */
/* What the streams module offers the modules above it (exchange/) beyond the public API. */
#ifndef ORB_STREAMS_INTERNAL_H
#define ORB_STREAMS_INTERNAL_H

struct orbit_streams;

/* Streams this handle creates never linger (linger.c): an exchange's control table. */
void stream_table_linger_off(struct orbit_streams *s);

#endif
