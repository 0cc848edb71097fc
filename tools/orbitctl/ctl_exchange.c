/* SPDX-License-Identifier: MIT */
/* orbitctl show: one payload arena — use per lane, and the exchanges with chunks in it. */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/exchange.h>
#include "ctl.h"
#include "tool.h"

/* Chunks in flight for one exchange and flow. */
struct xsum { orbit_id exchange; uint8_t flow; uint32_t reserved, live, reading, reclaiming; uint64_t bytes; };

static int xsum_cmp(const void *a, const void *b)
{
    const struct xsum *x = a, *y = b;
    if (x->exchange != y->exchange)
        return x->exchange < y->exchange ? -1 : 1;
    return (int)x->flow - (int)y->flow;
}

/* Group chunks committed to exchanges by (exchange, flow); plain commits are left out. */
static size_t summarize(const struct orbit_chunk_info *ci, size_t n, struct xsum *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (ci[i].exchange == 0)
            continue;
        size_t k = 0;
        while (k < m && !(out[k].exchange == ci[i].exchange && out[k].flow == ci[i].flow))
            k++;
        if (k == m)
            out[m++] = (struct xsum){ .exchange = ci[i].exchange, .flow = ci[i].flow };
        uint32_t *c = ci[i].state == ORBIT_CHUNK_LIVE ? &out[k].live : ci[i].state == ORBIT_CHUNK_READING
                      ? &out[k].reading : ci[i].state == ORBIT_CHUNK_RECLAIMING ? &out[k].reclaiming
                      : &out[k].reserved;
        (*c)++;
        out[k].bytes += ci[i].desc.len;
    }
    qsort(out, m, sizeof *out, xsum_cmp);
    return m;
}

static const char *flow_name(uint8_t flow)
{
    return flow == ORBIT_FLOW_A_TO_B ? "a->b" : flow == ORBIT_FLOW_B_TO_A ? "b->a" : "-";
}

/* The producer life of a lane: the incarnation its first chunk names (0 when none is listed). */
static uint64_t lane_producer(const struct orbit_chunk_info *ci, size_t nc, uint16_t node)
{
    for (size_t i = 0; i < nc; i++)
        if (ci[i].desc.node == node)
            return ci[i].producer_incarnation;
    return 0;
}

static unsigned lane_pct(const struct orbit_arena_spec *sp, const struct orbit_arena_lane_info *l)
{
    uint32_t used = l->free <= sp->slots_per_lane ? sp->slots_per_lane - l->free : sp->slots_per_lane;
    return sp->slots_per_lane ? (unsigned)((uint64_t)used * 100u / sp->slots_per_lane) : 0;
}

static void text_readers(const struct ctl_ctx *c, const struct orbit_chunk_info *ci, size_t nc)
{
    bool any = false;
    for (size_t i = 0; i < nc; i++) {
        if (ci[i].state != ORBIT_CHUNK_READING)
            continue;
        char id[ORBIT_ID_TEXT_MAX];
        orbit_id_format(ci[i].exchange, id, sizeof id);
        fprintf(c->out, "%s    chunk lane %u slot %u (%u bytes) read by ", any ? "" : "  chunks being read:\n",
                ci[i].desc.node, ci[i].desc.first_slot, ci[i].desc.len);
        ctl_text_member(c, ci[i].reader, ci[i].reader_incarnation);
        fprintf(c->out, "%s%s\n", ci[i].exchange ? "  exchange " : "", ci[i].exchange ? id : "");
        any = true;
    }
}

static void print_text(const struct ctl_ctx *c, const struct orbit_arena_spec *sp, uint64_t epoch,
                       const struct orbit_arena_lane_info *li, size_t nl, const struct orbit_chunk_info *ci,
                       size_t nc, const struct xsum *xs, size_t nx)
{
    FILE *out = c->out;
    fprintf(out, "  %u slots x %u bytes per lane (kind %u), epoch %" PRIu64 ", %zu lane%s in use\n",
            sp->slots_per_lane, sp->slot_bytes, (unsigned)sp->kind, epoch, nl, nl == 1 ? "" : "s");
    for (size_t i = 0; i < nl; i++) {
        fprintf(out, "    lane %-5u %u of %u slots used (%u%%)  producer ", li[i].node,
                sp->slots_per_lane - (li[i].free <= sp->slots_per_lane ? li[i].free : sp->slots_per_lane),
                sp->slots_per_lane, lane_pct(sp, &li[i]));
        ctl_text_member(c, li[i].node, lane_producer(ci, nc, li[i].node));
        fprintf(out, "\n      reserved %u  live %u  reading %u  reclaiming %u  chunks %u\n", li[i].reserved,
                li[i].live, li[i].reading, li[i].reclaiming, li[i].chunks);
    }
    text_readers(c, ci, nc);
    if (nx)
        fprintf(out, "  exchanges with chunks in the arena:\n");
    for (size_t i = 0; i < nx; i++) {
        char id[ORBIT_ID_TEXT_MAX];
        orbit_id_format(xs[i].exchange, id, sizeof id);
        fprintf(out, "    %-18s %s  live %u reading %u reserved %u reclaiming %u  %" PRIu64 " bytes\n", id,
                flow_name(xs[i].flow), xs[i].live, xs[i].reading, xs[i].reserved, xs[i].reclaiming, xs[i].bytes);
    }
}

