/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay where io_uring is refused, as Docker's default seccomp profile
 * and containerd's RuntimeDefault refuse it: under a seccomp filter that
 * answers io_uring_setup, io_uring_enter and io_uring_register with EPERM
 * (or ENOSYS), every mode that runs on io_uring (the fleet, --backend,
 * --load, --demo) exits 1 at once with one line on stderr that names the
 * filter, the sysctl kernel.io_uring_disabled and its value, and what lifts
 * the refusal; the fleet mode forks no worker and creates nothing (and a
 * worker that cannot start for another reason ends the start at once). The
 * sysctl itself is machine-wide and not changed here: the line reads it.
 *
 * The filter is the shared launcher's (tests/common/seccomp-no-uring, as
 * `./orbit test` runs the seccomp suite under it): it loads the filter with
 * no_new_privs, as an unprivileged container runtime sets it, and executes
 * the relay, so it holds for the relay and everything the relay forks.
 */
#include <errno.h>
#include <orbit/orbit.h>
#include "relay_harness.h"

/* The launcher that runs a program with io_uring refused (SECCOMP_NO_URING, from meson). */
static const char *launcher(void)
{
    const char *p = getenv("SECCOMP_NO_URING");
    ck_assert_msg(p && *p, "SECCOMP_NO_URING is not set (tests/relay/meson.build sets it)");
    return p;
}

struct run { int status; int64_t ms; char err[4096], out[4096]; };

/* Runs the relay with args under the filter (err: an errno name; NULL: none) with env set
 * (or NULL); its exit status, wall time, stderr and stdout. */
static void run_relay(const char *err, const char *env, char *const args[], struct run *r)
{
    int ep[2], op[2];
    ck_assert_int_eq(pipe(ep), 0);
    ck_assert_int_eq(pipe(op), 0);
    int64_t t0 = tu_now_ns();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(ep[1], 2);
        dup2(op[1], 1);
        if (env)
            putenv((char *)env);
        char *argv[28];
        int n = 0;
        if (err) {
            argv[n++] = (char *)launcher();
            argv[n++] = (char *)"--errno";
            argv[n++] = (char *)err;
        }
        argv[n++] = (char *)relay_bin();
        for (int i = 0; args[i] && n < 27; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], argv);
        _exit(127);
    }
    close(ep[1]);
    close(op[1]);
    read_until(ep[0], r->err, sizeof r->err, NULL, 20000);
    read_until(op[0], r->out, sizeof r->out, NULL, 1000);
    close(ep[0]);
    close(op[0]);
    r->status = tu_wait_child(pid, 20000);
    r->ms = (tu_now_ns() - t0) / 1000000;
}

/* The sysctl as the relay should name it. */
static void sysctl_text(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
    long v;
    if (f && fscanf(f, "%ld", &v) == 1)
        snprintf(buf, cap, "kernel.io_uring_disabled = %ld", v);
    else
        snprintf(buf, cap, "kernel.io_uring_disabled is not on this kernel");
    if (f)
        fclose(f);
}

/* One line, naming the filter, the sysctl and its value, the calls to allow, and the fix. */
static void check_line(const struct run *r, const char *what, const char *errname)
{
    char sysctl[64];
    sysctl_text(sysctl, sizeof sysctl);
    ck_assert_msg(r->status == 1, "%s: exit %d after %lld ms; stderr '%s'", what, r->status, (long long)r->ms, r->err);
    ck_assert_msg(r->ms < 3000, "%s: took %lld ms to give up", what, (long long)r->ms);
    size_t n = strlen(r->err);
    ck_assert_msg(n > 0 && strchr(r->err, '\n') == r->err + n - 1, "%s: not one line: '%s'", what, r->err);
    static const char *const named[] = { "orbit-relay: io_uring is refused here (io_uring_setup: ", "seccomp filter",
                                         "io_uring_enter", "io_uring_register", "--security-opt seccomp=",
                                         "does not start" };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        ck_assert_msg(strstr(r->err, named[i]), "%s: '%s' does not say '%s'", what, r->err, named[i]);
    ck_assert_msg(strstr(r->err, sysctl), "%s: '%s' does not name '%s'", what, r->err, sysctl);
    ck_assert_msg(strstr(r->err, errname), "%s: '%s' does not name %s", what, r->err, errname);
}

START_TEST(fleet_refuses_at_start)
{
    static const struct { const char *err, *text; } errs[] = { { "EPERM", "Operation not permitted" },
                                                              { "ENOSYS", "Function not implemented" } };
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        char fleet[64];
        snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-nouring"));
        struct run r;
        run_relay(errs[i].err, NULL, (char *[]){ "--fleet", fleet, "--listen", "127.0.0.1:0", "--upstream",
                                             "127.0.0.1:9", "--workers", "2", NULL }, &r);
        check_line(&r, "--fleet", errs[i].text);
        ck_assert_msg(r.out[0] == 0, "it said it started: '%s'", r.out);
        /* Nothing of it exists: no worker ever joined the fleet. */
        struct orbit_fleet *f;
        int rc = orbit_fleet_observe(fleet, &f);
        if (rc == 0)
            orbit_fleet_leave(f);
        ck_assert_msg(rc == -ENOENT, "the fleet %s exists (%d): a worker joined it", fleet, rc);
        char stats[128];
        snprintf(stats, sizeof stats, "/dev/shm/orbit-relay.%s", fleet);
        ck_assert_msg(access(stats, F_OK) != 0, "%s was created", stats);
    }
}
END_TEST

START_TEST(other_modes_refuse_at_start)
{
    struct run r;
    run_relay("EPERM", NULL, (char *[]){ "--backend", "127.0.0.1:0", NULL }, &r);
    check_line(&r, "--backend", "Operation not permitted");
    run_relay("EPERM", NULL, (char *[]){ "--load", "http://127.0.0.1:9/", "--requests", "1", NULL }, &r);
    check_line(&r, "--load", "Operation not permitted");
    run_relay("EPERM", NULL, (char *[]){ "--demo", "--duration", "1", NULL }, &r);
    check_line(&r, "--demo", "Operation not permitted");
    /* --stats reads shared memory only: it still runs (and says the fleet is not there). */
    run_relay("EPERM", NULL, (char *[]){ "--stats", "t-relay-nouring-none", NULL }, &r);
    ck_assert_msg(!strstr(r.err, "io_uring"), "--stats: '%s'", r.err);
}
END_TEST

START_TEST(a_worker_that_cannot_start_ends_the_start)
{
    /* A worker that exits before it is ready (here: a bad ORBIT_RELAY_BATCH_NR, which it
     * refuses by name) ends the start at once; the supervisor waited 15 s for it. */
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-nostart"));
    struct run r;
    run_relay(NULL, "ORBIT_RELAY_BATCH_NR=0", (char *[]){ "--fleet", fleet, "--listen", "127.0.0.1:0", "--upstream",
                                                       "127.0.0.1:9", "--workers", "2", NULL }, &r);
    ck_assert_msg(r.status == 1, "exit %d; stderr '%s'", r.status, r.err);
    ck_assert_msg(r.ms < 3000, "took %lld ms to give up", (long long)r.ms);
    ck_assert_msg(strstr(r.err, "ORBIT_RELAY_BATCH_NR=0") && strstr(r.err, "a worker exited before it was ready"),
                  "stderr '%s'", r.err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("relay_no_uring");
    TCase *tc = tcase_create("seccomp");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fleet_refuses_at_start);
    tcase_add_test(tc, other_modes_refuse_at_start);
    tcase_add_test(tc, a_worker_that_cannot_start_ends_the_start);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
