/* SPDX-License-Identifier: MIT */
/*
 * Streams in place: the ring's free space (queued bytes) handed to the writer
 * (the reader) as up to two spans, the second where the ring wraps, to fill
 * (read) where they are; commit (consume) then publishes head (tail) exactly
 * as a copying write (read) does, with the same wake test. Nothing shared is
 * written before the commit or the consume: a span is this end's to use until
 * then, and the other end never touches it (the writer writes only past head,
 * the reader reads only below it).
 */
#include "ring.h"

/* n bytes of the ring from pos as spans; how many (0 when n is 0). */
static int spans_of(unsigned char *ring, size_t cap, uint64_t pos, size_t n, struct orbit_span span[2])
{
    size_t start = (size_t)(pos & (cap - 1)), first = n < cap - start ? n : cap - start;
    span[0] = (struct orbit_span){ n ? ring + start : NULL, first };
    span[1] = (struct orbit_span){ first < n ? ring : NULL, n - first };
    return n == 0 ? 0 : first < n ? 2 : 1;
}

static int span_enter(const struct orbit_endpoint *ep, const struct orbit_span *span, size_t min, int timeout_ms,
                      const char *call)
{
    int refused = endpoint_enter(ep, call);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, call) < 0)
        return -ORBIT_EMALFORMED;
    if (!span)
        return orb_fail(-ORBIT_EMALFORMED, "%s: span is NULL", call);
    if (min > ep->s->buffer_bytes)
        return -ORBIT_ETOOLARGE;
    return 0;
}

/* The free space now, when it is at least need: its spans; -ORBIT_EAGAIN when it is less. */
static int room_spans(struct orbit_endpoint *ep, uint64_t need, struct orbit_span span[2])
{
    int rc = stream_write_refusal(ep);
    if (rc < 0)
        return rc;
    size_t cap = ep->s->buffer_bytes;
    uint64_t head = atomic_load_explicit(&ep->wr->head, memory_order_relaxed);
    /* Acquire: the reader's reads of what it gave back are done before we write there. */
    ep->tail_seen = atomic_load_explicit(&ep->wr->tail, memory_order_acquire);
    uint64_t used = head - ep->tail_seen;
    if (used > cap)
        return -ORBIT_ECORRUPT;
    if (cap - used < need)
        return -ORBIT_EAGAIN;
    ep->span_wr_end = head + (cap - used);
    return spans_of(ep->wr_ring, cap, head, cap - (size_t)used, span);
}

int orbit_endpoint_write_span(struct orbit_endpoint *ep, size_t min, int timeout_ms, struct orbit_span span[2])
{
    int rc = span_enter(ep, span, min, timeout_ms, __func__);
    if (rc < 0)
        return rc == -ORBIT_ETOOLARGE ? stream_write_said(rc, ep, min, timeout_ms) : rc;
    uint64_t need = min ? min : 1;
    rc = room_spans(ep, need, span);
    if (rc == -ORBIT_EAGAIN && timeout_ms == 0) {
        /* A try: ask for the doorbell, then look once more (as orbit_endpoint_try_write). */
        stream_writer_need(ep, (uint32_t)need);
        stream_watch(ep->wr, WATCH_WRITER);
        rc = room_spans(ep, need, span);
    }
    struct orb_deadline deadline = orb_deadline_in(rc == -ORBIT_EAGAIN ? timeout_ms : -1);
    while (rc == -ORBIT_EAGAIN && timeout_ms != 0) {
        int w = stream_wait_room(ep, (uint32_t)need, &deadline);
        if (w < 0)
            return stream_write_said(w, ep, min, timeout_ms);
        rc = room_spans(ep, need, span);
    }
    return rc < 0 ? stream_write_said(rc, ep, min, timeout_ms) : rc;
}

