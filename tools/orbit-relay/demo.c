/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay --demo: the backend, the reaper, a relay fleet and a load run,
 * with one worker killed (SIGKILL) in the middle. It then checks what the
 * fleet's tables say once quiet (no upstream unit lost, no stream leaked,
 * the dead worker's share reclaimed) and what the load saw (no failed request
 * beyond those in flight on the killed worker), and prints a summary.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <orbit/uring.h>
#include "cli.h"
#include "load.h"
#include "modes.h"
#include "relay.h"
#include "supervisor.h"

struct demo_opts {
    int workers, connections, upstreams;
    double duration, kill_at;
    const char *reaper;          /* path of orbit-reaper, or NULL */
    char fleet[ORBIT_FLEET_NAME_MAX + 1];
    bool json, restart;
};

/* What the reaper daemon reported for one death. */
struct death_report {
    int node, pid;
    char backend[16];
    long long exit_to_reclaim_us;
    long long pool_resources, pool_units, pool_leases, stream_sides;
};

struct demo {
    struct demo_opts o;
    struct sup_fleet rf;
    int sfd;
    pid_t backend_pid, reaper_pid, load_pid;
    int reaper_out, load_out;
    char reaper_buf[8192];
    size_t reaper_len;
    char reaper_backend[16];
    struct death_report deaths[8];
    int n_deaths;
    /* the kill */
    int victim_slot;
    pid_t victim_pid;
    int64_t t_start, t_kill;
    uint64_t requests_at_kill;
    /* the load's result */
    struct load_result lr;
    bool load_done;
    FILE *log;                   /* progress lines: stdout, or stderr with --json */
};

/* ---- the reaper's JSON lines -------------------------------------------- */

/* The integer after key: a JSON number, or a 64-bit value written as a string. */
static long long json_num(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    if (!p)
        return -1;
    p += strlen(key);
    return strtoll(p + (*p == '"'), NULL, 10);
}

static void parse_reaper_line(struct demo *d, const char *line)
{
    const char *b = strstr(line, "\"backend\":\"");
    if (strstr(line, "\"event\":\"start\"") && b)
        sscanf(b + 11, "%15[^\"]", d->reaper_backend);
    if (!strstr(line, "\"event\":\"death\"") || d->n_deaths == (int)(sizeof d->deaths / sizeof d->deaths[0]))
        return;
    struct death_report *r = &d->deaths[d->n_deaths++];
    memset(r, 0, sizeof *r);
    r->node = (int)json_num(line, "\"node\":");
    r->pid = (int)json_num(line, "\"pid\":");
    if (b)
        sscanf(b + 11, "%15[^\"]", r->backend);
    r->exit_to_reclaim_us = json_num(line, "\"exit_to_reclaim_us\":");
    const char *pool = strstr(line, "\"pool\":{");
    const char *streams = strstr(line, "\"streams\":{");
    r->pool_resources = pool ? json_num(pool, "\"resources\":") : -1;
    r->pool_units = pool ? json_num(pool, "\"units\":") : -1;
    r->pool_leases = pool ? json_num(pool, "\"leases\":") : -1;
    r->stream_sides = streams ? json_num(streams, "\"sides\":") : -1;
    fprintf(d->log, "  reaper (%s): node %d pid %d reclaimed %lld upstream%s (%lld unit%s, %lld lease%s held on them), "
                    "%lld stream side%s; exit to reclaim %lld us\n",
            r->backend, r->node, r->pid, r->pool_resources, r->pool_resources == 1 ? "" : "s", r->pool_units,
            r->pool_units == 1 ? "" : "s", r->pool_leases, r->pool_leases == 1 ? "" : "s", r->stream_sides,
            r->stream_sides == 1 ? "" : "s", r->exit_to_reclaim_us);
    fflush(d->log);
}

