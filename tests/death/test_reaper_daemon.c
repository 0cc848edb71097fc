/* SPDX-License-Identifier: MIT */
/* The orbit-reaper daemon: usage, a JSON line per death, clean stop on SIGTERM. */
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include "death_util.h"

static const char *daemon_bin(void)
{
    const char *bin = getenv("ORBIT_REAPER_BIN");
    ck_assert_msg(bin != NULL, "ORBIT_REAPER_BIN is not set");
    return bin;
}

struct daemon { pid_t pid; int out; char buf[8192]; size_t len; };

/* Start orbit-reaper with argv (NULL-terminated, without argv[0]); stdout to a pipe. */
static struct daemon daemon_start(const char *const *args)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *argv[16] = { "orbit-reaper" };
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        dup2(p[1], 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execv(daemon_bin(), (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    struct daemon d = { .pid = pid, .out = p[0] };
    return d;
}

/* The daemon's next output line (without the newline); fails after 10 s. */
static const char *daemon_line(struct daemon *d, char *line, size_t cap)
{
    for (;;) {
        char *nl = memchr(d->buf, '\n', d->len);
        if (nl) {
            size_t n = (size_t)(nl - d->buf);
            ck_assert_uint_lt(n, cap);
            memcpy(line, d->buf, n);
            line[n] = '\0';
            memmove(d->buf, nl + 1, d->len - n - 1);
            d->len -= n + 1;
            return line;
        }
        struct pollfd pfd = { .fd = d->out, .events = POLLIN };
        ck_assert_msg(poll(&pfd, 1, 10000) == 1, "no output from orbit-reaper for 10 s");
        ssize_t got = read(d->out, d->buf + d->len, sizeof d->buf - d->len);
        ck_assert_msg(got > 0, "orbit-reaper closed its output: %.*s", (int)d->len, d->buf);
        d->len += (size_t)got;
    }
}

static int run_status(const char *const *args)
{
    struct daemon d = daemon_start(args);
    close(d.out);
    return tu_wait_child(d.pid, 10000);
}

START_TEST(test_usage)
{
    const char *help[] = { "--help", NULL };
    struct daemon d = daemon_start(help);
    char line[512];
    ck_assert_ptr_nonnull(strstr(daemon_line(&d, line, sizeof line), "usage: orbit-reaper"));
    close(d.out);
    ck_assert_int_eq(tu_wait_child(d.pid, 10000), 0);
    const char *none[] = { NULL };
    ck_assert_int_eq(run_status(none), 2);
    const char *both[] = { "--all", "--fleet", "x", NULL };
    ck_assert_int_eq(run_status(both), 2);
    const char *bad_backend[] = { "--all", "--backend", "ebpf", NULL };
    ck_assert_int_eq(run_status(bad_backend), 2);
    const char *bad_interval[] = { "--all", "--interval", "0", NULL };
    ck_assert_int_eq(run_status(bad_interval), 2);
    const char *bad_name[] = { "--fleet", "no/slash", NULL };
    ck_assert_int_eq(run_status(bad_name), 2);   /* a bad argument, refused before any work */
    if (!DEATH_HAVE_BPF) {
        const char *bpf[] = { "--all", "--backend", "bpf", NULL };
        ck_assert_int_eq(run_status(bpf), 1);
    }
}
END_TEST

START_TEST(test_death_line)
{
    const char *backend = orbit_reaper_backend_name(death_backends[_i]);
    if (death_backends[_i] == ORBIT_REAPER_BPF && (!DEATH_HAVE_BPF || geteuid() != 0)) {
        tu_skip("daemon death line: bpf backend unavailable");
        return;
    }
    const char *name = tu_fleet_name("daemon");
    struct member m = member_fork(name, member_join_only, NULL);
    uint16_t node = (uint16_t)member_wait_ready(&m);
    const char *args[] = { "--fleet", name, "--backend", backend, "--interval", "10", NULL };
    struct daemon d = daemon_start(args);
    char line[2048], want[256];
    /* The start line comes after the first read of the fleet: the member is watched. */
    daemon_line(&d, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, "\"event\":\"start\""));
    snprintf(want, sizeof want, "\"backend\":\"%s\"", backend);
    ck_assert_ptr_nonnull(strstr(line, want));

    ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
    daemon_line(&d, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, "\"event\":\"death\""));
    snprintf(want, sizeof want, "\"fleet\":\"%s\",\"node\":%u,\"pid\":%d,", name, node, (int)m.pid);
    ck_assert_msg(strstr(line, want) != NULL, "%s lacks %s", line, want);
    ck_assert_ptr_nonnull(strstr(line, "\"source\":\"exit\""));
    /* 64-bit values are JSON strings; 32-bit ones (node, pid, tables, chunks) numbers. */
    ck_assert_ptr_nonnull(strstr(line, ",\"start_time\":\""));
    ck_assert_ptr_nonnull(strstr(line, ",\"incarnation\":\""));
    ck_assert_ptr_nonnull(strstr(line, ",\"detect_to_reclaim_us\":\""));
    ck_assert_ptr_nonnull(strstr(line, "\"pool\":{\"resources\":0,\"units\":\"0\",\"leases\":\"0\","
                                       "\"creating\":\"0\"}"));
    ck_assert_ptr_nonnull(strstr(line, "\"reclaimed\":{\"tables\":0,"));
    ck_assert_ptr_nonnull(strstr(line, "\"arena\":{\"chunks\":0,\"bytes\":\"0\"}}"));
    if (death_backends[_i] == ORBIT_REAPER_BPF)
        ck_assert_ptr_nonnull(strstr(line, "\"status\":9,\"exit_code\":null,\"signal\":9"));
    /* The pidfd turned readable at the exit: the latency from exit to reclaim is known, and the
     * status, which only the member's parent (this test, not yet reaping) can read, says why not. */
    ck_assert_msg(strstr(line, ",\"exit_to_reclaim_us\":\""), "%s", line);
    if (death_backends[_i] == ORBIT_REAPER_PIDFD)
        ck_assert_msg(strstr(line, "\"exit_code\":null,\"signal\":null,\"exit_code_unknown\":\"not our child"),
                      "%s", line);
    ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);

    ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
    daemon_line(&d, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, "\"event\":\"stop\",\"reason\":\"SIGTERM\",\"deaths\":\"1\",\"events\":\""));
    ck_assert_int_eq(tu_wait_child(d.pid, 10000), 0);
    close(d.out);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* --all in a private /dev/shm (no hugetlbfs), so only this test's fleet is there. */
