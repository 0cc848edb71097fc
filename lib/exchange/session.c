/* SPDX-License-Identifier: MIT */
/*
 * Pool session binding: a remote lease rides in the START of an exchange offered to
 * the resource owner's node; the owner accepts it exactly once (orbit_pool_accept
 * checks epoch, generation and fence) before it exposes any metadata byte.
 */
#include <string.h>
#include "exch_layout.h"

#define SESSION_MAGIC   0x53455350u   /* "PSES" little-endian */
#define SESSION_VERSION 1u

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void frame_encode(const struct orbit_lease *l, unsigned char *p)
{
    memset(p, 0, ORBIT_SESSION_FRAME_BYTES);
    put64(p, SESSION_MAGIC);   /* bytes 4..7 are then version 0 0 0; set below */
    p[4] = SESSION_VERSION;
    p[6] = (unsigned char)l->holder;
    p[7] = (unsigned char)(l->holder >> 8);
    put64(p + 8, l->id);
    put64(p + 16, l->fence);
    put64(p + 24, l->holder_incarnation);
    put64(p + 32, l->epoch);
}

static int frame_decode(const unsigned char *p, size_t len, struct orbit_lease *l)
{
    if (len < ORBIT_SESSION_FRAME_BYTES || (uint32_t)get64(p) != SESSION_MAGIC || p[4] != SESSION_VERSION ||
        p[5] != 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    *l = (struct orbit_lease){ .id = get64(p + 8), .fence = get64(p + 16),
                               .holder = (uint16_t)(p[6] | p[7] << 8),
                               .holder_incarnation = get64(p + 24), .epoch = get64(p + 32) };
    return 0;
}

static int ms_left(const struct orb_deadline *d)
{
    if (d->forever)
        return -1;
    int64_t left = d->at_ns - orb_now_ns();
    return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

int orbit_exchange_open_session(struct orbit_exchanges *ex, const struct orbit_lease *lease, const void *meta,
                                size_t len, int timeout_ms, struct orbit_exchange **a)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (!ex || !lease || !a || (len && !meta) || len > ORBIT_ARENA_LANE_MAX)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    struct orbit_exchange *x;
    struct orbit_ticket t;
    int rc = ORB_NESTED(orbit_exchange_create(ex, &x, &t));
    if (rc < 0)
        return rc;
    struct orbit_reservation res;
    rc = ORB_NESTED(orbit_exchange_reserve(x, ORBIT_SESSION_FRAME_BYTES + len, timeout_ms, &res));
    if (rc == 0) {
        frame_encode(lease, res.data);
        if (len)
            memcpy((unsigned char *)res.data + ORBIT_SESSION_FRAME_BYTES, meta, len);
        rc = ORB_NESTED(orbit_exchange_start(x, &res, ORBIT_SESSION_FRAME_BYTES + len, ms_left(&deadline)));
        orbit_arena_cancel(&res);   /* a no-op once committed */
    }
    /* The START is queued before the offer: the owner never sees an offer without its lease. */
    if (rc == 0)
        rc = ORB_NESTED(orbit_exchanges_offer(ex, &t, orbit_id_node(lease->id)));
    if (rc < 0) {
        orbit_exchange_close(x);
        return rc;
    }
    *a = x;
    return 0;
}

int orbit_exchange_accept_session(struct orbit_exchanges *ex, struct orbit_pool *pool,
                                  const struct orbit_ticket *t, int timeout_ms, struct orbit_session *out)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (!pool || !t || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__,
                        !pool ? "pool" : !t ? "t" : "out");
    memset(out, 0, sizeof *out);
    out->metadata.released = true;
    out->execution.done = true;
    struct orbit_exchange *x;
    int rc = ORB_NESTED(orbit_exchange_open(ex, t, &x));
    if (rc < 0)
        return rc;
    struct orbit_exchange_event ev = { .chunk.released = true };
    struct orbit_lease lease;
    rc = ORB_NESTED(orbit_exchange_next(x, &ev, timeout_ms));
    if (rc == 0 && (ev.type != ORBIT_EXCHANGE_START || ev.chunk.released ||
                    frame_decode(ev.chunk.data, ev.chunk.len, &lease) < 0))
        rc = orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    /* Exactly once, and before a metadata byte is handed out. */
    if (rc == 0)
        rc = ORB_NESTED(orbit_pool_accept(pool, &lease, &out->execution));
    if (rc < 0) {
        orbit_chunk_release(&ev.chunk);
        orbit_exchange_close(x);
        out->execution.done = true;
        return rc;
    }
    out->exchange = x;
    out->metadata = ev.chunk;
    out->metadata.data = (const unsigned char *)ev.chunk.data + ORBIT_SESSION_FRAME_BYTES;
    out->metadata.len = ev.chunk.len - ORBIT_SESSION_FRAME_BYTES;
    return 0;
}

int orbit_exchange_wait_session(struct orbit_exchanges *ex, struct orbit_pool *pool, int timeout_ms,
                                struct orbit_session *out)
{
    int refused = exchanges_enter(ex, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL argument, or the exchange is not in the state that call needs (START first, DATA after it, once FIN nothing)");
    if (!pool || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__,
                        !pool ? "pool" : "out");
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    struct orbit_ticket t;
    int rc = ORB_NESTED(orbit_exchanges_wait_offer(ex, timeout_ms, &t));
    return rc < 0 ? rc : ORB_NESTED(orbit_exchange_accept_session(ex, pool, &t, ms_left(&deadline), out));
}

/* Each part's own close: in a fork child none of them touches shared state. */
void orbit_session_end(struct orbit_session *s)
{
    orb_error_clear();
    if (!s)
        return;
    orbit_chunk_release(&s->metadata);
    if (!s->execution.done && s->execution.pool)
        orbit_execution_complete(&s->execution);
    orbit_exchange_close(s->exchange);
    s->exchange = NULL;
}
