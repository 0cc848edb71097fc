/* SPDX-License-Identifier: MIT */
/*
 * Payload arena: the life of one chunk.
 *
 * Only the lane's node allocates in it: first fit from the lane's start, so the slots a
 * release just freed (still in this CPU's cache) are the next ones filled; each slot is
 * taken by CAS so threads and handles of the process never share one. A commit
 * turns the first slot RESERVED -> LIVE; a consume LIVE -> READING (exactly once: the
 * tag carries the generation, so one CAS checks it); a release, cancel, withdraw or
 * death report takes the first slot to RECLAIMING, frees the tails, then the head,
 * and signals the owner lane's credit word.
 */
#include <string.h>
#include "exch_layout.h"

/* ---- freeing ----------------------------------------------------------------- */

/* A change a producer of `node` may wait for: wake its credit waiters, ring its
 * doorbell if it asked (a try_reserve found the lane full). */
static void credit_signal(struct orbit_arena *a, uint32_t node)
{
    struct arena_lane *l = &a->lanes[node];
    /* Frees are published before this seq_cst RMW; the waiter re-scans after arming. */
    orb_wait_signal(&l->credit, &a->stats);
    if (atomic_load_explicit(&l->watch, memory_order_seq_cst) &&
        atomic_exchange_explicit(&l->watch, 0, memory_order_seq_cst))
        orb_fleet_ring_doorbell(a->fleet, node, &a->stats);
}

void arena_free_run(struct orbit_arena *a, uint32_t node, uint32_t first, uint64_t gen, uint32_t count)
{
    if (count == 0 || count > a->slots_per_lane - first)
        count = 1;
    for (uint32_t j = first + 1; j < first + count; j++) {
        uint64_t want = ATAG(gen, ASLOT_TAIL, 0);
        /* CAS, not store: a tail already freed (and maybe retaken) is left alone. */
        atomic_compare_exchange_strong(&arena_slot_at(a, node, j)->tag, &want, ATAG(gen, ASLOT_FREE, 0));
    }
    struct arena_slot *h = arena_slot_at(a, node, first);
    atomic_store_explicit(&h->reader_inc, 0, memory_order_relaxed);
    atomic_store_explicit(&h->count, 0, memory_order_relaxed);
    atomic_store_explicit(&h->len, 0, memory_order_relaxed);
    atomic_store_explicit(&h->exchange, 0, memory_order_relaxed);
    atomic_store_explicit(&h->flow, 0, memory_order_relaxed);
    /* Release: the fields above and every reader's use of the bytes come before FREE. */
    atomic_store_explicit(&h->tag, ATAG(gen, ASLOT_FREE, 0), memory_order_release);
    credit_signal(a, node);
}

/* Take a head we expect in state `from` for freeing; false if it moved on. */
static bool seize_head(struct orbit_arena *a, uint32_t node, uint32_t first, uint64_t gen,
                       unsigned from, uint16_t reader)
{
    uint64_t want = ATAG(gen, from, reader);
    return atomic_compare_exchange_strong(&arena_slot_at(a, node, first)->tag, &want,
                                          ATAG(gen, ASLOT_RECLAIMING, a->node));
}

/* ---- reserving ------------------------------------------------------------------ */

/* Roll back tails [from, end) we took for gen (nobody else writes a slot we hold). */
static void untake(struct orbit_arena *a, uint32_t from, uint32_t end, uint64_t gen)
{
    for (uint32_t j = from; j < end; j++)
        atomic_store_explicit(&arena_slot_at(a, a->node, j)->tag, ATAG(gen, ASLOT_FREE, 0),
                              memory_order_release);
}

/* Take slots [i, i + count) of our lane for a new generation; false if one was taken first. */
static bool take_run(struct orbit_arena *a, uint32_t i, uint32_t count, uint64_t gen)
{
    for (uint32_t j = i + count; j-- > i;) {
        struct arena_slot *s = arena_slot_at(a, a->node, j);
        uint64_t t = atomic_load_explicit(&s->tag, memory_order_relaxed);
        if (ATAG_STATE(t) == ASLOT_FREE) {
            /* Our incarnation before the CAS: a death report never sees a slot of ours
             * without it (only this node's threads race for a free slot of its lane). */
            atomic_store_explicit(&s->producer_inc, a->incarnation, memory_order_relaxed);
            if (atomic_compare_exchange_strong(&s->tag, &t, ATAG(gen, j == i ? ASLOT_RESERVED : ASLOT_TAIL, 0)))
                continue;
        }
        untake(a, j + 1, i + count, gen);
        return false;
    }
    struct arena_slot *h = arena_slot_at(a, a->node, i);
    atomic_store_explicit(&h->reader_inc, 0, memory_order_relaxed);
    atomic_store_explicit(&h->count, count, memory_order_relaxed);
    atomic_store_explicit(&h->len, 0, memory_order_relaxed);
    atomic_store_explicit(&h->exchange, 0, memory_order_relaxed);
    atomic_store_explicit(&h->flow, 0, memory_order_relaxed);
    return true;
}