START_TEST(test_all_line)
{
    if (geteuid() != 0) {
        tu_skip("--all: needs root for a private /dev/shm");
        return;
    }
    ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
    ck_assert_int_eq(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    ck_assert_int_eq(mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777"), 0);
    setenv("ORBIT_HUGETLB_DIR", "", 1);
    const char *name = tu_fleet_name("dall");
    struct member m = member_fork(name, member_join_only, NULL);
    member_wait_ready(&m);
    const char *args[] = { "--all", "--interval", "10", NULL };
    struct daemon d = daemon_start(args);
    char line[2048], want[256];
    daemon_line(&d, line, sizeof line);
    snprintf(want, sizeof want, "\"backend\":\"%s\"", DEATH_HAVE_BPF ? "bpf" : "pidfd");
    ck_assert_ptr_nonnull(strstr(line, want));
    ck_assert_ptr_nonnull(strstr(line, "\"all\":true,\"fleets\":[]"));
    ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
    daemon_line(&d, line, sizeof line);
    snprintf(want, sizeof want, "\"event\":\"death\",\"fleet\":\"%s\"", name);
    ck_assert_msg(strstr(line, want) != NULL, "%s lacks %s", line, want);
    ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);
    ck_assert_int_eq(kill(d.pid, SIGINT), 0);
    daemon_line(&d, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, "\"event\":\"stop\",\"reason\":\"SIGINT\",\"deaths\":\"1\","));
    ck_assert_int_eq(tu_wait_child(d.pid, 10000), 0);
    close(d.out);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

static Suite *daemon_suite(void)
{
    Suite *s = suite_create("orbit-reaper");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_usage);
    TCase *optional = tu_optional_tcase("bpf_or_root");
    tcase_set_timeout(optional, 60);
    DEATH_ADD_BACKENDS(tc, optional, test_death_line);
    tcase_add_test(optional, test_all_line);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, optional);
    return s;
}

int main(void)
{
    return tu_run(daemon_suite());
}
