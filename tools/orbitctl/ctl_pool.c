/* SPDX-License-Identifier: MIT */
/* orbitctl show: a pool table's spec, owners, keys (with who waits) and resources (with who holds). */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/pool.h>
#include "ctl.h"
#include "tool.h"

#define LEASES_MAX 64   /* entries a resource can show: 16 pending, room for a race */

static const char *state_name(enum orbit_state s) { return s == ORBIT_LIVE ? "live" : "draining"; }

static uint32_t cand_free(const struct orbit_candidate *c)
{
    uint64_t used = (uint64_t)c->reserved + c->active;
    return used >= c->capacity ? 0 : (uint32_t)(c->capacity - used);
}

static const char *lease_state(enum orbit_lease_state s) { return s == ORBIT_LEASE_ACTIVE ? "active" : "pending"; }

static void json_lease(const struct ctl_ctx *c, const struct orbit_lease_info *l, bool first)
{
    fprintf(c->out, "%s{\"fence\":\"%" PRIu64 "\",\"state\":\"%s\",\"holder\":", first ? "" : ",", l->fence,
            lease_state(l->state));
    if (l->node == ORBIT_NODE_NONE)
        fputs("null", c->out);
    else
        ctl_json_member(c, l->node, l->incarnation, false);
    if (l->reserved_ms)
        fprintf(c->out, ",\"reserved_ms\":\"%" PRIu64 "\",\"age_ms\":\"%" PRIu64 "\"}", l->reserved_ms,
                ctl_age_ms(c, l->reserved_ms));
    else
        fputs(",\"reserved_ms\":null,\"age_ms\":null}", c->out);
}

static void text_lease(const struct ctl_ctx *c, const struct orbit_lease_info *l)
{
    char age[32];
    fprintf(c->out, "        %-7s %s %-6" PRIu64 "  ", lease_state(l->state), l->fence ? "fence" : "     ", l->fence);
    if (l->node == ORBIT_NODE_NONE)
        fputs("holder not known yet", c->out);
    else
        ctl_text_member(c, l->node, l->incarnation);
    if (l->reserved_ms)
        fprintf(c->out, "  %s %s", l->state == ORBIT_LEASE_ACTIVE ? "reserved" : "pending",
                ctl_age(age, sizeof age, ctl_age_ms(c, l->reserved_ms)));
    fputc('\n', c->out);
}

/* The resource's leases, or the reason they could not be read. */
static void print_leases(const struct ctl_ctx *c, struct orbit_pool *p, orbit_id id)
{
    struct orbit_lease_info l[LEASES_MAX];
    ssize_t n = orbit_pool_leases(p, id, l, LEASES_MAX);
    if (c->json && n < 0) {
        fputs(",\"leases\":[],\"leases_error\":", c->out);
        tool_json_str(c->out, orbit_strerror((int)n));
        return;
    }
    if (n < 0) {
        fprintf(c->out, "        (leases: %s)\n", orbit_strerror((int)n));
        return;
    }
    if (c->json)
        fputs(",\"leases\":[", c->out);
    for (ssize_t i = 0; i < n && i < LEASES_MAX; i++) {
        if (c->json)
            json_lease(c, &l[i], i == 0);
        else
            text_lease(c, &l[i]);
    }
    if (c->json)
        fputc(']', c->out);
}

