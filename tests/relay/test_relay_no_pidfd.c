/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay where pidfd_open(2) is refused (valgrind, some seccomp
 * profiles; here the no-pidfd launcher, ENOSYS): SIGTERM still stops the
 * fleet gracefully. A request in flight when the supervisor is told to stop
 * is answered whole before its worker exits (the supervisor SIGKILLed its
 * workers at once: the client's connection was cut), then the idle
 * connection is closed, and the relay exits well within the drain timeout.
 */
#include "relay_harness.h"

static struct backend_seen *seen;
static uint16_t backend_port;

START_TEST(sigterm_drains_without_pidfd)
{
    const char *launcher = getenv("NO_PIDFD");
    ck_assert_msg(launcher, "NO_PIDFD names no launcher");
    char fleet[64];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("relay-nopidfd"));
    pid_t pid;
    uint16_t port = relay_start_under(launcher, fleet, backend_port, (char *[]){ "--workers", "2", NULL }, &pid);
    char buf[4096];
    int fd = connect_to(port);
    put_str(fd, "GET /warm HTTP/1.1\r\nHost: t\r\n\r\n");   /* the connection is served: a worker holds it */
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "got '%.60s'", buf);
    put_str(fd, "GET /delay HTTP/1.1\r\nHost: t\r\n\r\n");    /* answered a second late */
    tu_sleep_ms(300);
    int64_t t0 = tu_now_ns();
    kill(pid, SIGTERM);
    read_response(fd, buf, sizeof buf, 5000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "\r\n\r\n/delay"),
                  "the request in flight at SIGTERM: got '%.80s'", buf);
    ck_assert_msg(closed_within(fd, 3000), "the connection stayed open, idle, while its worker stopped");
    close(fd);
    int status = tu_wait_child(pid, 10000);
    ck_assert_msg(status == 0, "the relay exited %d", status);
    ck_assert_int_lt(tu_now_ns() - t0, 5000000000ll);   /* within the drain, not at its deadline */
}
END_TEST

int main(void)
{
    pid_t bpid;
    backend_port = backend_start(&bpid, &seen);
    Suite *s = suite_create("relay_no_pidfd");
    TCase *tc = tcase_create("drain");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, sigterm_drains_without_pidfd);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    kill(bpid, SIGKILL);
    waitpid(bpid, NULL, 0);
    return rc;
}
