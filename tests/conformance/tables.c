/* SPDX-License-Identifier: MIT */
/* The five tables as the conformance suite drives them (tables.h). */
#include <string.h>
#include "tables.h"

enum { POOL_KIND = 200, STREAMS_KIND = 201, ARENA_KIND = 202, ADMISSION_KIND = 203,
       CONTROL_KIND = 204, EXCHANGE_ARENA_KIND = 205 };

static const orbit_key KEY = { 0xc0ffee, 0x5eed };

/* What hold took in this process, for drop. */
static struct {
    struct orbit_endpoint *ep;
    struct orbit_reservation res;
    bool reserved;
    struct orbit_exchange *x;
} took;

static long count_owners(const struct orbit_owner *o, ssize_t n, uint16_t node)
{
    long c = 0;
    for (ssize_t i = 0; i < n && i < 16; i++)
        c += o[i].node == node;
    return n < 0 ? n : c;
}

static long arena_lane_held(struct orbit_arena *a, uint16_t node)
{
    struct orbit_arena_lane_info li[CT_CAPACITY];
    ssize_t n = orbit_arena_lanes(a, li, CT_CAPACITY);
    for (ssize_t i = 0; i < n && i < CT_CAPACITY; i++)
        if (li[i].node == node)
            return (long)(li[i].reserved + li[i].live + li[i].reading);
    return n < 0 ? n : 0;
}

/* ---- the pool --------------------------------------------------------------- */

static int pool_open(struct orbit_fleet *f, enum ct_spec which, void **out)
{
    struct orbit_pool_spec s = ORBIT_POOL_SPEC_DEFAULT;
    s.kind = POOL_KIND;
    s.key_capacity = which == CT_OTHER ? 32 : which == CT_BAD ? 3 : 16;
    s.lane_capacity = 4;
    s.resv[0] = which == CT_RESV;
    return orbit_pool_open(f, &s, (struct orbit_pool **)out);
}
static int pool_open_existing(struct orbit_fleet *f, uint8_t kind, void **out)
{
    return orbit_pool_open_existing(f, kind, (struct orbit_pool **)out);
}
static void pool_close(void *t) { orbit_pool_close(t); }
static uint64_t pool_epoch(void *t) { return orbit_pool_epoch(t); }
static int pool_readiness(void *t) { return orbit_pool_readiness(t); }
static int pool_hold(void *t)
{
    orbit_id id;
    return orbit_pool_register(t, KEY, 2, &id);
}
static void pool_drop(void) {}
static long pool_held(void *t, uint16_t node)
{
    struct orbit_owner o[16];
    return count_owners(o, orbit_pool_owners(t, o, 16), node);
}
static uint64_t pool_accounted(const struct orbit_reclaim *r) { return r->pool_resources; }
static void pool_node_dead(void *t, uint16_t node, uint64_t inc) { orbit_pool_node_dead(t, node, inc); }
static void pool_reset_all(void *t) { orbit_pool_reset_all(t); }
static int pool_forked_call(void *t)
{
    orbit_id id;
    return orbit_pool_register(t, KEY, 1, &id);
}

/* ---- streams ---------------------------------------------------------------- */

static int streams_open(struct orbit_fleet *f, enum ct_spec which, void **out)
{
    struct orbit_stream_spec s = ORBIT_STREAM_SPEC_DEFAULT;
    s.kind = STREAMS_KIND;
    s.lane_capacity = 4;
    s.buffer_bytes = which == CT_OTHER ? 8192 : which == CT_BAD ? 3000 : 4096;
    s.resv[0] = which == CT_RESV;
    return orbit_streams_open(f, &s, (struct orbit_streams **)out);
}
static int streams_open_existing(struct orbit_fleet *f, uint8_t kind, void **out)
{
    return orbit_streams_open_existing(f, kind, (struct orbit_streams **)out);
}
static void streams_close(void *t) { orbit_streams_close(t); }
static uint64_t streams_epoch(void *t) { return orbit_streams_epoch(t); }
static int streams_readiness(void *t) { return orbit_streams_readiness(t); }
static int streams_hold(void *t)
{
    struct orbit_ticket ticket;
    return orbit_streams_create(t, &took.ep, &ticket);
}
static void streams_drop(void)
{
    orbit_endpoint_close(took.ep);
    took.ep = NULL;
}
static long streams_held(void *t, uint16_t node)
{
    struct orbit_owner o[16];
    return count_owners(o, orbit_streams_owners(t, o, 16), node);
}
static uint64_t streams_accounted(const struct orbit_reclaim *r) { return r->stream_sides; }
static void streams_node_dead(void *t, uint16_t node, uint64_t inc) { orbit_streams_node_dead(t, node, inc); }
static void streams_reset_all(void *t) { orbit_streams_reset_all(t); }
static int streams_forked_call(void *t)
{
    struct orbit_endpoint *ep;
    struct orbit_ticket ticket;
    return orbit_streams_create(t, &ep, &ticket);
}

