/* SPDX-License-Identifier: MIT */
/* What the streams module offers the modules above it (exchange/) beyond the public API. */
#ifndef ORB_STREAMS_INTERNAL_H
#define ORB_STREAMS_INTERNAL_H

#include <stdbool.h>
#include <orbit/stream.h>

/*
 * Tell fn(ctx, id) of every linger this handle ends (linger.c), whoever meets
 * it through the handle: a create in the lane, an opener, a taker, a close.
 * Set once, before the handle is shared (its opener's own thread).
 */
void stream_table_on_linger_end(struct orbit_streams *s, void (*fn)(void *ctx, orbit_id id), void *ctx);

/* Stream id's sides and directions, as orbit_streams_list gives a row: 0, or
 * -ORBIT_ESTALE (not live) or -ORBIT_EMALFORMED (not an id of the table); quiet. */
int  stream_info_of(struct orbit_streams *s, orbit_id id, struct orbit_stream_info *out);

/* What a death report of `dead` does to stream id, done now: the sides that life holds end
 * (an unfinished direction resets, a finished A may linger). The report's own pass then finds
 * them ended: each side's end is one CAS. */
void stream_end_life(struct orbit_streams *s, orbit_id id, const struct orbit_owner *dead);

/*
 * Side B of stream id was never opened: does the stream still wait for it once
 * `dead` (NULL: nobody) is gone? Yes while side A is held by another life, or
 * A let go finished and its linger is not over (design.md section 6); also yes
 * when B was opened meanwhile. act: end a linger found over, as anyone who
 * meets it does (B FREE -> DEAD, the slot vacated).
 */
bool stream_linger_holds(struct orbit_streams *s, orbit_id id, const struct orbit_owner *dead, bool act);

#endif