/* First fit in [lo, hi), checking each window from its end so a busy slot skips past it.
 * first NULL: only look. */
static bool take_in(struct orbit_arena *a, uint32_t lo, uint32_t hi, uint32_t count, uint32_t *first)
{
    uint32_t i = lo;
    while (hi >= count && i <= hi - count) {
        uint32_t j = i + count;
        bool free_run = true;
        while (j-- > i) {
            if (ATAG_STATE(atomic_load_explicit(&arena_slot_at(a, a->node, j)->tag, memory_order_relaxed)) !=
                ASLOT_FREE) {
                free_run = false;
                break;
            }
        }
        if (!free_run) {
            i = j + 1;
            continue;
        }
        if (!first)
            return true;
        uint64_t gen = atomic_fetch_add_explicit(&a->lanes[a->node].next_generation, 1, memory_order_relaxed) + 1;
        if (gen > ARENA_GEN_MAX)
            return false;
        if (take_run(a, i, count, gen)) {
            *first = i;
            return true;
        }
        i++;
    }
    return false;
}

static void fill_reservation(struct orbit_arena *a, uint32_t first, uint32_t count, struct orbit_reservation *out)
{
    uint64_t t = atomic_load_explicit(&arena_slot_at(a, a->node, first)->tag, memory_order_relaxed);
    *out = (struct orbit_reservation){
        .arena = a, .data = arena_data_at(a, a->node, first), .capacity = (size_t)count * a->slot_bytes,
        .first_slot = first, .slot_count = count, .generation = ATAG_GEN(t), .done = false,
    };
}

/*
 * One look at our lane: 1 and *out when a run was taken (out NULL: one is
 * free), 0 when none is, or -ENOMEM when the mount had no room for the run's
 * pages (the run is given back).
 */
static int lane_take(struct orbit_arena *a, uint32_t count, struct orbit_reservation *out)
{
    struct arena_lane *l = &a->lanes[a->node];
    /* changes is read before the scan: a free after it moves the word and voids the memo. */
    uint32_t seen = atomic_load_explicit(&l->credit.changes, memory_order_acquire);
    uint64_t memo = atomic_load_explicit(&a->full_memo, memory_order_relaxed);
    if (memo && (uint32_t)memo == seen && count >= (uint32_t)(memo >> 32))
        return 0;   /* nothing was freed since a scan found no run this long */
    uint32_t first;
    if (take_in(a, 0, a->slots_per_lane, count, out ? &first : NULL)) {
        if (!out)
            return 1;
        /* Its pages before the reservation is handed out: nothing of it is published yet, so
         * a run whose pages could not be had goes back as a cancel would. */
        int rc = arena_payload_ready(a, first + count);
        if (rc < 0) {
            uint64_t t = atomic_load_explicit(&arena_slot_at(a, a->node, first)->tag, memory_order_relaxed);
            arena_free_run(a, a->node, first, ATAG_GEN(t), count);
            return rc;
        }
        fill_reservation(a, first, count, out);
        arena_count(a, ARENA_TALLY_RESERVED, ARENA_CTR_RESERVED, 1);
        return 1;
    }
    atomic_store_explicit(&a->full_memo, (uint64_t)count << 32 | seen, memory_order_relaxed);
    return 0;
}

int arena_pred_credit(void *ctx)
{
    struct arena_want *w = ctx;
    int r = lane_take(w->a, w->count, w->take ? w->out : NULL);
    if (r != 0)
        return r;
    w->waited = true;
    return 0;
}