/* Reads what the reaper wrote so far (non-blocking) and handles whole lines. */
static void read_reaper(struct demo *d)
{
    if (d->reaper_out < 0)
        return;
    for (;;) {
        ssize_t n = read(d->reaper_out, d->reaper_buf + d->reaper_len, sizeof d->reaper_buf - 1 - d->reaper_len);
        if (n <= 0)
            break;
        d->reaper_len += (size_t)n;
        d->reaper_buf[d->reaper_len] = 0;
        char *nl;
        while ((nl = strchr(d->reaper_buf, '\n'))) {
            *nl = 0;
            parse_reaper_line(d, d->reaper_buf);
            size_t used = (size_t)(nl + 1 - d->reaper_buf);
            memmove(d->reaper_buf, nl + 1, d->reaper_len - used + 1);
            d->reaper_len -= used;
        }
        if (d->reaper_len == sizeof d->reaper_buf - 1)
            d->reaper_len = 0;   /* a line this long is not the reaper's */
    }
}

/* ---- starting the parts -------------------------------------------------- */

static int start_backend(struct demo *d, struct sockaddr_in *addr)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    d->backend_pid = fork();
    if (d->backend_pid == 0) {
        sup_child_signals();
        close(p[0]);
        struct sockaddr_in any;
        cli_parse_inet("127.0.0.1:0", &any, NULL);
        _exit(backend_main(&any, p[1], true));
    }
    close(p[1]);
    uint16_t port = 0;
    struct pollfd pfd = { .fd = p[0], .events = POLLIN };
    int ok = poll(&pfd, 1, 5000) == 1 && read(p[0], &port, sizeof port) == sizeof port;
    close(p[0]);
    if (!ok)
        return -EIO;
    cli_parse_inet("127.0.0.1:0", addr, NULL);
    addr->sin_port = htons(port);
    return 0;
}

