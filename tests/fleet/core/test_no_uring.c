/* SPDX-License-Identifier: MIT */
/*
 * Where io_uring is refused (a seccomp filter returning EPERM, as Docker's
 * default profile, containerd's RuntimeDefault and Android do, or
 * kernel.io_uring_disabled) the library falls back at run time, with no error:
 * the probe says there are no io_uring futex waits and why, the io_uring
 * preps refuse with that reason in orbit_last_error, readiness descriptors
 * are driven by a thread, and blocking waits and death waits park in
 * futex(2) across real processes. The test runs itself under
 * tests/common/seccomp-no-uring (SECCOMP_NO_URING) unless it is filtered already.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <orbit/uring.h>
#include "proc.h"

static char self_path[4096];

static bool io_uring_refused(void)
{
    long rc = syscall(SYS_io_uring_setup, 0u, NULL);   /* EFAULT where io_uring is allowed */
    return rc < 0 && errno == EPERM;
}

static int tasks(void)
{
    char path[64];
    int n = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)getpid());
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

START_TEST(the_probe_says_no_io_uring_and_names_the_seccomp_filter)
{
    ck_assert(io_uring_refused());
    ck_assert(!orbit_uring_futex_supported());
    const char *why = orbit_uring_futex_status();
    ck_assert_msg(strncmp(why, "no io_uring futex waits", 23) == 0 && strstr(why, "seccomp filter") &&
                  strstr(why, "EPERM"), "status: %s", why);
}
END_TEST

START_TEST(the_preps_refuse_with_that_reason_and_leave_a_nop)
{
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(NULL, NULL, &f), 0);
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    struct io_uring_sqe sqe;
    memset(&sqe, 0xff, sizeof sqe);
    sqe.user_data = 42;
    ck_assert_int_eq(orbit_streams_prep_wait_offer(s, &sqe), -ORBIT_ENOTSUP);
    ck_assert_msg(strstr(orbit_last_error(), "orbit_streams_prep_wait_offer: no io_uring futex waits") &&
                  strstr(orbit_last_error(), "seccomp"), "%s", orbit_last_error());
    ck_assert_int_eq(sqe.opcode, IORING_OP_NOP);
    ck_assert_int_eq(sqe.user_data, 42);
    ck_assert_int_eq(orbit_fleet_prep_wait_doorbell(f, &sqe), -ORBIT_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(orbit_last_error(), "seccomp"));
    struct io_uring ring;   /* never set up: attach refuses before looking at it */
    ck_assert_int_eq(orbit_uring_attach_wakes(&ring), -ORBIT_ENOTSUP);
    ck_assert_msg(strstr(orbit_last_error(), "orbit_uring_attach_wakes: no io_uring") &&
                  strstr(orbit_last_error(), "seccomp"), "%s", orbit_last_error());
    orbit_streams_close(s);
    orbit_fleet_leave(f);
}
END_TEST

/* A child joins, offers a stream to node `to`, writes after a pause and exits. */
static void offer_and_write(const char *name, uint16_t to, int pause_ms)
{
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    TP_CHECK(orbit_fleet_join(name, &o, &f) == 0, "join: %s", orbit_last_error());
    TP_CHECK(orbit_streams_open(f, NULL, &s) == 0, "open: %s", orbit_last_error());
    TP_CHECK(orbit_streams_create(s, &a, &t) == 0 && orbit_streams_offer(s, &t, to) == 0, "offer");
    tu_sleep_ms(pause_ms);
    TP_CHECK(orbit_endpoint_write_all(a, "late", 4, 5000) == 0, "write: %s", orbit_last_error());
    TP_CHECK(orbit_endpoint_finish(a) == 0, "finish");
    tu_sleep_ms(300);   /* the reader opens the ticket before the writer's side goes */
    _exit(0);
}

