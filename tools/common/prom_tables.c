/* SPDX-License-Identifier: MIT */
/*
 * Gauges read from the tables themselves (racy snapshots, as orbitctl show
 * reads them): pool units, stream ring fill, arena lane use, admission
 * domain use. Pool and stream gauges are summed per table (their keys and
 * streams are too many to be series); lanes and domains are few: one series each.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <orbit/orbit.h>
#include "prom_fleet.h"

#define LIST_MAX 65536   /* streams, keys, resources read per table and scrape */

static inline void gauge(struct prom *p, const char *name, const char *help, const struct prom_labels *l, uint64_t v)
{
    prom_u64(p, name, PROM_GAUGE, help, "", l, v);
}

static inline size_t clamp_count(ssize_t got, size_t cap)
{
    return got < 0 ? 0 : (size_t)got < cap ? (size_t)got : cap;
}

#ifdef ORBIT_WITH_POOL
struct pool_sum { uint64_t resources, capacity, reserved, active, draining, pending_age_ms; };

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct cands { struct orbit_candidate *v; size_t cap; };

/* One key's resources into s (the buffer grows to what the key has, up to LIST_MAX); false when it failed. */
static bool pool_key_sum(struct orbit_pool *pool, orbit_key key, struct cands *c, uint64_t now_ms,
                         struct pool_sum *s)
{
    ssize_t got = orbit_pool_candidates(pool, key, c->v, c->cap);
    if (got > (ssize_t)c->cap && c->cap < LIST_MAX) {
        size_t cap = clamp_count(got + 16, LIST_MAX);
        struct orbit_candidate *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return false;
        c->v = v;
        c->cap = cap;
        got = orbit_pool_candidates(pool, key, c->v, c->cap);
    }
    if (got < 0)
        return false;
    for (size_t i = 0; i < clamp_count(got, c->cap); i++) {
        const struct orbit_candidate *r = &c->v[i];
        s->resources++;
        s->capacity += r->capacity;
        s->reserved += r->reserved;
        s->active += r->active;
        s->draining += r->state == ORBIT_DRAINING;
        /* A resource with units reserved and no reserve since: its oldest pending one is at least this old. */
        if (r->reserved && r->last_reserve_ms && r->last_reserve_ms <= now_ms &&
            now_ms - r->last_reserve_ms > s->pending_age_ms)
            s->pending_age_ms = now_ms - r->last_reserve_ms;
    }
    return true;
}

static void pool_gauges(struct prom *p, struct orbit_fleet *f, uint8_t kind, const struct prom_labels *l,
                        unsigned *errors)
{
    struct orbit_pool *pool;
    if (orbit_pool_open_existing(f, kind, &pool) < 0) {
        (*errors)++;
        return;
    }
    ssize_t nk = orbit_pool_keys(pool, NULL, 0);
    size_t kcap = nk > 0 ? clamp_count(nk + 16, LIST_MAX) : 1;
    struct orbit_pool_key_info *keys = calloc(kcap, sizeof *keys);
    struct cands c = { calloc(16, sizeof *c.v), 16 };
    struct pool_sum s = { 0 };
    nk = keys && c.v && nk >= 0 ? orbit_pool_keys(pool, keys, kcap) : -ENOMEM;
    uint64_t now = wall_ms();
    for (size_t i = 0; i < clamp_count(nk, kcap); i++)
        if (!pool_key_sum(pool, keys[i].key, &c, now, &s))
            (*errors)++;
    if (nk < 0)
        (*errors)++;
    else {
        gauge(p, "orbit_pool_keys", "Live keys in the pool's key table.", l, (uint64_t)nk);
        gauge(p, "orbit_pool_resources", "Registered resources (all keys).", l, s.resources);
        gauge(p, "orbit_pool_draining_resources", "Resources draining (no new leases).", l, s.draining);
        gauge(p, "orbit_pool_capacity_units", "Units of capacity over every resource.", l, s.capacity);
        gauge(p, "orbit_pool_reserved_units", "Units reserved and not yet accepted (pending).", l, s.reserved);
        gauge(p, "orbit_pool_active_units", "Units accepted into executions.", l, s.active);
        prom_f64(p, "orbit_pool_pending_reserve_age_seconds", PROM_GAUGE, "Over resources with units "
                 "reserved: the longest time since one's last reserve (its oldest pending reservation is at least "
                 "this old); 0 when nothing is pending.", "", l, (double)s.pending_age_ms / 1000.0);
    }
    free(keys);
    free(c.v);
    orbit_pool_close(pool);
}
#endif

