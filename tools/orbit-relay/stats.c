/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: the fleet's counters in /dev/shm/orbit-relay.<fleet>, one slot
 * per worker life, and `orbit-relay --stats FLEET` which prints them beside
 * the fleet's live pool and stream tables (orbitctl's own sections).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "relay.h"
#include "worker.h"
#include "cli.h"
#include "tool.h"

/* The counters' file; staged: where a successor's wait until it takes over (relay_stats_publish). */
static void stats_path(const char *fleet, bool staged, char *buf, size_t len)
{
    snprintf(buf, len, "/dev/shm/orbit-relay.%s%s", fleet, staged ? ".next" : "");
}

static int stats_map(const char *fleet, bool staged, int flags, struct relay_stats **out)
{
    char path[128];
    stats_path(fleet, staged, path, sizeof path);
    int fd = open(path, flags | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if ((flags & O_CREAT) && ftruncate(fd, sizeof **out) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (fstat(fd, &sb) < 0 || (size_t)sb.st_size < sizeof **out) {
        close(fd);
        return -ORBIT_ECORRUPT;
    }
    void *p = mmap(NULL, sizeof **out, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -errno;
    *out = p;
    return 0;
}

int relay_stats_create(const char *fleet, bool staged, struct relay_stats **out)
{
    relay_stats_unlink(fleet, staged);
    int rc = stats_map(fleet, staged, O_CREAT | O_EXCL, out);
    if (rc < 0)
        return rc;
    struct relay_stats *s = *out;
    memset(s, 0, sizeof *s);
    s->version = RELAY_STATS_VERSION;
    s->slots = RELAY_STATS_SLOTS;
    snprintf(s->fleet, sizeof s->fleet, "%s", fleet);
    /* The magic goes last: an opener that sees it sees a whole header. */
    atomic_thread_fence(memory_order_release);
    s->magic = RELAY_STATS_MAGIC;
    return 0;
}

int relay_stats_open(const char *fleet, struct relay_stats **out)
{
    int rc = stats_map(fleet, false, 0, out);
    if (rc == 0 && ((*out)->magic != RELAY_STATS_MAGIC || (*out)->version != RELAY_STATS_VERSION ||
                    (*out)->slots != RELAY_STATS_SLOTS)) {
        relay_stats_unmap(*out);
        return -ORBIT_EGEOMETRY;
    }
    return rc;
}

void relay_stats_unmap(struct relay_stats *s)
{
    if (s)
        munmap(s, sizeof *s);
}

void relay_stats_unlink(const char *fleet, bool staged)
{
    char path[128];
    stats_path(fleet, staged, path, sizeof path);
    unlink(path);
}

/* The staged counters take the fleet's path: --stats shows the successor from now on (the
 * relay it took over from keeps writing into its own, unlinked). */
int relay_stats_publish(const char *fleet)
{
    char from[128], to[128];
    stats_path(fleet, true, from, sizeof from);
    stats_path(fleet, false, to, sizeof to);
    return rename(from, to) < 0 ? -errno : 0;
}

#define COUNTERS(X) X(accepted) X(requests) X(errors) X(local_leases) X(remote_leases) X(served_remote) \
    X(streams) X(retries) X(aborted) X(upstreams_created) X(upstream_failures) X(pool_waits) X(refused) \
    X(futex_waits) X(submits) X(quiet_waits) X(spliced)
#define GAUGES(X) X(conns_open) X(serving_remote) X(upstreams_open) X(inflight) X(queued)

void relay_stats_total(const struct relay_stats *s, struct relay_worker_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        const struct relay_worker_stats *w = &s->w[i];
        uint32_t state = STAT_GET(w, state);
        if (state == SLOT_FREE)
            continue;
#define SUM(f) atomic_store_explicit(&out->f, STAT_GET(out, f) + STAT_GET(w, f), memory_order_relaxed);
        COUNTERS(SUM)
        if (state == SLOT_RUNNING || state == SLOT_STARTING) {
            GAUGES(SUM)
        }
#undef SUM
    }
}

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
    for (unsigned i = 0; (name = ring_feature_name(i, &bit)); i++)
        fprintf(out, "%s\"%s\":\"%s\"", i ? "," : "", name, on & bit ? "on" : off & bit ? "env" : bit & WF_OPT_IN ? "opt-in" : "off");
    fputc('}', out);
}

static void print_features_text(const struct relay_worker_stats *w, int slot, FILE *out)
{
    uint32_t on = STAT_GET(w, features), off = STAT_GET(w, features_off);
    const char *name;
    unsigned bit;
    fprintf(out, "  slot %d io_uring:", slot);
    for (unsigned i = 0; (name = ring_feature_name(i, &bit)); i++)
        fprintf(out, " %s=%s", name, on & bit ? "on" : off & bit ? "env" : bit & WF_OPT_IN ? "opt-in" : "off");
    fputc('\n', out);
}

static void print_worker_json(const struct relay_worker_stats *w, int slot, bool first, FILE *out)
{
    fprintf(out, "%s{\"slot\":%d,\"pid\":%d,\"state\":\"%s\",\"node\":%u,\"incarnation\":" CLI_JSON_U64,
            first ? "" : ",",
            slot, STAT_GET(w, pid), slot_state_name(STAT_GET(w, state)), STAT_GET(w, node), STAT_GET(w, incarnation));
#define JS(f) fprintf(out, ",\"" #f "\":" CLI_JSON_U64, (uint64_t)STAT_GET(w, f));
    COUNTERS(JS)
    GAUGES(JS)
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
