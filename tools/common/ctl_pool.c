/* SPDX-License-Identifier: MIT */
/* orbitctl show: a pool table's spec, key table, owners, keys and their candidates. */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/pool.h>
#include "tool.h"

static const char *state_name(enum orbit_state s) { return s == ORBIT_LIVE ? "live" : "draining"; }

static uint64_t cand_free(const struct orbit_candidate *c)
{
    uint64_t used = (uint64_t)c->reserved + c->active;
    return used >= c->capacity ? 0 : c->capacity - used;
}

static void print_candidate(const struct orbit_candidate *c, bool json, bool first, FILE *out)
{
    char id[ORBIT_ID_TEXT_MAX];
    orbit_id_format(c->id, id, sizeof id);
    if (json) {
        fprintf(out, "%s{\"id\":\"%s\",\"owner\":%u,\"owner_incarnation\":\"%" PRIu64 "\",\"state\":\"%s\","
                     "\"capacity\":%" PRIu32 ",\"reserved\":%" PRIu32 ",\"active\":%" PRIu32
                     ",\"free\":\"%" PRIu64 "\",\"last_reserve_ms\":\"%" PRIu64 "\"}",
                first ? "" : ",", id, c->owner, c->owner_incarnation, state_name(c->state), c->capacity,
                c->reserved, c->active, cand_free(c), c->last_reserve_ms);
        return;
    }
    fprintf(out, "      %-22s owner %u (incarnation %" PRIu64 ")  %-8s capacity %" PRIu32 "  reserved %" PRIu32
                 "  active %" PRIu32 "  free %" PRIu64 "  last reserve %" PRIu64 " ms\n",
            id, c->owner, c->owner_incarnation, state_name(c->state), c->capacity, c->reserved, c->active,
            cand_free(c), c->last_reserve_ms);
}

static void print_key(struct orbit_pool *p, const struct orbit_pool_key_info *k, bool json, bool first, FILE *out)
{
    char text[ORBIT_KEY_TEXT_MAX];
    orbit_key_format(k->key, text, sizeof text);
    if (json)
        fprintf(out, "%s{\"key\":\"%s\",\"live\":%" PRIu32 ",\"creating\":%" PRIu32 ",\"refs\":%" PRIu32
                     ",\"version\":%" PRIu32 ",\"watchers\":%" PRIu32 ",\"candidates\":[",
                first ? "" : ",", text, k->live, k->creating, k->refs, k->version, k->watchers);
    else
        fprintf(out, "    %s  live %" PRIu32 "  creating %" PRIu32 "  refs %" PRIu32 "  version %" PRIu32
                     "  watchers %" PRIu32 "\n",
                text, k->live, k->creating, k->refs, k->version, k->watchers);
    struct orbit_candidate *c;
    ssize_t n = orbit_pool_candidates(p, k->key, NULL, 0);
    c = n >= 0 ? calloc((size_t)n + 1, sizeof *c) : NULL;
    ssize_t got = c ? orbit_pool_candidates(p, k->key, c, (size_t)n) : 0;
    for (ssize_t i = 0; i < got && i < n; i++)
        print_candidate(&c[i], json, i == 0, out);
    free(c);
    if (json)
        fputs("]}", out);
}

static void print_owners(struct orbit_pool *p, bool json, FILE *out)
{
    ssize_t n = orbit_pool_owners(p, NULL, 0);
    struct orbit_owner *o = n >= 0 ? calloc((size_t)n + 1, sizeof *o) : NULL;
    ssize_t got = o ? orbit_pool_owners(p, o, (size_t)n) : 0;
    if (got > n)
        got = n;
    fputs(json ? ",\"owners\":[" : "  owners:", out);
    for (ssize_t i = 0; i < got; i++) {
        if (json)
            fprintf(out, "%s{\"node\":%u,\"incarnation\":\"%" PRIu64 "\"}", i ? "," : "", o[i].node, o[i].incarnation);
        else
            fprintf(out, " %u/%" PRIu64, o[i].node, o[i].incarnation);
    }
    fputs(json ? "]" : got ? "\n" : " none\n", out);
    free(o);
}

static void print_header(struct orbit_pool *p, bool json, FILE *out)
{
    struct orbit_pool_spec spec;
    struct orbit_pool_key_table kt;
    orbit_pool_spec_of(p, &spec);
    orbit_pool_key_table(p, &kt);
    if (json) {
        fprintf(out, "{\"key_capacity\":%" PRIu32 ",\"lane_capacity\":%" PRIu32 ",\"generation_limit\":%" PRIu32
                     ",\"pending_reservations\":%u,\"epoch\":\"%" PRIu64 "\",\"key_table\":{\"live\":%" PRIu32
                     ",\"tombstones\":%" PRIu32 ",\"empty\":%" PRIu32 "}",
                spec.key_capacity, spec.lane_capacity, spec.generation_limit, ORBIT_PENDING_RESERVATIONS,
                orbit_pool_epoch(p), kt.live, kt.tombstones, kt.empty);
        return;
    }
    fprintf(out, "  spec: key capacity %" PRIu32 ", lane capacity %" PRIu32 ", generation limit %" PRIu32
                 ", %u pending per resource; epoch %" PRIu64 "\n",
            spec.key_capacity, spec.lane_capacity, spec.generation_limit, ORBIT_PENDING_RESERVATIONS,
            orbit_pool_epoch(p));
    fprintf(out, "  key table: %" PRIu32 " live, %" PRIu32 " tombstones, %" PRIu32 " empty of %" PRIu32 "\n",
            kt.live, kt.tombstones, kt.empty, kt.capacity);
}

int ctl_show_pool(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    struct orbit_pool *p;
    int rc = orbit_pool_open_existing(f, kind, &p);
    if (rc < 0)
        return rc;
    print_header(p, json, out);
    print_owners(p, json, out);
    ssize_t n = orbit_pool_keys(p, NULL, 0);
    struct orbit_pool_key_info *keys = n >= 0 ? calloc((size_t)n + 1, sizeof *keys) : NULL;
    ssize_t got = keys ? orbit_pool_keys(p, keys, (size_t)n) : 0;
    if (got > n)
        got = n;
    fputs(json ? ",\"keys\":[" : "  keys:\n", out);
    for (ssize_t i = 0; i < got; i++)
        print_key(p, &keys[i], json, i == 0, out);
    if (json)
        fputs("]}", out);
    else if (got == 0)
        fputs("    (none)\n", out);
    free(keys);
    orbit_pool_close(p);
    return 0;
}
