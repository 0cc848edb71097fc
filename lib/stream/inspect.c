/* SPDX-License-Identifier: MIT */
/* A live stream's rings as tools see them: fill, flags and who waits. */
#include "stream_layout.h"

/*
 * Bytes queued in d. The tail is read on both sides of the head: when it
 * did not move, head - tail is one moment's count, which the writer keeps
 * within the ring (it writes only up to tail + capacity); a count past it
 * is corruption. A reader that keeps moving leaves the last reading.
 */
static int queued_of(const struct stream_dir *d, uint32_t capacity, uint32_t *out)
{
    uint64_t t1 = 0, h = 0, t2 = 1;
    for (int i = 0; i < 4 && t1 != t2; i++) {
        t1 = atomic_load_explicit(&d->tail, memory_order_acquire);
        h = atomic_load_explicit(&d->head, memory_order_acquire);
        t2 = atomic_load_explicit(&d->tail, memory_order_acquire);
    }
    uint64_t q = h >= t2 ? h - t2 : 0;
    if (t1 == t2 && h - t1 > capacity)
        return orb_fail(-ORBIT_ECORRUPT, "orbit_streams_rings: %llu bytes queued in a ring of %u",
                        (unsigned long long)(h - t1), capacity);
    *out = (uint32_t)(q > capacity ? capacity : q);
    return 0;
}

static int ring_of(struct stream_dir *d, uint32_t capacity, struct orbit_stream_ring *r)
{
    *r = (struct orbit_stream_ring){ .capacity = capacity };
    int rc = queued_of(d, capacity, &r->queued);
    if (rc < 0)
        return rc;
    r->flags = atomic_load(&d->flags) & 0xfu;
    r->reader_need = atomic_load(&d->reader_need);
    r->writer_need = atomic_load(&d->writer_need);
    /* One waitword for both ends (never both parked at once): whose it is shows in the fill. */
    bool parked = atomic_load(&d->wait.parked) != 0;
    uint32_t watch = atomic_load(&d->watch);
    uint32_t rneed = r->reader_need ? r->reader_need : 1, wneed = r->writer_need ? r->writer_need : 1;
    bool ended = r->flags & (ORBIT_STREAM_FIN | ORBIT_STREAM_RESET);
    r->reader_waits = (parked || (watch & WATCH_READER)) && !ended && r->queued < rneed;
    r->writer_waits = (parked || (watch & WATCH_WRITER)) && !(r->flags & ORBIT_STREAM_READER_GONE) &&
                      capacity - r->queued < (wneed > capacity ? capacity : wneed);
    return 0;
}

int orbit_streams_rings(struct orbit_streams *s, orbit_id id, struct orbit_stream_ring out[2])
{
    int rc = streams_enter(s, __func__);
    if (rc < 0)
        return rc;
    size_t i;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (stream_locate(s, id, &i) < 0 || i >= s->lay.total_slots)
        return orb_fail(-ORBIT_EMALFORMED, "%s: not an id of this stream table", __func__);
    struct stream_slot *slot = &s->slots[i];
    uint32_t t = atomic_load_explicit(&slot->tenancy, memory_order_acquire);
    if (TENANCY_STATE(t) != SLOT_LIVE || TENANCY_GEN(t) != orbit_id_generation(id))
        return orb_fail_text(-ORBIT_ESTALE, "no live stream has that id");
    for (unsigned k = 0; k < 2; k++)
        if ((rc = ring_of(&slot->dir[k], s->buffer_bytes, &out[k])) < 0)
            return rc;
    /* A new tenancy while we read: the rings may be its, not the id's. */
    return atomic_load_explicit(&slot->tenancy, memory_order_acquire) == t ? 0
           : orb_fail_text(-ORBIT_ESTALE, "the stream ended while read");
}
