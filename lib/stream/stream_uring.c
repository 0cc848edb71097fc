/* SPDX-License-Identifier: MIT */
/* Streams: FUTEX_WAIT SQEs for io_uring callers, after the same bounded spin as the blocking calls. */
#include <orbit/uring.h>
#include "stream_layout.h"
#include "uring_internal.h"

/* Spin first (the peer is usually mid-copy), then arm and fill the SQE. */
static int prep(struct orb_waitword *w, orb_wait_pred pred, void *ctx, struct orb_spin *spin,
                _Atomic uint32_t *cpu_hint, struct orbit_streams *s, struct io_uring_sqe *sqe)
{
    if (!orbit_uring_futex_supported())
        return orb_uring_unsupported(sqe);
    struct orb_deadline forever = orb_deadline_in(-1);
    int r = pred(ctx);
    if (r == 0)
        r = orb_wait_spin(pred, ctx, spin, &forever);
    if (r != 0)
        return orb_uring_prep_result(sqe, r > 0 ? 1 : r);
    stream_note_cpu(cpu_hint);
    return orb_uring_prep_wait(w, pred, ctx, sqe, &s->stats);
}

int orbit_endpoint_prep_wait_readable_exact(struct orbit_endpoint *ep, size_t needed,
                                            struct io_uring_sqe *sqe)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!ep || !sqe)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "the endpoint, streams handle or sqe is NULL"));
    if (needed > ep->s->buffer_bytes)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_ETOOLARGE, "more bytes asked for than the ring holds"));
    struct stream_room want = { ep, needed ? (uint32_t)needed : 1 };
    stream_reader_need(ep, want.need);
    return prep(&ep->rd->wait, stream_pred_readable, &want, &ep->read_spin, &ep->rd->reader_cpu, ep->s, sqe);
}

int orbit_endpoint_prep_wait_writable_exact(struct orbit_endpoint *ep, size_t needed,
                                            struct io_uring_sqe *sqe)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!ep || !sqe)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "the endpoint, streams handle or sqe is NULL"));
    if (needed > ep->s->buffer_bytes)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_ETOOLARGE, "more bytes asked for than the ring holds"));
    struct stream_room room = { ep, needed ? (uint32_t)needed : 1 };
    stream_writer_need(ep, room.need);
    return prep(&ep->wr->wait, stream_pred_room, &room, &ep->write_spin, &ep->wr->writer_cpu, ep->s, sqe);
}

int orbit_endpoint_prep_wait_readable(struct orbit_endpoint *ep, struct io_uring_sqe *sqe)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    return ORB_NESTED(orbit_endpoint_prep_wait_readable_exact(ep, 1, sqe));
}

int orbit_endpoint_prep_wait_writable(struct orbit_endpoint *ep, struct io_uring_sqe *sqe)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    return ORB_NESTED(orbit_endpoint_prep_wait_writable_exact(ep, 1, sqe));
}

int orbit_streams_prep_wait_offer(struct orbit_streams *s, struct io_uring_sqe *sqe)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!s || !sqe)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "the endpoint, streams handle or sqe is NULL"));
    if (!stream_is_member(s))
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_ENOTOWNER, "an observer has no offers (join as a member)"));
    return orb_uring_prep_wait(&stream_offers_of(s, s->node)->wait, stream_pred_offer_pending, s,
                               sqe, &s->stats);
}