/* ---- the payload arena ------------------------------------------------------- */

static int arena_open(struct orbit_fleet *f, enum ct_spec which, void **out)
{
    struct orbit_arena_spec s = ORBIT_ARENA_SPEC_DEFAULT;
    s.kind = ARENA_KIND;
    s.slot_bytes = which == CT_BAD ? 100 : 64;
    s.slots_per_lane = which == CT_OTHER ? 32 : 16;
    s.resv[0] = which == CT_RESV;
    return orbit_arena_open(f, &s, (struct orbit_arena **)out);
}
static int arena_open_existing(struct orbit_fleet *f, uint8_t kind, void **out)
{
    return orbit_arena_open_existing(f, kind, (struct orbit_arena **)out);
}
static void arena_close(void *t) { orbit_arena_close(t); }
static uint64_t arena_epoch(void *t) { return orbit_arena_epoch(t); }
static int arena_readiness(void *t) { return orbit_arena_readiness(t); }
static int arena_hold(void *t)
{
    int rc = orbit_arena_try_reserve(t, 128, &took.res);
    took.reserved = rc == 0;
    return rc;
}
static void arena_drop(void)
{
    if (took.reserved)
        orbit_arena_cancel(&took.res);
    took.reserved = false;
}
static long arena_held(void *t, uint16_t node) { return arena_lane_held(t, node); }
static uint64_t arena_accounted(const struct orbit_reclaim *r) { return r->arena_chunks; }
static void arena_node_dead(void *t, uint16_t node, uint64_t inc) { orbit_arena_node_dead(t, node, inc); }
static void arena_reset_all(void *t) { orbit_arena_reset_all(t); }
static int arena_forked_call(void *t)
{
    struct orbit_reservation r;
    return orbit_arena_try_reserve(t, 64, &r);
}

/* ---- the admission ledger ------------------------------------------------------ */

static int admission_open(struct orbit_fleet *f, enum ct_spec which, void **out)
{
    struct orbit_admission_spec s = ORBIT_ADMISSION_SPEC_DEFAULT;
    s.kind = ADMISSION_KIND;
    s.max_domains = which == CT_BAD ? 0 : 2;
    s.max_claims = which == CT_OTHER ? 32 : 16;
    s.resv[0] = which == CT_RESV;
    return orbit_admission_open(f, &s, (struct orbit_admission **)out);
}
static int admission_open_existing(struct orbit_fleet *f, uint8_t kind, void **out)
{
    return orbit_admission_open_existing(f, kind, (struct orbit_admission **)out);
}
static void admission_close(void *t) { orbit_admission_close(t); }
static int admission_claim(void *t, uint64_t units)
{
    struct orbit_units u = { .domain = 1, .units = units };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result res;
    int rc = orbit_admission_try_claim(t, &d, &res);
    return rc == 0 && res.outcome != ORBIT_ADMIT_CLAIMED ? -ORBIT_EBUSY : rc;
}
static int admission_hold(void *t)
{
    int rc = orbit_admission_set_capacity(t, 1, 100);
    return rc < 0 ? rc : admission_claim(t, 3);
}
static void admission_drop(void) {}
static long admission_held(void *t, uint16_t node)
{
    struct orbit_claim_info c[16];
    ssize_t n = orbit_admission_claims(t, c, 16);
    long mine = 0;
    for (ssize_t i = 0; i < n && i < 16; i++)
        mine += c[i].claim.node == node;
    return n < 0 ? n : mine;
}
static uint64_t admission_accounted(const struct orbit_reclaim *r) { return r->admission_claims; }
static void admission_node_dead(void *t, uint16_t node, uint64_t inc) { orbit_admission_node_dead(t, node, inc); }
static void admission_reset_all(void *t) { (void)orbit_admission_reset_all(t); }
static int admission_forked_call(void *t) { return admission_claim(t, 1); }

/* ---- exchanges: a table of tables (control streams and an arena) ----------------- */

