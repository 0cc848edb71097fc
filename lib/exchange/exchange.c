/* SPDX-License-Identifier: MIT */
/*
 * Exchanges: the handle (control streams table + arenas), endpoints, and the sending
 * side of the per-flow state machine New -> START -> DATA* -> FIN | RESET.
 *
 * A chunk is published in three steps so a descriptor that cannot be delivered costs
 * nothing: arena_publish (head LIVE), the 64-byte event into the control ring, then
 * arena_settle; when the ring is full the head goes back to RESERVED and the caller
 * keeps the reservation for a retry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exch_layout.h"
#include "stream/streams_internal.h"
#include "core/readiness.h"

static int spec_check(const struct orbit_exchange_spec *spec)
{
    uint8_t c = spec->control.kind, ab = spec->a_to_b.kind, ba = spec->b_to_a.kind;
    if (c == ab || (ba != 0 && (ba == c || ba == ab)) || spec->control.buffer_bytes < XFRAME_BYTES)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return 0;
}

/* Its tables' closes: in a fork child they only unmap and free. */
void orbit_exchanges_close(struct orbit_exchanges *ex)
{
    orb_error_clear();
    if (!ex)
        return;
    if (ex->arena[1] && ex->arena[1] != ex->arena[0])
        orbit_arena_close(ex->arena[1]);
    orbit_arena_close(ex->arena[0]);
    orbit_streams_close(ex->control);
    orb_table_free(&ex->base);   /* the readiness descriptor, the tally; no segment */
}

int orbit_exchanges_open(struct orbit_fleet *f, const struct orbit_exchange_spec *spec,
                         struct orbit_exchanges **out)
{
    static const struct orbit_exchange_spec dflt = ORBIT_EXCHANGE_SPEC_DEFAULT;
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (!spec)
        spec = &dflt;
    if ((rc = orb_check_resv(spec->resv, sizeof spec->resv / sizeof spec->resv[0], __func__,
                             "ORBIT_EXCHANGE_SPEC_DEFAULT")) < 0)
        return rc;
    /* A shared arena (b_to_a.kind 0) never opens b_to_a: its reserved words are checked here. */
    if (spec->b_to_a.kind == 0 &&
        (rc = orb_check_resv(spec->b_to_a.resv, sizeof spec->b_to_a.resv / sizeof spec->b_to_a.resv[0],
                             __func__, "ORBIT_EXCHANGE_SPEC_DEFAULT (b_to_a.resv)")) < 0)
        return rc;
    if ((rc = spec_check(spec)) < 0)
        return orb_fail(rc, "%s: spec: the control, a_to_b and b_to_a kinds must differ (b_to_a 0: "
                        "shared) and control.buffer_bytes hold a frame (%u bytes)", __func__,
                        (unsigned)XFRAME_BYTES);
    struct orbit_exchanges *ex = orb_table_alloc(sizeof *ex, f);
    if (!ex)
        return orb_fail(-ENOMEM, "out of memory for a table handle (%zu bytes)", sizeof *ex);
    rc = ORB_NESTED(orbit_streams_open(f, &spec->control, &ex->control));
    if (rc == 0)   /* an exchange whose A closes before B opens ends, and its chunks return */
        stream_table_linger_off(ex->control);
    if (rc == 0)
        rc = ORB_NESTED(orbit_arena_open(f, &spec->a_to_b, &ex->arena[0]));
    if (rc == 0)
        rc = spec->b_to_a.kind == 0 ? (ex->arena[1] = ex->arena[0], 0)
                                    : ORB_NESTED(orbit_arena_open(f, &spec->b_to_a, &ex->arena[1]));
    if (rc < 0) {
        ORB_QUIET((orbit_exchanges_close(ex), 0));   /* the close keeps the failure's sentence */
        return rc;
    }
    *out = ex;
    return 0;
}

struct orbit_streams *orbit_exchanges_streams(struct orbit_exchanges *ex)
{
    if (exchanges_enter(ex, __func__) < 0)
        return NULL;
    return ex ? ex->control : NULL;
}

struct orbit_arena *orbit_exchanges_arena(struct orbit_exchanges *ex, enum orbit_flow flow)
{
    if (exchanges_enter(ex, __func__) < 0)
        return NULL;
    if (!ex || (flow != ORBIT_FLOW_A_TO_B && flow != ORBIT_FLOW_B_TO_A))
        return NULL;
    return ex->arena[flow == ORBIT_FLOW_A_TO_B ? 0 : 1];
}