START_TEST(readiness_is_driven_by_a_thread_and_blocking_waits_park_in_futex)
{
    const char *name = tu_fleet_name("nouring");
    struct orbit_fleet *f = tu_join(name, 4, -1, 0, tu_backing());
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open(f, NULL, &s), 0);
    int before = tasks();
    int fd = orbit_streams_readiness(s);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(tasks(), before + 1);   /* the driver thread: no ring could be set up */
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        offer_and_write(name, orbit_fleet_node(f), 150);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 5000), 1);   /* the offer rang the eventfd */
    ck_assert_int_eq(orbit_readiness_drain(fd), 0);
    struct orbit_ticket t;
    struct orbit_endpoint *b;
    ck_assert_int_eq(orbit_streams_take_offer(s, &t), 0);
    ck_assert_int_eq(orbit_streams_open_ticket(s, &t, &b), 0);
    char buf[8] = "";
    struct orbit_stream_stats st0, st1;
    orbit_streams_stats(s, &st0);
    ck_assert_int_eq(orbit_endpoint_read(b, buf, sizeof buf, 5000), 4);   /* waits ~150 ms for them */
    orbit_streams_stats(s, &st1);
    ck_assert_mem_eq(buf, "late", 4);
    ck_assert_uint_gt(st1.parks, st0.parks);   /* it slept in futex(2) */
    ck_assert_int_eq(tu_wait_child(pid, 5000), 0);
    orbit_endpoint_close(b);
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(a_death_wait_parks_in_futex_and_wakes_at_the_kill)
{
    const char *name = tu_fleet_name("nouring-death");
    struct orbit_fleet *f = tu_join(name, 4, -1, 0, tu_backing());
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct orbit_fleet *g;
        struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
        o.capacity = 4;
        TP_CHECK(orbit_fleet_join(name, &o, &g) == 0, "join: %s", orbit_last_error());
        uint16_t node = orbit_fleet_node(g);
        uint64_t inc = orbit_fleet_incarnation(g);
        tp_send(p[1], &node, sizeof node);
        tp_send(p[1], &inc, sizeof inc);
        pause();
        _exit(0);
    }
    close(p[1]);
    uint16_t node;
    uint64_t inc;
    ck_assert_int_eq(read(p[0], &node, sizeof node), sizeof node);
    ck_assert_int_eq(read(p[0], &inc, sizeof inc), sizeof inc);
    ck_assert_int_eq(orbit_fleet_wait_node_death(f, node, inc, 100), -ORBIT_ETIMEDOUT);
    kill(pid, SIGKILL);
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_fleet_wait_node_death(f, node, inc, 5000), 0);
    ck_assert_int_lt(tu_now_ns() - t0, 2000000000LL);
    ck_assert_int_eq(orbit_fleet_reap(f), 1);
    waitpid(pid, NULL, 0);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

/* kernel.io_uring_disabled as the library reads it: a file bound over it in a mount namespace. */
START_TEST(the_sysctl_is_named_with_its_value)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char tmp[] = "/tmp/orbit-uring-disabled-XXXXXX";
        int fd = mkstemp(tmp);
        TP_CHECK(fd >= 0 && write(fd, "2\n", 2) == 2, "mkstemp");
        close(fd);
        TP_CHECK(unshare(CLONE_NEWNS) == 0, "unshare: %s", strerror(errno));
        TP_CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "private");
        TP_CHECK(mount(tmp, "/proc/sys/kernel/io_uring_disabled", NULL, MS_BIND, NULL) == 0,
                 "bind: %s", strerror(errno));
        unlink(tmp);
        dup2(p[1], 1);
        execl(self_path, self_path, "--status", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char out[512] = "";
    ssize_t n = read(p[0], out, sizeof out - 1);
    close(p[0]);
    ck_assert_int_eq(tu_wait_child(pid, 5000), 0);
    ck_assert_int_gt(n, 0);
    ck_assert_msg(strstr(out, "no io_uring futex waits") && strstr(out, "kernel.io_uring_disabled = 2"),
                  "status: %s", out);
}
END_TEST

int main(int argc, char **argv)
{
    unsetenv("ORBIT_DISABLE_URING_FUTEX");   /* the refusal under test is the filter's, not ours */
    if (argc == 2 && strcmp(argv[1], "--status") == 0) {
        printf("%s\n", orbit_uring_futex_status());
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 1;
    self_path[n] = '\0';
    if (!io_uring_refused()) {
        const char *launcher = getenv("SECCOMP_NO_URING");
        if (!launcher || !*launcher) {
            fprintf(stderr, "test_no_uring: io_uring is allowed here and SECCOMP_NO_URING is not set\n");
            return 1;
        }
        execl(launcher, launcher, self_path, (char *)NULL);
        fprintf(stderr, "test_no_uring: %s: %s\n", launcher, strerror(errno));
        return 1;
    }
    Suite *su = suite_create("no_uring");
    TCase *tc = tcase_create("no_uring");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_probe_says_no_io_uring_and_names_the_seccomp_filter);
    tcase_add_test(tc, the_preps_refuse_with_that_reason_and_leave_a_nop);
    tcase_add_test(tc, readiness_is_driven_by_a_thread_and_blocking_waits_park_in_futex);
    tcase_add_test(tc, a_death_wait_parks_in_futex_and_wakes_at_the_kill);
    tcase_add_test(tc, the_sysctl_is_named_with_its_value);
    suite_add_tcase(su, tc);
    return tu_run(su);
}
