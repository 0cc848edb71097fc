/* SPDX-License-Identifier: MIT */
/* What one life holds in a streams table: the sides it claims and the bytes queued towards them. */
#include <stdlib.h>
#include <orbit/inspect.h>
#include "stream_layout.h"

void stream_account(void *table, uint16_t node, uint64_t inc, struct orbit_reclaim *out)
{
    struct orbit_streams *s = table;
    ssize_t n = orbit_streams_list(s, NULL, 0);
    struct orbit_stream_info *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    ssize_t got = v ? orbit_streams_list(s, v, (size_t)n) : 0;
    for (ssize_t i = 0; i < got && i < n; i++)
        for (int side = 0; side < 2; side++) {
            if (v[i].side[side].state != ORBIT_SIDE_CLAIMED || v[i].side[side].node != node ||
                v[i].side[side].incarnation != inc)
                continue;
            out->stream_sides++;
            /* Side A reads dir[1] (B -> A), side B reads dir[0]. */
            out->stream_unread += v[i].dir[side == 0 ? 1 : 0].queued;
        }
    free(v);
}
