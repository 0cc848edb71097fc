/* SPDX-License-Identifier: MIT */
/* orbitctl — inspect and repair orbit fleets on this host. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <orbit/orbit.h>
#include "cli.h"
#include "ctl.h"
#include "ctl_generations.h"
#include "ctl_top.h"
#include "orbitctl.h"
#include "ctl_metrics.h"
#include "observe.h"

#define TOOL "orbitctl"

static const char usage[] =
"usage: orbitctl [--json] COMMAND [ARGS]\n"
"\n"
"FLEET is a fleet's name, or one generation's: a rolling upgrade across a layout\n"
"change runs a fleet's generations side by side (web, web@2). ls lists each; show\n"
"and top read generation 1, or the newest this orbitctl reads when it reads not\n"
"that one, and list the others; gc takes every generation of a fleet named.\n"
"\n"
"  ls                               fleets on this host, each generation: its version, live\n"
"                                   members, resident bytes, segments (backing, mapped,\n"
"                                   resident), and the room left on each mount\n"
"      orbitctl ls\n"
"  show FLEET                       nodes (state, pid, what each holds) and every table: who\n"
"                                   holds each reservation, lease, stream side, claim and\n"
"                                   chunk, for how long; ring and lane fill; who waits\n"
"      orbitctl --json show web | jq '.nodes[] | select(.state == \"dead\")'\n"
"  node-dead FLEET NODE INCARNATION report a death: reclaim that incarnation's share and\n"
"                                   print what came back, per table\n"
"      orbitctl node-dead web 3 9223372450576735121\n"
"  reap FLEET                       one liveness sweep: report every dead node and print\n"
"                                   what each gave back, per table\n"
"      orbitctl reap web\n"
"  top FLEET [--interval S] [--count N] [--sort units|recent]\n"
"                                   a live view: rates per table and node, busiest keys,\n"
"                                   streams, domains, waiters and deaths (q quits)\n"
"      orbitctl top web --count 3 | less\n"
"  reset FLEET [--force]            start a new epoch on every table; refused while a member\n"
"                                   is alive unless --force\n"
"      orbitctl reset web\n"
"  unlink FLEET [--force]           remove every segment of the fleet; refused while a member\n"
"                                   is alive or joining unless --force (which names the\n"
"                                   members it orphans)\n"
"      orbitctl unlink web\n"
"  gc [FLEET...] [--dry-run]        remove every fleet (or the named ones) with no live\n"
"                                   member; --dry-run lists what would go. A fleet with a\n"
"                                   live or joining member is never touched\n"
"      orbitctl gc --dry-run\n"
"  metrics [FLEET...]               every counter and gauge of the fleets (default: all on\n"
"                                   this host) in the Prometheus text format 0.0.4\n"
"      orbitctl metrics web | promtool check metrics\n"
"\n"
"  --json         machine-readable output for ls, show, reap, node-dead, gc and unlink: 64-bit\n"
"                 values are strings, others numbers (docs/orbitctl-show.schema.json)\n"
"  -h, --help     this text\n"
"  -V, --version  print the version\n"
"\n"
"Exit status: 0 on success, 1 on an error (printed on stderr), 2 on a bad argument.\n";

static int fail(const char *what, int rc)
{
    /* ENOENT doubles as ORBIT_ENOTRESERVED; for a fleet name it means the fleet is not there. */
    const char *why = *orbit_last_error() ? orbit_last_error() : NULL;
    fprintf(stderr, "orbitctl: %s: %s%s%s%s\n", what, rc == -ENOENT ? "no such fleet" : orbit_strerror(rc),
            why ? " (" : "", why ? why : "", why ? ")" : "");
    return 1;
}

