/* SPDX-License-Identifier: MIT */
/* Payload arena: opening the segment, geometry, death reports, reset, inspection. */
#include <stdlib.h>
#include <string.h>
#include "exch_layout.h"
#include "core/readiness.h"
#include "core/table_ops.h"

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static size_t align_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

static int spec_check(const struct orbit_arena_spec *spec)
{
    if (spec->kind == ORB_FLEET_KIND || spec->kind == 0 || !is_pow2(spec->slot_bytes) ||
        spec->slot_bytes < 64 || spec->slot_bytes > (1u << 30) || !is_pow2(spec->slots_per_lane) ||
        spec->slots_per_lane > (1u << 24))
        return -ORBIT_EMALFORMED;
    if ((uint64_t)spec->slot_bytes * spec->slots_per_lane > ORBIT_ARENA_LANE_MAX)
        return -ORBIT_ETOOLARGE;
    return 0;
}

static struct arena_geometry geometry_of(const struct orbit_arena_spec *spec)
{
    return (struct arena_geometry){
        .layout_version = ARENA_LAYOUT_VERSION, .slot_bytes = spec->slot_bytes,
        .slots_per_lane = spec->slots_per_lane, .slot_meta_bytes = sizeof(struct arena_slot),
        .lane_header_bytes = sizeof(struct arena_lane), .reserved = 0,
    };
}

static int layout_of(const struct arena_geometry *g, uint32_t fleet_capacity, struct arena_layout *l)
{
    memset(l, 0, sizeof *l);
    l->lane_bytes = (size_t)g->slot_bytes * g->slots_per_lane;
    l->total_slots = (size_t)fleet_capacity * g->slots_per_lane;
    l->lanes_off = ORB_SEG_HEADER_BYTES;
    l->slots_off = align_up(l->lanes_off + (size_t)fleet_capacity * sizeof(struct arena_lane), 64);
    l->payload_off = align_up(l->slots_off + l->total_slots * sizeof(struct arena_slot), ARENA_PAYLOAD_ALIGN);
    if ((uint64_t)l->lane_bytes * fleet_capacity > (1ull << 46))
        return -ORBIT_ETOOLARGE;
    l->total = l->payload_off + l->lane_bytes * fleet_capacity;
    return 0;
}

static int table_init(struct orb_segment *seg, void *ctx)
{
    (void)ctx;
    /* A new mapping reads zero: every slot FREE at generation 0, every counter 0. */
    atomic_store_explicit(&orb_seg_hdr(seg)->epoch, orb_next_epoch(0), memory_order_release);
    return 0;
}

static int handle_new(struct orbit_fleet *f, struct orbit_arena **out)
{
    struct orbit_arena *a = aligned_alloc(64, align_up(sizeof *a, 64));
    if (!a)
        return -ENOMEM;
    memset(a, 0, sizeof *a);
    a->fleet = f;
    a->fork_generation = f->fork_generation;
    a->node = f->observer ? ORBIT_NODE_NONE : f->node;
    a->incarnation = f->incarnation;
    a->fleet_capacity = f->capacity;
    a->readiness_fd = -1;
    pthread_mutex_init(&a->lock, NULL);
    *out = a;
    return 0;
}

static void handle_bind(struct orbit_arena *a, const struct arena_geometry *g, const struct arena_layout *l)
{
    a->lay = *l;
    a->kind = a->seg.kind;
    a->slot_bytes = g->slot_bytes;
    a->slots_per_lane = g->slots_per_lane;
    a->lanes = (struct arena_lane *)(void *)((unsigned char *)a->seg.base + l->lanes_off);
    a->slots = (struct arena_slot *)(void *)((unsigned char *)a->seg.base + l->slots_off);
    a->payload = (unsigned char *)a->seg.base + l->payload_off;
    a->epoch = &orb_seg_hdr(&a->seg)->epoch;
}