static void print_candidate(const struct ctl_ctx *c, struct orbit_pool *p, const struct orbit_candidate *r,
                            bool first)
{
    char id[ORBIT_ID_TEXT_MAX], age[32];
    orbit_id_format(r->id, id, sizeof id);
    if (c->json) {
        fprintf(c->out, "%s{\"id\":\"%s\",\"owner\":", first ? "" : ",", id);
        ctl_json_member(c, r->owner, r->owner_incarnation, false);
        fprintf(c->out, ",\"state\":\"%s\",\"capacity\":%" PRIu32 ",\"reserved\":%" PRIu32 ",\"active\":%" PRIu32
                        ",\"free\":%" PRIu32, state_name(r->state), r->capacity, r->reserved, r->active, cand_free(r));
        if (r->last_reserve_ms)
            fprintf(c->out, ",\"last_reserve_ms\":\"%" PRIu64 "\",\"last_reserve_age_ms\":\"%" PRIu64 "\"",
                    r->last_reserve_ms, ctl_age_ms(c, r->last_reserve_ms));
        else
            fputs(",\"last_reserve_ms\":null,\"last_reserve_age_ms\":null", c->out);
        print_leases(c, p, r->id);
        fputc('}', c->out);
        return;
    }
    fprintf(c->out, "      resource %-18s owner ", id);
    ctl_text_member(c, r->owner, r->owner_incarnation);
    fprintf(c->out, "  %s  capacity %" PRIu32 "  reserved %" PRIu32 "  active %" PRIu32 "  free %" PRIu32
                    "  last reserve %s%s\n",
            state_name(r->state), r->capacity, r->reserved, r->active, cand_free(r),
            r->last_reserve_ms ? ctl_age(age, sizeof age, ctl_age_ms(c, r->last_reserve_ms)) : "never",
            r->last_reserve_ms ? " ago" : "");
    print_leases(c, p, r->id);
}

/* Who waits on, creates for or watches the key. */
static void print_key_nodes(const struct ctl_ctx *c, struct orbit_pool *p, orbit_key key)
{
    struct orbit_pool_key_node *kn = calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof *kn);
    ssize_t n = kn ? orbit_pool_key_nodes(p, key, kn, ORBIT_FLEET_CAPACITY_MAX) : -ENOMEM;
    if (n > ORBIT_FLEET_CAPACITY_MAX)
        n = ORBIT_FLEET_CAPACITY_MAX;
    if (c->json)
        fputs(",\"waiters\":[", c->out);
    else if (n > 0)
        fputs("      waiting:", c->out);
    for (ssize_t i = 0; i < n; i++) {
        if (c->json) {
            fputs(i ? ",{\"member\":" : "{\"member\":", c->out);
            ctl_json_member(c, kn[i].node, 0, true);
            fprintf(c->out, ",\"waits\":%" PRIu32 ",\"creating\":%" PRIu32 ",\"watching\":%s}", kn[i].waits,
                    kn[i].creating, kn[i].watching ? "true" : "false");
            continue;
        }
        const struct orbit_node_info *ni = ctl_node(c, kn[i].node);
        fprintf(c->out, "%s ", i ? ";" : "");
        ctl_text_member(c, kn[i].node, ni ? ni->incarnation : 0);
        if (kn[i].waits)
            fprintf(c->out, " waits %" PRIu32, kn[i].waits);
        if (kn[i].creating)
            fprintf(c->out, " creating %" PRIu32, kn[i].creating);
        if (kn[i].watching)
            fputs(" watching", c->out);
    }
    if (c->json)
        fputc(']', c->out);
    else if (n > 0)
        fputc('\n', c->out);
    else if (n < 0)
        fprintf(c->out, "      (waiters: %s)\n", orbit_strerror((int)n));
    free(kn);
}

static void print_key(const struct ctl_ctx *c, struct orbit_pool *p, const struct orbit_pool_key_info *k, bool first)
{
    char text[ORBIT_KEY_TEXT_MAX];
    orbit_key_format(k->key, text, sizeof text);
    if (c->json)
        fprintf(c->out, "%s{\"key\":\"%s\",\"live\":%" PRIu32 ",\"creating\":%" PRIu32 ",\"refs\":%" PRIu32
                        ",\"version\":%" PRIu32 ",\"watchers\":%" PRIu32,
                first ? "" : ",", text, k->live, k->creating, k->refs, k->version, k->watchers);
    else
        fprintf(c->out, "    %s  live %" PRIu32 "  creating %" PRIu32 "  refs %" PRIu32 "  version %" PRIu32
                        "  watchers %" PRIu32 "\n",
                text, k->live, k->creating, k->refs, k->version, k->watchers);
    print_key_nodes(c, p, k->key);
    ssize_t n = orbit_pool_candidates(p, k->key, NULL, 0);
    struct orbit_candidate *r = n >= 0 ? calloc((size_t)n + 1, sizeof *r) : NULL;
    ssize_t got = r ? orbit_pool_candidates(p, k->key, r, (size_t)n) : 0;
    if (c->json)
        fputs(",\"resources\":[", c->out);
    for (ssize_t i = 0; i < got && i < n; i++)
        print_candidate(c, p, &r[i], i == 0);
    free(r);
    if (c->json)
        fputs("]}", c->out);
}

