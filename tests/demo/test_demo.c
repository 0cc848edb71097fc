/* SPDX-License-Identifier: MIT */
/*
 * The demo fleet (orbit-relay) run briefly with one worker killed by SIGKILL.
 *
 * Three runs of `orbit-relay --demo --json` (reaper daemon; supervisor reap;
 * readiness eventfds instead of io_uring futex waits) assert the summary's
 * invariants. A fourth run drives a relay fleet, a backend and a load
 * generator as separate programs, kills the worker that owns an upstream, and
 * checks the fleet's pool and stream tables itself through the library.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <orbit/pool.h>
#include <orbit/stream.h>
#include "testutil.h"
#include "jsonflat.h"

static const char *relay_bin(void)
{
    const char *p = getenv("ORBIT_RELAY_BIN");
    ck_assert_msg(p && access(p, X_OK) == 0, "ORBIT_RELAY_BIN names no program");
    return p;
}

/* Starts argv with stdout on a pipe; returns the pipe's read end. */
static int spawn(char *const argv[], pid_t *pid, const char *env_name, const char *env_value)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    *pid = fork();
    ck_assert_int_ge(*pid, 0);
    if (*pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        if (env_name)
            setenv(env_name, env_value, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    return p[0];
}

/* Reads fd until EOF (or the buffer is full) into buf, NUL-terminated. */
static size_t read_all(int fd, char *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;
    while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = 0;
    return got;
}

/* Reads one line (bounded wait) from fd into buf. */
static void read_line(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got + 1 < len) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ck_assert_msg(poll(&p, 1, 15000) == 1, "no line from the child");
        ck_assert_int_eq(read(fd, buf + got, 1), 1);
        if (buf[got] == '\n')
            break;
        got++;
    }
    buf[got] = 0;
}

/* The relay's per-worker counters and gauges, on stderr. */
static void print_relay_stats(const char *bin, const char *fleet)
{
    pid_t pid;
    char *argv[] = { (char *)bin, "--stats", (char *)fleet, "--json", NULL };
    int fd = spawn(argv, &pid, NULL, NULL);
    static char stats[16384];
    read_all(fd, stats, sizeof stats);
    close(fd);
    tu_wait_child(pid, 10000);
    fprintf(stderr, "relay stats: %s\n", stats);
}

static bool jtrue(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":true", key);
    return strstr(json, pat) != NULL;
}

/* Runs the demo with extra arguments; returns its exit status, JSON in out. */
static int run_demo(const char *fleet, const char *reaper, const char *env_name, char *out, size_t len)
{
    char *argv[] = { (char *)relay_bin(), "--demo", "--json", "--workers", "2", "--connections", "16",
                     "--duration", "4", "--kill-at", "1.5", "--fleet", (char *)fleet, "--reaper",
                     (char *)reaper, NULL };
    pid_t pid;
    int fd = spawn(argv, &pid, env_name, "1");
    read_all(fd, out, len);
    close(fd);
    int status = tu_wait_child(pid, 90000);
    ck_assert_msg(status >= 0, "the demo did not end");
    return status;
}

/* The invariants every demo run must show, whoever reclaimed the dead worker. */
static void check_summary(const char *fleet, const char *s, int status)
{
    ck_assert_msg(status == 0, "demo exit %d: %s", status, s);
    ck_assert_msg(jtrue(s, "ok"), "demo verdict: %s", s);
    ck_assert_int_gt(ju64(s, "requests"), 0);
    ck_assert_int_eq(ju64(s, "failed"), 0);
    ck_assert_int_le(ju64(s, "lost"), ju64(s, "lost_bound"));
    ck_assert_int_eq(jnum(s, "kills"), 1);
    ck_assert_int_eq(ju64(s, "deaths_reclaimed"), 1);
    ck_assert_int_gt(ju64(s, "requests_after_kill"), 0);
    ck_assert_int_gt(ju64(s, "leases_local"), 0);
    ck_assert_int_eq(ju64(s, "restarts"), 1);
    /* no lost upstream units once quiet */
    ck_assert_int_eq(ju64(s, "units_reserved"), 0);
    ck_assert_int_eq(ju64(s, "units_active"), 0);
    ck_assert_int_eq(ju64(s, "dead_owned"), 0);
    ck_assert_int_eq(jnum(s, "budget_creating"), 0);
    ck_assert_int_eq(ju64(s, "upstreams_live"), ju64(s, "worker_upstreams"));
    ck_assert_int_eq(jnum(s, "budget_live"), ju64(s, "upstreams_live"));
    ck_assert_int_le(ju64(s, "upstreams_live"), jnum(s, "upstream_budget"));
    ck_assert(jtrue(s, "victim_node_free"));
    /* no leaked streams: every stream used was closed */
    ck_assert_int_eq(ju64(s, "streams_live"), 0);
    ck_assert_int_eq(ju64(s, "streams_used"), ju64(s, "leases_remote"));
    /* the demo removes what it made */
    ck_assert_int_eq(orbit_fleet_segments(fleet, NULL, 0), 0);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/orbit-relay.%s", fleet);
    ck_assert_int_ne(access(path, F_OK), 0);
}