/* ---- endpoints ------------------------------------------------------------------ */

static int wrap(struct orbit_exchanges *ex, struct orbit_endpoint *ctl, struct orbit_exchange **out)
{
    struct orbit_exchange *x = calloc(1, sizeof *x);
    if (!x) {
        orbit_endpoint_close(ctl);
        return -ENOMEM;
    }
    bool a = orbit_endpoint_side(ctl) == ORBIT_SIDE_A;
    *x = (struct orbit_exchange){
        .ex = ex, .ctl = ctl, .fork_generation = ex->fork_generation, .id = orbit_endpoint_id(ctl), .side = a ? ORBIT_SIDE_A : ORBIT_SIDE_B,
        .out = ex->arena[a ? 0 : 1], .in = ex->arena[a ? 1 : 0],
        .out_flow = a ? ORBIT_FLOW_A_TO_B : ORBIT_FLOW_B_TO_A, .in_flow = a ? ORBIT_FLOW_B_TO_A : ORBIT_FLOW_A_TO_B,
        .send_state = ORBIT_FLOW_NEW, .recv_state = ORBIT_FLOW_NEW, .send_next = 1, .recv_next = 1,
    };
    *out = x;
    return 0;
}

int orbit_exchange_create(struct orbit_exchanges *ex, struct orbit_exchange **a, struct orbit_ticket *b_ticket)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    if (!a || !b_ticket)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__,
                        !a ? "a" : "b_ticket");
    struct orbit_endpoint *ctl;
    int rc = ORB_NESTED(orbit_streams_create(ex->control, &ctl, b_ticket));
    return rc < 0 ? rc : wrap(ex, ctl, a);
}

int orbit_exchange_open(struct orbit_exchanges *ex, const struct orbit_ticket *t, struct orbit_exchange **b)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    if (!ex || !t || !b || t->side != ORBIT_SIDE_B)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    struct orbit_endpoint *ctl;
    int rc = ORB_NESTED(orbit_streams_open_ticket(ex->control, t, &ctl));
    return rc < 0 ? rc : wrap(ex, ctl, b);
}

int orbit_exchanges_offer(struct orbit_exchanges *ex, const struct orbit_ticket *t, uint16_t to_node)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    return ex ? ORB_NESTED(orbit_streams_offer(ex->control, t, to_node)) : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
}

int orbit_exchanges_take_offer(struct orbit_exchanges *ex, struct orbit_ticket *out)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    return ex ? ORB_NESTED(orbit_streams_take_offer(ex->control, out)) : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
}

int orbit_exchanges_wait_offer(struct orbit_exchanges *ex, int timeout_ms, struct orbit_ticket *out)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return ex ? ORB_NESTED(orbit_streams_wait_offer(ex->control, timeout_ms, out)) : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
}

orbit_id orbit_exchange_id(const struct orbit_exchange *x) { orb_error_clear(); return x ? x->id : 0; }
enum orbit_side orbit_exchange_side(const struct orbit_exchange *x)
{
    orb_error_clear();
    return x ? x->side : ORBIT_SIDE_A;
}
int orbit_exchange_peer(const struct orbit_exchange *x, struct orbit_owner *out)
{
    orb_error_clear();
    return x ? ORB_NESTED(orbit_endpoint_peer(x->ctl, out)) : orb_fail_text(-ORBIT_EMALFORMED, "the exchange is NULL");   /* whoever holds the other control side */
}
enum orbit_exchange_state orbit_exchange_send_state(const struct orbit_exchange *x)
{
    orb_error_clear();
    return x ? x->send_state : ORBIT_FLOW_FAILED;
}
enum orbit_exchange_state orbit_exchange_recv_state(const struct orbit_exchange *x)
{
    orb_error_clear();
    return x ? x->recv_state : ORBIT_FLOW_FAILED;
}

int orbit_exchanges_readiness(struct orbit_exchanges *ex)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    return orb_table_readiness(&ex->base, __func__);
}

void orbit_exchanges_stats(struct orbit_exchanges *ex, struct orbit_exchange_stats *out)
{
    if (exchanges_enter(ex, __func__) < 0)
        return;
    if (!ex || !out)
        return;
    uint64_t n[EXCH_TALLY_END];
    orb_tally_read(&ex->tally, n, EXCH_TALLY_END);
    *out = (struct orbit_exchange_stats){
        .events_sent = n[EXCH_TALLY_EVENTS_SENT], .events_received = n[EXCH_TALLY_EVENTS_RECEIVED],
        .chunks_sent = n[EXCH_TALLY_CHUNKS_SENT], .chunks_received = n[EXCH_TALLY_CHUNKS_RECEIVED],
        .bytes_sent = n[EXCH_TALLY_BYTES_SENT], .bytes_received = n[EXCH_TALLY_BYTES_RECEIVED],
    };
}