/* The show function per table name, for the modules built in; the names come from liborbit. */
typedef int (*show_fn)(const struct ctl_ctx *c, uint8_t kind);
static const struct { const char *name; show_fn show; } shows[] = {
#ifdef ORBIT_WITH_POOL
    { "pool", ctl_section_pool },
#endif
#ifdef ORBIT_WITH_STREAM
    { "streams", ctl_section_stream },
#endif
#ifdef ORBIT_WITH_ADMISSION
    { "admission", ctl_section_admission },
#endif
#ifdef ORBIT_WITH_EXCHANGE
    { "arena", ctl_section_exchange },
#endif
    { NULL, NULL },
};

static show_fn show_of(const char *name)
{
    for (size_t i = 0; shows[i].name; i++)
        if (strcmp(shows[i].name, name) == 0)
            return shows[i].show;
    return NULL;
}

#define TABLES_MAX 64
#define FLEET_KIND 255   /* orbit.<fleet>.255 holds the node records */

/* The fleet's tables by kind (from orbit_fleet_tables); "fleet" for the fleet segment. */
struct kinds { ssize_t n; struct orbit_table_info t[TABLES_MAX]; };

static void kinds_load(const char *fleet, struct kinds *k)
{
    struct orbit_fleet *f;
    k->n = 0;
    if (tool_observe(fleet, 0, &f) == 0) {   /* one still being created: its kinds unnamed */
        k->n = orbit_fleet_tables(f, k->t, TABLES_MAX);
        orbit_fleet_leave(f);
    }
}

static const char *kind_name(const struct kinds *k, uint8_t kind)
{
    for (ssize_t i = 0; i < k->n && i < TABLES_MAX; i++)
        if (k->t[i].kind == kind)
            return k->t[i].name;
    return kind == FLEET_KIND ? "fleet" : "unknown";
}

/* The fleet's segments, one line (or object) each; their directories noted in room. */
static void print_segments(const char *fleet, bool json, struct ctl_room *room)
{
    struct orbit_segment_info segs[64];
    struct kinds k;
    kinds_load(fleet, &k);
    ssize_t n = orbit_fleet_segments(fleet, segs, 64);
    for (ssize_t i = 0; room && i < n && i < 64; i++)
        ctl_room_note(room, segs[i].path);
    if (json)
        printf("\"segments\":[");
    for (ssize_t i = 0; i < n && i < 64; i++) {
        const struct orbit_segment_info *s = &segs[i];
        if (json) {
            printf("%s{\"kind\":%u,\"type\":\"%s\",\"backing\":\"%s\",\"bytes\":\"%" PRIu64 "\""
                   ",\"resident\":\"%" PRIu64 "\",\"epoch\":\"%" PRIu64 "\",\"path\":", i ? "," : "",
                   s->kind, kind_name(&k, s->kind), orbit_backing_name(s->backing),
                   s->size, s->resident, s->epoch);
            tool_json_str(stdout, s->path);
            printf("}");
        } else {
            printf("  %-10s kind %3u  %-8s %10" PRIu64 " bytes  %10" PRIu64 " resident  epoch %" PRIu64
                   "  %s\n", kind_name(&k, s->kind), s->kind, orbit_backing_name(s->backing), s->size,
                   s->resident, s->epoch, s->path);
        }
    }
    if (json)
        printf("]");
}

/* Bytes the fleet's segments hold now (resident): what it needs of its mounts. */
static uint64_t resident_of(const char *fleet)
{
    struct orbit_segment_info segs[64];
    ssize_t n = orbit_fleet_segments(fleet, segs, 64);
    uint64_t sum = 0;
    for (ssize_t i = 0; i < n && i < 64; i++)
        sum += segs[i].resident;
    return sum;
}

