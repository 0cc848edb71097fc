/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay --stats FLEET: the fleet's counters (stats.c), each worker's
 * io_uring features, beside the fleet's live pool and stream tables
 * (orbitctl's own sections).
 */
#include <inttypes.h>
#include <string.h>
#include "cli.h"
#include "modes.h"
#include "relay.h"
#include "tool.h"
#include "loop.h"

static const char *slot_state_name(uint32_t s)
{
    static const char *names[] = { "free", "starting", "running", "exited", "killed" };
    return s < 5 ? names[s] : "?";
}

/* A worker's io_uring features: a JSON object name -> "on", "off" (the kernel
 * or the build refused it), "env" (an ORBIT_RELAY_NO_* variable turned it off)
 * or "opt-in" (off unless its ORBIT_RELAY_* variable asks for it). */
static void print_features_json(const struct relay_worker_stats *w, FILE *out)
{
    uint32_t on = STAT_GET(w, features), off = STAT_GET(w, features_off);
    const char *name;
    unsigned bit;
    fputs(",\"features\":{", out);
    for (unsigned i = 0; (name = loop_feature_name(i, &bit)); i++)
        fprintf(out, "%s\"%s\":\"%s\"", i ? "," : "", name, on & bit ? "on" : off & bit ? "env" : bit & WF_OPT_IN ? "opt-in" : "off");
    fputc('}', out);
}

static void print_features_text(const struct relay_worker_stats *w, int slot, FILE *out)
{
    uint32_t on = STAT_GET(w, features), off = STAT_GET(w, features_off);
    const char *name;
    unsigned bit;
    fprintf(out, "  slot %d io_uring:", slot);
    for (unsigned i = 0; (name = loop_feature_name(i, &bit)); i++)
        fprintf(out, " %s=%s", name, on & bit ? "on" : off & bit ? "env" : bit & WF_OPT_IN ? "opt-in" : "off");
    fputc('\n', out);
}

static void print_worker_json(const struct relay_worker_stats *w, int slot, bool first, FILE *out)
{
    fprintf(out, "%s{\"slot\":%d,\"pid\":%d,\"state\":\"%s\",\"node\":%u,\"incarnation\":" CLI_JSON_U64,
            first ? "" : ",",
            slot, STAT_GET(w, pid), slot_state_name(STAT_GET(w, state)), STAT_GET(w, node), STAT_GET(w, incarnation));
#define JS(f) fprintf(out, ",\"" #f "\":" CLI_JSON_U64, (uint64_t)STAT_GET(w, f));
    RELAY_STATS_COUNTERS(JS)
    RELAY_STATS_GAUGES(JS)
#undef JS
    print_features_json(w, out);
    fputc('}', out);
}

static void print_workers_text(const struct relay_stats *s, FILE *out)
{
    fprintf(out, "  %-4s %-8s %-8s %4s %9s %6s %8s %8s %8s %7s %6s %5s %5s %5s\n", "slot", "pid", "state", "node",
            "requests", "errors", "local", "remote", "served", "streams", "retry", "ups", "conns", "infl");
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        const struct relay_worker_stats *w = &s->w[i];
        if (STAT_GET(w, state) == SLOT_FREE)
            continue;
        fprintf(out, "  %-4d %-8d %-8s %4u %9" PRIu64 " %6" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64
                     " %7" PRIu64 " %6" PRIu64 " %5" PRIu64 " %5" PRIu64 " %5" PRIu64 "\n",
                i, STAT_GET(w, pid), slot_state_name(STAT_GET(w, state)), STAT_GET(w, node),
                (uint64_t)STAT_GET(w, requests), (uint64_t)STAT_GET(w, errors), (uint64_t)STAT_GET(w, local_leases),
                (uint64_t)STAT_GET(w, remote_leases), (uint64_t)STAT_GET(w, served_remote),
                (uint64_t)STAT_GET(w, streams), (uint64_t)STAT_GET(w, retries),
                (uint64_t)STAT_GET(w, upstreams_open), (uint64_t)STAT_GET(w, conns_open),
                (uint64_t)STAT_GET(w, inflight));
    }
    for (int i = 0; i < RELAY_STATS_SLOTS; i++)
        if (STAT_GET(&s->w[i], state) == SLOT_RUNNING)
            print_features_text(&s->w[i], i, out);
}

int stats_main(const char *fleet, bool json)
{
    struct relay_stats *s = NULL;
    struct orbit_fleet *f = NULL;
    int rc = relay_stats_open(fleet, &s);
    if (rc < 0)
        fprintf(stderr, "orbit-relay: no relay counters for fleet %s (%s)\n", fleet, orbit_strerror(rc));
    int frc = orbit_fleet_observe(fleet, &f);
    if (frc < 0)
        fprintf(stderr, "orbit-relay: fleet %s: %s\n", fleet, orbit_strerror(frc));
    if (rc < 0 && frc < 0)
        return 1;
    if (json) {
        fprintf(stdout, "{\"fleet\":");
        tool_json_str(stdout, fleet);
        if (s) {
            fprintf(stdout, ",\"backend\":");
            tool_json_str(stdout, s->backend);
            fprintf(stdout, ",\"listen_port\":%u,\"upstream_budget\":%u,\"deaths\":" CLI_JSON_U64
                            ",\"restarts\":" CLI_JSON_U64 ",\"supervisor_reaps\":" CLI_JSON_U64
                            ",\"death_reports\":" CLI_JSON_U64 ",\"workers\":[",
                    s->listen_port, s->upstreams, (uint64_t)atomic_load(&s->deaths),
                    (uint64_t)atomic_load(&s->restarts), (uint64_t)atomic_load(&s->supervisor_reaps),
                    (uint64_t)atomic_load(&s->death_reports));
            bool first = true;
            for (int i = 0; i < RELAY_STATS_SLOTS; i++)
                if (STAT_GET(&s->w[i], state) != SLOT_FREE) {
                    print_worker_json(&s->w[i], i, first, stdout);
                    first = false;
                }
            fputc(']', stdout);
        }
        if (f) {
            fprintf(stdout, ",\"pool\":");
            if (ctl_show_pool(f, relay_pool_spec.kind, true, stdout) < 0)
                fputs("null", stdout);
            fprintf(stdout, ",\"streams\":");
            if (ctl_show_stream(f, relay_stream_spec.kind, true, stdout) < 0)
                fputs("null", stdout);
        }
        fputs("}\n", stdout);
    } else {
        if (s) {
            fprintf(stdout, "relay fleet %s: backend %s, port %u, upstream budget %u; deaths %" PRIu64
                            ", restarts %" PRIu64 ", supervisor reaps %" PRIu64 "\n",
                    fleet, s->backend, s->listen_port, s->upstreams, (uint64_t)atomic_load(&s->deaths),
                    (uint64_t)atomic_load(&s->restarts), (uint64_t)atomic_load(&s->supervisor_reaps));
            print_workers_text(s, stdout);
        }
        if (f) {
            ctl_show_pool(f, relay_pool_spec.kind, false, stdout);
            ctl_show_stream(f, relay_stream_spec.kind, false, stdout);
        }
    }
    if (f)
        orbit_fleet_leave(f);
    relay_stats_unmap(s);
    return 0;
}
