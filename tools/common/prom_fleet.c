/* SPDX-License-Identifier: MIT */
/* One fleet's nodes, death reports and table counters as Prometheus metrics (prom_fleet.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/orbit.h>
#include "observe.h"
#include "prom_fleet.h"

#define TABLES_MAX 64
#define NAME_MAX_LEN 128
#define FLEETS_MAX 1024

/* [a-z0-9_] only: a table type name as a metric name part ("unknown" types are skipped before). */
static void name_part(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        out[n++] = (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ? *s
                   : (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : '_';
    out[n] = '\0';
}

/*
 * orbit_<table>[_node]_<counter>_total, the unit last: "bytes_written" is
 * "written_bytes" (base units at the end, before _total, as Prometheus names
 * go); a counter named after its table loses the repeat.
 */
static void counter_metric(char *out, size_t cap, const char *type, unsigned index, const char *counter,
                           bool per_node)
{
    char t[32], c[64];
    name_part(t, sizeof t, index < PROM_COMMON_COUNTERS ? "table" : type);
    size_t tl = strlen(t);
    if (strncmp(counter, t, tl) == 0 && counter[tl] == '_')
        counter += tl + 1;   /* streams' "streams_created": orbit_streams_created_total */
    if (strncmp(counter, "bytes_", 6) == 0) {
        char rest[48];
        name_part(rest, sizeof rest, counter + 6);
        snprintf(c, sizeof c, "%s_bytes", rest);
    } else {
        name_part(c, sizeof c, counter);
    }
    snprintf(out, cap, "orbit_%s_%s%s_total", t, per_node ? "node_" : "", c);
}

static void counter_help(char *out, size_t cap, const char *help, bool per_node)
{
    snprintf(out, cap, "%s%s", help, per_node ? " Per node: its lives not yet ended (their counts move into the "
                                                "fleet's total when the death or leave is reported)." : "");
}

/* Every counter of one table, for node (ORBIT_NODE_NONE: the fleet's totals). */
static void table_counters(struct prom *p, struct orbit_fleet *f, const struct orbit_table_info *t, uint16_t node,
                           const struct prom_labels *l, unsigned *errors)
{
    struct orbit_counters c;
    if (orbit_fleet_counters(f, t->kind, node, &c) < 0) {
        (*errors)++;
        return;
    }
    bool per_node = node != ORBIT_NODE_NONE;
    for (unsigned i = 0; i < ORBIT_COUNTERS_MAX; i++) {
        const char *name = orbit_counter_name(t->type, i), *help = orbit_counter_help(t->type, i);
        if (!name)
            break;
        char metric[NAME_MAX_LEN], text[512];
        counter_metric(metric, sizeof metric, t->name, i, name, per_node);
        counter_help(text, sizeof text, help ? help : name, per_node);
        prom_u64(p, metric, PROM_COUNTER, text, "", l, c.value[i]);
    }
}

static const char *node_state(const struct orbit_node_info *n)
{
    return n->state == ORBIT_NODE_JOINING ? "joining" : n->alive ? "live" : "dead";
}

/* Claimed nodes: counts by state, each node's pid and liveness. */
static void fleet_nodes(struct prom *p, struct orbit_fleet *f, const struct prom_labels *fl,
                        const struct orbit_node_info *nodes, size_t n)
{
    uint64_t by_state[3] = { 0 };   /* live, joining, dead */
    for (size_t i = 0; i < n; i++) {
        const char *s = node_state(&nodes[i]);
        by_state[s[0] == 'l' ? 0 : s[0] == 'j' ? 1 : 2]++;
        char node[8];
        snprintf(node, sizeof node, "%u", nodes[i].node);
        struct prom_labels nl = prom_with(fl, "node", node);
        prom_u64(p, "orbit_fleet_node_up", PROM_GAUGE, "1 while the node's member process is alive, 0 once it "
                 "died and is not reported yet (claimed nodes only).", "", &nl, nodes[i].alive ? 1 : 0);
        prom_u64(p, "orbit_fleet_node_pid", PROM_GAUGE, "The pid of the node's member, in its own pid namespace.",
                 "", &nl, nodes[i].pid > 0 ? (uint64_t)nodes[i].pid : 0);
    }
    static const char *const states[3] = { "live", "joining", "dead" };
    for (unsigned s = 0; s < 3; s++) {
        struct prom_labels sl = prom_with(fl, "state", states[s]);
        prom_u64(p, "orbit_fleet_nodes", PROM_GAUGE, "Claimed nodes by state: live (alive), joining, dead "
                 "(its process is gone and no death report has freed it yet).", "", &sl, by_state[s]);
    }
    prom_u64(p, "orbit_fleet_live_members", PROM_GAUGE, "Members whose process is alive.", "", fl, by_state[0]);
    prom_u64(p, "orbit_fleet_capacity_nodes", PROM_GAUGE, "Nodes the fleet has room for.", "", fl,
             orbit_fleet_capacity(f));
}

/* Death reports and leaves, and the reclaim latency histogram (seconds). */
static void fleet_deaths(struct prom *p, struct orbit_fleet *f, const struct prom_labels *fl, unsigned *errors)
{
    struct orbit_death_counters d;
    if (orbit_fleet_death_counters(f, &d) < 0) {
        (*errors)++;
        return;
    }
    prom_u64(p, "orbit_fleet_deaths_reported_total", PROM_COUNTER, "Member lives ended by a death report "
             "(orbit-reaper, orbitctl reap or node-dead, orbit_fleet_reap).", "", fl, d.deaths_reported);
    prom_u64(p, "orbit_fleet_leaves_total", PROM_COUNTER, "Member lives ended by orbit_fleet_leave.", "", fl,
             d.leaves);
    static const char help[] = "Time a death report took to give back the dead life's share of every table.";
    for (unsigned b = 0; b < ORBIT_RECLAIM_BUCKETS; b++) {
        char le[32];
        if (d.reclaim_bound_ns[b] == UINT64_MAX)
            snprintf(le, sizeof le, "+Inf");
        else
            snprintf(le, sizeof le, "%.9g", (double)d.reclaim_bound_ns[b] / 1e9);
        struct prom_labels bl = prom_with(fl, "le", le);
        prom_u64(p, "orbit_fleet_reclaim_seconds", PROM_HISTOGRAM, help, "_bucket", &bl, d.reclaim_le[b]);
    }
    prom_f64(p, "orbit_fleet_reclaim_seconds", PROM_HISTOGRAM, help, "_sum", fl, (double)d.reclaim_ns_sum / 1e9);
    prom_u64(p, "orbit_fleet_reclaim_seconds", PROM_HISTOGRAM, help, "_count", fl, d.deaths_reported);
}

/* Each built table: counters (totals, then per claimed node) and gauges. */
static void fleet_tables(struct prom *p, struct orbit_fleet *f, const struct prom_labels *fl,
                         const struct orbit_node_info *nodes, size_t n_nodes, unsigned *errors)
{
    struct orbit_table_info t[TABLES_MAX];
    ssize_t n = orbit_fleet_tables(f, t, TABLES_MAX);
    if (n < 0) {
        (*errors)++;
        return;
    }
    for (ssize_t i = 0; i < n && i < TABLES_MAX; i++) {
        if (!t[i].built || !orbit_counter_name(t[i].type, 0))
            continue;   /* a table type this build lacks: nothing to read it with */
        char kind[8];
        snprintf(kind, sizeof kind, "%u", t[i].kind);
        struct prom_labels tl = prom_with(fl, "table", t[i].name);
        tl = prom_with(&tl, "kind", kind);
        table_counters(p, f, &t[i], ORBIT_NODE_NONE, &tl, errors);
        for (size_t k = 0; k < n_nodes; k++) {
            char node[8];
            snprintf(node, sizeof node, "%u", nodes[k].node);
            struct prom_labels nl = prom_with(&tl, "node", node);
            table_counters(p, f, &t[i], nodes[k].node, &nl, errors);
        }
        prom_table_gauges(p, f, &t[i], &tl, errors);
    }
}

/* A generation's name, "web" or "web@2": its fleet ("web") and its number as text ("1", "2"). */
static void split_generation(const char *name, char *base, size_t blen, char *gen, size_t glen)
{
    const char *at = strchr(name, '@');
    int n = at ? (int)(at - name) : (int)strlen(name);
    snprintf(base, blen, "%.*s", n, name);
    snprintf(gen, glen, "%s", at ? at + 1 : "1");
}

/*
 * What any release reads of a generation, its layouts this reader's or not: the
 * version that started it and whether this reader reads it; and, for one of other
 * layouts, its live members (counted by their kernel-held locks).
 */
static void fleet_generation(struct prom *p, const char *name, const struct prom_labels *fl, bool unreadable)
{
    struct orbit_generation_info gi[64];
    ssize_t n = orbit_fleet_generations(name, gi, 64);
    for (ssize_t i = 0; i < n && i < 64; i++) {
        if (strcmp(gi[i].name, name) != 0)
            continue;
        char version[32] = "";
        if (gi[i].library_version)
            snprintf(version, sizeof version, "%u.%u.%u", gi[i].library_version >> 16,
                     (gi[i].library_version >> 8) & 0xff, gi[i].library_version & 0xff);
        struct prom_labels il = prom_with(fl, "version", version);
        il = prom_with(&il, "readable", gi[i].readable ? "true" : "false");
        prom_u64(p, "orbit_fleet_generation_info", PROM_GAUGE, "1 for each generation of a fleet: the orbit "
                 "version that started it (empty: not recorded) and whether this reader's library reads its "
                 "layouts.", "", &il, 1);
        if (unreadable && gi[i].live_members >= 0)
            prom_u64(p, "orbit_fleet_live_members", PROM_GAUGE, "Members whose process is alive.", "", fl,
                     (uint64_t)gi[i].live_members);
    }
}

static const char up_help[] = "1 when the fleet's segments could be opened and read, else 0.";

void prom_fleet_down(struct prom *p, const char *fleet)
{
    char base[ORBIT_FLEET_NAME_MAX + 1], gen[16];
    split_generation(fleet, base, sizeof base, gen, sizeof gen);
    struct prom_labels fl = prom_with(NULL, "fleet", base);
    fl = prom_with(&fl, "generation", gen);
    prom_u64(p, "orbit_fleet_up", PROM_GAUGE, up_help, "", &fl, 0);
}

int prom_fleet(struct prom *p, const char *fleet)
{
    char base[ORBIT_FLEET_NAME_MAX + 1], gen[16];
    split_generation(fleet, base, sizeof base, gen, sizeof gen);
    struct prom_labels fl = prom_with(NULL, "fleet", base);
    fl = prom_with(&fl, "generation", gen);
    struct orbit_fleet *f;
    int rc = tool_observe(fleet, 0, &f);   /* one still being created: down in this scrape, read in the next */
    fleet_generation(p, fleet, &fl, rc == -ORBIT_EGEOMETRY);
    if (rc < 0) {
        prom_u64(p, "orbit_fleet_up", PROM_GAUGE, up_help, "", &fl, 0);
        return rc == -ORBIT_EGEOMETRY ? 0 : rc;   /* another release's generation: there, not ours to read */
    }
    prom_u64(p, "orbit_fleet_up", PROM_GAUGE, up_help, "", &fl, 1);
    unsigned errors = 0;
    struct orbit_node_info *nodes = calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof *nodes);
    ssize_t n = nodes ? orbit_fleet_nodes(f, nodes, ORBIT_FLEET_CAPACITY_MAX) : -ENOMEM;
    if (n < 0)
        errors++;
    size_t n_nodes = n < 0 ? 0 : (size_t)n < ORBIT_FLEET_CAPACITY_MAX ? (size_t)n : ORBIT_FLEET_CAPACITY_MAX;
    if (n >= 0)
        fleet_nodes(p, f, &fl, nodes, n_nodes);
    fleet_deaths(p, f, &fl, &errors);
    fleet_tables(p, f, &fl, nodes, n_nodes, &errors);
    prom_u64(p, "orbit_fleet_read_errors", PROM_GAUGE, "Reads of this fleet that failed during this scrape "
             "(their series are missing from it).", "", &fl, errors);
    free(nodes);
    orbit_fleet_leave(f);
    return 0;
}

/* prom_fleet, and its failure named on stderr: 1 when it failed. */
static int one_fleet(struct prom *p, const char *name, const char *tool)
{
    int rc = prom_fleet(p, name);
    if (rc < 0 && tool)
        fprintf(stderr, "%s: %s: %s\n", tool, name, rc == -ENOENT ? "no such fleet" : orbit_strerror(rc));
    return rc < 0;
}

/* Append name's generations to v (a generation's name, or one listing none: the name itself). */
static size_t add_generations(const char *name, prom_name *v, size_t n, size_t max)
{
    struct orbit_generation_info gi[64];
    ssize_t g = strchr(name, '@') ? 0 : orbit_fleet_generations(name, gi, 64);
    for (ssize_t k = 0; k < g && k < 64 && n < max; k++)
        snprintf(v[n++], sizeof v[0], "%s", gi[k].name);
    if (g <= 0 && n < max)
        snprintf(v[n++], sizeof v[0], "%s", name);
    return n;
}

prom_name *prom_fleet_names(const char *const *names, size_t n, ssize_t *found)
{
    size_t max = names ? n * 64 : FLEETS_MAX;
    prom_name *v = calloc(max ? max : 1, sizeof *v);
    if (!v) {
        *found = -ENOMEM;
        return NULL;
    }
    if (!names) {
        *found = orbit_fleet_list(v, FLEETS_MAX);   /* every generation of every fleet */
        if (*found > FLEETS_MAX)
            *found = FLEETS_MAX;
        return v;
    }
    size_t got = 0;
    for (size_t i = 0; i < n; i++)
        got = add_generations(names[i], v, got, max);
    *found = (ssize_t)got;
    return v;
}

int prom_fleets(struct prom *p, const char *const *names, size_t n, const char *tool)
{
    ssize_t found;
    prom_name *v = prom_fleet_names(names, n, &found);
    int failed = 0;
    for (ssize_t i = 0; i < found; i++)
        failed += one_fleet(p, v[i], tool);
    free(v);
    return found < 0 ? (int)found : failed;
}