static const char *chunk_state(enum orbit_chunk_state s)
{
    return s == ORBIT_CHUNK_LIVE ? "live" : s == ORBIT_CHUNK_READING ? "reading"
           : s == ORBIT_CHUNK_RECLAIMING ? "reclaiming" : "reserved";
}

static void json_chunks(const struct ctl_ctx *c, const struct orbit_chunk_info *ci, size_t nc)
{
    fputs(",\"chunks\":[", c->out);
    for (size_t i = 0; i < nc; i++) {
        char id[ORBIT_ID_TEXT_MAX];
        orbit_id_format(ci[i].exchange, id, sizeof id);
        fprintf(c->out, "%s{\"lane\":%u,\"first_slot\":%u,\"slots\":%u,\"len\":%u,\"state\":\"%s\",\"producer\":",
                i ? "," : "", ci[i].desc.node, ci[i].desc.first_slot, ci[i].desc.slot_count, ci[i].desc.len,
                chunk_state(ci[i].state));
        ctl_json_member(c, ci[i].desc.node, ci[i].producer_incarnation, false);
        fputs(",\"reader\":", c->out);
        if (ci[i].state == ORBIT_CHUNK_READING)
            ctl_json_member(c, ci[i].reader, ci[i].reader_incarnation, false);
        else
            fputs("null", c->out);
        fputs(",\"exchange\":", c->out);
        if (ci[i].exchange)
            tool_json_str(c->out, id);
        else
            fputs("null", c->out);
        fprintf(c->out, ",\"flow\":\"%s\"}", flow_name(ci[i].flow));
    }
    fputc(']', c->out);
}

static void print_json(const struct ctl_ctx *c, const struct orbit_arena_spec *sp, uint64_t epoch,
                       const struct orbit_arena_lane_info *li, size_t nl, const struct orbit_chunk_info *ci,
                       size_t nc, const struct xsum *xs, size_t nx)
{
    FILE *out = c->out;
    ctl_json_table_head(c, "arena", sp->kind, epoch);
    fprintf(out, ",\"slot_bytes\":%u,\"slots_per_lane\":%u,\"lanes\":[", sp->slot_bytes, sp->slots_per_lane);
    for (size_t i = 0; i < nl; i++) {
        fprintf(out, "%s{\"node\":%u,\"producer\":", i ? "," : "", li[i].node);
        ctl_json_member(c, li[i].node, lane_producer(ci, nc, li[i].node), true);
        fprintf(out, ",\"slots\":%u,\"used\":%u,\"use_pct\":%u,\"free\":%u,\"reserved\":%u,\"live\":%u,"
                "\"reading\":%u,\"reclaiming\":%u,\"chunks\":%u}", sp->slots_per_lane,
                sp->slots_per_lane - (li[i].free <= sp->slots_per_lane ? li[i].free : sp->slots_per_lane),
                lane_pct(sp, &li[i]), li[i].free, li[i].reserved, li[i].live, li[i].reading, li[i].reclaiming,
                li[i].chunks);
    }
    fputc(']', out);
    json_chunks(c, ci, nc);
    fprintf(out, ",\"exchanges\":[");
    for (size_t i = 0; i < nx; i++) {
        char id[ORBIT_ID_TEXT_MAX];
        orbit_id_format(xs[i].exchange, id, sizeof id);
        fprintf(out, "%s{\"id\":", i ? "," : "");
        tool_json_str(out, id);
        fprintf(out, ",\"flow\":\"%s\",\"live\":%u,\"reading\":%u,\"reserved\":%u,\"reclaiming\":%u,"
                "\"bytes\":\"%" PRIu64 "\"}", flow_name(xs[i].flow), xs[i].live, xs[i].reading, xs[i].reserved,
                xs[i].reclaiming, xs[i].bytes);
    }
    fprintf(out, "]}");
}

int ctl_section_exchange(const struct ctl_ctx *c, uint8_t kind)
{
    struct orbit_arena *a;
    int rc = orbit_arena_open_existing(c->f, kind, &a);
    if (rc < 0)
        return rc;
    struct orbit_arena_spec sp;
    orbit_arena_spec(a, &sp);
    ssize_t lanes = orbit_arena_lanes(a, NULL, 0), chunks = orbit_arena_chunks(a, NULL, 0);
    size_t lcap = lanes > 0 ? (size_t)lanes + 8 : 1, ccap = chunks > 0 ? (size_t)chunks + 64 : 1;
    struct orbit_arena_lane_info *li = calloc(lcap, sizeof *li);
    struct orbit_chunk_info *ci = calloc(ccap, sizeof *ci);
    struct xsum *xs = calloc(ccap, sizeof *xs);
    if (!li || !ci || !xs) {
        rc = -ENOMEM;
    } else {
        lanes = orbit_arena_lanes(a, li, lcap);
        chunks = orbit_arena_chunks(a, ci, ccap);
        size_t nl = lanes < 0 ? 0 : (size_t)lanes < lcap ? (size_t)lanes : lcap;
        size_t nc = chunks < 0 ? 0 : (size_t)chunks < ccap ? (size_t)chunks : ccap;
        size_t nx = summarize(ci, nc, xs);
        if (c->json)
            print_json(c, &sp, orbit_arena_epoch(a), li, nl, ci, nc, xs, nx);
        else
            print_text(c, &sp, orbit_arena_epoch(a), li, nl, ci, nc, xs, nx);
    }
    free(li);
    free(ci);
    free(xs);
    orbit_arena_close(a);
    return rc;
}

int ctl_show_exchange(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    return ctl_show_with(ctl_section_exchange, f, kind, json, out);
}