/* ---- sending ------------------------------------------------------------------- */

/* Milliseconds left before the deadline, for a call that takes a timeout. */
static int ms_left(const struct orb_deadline *d)
{
    if (d->forever)
        return -1;
    int64_t left = d->at_ns - orb_now_ns();
    return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

/* One event into the control ring: all 64 bytes or nothing. */
static int exch_publish(struct orbit_exchange *x, const struct xframe *f, int timeout_ms, bool try_only)
{
    unsigned char buf[XFRAME_BYTES];
    xframe_encode(f, buf);
    int rc = try_only ? ORB_NESTED(orbit_endpoint_try_write_exact(x->ctl, buf, sizeof buf))
                      : ORB_NESTED(orbit_endpoint_write_exact(x->ctl, buf, sizeof buf, timeout_ms));
    if (rc == 0)
        orb_tally_add(&x->ex->tally, EXCH_TALLY_EVENTS_SENT, 1);
    return rc;
}

/* Whether this flow may send `event` now. */
static int send_allowed(const struct orbit_exchange *x, uint8_t event)
{
    if (x->send_state == ORBIT_FLOW_FINISHED || x->send_state == ORBIT_FLOW_RESET)
        return orb_fail_text(-ORBIT_ECLOSED, "this side already finished or reset its sending direction");
    if (event == ORBIT_EXCHANGE_START)
        return x->send_state == ORBIT_FLOW_NEW ? 0 : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (event == ORBIT_EXCHANGE_RESET)
        return 0;
    return x->send_state == ORBIT_FLOW_OPEN ? 0 : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
}

/* The chunk was not delivered: keep the reservation for a retry, or give it up. */
static int undelivered(struct orbit_reservation *res, int rc)
{
    int back = arena_unpublish(res);
    if (back < 0)
        return back;
    if (rc != -ORBIT_EAGAIN && rc != -ORBIT_ETIMEDOUT)
        orbit_arena_cancel(res);
    return rc;
}

static void sent(struct orbit_exchange *x, uint8_t event, const struct orbit_chunk_desc *d)
{
    if (d) {
        x->last_desc = *d;
        x->chunks_out++;
        x->send_next++;
        orb_tally_add(&x->ex->tally, EXCH_TALLY_CHUNKS_SENT, 1);
        orb_tally_add(&x->ex->tally, EXCH_TALLY_BYTES_SENT, d->len);
    }
    if (event == ORBIT_EXCHANGE_START)
        x->send_state = ORBIT_FLOW_OPEN;
    if (event == ORBIT_EXCHANGE_FIN || event == ORBIT_EXCHANGE_RESET) {
        x->send_state = event == ORBIT_EXCHANGE_FIN ? ORBIT_FLOW_FINISHED : ORBIT_FLOW_RESET;
        /* A clean end of the control direction: queued events stay readable after we close. */
        x->ctl_finished = ORB_QUIET(orbit_endpoint_finish(x->ctl)) == 0;
    }
}

/* START or DATA, with res (its first len bytes) or, for START, without a chunk. */
static int send_chunk(struct orbit_exchange *x, uint8_t event, struct orbit_reservation *res, size_t len,
                      int timeout_ms, bool try_only)
{
    if (!x || (event == ORBIT_EXCHANGE_DATA && !res))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    int rc = send_allowed(x, event);
    if (rc < 0)
        return rc;
    if (res && (res->arena != x->out || res->done))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    struct xframe f = { .event = event, .flow = x->out_flow, .exchange = x->id };
    if (res) {
        if ((rc = arena_publish(res, len, x->id, x->out_flow, &f.desc)) < 0)
            return rc;
        f.flags = XFRAME_HAS_PAYLOAD;
        f.chunk_id = x->send_next;
    }
    rc = exch_publish(x, &f, timeout_ms, try_only);
    if (rc < 0)
        return res ? undelivered(res, rc) : rc;
    if (res)
        arena_settle(res, &f.desc);
    sent(x, event, res ? &f.desc : NULL);
    return 0;
}

int orbit_exchange_try_start(struct orbit_exchange *x, struct orbit_reservation *res, size_t len)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    return send_chunk(x, ORBIT_EXCHANGE_START, res, len, 0, true);
}