static int cmd_ls(bool json)
{
    char names[256][ORBIT_FLEET_NAME_MAX + 1];
    ssize_t n = orbit_fleet_list(names, 256);
    if (n < 0)
        return fail("ls", (int)n);
    struct ctl_room room = { 0 };
    ctl_room_add(&room, "/dev/shm");   /* always: where a fleet without huge pages goes */
    if (json)
        printf("{\"fleets\":[");
    for (ssize_t i = 0; i < n && i < 256; i++) {
        ssize_t live = tool_live_members(names[i], 0);   /* one still being created: said so, not waited for */
        struct orbit_generation_info gi[CTL_GENERATIONS_MAX];
        const struct orbit_generation_info *g = ctl_generation_of(gi, ctl_generations(names[i], gi,
                                                                  CTL_GENERATIONS_MAX), names[i]);
        uint64_t resident = resident_of(names[i]);
        if (json) {
            printf("%s{\"name\":", i ? "," : "");
            tool_json_str(stdout, names[i]);
            if (g) {
                printf(",\"generation\":");
                ctl_generation_json(stdout, g);
            }
            if (live >= 0)
                printf(",\"live_members\":%zd,", live);
            else
                printf(",\"live_members\":null,\"error\":\"%s\",", tool_open_error((int)live));
            printf("\"resident\":\"%" PRIu64 "\",", resident);
            print_segments(names[i], true, &room);
            printf("}");
        } else {
            printf("%s  ", names[i]);
            if (g)
                ctl_generation_line(stdout, g);
            if (live >= 0)
                printf("  (%zd live member%s, %.1f MiB resident)\n", live, live == 1 ? "" : "s",
                       (double)resident / 1048576.0);
            else
                printf("  (live members unknown: %s)\n", tool_open_error((int)live));
            print_segments(names[i], false, &room);
        }
    }
    if (json) {
        printf("]");
        ctl_room_print(&room, true);
        printf("}\n");
    } else {
        if (n == 0)
            printf("no fleets\n");
        ctl_room_print(&room, false);
    }
    return 0;
}

/* Our pid namespace's inode: a member's pid means something here only if it is the same. */
static uint64_t pid_namespace_self(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static void json_node(const struct ctl_ctx *c, const struct orbit_node_info *ni, uint64_t own_ns, bool first)
{
    struct orbit_reclaim held;
    int rc = orbit_fleet_account(c->f, ni->node, ni->incarnation, &held);
    printf("%s{\"node\":%u,\"state\":\"%s\",\"pid\":%" PRId32 ",\"pid_namespace\":\"%" PRIu64 "\""
           ",\"foreign_pid_namespace\":%s,\"start_time\":\"%" PRIu64 "\",\"incarnation\":\"%" PRIu64 "\""
           ",\"alive\":%s,\"holds\":", first ? "" : ",", ni->node, ctl_node_state(ni), ni->pid,
           ni->pid_namespace, ni->pid_namespace && ni->pid_namespace != own_ns ? "true" : "false",
           ni->start_time, ni->incarnation, ni->alive ? "true" : "false");
    if (rc == 0)
        ctl_json_reclaim(stdout, &held);
    else
        fputs("null", stdout);
    putchar('}');
}

static void text_node(const struct ctl_ctx *c, const struct orbit_node_info *ni, uint64_t own_ns)
{
    struct orbit_reclaim held;
    bool foreign = ni->pid_namespace && ni->pid_namespace != own_ns;
    printf("  node %-5u %-8s pid %-8" PRId32 "%s incarnation %" PRIu64 "\n", ni->node, ctl_node_state(ni), ni->pid,
           foreign ? " (another pid namespace)" : "", ni->incarnation);
    if (orbit_fleet_account(c->f, ni->node, ni->incarnation, &held) == 0 && !ctl_reclaim_empty(&held)) {
        printf("             %s ", ni->alive ? "holds" : "owes back");
        ctl_text_reclaim(stdout, &held);
        putchar('\n');
    }
    if (ni->state == ORBIT_NODE_LIVE && !ni->alive)
        printf("             (its process is gone and its death not reported yet: orbitctl reap %s)\n",
               orbit_fleet_name(c->f));
}

static void print_nodes(const struct ctl_ctx *c)
{
    uint64_t own_ns = pid_namespace_self();
    if (c->json)
        printf("\"nodes\":[");
    else
        printf("nodes (%zu of %u claimed):\n", c->n_nodes, orbit_fleet_capacity(c->f));
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (c->json)
            json_node(c, &c->nodes[i], own_ns, i == 0);
        else
            text_node(c, &c->nodes[i], own_ns);
    }
    if (c->json)
        printf("]");
}

