/* SPDX-License-Identifier: MIT */
/* orbitctl top: one sample of a fleet — counters per table and node, node states, table gauges. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl_top.h"

/* The counter each table type shows per node: what its members mostly do. */
static uint8_t headline_of(unsigned type, const char *name)
{
    static const struct { const char *table, *counter; } heads[] = {
        { "pool", "reservations" }, { "streams", "bytes_written" },
        { "admission", "claims" }, { "arena", "chunks_committed" },
    };
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++) {
        if (strcmp(heads[h].table, name) != 0)
            continue;
        for (unsigned i = 0; i < ORBIT_COUNTERS_MAX; i++) {
            const char *c = orbit_counter_name(type, i);
            if (!c)
                break;
            if (strcmp(c, heads[h].counter) == 0)
                return (uint8_t)i;
        }
    }
    return TOP_NO_IDX;
}

static int take_tables(struct orbit_fleet *f, struct top_sample *s)
{
    struct orbit_table_info ti[TOP_TABLES];
    ssize_t n = orbit_fleet_tables(f, ti, TOP_TABLES);
    if (n < 0)
        return (int)n;
    s->n_tables = (size_t)n < TOP_TABLES ? (size_t)n : TOP_TABLES;
    for (size_t i = 0; i < s->n_tables; i++) {
        struct top_table *t = &s->t[i];
        t->kind = ti[i].kind;
        t->type = ti[i].type;
        t->built = ti[i].built;
        snprintf(t->name, sizeof t->name, "%s", ti[i].name);
        t->headline = headline_of(t->type, t->name);
        t->rc = orbit_fleet_counters(f, t->kind, ORBIT_NODE_NONE, &t->total);
    }
    return 0;
}

static void take_node(struct orbit_fleet *f, struct top_sample *s, struct top_node *tn)
{
    for (size_t i = 0; i < s->n_tables; i++) {
        struct orbit_counters c;
        tn->have[i] = orbit_fleet_counters(f, s->t[i].kind, tn->info.node, &c) == 0;
        if (tn->have[i])
            memcpy(tn->v[i], c.value, sizeof tn->v[i]);
    }
    bool dead = tn->info.state == ORBIT_NODE_LIVE && !tn->info.alive;
    tn->have_holds = dead && orbit_fleet_account(f, tn->info.node, tn->info.incarnation, &tn->holds) == 0;
}

static int take_nodes(struct orbit_fleet *f, struct top_sample *s)
{
    static struct orbit_node_info all[ORBIT_FLEET_CAPACITY_MAX];
    ssize_t n = orbit_fleet_nodes(f, all, ORBIT_FLEET_CAPACITY_MAX);
    if (n < 0)
        return (int)n;
    s->claimed = (size_t)n < ORBIT_FLEET_CAPACITY_MAX ? (size_t)n : ORBIT_FLEET_CAPACITY_MAX;
    for (size_t i = 0; i < s->claimed; i++) {
        const struct orbit_node_info *ni = &all[i];
        if (ni->node >= s->capacity)
            continue;   /* a record that cannot be: not shown */
        bool live = ni->state == ORBIT_NODE_LIVE;
        s->live += live && ni->alive;
        s->dead += live && !ni->alive;
        s->joining += !live;
        if (s->n_nodes < TOP_NODES) {
            struct top_node *tn = &s->nodes[s->n_nodes++];
            tn->info = *ni;
            take_node(f, s, tn);
        }
    }
    return 0;
}

#ifdef ORBIT_WITH_POOL
static void take_key(struct orbit_pool *p, uint8_t kind, const struct orbit_pool_key_info *k, struct top_key *out)
{
    static struct orbit_candidate c[1024];
    *out = (struct top_key){ .kind = kind, .key = k->key, .watchers = k->watchers };
    ssize_t n = orbit_pool_candidates(p, k->key, c, 1024);
    out->candidates = n < 0 ? 0 : (uint32_t)(n < 1024 ? n : 1024);
    for (uint32_t i = 0; i < out->candidates; i++) {
        out->capacity += c[i].capacity;
        out->reserved += c[i].reserved;
        out->active += c[i].active;
        if (c[i].last_reserve_ms > out->last_reserve_ms)
            out->last_reserve_ms = c[i].last_reserve_ms;
    }
}