static void handle_free(struct orbit_arena *a)
{
    if (a->seg.base)
        orb_fleet_table_close(a->fleet, &a->seg);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* Pre-fault our own payload lane once, before anything of ours is published in it. */
int arena_lane_ready(struct orbit_arena *a)
{
    if (!arena_is_member(a))
        return 0;
    return orb_segment_populate_once(&a->seg, &a->lock, &a->lane_ready,
                                     a->lay.payload_off + (size_t)a->node * a->lay.lane_bytes, a->lay.lane_bytes);
}

int orbit_arena_open(struct orbit_fleet *f, const struct orbit_arena_spec *spec, struct orbit_arena **out)
{
    static const struct orbit_arena_spec dflt = ORBIT_ARENA_SPEC_DEFAULT;
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (!spec)
        spec = &dflt;
    if ((rc = orb_check_resv(spec->resv, sizeof spec->resv / sizeof spec->resv[0], __func__,
                             "ORBIT_ARENA_SPEC_DEFAULT")) < 0)
        return rc;
    if ((rc = spec_check(spec)) < 0)
        return orb_fail(rc, "%s: spec: kind %u (not the fleet's), slot_bytes %u (a power of two) and "
                        "slots_per_lane %u (1..%u): one is out of range", __func__, spec->kind,
                        spec->slot_bytes, spec->slots_per_lane, ORBIT_ARENA_LANE_MAX);
    struct arena_geometry g = geometry_of(spec);
    struct arena_layout l;
    if ((rc = layout_of(&g, f->capacity, &l)) < 0)
        return rc;
    struct orbit_arena *a;
    if ((rc = handle_new(f, &a)) < 0)
        return rc;
    struct orb_seg_request req = {
        .kind = spec->kind, .table_type = ORB_TABLE_ARENA, .geometry = &g, .geometry_len = sizeof g,
        .table_bytes = l.total, .populate_bytes = l.payload_off, .init = table_init,
    };
    rc = orb_fleet_table_open(f, &req, &a->seg);
    if (rc == 0) {
        handle_bind(a, &g, &l);
        rc = arena_lane_ready(a);
    }
    if (rc < 0) {
        handle_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

/* Geometry read back from a header another process wrote: check before use. */
static int geometry_from_header(const struct orb_segment *seg, struct arena_geometry *g, struct arena_layout *l)
{
    const struct orb_seg_header *h = orb_seg_hdr(seg);
    if (h->table_type != ORB_TABLE_ARENA || h->geometry_len != sizeof *g)
        return -ORBIT_EGEOMETRY;
    memcpy(g, h->geometry, sizeof *g);
    if (g->layout_version != ARENA_LAYOUT_VERSION || g->slot_meta_bytes != sizeof(struct arena_slot) ||
        g->lane_header_bytes != sizeof(struct arena_lane))
        return -ORBIT_EGEOMETRY;
    struct orbit_arena_spec spec = { .kind = h->kind, .slot_bytes = g->slot_bytes, .slots_per_lane = g->slots_per_lane };
    if (spec_check(&spec) < 0 || layout_of(g, h->fleet_capacity, l) < 0 || h->table_bytes != l->total ||
        seg->mapped < l->total)
        return -ORBIT_ECORRUPT;
    return 0;
}

int orbit_arena_open_existing(struct orbit_fleet *f, uint8_t kind, struct orbit_arena **out)
{
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    struct orbit_arena *a;
    rc = handle_new(f, &a);
    if (rc < 0)
        return rc;
    struct arena_geometry g;
    struct arena_layout l;
    rc = orb_fleet_table_open_existing(f, kind, &a->seg);
    if (rc == 0 && (rc = geometry_from_header(&a->seg, &g, &l)) == 0)
        handle_bind(a, &g, &l);   /* tools and death reports: our lane is faulted on first reserve */
    if (rc < 0) {
        handle_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

/* Unmaps and frees: in a fork child the readiness fd goes without its driver (nothing shared). */
void orbit_arena_close(struct orbit_arena *a)
{
    orb_error_clear();
    if (!a)
        return;
    if (a->readiness_fd >= 0)
        orb_readiness_close(a->readiness_fd);
    handle_free(a);
}

int orbit_arena_spec(const struct orbit_arena *a, struct orbit_arena_spec *out)
{
    orb_error_clear();
    if (!a || !out)
        return -ORBIT_EMALFORMED;
    *out = (struct orbit_arena_spec){ .kind = a->kind, .slot_bytes = a->slot_bytes, .slots_per_lane = a->slots_per_lane };
    return 0;
}

uint8_t orbit_arena_kind(const struct orbit_arena *a)
{
    orb_error_clear();
    return a ? a->kind : 0;
}

uint64_t orbit_arena_epoch(struct orbit_arena *a)
{
    if (arena_enter(a, __func__) < 0)
        return 0;
    return a ? atomic_load_explicit(a->epoch, memory_order_acquire) : 0;
}

int orbit_arena_readiness(struct orbit_arena *a)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a)
        return -ORBIT_EMALFORMED;
    if (!arena_is_member(a))
        return -ORBIT_ENOTOWNER;
    pthread_mutex_lock(&a->lock);
    int fd = -ORBIT_EBUSY;
    if (a->readiness_fd < 0) {
        fd = orb_readiness_open(&orb_fleet_record(a->fleet, a->node)->doorbell);
        if (fd >= 0)
            a->readiness_fd = fd;
    }
    pthread_mutex_unlock(&a->lock);
    return fd;
}

void orbit_arena_stats(struct orbit_arena *a, struct orbit_arena_stats *out)
{
    if (arena_enter(a, __func__) < 0)
        return;
    if (!a || !out)
        return;
    *out = (struct orbit_arena_stats){
        .reserved = atomic_load(&a->n_reserved), .committed = atomic_load(&a->n_committed),
        .cancelled = atomic_load(&a->n_cancelled), .consumed = atomic_load(&a->n_consumed),
        .released = atomic_load(&a->n_released), .reclaimed = atomic_load(&a->n_reclaimed),
        .full = atomic_load(&a->n_full), .bytes_committed = atomic_load(&a->bytes_committed),
        .bytes_consumed = atomic_load(&a->bytes_consumed), .parks = atomic_load(&a->stats.parks),
        .wakes = atomic_load(&a->stats.wakes), .doorbells = atomic_load(&a->stats.doorbells),
    };
}

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
    arena_count(&a->n_reclaimed, 1);
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
            arena_count(&a->n_reclaimed, 1);
        }
}

void orbit_arena_node_dead(struct orbit_arena *a, uint16_t node, uint64_t incarnation)
{
    if (arena_enter(a, __func__) < 0)
        return;
    if (!a || node >= a->fleet_capacity || incarnation == 0)
        return;
    finish_cut_short(a, node);
    reclaim_producer(a, node, incarnation);
    reclaim_reader(a, node, incarnation);
    arena_sweep_undeliverable(a, node, incarnation);
    /* Any reader frees into any lane: the dead may have died mid-wake on any credit word. */
    for (uint32_t n = 0; n < a->fleet_capacity; n++)
        orb_wait_kick(&a->lanes[n].credit);
}

/* Quiescent owner boot: a new epoch, every slot free; generations keep counting up, so no
 * descriptor, reservation or chunk of before matches a slot again (nothing runs meanwhile). */
void orbit_arena_reset_all(struct orbit_arena *a)
{
    if (arena_enter(a, __func__) < 0)
        return;
    if (!a)
        return;
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
}

/* ---- inspection ----------------------------------------------------------------- */

/* One pass over a lane: a run's tails count under its first slot's state. */
static void lane_info(struct orbit_arena *a, uint32_t node, struct orbit_arena_lane_info *li)
{
    memset(li, 0, sizeof *li);
    li->node = (uint16_t)node;
    for (uint32_t i = 0; i < a->slots_per_lane;) {
        struct arena_slot *s = arena_slot_at(a, node, i);
        unsigned st = ATAG_STATE(atomic_load_explicit(&s->tag, memory_order_relaxed));
        uint32_t run = 1;
        if (st == ASLOT_FREE) {
            li->free++;
            i++;
            continue;
        }
        if (st != ASLOT_TAIL) {
            uint32_t count = atomic_load_explicit(&s->count, memory_order_relaxed);
            run = count && count <= a->slots_per_lane - i ? count : 1;
            li->chunks++;
        }
        /* An orphaned tail (its allocation died half way) counts as reserved. */
        uint32_t *c = st == ASLOT_LIVE ? &li->live : st == ASLOT_READING ? &li->reading :
                      st == ASLOT_RECLAIMING ? &li->reclaiming : &li->reserved;
        *c += run;
        i += run;
    }
}

ssize_t orbit_arena_lanes(struct orbit_arena *a, struct orbit_arena_lane_info *out, size_t max)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a || (max && !out))
        return -ORBIT_EMALFORMED;
    size_t n = 0;
    for (uint32_t node = 0; node < a->fleet_capacity; node++) {
        struct orbit_arena_lane_info li;
        lane_info(a, node, &li);
        if (li.free == a->slots_per_lane)
            continue;
        if (n < max)
            out[n] = li;
        n++;
    }
    return (ssize_t)n;
}

