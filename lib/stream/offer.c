/* SPDX-License-Identifier: MIT */
/*
 * Streams: offers. An offer names its target in the slot (generation and node)
 * and sets the slot's lane bit in the target's lane bitmap; taking clears the
 * lane bit before scanning the lane, so an offer made during the scan sets it
 * again. A slot holds one offer at a time: a later offer replaces it.
 */
#include "stream_layout.h"

#define OFFER(gen, to) (((uint64_t)(gen) << 32) | ((uint64_t)(to) + 1))

int orbit_streams_offer(struct orbit_streams *s, const struct orbit_ticket *t, uint16_t to_node)
{
    size_t index;
    if (!s || !t || to_node >= s->fleet_capacity || stream_locate(s, t->id, &index) < 0)
        return -ORBIT_EMALFORMED;
    uint32_t gen = orbit_id_generation(t->id);
    struct stream_slot *slot = &s->slots[index];
    if (t->epoch != stream_epoch(s) ||
        atomic_load_explicit(&slot->tenancy, memory_order_acquire) != TENANCY(gen, SLOT_LIVE))
        return -ORBIT_ESTALE;
    struct stream_offers *o = stream_offers_of(s, to_node);
    uint32_t lane = orbit_id_node(t->id);
    /* Slot word before lane bit: a taker that finds the bit finds the slot word. */
    atomic_store(&slot->offer, OFFER(gen, to_node));
    atomic_fetch_or(&o->lanes[lane / 64], 1ull << (lane % 64));
    orb_wait_signal(&o->wait, &s->stats);
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
        /* The CAS makes the offer seen once, by one taker. */
        if (!atomic_compare_exchange_strong(&slot->offer, &v, 0))
            continue;
        uint32_t gen = (uint32_t)(v >> 32);
        if (gen == 0 || gen > s->generation_limit ||
            atomic_load_explicit(&slot->tenancy, memory_order_acquire) != TENANCY(gen, SLOT_LIVE))
            continue;   /* the stream ended since: skip it */
        out->id = orbit_id_make(s->kind, (uint16_t)lane, gen, i);
        out->side = ORBIT_SIDE_B;
        out->epoch = stream_epoch(s);
        found = true;
    }
    return found;
}

int orbit_streams_take_offer(struct orbit_streams *s, struct orbit_ticket *out)
{
    if (!s || !out)
        return -ORBIT_EMALFORMED;
    if (!stream_is_member(s))
        return -ORBIT_ENOTOWNER;
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
    return -ORBIT_EAGAIN;
}

struct offer_wait { struct orbit_streams *s; struct orbit_ticket *out; };

static int pred_take(void *ctx)
{
    struct offer_wait *ow = ctx;
    int rc = orbit_streams_take_offer(ow->s, ow->out);
    return rc == -ORBIT_EAGAIN ? 0 : rc == 0 ? 1 : rc;
}

int orbit_streams_wait_offer(struct orbit_streams *s, int timeout_ms, struct orbit_ticket *out)
{
    if (!orb_timeout_valid(timeout_ms))
        return -ORBIT_EMALFORMED;
    if (!s || !out)
        return -ORBIT_EMALFORMED;
    if (!stream_is_member(s))
        return -ORBIT_ENOTOWNER;
    struct offer_wait ow = { s, out };
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    int r = stream_wait(&stream_offers_of(s, s->node)->wait, pred_take, &ow, &deadline,
                        &s->offer_spin, NULL, &s->stats);
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
