/* SPDX-License-Identifier: MIT */
/* The arena's top floor: death reports, reset, and the table ops the core calls. */
#include "exch_layout.h"
#include "core/table_ops.h"

/* ---- death ------------------------------------------------------------------ */

/* Take a run's first slot for reclaiming, for dead node `dead`, if it still carries tag t. */
static bool reclaim_head(struct orbit_arena *a, uint32_t node, uint32_t i, uint64_t t, uint16_t dead)
{
    struct arena_slot *s = arena_slot_at(a, node, i);
    /* The CAS arbitrates with a live reader's consume and its release: one of us owns the run. */
    if (!atomic_compare_exchange_strong(&s->tag, &t, ATAG(ATAG_GEN(t), ASLOT_RECLAIMING, dead)))
        return false;
    uint32_t count = atomic_load_explicit(&s->count, memory_order_relaxed);
    if (count == 0 || count > a->slots_per_lane - i)
        count = 1;   /* not committed yet or garbled: the orphan sweep frees its tail */
    arena_free_run(a, node, i, ATAG_GEN(t), count);
    arena_count(a, ARENA_TALLY_RECLAIMED, ARENA_CTR_RECLAIMED, 1);
    return true;
}

/* The dead life's reservations, unread chunks and orphaned tails in its own lane. */
static void reclaim_producer(struct orbit_arena *a, uint16_t node, uint64_t inc)
{
    uint64_t keep_gen = 0;
    uint32_t keep_end = 0;
    for (uint32_t i = 0; i < a->slots_per_lane; i++) {
        struct arena_slot *s = arena_slot_at(a, node, i);
        uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
        unsigned st = ATAG_STATE(t);
        if (st == ASLOT_FREE || atomic_load(&s->producer_inc) != inc)
            continue;
        if (st == ASLOT_READING) {
            /* A live reader holds it: keep the run (a dead reader is handled by reclaim_reader). */
            uint32_t count = atomic_load(&s->count);
            keep_gen = ATAG_GEN(t);
            keep_end = count && count <= a->slots_per_lane - i ? i + count : i + 1;
        } else if (st == ASLOT_RESERVED || st == ASLOT_LIVE) {
            reclaim_head(a, node, i, t, node);
        } else if (st == ASLOT_TAIL && !(i < keep_end && ATAG_GEN(t) == keep_gen)) {
            /* A tail whose head is gone: allocation or release died half way. */
            uint64_t want = t;
            if (atomic_compare_exchange_strong(&s->tag, &want, ATAG(ATAG_GEN(t), ASLOT_FREE, 0)))
                orb_wait_signal(&a->lanes[node].credit, &a->stats);
        }
    }
}

/* Chunks the dead life was reading, in every lane. A reader stamps its incarnation just
 * after its consume CAS, so a READING chunk of that node with no stamp yet died in between. */
static void reclaim_reader(struct orbit_arena *a, uint16_t node, uint64_t inc)
{
    for (uint32_t lane = 0; lane < a->fleet_capacity; lane++) {
        for (uint32_t i = 0; i < a->slots_per_lane; i++) {
            struct arena_slot *s = arena_slot_at(a, lane, i);
            uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
            if (ATAG_STATE(t) != ASLOT_READING || ATAG_READER(t) != (node & 0xfffu))
                continue;
            uint64_t rinc = atomic_load_explicit(&s->reader_inc, memory_order_acquire);
            if (rinc == inc || rinc == 0)
                reclaim_head(a, lane, i, t, node);
        }
    }
}

/*
 * Runs left RECLAIMING by node's work: it was killed between taking a run for
 * freeing and freeing it (cancel, release, withdraw), or a report for it was.
 * Nobody else frees them: the actor is dead and one reporter acts for it at a time.
 */