/* Each table section comes from its module's ctl_section_* hook. */
static void print_tables(const struct ctl_ctx *c)
{
    struct orbit_table_info t[TABLES_MAX];
    ssize_t n = orbit_fleet_tables(c->f, t, TABLES_MAX);
    if (c->json)
        printf(",\"tables\":[");
    for (ssize_t i = 0; i < n && i < TABLES_MAX; i++) {
        if (c->json && i)
            putchar(',');
        else if (!c->json)
            printf("%s (kind %u):\n", t[i].name, t[i].kind);
        fflush(stdout);
        show_fn show = show_of(t[i].name);
        int rc = show ? show(c, t[i].kind) : -ORBIT_ENOTSUP;
        if (rc < 0 && c->json)
            printf("{\"type\":\"%s\",\"kind\":%u,\"epoch\":\"%" PRIu64 "\",\"error\":\"%s\"}", t[i].name, t[i].kind,
                   t[i].epoch, tool_open_error(rc));
        else if (rc < 0)
            printf("  (%s)\n", tool_open_error(rc));
    }
    if (c->json)
        printf("]");
}

static int cmd_show(const char *asked, bool json)
{
    struct orbit_fleet *f;
    struct ctl_ctx c;
    char name[ORBIT_FLEET_NAME_MAX + 1];
    ctl_generation_to_read(asked, name);
    struct orbit_generation_info gi[CTL_GENERATIONS_MAX];
    const struct orbit_generation_info *g = ctl_generation_of(gi, ctl_generations(name, gi, CTL_GENERATIONS_MAX),
                                                              name);
    int rc = tool_observe(name, 0, &f);   /* a table being created: its section says so */
    if (rc == -ORBIT_EAGAIN) {
        fprintf(stderr, "orbitctl: %s: being created (its creator has not finished it; not waited for)\n", name);
        return 1;
    }
    if (rc < 0)
        return fail(name, rc);
    if ((rc = ctl_ctx_open(&c, f, json, stdout)) < 0) {
        orbit_fleet_leave(f);
        return fail(name, rc);
    }
    if (json) {
        printf("{\"name\":");
        tool_json_str(stdout, name);
        if (g) {
            printf(",\"generation\":");
            ctl_generation_json(stdout, g);
        }
        printf(",");
        ctl_generations_json(stdout, name);
        printf(",\"capacity\":%u,\"backing\":\"%s\",\"now_ms\":\"%" PRIu64 "\",", orbit_fleet_capacity(f),
               orbit_backing_name(orbit_fleet_backing(f)), c.now_ms);
        print_segments(name, true, NULL);
        printf(",");
        print_nodes(&c);
        print_tables(&c);
        printf("}\n");
    } else {
        printf("fleet %s: capacity %u, backing %s", name, orbit_fleet_capacity(f),
               orbit_backing_name(orbit_fleet_backing(f)));
        if (g) {
            printf(", ");
            ctl_generation_line(stdout, g);
        }
        printf("\n");
        ctl_generations_text(stdout, name);
        print_segments(name, false, NULL);
        print_nodes(&c);
        print_tables(&c);
    }
    ctl_ctx_close(&c);
    orbit_fleet_leave(f);
    return 0;
}

/* Members whose process is alive; prints the first on stderr. */
static ssize_t live_members(struct orbit_fleet *f, const char *name)
{
    struct orbit_node_info *nodes = calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof *nodes);
    ssize_t n = nodes ? orbit_fleet_nodes(f, nodes, ORBIT_FLEET_CAPACITY_MAX) : -ENOMEM, live = 0;
    for (ssize_t i = 0; i < n && i < ORBIT_FLEET_CAPACITY_MAX; i++) {
        if (!nodes[i].alive)
            continue;
        if (live++ == 0)
            fprintf(stderr, "orbitctl: reset: %s has a live member (node %u, pid %d)", name,
                    nodes[i].node, nodes[i].pid);
    }
    free(nodes);
    return n < 0 ? n : live;
}

