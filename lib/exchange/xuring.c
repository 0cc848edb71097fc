/* SPDX-License-Identifier: MIT */
/* Exchange and arena: io_uring waits (credit, events, room, offers) and fixed buffers. */
#include <stdlib.h>
#include <liburing.h>
#include <orbit/uring.h>
#include "exch_layout.h"
#include "uring_internal.h"

int orbit_arena_prep_wait_credit(struct orbit_arena *a, size_t len, struct io_uring_sqe *sqe)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!a || !sqe || len == 0)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)"));
    if (!arena_is_member(a))
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_ENOTOWNER, "an observer cannot do that (join as a member)"));
    if (len > a->lay.lane_bytes)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_ETOOLARGE, "more than an arena lane or the control ring holds"));
    struct arena_want want = { a, (uint32_t)((len + a->slot_bytes - 1) / a->slot_bytes), NULL, false, false };
    return orb_uring_prep_wait(&a->lanes[a->node].credit, arena_pred_credit, &want, sqe, &a->stats);
}

int orbit_arena_register_buffers(struct orbit_arena *a, struct io_uring *ring)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!ring)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ring is NULL", __func__);
    if (!arena_is_member(a))
        return orb_fail_text(-ORBIT_ENOTOWNER, "an observer cannot do that (join as a member)");
    struct iovec *iov = calloc(a->fleet_capacity, sizeof *iov);
    if (!iov)
        return -ENOMEM;
    for (uint32_t lane = 0; lane < a->fleet_capacity; lane++)
        iov[lane] = (struct iovec){ arena_data_at(a, lane, 0), a->lay.lane_bytes };
    int rc = io_uring_register_buffers(ring, iov, a->fleet_capacity);
    free(iov);
    return rc;
}

int orbit_reservation_fixed(const struct orbit_reservation *r, struct orbit_fixed_buf *out)
{
    orb_error_clear();
    if (!r || !out || !r->arena || r->done || !arena_is_member(r->arena))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    *out = (struct orbit_fixed_buf){ r->arena->node, r->data, r->capacity };
    return 0;
}

int orbit_chunk_fixed(const struct orbit_chunk *c, struct orbit_fixed_buf *out)
{
    orb_error_clear();
    if (!c || !out || !c->arena || c->released)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    *out = (struct orbit_fixed_buf){ c->desc.node, (void *)(uintptr_t)c->data, c->len };
    return 0;
}

int orbit_exchange_prep_wait_event(struct orbit_exchange *x, struct io_uring_sqe *sqe)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!x || !sqe)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)"));
    if (x->recv_error || x->recv_state == ORBIT_FLOW_FINISHED || x->recv_state == ORBIT_FLOW_RESET)
        return orb_uring_prep_result(sqe, 1);   /* the next try_next reports why */
    return ORB_NESTED(orbit_endpoint_prep_wait_readable_exact(x->ctl, XFRAME_BYTES, sqe));
}

int orbit_exchange_prep_wait_sendable(struct orbit_exchange *x, struct io_uring_sqe *sqe)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    if (!x || !sqe)
        return orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)"));
    return ORB_NESTED(orbit_endpoint_prep_wait_writable_exact(x->ctl, XFRAME_BYTES, sqe));
}

int orbit_exchange_prep_wait_credit(struct orbit_exchange *x, size_t len, struct io_uring_sqe *sqe)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    return x ? ORB_NESTED(orbit_arena_prep_wait_credit(x->out, len, sqe)) : orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)"));
}

int orbit_exchanges_prep_wait_offer(struct orbit_exchanges *ex, struct io_uring_sqe *sqe)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return orb_uring_prep_result(sqe, refused);
    return ex ? ORB_NESTED(orbit_streams_prep_wait_offer(ex->control, sqe)) : orb_uring_prep_result(sqe, orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)"));
}
