/* SPDX-License-Identifier: MIT */
/* Streams, the top floor: death reports, supersede, reset, and the table ops the core calls. */
#include "stream_layout.h"
#include "core/table_ops.h"

/* ---- death ---------------------------------------------------------------- */

/*
 * Both sides gone (released or ended) and the slot still live: whoever let go
 * last was killed between its side's CAS and the vacate. Nothing can claim a
 * side out of RELEASED or DEAD, so vacating it here is safe (the vacate is a CAS).
 * A never-opened B (FREE) after A let go is a linger, kept while it lasts: its
 * end is judged as the closer judges it, the dead life counted gone.
 */
static void vacate_abandoned(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                             const struct orbit_owner *dead)
{
    /* No side held, and one let go (A is held from install): its last holder's vacate was
     * cut short. */
    uint32_t a = atomic_load(&slot->claimed[0]), b = atomic_load(&slot->claimed[1]);
    if (a == SIDE_CLAIMED || b == SIDE_CLAIMED || (a == SIDE_FREE && b == SIDE_FREE))
        return;
    if (b != SIDE_FREE)
        stream_vacate_if_unheld(s, slot, live, 0);
    else if (!stream_lingers(slot) || stream_linger_over(s, slot, live, dead))
        stream_linger_end(s, slot, live);
}

/* End every claimed side, in any lane, whose holder matches (and, for a death, vacate abandoned
 * slots and end the lingers of streams offered to that life). */
static void end_matching(struct orbit_streams *s, uint16_t node, uint64_t incarnation, bool others)
{
    const struct orbit_owner dead = { node, incarnation };
    for (size_t i = 0; i < s->lay.total_slots; i++) {
        struct stream_slot *slot = &s->slots[i];
        uint32_t t = atomic_load_explicit(&slot->tenancy, memory_order_acquire);
        if (!others && TENANCY_STATE(t) == SLOT_INSTALLING && i / s->lane_capacity == node) {
            /* Only the lane's node installs there, and it is dead: its allocation was cut short. */
            atomic_compare_exchange_strong(&slot->tenancy, &t, TENANCY(TENANCY_GEN(t), SLOT_EMPTY));
            continue;
        }
        if (TENANCY_STATE(t) != SLOT_LIVE)
            continue;
        for (unsigned side = 0; side < 2; side++) {
            /* An opener stamps node and incarnation before its claim CAS: a claimed side names
             * its holder. A free side stamped by the dead is an open it never finished. */
            uint32_t claimed = atomic_load(&slot->claimed[side]), stamped = node;
            if (!others && claimed == SIDE_FREE)
                atomic_compare_exchange_strong(&slot->node[side], &stamped, STREAM_NODE_NONE);
            if (claimed != SIDE_CLAIMED || atomic_load(&slot->node[side]) != node)
                continue;
            uint64_t inc = atomic_load(&slot->incarnation[side]);
            if (others ? inc != incarnation : inc == incarnation)
                stream_end_side(s, slot, t, side);
        }
        if (!others)
            vacate_abandoned(s, slot, t, &dead);
    }
}

/* The streams' death op: the dead life's sides end, their peers and offers are woken. */
static int streams_node_dead(void *table, uint16_t node, uint64_t incarnation)
{
    struct orbit_streams *s = table;
    if (node >= s->fleet_capacity)
        return -ORBIT_EMALFORMED;
    end_matching(s, node, incarnation, false);
    /* Any node may offer to any other: the dead may have died mid-wake on any offers word.
     * Its own sides' directions were signalled by end_matching. */
    for (uint32_t n = 0; n < s->fleet_capacity; n++)
        orb_wait_kick(&stream_offers_of(s, n)->wait);
    return 0;
}

void orbit_streams_node_dead(struct orbit_streams *s, uint16_t node, uint64_t incarnation)
{
    if (streams_enter(s, __func__) == 0)
        (void)streams_node_dead(s, node, incarnation);   /* void in the installed header: table_ops.h */
}

void orbit_streams_supersede(struct orbit_streams *s)
{
    if (streams_enter(s, __func__) < 0)
        return;
    if (s && stream_is_member(s))
        end_matching(s, s->node, s->incarnation, true);
}

/* Quiescent owner boot: a new epoch first, so every older handle reads stale. */
static int streams_reset_all(void *table)
{
    struct orbit_streams *s = table;
    uint64_t prev = stream_epoch(s);
    atomic_store_explicit(s->epoch, orb_next_epoch(prev), memory_order_seq_cst);
    for (size_t i = 0; i < s->lay.total_slots; i++) {
        struct stream_slot *slot = &s->slots[i];
        atomic_store(&slot->tenancy, TENANCY(0, SLOT_EMPTY));
        for (unsigned side = 0; side < 2; side++) {
            atomic_store(&slot->claimed[side], SIDE_FREE);
            atomic_store(&slot->node[side], STREAM_NODE_NONE);
            atomic_store(&slot->incarnation[side], 0);
            stream_dir_clear(&slot->dir[side]);
            /* changes only ever grows: a stale waiter wakes and finds the new epoch. */
            orb_wait_signal(&slot->dir[side].wait, &s->stats);
        }
        atomic_store(&slot->offer, 0);
        atomic_store(&slot->linger_until, 0);
    }
    for (uint32_t n = 0; n < s->fleet_capacity; n++) {
        struct stream_offers *o = stream_offers_of(s, n);
        for (uint32_t w = 0; w < s->lay.lane_words; w++)
            atomic_store(&o->lanes[w], 0);
        orb_wait_signal(&o->wait, &s->stats);
    }
    return 0;
}

void orbit_streams_reset_all(struct orbit_streams *s)
{
    if (streams_enter(s, __func__) == 0)
        (void)streams_reset_all(s);
}

/* ---- the streams table ops --------------------------------------------------- */

static const struct orb_counter_def stream_counters[STREAM_CTR_END - ORB_CTR_TABLE_FIRST] = {
    { "bytes_written", "Bytes written into stream rings." },
    { "bytes_read", "Bytes read out of stream rings." },
    { "frames_written", "Exact writes (a frame whole or nothing) that went in." },
    { "frames_read", "Exact reads that took a whole frame." },
    { "resets", "Streams reset by an endpoint (orbit_endpoint_reset)." },
    { "streams_created", "Streams created (their A side taken)." },
    { "streams_opened", "Tickets opened (B sides taken)." },
};

static const struct orb_table_ops streams_ops = {
    .kind = &streams_kind, .name = "streams", .layout = STREAM_LAYOUT_VERSION,
    .node_dead = streams_node_dead, .reset_all = streams_reset_all, .account = stream_account,
    .counters = stream_counters, .counter_count = STREAM_CTR_END - ORB_CTR_TABLE_FIRST,
};
ORB_TABLE_REGISTER(streams_ops);