int orbit_endpoint_commit(struct orbit_endpoint *ep, size_t len)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    int rc = stream_write_refusal(ep);
    if (rc < 0)
        return stream_write_said(rc, ep, len, 0);
    uint64_t head = atomic_load_explicit(&ep->wr->head, memory_order_relaxed);
    if (head > ep->span_wr_end || len > ep->span_wr_end - head)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %zu bytes is more than orbit_endpoint_write_span gave "
                        "(%llu left)", __func__, len,
                        (unsigned long long)(head > ep->span_wr_end ? 0 : ep->span_wr_end - head));
    if (len == 0)
        return 0;
    /* The bytes were written in place before this release store publishes them. */
    if (publish_head(ep, head, head + len))
        stream_dir_wake(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 0 : 1, WATCH_READER);
    orb_tally_add(&ep->s->tally, STREAM_TALLY_WRITTEN, len);
    orb_count(&ep->s->ctr, STREAM_CTR_BYTES_WRITTEN, len);
    return 0;
}

/* What is queued now, when it is at least need or the writer finished: its spans (0 at the
 * end); -ORBIT_EAGAIN when it is less. */
static int queued_spans(struct orbit_endpoint *ep, uint64_t need, struct orbit_span span[2])
{
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    /* Flags before head: FIN is raised after the last publish, so head read after it is final. */
    uint32_t flags = atomic_load_explicit(&ep->rd->flags, memory_order_acquire);
    if (flags & DIR_RESET)
        return -ORBIT_ERESET;
    size_t cap = ep->s->buffer_bytes;
    uint64_t tail = atomic_load_explicit(&ep->rd->tail, memory_order_relaxed);
    /* Acquire: the bytes up to head were written before the writer published it. */
    uint64_t avail = atomic_load_explicit(&ep->rd->head, memory_order_acquire) - tail;
    if (avail > cap)
        return -ORBIT_ECORRUPT;
    if (avail < need && !(flags & DIR_FIN))
        return -ORBIT_EAGAIN;
    ep->span_rd_end = tail + avail;
    return spans_of(ep->rd_ring, cap, tail, (size_t)avail, span);
}

int orbit_endpoint_read_span(struct orbit_endpoint *ep, size_t min, int timeout_ms, struct orbit_span span[2])
{
    int rc = span_enter(ep, span, min, timeout_ms, __func__);
    if (rc < 0)
        return rc == -ORBIT_ETOOLARGE ? stream_read_said(rc, ep, min, timeout_ms) : rc;
    uint64_t need = min ? min : 1;
    rc = queued_spans(ep, need, span);
    if (rc == -ORBIT_EAGAIN && timeout_ms == 0) {
        /* A try: ask for the doorbell, then look once more (as orbit_endpoint_try_read). */
        stream_reader_need(ep, (uint32_t)need);
        stream_watch(ep->rd, WATCH_READER);
        rc = queued_spans(ep, need, span);
    }
    struct orb_deadline deadline = orb_deadline_in(rc == -ORBIT_EAGAIN ? timeout_ms : -1);
    while (rc == -ORBIT_EAGAIN && timeout_ms != 0) {
        int w = stream_wait_data(ep, (uint32_t)need, &deadline);
        if (w < 0)
            return stream_read_said(w, ep, min, timeout_ms);
        rc = queued_spans(ep, need, span);
    }
    return rc < 0 ? stream_read_said(rc, ep, min, timeout_ms) : rc;
}

int orbit_endpoint_consume(struct orbit_endpoint *ep, size_t len)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return stream_read_said(rc, ep, len, 0);
    uint64_t tail = atomic_load_explicit(&ep->rd->tail, memory_order_relaxed);
    if (tail > ep->span_rd_end || len > ep->span_rd_end - tail)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %zu bytes is more than orbit_endpoint_read_span gave "
                        "(%llu left)", __func__, len,
                        (unsigned long long)(tail > ep->span_rd_end ? 0 : ep->span_rd_end - tail));
    if (len == 0)
        return 0;
    /* Our reads of the bytes are done before this release store gives them back. */
    if (publish_tail(ep, tail, tail + len))
        stream_dir_wake(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 1 : 0, WATCH_WRITER);
    orb_tally_add(&ep->s->tally, STREAM_TALLY_READ, len);
    orb_count(&ep->s->ctr, STREAM_CTR_BYTES_READ, len);
    return 0;
}
