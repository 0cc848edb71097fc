/* SPDX-License-Identifier: MIT */
/* The pool table: spec, geometry, segment, handle, epoch, reset and inspection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pool_layout.h"
#include "core/readiness.h"
#include "core/table_ops.h"

const unsigned ORBIT_PENDING_RESERVATIONS = POOL_PENDING;

static bool pow2(uint32_t v) { return orb_is_pow2(v); }
static size_t align64(size_t v) { return orb_align_up(v, 64); }

static int spec_validate(const struct orbit_pool_spec *s, const char *call)
{
    if (s->kind == ORB_FLEET_KIND)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.kind %u is the fleet segment's own", call, s->kind);
    if (!pow2(s->key_capacity) || s->key_capacity > POOL_KEY_CAP_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.key_capacity %u: a power of two, 1..%u", call,
                        s->key_capacity, (unsigned)POOL_KEY_CAP_MAX);
    if (!pow2(s->lane_capacity) || s->lane_capacity > POOL_LANE_CAP_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.lane_capacity %u: a power of two, 1..%u", call,
                        s->lane_capacity, (unsigned)POOL_LANE_CAP_MAX);
    if (s->generation_limit > POOL_GEN_MAX)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.generation_limit %u: 0 (the most) or 1..%u", call,
                        s->generation_limit, (unsigned)POOL_GEN_MAX);
    return orb_check_resv(s->resv, sizeof s->resv / sizeof s->resv[0], call, "ORBIT_POOL_SPEC_DEFAULT");
}

static void geometry_of(const struct orbit_pool_spec *s, uint16_t fleet_capacity,
                        struct pool_geometry *g)
{
    memset(g, 0, sizeof *g);
    uint64_t members = (uint64_t)fleet_capacity * s->lane_capacity;
    size_t words = (fleet_capacity + 63u) / 64u + (size_t)((members + 63) / 64);
    g->layout_version = POOL_LAYOUT_VERSION;
    g->key_capacity = s->key_capacity;
    g->lane_capacity = s->lane_capacity;
    g->generation_limit = s->generation_limit ? s->generation_limit : POOL_GEN_MAX;
    g->fleet_capacity = fleet_capacity;
    g->pending = POOL_PENDING;
    g->key_stride = (uint32_t)align64(words * 8);
    g->resource_bytes = sizeof(struct pool_resource);
}

int pool_sections_of(const struct pool_geometry *g, struct pool_sections *out)
{
    if (!pow2(g->key_capacity) || g->key_capacity > POOL_KEY_CAP_MAX || !pow2(g->lane_capacity) ||
        g->lane_capacity > POOL_LANE_CAP_MAX || g->fleet_capacity < 1 ||
        g->fleet_capacity > ORBIT_FLEET_CAPACITY_MAX || g->generation_limit < 1 ||
        g->generation_limit > POOL_GEN_MAX || g->pending != POOL_PENDING ||
        g->resource_bytes != sizeof(struct pool_resource))
        return -ORBIT_ECORRUPT;
    uint64_t members = (uint64_t)g->fleet_capacity * g->lane_capacity;
    size_t words = (g->fleet_capacity + 63u) / 64u + (size_t)((members + 63) / 64);
    if (g->key_stride != align64(words * 8))
        return -ORBIT_ECORRUPT;
    size_t row = (size_t)g->fleet_capacity * g->key_capacity * sizeof(uint32_t);
    out->lanes = sizeof(struct pool_header);
    out->holds = out->lanes + (size_t)g->fleet_capacity * sizeof(struct pool_lane);
    out->claims = out->holds + row;
    out->intents = align64(out->claims + row);
    out->keys = out->intents + (size_t)g->fleet_capacity * POOL_INTENTS * sizeof(struct pool_intent);
    out->bitmaps = out->keys + (size_t)g->key_capacity * sizeof(struct pool_key);
    out->res = align64(out->bitmaps + (size_t)g->key_capacity * g->key_stride);
    out->end = out->res + (size_t)members * sizeof(struct pool_resource);
    return 0;
}

size_t orbit_pool_segment_size(const struct orbit_pool_spec *spec, uint16_t fleet_capacity)
{
    struct orbit_pool_spec s = ORBIT_POOL_SPEC_DEFAULT;
    if (spec)
        s = *spec;
    struct pool_geometry g;
    struct pool_sections sec;
    orb_error_clear();
    if (spec_validate(&s, __func__) < 0)
        return 0;
    if (fleet_capacity < 1 || fleet_capacity > ORBIT_FLEET_CAPACITY_MAX)
        return (size_t)orb_fail(0, "%s: fleet_capacity %u: 1..%d", __func__, fleet_capacity,
                                ORBIT_FLEET_CAPACITY_MAX);
    geometry_of(&s, fleet_capacity, &g);
    if (pool_sections_of(&g, &sec) < 0)
        return 0;
    return ORB_SEG_HEADER_BYTES + sec.end;
}

/* The geometry of a mapped segment (another process's, or ours as made): its sections,
 * bounds-checked against the segment, and the pool header's own marks. */