START_TEST(test_demo_with_reaper)
{
    const char *reaper = getenv("ORBIT_REAPER_BIN");
    ck_assert_msg(reaper && access(reaper, X_OK) == 0, "ORBIT_REAPER_BIN names no program");
    char fleet[64], out[8192];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("demo"));
    int status = run_demo(fleet, reaper, NULL, out, sizeof out);
    check_summary(fleet, out, status);
    /* The daemon reclaimed it, not the supervisor's fallback. */
    ck_assert_int_eq(jnum(out, "reaper_deaths"), 1);
    ck_assert_int_eq(ju64(out, "supervisor_reaps"), 0);
    ck_assert_int_ge(jnum(out, "reclaimed_upstreams"), 0);
    ck_assert_int_ge(jnum(out, "reclaimed_stream_sides"), 0);
    ck_assert_int_ge(ju64(out, "exit_to_reclaim_us"), 0);   /* read from the daemon's log: -1 if not */
    ck_assert(strstr(out, "\"reaper\":\"bpf\"") || strstr(out, "\"reaper\":\"pidfd\""));
}
END_TEST

START_TEST(test_demo_supervisor_reaps)
{
    char fleet[64], out[8192];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("demo"));
    int status = run_demo(fleet, "none", NULL, out, sizeof out);
    check_summary(fleet, out, status);
    ck_assert_int_eq(jnum(out, "reaper_deaths"), 0);
    ck_assert_int_eq(ju64(out, "supervisor_reaps"), 1);
    ck_assert_ptr_nonnull(strstr(out, "\"reaper\":\"none\""));
}
END_TEST

/* Without io_uring futex ops the workers wait on the tables' readiness eventfds. */
START_TEST(test_demo_readiness_fallback)
{
    char fleet[64], out[8192];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("demo"));
    int status = run_demo(fleet, "none", "ORBIT_DISABLE_URING_FUTEX", out, sizeof out);
    check_summary(fleet, out, status);
}
END_TEST

/* ---- the fleet checked from outside ------------------------------------- */

/* "... 127.0.0.1:PORT ..." after marker in line: the port. */
static char *addr_after(char *line, const char *marker)
{
    char *p = strstr(line, marker);
    ck_assert_msg(p, "no '%s' in '%s'", marker, line);
    p += strlen(marker);
    p[strcspn(p, " ,\n")] = 0;
    return p;
}

struct outside {
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    orbit_key key;
};

/* The pool's one key (the backend's); false while there is none yet. */
static bool find_key(struct outside *o)
{
    struct orbit_pool_key_info k[4];
    ssize_t n = orbit_pool_keys(o->pool, k, 4);
    ck_assert_int_le(n, 1);
    if (n == 1)
        o->key = k[0].key;
    return n == 1;
}

/* Kills the worker owning the first upstream of the key; returns its incarnation. */
static uint64_t kill_an_owner(struct outside *o, pid_t *victim)
{
    struct orbit_candidate c[16];
    ssize_t n = orbit_pool_candidates(o->pool, o->key, c, 16);
    ck_assert_int_gt(n, 0);
    struct orbit_node_info nodes[32];
    ssize_t nn = orbit_fleet_nodes(o->f, nodes, 32);
    for (ssize_t i = 0; i < nn; i++)
        if (nodes[i].node == c[0].owner && nodes[i].incarnation == c[0].owner_incarnation) {
            *victim = nodes[i].pid;
            ck_assert_int_eq(kill(*victim, SIGKILL), 0);
            return c[0].owner_incarnation;
        }
    ck_abort_msg("the owner of %u is not in the node table", (unsigned)c[0].owner);
    return 0;
}

struct quiet {
    uint64_t reserved, active, victim_owned;
    ssize_t candidates, streams;
    uint32_t live, creating;
    bool victim_listed, all_alive;
};

static void look(struct outside *o, uint64_t victim_inc, pid_t victim, struct quiet *q)
{
    memset(q, 0, sizeof *q);
    struct orbit_candidate c[64];
    q->candidates = orbit_pool_candidates(o->pool, o->key, c, 64);
    for (ssize_t i = 0; i < q->candidates && i < 64; i++) {
        q->reserved += c[i].reserved;
        q->active += c[i].active;
        q->victim_owned += c[i].owner_incarnation == victim_inc;
    }
    orbit_pool_budget(o->pool, o->key, &q->live, &q->creating);
    q->streams = orbit_streams_list(o->streams, NULL, 0);
    struct orbit_node_info nodes[32];
    ssize_t nn = orbit_fleet_nodes(o->f, nodes, 32);
    q->all_alive = true;
    for (ssize_t i = 0; i < nn && i < 32; i++) {
        q->victim_listed |= nodes[i].pid == victim;
        q->all_alive &= nodes[i].alive;
    }
}