static void print_owners(const struct ctl_ctx *c, struct orbit_pool *p)
{
    ssize_t n = orbit_pool_owners(p, NULL, 0);
    struct orbit_owner *o = n >= 0 ? calloc((size_t)n + 1, sizeof *o) : NULL;
    ssize_t got = o ? orbit_pool_owners(p, o, (size_t)n) : 0;
    if (got > n)
        got = n;
    fputs(c->json ? ",\"owners\":[" : "  owners:", c->out);
    for (ssize_t i = 0; i < got; i++) {
        if (c->json) {
            if (i)
                fputc(',', c->out);
            ctl_json_member(c, o[i].node, o[i].incarnation, false);
        } else {
            fputs(i ? ", " : " ", c->out);
            ctl_text_member(c, o[i].node, o[i].incarnation);
        }
    }
    fputs(c->json ? "]" : got ? "\n" : " none\n", c->out);
    free(o);
}

static void print_header(const struct ctl_ctx *c, struct orbit_pool *p, uint8_t kind)
{
    struct orbit_pool_spec spec;
    struct orbit_pool_key_table kt;
    orbit_pool_spec_of(p, &spec);
    orbit_pool_key_table(p, &kt);
    if (c->json) {
        ctl_json_table_head(c, "pool", kind, orbit_pool_epoch(p));
        fprintf(c->out, ",\"key_capacity\":%" PRIu32 ",\"lane_capacity\":%" PRIu32 ",\"generation_limit\":%" PRIu32
                        ",\"pending_reservations\":%u,\"key_table\":{\"capacity\":%" PRIu32 ",\"live\":%" PRIu32
                        ",\"tombstones\":%" PRIu32 ",\"empty\":%" PRIu32 "}",
                spec.key_capacity, spec.lane_capacity, spec.generation_limit, ORBIT_PENDING_RESERVATIONS,
                kt.capacity, kt.live, kt.tombstones, kt.empty);
        return;
    }
    fprintf(c->out, "  spec: key capacity %" PRIu32 ", lane capacity %" PRIu32 ", generation limit %" PRIu32
                    ", %u pending per resource; epoch %" PRIu64 "\n",
            spec.key_capacity, spec.lane_capacity, spec.generation_limit, ORBIT_PENDING_RESERVATIONS,
            orbit_pool_epoch(p));
    fprintf(c->out, "  key table: %" PRIu32 " live, %" PRIu32 " tombstones, %" PRIu32 " empty of %" PRIu32 "\n",
            kt.live, kt.tombstones, kt.empty, kt.capacity);
}

int ctl_section_pool(const struct ctl_ctx *c, uint8_t kind)
{
    struct orbit_pool *p;
    int rc = orbit_pool_open_existing(c->f, kind, &p);
    if (rc < 0)
        return rc;
    print_header(c, p, kind);
    print_owners(c, p);
    ssize_t n = orbit_pool_keys(p, NULL, 0);
    struct orbit_pool_key_info *keys = n >= 0 ? calloc((size_t)n + 1, sizeof *keys) : NULL;
    ssize_t got = keys ? orbit_pool_keys(p, keys, (size_t)n) : 0;
    if (got > n)
        got = n;
    fputs(c->json ? ",\"keys\":[" : "  keys:\n", c->out);
    for (ssize_t i = 0; i < got; i++)
        print_key(c, p, &keys[i], i == 0);
    if (c->json)
        fputs("]}", c->out);
    else if (got == 0)
        fputs("    (none)\n", c->out);
    free(keys);
    orbit_pool_close(p);
    return 0;
}

int ctl_show_pool(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    return ctl_show_with(ctl_section_pool, f, kind, json, out);
}