static int reserve_check(struct orbit_arena *a, size_t len, struct orbit_reservation *out, uint32_t *count)
{
    if (!a || !out || len == 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    if (!arena_is_member(a))
        return orb_fail_text(-ORBIT_ENOTOWNER, "only the node that reserved (or consumed) the chunk may do that, and an observer reserves nothing");
    if (len > a->lay.lane_bytes)
        return orb_fail_text(-ORBIT_ETOOLARGE, "larger than an arena lane (slot_bytes x slots_per_lane)");
    *count = (uint32_t)((len + a->slot_bytes - 1) / a->slot_bytes);
    return 0;
}

int orbit_arena_try_reserve(struct orbit_arena *a, size_t len, struct orbit_reservation *out)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    uint32_t count;
    int rc = reserve_check(a, len, out, &count);
    if (rc < 0)
        return rc;
    if ((rc = lane_take(a, count, out)) != 0)
        return rc < 0 ? rc : 0;
    /* Ask for the doorbell (seq_cst RMW), then look once more: a free after the RMW rings it,
     * one before it moved the credit word, so the memo does not skip this look. */
    atomic_exchange_explicit(&a->lanes[a->node].watch, 1, memory_order_seq_cst);
    if ((rc = lane_take(a, count, out)) != 0)
        return rc < 0 ? rc : 0;
    arena_count(a, ARENA_TALLY_FULL, ARENA_CTR_FULL, 1);
    return -ORBIT_EPAYLOADFULL;
}

int orbit_arena_reserve(struct orbit_arena *a, size_t len, int timeout_ms, struct orbit_reservation *out)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    uint32_t count;
    int rc = reserve_check(a, len, out, &count);
    if (rc < 0)
        return rc;
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    struct arena_want want = { a, count, out, true, false };
    int r = orb_wait_until(&a->lanes[a->node].credit, arena_pred_credit, &want, &deadline, &a->spin,
                           &a->stats);
    if (want.waited)
        orb_count(&a->ctr, ARENA_CTR_CREDIT_WAITS, 1);
    return r < 0 ? r : 0;
}

/* ---- committing -------------------------------------------------------------------- */

/* A reservation the caller hands back: bounds-checked, still ours. */
static int res_check(const struct orbit_reservation *r)
{
    if (!r || !r->arena || r->done)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    const struct orbit_arena *a = r->arena;
    if (!arena_is_member(a) || r->slot_count == 0 || r->first_slot >= a->slots_per_lane ||
        r->slot_count > a->slots_per_lane - r->first_slot)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    return 0;
}

int arena_publish(struct orbit_reservation *r, size_t len, orbit_id exchange, uint8_t flow,
                  struct orbit_chunk_desc *desc)
{
    int rc = res_check(r);
    if (rc < 0)
        return rc;
    struct orbit_arena *a = r->arena;
    if (len == 0 || len > r->capacity)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    uint32_t count = (uint32_t)((len + a->slot_bytes - 1) / a->slot_bytes);
    struct arena_slot *h = arena_slot_at(a, a->node, r->first_slot);
    uint64_t want = ATAG(r->generation, ASLOT_RESERVED, 0);
    if (atomic_load_explicit(&h->tag, memory_order_relaxed) != want) {
        r->done = true;   /* taken back under us: reset_all or a death report of this life */
        return orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    }
    atomic_store_explicit(&h->count, count, memory_order_relaxed);
    atomic_store_explicit(&h->len, (uint32_t)len, memory_order_relaxed);
    atomic_store_explicit(&h->exchange, exchange, memory_order_relaxed);
    atomic_store_explicit(&h->flow, flow, memory_order_relaxed);
    /* seq_cst CAS (a release): the bytes and fields above are visible to whoever sees LIVE. */
    if (!atomic_compare_exchange_strong(&h->tag, &want, ATAG(r->generation, ASLOT_LIVE, 0))) {
        r->done = true;   /* taken back under us: reset_all or a death report of this life */
        return orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    }
    *desc = (struct orbit_chunk_desc){ a->kind, a->node, r->first_slot, count, (uint32_t)len, r->generation };
    return 0;
}

/* The descriptor was delivered: free the slots past the committed length. */
void arena_settle(struct orbit_reservation *r, const struct orbit_chunk_desc *d)
{
    struct orbit_arena *a = r->arena;
    bool freed = false;
    for (uint32_t j = r->first_slot + d->slot_count; j < r->first_slot + r->slot_count; j++) {
        uint64_t want = ATAG(r->generation, ASLOT_TAIL, 0);
        /* These tails were never in a descriptor; the CAS skips one a death report freed. */
        freed |= atomic_compare_exchange_strong(&arena_slot_at(a, a->node, j)->tag, &want,
                                                ATAG(r->generation, ASLOT_FREE, 0));
    }
    if (freed)
        credit_signal(a, a->node);
    r->done = true;
    arena_count(a, ARENA_TALLY_COMMITTED, ARENA_CTR_COMMITTED, 1);
    arena_count(a, ARENA_TALLY_BYTES_COMMITTED, ARENA_CTR_BYTES_COMMITTED, d->len);
}

