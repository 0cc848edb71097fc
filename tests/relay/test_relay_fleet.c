/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's processes: a worker killed with SIGKILL while the relay runs
 * as its --help shows (no reaper, no --self-reap) leaves no upstream held by
 * the dead node, and the next load sees no timeout; a worker out of file
 * descriptors leaves connections in the backlog without spinning on accept.
 */
#include <sys/resource.h>
#include <orbit/pool.h>
#include "relay_harness.h"
#include "jsonflat.h"

/* Runs argv to its end; its stdout into out. Returns its exit status. */
static int run_out(char *const argv[], char *out, size_t cap, int timeout_ms)
{
    pid_t pid;
    int fd = spawn_out(argv, &pid);
    read_until(fd, out, cap, NULL, timeout_ms);
    close(fd);
    return tu_wait_child(pid, timeout_ms);
}

/* Upstreams of the backend's key still owned by that incarnation. */
static long owned_by(struct orbit_pool *pool, uint64_t incarnation)
{
    struct orbit_pool_key_info k[4];
    if (orbit_pool_keys(pool, k, 4) != 1)
        return 0;
    struct orbit_candidate c[256];
    ssize_t n = orbit_pool_candidates(pool, k[0].key, c, 256);
    long owned = 0;
    for (ssize_t i = 0; i < n && i < 256; i++)
        owned += c[i].owner_incarnation == incarnation;
    return owned;
}

/* Kills (SIGKILL) the worker owning the key's first upstream; its incarnation. */
static uint64_t kill_an_owner(struct orbit_fleet *f, struct orbit_pool *pool)
{
    struct orbit_pool_key_info k[4];
    for (int i = 0; i < 300 && orbit_pool_keys(pool, k, 4) != 1; i++)
        tu_sleep_ms(10);
    ck_assert_int_eq(orbit_pool_keys(pool, k, 4), 1);
    struct orbit_candidate c[16];
    ck_assert_int_gt(orbit_pool_candidates(pool, k[0].key, c, 16), 0);
    struct orbit_node_info nodes[32];
    ssize_t nn = orbit_fleet_nodes(f, nodes, 32);
    for (ssize_t i = 0; i < nn; i++)
        if (nodes[i].node == c[0].owner && nodes[i].incarnation == c[0].owner_incarnation) {
            ck_assert_int_eq(kill(nodes[i].pid, SIGKILL), 0);
            return c[0].owner_incarnation;
        }
    ck_abort_msg("the owner is not in the node table");
    return 0;
}

/* orbit-relay --backend on an ephemeral port: its port (the caller stops *pid and closes *fd). */
static uint16_t origin_start(const char *bin, pid_t *pid, int *fd)
{
    char line[256];
    *fd = spawn_out((char *[]){ (char *)bin, "--backend", "127.0.0.1:0", NULL }, pid);
    read_until(*fd, line, sizeof line, "\n", 10000);
    char *p = strstr(line, "listening on ");
    ck_assert_ptr_nonnull(p);
    char *colon = strchr(p + 13, ':');
    ck_assert_ptr_nonnull(colon);
    return (uint16_t)atoi(colon + 1);
}

/* A 3 s load through url; 1 s in, a worker owning an upstream is killed -9, and 2 s
 * later no upstream is owned by it. The load saw no timeout. Returns its incarnation. */
static uint64_t kill_an_owner_under_load(const char *bin, const char *url, struct orbit_fleet *f,
                                         struct orbit_pool *pool)
{
    char out[4096];
    pid_t lpid;
    int lfd = spawn_out((char *[]){ (char *)bin, "--load", (char *)url, "--connections", "24", "--duration",
                                    "3", "--json", NULL }, &lpid);
    tu_sleep_ms(1000);
    uint64_t victim = kill_an_owner(f, pool);
    tu_sleep_ms(2000);
    ck_assert_msg(owned_by(pool, victim) == 0, "%ld upstreams still owned by the dead worker 2 s later",
                  owned_by(pool, victim));
    read_until(lfd, out, sizeof out, NULL, 20000);
    close(lfd);
    tu_wait_child(lpid, 20000);
    ck_assert_int_gt(ju64(out, "ok"), 0);
    ck_assert_int_eq(ju64(out, "timeouts"), 0);
    return victim;
}

/* The next load run: nothing starves, nothing fails. */
static void next_run_is_clean(const char *bin, const char *url)
{
    char out[4096];
    run_out((char *[]){ (char *)bin, "--load", (char *)url, "--connections", "24", "--duration", "2", "--json",
                        NULL }, out, sizeof out, 20000);
    ck_assert_int_gt(ju64(out, "ok"), 0);
    ck_assert_msg(ju64(out, "timeouts") == 0 && ju64(out, "failed") == 0, "after the kill: %s", out);
}