static int geometry_check(const struct orb_segment *seg, const void *geometry, void *layout)
{
    const struct pool_geometry *g = geometry;
    struct pool_sections *sec = layout;
    const struct orb_seg_header *h = orb_seg_hdr(seg);
    if (g->layout_version != POOL_LAYOUT_VERSION || g->fleet_capacity != h->fleet_capacity)
        return orb_fail_text(-ORBIT_EGEOMETRY, "the pool's geometry fails its checks (garbled, or another orbit version)");
    if (pool_sections_of(g, sec) < 0 || ORB_SEG_HEADER_BYTES + sec->end > seg->mapped ||
        h->table_bytes != ORB_SEG_HEADER_BYTES + sec->end)
        return orb_fail_text(-ORBIT_ECORRUPT, "the pool's layout does not fit its segment (garbled)");
    const struct pool_header *ph = orb_seg_table(seg);
    if (ph->magic != POOL_MAGIC || ph->version != POOL_LAYOUT_VERSION)
        return orb_fail_text(-ORBIT_ECORRUPT, "the pool's header is garbled (magic or version)");
    return 0;
}

_Static_assert(sizeof(struct pool_sections) <= ORB_TABLE_LAYOUT_MAX, "the base holds the layout");

/* Point the handle at the sections geometry_check found. */
static void handle_bind(struct orb_table_base *b, const void *geometry, const void *layout)
{
    struct orbit_pool *p = (struct orbit_pool *)b;
    const struct pool_geometry *g = geometry;
    const struct pool_sections *sec = layout;
    char *t = orb_seg_table(&p->seg);
    p->geo = *g;
    p->hdr = (struct pool_header *)t;
    p->lanes = (struct pool_lane *)(t + sec->lanes);
    p->holds = (_Atomic uint32_t *)(t + sec->holds);
    p->claims = (_Atomic uint32_t *)(t + sec->claims);
    p->intents = (struct pool_intent *)(t + sec->intents);
    p->keys = (struct pool_key *)(t + sec->keys);
    p->bitmaps = (unsigned char *)(t + sec->bitmaps);
    p->res = (struct pool_resource *)(t + sec->res);
    p->key_mask = g->key_capacity - 1;
    p->lane_mask = g->lane_capacity - 1;
    p->watch_words = (g->fleet_capacity + 63u) / 64u;
    p->total_resources = (uint64_t)g->fleet_capacity * g->lane_capacity;
    p->member_words = (uint32_t)((p->total_resources + 63) / 64);
}

/* The creator's initialiser: runs before the segment's ready word is published. */
static int pool_init(struct orb_segment *seg, void *ctx)
{
    const struct pool_geometry *g = ctx;
    struct pool_sections sec;
    int rc = pool_sections_of(g, &sec);
    if (rc < 0)
        return rc;
    char *t = orb_seg_table(seg);
    memset(t, 0, sec.res);   /* everything but the resource lanes, which start zeroed (EMPTY) */
    struct pool_header *h = (struct pool_header *)t;
    orb_lock_init(&h->key_lock.l);
    for (uint32_t i = 0; i < g->key_capacity; i++) {
        struct pool_key *k = (struct pool_key *)(t + sec.keys) + i;
        atomic_store_explicit(&k->refs, REFS_CLOSED, memory_order_relaxed);
    }
    h->magic = POOL_MAGIC;
    h->version = POOL_LAYOUT_VERSION;
    struct orb_seg_header *sh = orb_seg_hdr(seg);
    if (atomic_load(&sh->epoch) == 0)
        atomic_store(&sh->epoch, orb_next_epoch(0));
    return 0;
}