/* The descriptor was not delivered: LIVE back to RESERVED, the reservation as it was. */
int arena_unpublish(struct orbit_reservation *r)
{
    struct orbit_arena *a = r->arena;
    struct arena_slot *h = arena_slot_at(a, a->node, r->first_slot);
    uint64_t want = ATAG(r->generation, ASLOT_LIVE, 0);
    /* Never published, so no reader holds it; only a reclaim can have moved it. */
    if (!atomic_compare_exchange_strong(&h->tag, &want, ATAG(r->generation, ASLOT_RESERVED, 0))) {
        r->done = true;
        return orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    }
    atomic_store_explicit(&h->count, r->slot_count, memory_order_relaxed);
    atomic_store_explicit(&h->exchange, 0, memory_order_relaxed);
    return 0;
}

int orbit_arena_commit(struct orbit_reservation *r, size_t len, struct orbit_chunk_desc *desc)
{
    int refused = reservation_enter(r, __func__);
    if (refused < 0)
        return refused;
    if (!desc)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    int rc = arena_publish(r, len, 0, 0, desc);
    if (rc == 0)
        arena_settle(r, desc);
    return rc;
}

/* In a fork child the parent's reservation is left to the parent. */
void orbit_arena_cancel(struct orbit_reservation *r)
{
    if (reservation_enter(r, __func__) < 0 || res_check(r) < 0)
        return;
    struct orbit_arena *a = r->arena;
    r->done = true;
    if (!seize_head(a, a->node, r->first_slot, r->generation, ASLOT_RESERVED, 0))
        return;   /* reclaimed already */
    arena_free_run(a, a->node, r->first_slot, r->generation, r->slot_count);
    arena_count(a, ARENA_TALLY_CANCELLED, ARENA_CTR_NONE, 1);
}

/* ---- consuming ---------------------------------------------------------------------- */

int arena_check_desc(const struct orbit_arena *a, const struct orbit_chunk_desc *d)
{
    uint64_t cap = (uint64_t)d->slot_count * a->slot_bytes;
    if (d->arena_kind != a->kind || d->node >= a->fleet_capacity || d->slot_count == 0 ||
        d->first_slot >= a->slots_per_lane || d->slot_count > a->slots_per_lane - d->first_slot ||
        d->len == 0 || d->len > cap || d->len <= cap - a->slot_bytes ||
        d->generation == 0 || d->generation > ARENA_GEN_MAX)
        return orb_fail_text(-ORBIT_ECORRUPT, "the descriptor names slots outside the arena, or the slots it names are garbled");
    return 0;
}

/* The run's bookkeeping agrees with the descriptor: recorded length and owner, every tail. */
static int check_run(const struct orbit_arena *a, const struct orbit_chunk_desc *d, orbit_id exchange,
                     uint8_t flow)
{
    struct arena_slot *h = arena_slot_at(a, d->node, d->first_slot);
    if (atomic_load_explicit(&h->count, memory_order_relaxed) != d->slot_count ||
        atomic_load_explicit(&h->len, memory_order_relaxed) != d->len ||
        atomic_load_explicit(&h->exchange, memory_order_relaxed) != exchange ||
        atomic_load_explicit(&h->flow, memory_order_relaxed) != flow)
        return orb_fail_text(-ORBIT_ECORRUPT, "the descriptor names slots outside the arena, or the slots it names are garbled");
    for (uint32_t j = d->first_slot + 1; j < d->first_slot + d->slot_count; j++)
        if (atomic_load_explicit(&arena_slot_at(a, d->node, j)->tag, memory_order_relaxed) !=
            ATAG(d->generation, ASLOT_TAIL, 0))
            return orb_fail_text(-ORBIT_ECORRUPT, "the descriptor names slots outside the arena, or the slots it names are garbled");
    return 0;
}