static int cmd_reset(const char *name, bool force)
{
    struct orbit_fleet *f;
    int rc = orbit_fleet_observe(name, &f);
    if (rc < 0)
        return fail(name, rc);
    ssize_t live = force ? 0 : live_members(f, name);
    if (live != 0) {
        orbit_fleet_leave(f);
        if (live < 0)
            return fail("reset", (int)live);
        fprintf(stderr, "%s: refused (stop the members, or pass --force)\n",
                live > 1 ? " and others" : "");
        return 1;
    }
    rc = orbit_fleet_reset_tables(f);
    struct orbit_table_info t[TABLES_MAX];
    ssize_t n = orbit_fleet_tables(f, t, TABLES_MAX);
    for (ssize_t i = 0; rc >= 0 && i < n && i < TABLES_MAX; i++)
        printf("%s kind %u: %s\n", t[i].name, t[i].kind,
               t[i].built ? "new epoch" : "left alone (not built in)");
    orbit_fleet_leave(f);
    return rc < 0 ? fail("reset", rc) : 0;
}

/* One fleet for gc: 0 removed or kept, 1 an error. */
static int gc_one(const char *name, bool dry_run, bool json, bool *first)
{
    ssize_t live = tool_live_members(name, 0);   /* one still being created: skipped, not waited for */
    int rc = live == 0 && !dry_run ? orbit_fleet_collect(name) : 0;
    const char *what = live < 0 ? "skipped" : live > 0 || rc == -ORBIT_EBUSY ? "kept"
                       : rc < 0 ? "error" : dry_run ? "would remove" : "removed";
    const char *why = live < 0 ? tool_open_error((int)live)
                      : rc < 0 && rc != -ORBIT_EBUSY ? orbit_strerror(rc) : NULL;
    if (json) {
        printf("%s{\"name\":", *first ? "" : ",");
        tool_json_str(stdout, name);
        printf(",\"action\":\"%s\",\"live_members\":%zd", what, live < 0 ? (ssize_t)-1 : live);
        if (why)
            printf(",\"reason\":\"%s\"", why);
        printf("}");
    } else if (live > 0) {
        printf("%-24s kept: %zd live member%s\n", name, live, live == 1 ? "" : "s");
    } else {
        printf("%-24s %s%s%s\n", name, what, why ? ": " : rc == -ORBIT_EBUSY ? ": a member joined" : "",
               why ? why : "");
    }
    *first = false;
    return (live < 0 && live != -ENOENT && live != -ORBIT_EGEOMETRY && live != -ORBIT_EAGAIN) ||
           (rc < 0 && rc != -ORBIT_EBUSY);
}

static int cmd_gc(char **names, int n, bool dry_run, bool json)
{
    static char all[256][ORBIT_FLEET_NAME_MAX + 1];
    char *listed[256];
    if (n == 0) {
        ssize_t found = orbit_fleet_list(all, 256);
        if (found < 0)
            return fail("gc", (int)found);
        for (n = 0; n < found && n < 256; n++)
            listed[n] = all[n];
        names = listed;
    }
    int errors = 0;
    bool first = true;
    if (json)
        printf("{\"dry_run\":%s,\"fleets\":[", dry_run ? "true" : "false");
    for (int i = 0; i < n; i++) {
        errors += gc_one(names[i], dry_run, json, &first);
        struct orbit_generation_info gi[CTL_GENERATIONS_MAX];   /* a fleet named: its later generations too */
        ssize_t g = names == listed || strchr(names[i], '@') ? 0 : ctl_generations(names[i], gi, CTL_GENERATIONS_MAX);
        for (ssize_t k = 0; k < g; k++)
            if (gi[k].generation > 1)
                errors += gc_one(gi[k].name, dry_run, json, &first);
    }
    if (json)
        printf("]}\n");
    else if (n == 0)
        printf("no fleets\n");
    return errors ? 1 : 0;
}

