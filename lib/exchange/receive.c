/* SPDX-License-Identifier: MIT */
/*
 * Exchanges: the receiving side of a flow and closing an endpoint.
 *
 * Each event read from the control ring is decoded and checked (frame well formed, our
 * exchange and flow, a legal step of New -> START -> DATA* -> FIN | RESET, chunk ids
 * in order) before its descriptor reaches the arena, which checks it again before any
 * pointer is formed. A refusal ends the flow for this receiver with a sticky error.
 */
#include <stdlib.h>
#include <string.h>
#include "exch_layout.h"

static int fail(struct orbit_exchange *x, int err)
{
    x->recv_state = ORBIT_FLOW_FAILED;
    x->recv_error = err;
    return err;
}

/* A chunk named by an event we refuse or discard goes back to its producer, if it is ours to take. */
static void drop_chunk(struct orbit_exchange *x, const struct xframe *f)
{
    struct orbit_chunk c;
    if ((f->flags & XFRAME_HAS_PAYLOAD) && arena_take(x->in, &f->desc, x->id, x->in_flow, &c) == 0)
        orbit_chunk_release(&c);
}

/* Whether the event is a legal next step of this flow. */
static bool lifecycle_ok(const struct orbit_exchange *x, const struct xframe *f)
{
    bool payload = f->flags & XFRAME_HAS_PAYLOAD;
    switch (f->event) {
    case ORBIT_EXCHANGE_START:
        return x->recv_state == ORBIT_FLOW_NEW && (!payload || f->chunk_id == x->recv_next);
    case ORBIT_EXCHANGE_DATA:
        return x->recv_state == ORBIT_FLOW_OPEN && f->chunk_id == x->recv_next;
    case ORBIT_EXCHANGE_FIN:
        return x->recv_state == ORBIT_FLOW_OPEN;
    default:
        return x->recv_state == ORBIT_FLOW_NEW || x->recv_state == ORBIT_FLOW_OPEN;
    }
}

/* The control direction we read was reset (peer closed unfinished, or died). */
static bool ctl_reset(struct orbit_exchange *x)
{
    char none;
    return ORB_QUIET(orbit_endpoint_try_read(x->ctl, &none, 0)) == -ORBIT_ERESET;
}

static void advance(struct orbit_exchange *x, const struct xframe *f)
{
    if (f->event == ORBIT_EXCHANGE_START)
        x->recv_state = ORBIT_FLOW_OPEN;
    else if (f->event == ORBIT_EXCHANGE_FIN)
        x->recv_state = ORBIT_FLOW_FINISHED;
    else if (f->event == ORBIT_EXCHANGE_RESET)
        x->recv_state = ORBIT_FLOW_RESET;
    orb_tally_add(&x->ex->tally, EXCH_TALLY_EVENTS_RECEIVED, 1);
}

static int handle(struct orbit_exchange *x, const unsigned char buf[XFRAME_BYTES], struct orbit_exchange_event *ev)
{
    struct xframe f;
    if (xframe_decode(buf, &f) < 0 || f.exchange != x->id || f.flow != x->in_flow)
        return fail(x, -ORBIT_ECORRUPT);
    if (!lifecycle_ok(x, &f)) {
        drop_chunk(x, &f);
        return fail(x, -ORBIT_EMALFORMED);
    }
    memset(ev, 0, sizeof *ev);
    ev->type = (enum orbit_exchange_event_type)f.event;
    ev->chunk.released = true;
    if (f.flags & XFRAME_HAS_PAYLOAD) {
        int rc = arena_take(x->in, &f.desc, x->id, x->in_flow, &ev->chunk);
        if (rc == -ORBIT_ESTALE && ctl_reset(x))
            return orb_fail_text(-ORBIT_ERESET, "the producer reset the exchange and took its chunks back");   /* the producer gave up and took its chunks back */
        if (rc < 0)
            return fail(x, rc);
        ev->chunk_id = f.chunk_id;
        x->recv_next++;
        orb_tally_add(&x->ex->tally, EXCH_TALLY_CHUNKS_RECEIVED, 1);
        orb_tally_add(&x->ex->tally, EXCH_TALLY_BYTES_RECEIVED, f.desc.len);
    }
    ev->reset_code = f.reset_code;
    advance(x, &f);
    return 0;
}

static int next_event(struct orbit_exchange *x, struct orbit_exchange_event *ev, int timeout_ms, bool try_only)
{
    if (!x || !ev)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (x->recv_error)
        return x->recv_error;
    if (x->recv_state == ORBIT_FLOW_FINISHED || x->recv_state == ORBIT_FLOW_RESET)
        return orb_fail_text(-ORBIT_ECLOSED, "this side already finished or reset its sending direction");
    unsigned char buf[XFRAME_BYTES];
    int rc = try_only ? ORB_NESTED(orbit_endpoint_try_read_exact(x->ctl, buf, sizeof buf))
                      : ORB_NESTED(orbit_endpoint_read_exact(x->ctl, buf, sizeof buf, timeout_ms));
    if (rc == -ORBIT_EMALFORMED)
        return fail(x, rc);   /* the control stream ended without FIN or RESET, or mid-event */
    if (rc < 0)
        return rc;
    return handle(x, buf, ev);
}

int orbit_exchange_try_next(struct orbit_exchange *x, struct orbit_exchange_event *ev)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    return next_event(x, ev, 0, true);
}

int orbit_exchange_next(struct orbit_exchange *x, struct orbit_exchange_event *ev, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return next_event(x, ev, timeout_ms, false);
}

/* ---- closing --------------------------------------------------------------------- */

/* Events still queued for us: their chunks go back to the producer. */
static void drain(struct orbit_exchange *x)
{
    unsigned char buf[XFRAME_BYTES];
    while (ORB_QUIET(orbit_endpoint_try_read_exact(x->ctl, buf, sizeof buf)) == 0) {
        struct xframe f;
        if (xframe_decode(buf, &f) == 0 && f.exchange == x->id && f.flow == x->in_flow)
            drop_chunk(x, &f);
    }
}

/* In a fork child only the child's memory goes: no flags, no drain, no withdraw. */
void orbit_exchange_close(struct orbit_exchange *x)
{
    orb_error_clear();
    if (!x)
        return;
    if (!orb_handle_ours(x->fork_generation)) {
        orbit_endpoint_close(x->ctl);
        free(x);
        return;
    }
    /* Reader gone first (an RMW on the direction's flags), then drain: an event published
     * after the flag is seen by its writer's peer check, one before it by our drain. */
    orbit_endpoint_stop_reading(x->ctl);
    drain(x);
    int gone = ORB_QUIET(orbit_endpoint_peer_closed(x->ctl));
    orbit_endpoint_close(x->ctl);
    /* Our chunks nobody will take: the flow did not end cleanly (the close reset the
     * direction, dropping queued events), the receiver left, or the stream ended. */
    if (x->chunks_out && arena_desc_live(x->out, &x->last_desc) &&
        (!x->ctl_finished || gone != 0 || !orbit_streams_is_live(x->ex->control, x->id)))
        arena_withdraw_exchange(x->out, x->id, x->out_flow);
    free(x);
}