START_TEST(killed_worker_leaks_no_upstream)
{
    const char *bin = relay_bin();
    char fleet[64], url[96];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-kill"));
    pid_t bpid, rpid;
    int bfd;
    uint16_t bport = origin_start(bin, &bpid, &bfd);
    uint16_t port = relay_start(fleet, bport, NULL, &rpid);   /* as --help shows: no reaper, no --self-reap */
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", port);

    struct orbit_fleet *f;
    struct orbit_pool *pool;
    ck_assert_int_eq(orbit_fleet_observe(fleet, &f), 0);
    ck_assert_int_eq(orbit_pool_open_existing(f, ORBIT_POOL_KIND, &pool), 0);
    kill_an_owner_under_load(bin, url, f, pool);
    /* The next run: nothing starves. */
    next_run_is_clean(bin, url);
    orbit_pool_close(pool);
    orbit_fleet_leave(f);
    relay_stop(rpid);
    kill(bpid, SIGTERM);
    tu_wait_child(bpid, 5000);
    close(bfd);
}
END_TEST

/* The relay's worker pids (its supervisor's children). */
static int worker_pids(pid_t sup, pid_t *out, int max)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", sup, sup);
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    int k = 0;
    for (char *t = strtok(buf, " \n"); t && k < max; t = strtok(NULL, " \n"))
        out[k++] = atoi(t);
    return k;
}

/* CPU time (clock ticks) a process used so far. */
static long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st), 2);
    return (long)(ut + st);
}

static int open_fds(pid_t pid)
{
    char cmd[96], out[32];
    snprintf(cmd, sizeof cmd, "ls /proc/%d/fd | wc -l", pid);
    FILE *fp = popen(cmd, "r");
    ck_assert_ptr_nonnull(fp);
    ck_assert_ptr_nonnull(fgets(out, sizeof out, fp));
    pclose(fp);
    return atoi(out);
}

