/* SPDX-License-Identifier: MIT */
/* Payload arena, the bottom floor: spec, geometry, the handle, opening, inspection. */
#include <stdlib.h>
#include <string.h>
#include "exch_layout.h"
#include "core/readiness.h"
#include "core/table_ops.h"

static int spec_check(const struct orbit_arena_spec *spec)
{
    if (spec->kind == ORB_FLEET_KIND || spec->kind == 0 || !orb_is_pow2(spec->slot_bytes) ||
        spec->slot_bytes < 64 || spec->slot_bytes > (1u << 30) || !orb_is_pow2(spec->slots_per_lane) ||
        spec->slots_per_lane > (1u << 24))
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
    if ((uint64_t)spec->slot_bytes * spec->slots_per_lane > ORBIT_ARENA_LANE_MAX)
        return orb_fail_text(-ORBIT_ETOOLARGE, "larger than an arena lane (slot_bytes x slots_per_lane)");
    return 0;
}

/* spec_check's refusal with the field that is wrong, for the caller's own spec. */
static int spec_explain(const struct orbit_arena_spec *spec, int rc, const char *call)
{
    if (spec->kind == ORB_FLEET_KIND || spec->kind == 0)
        return orb_fail(rc, "%s: spec.kind %u: 1..254 (0 and 255 are taken)", call, spec->kind);
    if (!orb_is_pow2(spec->slot_bytes) || spec->slot_bytes < 64 || spec->slot_bytes > (1u << 30))
        return orb_fail(rc, "%s: spec.slot_bytes %u: a power of two, 64 bytes to 1 GiB", call, spec->slot_bytes);
    if (!orb_is_pow2(spec->slots_per_lane) || spec->slots_per_lane > (1u << 24))
        return orb_fail(rc, "%s: spec.slots_per_lane %u: a power of two, 1..%u", call, spec->slots_per_lane,
                        1u << 24);
    return orb_fail(rc, "%s: spec: slot_bytes %u x slots_per_lane %u is past a lane's %u bytes", call,
                    spec->slot_bytes, spec->slots_per_lane, (unsigned)ORBIT_ARENA_LANE_MAX);
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
    l->slots_off = orb_align_up(l->lanes_off + (size_t)fleet_capacity * sizeof(struct arena_lane), 64);
    l->payload_off = orb_align_up(l->slots_off + l->total_slots * sizeof(struct arena_slot), ARENA_PAYLOAD_ALIGN);
    if ((uint64_t)l->lane_bytes * fleet_capacity > (1ull << 46))
        return orb_fail_text(-ORBIT_ETOOLARGE, "larger than an arena lane (slot_bytes x slots_per_lane)");
    l->total = l->payload_off + l->lane_bytes * fleet_capacity;
    return 0;
}

static void handle_prepare(struct orb_table_base *b)
{
    ((struct orbit_arena *)b)->fleet_capacity = b->fleet->capacity;
}

static void handle_bind(struct orb_table_base *b, const void *geometry, const void *layout)
{
    struct orbit_arena *a = (struct orbit_arena *)b;
    const struct arena_geometry *g = geometry;
    const struct arena_layout *l = layout;
    a->lay = *l;
    a->slot_bytes = g->slot_bytes;
    a->slots_per_lane = g->slots_per_lane;
    a->lanes = (struct arena_lane *)(void *)((unsigned char *)a->seg.base + l->lanes_off);
    a->slots = (struct arena_slot *)(void *)((unsigned char *)a->seg.base + l->slots_off);
    a->payload = (unsigned char *)a->seg.base + l->payload_off;
    a->epoch = &orb_seg_hdr(&a->seg)->epoch;
}

