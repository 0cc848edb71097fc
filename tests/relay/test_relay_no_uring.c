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
 * The filter is a raw BPF program loaded in the child before it executes the
 * relay (no_new_privs, as an unprivileged container runtime sets it), so it
 * holds for the relay and everything the relay forks.
 */
#include <errno.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <orbit/orbit.h>
#include "relay_harness.h"

/* io_uring_setup, io_uring_enter and io_uring_register (425..427 on every architecture) get err. */
static int refuse_io_uring(int err)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __NR_io_uring_setup, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, __NR_io_uring_register, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
        return -errno;
    return syscall(__NR_io_uring_setup, 1, NULL) < 0 && errno == err ? 0 : -EPERM;
}

struct run { int status; int64_t ms; char err[4096], out[4096]; };

/* Runs the relay with args under the filter (err; 0: none) with env set (or NULL); its exit
 * status, wall time, stderr and stdout. */
static void run_relay(int err, const char *env, char *const args[], struct run *r)
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
        if (err && refuse_io_uring(err) < 0) {
            fprintf(stderr, "the filter did not load\n");
            _exit(125);
        }
        char *argv[24] = { (char *)relay_bin() };
        for (int i = 0; args[i] && i < 22; i++)
            argv[i + 1] = args[i];
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
    static const struct { int err; const char *text; } errs[] = { { EPERM, "Operation not permitted" },
                                                                  { ENOSYS, "Function not implemented" } };
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
    run_relay(EPERM, NULL, (char *[]){ "--backend", "127.0.0.1:0", NULL }, &r);
    check_line(&r, "--backend", "Operation not permitted");
    run_relay(EPERM, NULL, (char *[]){ "--load", "http://127.0.0.1:9/", "--requests", "1", NULL }, &r);
    check_line(&r, "--load", "Operation not permitted");
    run_relay(EPERM, NULL, (char *[]){ "--demo", "--duration", "1", NULL }, &r);
    check_line(&r, "--demo", "Operation not permitted");
    /* --stats reads shared memory only: it still runs (and says the fleet is not there). */
    run_relay(EPERM, NULL, (char *[]){ "--stats", "t-relay-nouring-none", NULL }, &r);
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
    run_relay(0, "ORBIT_RELAY_BATCH_NR=0", (char *[]){ "--fleet", fleet, "--listen", "127.0.0.1:0", "--upstream",
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