static void chunk_info(struct orbit_arena *a, uint32_t node, uint32_t i, uint64_t t, struct orbit_chunk_info *ci)
{
    struct arena_slot *s = arena_slot_at(a, node, i);
    memset(ci, 0, sizeof *ci);
    ci->desc = (struct orbit_chunk_desc){ a->kind, (uint16_t)node, i, atomic_load(&s->count),
                                          atomic_load(&s->len), ATAG_GEN(t) };
    ci->state = (enum orbit_chunk_state)ATAG_STATE(t);
    ci->exchange = atomic_load(&s->exchange);
    ci->flow = (uint8_t)atomic_load(&s->flow);
    ci->reader = ATAG_STATE(t) == ASLOT_READING ? ATAG_READER(t) : 0;
    ci->producer_incarnation = atomic_load(&s->producer_inc);
    ci->reader_incarnation = atomic_load(&s->reader_inc);
}

ssize_t orbit_arena_chunks(struct orbit_arena *a, struct orbit_chunk_info *out, size_t max)
{
    int refused = arena_enter(a, __func__);
    if (refused < 0)
        return refused;
    if (!a || (max && !out))
        return -ORBIT_EMALFORMED;
    size_t n = 0;
    for (uint32_t node = 0; node < a->fleet_capacity; node++) {
        for (uint32_t i = 0; i < a->slots_per_lane; i++) {
            uint64_t t = atomic_load_explicit(&arena_slot_at(a, node, i)->tag, memory_order_acquire);
            unsigned st = ATAG_STATE(t);
            if (st == ASLOT_FREE || st == ASLOT_TAIL || st > ASLOT_TAIL)
                continue;
            if (n < max)
                chunk_info(a, node, i, t, &out[n]);
            n++;
        }
    }
    return (ssize_t)n;
}

/* ---- the arena table ops ----------------------------------------------------- */

static int ops_open(struct orbit_fleet *f, uint8_t kind, void **out)
{
    struct orbit_arena *t = NULL;
    int rc = orbit_arena_open_existing(f, kind, &t);
    *out = t;
    return rc;
}
static void ops_close(void *t) { orbit_arena_close(t); }
static int ops_node_dead(void *t, uint16_t node, uint64_t inc) { orbit_arena_node_dead(t, node, inc); return 0; }
static int ops_reset_all(void *t) { orbit_arena_reset_all(t); return 0; }

static const struct orb_table_ops arena_ops = {
    .type = ORB_TABLE_ARENA, .name = "arena", .open_existing = ops_open, .close = ops_close,
    .node_dead = ops_node_dead, .reset_all = ops_reset_all, .account = arena_account,
};
ORB_TABLE_REGISTER(arena_ops);