static enum pool_park park_from_env(void)
{
    static const char *const names[] = { [POOL_PARK_HOLD] = "hold", [POOL_PARK_RELEASE] = "release",
        [POOL_PARK_CLAIM] = "claim", [POOL_PARK_FINISH] = "finish", [POOL_PARK_REGISTER] = "register",
        [POOL_PARK_UNCOUNT] = "uncount", [POOL_PARK_RETURN] = "return",
        [POOL_PARK_WATCH] = "watch", [POOL_PARK_DELIVER] = "deliver",
        [POOL_PARK_FOLD] = "fold", [POOL_PARK_ACQUIRE_WAIT] = "acquire_wait" };
#ifdef ORBIT_TEST_HOOKS
    const char *v = getenv("ORBIT_TEST_POOL_PARK");
#else
    const char *v = NULL;   /* a build without -Dtest_hooks reads no ORBIT_TEST_* */
#endif
    for (unsigned i = 1; v && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(v, names[i]) == 0)
            return (enum pool_park)i;
    return POOL_PARK_NONE;
}

static void handle_prepare(struct orb_table_base *b)
{
    struct orbit_pool *p = (struct orbit_pool *)b;
    p->stamp_node = p->observer ? 0 : (uint64_t)(p->node + 1u) << SINCE_NODE_SHIFT;
    p->own_hi = UINT32_MAX;   /* until lane_ready: no id is of our lane */
    p->park = park_from_env();
}

/* A member pre-faults its own lane so that no later write can SIGBUS. */
static int lane_ready(struct orb_table_base *b)
{
    struct orbit_pool *p = (struct orbit_pool *)b;
    if (p->observer)
        return 0;
    size_t lane_bytes = (size_t)p->geo.lane_capacity * sizeof(struct pool_resource);
    size_t off = (size_t)((char *)pool_res_at(p, (uint64_t)p->node * p->geo.lane_capacity) -
                          (char *)p->seg.base);
    int rc = orb_table_populate(b, off, lane_bytes, "this member's lane of the pool");
    if (rc < 0)
        return rc;
    /* Release: the lane's pages exist before anyone reads them through this flag. */
    atomic_store_explicit(&p->lanes[p->node].populated, 1, memory_order_release);
    /* Ids of this lane need no look at the flag: the hot calls find the slot directly. */
    p->own_hi = (uint32_t)p->kind << 16 | p->node;
    p->own_lane = pool_res_at(p, (uint64_t)p->node * p->geo.lane_capacity);
    return 0;
}

const struct orb_table_kind pool_kind = {
    .type = ORB_TABLE_POOL, .handle_bytes = sizeof(struct orbit_pool),
    .geometry_len = sizeof(struct pool_geometry), .prepare = handle_prepare,
    .check = geometry_check, .bind = handle_bind, .ready = lane_ready,
};

int orbit_pool_open(struct orbit_fleet *f, const struct orbit_pool_spec *spec, struct orbit_pool **out)
{
    struct orbit_pool_spec s = ORBIT_POOL_SPEC_DEFAULT;
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (spec)
        s = *spec;
    if ((rc = spec_validate(&s, __func__)) < 0)
        return rc;
    struct pool_geometry g;
    struct pool_sections sec;
    geometry_of(&s, f->capacity, &g);
    if (pool_sections_of(&g, &sec) < 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: the spec's table is too large for a fleet of %u nodes",
                        __func__, f->capacity);
    struct orb_seg_request req = {
        .kind = s.kind, .table_type = ORB_TABLE_POOL, .geometry = &g, .geometry_len = sizeof g,
        .geometry_names = (const char *const[]){ "layout version", "key_capacity", "lane_capacity",
                                                 "generation_limit", NULL },
        .table_bytes = ORB_SEG_HEADER_BYTES + sec.end,
        .populate_bytes = ORB_SEG_HEADER_BYTES + sec.res,   /* the shared part; lanes by their nodes */
        .init = pool_init, .ctx = &g,
    };
    return orb_table_create(&pool_kind, f, &req, (void **)out);
}

int orbit_pool_open_existing(struct orbit_fleet *f, uint8_t kind, struct orbit_pool **out)
{
    return orb_table_open_existing_as(&pool_kind, f, kind, (void **)out, __func__);
}