#ifdef ORBIT_WITH_STREAM
static void stream_gauges(struct prom *p, struct orbit_fleet *f, uint8_t kind, const struct prom_labels *l,
                          unsigned *errors)
{
    struct orbit_streams *s;
    struct orbit_stream_spec spec;
    if (orbit_streams_open_existing(f, kind, &s) < 0) {
        (*errors)++;
        return;
    }
    orbit_streams_spec(s, &spec);
    ssize_t total = orbit_streams_list(s, NULL, 0);
    size_t cap = total > 0 ? clamp_count(total + 16, LIST_MAX) : 1;
    struct orbit_stream_info *si = calloc(cap, sizeof *si);
    ssize_t got = si && total >= 0 ? orbit_streams_list(s, si, cap) : -ENOMEM;
    if (got < 0) {
        (*errors)++;
    } else {
        uint64_t queued = 0, full = 0, max_fill = 0;
        for (size_t i = 0; i < clamp_count(got, cap); i++)
            for (unsigned d = 0; d < 2; d++) {
                uint64_t q = si[i].dir[d].queued < spec.buffer_bytes ? si[i].dir[d].queued : spec.buffer_bytes;
                queued += q;
                full += q == spec.buffer_bytes;
                max_fill = q > max_fill ? q : max_fill;
            }
        gauge(p, "orbit_streams_live", "Live streams (either side held).", l, (uint64_t)got);
        gauge(p, "orbit_streams_queued_bytes", "Bytes written and not yet read, over every ring.", l, queued);
        gauge(p, "orbit_streams_full_rings", "Stream directions whose ring is full (the writer must wait).", l,
              full);
        gauge(p, "orbit_streams_ring_capacity_bytes", "Bytes one direction's ring holds.", l, spec.buffer_bytes);
        prom_f64(p, "orbit_streams_ring_fill_max_ratio", PROM_GAUGE, "The fullest ring's fill, 0 to 1.", "", l,
                 spec.buffer_bytes ? (double)max_fill / spec.buffer_bytes : 0.0);
    }
    free(si);
    orbit_streams_close(s);
}
#endif

#ifdef ORBIT_WITH_ADMISSION
#define DOMAINS_MAX 1024   /* the ledger's max_domains bound */

static void domain_gauges(struct prom *p, const struct orbit_domain_info *d, const struct prom_labels *l)
{
    char dom[16];
    snprintf(dom, sizeof dom, "%u", d->domain);
    struct prom_labels dl = prom_with(l, "domain", dom);
    gauge(p, "orbit_admission_domain_capacity_units", "A domain's capacity.", &dl, d->capacity);
    gauge(p, "orbit_admission_domain_used_units", "Units of the domain held by live claims.", &dl, d->used);
    gauge(p, "orbit_admission_domain_free_units", "Units of the domain free to claim.", &dl,
          d->used < d->capacity ? d->capacity - d->used : 0);
}