static int exchanges_open(struct orbit_fleet *f, enum ct_spec which, void **out)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control = (struct orbit_stream_spec){ .kind = CONTROL_KIND, .lane_capacity = 4, .buffer_bytes = 4096 };
    s.a_to_b = (struct orbit_arena_spec){ .kind = which == CT_BAD ? CONTROL_KIND : EXCHANGE_ARENA_KIND,
                                          .slot_bytes = 64, .slots_per_lane = which == CT_OTHER ? 32 : 16 };
    s.resv[0] = which == CT_RESV;
    return orbit_exchanges_open(f, &s, (struct orbit_exchanges **)out);
}
static void exchanges_close(void *t) { orbit_exchanges_close(t); }
static uint64_t exchanges_epoch(void *t)
{
    return orbit_arena_epoch(orbit_exchanges_arena(t, ORBIT_FLOW_A_TO_B));
}
static int exchanges_readiness(void *t) { return orbit_exchanges_readiness(t); }
static int exchanges_hold(void *t)
{
    struct orbit_ticket ticket;
    int rc = orbit_exchange_create(t, &took.x, &ticket);
    if (rc == 0)
        rc = orbit_exchange_try_reserve(took.x, 128, &took.res);
    took.reserved = rc == 0;
    return rc;
}
static void exchanges_drop(void)
{
    if (took.reserved)
        orbit_arena_cancel(&took.res);
    orbit_exchange_close(took.x);
    took.reserved = false;
    took.x = NULL;
}
static long exchanges_held(void *t, uint16_t node)
{
    struct orbit_owner o[16];
    long sides = count_owners(o, orbit_streams_owners(orbit_exchanges_streams(t), o, 16), node);
    long chunks = arena_lane_held(orbit_exchanges_arena(t, ORBIT_FLOW_A_TO_B), node);
    return sides < 0 ? sides : chunks < 0 ? chunks : sides + chunks;
}
static uint64_t exchanges_accounted(const struct orbit_reclaim *r) { return r->stream_sides + r->arena_chunks; }
static void exchanges_node_dead(void *t, uint16_t node, uint64_t inc)
{
    /* No death call of its own: its parts' (what orbit_fleet_node_dead runs). */
    orbit_streams_node_dead(orbit_exchanges_streams(t), node, inc);
    orbit_arena_node_dead(orbit_exchanges_arena(t, ORBIT_FLOW_A_TO_B), node, inc);
}
static void exchanges_reset_all(void *t)
{
    orbit_streams_reset_all(orbit_exchanges_streams(t));
    orbit_arena_reset_all(orbit_exchanges_arena(t, ORBIT_FLOW_A_TO_B));
}
static int exchanges_forked_call(void *t)
{
    struct orbit_exchange *x;
    struct orbit_ticket ticket;
    return orbit_exchange_create(t, &x, &ticket);
}

#define CT_TABLE(prefix, type_name, kind_, segments_, existing, epoch_, readiness_)                                      \
    { .name = type_name, .open_call = "orbit_" #prefix "_open", .kind = kind_, .segments = segments_, \
      .open = prefix##_open, .open_existing = existing, .close = prefix##_close,                     \
      .epoch = epoch_, .readiness = readiness_, .hold = prefix##_hold,                        \
      .drop = prefix##_drop, .held = prefix##_held, .accounted = prefix##_accounted,                \
      .node_dead = prefix##_node_dead, .reset_all = prefix##_reset_all,                             \
      .forked_call = prefix##_forked_call }

const struct ct_table ct_tables[] = {
    CT_TABLE(pool, "pool", POOL_KIND, 1, pool_open_existing, pool_epoch, pool_readiness),
    CT_TABLE(streams, "streams", STREAMS_KIND, 1, streams_open_existing, streams_epoch, streams_readiness),
    CT_TABLE(arena, "arena", ARENA_KIND, 1, arena_open_existing, arena_epoch, arena_readiness),
    /* A ledger rings no doorbell (its waits are on its change epoch) and has no table epoch
     * call (orbit_admission_epoch is its change epoch): the fleet's listing tells. */
    CT_TABLE(admission, "admission", ADMISSION_KIND, 1, admission_open_existing, NULL, NULL),
    CT_TABLE(exchanges, "arena", EXCHANGE_ARENA_KIND, 2, NULL, exchanges_epoch, exchanges_readiness),
};
const unsigned ct_table_count = sizeof ct_tables / sizeof ct_tables[0];