/* In a fork child only the child's memory goes: the readiness fd is closed without its driver. */
void orbit_pool_close(struct orbit_pool *p)
{
    orb_error_clear();
    orb_table_close(&pool_kind, p ? &p->base : NULL);
}

/* What the handle says of itself reads no shared memory: a fork child may ask. */
uint8_t  orbit_pool_kind(const struct orbit_pool *p) { orb_error_clear(); return p ? p->kind : 0; }
uint16_t orbit_pool_node(const struct orbit_pool *p) { orb_error_clear(); return p ? p->node : ORBIT_NODE_NONE; }
uint64_t orbit_pool_incarnation(const struct orbit_pool *p) { orb_error_clear(); return p ? p->incarnation : 0; }
uint64_t orbit_pool_epoch(struct orbit_pool *p) { return pool_enter(p, __func__) == 0 ? pool_epoch_now(p) : 0; }

void orbit_pool_spec_of(const struct orbit_pool *p, struct orbit_pool_spec *out)
{
    orb_error_clear();
    if (!p || !out)
        return;
    *out = (struct orbit_pool_spec){ .kind = p->kind, .key_capacity = p->geo.key_capacity,
                                     .lane_capacity = p->geo.lane_capacity,
                                     .generation_limit = p->geo.generation_limit };
}

void orbit_pool_stats(struct orbit_pool *p, struct orbit_pool_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (pool_enter(p, __func__) < 0)
        return;
    out->parks = atomic_load(&p->stats.parks);
    out->wakes = atomic_load(&p->stats.wakes);
    out->doorbells = atomic_load(&p->stats.doorbells);
    out->key_inserts = atomic_load(&p->key_inserts);
    out->key_reclaims = atomic_load(&p->key_reclaims);
    out->key_sweeps = atomic_load(&p->key_sweeps);
}

void orbit_pool_key_table(struct orbit_pool *p, struct orbit_pool_key_table *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (pool_enter(p, __func__) < 0)
        return;
    out->capacity = p->geo.key_capacity;
    for (uint32_t i = 0; i < p->geo.key_capacity; i++) {
        unsigned st = KEY_TAG_STATE(atomic_load_explicit(&pool_key_at(p, i)->tag, memory_order_acquire));
        if (st == KEY_EMPTY)
            out->empty++;
        else if (st == KEY_TOMB)
            out->tombstones++;
        else
            out->live++;
    }
}

ssize_t orbit_pool_keys(struct orbit_pool *p, struct orbit_pool_key_info *out, size_t max)
{
    int rc = pool_enter(p, __func__);
    if (rc < 0)
        return rc;
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", __func__, max);
    size_t n = 0;
    for (uint32_t i = 0; i < p->geo.key_capacity; i++) {
        struct pool_key *k = pool_key_at(p, i);
        uint64_t tag = atomic_load_explicit(&k->tag, memory_order_acquire);
        if (KEY_TAG_STATE(tag) != KEY_LIVE)
            continue;
        if (n < max) {
            uint64_t counts = atomic_load(&k->counts), refs = atomic_load(&k->refs);
            uint64_t held = REFS_PINS(refs) + REFS_PLAIN(refs);
            out[n] = (struct orbit_pool_key_info){
                .key = { atomic_load(&k->key_lo), atomic_load(&k->key_hi) }, .index = i,
                .live = pool_hi(counts), .creating = pool_lo(counts),
                .refs = held > UINT32_MAX ? UINT32_MAX : (uint32_t)held, .version = atomic_load(&k->wait.changes),
                .watchers = atomic_load(&k->watch_count) };
        }
        n++;
    }
    return (ssize_t)n;
}

int orbit_key_format(orbit_key key, char *buf, size_t len)
{
    orb_error_clear();
    if (!buf)
        return orb_fail(-ORBIT_EMALFORMED, "%s: buf is NULL", __func__);
    char tmp[ORBIT_KEY_TEXT_MAX];
    int n = snprintf(tmp, sizeof tmp, "key:%016llx%016llx", (unsigned long long)key.hi,
                     (unsigned long long)key.lo);
    if (n < 0 || (size_t)n >= len)
        return orb_fail(-ORBIT_ETOOLARGE, "%s needs %d bytes, len is %zu (ORBIT_KEY_TEXT_MAX is enough)", tmp,
                        n + 1, len);
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}