static int start_reaper(struct demo *d)
{
    int p[2];
    if (!d->o.reaper || access(d->o.reaper, X_OK) != 0)
        return -ENOENT;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    d->reaper_pid = fork();
    if (d->reaper_pid == 0) {
        sup_child_signals();
        dup2(p[1], 1);
        execl(d->o.reaper, d->o.reaper, "--fleet", d->o.fleet, "--interval", "50", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    d->reaper_out = p[0];
    /* Its first line says it runs and with which backend. */
    int64_t end = relay_now_ns() + 5000000000ll;
    fcntl(d->reaper_out, F_SETFL, O_NONBLOCK);
    while (!d->reaper_backend[0] && relay_now_ns() < end) {
        struct pollfd pfd = { .fd = d->reaper_out, .events = POLLIN };
        if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
            break;
        if (pfd.revents & (POLLHUP | POLLERR) && !(pfd.revents & POLLIN))
            break;
        read_reaper(d);
    }
    if (!d->reaper_backend[0]) {
        sup_end_child(d->reaper_pid, 1000);
        d->reaper_pid = 0;
        close(d->reaper_out);
        d->reaper_out = -1;
        return -EIO;
    }
    return 0;
}

static int start_load(struct demo *d, const struct sockaddr_in *relay)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    d->load_pid = fork();
    if (d->load_pid == 0) {
        sup_child_signals();
        close(p[0]);
        struct load_opts lo = { .addr = *relay, .connections = d->o.connections, .duration_s = d->o.duration };
        relay_format_addr(relay, lo.host, sizeof lo.host);
        struct load_result r;
        if (load_run(&lo, &r) < 0)
            _exit(1);
        _exit(write(p[1], &r, sizeof r) == sizeof r ? 0 : 1);
    }
    close(p[1]);
    d->load_out = p[0];
    return 0;
}

static void read_load(struct demo *d)
{
    size_t got = 0;
    char *buf = (char *)&d->lr;
    while (got < sizeof d->lr) {
        ssize_t n = read(d->load_out, buf + got, sizeof d->lr - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    d->load_done = got == sizeof d->lr;
}

/* ---- during the run ------------------------------------------------------ */

static void progress(struct demo *d)
{
    struct relay_worker_stats t;
    relay_stats_total(d->rf.st, &t);
    double s = (double)(relay_now_ns() - d->t_start) / 1e9;
    fprintf(d->log, "  t=%4.1fs  relayed %7" PRIu64 "  leases local %7" PRIu64 " remote %6" PRIu64 "  streams %6" PRIu64
                    "  upstreams %2" PRIu64 "  waits %6" PRIu64 "  errors %" PRIu64 "\n",
            s, (uint64_t)STAT_GET(&t, requests), (uint64_t)STAT_GET(&t, local_leases),
            (uint64_t)STAT_GET(&t, remote_leases), (uint64_t)STAT_GET(&t, streams),
            (uint64_t)STAT_GET(&t, upstreams_open), (uint64_t)STAT_GET(&t, pool_waits),
            (uint64_t)STAT_GET(&t, errors));
    fflush(d->log);
}

/* The victim: the running worker that owns the most upstreams (their reclaim shows). */
static void kill_one(struct demo *d)
{
    int best = -1;
    uint64_t most = 0;
    for (int i = 0; i < d->rf.opts.workers; i++) {
        if (d->rf.pids[i] <= 0)
            continue;
        uint64_t n = STAT_GET(&d->rf.st->w[d->rf.slot_of[i]], upstreams_open);
        if (best < 0 || n > most) {
            best = i;
            most = n;
        }
    }
    if (best < 0)
        return;
    struct relay_worker_stats t;
    relay_stats_total(d->rf.st, &t);
    d->requests_at_kill = STAT_GET(&t, requests);
    d->victim_slot = d->rf.slot_of[best];
    d->victim_pid = d->rf.pids[best];
    struct relay_worker_stats *v = &d->rf.st->w[d->victim_slot];
    d->t_kill = relay_now_ns();
    kill(d->victim_pid, SIGKILL);
    fprintf(d->log, "  kill -9 worker pid %d (node %u): it owned %" PRIu64 " upstream%s, %" PRIu64
                    " client connection%s, serving %" PRIu64 " remote request%s\n",
            d->victim_pid, STAT_GET(v, node), (uint64_t)STAT_GET(v, upstreams_open),
            STAT_GET(v, upstreams_open) == 1 ? "" : "s", (uint64_t)STAT_GET(v, conns_open),
            STAT_GET(v, conns_open) == 1 ? "" : "s", (uint64_t)STAT_GET(v, serving_remote),
            STAT_GET(v, serving_remote) == 1 ? "" : "s");
    fflush(d->log);
}

static void on_children(struct demo *d)
{
    pid_t others[3] = { d->backend_pid, d->reaper_pid, d->load_pid };
    int status[3] = { 0, 0, 0 };
    uint64_t reaps = atomic_load(&d->rf.st->supervisor_reaps);
    int deaths = sup_on_sigchld(&d->rf, others, 3, status);
    if (deaths > 0) {
        fprintf(d->log, "  supervisor: worker exit seen, %s\n",
                d->rf.opts.restart ? "replacement started" : "not replaced");
        if (atomic_load(&d->rf.st->supervisor_reaps) > reaps)
            fprintf(d->log, "  supervisor: orbit_fleet_reap reclaimed the dead worker's share\n");
        fflush(d->log);
    }
    if (others[2] < 0) {
        read_load(d);
        d->load_pid = 0;
        if (!d->load_done)
            d->load_done = true, d->lr.timeouts = UINT64_MAX;   /* the load process failed */
    }
    if (others[0] < 0)
        d->backend_pid = 0;
    if (others[1] < 0)
        d->reaper_pid = 0;
}

static int run_loop(struct demo *d)
{
    int64_t kill_ns = d->t_start + (int64_t)(d->o.kill_at * 1e9);
    int64_t next_tick = d->t_start + 1000000000ll;
    bool killed = false;
    int64_t hard_end = d->t_start + (int64_t)((d->o.duration + 15) * 1e9);
    while (!d->load_done && relay_now_ns() < hard_end) {
        int64_t now = relay_now_ns();
        int64_t next = next_tick;
        if (!killed && kill_ns < next)
            next = kill_ns;
        int timeout = next > now ? (int)((next - now) / 1000000) + 1 : 0;
        struct pollfd pfd[2] = { { .fd = d->sfd, .events = POLLIN }, { .fd = d->reaper_out, .events = POLLIN } };
        if (poll(pfd, d->reaper_out >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
            return -errno;
        struct signalfd_siginfo si;
        bool child = false;
        while (read(d->sfd, &si, sizeof si) == sizeof si) {
            if (si.ssi_signo == SIGCHLD)
                child = true;
            else
                return -EINTR;
        }
        if (child)
            on_children(d);
        read_reaper(d);
        now = relay_now_ns();
        if (!killed && now >= kill_ns) {
            kill_one(d);
            killed = true;
        }
        if (now >= next_tick) {
            progress(d);
            next_tick += 1000000000ll;
        }
    }
    return d->load_done ? 0 : -ORBIT_ETIMEDOUT;
}

/* ---- after the run: what the tables say --------------------------------- */

struct table_check {
    ssize_t candidates;          /* upstreams registered under the backend's key */
    uint64_t reserved, active;   /* their units in use: 0 once quiet */
    uint32_t live, creating;     /* the key's budget counts */
    uint64_t worker_upstreams;   /* what the running workers say they own */
    uint64_t dead_owned;         /* candidates owned by no running worker's incarnation */
    ssize_t streams;             /* live streams */
    bool victim_node_free;
};

static bool incarnation_running(struct demo *d, uint64_t inc)
{
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        struct relay_worker_stats *w = &d->rf.st->w[i];
        if (STAT_GET(w, state) == SLOT_RUNNING && STAT_GET(w, incarnation) == inc)
            return true;
    }
    return false;
}

static void check_tables(struct demo *d, struct orbit_pool *pool, struct orbit_streams *streams,
                         struct table_check *tc)
{
    memset(tc, 0, sizeof *tc);
    orbit_key key = relay_backend_key(&d->rf.opts.upstream);
    struct orbit_candidate c[256];
    tc->candidates = orbit_pool_candidates(pool, key, c, 256);
    for (ssize_t i = 0; i < tc->candidates && i < 256; i++) {
        tc->reserved += c[i].reserved;
        tc->active += c[i].active;
        if (!incarnation_running(d, c[i].owner_incarnation))
            tc->dead_owned++;
    }
    orbit_pool_budget(pool, key, &tc->live, &tc->creating);
    struct relay_worker_stats t;
    relay_stats_total(d->rf.st, &t);
    tc->worker_upstreams = STAT_GET(&t, upstreams_open);
    tc->streams = orbit_streams_list(streams, NULL, 0);
    tc->victim_node_free = true;
    struct orbit_node_info nodes[64];
    ssize_t n = orbit_fleet_nodes(d->rf.observer, nodes, 64);
    for (ssize_t i = 0; i < n && i < 64; i++)
        if (nodes[i].pid == d->victim_pid)
            tc->victim_node_free = false;
}

static bool tables_quiet(const struct table_check *tc)
{
    return tc->reserved == 0 && tc->active == 0 && tc->creating == 0 && tc->dead_owned == 0 && tc->streams == 0 &&
           tc->victim_node_free && tc->candidates >= 0 && (uint64_t)tc->candidates == tc->worker_upstreams &&
           tc->live == (uint32_t)tc->candidates;
}

/* Waits (on the key's change word, up to timeout_ms) until the tables are quiet. */
static void settle(struct demo *d, struct table_check *tc, int timeout_ms)
{
    struct orbit_pool *pool = NULL;
    struct orbit_streams *streams = NULL;
    int rc = orbit_pool_open_existing(d->rf.observer, relay_pool_spec.kind, &pool);
    if (rc == 0)
        rc = orbit_streams_open_existing(d->rf.observer, relay_stream_spec.kind, &streams);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay demo: cannot open the fleet's tables: %s\n", orbit_strerror(rc));
        memset(tc, 0, sizeof *tc);
        tc->candidates = -1;
        goto out;
    }
    orbit_key key = relay_backend_key(&d->rf.opts.upstream);
    int64_t end = relay_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        uint32_t v = 0;
        orbit_pool_version(pool, key, &v);
        read_reaper(d);
        check_tables(d, pool, streams, tc);
        if (tables_quiet(tc) || relay_now_ns() >= end)
            break;
        /* Reservations age out on their owners' reconcile; streams close on their own loops. */
        orbit_pool_wait_capacity(pool, key, v, 50, &v);
    }
out:
    if (streams)
        orbit_streams_close(streams);
    if (pool)
        orbit_pool_close(pool);
}

/* ---- the summary --------------------------------------------------------- */

struct verdict {
    uint64_t failed, lost, lost_bound, after_kill, reclaimed;
    bool ok;
    const char *why[8];
    int n_why;
};

static void judge(struct demo *d, const struct table_check *tc, struct verdict *v)
{
    struct relay_worker_stats t;
    relay_stats_total(d->rf.st, &t);
    struct relay_worker_stats *victim = &d->rf.st->w[d->victim_slot];
    memset(v, 0, sizeof *v);
    v->failed = d->lr.bad_status + d->lr.bad_body + d->lr.timeouts;
    v->lost = d->lr.lost;
    /* In flight on the killed worker: at most one request per client connection it
     * held, plus remote requests it was serving that were cut after their first byte. */
    v->lost_bound = STAT_GET(victim, conns_open) + STAT_GET(&t, aborted);
    v->after_kill = STAT_GET(&t, requests) - d->requests_at_kill;
    v->reclaimed = (uint64_t)d->n_deaths + atomic_load(&d->rf.st->supervisor_reaps);
#define FAIL(cond, text) do { if ((cond) && v->n_why < 8) v->why[v->n_why++] = text; } while (0)
    FAIL(!d->load_done, "the load run did not finish");
    FAIL(d->lr.ok == 0, "no request succeeded");
    FAIL(v->failed > 0, "requests failed (bad status, bad body or timeout)");
    FAIL(v->lost > v->lost_bound, "more requests lost than were in flight on the killed worker");
    FAIL(d->victim_pid == 0, "no worker was killed");
    FAIL(d->victim_pid && v->reclaimed < 1, "the dead worker was not reclaimed");
    FAIL(v->after_kill == 0, "the fleet served nothing after the kill");
    FAIL(tc->reserved || tc->active || tc->creating || tc->dead_owned ||
         (uint64_t)tc->candidates != tc->worker_upstreams || tc->live != (uint32_t)tc->candidates,
         "upstream units lost (pool disagrees with the workers once quiet)");
    FAIL(tc->streams != 0, "streams leaked");
#undef FAIL
    v->ok = v->n_why == 0;
}

static void summary_text(struct demo *d, const struct table_check *tc, const struct verdict *v, FILE *out)
{
    struct relay_worker_stats t;
    relay_stats_total(d->rf.st, &t);
    const struct load_result *r = &d->lr;
    fprintf(out, "\n== orbit demo summary ==\n");
    fprintf(out, "requests      %" PRIu64 " ok in %.1f s (%.0f req/s) over %d connections, %d workers, budget %d upstreams\n",
            r->ok, r->elapsed_s, r->elapsed_s > 0 ? (double)r->ok / r->elapsed_s : 0.0, d->o.connections,
            d->o.workers, d->o.upstreams);
    fprintf(out, "errors        %" PRIu64 " failed; %" PRIu64 " lost in flight on the killed worker (bound %" PRIu64
                 "); %" PRIu64 " connect errors\n", v->failed, v->lost, v->lost_bound, r->connect_errors);
    fprintf(out, "latency       p50 %.0f us  p99 %.0f us  max %.0f us\n",
            (double)relay_hist_percentile(&r->hist, 0.50) / 1e3, (double)relay_hist_percentile(&r->hist, 0.99) / 1e3,
            (double)r->hist.max_ns / 1e3);
    fprintf(out, "leases        %" PRIu64 " local, %" PRIu64 " remote (%" PRIu64 " served for another worker), %" PRIu64
                 " retried, %" PRIu64 " waits for capacity\n",
            (uint64_t)STAT_GET(&t, local_leases), (uint64_t)STAT_GET(&t, remote_leases),
            (uint64_t)STAT_GET(&t, served_remote), (uint64_t)STAT_GET(&t, retries), (uint64_t)STAT_GET(&t, pool_waits));
    fprintf(out, "streams       %" PRIu64 " used, %zd live at the end\n", (uint64_t)STAT_GET(&t, streams), tc->streams);
    fprintf(out, "upstreams     %" PRIu64 " dialled; %zd live at the end (workers say %" PRIu64 "), units reserved %" PRIu64
                 " active %" PRIu64 ", owned by the dead %" PRIu64 "\n",
            (uint64_t)STAT_GET(&t, upstreams_created), tc->candidates, tc->worker_upstreams, tc->reserved, tc->active,
            tc->dead_owned);
    fprintf(out, "deaths        %d killed, %" PRIu64 " reclaimed (%s), %" PRIu64 " replaced; %" PRIu64
                 " requests relayed after the kill\n",
            d->victim_pid ? 1 : 0, v->reclaimed,
            d->n_deaths ? d->deaths[0].backend : atomic_load(&d->rf.st->supervisor_reaps) ? "supervisor" : "-",
            (uint64_t)atomic_load(&d->rf.st->restarts), v->after_kill);
    if (v->ok)
        fprintf(out, "result        PASS\n");
    for (int i = 0; i < v->n_why; i++)
        fprintf(out, "result        FAIL: %s\n", v->why[i]);
}

static void summary_json(struct demo *d, const struct table_check *tc, const struct verdict *v, FILE *out)
{
    struct relay_worker_stats t;
    relay_stats_total(d->rf.st, &t);
    const struct load_result *r = &d->lr;
    const struct death_report *dr = d->n_deaths ? &d->deaths[0] : NULL;
    fprintf(out, "{\"ok\":%s,\"workers\":%d,\"connections\":%d,\"upstream_budget\":%d,\"elapsed_s\":%.3f,"
                 "\"requests\":" CLI_JSON_U64 ",\"failed\":" CLI_JSON_U64 ",\"lost\":" CLI_JSON_U64
                 ",\"lost_bound\":" CLI_JSON_U64 ",\"failed_status\":" CLI_JSON_U64 ",\"failed_body\":" CLI_JSON_U64
                 ",\"failed_timeout\":" CLI_JSON_U64 ",\"connect_errors\":" CLI_JSON_U64
                 ",\"p50_us\":%.1f,\"p99_us\":%.1f,\"rps\":%.1f,",
            v->ok ? "true" : "false", d->o.workers, d->o.connections, d->o.upstreams, r->elapsed_s, r->ok, v->failed,
            v->lost, v->lost_bound, r->bad_status, r->bad_body, r->timeouts, r->connect_errors,
            (double)relay_hist_percentile(&r->hist, 0.50) / 1e3, (double)relay_hist_percentile(&r->hist, 0.99) / 1e3,
            r->elapsed_s > 0 ? (double)r->ok / r->elapsed_s : 0.0);
    fprintf(out, "\"leases_local\":" CLI_JSON_U64 ",\"leases_remote\":" CLI_JSON_U64
                 ",\"served_remote\":" CLI_JSON_U64 ",\"retries\":" CLI_JSON_U64 ",\"aborted\":" CLI_JSON_U64
                 ",\"worker_errors\":" CLI_JSON_U64 ",\"upstream_failures\":" CLI_JSON_U64
                 ",\"streams_used\":" CLI_JSON_U64 ",\"upstreams_dialled\":" CLI_JSON_U64 ",",
            (uint64_t)STAT_GET(&t, local_leases), (uint64_t)STAT_GET(&t, remote_leases),
            (uint64_t)STAT_GET(&t, served_remote), (uint64_t)STAT_GET(&t, retries), (uint64_t)STAT_GET(&t, aborted),
            (uint64_t)STAT_GET(&t, errors), (uint64_t)STAT_GET(&t, upstream_failures),
            (uint64_t)STAT_GET(&t, streams), (uint64_t)STAT_GET(&t, upstreams_created));
    /* exit_to_reclaim_us: the reaper's 64-bit figure, "-1" when no death was reported. */
    fprintf(out, "\"kills\":%d,\"deaths_reclaimed\":" CLI_JSON_U64 ",\"reaper\":\"%s\",\"reaper_deaths\":%d,"
                 "\"supervisor_reaps\":" CLI_JSON_U64 ",\"restarts\":" CLI_JSON_U64
                 ",\"requests_after_kill\":" CLI_JSON_U64 ",\"reclaimed_upstreams\":%lld"
                 ",\"reclaimed_stream_sides\":%lld,\"exit_to_reclaim_us\":" CLI_JSON_I64 ",",
            d->victim_pid ? 1 : 0, v->reclaimed, d->reaper_backend[0] ? d->reaper_backend : "none", d->n_deaths,
            (uint64_t)atomic_load(&d->rf.st->supervisor_reaps), (uint64_t)atomic_load(&d->rf.st->restarts),
            v->after_kill, dr ? dr->pool_resources : -1, dr ? dr->stream_sides : -1,
            (int64_t)(dr ? dr->exit_to_reclaim_us : -1));
    fprintf(out, "\"end\":{\"upstreams_live\":" CLI_JSON_SSIZE ",\"worker_upstreams\":" CLI_JSON_U64
                 ",\"budget_live\":%u,\"budget_creating\":%u,\"units_reserved\":" CLI_JSON_U64
                 ",\"units_active\":" CLI_JSON_U64 ",\"dead_owned\":" CLI_JSON_U64 ",\"streams_live\":" CLI_JSON_SSIZE
                 ",\"victim_node_free\":%s},\"why\":[",
            tc->candidates, tc->worker_upstreams, tc->live, tc->creating, tc->reserved, tc->active, tc->dead_owned,
            tc->streams, tc->victim_node_free ? "true" : "false");
    for (int i = 0; i < v->n_why; i++)
        fprintf(out, "%s\"%s\"", i ? "," : "", v->why[i]);
    fprintf(out, "]}\n");
}

/* ---- options and main ---------------------------------------------------- */

static const char demo_usage[] =
"usage: orbit-relay --demo [options]\n"
"  --workers N       relay workers (default: one per core, at least 2)\n"
"  --connections C   load connections (default 32)\n"
"  --upstreams U     upstream budget for the backend (default: workers + 2)\n"
"  --duration S      load seconds (default 10)\n"
"  --kill-at S       kill -9 one worker this many seconds in (default: duration * 0.4)\n"
"  --reaper PATH     orbit-reaper to start (default: none; the supervisor reaps)\n"
"  --no-restart      do not replace the killed worker\n"
"  --fleet NAME      fleet name (default relay-demo-<pid>)\n"
"  --json            one JSON summary on stdout (progress goes to stderr)\n";

static int parse_demo(int argc, char **argv, struct demo_opts *o)
{
    static const struct option longs[] = {
        { "demo", no_argument, 0, 'D' }, { "workers", required_argument, 0, 'w' },
        { "connections", required_argument, 0, 'c' }, { "upstreams", required_argument, 0, 'u' },
        { "duration", required_argument, 0, 'd' }, { "kill-at", required_argument, 0, 'k' },
        { "reaper", required_argument, 0, 'r' }, { "no-restart", no_argument, 0, 'R' },
        { "fleet", required_argument, 0, 'f' }, { "json", no_argument, 0, 'j' }, { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 } };
    int cpus = relay_cpu_count();
    *o = (struct demo_opts){ .workers = cpus < 2 ? 2 : cpus, .connections = 32, .duration = 10, .kill_at = -1,
                             .restart = true };
    snprintf(o->fleet, sizeof o->fleet, "relay-demo-%d", (int)getpid());
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'D': break;
        case 'w': o->workers = atoi(optarg); break;
        case 'c': o->connections = atoi(optarg); break;
        case 'u': o->upstreams = atoi(optarg); break;
        case 'd': o->duration = atof(optarg); break;
        case 'k': o->kill_at = atof(optarg); break;
        case 'r': o->reaper = strcmp(optarg, "none") == 0 ? NULL : optarg; break;
        case 'R': o->restart = false; break;
        case 'f': snprintf(o->fleet, sizeof o->fleet, "%s", optarg); break;
        case 'j': o->json = true; break;
        case 'h': fputs(demo_usage, stdout); return 1;
        default: fputs(demo_usage, stderr); return 2;
        }
    }
    if (o->workers < 1 || o->workers > RELAY_STATS_SLOTS / 2 || o->connections < 1 || o->connections > 4096 ||
        o->duration <= 0 || o->duration > 600) {
        fputs(demo_usage, stderr);
        return 2;
    }
    if (o->upstreams <= 0)
        o->upstreams = o->workers + 2;
    if (o->kill_at < 0 || o->kill_at >= o->duration)
        o->kill_at = o->duration * 0.4;
    return 0;
}

