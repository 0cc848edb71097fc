/* SPDX-License-Identifier: MIT */
/* Streams: waking a direction's ends, the one step every publication, flag and end shares. */
#include "stream_layout.h"

static void ring_node(struct orbit_streams *s, struct stream_slot *slot, unsigned side)
{
    /* A node read from shared memory: orb_fleet_ring_doorbell ignores one out of range. */
    orb_fleet_ring_doorbell(s->fleet, atomic_load(&slot->node[side]), &s->stats);
}

void stream_dir_wake(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t mask)
{
    struct stream_dir *d = &slot->dir[dir];
    /* Callers published with seq_cst before these loads. A waiter arms parked (or a
     * watch bit) before its last check, so one we do not see here sees the change:
     * with neither set there is nobody to wake, and the line the peer spins on is
     * left unwritten. */
    if (atomic_load(&d->wait.parked))
        orb_wait_signal(&d->wait, &s->stats);
    if (!(atomic_load(&d->watch) & mask))
        return;
    uint32_t rung = atomic_fetch_and(&d->watch, ~mask) & mask;
    if (rung & WATCH_READER)
        ring_node(s, slot, 1 - dir);
    if (rung & WATCH_WRITER)
        ring_node(s, slot, dir);
}

void stream_raise(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t flag)
{
    struct stream_dir *d = &slot->dir[dir];
    uint32_t before = atomic_fetch_or(&d->flags, flag);
    if (before & flag)
        return;
    stream_dir_wake(s, slot, dir, WATCH_READER | WATCH_WRITER);
    /* A writer watching for its reader's departure hears it without a pending try. */
    if ((before & DIR_CLOSE_WATCH) && (flag & (DIR_READER_GONE | DIR_RESET)))
        ring_node(s, slot, dir);
}
