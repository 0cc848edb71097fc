/* SPDX-License-Identifier: MIT */
/* orbitctl show: one payload arena — use per lane, and the exchanges with chunks in it. */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/exchange.h>
#include "orbitctl.h"

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

static void print_text(FILE *out, const struct orbit_arena_spec *sp, uint64_t epoch,
                       const struct orbit_arena_lane_info *li, size_t nl, const struct xsum *xs, size_t nx)
{
    fprintf(out, "  %u slots x %u bytes per lane (kind %u), epoch %" PRIu64 ", %zu lane%s in use\n",
            sp->slots_per_lane, sp->slot_bytes, (unsigned)sp->kind, epoch, nl, nl == 1 ? "" : "s");
    for (size_t i = 0; i < nl; i++)
        fprintf(out, "    lane %-5u free %-7u reserved %-7u live %-7u reading %-7u reclaiming %-5u chunks %u\n",
                li[i].node, li[i].free, li[i].reserved, li[i].live, li[i].reading, li[i].reclaiming,
                li[i].chunks);
    if (nx)
        fprintf(out, "  exchanges with chunks in the arena:\n");
    for (size_t i = 0; i < nx; i++) {
        char id[ORBIT_ID_TEXT_MAX];
        orbit_id_format(xs[i].exchange, id, sizeof id);
        fprintf(out, "    %-18s %s  live %u reading %u reserved %u reclaiming %u  %" PRIu64 " bytes\n", id,
                flow_name(xs[i].flow), xs[i].live, xs[i].reading, xs[i].reserved, xs[i].reclaiming, xs[i].bytes);
    }
}

static void print_json(FILE *out, const struct orbit_arena_spec *sp, uint64_t epoch,
                       const struct orbit_arena_lane_info *li, size_t nl, const struct xsum *xs, size_t nx)
{
    fprintf(out, "{\"type\":\"arena\",\"kind\":%u,\"slot_bytes\":%u,\"slots_per_lane\":%u,\"epoch\":\"%" PRIu64 "\""
            ",\"lanes\":[", (unsigned)sp->kind, sp->slot_bytes, sp->slots_per_lane, epoch);
    for (size_t i = 0; i < nl; i++)
        fprintf(out, "%s{\"node\":%u,\"free\":%u,\"reserved\":%u,\"live\":%u,\"reading\":%u,\"reclaiming\":%u,"
                "\"chunks\":%u}", i ? "," : "", li[i].node, li[i].free, li[i].reserved, li[i].live,
                li[i].reading, li[i].reclaiming, li[i].chunks);
    fprintf(out, "],\"exchanges\":[");
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

int ctl_show_exchange(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    struct orbit_arena *a;
    int rc = orbit_arena_open_existing(f, kind, &a);
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
        if (json)
            print_json(out, &sp, orbit_arena_epoch(a), li, nl, xs, nx);
        else
            print_text(out, &sp, orbit_arena_epoch(a), li, nl, xs, nx);
    }
    free(li);
    free(ci);
    free(xs);
    orbit_arena_close(a);
    return rc;
}
