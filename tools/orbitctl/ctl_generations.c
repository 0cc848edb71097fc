/* SPDX-License-Identifier: MIT */
/*
 * Generations as orbitctl shows them: a fleet name holds one or more
 * (orbit/fleet.h); ls lists each with its version, show and top say which one
 * they read and list the others beside it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "ctl_generations.h"
#include "tool.h"

void ctl_version_text(uint32_t v, char *buf, size_t len)
{
    if (v)
        snprintf(buf, len, "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
    else
        snprintf(buf, len, "?");
}

ssize_t ctl_generations(const char *name, struct orbit_generation_info *out, size_t max)
{
    ssize_t n = orbit_fleet_generations(name, out, max);
    return n < 0 ? n : (size_t)n < max ? n : (ssize_t)max;
}

const struct orbit_generation_info *ctl_generation_of(const struct orbit_generation_info *gi, ssize_t n,
                                                      const char *name)
{
    for (ssize_t i = 0; i < n; i++)
        if (strcmp(gi[i].name, name) == 0)
            return &gi[i];
    return NULL;
}

const char *ctl_generation_to_read(const char *name, char out[ORBIT_FLEET_NAME_MAX + 1])
{
    struct orbit_generation_info gi[CTL_GENERATIONS_MAX];
    ssize_t n = strchr(name, '@') ? 0 : ctl_generations(name, gi, CTL_GENERATIONS_MAX);
    const struct orbit_generation_info *pick = n > 0 && gi[0].generation == 1 && gi[0].readable ? &gi[0] : NULL;
    for (ssize_t i = n; !pick && i-- > 0;)
        if (gi[i].readable)
            pick = &gi[i];   /* the newest this orbitctl reads */
    snprintf(out, ORBIT_FLEET_NAME_MAX + 1, "%s", pick ? pick->name : name);
    return out;
}

/* "orbit 0.2.0" for one of our layouts; and what differs for another release's. */
static void describe(const struct orbit_generation_info *g, char *buf, size_t len)
{
    char v[32] = "";
    if (g->library_version)
        ctl_version_text(g->library_version, v, sizeof v);
    int n = snprintf(buf, len, "%s%s", *v ? "orbit " : "", v);
    if (g->readable || n < 0 || (size_t)n >= len)
        return;
    unsigned l = 0;
    while (l < ORBIT_LAYOUTS_MAX && g->layouts[l] == orbit_layout_version(l))
        l++;
    l = l < ORBIT_LAYOUTS_MAX ? l : ORBIT_LAYOUT_FLEET;
    snprintf(buf + n, len - (size_t)n, "%s%s layout %u: another release's layouts", n ? ", " : "",
             orbit_layout_name(l), g->layouts[l]);
}

void ctl_generation_line(FILE *out, const struct orbit_generation_info *g)
{
    char d[128];
    describe(g, d, sizeof d);
    fprintf(out, "generation %u%s%s", g->generation, *d ? ", " : "", d);
}

void ctl_generations_text(FILE *out, const char *name)
{
    struct orbit_generation_info gi[CTL_GENERATIONS_MAX];
    ssize_t n = ctl_generations(name, gi, CTL_GENERATIONS_MAX);
    if (n < 2)
        return;
    fprintf(out, "generations of this fleet (%zd):\n  %4s  %-*s %5s  %s\n", n, "GEN",
            (int)strlen(gi[n - 1].name) + 2, "NAME", "LIVE", "VERSION");
    for (ssize_t i = 0; i < n; i++) {
        char d[128], live[16];
        describe(&gi[i], d, sizeof d);
        if (gi[i].live_members >= 0)
            snprintf(live, sizeof live, "%d", gi[i].live_members);
        else
            snprintf(live, sizeof live, "?");
        fprintf(out, "  %4u  %-*s %5s  %s\n", gi[i].generation, (int)strlen(gi[n - 1].name) + 2, gi[i].name, live, d);
    }
}

void ctl_generation_json(FILE *out, const struct orbit_generation_info *g)
{
    char v[32];
    ctl_version_text(g->library_version, v, sizeof v);
    fprintf(out, "{\"generation\":%u,\"name\":", g->generation);
    tool_json_str(out, g->name);
    fprintf(out, ",\"readable\":%s,\"version\":", g->readable ? "true" : "false");
    if (g->library_version)
        tool_json_str(out, v);
    else
        fputs("null", out);
    fprintf(out, ",\"live_members\":");
    if (g->live_members >= 0)
        fprintf(out, "%d", g->live_members);
    else
        fputs("null", out);
    fprintf(out, ",\"layouts\":{");
    for (unsigned l = 0, first = 1; l < ORBIT_LAYOUTS_MAX; l++) {
        if (!g->layouts[l] || !strcmp(orbit_layout_name(l), "unknown"))
            continue;
        fprintf(out, "%s\"%s\":%u", first ? "" : ",", orbit_layout_name(l), g->layouts[l]);
        first = 0;
    }
    fputs("}}", out);
}

void ctl_generations_json(FILE *out, const char *name)
{
    struct orbit_generation_info gi[CTL_GENERATIONS_MAX];
    ssize_t n = ctl_generations(name, gi, CTL_GENERATIONS_MAX);
    fputs("\"generations\":[", out);
    for (ssize_t i = 0; i < n; i++) {
        if (i)
            fputc(',', out);
        ctl_generation_json(out, &gi[i]);
    }
    fputc(']', out);
}