START_TEST(out_of_descriptors_does_not_spin)
{
    pid_t bpid, rpid, w[8];
    struct backend_seen *seen;
    uint16_t bport = backend_start(&bpid, &seen);
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-emfile"));
    uint16_t port = relay_start(fleet, bport, (char *[]){ "--workers", "2", NULL }, &rpid);
    int nw = worker_pids(rpid, w, 8);
    ck_assert_int_eq(nw, 2);
    struct rlimit old[8];
    for (int i = 0; i < nw; i++) {
        ck_assert_int_eq(prlimit(w[i], RLIMIT_NOFILE, NULL, &old[i]), 0);
        struct rlimit low = { .rlim_cur = (rlim_t)open_fds(w[i]) + 1, .rlim_max = old[i].rlim_max };
        ck_assert_int_eq(prlimit(w[i], RLIMIT_NOFILE, &low, NULL), 0);
    }
    int fds[40];
    for (int i = 0; i < 40; i++)
        fds[i] = connect_to(port);
    tu_sleep_ms(300);
    long t0 = 0, t1 = 0;
    for (int i = 0; i < nw; i++)
        t0 += cpu_ticks(w[i]);
    tu_sleep_ms(1500);
    for (int i = 0; i < nw; i++)
        t1 += cpu_ticks(w[i]);
    long hz = sysconf(_SC_CLK_TCK);
    ck_assert_msg(t1 - t0 < hz / 4, "the workers used %ld ticks in 1.5 s out of descriptors", t1 - t0);
    /* Descriptors back: the connections that waited in the backlog are served. */
    for (int i = 0; i < nw; i++)
        ck_assert_int_eq(prlimit(w[i], RLIMIT_NOFILE, &old[i], NULL), 0);
    char buf[1024];
    put_str(fds[39], "GET /late HTTP/1.1\r\nHost: t\r\n\r\n");
    read_response(fds[39], buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.40s'", buf);
    for (int i = 0; i < 40; i++)
        close(fds[i]);
    relay_stop(rpid);
    kill(bpid, SIGKILL);
    waitpid(bpid, NULL, 0);
}
END_TEST

/* The key's upstreams once the fleet is quiet: none reserved or active, none owned by the
 * dead incarnation, none being created, and the budget's live count equal to what is listed. */
static void check_pool_quiet(struct orbit_pool *pool, uint64_t victim)
{
    struct orbit_pool_key_info k[4];
    ck_assert_int_eq(orbit_pool_keys(pool, k, 4), 1);
    struct orbit_candidate c[256];
    ssize_t n = 0;
    uint64_t reserved = 0, active = 0, dead = 0;
    uint32_t live = 0, creating = 0;
    for (int tries = 0; tries < 50; tries++) {   /* the last responses drain for a moment */
        n = orbit_pool_candidates(pool, k[0].key, c, 256);
        reserved = active = dead = 0;
        for (ssize_t i = 0; i < n && i < 256; i++) {
            reserved += c[i].reserved;
            active += c[i].active;
            dead += c[i].owner_incarnation == victim;
        }
        orbit_pool_budget(pool, k[0].key, &live, &creating);
        if (reserved == 0 && active == 0 && dead == 0 && creating == 0 && live == (uint32_t)n)
            break;
        tu_sleep_ms(100);
    }
    ck_assert_msg(reserved == 0 && active == 0 && dead == 0 && creating == 0 && live == (uint32_t)n,
                  "reserved %llu active %llu owned by the dead %llu creating %u live %u listed %zd",
                  (unsigned long long)reserved, (unsigned long long)active, (unsigned long long)dead,
                  creating, live, n);
}

START_TEST(relay_and_reaper_both_report)
{
    /* The relay as --help shows (its supervisor reports its dead workers) beside an
     * orbit-reaper watching the same fleet: both see the kill -9; the fleet comes out
     * whole either way round. */
    const char *bin = relay_bin(), *reaper = getenv("ORBIT_REAPER_BIN");
    ck_assert_msg(reaper && access(reaper, X_OK) == 0, "ORBIT_REAPER_BIN names no program");
    char fleet[64], line[512], url[96], out[4096], stats[16384];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-reaper"));
    pid_t bpid, rpid, dpid;
    int bfd;
    uint16_t port = relay_start(fleet, origin_start(bin, &bpid, &bfd), NULL, &rpid);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", port);
    int dfd = spawn_out((char *[]){ (char *)reaper, "--fleet", fleet, "--interval", "50", NULL }, &dpid);
    read_until(dfd, line, sizeof line, "\n", 10000);
    if (!strstr(line, "\"event\":\"start\"")) {
        tu_skip("orbit-reaper does not run here (no BPF and no pidfd backend?)");
        kill(dpid, SIGKILL);
        tu_wait_child(dpid, 5000);
        relay_stop(rpid);
        kill(bpid, SIGTERM);
        tu_wait_child(bpid, 5000);
        return;
    }
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    ck_assert_int_eq(orbit_fleet_observe(fleet, &f), 0);
    ck_assert_int_eq(orbit_pool_open_existing(f, ORBIT_POOL_KIND, &pool), 0);
    uint64_t victim = kill_an_owner_under_load(bin, url, f, pool);
    check_pool_quiet(pool, victim);
    /* The supervisor reported its child and replaced it, once. */
    ck_assert_int_eq(run_out((char *[]){ (char *)bin, "--stats", fleet, "--json", NULL }, stats, sizeof stats,
                             10000), 0);
    ck_assert_int_eq(ju64(stats, "deaths"), 1);
    ck_assert_int_eq(ju64(stats, "restarts"), 1);
    ck_assert_int_eq(ju64(stats, "death_reports"), 1);
    /* The next run: nothing starves, nothing fails. */
    next_run_is_clean(bin, url);
    check_pool_quiet(pool, victim);
    /* The reaper is still up, saw at most that one death, and stops cleanly. */
    ck_assert_int_eq(kill(dpid, SIGTERM), 0);
    read_until(dfd, out, sizeof out, "\"event\":\"stop\"", 10000);
    read_until(dfd, line, sizeof line, "\n", 2000);
    ck_assert_int_eq(tu_wait_child(dpid, 10000), 0);
    close(dfd);
    const char *stop = strstr(out, "\"event\":\"stop\"");
    ck_assert_msg(stop, "no stop line from orbit-reaper: %s", out);
    ck_assert_int_le(ju64(stop, "deaths"), 1);
    orbit_pool_close(pool);
    orbit_fleet_leave(f);
    relay_stop(rpid);
    kill(bpid, SIGTERM);
    tu_wait_child(bpid, 5000);
    close(bfd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("relay_fleet");
    TCase *tc = tcase_create("processes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, killed_worker_leaks_no_upstream);
    tcase_add_test(tc, out_of_descriptors_does_not_spin);
    suite_add_tcase(s, tc);
    TCase *opt = tu_optional_tcase("with_reaper");   /* skips where orbit-reaper cannot run */
    tcase_set_timeout(opt, 60);
    tcase_add_test(opt, relay_and_reaper_both_report);
    suite_add_tcase(s, opt);
    return tu_run(s);
}