static void admission_gauges(struct prom *p, struct orbit_fleet *f, uint8_t kind, const struct prom_labels *l,
                             unsigned *errors)
{
    struct orbit_admission *a;
    if (orbit_admission_open_existing(f, kind, &a) < 0) {
        (*errors)++;
        return;
    }
    struct orbit_admission_info in;
    struct orbit_domain_info *d = calloc(DOMAINS_MAX, sizeof *d);
    ssize_t nd = d ? orbit_admission_domains(a, d, DOMAINS_MAX) : -ENOMEM;
    if (orbit_admission_info(a, &in) < 0 || nd < 0) {
        (*errors)++;
    } else {
        gauge(p, "orbit_admission_live_claims", "Claims held now.", l, in.live_claims);
        gauge(p, "orbit_admission_max_claims", "Claims the ledger has room for.", l, in.spec.max_claims);
        gauge(p, "orbit_admission_retained_bytes", "Bytes held by retained claims.", l, in.retained_bytes);
        gauge(p, "orbit_admission_poisoned", "1 when the ledger is fail-closed (poisoned).", l, in.poisoned);
        for (size_t i = 0; i < clamp_count(nd, DOMAINS_MAX); i++)
            domain_gauges(p, &d[i], l);
    }
    free(d);
    orbit_admission_close(a);
}
#endif

#ifdef ORBIT_WITH_EXCHANGE
static void lane_gauges(struct prom *p, const struct orbit_arena_lane_info *li, const struct prom_labels *l)
{
    char node[8];
    snprintf(node, sizeof node, "%u", li->node);
    struct prom_labels nl = prom_with(l, "node", node);
    static const char help[] = "Slots of a node's lane by state (lanes with any slot in use).";
    const char *names[] = { "free", "reserved", "live", "reading", "reclaiming" };
    const uint32_t v[] = { li->free, li->reserved, li->live, li->reading, li->reclaiming };
    for (unsigned i = 0; i < 5; i++) {
        struct prom_labels sl = prom_with(&nl, "state", names[i]);
        gauge(p, "orbit_arena_lane_slots", help, &sl, v[i]);
    }
    gauge(p, "orbit_arena_lane_chunks", "Runs of a node's lane that are not free.", &nl, li->chunks);
}

static void arena_gauges(struct prom *p, struct orbit_fleet *f, uint8_t kind, const struct prom_labels *l,
                         unsigned *errors)
{
    struct orbit_arena *a;
    struct orbit_arena_spec sp;
    if (orbit_arena_open_existing(f, kind, &a) < 0) {
        (*errors)++;
        return;
    }
    orbit_arena_spec(a, &sp);
    ssize_t n = orbit_arena_lanes(a, NULL, 0);
    size_t cap = n > 0 ? clamp_count(n + 8, ORBIT_FLEET_CAPACITY_MAX) : 1;
    struct orbit_arena_lane_info *li = calloc(cap, sizeof *li);
    n = li && n >= 0 ? orbit_arena_lanes(a, li, cap) : -ENOMEM;
    if (n < 0) {
        (*errors)++;
    } else {
        gauge(p, "orbit_arena_lane_capacity_slots", "Slots in each node's lane.", l, sp.slots_per_lane);
        gauge(p, "orbit_arena_slot_bytes", "Bytes in one slot.", l, sp.slot_bytes);
        gauge(p, "orbit_arena_lanes_in_use", "Lanes with any slot in use.", l, (uint64_t)n);
        for (size_t i = 0; i < clamp_count(n, cap); i++)
            lane_gauges(p, &li[i], l);
    }
    free(li);
    orbit_arena_close(a);
}
#endif

void prom_table_gauges(struct prom *p, struct orbit_fleet *f, const struct orbit_table_info *t,
                       const struct prom_labels *l, unsigned *errors)
{
    (void)p, (void)f, (void)t, (void)l, (void)errors;   /* a build with no table module */
#ifdef ORBIT_WITH_POOL
    if (strcmp(t->name, "pool") == 0)
        pool_gauges(p, f, t->kind, l, errors);
#endif
#ifdef ORBIT_WITH_STREAM
    if (strcmp(t->name, "streams") == 0)
        stream_gauges(p, f, t->kind, l, errors);
#endif
#ifdef ORBIT_WITH_ADMISSION
    if (strcmp(t->name, "admission") == 0)
        admission_gauges(p, f, t->kind, l, errors);
#endif
#ifdef ORBIT_WITH_EXCHANGE
    if (strcmp(t->name, "arena") == 0)
        arena_gauges(p, f, t->kind, l, errors);
#endif
}