int arena_take(struct orbit_arena *a, const struct orbit_chunk_desc *d, orbit_id exchange, uint8_t flow,
               struct orbit_chunk *out)
{
    if (!arena_is_member(a))
        return orb_fail_text(-ORBIT_ENOTOWNER, "only the node that reserved (or consumed) the chunk may do that, and an observer reserves nothing");
    int rc = arena_check_desc(a, d);
    if (rc < 0)
        return rc;
    struct arena_slot *h = arena_slot_at(a, d->node, d->first_slot);
    uint64_t live = ATAG(d->generation, ASLOT_LIVE, 0);
    /* Acquire: a LIVE tag of this generation makes the producer's fields and bytes visible. */
    if (atomic_load_explicit(&h->tag, memory_order_acquire) != live)
        return orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    if ((rc = check_run(a, d, exchange, flow)) < 0)
        /* Still LIVE after the failed check: the descriptor lies. Else someone took it meanwhile. */
        return atomic_load_explicit(&h->tag, memory_order_acquire) == live ? rc : orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    /* The one CAS that makes consumption exact-once; the generation rules out a later tenant. */
    if (!atomic_compare_exchange_strong(&h->tag, &live, ATAG(d->generation, ASLOT_READING, a->node)))
        return orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    atomic_store_explicit(&h->reader_inc, a->incarnation, memory_order_release);
    *out = (struct orbit_chunk){ .arena = a, .data = arena_data_at(a, d->node, d->first_slot),
                                 .len = d->len, .desc = *d, .released = false };
    arena_count(a, ARENA_TALLY_CONSUMED, ARENA_CTR_CONSUMED, 1);
    arena_count(a, ARENA_TALLY_BYTES_CONSUMED, ARENA_CTR_BYTES_CONSUMED, d->len);
    return 0;
}

int orbit_arena_consume(struct orbit_arena *a, const struct orbit_chunk_desc *d, struct orbit_chunk *out)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!d || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__,
                        !d ? "d" : "out");
    return arena_take(a, d, 0, 0, out);
}

/* In a fork child the parent's chunk stays the parent's to release. */
void orbit_chunk_release(struct orbit_chunk *c)
{
    orb_error_clear();
    if (!c || c->released || !c->arena || !orb_handle_ours(c->arena->fork_generation))
        return;
    c->released = true;
    struct orbit_arena *a = c->arena;
    const struct orbit_chunk_desc *d = &c->desc;
    if (arena_check_desc(a, d) < 0 || !arena_is_member(a))
        return;
    if (!seize_head(a, d->node, d->first_slot, d->generation, ASLOT_READING, a->node))
        return;   /* reclaimed under us (reset_all, or we were reported dead) */
    arena_free_run(a, d->node, d->first_slot, d->generation, d->slot_count);
    arena_count(a, ARENA_TALLY_RELEASED, ARENA_CTR_RELEASED, 1);
}

int orbit_arena_withdraw(struct orbit_arena *a, const struct orbit_chunk_desc *d)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!d)
        return orb_fail(-ORBIT_EMALFORMED, "%s: d is NULL", __func__);
    int rc = arena_check_desc(a, d);
    if (rc < 0)
        return rc;
    if (!arena_is_member(a) || d->node != a->node)
        return orb_fail_text(-ORBIT_ENOTOWNER, "only the node that reserved (or consumed) the chunk may do that, and an observer reserves nothing");
    if (!seize_head(a, d->node, d->first_slot, d->generation, ASLOT_LIVE, 0))
        return orb_fail_text(-ORBIT_ESTALE, "the chunk or reservation has ended (committed, released, withdrawn, reclaimed, or the arena was reset)");
    arena_free_run(a, d->node, d->first_slot, d->generation, d->slot_count);
    arena_count(a, ARENA_TALLY_RECLAIMED, ARENA_CTR_RECLAIMED, 1);
    return 0;
}

/* Producer side: every committed chunk of this exchange and flow still LIVE in our lane. */
void arena_withdraw_exchange(struct orbit_arena *a, orbit_id exchange, uint8_t flow)
{
    if (!arena_is_member(a) || exchange == 0)
        return;
    for (uint32_t i = 0; i < a->slots_per_lane; i++) {
        struct arena_slot *s = arena_slot_at(a, a->node, i);
        uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
        if (ATAG_STATE(t) != ASLOT_LIVE || atomic_load(&s->exchange) != exchange ||
            atomic_load(&s->flow) != flow)
            continue;
        uint32_t count = atomic_load(&s->count);
        if (seize_head(a, a->node, i, ATAG_GEN(t), ASLOT_LIVE, 0)) {
            arena_free_run(a, a->node, i, ATAG_GEN(t), count);
            arena_count(a, ARENA_TALLY_RECLAIMED, ARENA_CTR_RECLAIMED, 1);
        }
    }
}

/* Is the head of d still LIVE (published, not taken)? */
bool arena_desc_live(const struct orbit_arena *a, const struct orbit_chunk_desc *d)
{
    if (arena_check_desc(a, d) < 0)
        return false;
    return atomic_load_explicit(&arena_slot_at(a, d->node, d->first_slot)->tag, memory_order_acquire) ==
           ATAG(d->generation, ASLOT_LIVE, 0);
}
