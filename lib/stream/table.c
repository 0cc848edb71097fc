/* SPDX-License-Identifier: MIT */
/* Streams, the bottom floor: spec, geometry, the handle, opening, epochs, inspection. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "stream_layout.h"
#include "core/readiness.h"
#include "core/table_ops.h"

static int spec_check(const struct orbit_stream_spec *spec)
{
    if (spec->kind == ORB_FLEET_KIND || !orb_is_pow2(spec->lane_capacity) ||
        spec->lane_capacity > ORBIT_ID_SLOT_MAX + 1u || !orb_is_pow2(spec->buffer_bytes) ||
        spec->buffer_bytes > (1u << 31) || spec->generation_limit > ORBIT_ID_GENERATION_MAX)
        return -ORBIT_EMALFORMED;
    return 0;
}

/* spec_check with the reason, for the caller's own spec. */
static int spec_explain(const struct orbit_stream_spec *spec, const char *call)
{
    if (spec->kind == ORB_FLEET_KIND)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.kind %u is the fleet segment's own", call, spec->kind);
    if (!orb_is_pow2(spec->lane_capacity) || spec->lane_capacity > ORBIT_ID_SLOT_MAX + 1u)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.lane_capacity %u: a power of two, 1..%u", call,
                        spec->lane_capacity, ORBIT_ID_SLOT_MAX + 1u);
    if (!orb_is_pow2(spec->buffer_bytes) || spec->buffer_bytes > (1u << 31))
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.buffer_bytes %u: a power of two up to 2 GiB", call,
                        spec->buffer_bytes);
    if (spec->generation_limit > ORBIT_ID_GENERATION_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.generation_limit %u: 0 (the most) or 1..%u", call,
                        spec->generation_limit, (unsigned)ORBIT_ID_GENERATION_MAX);
    return orb_check_resv(spec->resv, sizeof spec->resv / sizeof spec->resv[0], call,
                          "ORBIT_STREAM_SPEC_DEFAULT");
}

static struct stream_geometry geometry_of(const struct orbit_stream_spec *spec)
{
    uint32_t limit = spec->generation_limit ? spec->generation_limit : ORBIT_ID_GENERATION_MAX;
    return (struct stream_geometry){
        .layout_version = STREAM_LAYOUT_VERSION, .lane_capacity = spec->lane_capacity,
        .buffer_bytes = spec->buffer_bytes, .generation_limit = limit,
        .slot_bytes = sizeof(struct stream_slot), .offer_bytes = 0,
    };
}

/* Where everything sits for this geometry and fleet capacity; -ORBIT_ETOOLARGE if absurd. */
static int layout_of(const struct stream_geometry *g, uint32_t fleet_capacity, struct stream_layout *l)
{
    memset(l, 0, sizeof *l);
    l->lane_words = (fleet_capacity + 63) / 64;
    l->offer_bytes = (uint32_t)orb_align_up(sizeof(struct stream_offers) + 8u * l->lane_words, 64);
    l->total_slots = (size_t)fleet_capacity * g->lane_capacity;
    l->lane_ring_bytes = (size_t)g->lane_capacity * 2 * g->buffer_bytes;
    l->offers_off = ORB_SEG_HEADER_BYTES;
    l->slots_off = orb_align_up(l->offers_off + (size_t)fleet_capacity * l->offer_bytes, 64);
    l->rings_off = orb_align_up(l->slots_off + l->total_slots * sizeof(struct stream_slot),
                            STREAM_RINGS_ALIGN);
    /* 2^46 bytes of address space per table is far past any sane deployment. */
    if ((uint64_t)l->lane_ring_bytes * fleet_capacity > (1ull << 46))
        return -ORBIT_ETOOLARGE;
    l->total = l->rings_off + l->lane_ring_bytes * fleet_capacity;
    return 0;
}

static enum stream_park park_from_env(void)
{
#ifdef ORBIT_TEST_HOOKS
    const char *v = getenv("ORBIT_TEST_STREAM_PARK");
#else
    const char *v = NULL;   /* a build without -Dtest_hooks reads no ORBIT_TEST_* */
#endif
    if (v && strcmp(v, "installing") == 0)
        return STREAM_PARK_INSTALLING;
    if (v && strcmp(v, "opening") == 0)
        return STREAM_PARK_OPENING;
    return STREAM_PARK_NONE;
}

void stream_park_here(const struct orbit_streams *s, enum stream_park point)
{
    if (s->park == point)
        raise(SIGSTOP);
}

static void handle_prepare(struct orb_table_base *b)
{
    struct orbit_streams *s = (struct orbit_streams *)b;
    s->fleet_capacity = b->fleet->capacity;
    s->park = park_from_env();
}