static void teardown(struct demo *d)
{
    sup_stop(&d->rf, 3000);
    sup_end_child(d->load_pid, 1000);
    sup_end_child(d->backend_pid, 2000);
    if (d->reaper_pid > 0) {
        sup_end_child(d->reaper_pid, 2000);
        read_reaper(d);
    }
    if (d->reaper_out >= 0)
        close(d->reaper_out);
    if (d->load_out >= 0)
        close(d->load_out);
}

static void cleanup(struct demo *d)
{
    relay_stats_unmap(d->rf.st);
    relay_stats_unlink(d->o.fleet, false);
    orbit_fleet_unlink(d->o.fleet);
}

int demo_main(int argc, char **argv)
{
    static struct demo d;
    d.reaper_out = d.load_out = -1;
    int rc = parse_demo(argc, argv, &d.o);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (uring_check() < 0)
        return 1;
    d.log = d.o.json ? stderr : stdout;
    signal(SIGPIPE, SIG_IGN);
    orbit_fleet_unlink(d.o.fleet);
    d.sfd = sup_signalfd();
    struct relay_opts ro;
    relay_opts_defaults(&ro);
    ro.fleet = d.o.fleet;
    ro.workers = d.o.workers;
    ro.upstreams = d.o.upstreams;
    ro.restart = d.o.restart;
    ro.quiet = true;
    if (start_backend(&d, &ro.upstream) < 0) {
        fprintf(stderr, "orbit-relay demo: the backend did not start\n");
        return 1;
    }
    cli_parse_inet("127.0.0.1:0", &ro.listen, NULL);   /* the supervisor picks the port */
    bool reaper = start_reaper(&d) == 0;
    ro.self_reap = !reaper;
    ro.report_deaths = !reaper;   /* with the daemon, show the daemon's reclaim */
    rc = sup_start(&d.rf, &ro, NULL);
    char lis[64], up[64];
    relay_format_addr(&d.rf.opts.listen, lis, sizeof lis);
    relay_format_addr(&ro.upstream, up, sizeof up);
    fprintf(d.log, "orbit demo: backend %s, relay %s, %d workers, budget %d upstreams, %d connections for %.0f s\n",
            up, lis, ro.workers, ro.upstreams, d.o.connections, d.o.duration);
    fprintf(d.log, "  reaper: %s\n", reaper ? d.reaper_backend : "none (the supervisor reaps with orbit_fleet_reap)");
    fprintf(d.log, "  io_uring futex ops: %s\n", orbit_uring_futex_supported() ? "yes (FUTEX_WAIT SQEs in each worker's ring)" : "no (readiness eventfds)");
    fflush(d.log);
    if (rc < 0) {
        teardown(&d);
        cleanup(&d);
        return 1;
    }
    d.t_start = relay_now_ns();
    start_load(&d, &d.rf.opts.listen);
    rc = run_loop(&d);
    struct table_check tc;
    settle(&d, &tc, 5000);
    struct verdict v;
    judge(&d, &tc, &v);
    if (rc < 0 && v.n_why < 8)
        v.why[v.n_why++] = "the run was interrupted or timed out", v.ok = false;
    teardown(&d);
    if (d.o.json)
        summary_json(&d, &tc, &v, stdout);
    else
        summary_text(&d, &tc, &v, stdout);
    cleanup(&d);
    return v.ok ? 0 : 1;
}