static void finish_cut_short(struct orbit_arena *a, uint16_t node)
{
    for (uint32_t lane = 0; lane < a->fleet_capacity; lane++)
        for (uint32_t i = 0; i < a->slots_per_lane; i++) {
            struct arena_slot *s = arena_slot_at(a, lane, i);
            uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
            if (ATAG_STATE(t) != ASLOT_RECLAIMING || ATAG_READER(t) != (node & 0xfffu))
                continue;
            /* count 0: the tails were freed before it was cleared; the head alone is left. */
            arena_free_run(a, lane, i, ATAG_GEN(t), atomic_load(&s->count));
            arena_count(a, ARENA_TALLY_RECLAIMED, ARENA_CTR_RECLAIMED, 1);
        }
}

/* The arena's death op: the dead life's reservations, chunks and reads come back. */
static int arena_node_dead(void *table, uint16_t node, uint64_t incarnation)
{
    struct orbit_arena *a = table;
    if (node >= a->fleet_capacity)
        return -ORBIT_EMALFORMED;
    if (incarnation == 0)
        return 0;   /* no life: nothing of it */
    finish_cut_short(a, node);
    reclaim_producer(a, node, incarnation);
    reclaim_reader(a, node, incarnation);
    arena_sweep_undeliverable(a, node, incarnation);
    /* Any reader frees into any lane: the dead may have died mid-wake on any credit word. */
    for (uint32_t n = 0; n < a->fleet_capacity; n++)
        orb_wait_kick(&a->lanes[n].credit);
    return 0;
}

void orbit_arena_node_dead(struct orbit_arena *a, uint16_t node, uint64_t incarnation)
{
    if (arena_enter(a, __func__) == 0)
        (void)arena_node_dead(a, node, incarnation);   /* void in the installed header: table_ops.h */
}

/* Quiescent owner boot: a new epoch, every slot free; generations keep counting up, so no
 * descriptor, reservation or chunk of before matches a slot again (nothing runs meanwhile). */
static int arena_reset_all(void *table)
{
    struct orbit_arena *a = table;
    uint64_t prev = atomic_load(a->epoch);
    atomic_store_explicit(a->epoch, orb_next_epoch(prev), memory_order_seq_cst);
    for (size_t i = 0; i < a->lay.total_slots; i++) {
        struct arena_slot *s = &a->slots[i];
        uint64_t t = atomic_load(&s->tag);
        atomic_store(&s->producer_inc, 0);
        atomic_store(&s->reader_inc, 0);
        atomic_store(&s->count, 0);
        atomic_store(&s->len, 0);
        atomic_store(&s->exchange, 0);
        atomic_store(&s->tag, ATAG(ATAG_GEN(t), ASLOT_FREE, 0));
    }
    for (uint32_t n = 0; n < a->fleet_capacity; n++)
        orb_wait_signal(&a->lanes[n].credit, &a->stats);
    return 0;
}

void orbit_arena_reset_all(struct orbit_arena *a)
{
    if (arena_enter(a, __func__) == 0)
        (void)arena_reset_all(a);
}

/* ---- the arena table ops ----------------------------------------------------- */

static const struct orb_counter_def arena_counters[ARENA_CTR_END - ORB_CTR_TABLE_FIRST] = {
    { "chunks_reserved", "Payload chunks reserved in a lane." },
    { "chunks_committed", "Chunks committed (handed to a reader)." },
    { "chunks_consumed", "Chunks a reader took." },
    { "chunks_released", "Chunks given back by their reader." },
    { "chunks_reclaimed", "Chunks taken back from dead or departed holders, or withdrawn." },
    { "full_refusals", "Reserves refused because the lane had no free run (-ORBIT_EPAYLOADFULL)." },
    { "credit_waits", "Reserves that waited for credit (a free run in the lane)." },
    { "bytes_committed", "Payload bytes committed." },
    { "bytes_consumed", "Payload bytes consumed by readers." },
};

static const struct orb_table_ops arena_ops = {
    .kind = &arena_kind, .name = "arena", .layout = ARENA_LAYOUT_VERSION,
    .node_dead = arena_node_dead, .reset_all = arena_reset_all, .account = arena_account,
    .counters = arena_counters, .counter_count = ARENA_CTR_END - ORB_CTR_TABLE_FIRST,
};
ORB_TABLE_REGISTER(arena_ops);
