/* SPDX-License-Identifier: MIT */
/* Streams: opening the table, geometry, epochs, death reports, inspection. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "stream_layout.h"
#include "core/readiness.h"
#include "core/table_ops.h"

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static size_t align_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

static int spec_check(const struct orbit_stream_spec *spec)
{
    if (spec->kind == ORB_FLEET_KIND || !is_pow2(spec->lane_capacity) ||
        spec->lane_capacity > ORBIT_ID_SLOT_MAX + 1u || !is_pow2(spec->buffer_bytes) ||
        spec->buffer_bytes > (1u << 31) || spec->generation_limit > ORBIT_ID_GENERATION_MAX)
        return -ORBIT_EMALFORMED;
    return 0;
}

/* spec_check with the reason, for the caller's own spec. */
static int spec_explain(const struct orbit_stream_spec *spec, const char *call)
{
    if (spec->kind == ORB_FLEET_KIND)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.kind %u is the fleet segment's own", call, spec->kind);
    if (!is_pow2(spec->lane_capacity) || spec->lane_capacity > ORBIT_ID_SLOT_MAX + 1u)
        return orb_fail(-ORBIT_EMALFORMED, "%s: spec.lane_capacity %u: a power of two, 1..%u", call,
                        spec->lane_capacity, ORBIT_ID_SLOT_MAX + 1u);
    if (!is_pow2(spec->buffer_bytes) || spec->buffer_bytes > (1u << 31))
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
    l->offer_bytes = (uint32_t)align_up(sizeof(struct stream_offers) + 8u * l->lane_words, 64);
    l->total_slots = (size_t)fleet_capacity * g->lane_capacity;
    l->lane_ring_bytes = (size_t)g->lane_capacity * 2 * g->buffer_bytes;
    l->offers_off = ORB_SEG_HEADER_BYTES;
    l->slots_off = align_up(l->offers_off + (size_t)fleet_capacity * l->offer_bytes, 64);
    l->rings_off = align_up(l->slots_off + l->total_slots * sizeof(struct stream_slot),
                            STREAM_RINGS_ALIGN);
    /* 2^46 bytes of address space per table is far past any sane deployment. */
    if ((uint64_t)l->lane_ring_bytes * fleet_capacity > (1ull << 46))
        return -ORBIT_ETOOLARGE;
    l->total = l->rings_off + l->lane_ring_bytes * fleet_capacity;
    return 0;
}

static int table_init(struct orb_segment *seg, void *ctx)
{
    (void)ctx;
    /* A new file or anonymous mapping reads zero: every slot EMPTY at generation 0. */
    atomic_store_explicit(&orb_seg_hdr(seg)->epoch, orb_next_epoch(0), memory_order_release);
    return 0;
}