static bool is_quiet(const struct quiet *q)
{
    return q->reserved == 0 && q->active == 0 && q->victim_owned == 0 && q->streams == 0 && q->creating == 0 &&
           !q->victim_listed && q->all_alive && q->live == (uint32_t)q->candidates;
}

START_TEST(test_fleet_kill_checked_outside)
{
    const char *bin = relay_bin();
    char fleet[64], line[256], backend[64], relay[64], url[96];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay"));

    pid_t bpid, rpid, lpid;
    char *bargv[] = { (char *)bin, "--backend", "127.0.0.1:0", NULL };
    int bfd = spawn(bargv, &bpid, NULL, NULL);
    read_line(bfd, line, sizeof line);
    snprintf(backend, sizeof backend, "%s", addr_after(line, "listening on "));

    char *rargv[] = { (char *)bin, "--fleet", fleet, "--listen", "127.0.0.1:0", "--upstream", backend,
                      "--workers", "3", "--upstreams", "3", "--self-reap", NULL };
    int rfd = spawn(rargv, &rpid, NULL, NULL);
    read_line(rfd, line, sizeof line);
    snprintf(relay, sizeof relay, "%s", addr_after(line, " workers on "));
    snprintf(url, sizeof url, "http://%s/", relay);

    char *largv[] = { (char *)bin, "--load", url, "--connections", "24", "--duration", "3", "--json", NULL };
    int lfd = spawn(largv, &lpid, NULL, NULL);

    struct outside o = { 0 };
    ck_assert_int_eq(orbit_fleet_observe(fleet, &o.f), 0);
    ck_assert_int_eq(orbit_pool_open_existing(o.f, ORBIT_POOL_KIND, &o.pool), 0);
    ck_assert_int_eq(orbit_streams_open_existing(o.f, ORBIT_STREAM_KIND, &o.streams), 0);
    /* Let the load get going, then kill an owner of an upstream mid-run. */
    for (int i = 0; i < 200 && !find_key(&o); i++)
        tu_sleep_ms(10);
    tu_sleep_ms(1000);
    ck_assert(find_key(&o));
    pid_t victim = 0;
    uint64_t victim_inc = kill_an_owner(&o, &victim);

    char result[2048];
    read_all(lfd, result, sizeof result);
    close(lfd);
    int lstatus = tu_wait_child(lpid, 30000);
    bool load_clean = ju64(result, "ok") > 0 && ju64(result, "failed") == 0 && ju64(result, "bad_body") == 0;
    if (!load_clean)
        print_relay_stats(bin, fleet);   /* the per-worker gauges say where a request stuck */
    ck_assert_msg(load_clean, "the load saw failures: %s", result);
    /* lost: only requests in flight on the killed worker, one per connection at most */
    ck_assert_int_le(ju64(result, "lost"), 24);
    ck_assert_int_eq(lstatus, ju64(result, "lost") > 0 ? 1 : 0);

    /* Once quiet: no unit held, nothing owned by the dead, no stream left. */
    struct quiet q;
    int64_t end = tu_now_ns() + 5000000000ll;
    for (;;) {
        uint32_t v = 0;
        orbit_pool_version(o.pool, o.key, &v);
        look(&o, victim_inc, victim, &q);
        if (is_quiet(&q) || tu_now_ns() > end)
            break;
        orbit_pool_wait_capacity(o.pool, o.key, v, 50, &v);
    }
    ck_assert_int_eq(q.reserved, 0);
    ck_assert_int_eq(q.active, 0);
    ck_assert_int_eq(q.victim_owned, 0);
    ck_assert_int_eq(q.creating, 0);
    ck_assert_int_eq(q.live, q.candidates);
    ck_assert_int_le(q.candidates, 3);
    ck_assert_int_eq(q.streams, 0);
    ck_assert(!q.victim_listed);
    ck_assert(q.all_alive);

    orbit_streams_close(o.streams);
    orbit_pool_close(o.pool);
    orbit_fleet_leave(o.f);
    kill(rpid, SIGTERM);
    ck_assert_int_eq(tu_wait_child(rpid, 20000), 0);
    close(rfd);
    kill(bpid, SIGTERM);
    ck_assert_int_eq(tu_wait_child(bpid, 10000), 0);
    close(bfd);
    /* The relay removed its fleet on the way out. */
    ck_assert_int_eq(orbit_fleet_segments(fleet, NULL, 0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("demo");
    TCase *tc = tcase_create("demo");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_demo_with_reaper);
    tcase_add_test(tc, test_demo_supervisor_reaps);
    tcase_add_test(tc, test_demo_readiness_fallback);
    tcase_add_test(tc, test_fleet_kill_checked_outside);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