int orbit_exchange_start(struct orbit_exchange *x, struct orbit_reservation *res, size_t len, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return send_chunk(x, ORBIT_EXCHANGE_START, res, len, timeout_ms, false);
}

int orbit_exchange_try_data(struct orbit_exchange *x, struct orbit_reservation *res, size_t len)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    return send_chunk(x, ORBIT_EXCHANGE_DATA, res, len, 0, true);
}

int orbit_exchange_data(struct orbit_exchange *x, struct orbit_reservation *res, size_t len, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return send_chunk(x, ORBIT_EXCHANGE_DATA, res, len, timeout_ms, false);
}

int orbit_exchange_try_reserve(struct orbit_exchange *x, size_t len, struct orbit_reservation *out)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (!x)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (x->send_state == ORBIT_FLOW_FINISHED || x->send_state == ORBIT_FLOW_RESET)
        return orb_fail_text(-ORBIT_ECLOSED, "this side already finished or reset its sending direction");
    return ORB_NESTED(orbit_arena_try_reserve(x->out, len, out));
}

int orbit_exchange_reserve(struct orbit_exchange *x, size_t len, int timeout_ms, struct orbit_reservation *out)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (!x)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (x->send_state == ORBIT_FLOW_FINISHED || x->send_state == ORBIT_FLOW_RESET)
        return orb_fail_text(-ORBIT_ECLOSED, "this side already finished or reset its sending direction");
    return ORB_NESTED(orbit_arena_reserve(x->out, len, timeout_ms, out));
}

/* Copy form: reserve, copy, commit; nothing stays reserved on failure. */
static int send_copy(struct orbit_exchange *x, uint8_t event, const void *buf, size_t len, int timeout_ms,
                     bool try_only)
{
    if (!buf && len)
        return orb_fail(-ORBIT_EMALFORMED, "%s: buf is NULL with len %zu", __func__, len);
    int rc = send_allowed(x, event);
    if (rc < 0)
        return rc;
    if (len == 0)
        return event == ORBIT_EXCHANGE_START ? send_chunk(x, event, NULL, 0, timeout_ms, try_only)
                                             : orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    struct orbit_reservation res;
    rc = try_only ? ORB_NESTED(orbit_arena_try_reserve(x->out, len, &res)) : ORB_NESTED(orbit_arena_reserve(x->out, len, timeout_ms, &res));
    if (rc < 0)
        return rc;
    memcpy(res.data, buf, len);
    rc = send_chunk(x, event, &res, len, ms_left(&deadline), try_only);
    orbit_arena_cancel(&res);   /* a no-op once committed */
    return rc;
}

int orbit_exchange_send_start(struct orbit_exchange *x, const void *meta, size_t len, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return send_copy(x, ORBIT_EXCHANGE_START, meta, len, timeout_ms, false);
}

int orbit_exchange_send_data(struct orbit_exchange *x, const void *buf, size_t len, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return send_copy(x, ORBIT_EXCHANGE_DATA, buf, len, timeout_ms, false);
}

int orbit_exchange_try_send_data(struct orbit_exchange *x, const void *buf, size_t len)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    return send_copy(x, ORBIT_EXCHANGE_DATA, buf, len, 0, true);
}

static int send_end(struct orbit_exchange *x, uint8_t event, uint32_t code, int timeout_ms, bool try_only)
{
    if (!x)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    int rc = send_allowed(x, event);
    if (rc < 0)
        return rc;
    struct xframe f = { .event = event, .flow = x->out_flow, .exchange = x->id, .reset_code = code };
    if ((rc = exch_publish(x, &f, timeout_ms, try_only)) < 0)
        return rc;
    sent(x, event, NULL);
    return 0;
}

int orbit_exchange_try_finish(struct orbit_exchange *x)
{
    int refused = exchange_enter(x, __func__);
    return refused < 0 ? refused : send_end(x, ORBIT_EXCHANGE_FIN, 0, 0, true);
}
int orbit_exchange_finish(struct orbit_exchange *x, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return send_end(x, ORBIT_EXCHANGE_FIN, 0, timeout_ms, false);
}
int orbit_exchange_try_reset(struct orbit_exchange *x, uint32_t code)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    return send_end(x, ORBIT_EXCHANGE_RESET, code, 0, true);
}
int orbit_exchange_reset(struct orbit_exchange *x, uint32_t code, int timeout_ms)
{
    int refused = exchange_enter(x, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    return send_end(x, ORBIT_EXCHANGE_RESET, code, timeout_ms, false);
}
