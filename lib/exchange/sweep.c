/* SPDX-License-Identifier: MIT */
/*
 * Payload arena: which committed exchange chunks outlive their producer, and
 * which nobody can take any more (design.md section 7).
 *
 * A chunk committed to an exchange is LIVE until its receiver consumes it. It
 * outlives its producer's side (a close, a leave, a death) exactly as long as the
 * event that announced it does: the producer's control direction ended cleanly
 * (FIN, no RESET), and the receiving side is held by a life that is not ending,
 * or was never opened and the control stream still lingers for it (section 6).
 * Every other LIVE chunk whose producer's side is gone, every chunk whose
 * receiver let go, and every chunk of a control stream that ended, nobody will
 * take: every death report (of any life) gives those back, and the end of a
 * linger met through an exchanges handle gives back the chunks that rode on it.
 */
#include "exch_layout.h"
#include "stream/streams_internal.h"

void arena_control_close(struct arena_control *c)
{
    for (unsigned k = 0; k < 256; k++)
        if (c->by_kind[k])
            orbit_streams_close(c->by_kind[k]);
}

/* The control table of kind k (an exchange id's kind), opened once per sweep; NULL if it is none. */
static struct orbit_streams *control_of(struct orbit_arena *a, struct arena_control *c, uint8_t k)
{
    if (k == a->kind || k == ORB_FLEET_KIND)
        return NULL;   /* an id no exchange of this arena can have: garbled */
    if (!c->by_kind[k] && !(c->tried[k / 8] & (1u << (k % 8)))) {
        c->tried[k / 8] |= (uint8_t)(1u << (k % 8));
        if (ORB_QUIET(orbit_streams_open_existing(a->fleet, k, &c->by_kind[k])) < 0)
            c->by_kind[k] = NULL;
    }
    return c->by_kind[k];
}

static bool held_by(const struct orbit_stream_info *si, unsigned side, const struct orbit_owner *o)
{
    return o && si->side[side].state == ORBIT_SIDE_CLAIMED && si->side[side].node == o->node &&
           si->side[side].incarnation == o->incarnation;
}

/*
 * Can the receiver of exchange x's flow still read a chunk of it once `dead`
 * (NULL: nobody) is gone? act: first do to the control stream what dead's
 * report does (its sides end), and end a linger found over.
 */
static bool receiver_can_read(struct orbit_streams *ctl, orbit_id x, uint8_t flow, const struct orbit_owner *dead,
                              bool act)
{
    if (act && dead)
        stream_end_life(ctl, x, dead);
    struct orbit_stream_info si;
    if (stream_info_of(ctl, x, &si) < 0)
        return false;   /* the control stream ended: the event went with it */
    unsigned tx = flow == ORBIT_FLOW_A_TO_B ? 0 : 1, rx = 1 - tx;
    if (si.side[rx].state == ORBIT_SIDE_RELEASED || si.side[rx].state == ORBIT_SIDE_DEAD || held_by(&si, rx, dead))
        return false;   /* the receiver let go: what it had queued went with it */
    if (si.side[tx].state == ORBIT_SIDE_CLAIMED && !held_by(&si, tx, dead))
        return true;    /* the producer holds its side: its close decides */
    /* Let go (or ending now: its report resets an unfinished direction). */
    if ((si.dir[tx].flags & (ORBIT_STREAM_FIN | ORBIT_STREAM_RESET)) != ORBIT_STREAM_FIN)
        return false;
    if (si.side[rx].state == ORBIT_SIDE_CLAIMED)
        return true;    /* a live receiver: it reads, releases, or closes (its drain frees the rest) */
    /* Never opened: only side B can be, and only A's flow then holds chunks. */
    return rx == 1 && stream_linger_holds(ctl, x, dead, act);
}

bool arena_chunk_outlives(struct orbit_arena *a, struct arena_control *c, const struct orbit_chunk_info *ci,
                          const struct orbit_owner *dead, bool act)
{
    struct orbit_streams *ctl = control_of(a, c, orbit_id_kind(ci->exchange));
    if (ctl)
        return receiver_can_read(ctl, ci->exchange, ci->flow, dead, act);
    /* No control table to read: kept while its producer lives, as before any of this. */
    uint16_t node = ci->desc.node;
    struct orb_node_record *rec = orb_fleet_record(a->fleet, node);
    bool ending = dead && dead->node == node && dead->incarnation == ci->producer_incarnation;
    return !ending && rec && atomic_load(&rec->state) == ORBIT_NODE_LIVE &&
           atomic_load(&rec->incarnation) == ci->producer_incarnation;
}

/* Take a LIVE head (tag t) for freeing, as `actor`'s work, and free its run. */
static void free_live(struct orbit_arena *a, uint32_t lane, uint32_t i, uint64_t t, uint16_t actor)
{
    struct arena_slot *h = arena_slot_at(a, lane, i);
    uint32_t count = atomic_load(&h->count);
    /* The CAS arbitrates with a late consume and with the producer's own withdraw. */
    if (atomic_compare_exchange_strong(&h->tag, &t, ATAG(ATAG_GEN(t), ASLOT_RECLAIMING, actor))) {
        arena_free_run(a, lane, i, ATAG_GEN(t), count);
        arena_count(a, ARENA_TALLY_RECLAIMED, ARENA_CTR_RECLAIMED, 1);
    }
}

void arena_sweep_undeliverable(struct orbit_arena *a, uint16_t node, uint64_t inc)
{
    const struct orbit_owner dead = { node, inc };
    struct arena_control c = { 0 };
    for (uint32_t lane = 0; lane < a->fleet_capacity; lane++)
        for (uint32_t i = 0; i < a->slots_per_lane; i++) {
            struct arena_slot *s = arena_slot_at(a, lane, i);
            /* Acquire: a LIVE tag makes the head's fields (exchange, flow, producer) visible. */
            uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
            orbit_id x = atomic_load_explicit(&s->exchange, memory_order_relaxed);
            if (ATAG_STATE(t) != ASLOT_LIVE || x == 0)
                continue;
            struct orbit_chunk_info ci = {
                .desc = { .node = (uint16_t)lane, .first_slot = i }, .exchange = x,
                .flow = (uint8_t)atomic_load(&s->flow), .producer_incarnation = atomic_load(&s->producer_inc),
            };
            if (!arena_chunk_outlives(a, &c, &ci, &dead, true))
                free_live(a, lane, i, t, node);   /* as the dead node's work: its next report finishes it */
        }
    arena_control_close(&c);
}

void arena_free_exchange(struct orbit_arena *a, uint32_t lane, orbit_id exchange, uint8_t flow)
{
    if (!arena_is_member(a) || exchange == 0 || lane >= a->fleet_capacity)
        return;
    for (uint32_t i = 0; i < a->slots_per_lane; i++) {
        struct arena_slot *s = arena_slot_at(a, lane, i);
        uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
        if (ATAG_STATE(t) == ASLOT_LIVE && atomic_load(&s->exchange) == exchange && atomic_load(&s->flow) == flow)
            free_live(a, lane, i, t, a->node);   /* our work: if we die in it, our report finishes it */
    }
}

void exchanges_linger_ended(void *ctx, orbit_id x)
{
    struct orbit_exchanges *ex = ctx;
    /* Only side A can linger (B never opened): its flow's chunks, in the lane of A's node. */
    arena_free_exchange(ex->arena[0], orbit_id_node(x), x, ORBIT_FLOW_A_TO_B);
}