static void take_pool(struct orbit_fleet *f, uint8_t kind, struct top_sample *s)
{
    static struct orbit_pool_key_info keys[TOP_ROWS];
    struct orbit_pool *p;
    if (orbit_pool_open_existing(f, kind, &p) < 0)
        return;
    ssize_t n = orbit_pool_keys(p, keys, TOP_ROWS);
    size_t got = n < 0 ? 0 : (size_t)n < TOP_ROWS ? (size_t)n : TOP_ROWS;
    s->keys_total += n < 0 ? 0 : (size_t)n;
    for (size_t i = 0; i < got && s->n_keys < TOP_ROWS; i++)
        take_key(p, kind, &keys[i], &s->keys[s->n_keys++]);
    orbit_pool_close(p);
}
#endif

#ifdef ORBIT_WITH_STREAM
static void take_streams(struct orbit_fleet *f, uint8_t kind, struct top_sample *s)
{
    static struct orbit_stream_info si[TOP_ROWS];
    struct orbit_streams *st;
    struct orbit_stream_spec spec;
    if (orbit_streams_open_existing(f, kind, &st) < 0)
        return;
    orbit_streams_spec(st, &spec);
    ssize_t n = orbit_streams_list(st, si, TOP_ROWS);
    size_t got = n < 0 ? 0 : (size_t)n < TOP_ROWS ? (size_t)n : TOP_ROWS;
    s->streams_total += n < 0 ? 0 : (size_t)n;
    for (size_t i = 0; i < got && s->n_streams < TOP_ROWS; i++)
        s->streams[s->n_streams++] = (struct top_stream){ .kind = kind, .ring = spec.buffer_bytes, .info = si[i] };
    orbit_streams_close(st);
}
#endif

#ifdef ORBIT_WITH_ADMISSION
static void take_domains(struct orbit_fleet *f, uint8_t kind, struct top_sample *s)
{
    static struct orbit_domain_info d[TOP_ROWS];
    struct orbit_admission *a;
    if (orbit_admission_open_existing(f, kind, &a) < 0)
        return;
    ssize_t n = orbit_admission_domains(a, d, TOP_ROWS);
    size_t got = n < 0 ? 0 : (size_t)n < TOP_ROWS ? (size_t)n : TOP_ROWS;
    s->domains_total += n < 0 ? 0 : (size_t)n;
    for (size_t i = 0; i < got && s->n_domains < TOP_ROWS; i++)
        s->domains[s->n_domains++] = (struct top_domain){ .kind = kind, .domain = d[i].domain,
                                                          .capacity = d[i].capacity, .used = d[i].used };
    orbit_admission_close(a);
}
#endif

/* Gauges come from the tables themselves, through their inspection calls. */
static void take_gauges(struct orbit_fleet *f, struct top_sample *s)
{
    for (size_t i = 0; i < s->n_tables; i++) {
        const struct top_table *t = &s->t[i];
        if (!t->built)
            continue;
#ifdef ORBIT_WITH_POOL
        if (strcmp(t->name, "pool") == 0)
            take_pool(f, t->kind, s);
#endif
#ifdef ORBIT_WITH_STREAM
        if (strcmp(t->name, "streams") == 0)
            take_streams(f, t->kind, s);
#endif
#ifdef ORBIT_WITH_ADMISSION
        if (strcmp(t->name, "admission") == 0)
            take_domains(f, t->kind, s);
#endif
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int top_sample_take(struct orbit_fleet *f, struct top_sample *s)
{
    memset(s, 0, sizeof *s);
    s->mono_ns = mono_ns();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->wall = ts.tv_sec;
    s->wall_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    s->capacity = orbit_fleet_capacity(f);
    int rc = take_tables(f, s);
    if (rc == 0)
        rc = take_nodes(f, s);
    if (rc < 0)
        return rc;
    take_gauges(f, s);
    s->deaths_rc = orbit_fleet_death_counters(f, &s->deaths);
    ssize_t g = orbit_fleet_generations(orbit_fleet_name(f), s->generations, TOP_GENERATIONS);
    s->n_generations = g < 0 ? 0 : (size_t)g < TOP_GENERATIONS ? (size_t)g : TOP_GENERATIONS;
    return 0;
}