int arena_payload_ready(struct orbit_arena *a, uint32_t end)
{
    uint32_t ready = atomic_load_explicit(&a->payload_ready, memory_order_acquire);
    if (end <= ready)
        return 0;
    size_t from = (size_t)(arena_data_at(a, a->node, ready) - (unsigned char *)a->seg.base);
    int rc = orb_table_populate(&a->base, from, (size_t)(end - ready) * a->slot_bytes,
                                "this member's arena lane, as far as the chunk reaches");
    /* Release, raised only: the pages exist before another thread of ours skips the populate. */
    while (rc == 0 && ready < end &&
           !atomic_compare_exchange_weak_explicit(&a->payload_ready, &ready, end, memory_order_release,
                                                  memory_order_acquire))
        ;
    return rc;
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
        return spec_explain(spec, rc, __func__);
    struct arena_geometry g = geometry_of(spec);
    struct arena_layout l;
    if ((rc = layout_of(&g, f->capacity, &l)) < 0)
        return rc;
    struct orb_seg_request req = {
        .kind = spec->kind, .table_type = ORB_TABLE_ARENA, .geometry = &g, .geometry_len = sizeof g,
        .geometry_names = (const char *const[]){ "layout version", "slot_bytes", "slots_per_lane", NULL },
        .table_bytes = l.total,
        /* The lanes' and slots' words every member reads; payload is populated as chunks take it. */
        .populate_bytes = l.slots_off + l.total_slots * sizeof(struct arena_slot),
        .init = orb_table_init_epoch,   /* zero: every slot FREE at generation 0 */
    };
    return orb_table_create(&arena_kind, f, &req, (void **)out);
}

/* The geometry another process wrote (its type and size checked by the base): its values. */
static int geometry_check(const struct orb_segment *seg, const void *geometry, void *layout)
{
    const struct arena_geometry *g = geometry;
    struct arena_layout *l = layout;
    const struct orb_seg_header *h = orb_seg_hdr(seg);
    if (g->layout_version != ARENA_LAYOUT_VERSION || g->slot_meta_bytes != sizeof(struct arena_slot) ||
        g->lane_header_bytes != sizeof(struct arena_lane))
        return orb_fail_text(-ORBIT_EGEOMETRY, "the arena's geometry fails its checks (garbled, or another orbit version)");
    struct orbit_arena_spec spec = { .kind = h->kind, .slot_bytes = g->slot_bytes, .slots_per_lane = g->slots_per_lane };
    if (spec_check(&spec) < 0 || layout_of(g, h->fleet_capacity, l) < 0 || h->table_bytes != l->total ||
        seg->mapped < l->total)
        return orb_fail_text(-ORBIT_ECORRUPT, "the descriptor names slots outside the arena, or the slots it names are garbled");
    return 0;
}

_Static_assert(sizeof(struct arena_layout) <= ORB_TABLE_LAYOUT_MAX, "the base holds the layout");

const struct orb_table_kind arena_kind = {
    .type = ORB_TABLE_ARENA, .handle_bytes = sizeof(struct orbit_arena),
    .geometry_len = sizeof(struct arena_geometry), .prepare = handle_prepare,
    .check = geometry_check, .bind = handle_bind,
};

int orbit_arena_open_existing(struct orbit_fleet *f, uint8_t kind, struct orbit_arena **out)
{
    return orb_table_open_existing_as(&arena_kind, f, kind, (void **)out, __func__);
}

/* Unmaps and frees: in a fork child the readiness fd goes without its driver (nothing shared). */
void orbit_arena_close(struct orbit_arena *a)
{
    orb_error_clear();
    orb_table_close(&arena_kind, a ? &a->base : NULL);
}

int orbit_arena_spec(const struct orbit_arena *a, struct orbit_arena_spec *out)
{
    orb_error_clear();
    if (!a || !out)
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
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
    return orb_table_readiness(&a->base, __func__);
}

void orbit_arena_stats(struct orbit_arena *a, struct orbit_arena_stats *out)
{
    if (arena_enter(a, __func__) < 0)
        return;
    if (!a || !out)
        return;
    uint64_t n[ARENA_TALLY_END];
    orb_tally_read(&a->tally, n, ARENA_TALLY_END);
    *out = (struct orbit_arena_stats){
        .reserved = n[ARENA_TALLY_RESERVED], .committed = n[ARENA_TALLY_COMMITTED],
        .cancelled = n[ARENA_TALLY_CANCELLED], .consumed = n[ARENA_TALLY_CONSUMED],
        .released = n[ARENA_TALLY_RELEASED], .reclaimed = n[ARENA_TALLY_RECLAIMED],
        .full = n[ARENA_TALLY_FULL], .bytes_committed = n[ARENA_TALLY_BYTES_COMMITTED],
        .bytes_consumed = n[ARENA_TALLY_BYTES_CONSUMED], .parks = atomic_load(&a->stats.parks),
        .wakes = atomic_load(&a->stats.wakes), .doorbells = atomic_load(&a->stats.doorbells),
    };
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
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
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
        return orb_fail_text(-ORBIT_EMALFORMED, "a NULL handle, reservation, chunk, descriptor or out, or one not of this arena");
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