/* Takes a flag out of a[1..]: true when it was there. */
static bool take_flag(char **a, int *left, const char *flag)
{
    for (int i = 1; i < *left; i++)
        if (strcmp(a[i], flag) == 0) {
            memmove(&a[i], &a[i + 1], (size_t)(*left - i - 1) * sizeof *a);
            (*left)--;
            return true;
        }
    return false;
}

/* FLEET arguments per command (ls takes none); -1 for an unknown command. */
static int command_arity(const char *cmd)
{
    static const struct { const char *name; int args; } cmds[] = {
        { "ls", 0 }, { "show", 1 }, { "node-dead", 3 }, { "reap", 1 }, { "reset", 1 }, { "unlink", 1 },
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            return cmds[i].args;
    return -1;
}

/* Bad commands, counts and fleet names exit 2 here, before anything is opened. */
static void check_command(int left, char **a)
{
    if (left == 0)
        cli_usage_error(TOOL, "no command");
    int want = command_arity(a[0]);
    if (want < 0)
        cli_bad(TOOL, "command", a[0], "not one of ls, show, node-dead, reap, reset, unlink, gc, metrics, top");
    if (left - 1 != want) {
        char why[96];
        snprintf(why, sizeof why, "%s takes %s", a[0],
                 want == 0 ? "no argument" : want == 1 ? "FLEET" : "FLEET NODE INCARNATION");
        cli_usage_error(TOOL, why);
    }
    if (want > 0)
        cli_fleet_name(TOOL, "FLEET", a[1]);
}

int main(int argc, char **argv)
{
    bool json = false;
    static const struct option opts[] = { { "json", no_argument, 0, 'j' },
                                          { "help", no_argument, 0, 'h' },
                                          { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:jhV", opts, NULL)) != -1) {
        if (c == 'j') json = true;
        else if (c == 'h') { fputs(usage, stdout); return 0; }
        else if (c == 'V') { cli_version(TOOL); return 0; }
        else cli_getopt_error(TOOL, c, optopt, argv[optind - 1]);
    }
    int left = argc - optind;
    char **a = argv + optind;
    if (take_flag(a, &left, "--json"))   /* --json may also follow the command */
        json = true;
    bool force = left >= 1 && (strcmp(a[0], "reset") == 0 || strcmp(a[0], "unlink") == 0) &&
                 take_flag(a, &left, "--force");
    if (left >= 1 && strcmp(a[0], "metrics") == 0) {
        if (json)
            cli_usage_error(TOOL, "metrics has no --json (its output is the Prometheus text format)");
        for (int i = 1; i < left; i++)
            cli_fleet_name(TOOL, "FLEET", a[i]);
        return ctl_metrics(a + 1, left - 1);
    }
    if (left >= 1 && strcmp(a[0], "gc") == 0) {
        bool dry_run = take_flag(a, &left, "--dry-run");
        for (int i = 1; i < left; i++)
            cli_fleet_name(TOOL, "FLEET", a[i]);
        return cmd_gc(a + 1, left - 1, dry_run, json);
    }
    if (left >= 1 && strcmp(a[0], "top") == 0)
        return ctl_top(left, a, json);
    check_command(left, a);
    if (strcmp(a[0], "ls") == 0) return cmd_ls(json);
    if (strcmp(a[0], "show") == 0) return cmd_show(a[1], json);
    if (strcmp(a[0], "node-dead") == 0) {
        uint64_t node = cli_u64(TOOL, "NODE", a[2], 0, ORBIT_FLEET_CAPACITY_MAX - 1);
        return ctl_cmd_node_dead(a[1], (uint16_t)node, cli_u64(TOOL, "INCARNATION", a[3], 0, UINT64_MAX), json);
    }
    if (strcmp(a[0], "reap") == 0) return ctl_cmd_reap(a[1], json);
    if (strcmp(a[0], "reset") == 0) return cmd_reset(a[1], force);
    return ctl_cmd_unlink(a[1], force, json);
}