static void handle_bind(struct orb_table_base *b, const void *geometry, const void *layout)
{
    struct orbit_streams *s = (struct orbit_streams *)b;
    const struct stream_geometry *g = geometry;
    const struct stream_layout *l = layout;
    s->lay = *l;
    s->lane_capacity = g->lane_capacity;
    s->buffer_bytes = g->buffer_bytes;
    s->generation_limit = g->generation_limit;
    s->offers = (unsigned char *)s->seg.base + l->offers_off;
    s->slots = (struct stream_slot *)(void *)((unsigned char *)s->seg.base + l->slots_off);
    s->rings = (unsigned char *)s->seg.base + l->rings_off;
    s->epoch = &orb_seg_hdr(&s->seg)->epoch;
}

int stream_rings_ready(struct orbit_streams *s, size_t index)
{
    size_t i = index % s->lane_capacity;
    uint64_t bit = 1ull << (i % 64);
    if (atomic_load_explicit(&s->rings_ready[i / 64], memory_order_acquire) & bit)
        return 0;
    /* Both directions: side B writes the B -> A ring, which lives in our lane too. */
    int rc = orb_table_populate(&s->base, (size_t)(stream_ring(s, index, 0) - (unsigned char *)s->seg.base),
                                2 * (size_t)s->buffer_bytes, "a new stream's two rings");
    if (rc == 0)   /* release: the pages exist before another thread of ours skips the populate */
        atomic_fetch_or_explicit(&s->rings_ready[i / 64], bit, memory_order_release);
    return rc;
}

int orbit_streams_open(struct orbit_fleet *f, const struct orbit_stream_spec *spec,
                       struct orbit_streams **out)
{
    static const struct orbit_stream_spec dflt = ORBIT_STREAM_SPEC_DEFAULT;
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (!spec)
        spec = &dflt;
    if ((rc = spec_explain(spec, __func__)) < 0)
        return rc;
    struct stream_geometry g = geometry_of(spec);
    struct stream_layout l;
    if ((rc = layout_of(&g, f->capacity, &l)) < 0)
        return rc;
    g.offer_bytes = l.offer_bytes;
    struct orb_seg_request req = {
        .kind = spec->kind, .table_type = ORB_TABLE_STREAMS, .geometry = &g,
        .geometry_len = sizeof g, .table_bytes = l.total,
        /* The offers and slots every member reads; rings are populated as streams take them. */
        .populate_bytes = l.slots_off + l.total_slots * sizeof(struct stream_slot),
        .geometry_names = (const char *const[]){ "layout version", "lane_capacity", "buffer_bytes",
                                                 "generation_limit", NULL },
        .init = orb_table_init_epoch,   /* zero: every slot EMPTY at generation 0 */
    };
    return orb_table_create(&streams_kind, f, &req, (void **)out);
}

/* The geometry another process wrote (its type and size checked by the base): its values. */
static int geometry_check(const struct orb_segment *seg, const void *geometry, void *layout)
{
    const struct stream_geometry *g = geometry;
    struct stream_layout *l = layout;
    const struct orb_seg_header *h = orb_seg_hdr(seg);
    if (g->layout_version != STREAM_LAYOUT_VERSION || g->slot_bytes != sizeof(struct stream_slot))
        return orb_fail_text(-ORBIT_EGEOMETRY, "the table's geometry fails its checks (garbled, or another orbit version)");
    struct orbit_stream_spec spec = { .kind = h->kind, .lane_capacity = g->lane_capacity,
                                      .buffer_bytes = g->buffer_bytes, .generation_limit = g->generation_limit };
    if (spec_check(&spec) < 0 || g->generation_limit == 0 ||
        layout_of(g, h->fleet_capacity, l) < 0 || g->offer_bytes != l->offer_bytes ||
        h->table_bytes != l->total || seg->mapped < l->total)
        return orb_fail_text(-ORBIT_ECORRUPT, "the table's layout does not fit its segment (garbled)");
    return 0;
}

_Static_assert(sizeof(struct stream_layout) <= ORB_TABLE_LAYOUT_MAX, "the base holds the layout");

const struct orb_table_kind streams_kind = {
    .type = ORB_TABLE_STREAMS, .handle_bytes = sizeof(struct orbit_streams),
    .geometry_len = sizeof(struct stream_geometry), .prepare = handle_prepare,
    .check = geometry_check, .bind = handle_bind,
};

int orbit_streams_open_existing(struct orbit_fleet *f, uint8_t kind, struct orbit_streams **out)
{
    return orb_table_open_existing_as(&streams_kind, f, kind, (void **)out, __func__);
}

/* Unmaps and frees: in a fork child the readiness fd goes without its driver (nothing shared). */
void orbit_streams_close(struct orbit_streams *s)
{
    orb_error_clear();
    orb_table_close(&streams_kind, s ? &s->base : NULL);
}

uint64_t orbit_streams_epoch(struct orbit_streams *s)
{
    if (streams_enter(s, __func__) < 0)
        return 0;
    return s ? stream_epoch(s) : 0;
}

uint8_t orbit_streams_kind(const struct orbit_streams *s)
{
    orb_error_clear();
    return s ? s->kind : 0;
}