static enum stream_park park_from_env(void)
{
    const char *v = getenv("ORBIT_TEST_STREAM_PARK");
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

static int handle_new(struct orbit_fleet *f, struct orbit_streams **out)
{
    struct orbit_streams *s = aligned_alloc(64, align_up(sizeof *s, 64));
    if (!s)
        return -ENOMEM;
    memset(s, 0, sizeof *s);
    s->fleet = f;
    s->fork_generation = f->fork_generation;
    s->node = f->observer ? ORBIT_NODE_NONE : f->node;
    s->incarnation = f->incarnation;
    s->fleet_capacity = f->capacity;
    s->readiness_fd = -1;
    s->park = park_from_env();
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return 0;
}

static void handle_bind(struct orbit_streams *s, const struct stream_geometry *g,
                        const struct stream_layout *l)
{
    s->lay = *l;
    s->kind = s->seg.kind;
    s->lane_capacity = g->lane_capacity;
    s->buffer_bytes = g->buffer_bytes;
    s->generation_limit = g->generation_limit;
    s->offers = (unsigned char *)s->seg.base + l->offers_off;
    s->slots = (struct stream_slot *)(void *)((unsigned char *)s->seg.base + l->slots_off);
    s->rings = (unsigned char *)s->seg.base + l->rings_off;
    s->epoch = &orb_seg_hdr(&s->seg)->epoch;
}

static void handle_free(struct orbit_streams *s)
{
    if (s->seg.base)
        orb_fleet_table_close(s->fleet, &s->seg);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int stream_lane_ready(struct orbit_streams *s)
{
    if (!stream_is_member(s))
        return 0;
    return orb_segment_populate_once(&s->seg, &s->lock, &s->lane_ready,
                                     s->lay.rings_off + (size_t)s->node * s->lay.lane_ring_bytes,
                                     s->lay.lane_ring_bytes);
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
    struct orbit_streams *s;
    if ((rc = handle_new(f, &s)) < 0)
        return rc;
    struct orb_seg_request req = {
        .kind = spec->kind, .table_type = ORB_TABLE_STREAMS, .geometry = &g,
        .geometry_len = sizeof g, .table_bytes = l.total, .populate_bytes = l.rings_off,
        .init = table_init,
    };
    rc = orb_fleet_table_open(f, &req, &s->seg);
    if (rc == 0) {
        handle_bind(s, &g, &l);
        rc = stream_lane_ready(s);
    }
    if (rc < 0) {
        handle_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Geometry read back from a header written by another process: check before use. */
static int geometry_from_header(const struct orb_segment *seg, struct stream_geometry *g,
                                struct stream_layout *l)
{
    const struct orb_seg_header *h = orb_seg_hdr(seg);
    if (h->table_type != ORB_TABLE_STREAMS || h->geometry_len != sizeof *g)
        return -ORBIT_EGEOMETRY;
    memcpy(g, h->geometry, sizeof *g);
    if (g->layout_version != STREAM_LAYOUT_VERSION || g->slot_bytes != sizeof(struct stream_slot))
        return -ORBIT_EGEOMETRY;
    struct orbit_stream_spec spec = { .kind = h->kind, .lane_capacity = g->lane_capacity,
                                      .buffer_bytes = g->buffer_bytes, .generation_limit = g->generation_limit };
    if (spec_check(&spec) < 0 || g->generation_limit == 0 ||
        layout_of(g, h->fleet_capacity, l) < 0 || g->offer_bytes != l->offer_bytes ||
        h->table_bytes != l->total || seg->mapped < l->total)
        return -ORBIT_ECORRUPT;
    return 0;
}

int orbit_streams_open_existing(struct orbit_fleet *f, uint8_t kind, struct orbit_streams **out)
{
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    struct orbit_streams *s;
    rc = handle_new(f, &s);
    if (rc < 0)
        return rc;
    struct stream_geometry g;
    struct stream_layout l;
    rc = orb_fleet_table_open_existing(f, kind, &s->seg);
    if (rc == 0 && (rc = geometry_from_header(&s->seg, &g, &l)) == 0)
        handle_bind(s, &g, &l);   /* tools and death reports: the lane is faulted on first create */
    if (rc < 0) {
        handle_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Unmaps and frees: in a fork child the readiness fd goes without its driver (nothing shared). */
void orbit_streams_close(struct orbit_streams *s)
{
    orb_error_clear();
    if (!s)
        return;
    if (s->readiness_fd >= 0)
        orb_readiness_close(s->readiness_fd);
    handle_free(s);
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
        return -ORBIT_EMALFORMED;
    *out = (struct orbit_stream_spec){ .kind = s->kind, .lane_capacity = s->lane_capacity,
                                       .buffer_bytes = s->buffer_bytes, .generation_limit = s->generation_limit };
    return 0;
}

int orbit_streams_readiness(struct orbit_streams *s)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    if (!s)
        return -ORBIT_EMALFORMED;
    if (!stream_is_member(s))
        return -ORBIT_ENOTOWNER;
    pthread_mutex_lock(&s->lock);
    int fd = -ORBIT_EBUSY;
    if (s->readiness_fd < 0) {
        fd = orb_readiness_open(&orb_fleet_record(s->fleet, s->node)->doorbell);
        if (fd >= 0)
            s->readiness_fd = fd;
    }
    pthread_mutex_unlock(&s->lock);
    return fd;
}

void orbit_streams_stats(struct orbit_streams *s, struct orbit_stream_stats *out)
{
    if (streams_enter(s, __func__) < 0)
        return;
    if (!s || !out)
        return;
    memset(out, 0, sizeof *out);
    out->bytes_written = atomic_load_explicit(&s->bytes_written, memory_order_relaxed);
    out->bytes_read = atomic_load_explicit(&s->bytes_read, memory_order_relaxed);
    out->parks = atomic_load_explicit(&s->stats.parks, memory_order_relaxed);
    out->wakes = atomic_load_explicit(&s->stats.wakes, memory_order_relaxed);
    out->doorbells = atomic_load_explicit(&s->stats.doorbells, memory_order_relaxed);
}

bool orbit_streams_is_live(struct orbit_streams *s, orbit_id id)
{
    if (streams_enter(s, __func__) < 0)
        return false;
    size_t index;
    if (!s || stream_locate(s, id, &index) < 0)
        return false;
    return atomic_load_explicit(&s->slots[index].tenancy, memory_order_acquire) ==
           TENANCY(orbit_id_generation(id), SLOT_LIVE);
}

/* ---- death ---------------------------------------------------------------- */

/*
 * Both sides gone (released or ended) and the slot still live: whoever let go
 * last was killed between its side's CAS and the vacate. Nothing can claim a
 * side out of RELEASED or DEAD, so vacating it here is safe (the vacate is a CAS).
 */
static void vacate_abandoned(struct orbit_streams *s, struct stream_slot *slot, uint32_t live)
{
    /* No side held, and one let go (A is held from install): its last holder's vacate was
     * cut short. A side never opened (FREE) counts as unheld, as a closer finds it. */
    uint32_t a = atomic_load(&slot->claimed[0]), b = atomic_load(&slot->claimed[1]);
    if (a == SIDE_CLAIMED || b == SIDE_CLAIMED || (a == SIDE_FREE && b == SIDE_FREE))
        return;
    stream_vacate_if_unheld(s, slot, live, 0);
}

/* End every claimed side, in any lane, whose holder matches (and, for a death, vacate abandoned slots). */
static void end_matching(struct orbit_streams *s, uint16_t node, uint64_t incarnation, bool others)
{
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
            vacate_abandoned(s, slot, t);
    }
}

void orbit_streams_node_dead(struct orbit_streams *s, uint16_t node, uint64_t incarnation)
{
    if (streams_enter(s, __func__) < 0)
        return;
    if (!s || node >= s->fleet_capacity)
        return;
    end_matching(s, node, incarnation, false);
    /* Any node may offer to any other: the dead may have died mid-wake on any offers word.
     * Its own sides' directions were signalled by end_matching. */
    for (uint32_t n = 0; n < s->fleet_capacity; n++)
        orb_wait_kick(&stream_offers_of(s, n)->wait);
}

void orbit_streams_supersede(struct orbit_streams *s)
{
    if (streams_enter(s, __func__) < 0)
        return;
    if (s && stream_is_member(s))
        end_matching(s, s->node, s->incarnation, true);
}

/* Quiescent owner boot: a new epoch first, so every older handle reads stale. */
void orbit_streams_reset_all(struct orbit_streams *s)
{
    if (streams_enter(s, __func__) < 0)
        return;
    if (!s)
        return;
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
    }
    for (uint32_t n = 0; n < s->fleet_capacity; n++) {
        struct stream_offers *o = stream_offers_of(s, n);
        for (uint32_t w = 0; w < s->lay.lane_words; w++)
            atomic_store(&o->lanes[w], 0);
        orb_wait_signal(&o->wait, &s->stats);
    }
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
        return -ORBIT_EMALFORMED;
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
                return -ENOMEM;
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
        return -ORBIT_EMALFORMED;
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

/* ---- the streams table ops --------------------------------------------------- */

static int ops_open(struct orbit_fleet *f, uint8_t kind, void **out)
{
    struct orbit_streams *t = NULL;
    int rc = orbit_streams_open_existing(f, kind, &t);
    *out = t;
    return rc;
}
static void ops_close(void *t) { orbit_streams_close(t); }
static int ops_node_dead(void *t, uint16_t node, uint64_t inc) { orbit_streams_node_dead(t, node, inc); return 0; }
static int ops_reset_all(void *t) { orbit_streams_reset_all(t); return 0; }

static const struct orb_table_ops streams_ops = {
    .type = ORB_TABLE_STREAMS, .name = "streams", .open_existing = ops_open, .close = ops_close,
    .node_dead = ops_node_dead, .reset_all = ops_reset_all, .account = stream_account,
};
ORB_TABLE_REGISTER(streams_ops);
