/* SPDX-License-Identifier: MIT */
/*
 * orbitctl unlink: remove a fleet nobody lives in; one with a live or joining
 * member only with --force, and then say whom it orphaned (they keep running
 * on segments no later joiner finds, and the name starts a new fleet).
 */
#include <errno.h>
#include <string.h>
#include <orbit/orbit.h>
#include "ctl.h"
#include "orbitctl.h"
#include "tool.h"

/* A member unlinking leaves behind: its process runs (alive), or it is being claimed (joining). */
static bool would_orphan(const struct orbit_node_info *ni)
{
    const char *word = ctl_node_state(ni);
    return strcmp(word, "alive") == 0 || strcmp(word, "joining") == 0;
}

static size_t count_orphans(const struct ctl_ctx *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        n += would_orphan(&c->nodes[i]);
    return n;
}

/* "node 1 pid 42 (alive), node 2 pid 43 (joining)" on out. */
static void text_orphans(const struct ctl_ctx *c, FILE *out)
{
    const char *sep = "";
    for (size_t i = 0; i < c->n_nodes; i++) {
        const struct orbit_node_info *ni = &c->nodes[i];
        if (!would_orphan(ni))
            continue;
        fprintf(out, "%snode %u pid %d (%s)", sep, ni->node, (int)ni->pid, ctl_node_state(ni));
        sep = ", ";
    }
}

static void json_result(const struct ctl_ctx *c, const char *name, const char *action, bool forced)
{
    printf("{\"name\":");
    tool_json_str(stdout, name);
    printf(",\"action\":\"%s\",\"forced\":%s,\"members\":[", action, forced ? "true" : "false");
    bool first = true;
    for (size_t i = 0; c->f && i < c->n_nodes; i++) {
        if (!would_orphan(&c->nodes[i]))
            continue;
        printf("%s", first ? "" : ",");
        ctl_json_member(c, c->nodes[i].node, c->nodes[i].incarnation, false);
        first = false;
    }
    printf("]}\n");
}

/* Refused: one line on stderr (and the JSON result on stdout); exit status 1. */
static int refuse(const struct ctl_ctx *c, const char *name, bool json, size_t n, const char *why)
{
    if (json)
        json_result(c, name, "refused", false);
    fprintf(stderr, "orbitctl: unlink: %s ", name);
    if (n) {
        fprintf(stderr, "has %zu live or joining member%s: ", n, n == 1 ? "" : "s");
        text_orphans(c, stderr);
    } else {
        fprintf(stderr, "%s", why);
    }
    fprintf(stderr, "; refused: stop the members, or pass --force to remove the fleet under them\n");
    return 1;
}

static void report_removed(const struct ctl_ctx *c, const char *name, bool json, bool forced, size_t n)
{
    if (json) {
        json_result(c, name, "removed", forced);
        return;
    }
    printf("removed %s", name);
    if (n) {
        printf("; orphaned %zu member%s, still running on segments no later joiner finds: ", n,
               n == 1 ? "" : "s");
        text_orphans(c, stdout);
    }
    printf("\n");
}

int ctl_cmd_unlink(const char *name, bool force, bool json)
{
    struct orbit_fleet *f = NULL;
    struct ctl_ctx c = { .out = stdout, .json = json };
    int rc = orbit_fleet_observe(name, &f);
    if (rc == 0 && (rc = ctl_ctx_open(&c, f, json, stdout)) < 0) {
        orbit_fleet_leave(f);
        f = NULL;
    }
    /* No fleet segment: no member can live (their locks are on it); leftover tables go. */
    bool unreadable = rc < 0 && rc != -ENOENT;
    size_t n = f ? count_orphans(&c) : 0;
    if (!force && (unreadable || n)) {
        char why[160];
        snprintf(why, sizeof why, "cannot be read (%s), so its members cannot be counted", orbit_strerror(rc));
        int out = refuse(&c, name, json, n, why);
        ctl_ctx_close(&c);
        orbit_fleet_leave(f);
        return out;
    }
    /* Not forced: the collector's gate check, so a joiner that arrived since is not unlinked under. */
    rc = force || !f ? orbit_fleet_unlink(name) : orbit_fleet_collect(name);
    int out = 0;
    if (rc == -ORBIT_EBUSY)
        out = refuse(&c, name, json, 0, "has a member that joined just now");
    else if (rc < 0) {
        fprintf(stderr, "orbitctl: unlink: %s: %s\n", name, rc == -ENOENT ? "no such fleet" : orbit_strerror(rc));
        out = 1;
    } else {
        report_removed(&c, name, json, force, n);
    }
    ctl_ctx_close(&c);
    orbit_fleet_leave(f);
    return out;
}