int orbit_streams_spec(const struct orbit_streams *s, struct orbit_stream_spec *out)
{
    orb_error_clear();
    if (!s || !out)
        return orb_fail_text(-ORBIT_EMALFORMED, "the streams handle or out is NULL");
    *out = (struct orbit_stream_spec){ .kind = s->kind, .lane_capacity = s->lane_capacity,
                                       .buffer_bytes = s->buffer_bytes, .generation_limit = s->generation_limit };
    return 0;
}

int orbit_streams_readiness(struct orbit_streams *s)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    return orb_table_readiness(&s->base, __func__);
}

void orbit_streams_stats(struct orbit_streams *s, struct orbit_stream_stats *out)
{
    if (streams_enter(s, __func__) < 0)
        return;
    if (!s || !out)
        return;
    memset(out, 0, sizeof *out);
    uint64_t bytes[2];
    orb_tally_read(&s->tally, bytes, 2);
    out->bytes_written = bytes[STREAM_TALLY_WRITTEN];
    out->bytes_read = bytes[STREAM_TALLY_READ];
    out->parks = atomic_load_explicit(&s->stats.parks, memory_order_relaxed);
    out->wakes = atomic_load_explicit(&s->stats.wakes, memory_order_relaxed);
    out->doorbells = atomic_load_explicit(&s->stats.doorbells, memory_order_relaxed);
}

/* ---- inspection ----------------------------------------------------------- */

struct owner_key { uint16_t node; uint64_t incarnation; };

static int owner_cmp(const void *a, const void *b)
{
    const struct owner_key *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->incarnation < y->incarnation ? -1 : x->incarnation > y->incarnation;
}

/* Appends one holder, growing the array as needed; false when out of memory. */
static bool owners_push(struct owner_key **v, size_t *n, size_t *cap, struct owner_key k)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 64;
        struct owner_key *p = realloc(*v, grown * sizeof *p);
        if (!p)
            return false;
        *v = p;
        *cap = grown;
    }
    (*v)[(*n)++] = k;
    return true;
}

ssize_t orbit_streams_owners(struct orbit_streams *s, struct orbit_owner *out, size_t max)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    if (!s || (max && !out))
        return orb_fail_text(-ORBIT_EMALFORMED, "out is NULL with max > 0");
    struct owner_key *seen = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < s->lay.total_slots; i++) {
        struct stream_slot *slot = &s->slots[i];
        if (TENANCY_STATE(atomic_load(&slot->tenancy)) != SLOT_LIVE)
            continue;
        for (unsigned side = 0; side < 2; side++) {
            if (atomic_load(&slot->claimed[side]) != SIDE_CLAIMED)
                continue;
            struct owner_key k = { (uint16_t)atomic_load(&slot->node[side]), atomic_load(&slot->incarnation[side]) };
            if (!owners_push(&seen, &n, &cap, k)) {
                free(seen);
                return orb_fail_text(-ENOMEM, "out of memory while listing owners");
            }
        }
    }
    if (n)
        qsort(seen, n, sizeof *seen, owner_cmp);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && owner_cmp(&seen[i], &seen[i - 1]) == 0)
            continue;
        if (unique < max)
            out[unique] = (struct orbit_owner){ seen[i].node, seen[i].incarnation };
        unique++;
    }
    free(seen);
    return (ssize_t)unique;
}

static void info_of(struct orbit_streams *s, size_t i, uint32_t t, struct orbit_stream_info *info)
{
    struct stream_slot *slot = &s->slots[i];
    memset(info, 0, sizeof *info);
    info->id = orbit_id_make(s->kind, (uint16_t)(i / s->lane_capacity), TENANCY_GEN(t),
                             (uint32_t)(i % s->lane_capacity));
    for (unsigned k = 0; k < 2; k++) {
        uint32_t claimed = atomic_load(&slot->claimed[k]);
        info->side[k].state = claimed <= SIDE_DEAD ? (enum orbit_side_state)claimed : ORBIT_SIDE_DEAD;
        info->side[k].node = (uint16_t)atomic_load(&slot->node[k]);
        info->side[k].incarnation = atomic_load(&slot->incarnation[k]);
        struct stream_dir *d = &slot->dir[k];
        uint64_t tail = atomic_load(&d->tail), head = atomic_load(&d->head);
        info->dir[k].queued = head - tail;   /* shown as found: a value over the ring is corruption */
        info->dir[k].flags = atomic_load(&d->flags) & 0xfu;
    }
}

ssize_t orbit_streams_list(struct orbit_streams *s, struct orbit_stream_info *out, size_t max)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    if (!s || (max && !out))
        return orb_fail_text(-ORBIT_EMALFORMED, "out is NULL with max > 0");
    size_t n = 0;
    for (size_t i = 0; i < s->lay.total_slots; i++) {
        uint32_t t = atomic_load_explicit(&s->slots[i].tenancy, memory_order_acquire);
        if (TENANCY_STATE(t) != SLOT_LIVE)
            continue;
        if (n < max)
            info_of(s, i, t, &out[n]);
        n++;
    }
    return (ssize_t)n;
}
