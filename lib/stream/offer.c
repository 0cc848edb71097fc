/* SPDX-License-Identifier: MIT */
/*
 * Streams: offers. An offer names its target in the slot (generation and node)
 * and sets the slot's lane bit in the target's lane bitmap; taking clears the
 * lane bit before scanning the lane, so an offer made during the scan sets it
 * again. A slot holds one offer at a time: a later offer replaces it.
 *
 * Waking: threads asleep in wait_offer are counted (sleepers) and an offer
 * wakes one of them, not every one (one offer, one taker); io_uring waiters
 * arm the parked flag and are all woken, as on every other word.
 */
#include "stream_layout.h"

#define OFFER(gen, to) (((uint64_t)(gen) << 32) | ((uint64_t)(to) + 1))

/* One sleeper woken: the word moves first, so one between its count and its sleep does not sleep. */
static void wake_one_sleeper(struct orbit_streams *s, struct stream_offers *o)
{
    atomic_fetch_add_explicit(&o->wait.changes, 1, memory_order_seq_cst);
    orb_futex_wake_one(&o->wait.changes);
    atomic_fetch_add_explicit(&s->stats.wakes, 1, memory_order_relaxed);
}

/* After an offer is published by a seq_cst RMW: armed io_uring waiters all, else one sleeper. */
static void offers_signal(struct orbit_streams *s, struct stream_offers *o)
{
    if (atomic_load(&o->wait.parked))
        orb_wait_signal(&o->wait, &s->stats);
    else if (atomic_load(&o->sleepers))
        wake_one_sleeper(s, o);
}

int orbit_streams_offer(struct orbit_streams *s, const struct orbit_ticket *t, uint16_t to_node)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    size_t index;
    if (!t)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ticket is NULL", __func__);
    if (to_node >= s->fleet_capacity)
        return orb_fail(-ORBIT_EMALFORMED, "%s: to_node %u: the fleet has %u nodes", __func__, to_node,
                        s->fleet_capacity);
    if (stream_locate(s, t->id, &index) < 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ticket id %#llx is not a stream of this table", __func__,
                        (unsigned long long)t->id);
    uint32_t gen = orbit_id_generation(t->id);
    struct stream_slot *slot = &s->slots[index];
    if (t->epoch != stream_epoch(s) ||
        atomic_load_explicit(&slot->tenancy, memory_order_acquire) != TENANCY(gen, SLOT_LIVE))
        return orb_fail(-ORBIT_ESTALE, "%s: ticket id %#llx: the stream ended or the table was reset",
                        __func__, (unsigned long long)t->id);
    struct stream_offers *o = stream_offers_of(s, to_node);
    uint32_t lane = orbit_id_node(t->id);
    /* Slot word before lane bit: a taker that finds the bit finds the slot word. */
    atomic_store(&slot->offer, OFFER(gen, to_node));
    /* seq_cst RMW, then the loads in offers_signal: a waiter that counted itself or armed
     * before this sees the bit, or we see it (Dekker pairing with offer_sleep). */
    atomic_fetch_or(&o->lanes[lane / 64], 1ull << (lane % 64));
    offers_signal(s, o);
    orb_fleet_ring_doorbell(s->fleet, to_node, &s->stats);
    return 0;
}

/* Take the first offer for us in one lane; *more when another one remains. */
static bool take_in_lane(struct orbit_streams *s, uint32_t lane, struct orbit_ticket *out, bool *more)
{
    bool found = false;
    *more = false;
    for (uint32_t i = 0; i < s->lane_capacity; i++) {
        struct stream_slot *slot = &s->slots[(size_t)lane * s->lane_capacity + i];
        uint64_t v = atomic_load(&slot->offer);
        if ((uint32_t)v != (uint32_t)s->node + 1)
            continue;
        if (found) {
            *more = true;
            break;
        }
        /* The CAS makes the offer seen once, by one taker; the word keeps naming us (a
         * lingering stream ends when its offered node's life does). */
        if (!atomic_compare_exchange_strong(&slot->offer, &v, v | STREAM_OFFER_TAKEN))
            continue;
        uint32_t gen = (uint32_t)(v >> 32), live = TENANCY(gen, SLOT_LIVE);
        if (gen == 0 || gen > s->generation_limit ||
            atomic_load_explicit(&slot->tenancy, memory_order_acquire) != live ||
            stream_linger_expire(s, slot, live, NULL))
            continue;   /* the stream ended since (or its linger just did): skip it */
        out->id = orbit_id_make(s->kind, (uint16_t)lane, gen, i);
        out->side = ORBIT_SIDE_B;
        out->epoch = stream_epoch(s);
        found = true;
    }
    return found;
}

int orbit_streams_take_offer(struct orbit_streams *s, struct orbit_ticket *out)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (!stream_is_member(s))
        return orb_fail_text(-ORBIT_ENOTOWNER, "an observer has no offers (join as a member)");
    struct stream_offers *o = stream_offers_of(s, s->node);
    for (uint32_t w = 0; w < s->lay.lane_words; w++) {
        uint64_t bits = atomic_load(&o->lanes[w]);
        while (bits) {
            uint64_t bit = bits & -bits;
            uint32_t lane = w * 64 + (uint32_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            atomic_fetch_and(&o->lanes[w], ~bit);
            bool more = false;
            /* A bit past the fleet is garbage from shared memory: cleared, never scanned. */
            bool found = lane < s->fleet_capacity && take_in_lane(s, lane, out, &more);
            if (more)
                atomic_fetch_or(&o->lanes[w], bit);
            if (found)
                return 0;
        }
    }
    return orb_fail_text(-ORBIT_EAGAIN, "no offer is pending for this node (would block)");
}

struct offer_wait { struct orbit_streams *s; struct orbit_ticket *out; };

static int pred_take(void *ctx)
{
    struct offer_wait *ow = ctx;
    int rc = ORB_QUIET(orbit_streams_take_offer(ow->s, ow->out));
    return rc == -ORBIT_EAGAIN ? 0 : rc == 0 ? 1 : rc;
}

/* A woken sleeper that leaves offers behind (it timed out, or took one of several) passes a wake on. */
static void pass_on(struct orbit_streams *s, struct stream_offers *o)
{
    if (atomic_load(&o->sleepers) && stream_pred_offer_pending(s))
        wake_one_sleeper(s, o);
}

/* Sleep counted in sleepers until an offer is ours or the deadline passes. */
static int offer_sleep(struct orbit_streams *s, struct offer_wait *ow, const struct orb_deadline *deadline)
{
    struct stream_offers *o = stream_offers_of(s, s->node);
    for (;;) {
        /* since before the count: a wake after the count moves the word past it. */
        uint32_t since = orb_wait_since(&o->wait);
        /* seq_cst RMW, then the take's loads: pairs with the offerer's lane RMW, sleepers load. */
        atomic_fetch_add(&o->sleepers, 1);
        int r = pred_take(ow);
        if (r == 0 && orb_deadline_passed(deadline))
            r = -ETIMEDOUT;
        if (r != 0) {
            atomic_fetch_sub(&o->sleepers, 1);
            return r;
        }
        int rc = orb_wait_park(&o->wait, since, deadline, &s->stats);
        atomic_fetch_sub(&o->sleepers, 1);
        if ((r = pred_take(ow)) != 0 || rc == -ETIMEDOUT) {
            pass_on(s, o);
            return r != 0 ? r : -ETIMEDOUT;
        }
    }
}

int orbit_streams_wait_offer(struct orbit_streams *s, int timeout_ms, struct orbit_ticket *out)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "out is NULL");
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (!stream_is_member(s))
        return orb_fail_text(-ORBIT_ENOTOWNER, "an observer has no offers (join as a member)");
    struct offer_wait ow = { s, out };
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    int r = pred_take(&ow);
    if (r == 0 && !orb_deadline_passed(&deadline))
        r = orb_wait_spin(pred_take, &ow, &s->offer_spin, &deadline);
    if (r == 0)
        r = offer_sleep(s, &ow, &deadline);
    if (r == -ETIMEDOUT)
        return orb_fail_text(-ORBIT_ETIMEDOUT, "no offer came within the timeout");
    return r < 0 ? r : 0;
}

int stream_pred_offer_pending(void *ctx)
{
    struct orbit_streams *s = ctx;
    struct stream_offers *o = stream_offers_of(s, s->node);
    for (uint32_t w = 0; w < s->lay.lane_words; w++)
        if (atomic_load(&o->lanes[w]))
            return 1;
    return 0;
}
