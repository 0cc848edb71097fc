/* SPDX-License-Identifier: MIT */
/*
 * The contract every liborbit-reaper backend keeps (bpf/backend.h), run
 * against each ops table: an exit of a watched process comes out of next
 * (key, pid, start time, status, exit time) and its descriptor turns
 * readable; an unwatched one never does; next never writes past max; a
 * per-member backend refuses a process it cannot pin. The hub's tests
 * (test_death) check what a user sees; these check what the hub may rely
 * on, so that a backend added later is held to the same.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <check.h>
#include <orbit/inspect.h>
#include "backend.h"
#include "death_util.h"

/* Check loop index -> the ops table under test (death_backends' order). */
static const struct rp_backend_ops *const backend_ops[] = { &rp_bpf_backend, &rp_pidfd_backend };

/* The backend under test, open; NULL (skipped) where BPF cannot load, as death_open says. */
static struct rp_backend *backend_open(int idx)
{
    const struct rp_backend_ops *ops = backend_ops[idx];
    struct rp_backend *b = NULL;
    char why[384] = "";
    int rc = ops->open(&b, why, sizeof why);
    if (ops->kind == ORBIT_REAPER_BPF && !DEATH_HAVE_BPF) {
        ck_assert_int_eq(rc, -ORBIT_ENOTSUP);
        ck_assert_ptr_nonnull(strstr(why, "built without BPF"));
        tu_skip("bpf backend: built without BPF");
        return NULL;
    }
    if (ops->kind == ORBIT_REAPER_BPF && geteuid() != 0) {
        ck_assert_int_lt(rc, 0);
        ck_assert_str_ne(why, "");
        tu_skip("bpf backend: not root");
        return NULL;
    }
    ck_assert_msg(rc == 0, "open backend %d: %s (%s)", (int)ops->kind, orbit_strerror(rc), why);
    ck_assert_int_ge(ops->fd(b), 0);
    return b;
}

/* A child that waits to be killed, and its start time. */
static pid_t sleeper(uint64_t *start_time)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (;;)
            pause();
    }
    /* /proc shows the child from fork on: its start time is fixed by then. */
    ck_assert_int_eq(orbit_process_start_time(pid, start_time), 0);
    return pid;
}

/* The key a test watches a process under: a per-tgid backend's key is the tgid. */
static uint64_t key_for(const struct rp_backend_ops *ops, pid_t pid, uint64_t tag)
{
    return ops->per_tgid ? (uint64_t)pid : tag;
}

/* A sleeper the backend watches, under a key of tag's (a per-tgid backend's: its tgid). */
struct watched {
    pid_t pid;
    uint64_t start, key;
};

static struct watched watch_sleeper(const struct rp_backend_ops *ops, struct rp_backend *b, uint64_t tag)
{
    struct watched w;
    w.pid = sleeper(&w.start);
    w.key = key_for(ops, w.pid, tag);
    ck_assert_int_eq(ops->watch(b, w.key, w.pid, w.start), 0);
    return w;
}

/* next until it gives at least one event (or timeout_ms passes): their count, at most max. */
static int next_within(const struct rp_backend_ops *ops, struct rp_backend *b, struct rp_event *out, size_t max,
                       int timeout_ms)
{
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        uint64_t lost = 99;
        int n = ops->next(b, out, max, &lost);
        ck_assert_msg(n >= 0, "next: %s", orbit_strerror(n));
        ck_assert_uint_eq(lost, 0);   /* a few exits fill no ring */
        ck_assert_int_le(n, (int)max);
        if (n > 0 || tu_now_ns() >= end)
            return n;
        struct pollfd pfd = { .fd = ops->fd(b), .events = POLLIN };
        poll(&pfd, 1, 10);
    }
}

START_TEST(test_exit_comes_out_of_next)
{
    const struct rp_backend_ops *ops = backend_ops[_i];
    struct rp_backend *b = backend_open(_i);
    if (!b)
        return;
    struct watched w = watch_sleeper(ops, b, 0x1234500007ull);
    struct rp_event ev[4];
    ck_assert_int_eq(next_within(ops, b, ev, 4, 0), 0);   /* alive: nothing to say */
    uint64_t killed_ns = rp_now_ns();
    kill(w.pid, SIGKILL);
    struct pollfd pfd = { .fd = ops->fd(b), .events = POLLIN };
    ck_assert_int_eq(poll(&pfd, 1, 2000), 1);   /* the hub's epoll sees the exit coming */
    ck_assert_int_eq(next_within(ops, b, ev, 4, 2000), 1);
    ck_assert_uint_eq(ev[0].key, w.key);
    ck_assert_int_eq(ev[0].pid, w.pid);
    ck_assert_uint_eq(ev[0].start_time, w.start);
    ck_assert_int_eq(ev[0].status, SIGKILL);   /* our own child, not reaped yet: both can tell */
    ck_assert_uint_ge(ev[0].exit_ns, killed_ns);
    ck_assert_uint_le(ev[0].exit_ns, rp_now_ns());
    ck_assert_int_eq(next_within(ops, b, ev, 4, 50), 0);   /* said once */
    ck_assert_int_eq(ops->unwatch(b, w.key), 0);
    ck_assert_int_eq(tu_wait_child(w.pid, 2000), 128 + SIGKILL);
    ops->close(b);
}
END_TEST

START_TEST(test_unwatched_exit_is_not_reported)
{
    const struct rp_backend_ops *ops = backend_ops[_i];
    struct rp_backend *b = backend_open(_i);
    if (!b)
        return;
    struct watched w = watch_sleeper(ops, b, 7);
    ck_assert_int_eq(ops->unwatch(b, w.key), 0);
    kill(w.pid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(w.pid, 2000), 128 + SIGKILL);
    struct rp_event ev[4];
    ck_assert_int_eq(next_within(ops, b, ev, 4, 100), 0);
    ops->close(b);
}
END_TEST

START_TEST(test_next_stays_within_max)
{
    const struct rp_backend_ops *ops = backend_ops[_i];
    struct rp_backend *b = backend_open(_i);
    if (!b)
        return;
    struct watched w[3];
    for (int i = 0; i < 3; i++)
        w[i] = watch_sleeper(ops, b, 100u + (unsigned)i);
    for (int i = 0; i < 3; i++) {
        kill(w[i].pid, SIGKILL);
        ck_assert_int_eq(tu_wait_child(w[i].pid, 2000), 128 + SIGKILL);
    }
    /* Room for one at a time: each call gives one, the rest wait for the next call. */
    struct rp_event ev[2];
    int seen = 0;
    for (int tries = 0; seen < 3 && tries < 3; tries++) {
        ev[1].key = 0xdeadull;   /* next writes out[0] only */
        int n = next_within(ops, b, ev, 1, 2000);
        ck_assert_int_eq(n, 1);
        ck_assert_uint_eq(ev[1].key, 0xdeadull);
        seen++;
    }
    ck_assert_int_eq(seen, 3);
    ck_assert_int_eq(next_within(ops, b, ev, 1, 50), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ops->unwatch(b, w[i].key), 0);
    ops->close(b);
}
END_TEST

/* A per-member backend pins the process it watches: another start time is another process. */
START_TEST(test_per_member_refuses_what_it_cannot_pin)
{
    struct rp_backend *b = backend_open(1);
    const struct rp_backend_ops *ops = backend_ops[1];
    ck_assert(!ops->per_tgid);
    uint64_t start;
    pid_t pid = sleeper(&start);
    ck_assert_int_eq(ops->watch(b, 1, pid, start + 1), -ESRCH);
    ck_assert_int_eq(ops->watch(b, 2, 0, 0), -ESRCH);
    ck_assert_int_eq(ops->unwatch(b, 1), -ENOENT);   /* nothing was watched under it */
    kill(pid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(pid, 2000), 128 + SIGKILL);
    ops->close(b);
}
END_TEST

static Suite *backend_suite(void)
{
    Suite *s = suite_create("reaper_backend");
    TCase *tc = tcase_create("contract");
    TCase *bpf = tu_optional_tcase("bpf");
    DEATH_ADD_BACKENDS(tc, bpf, test_exit_comes_out_of_next);
    DEATH_ADD_BACKENDS(tc, bpf, test_unwatched_exit_is_not_reported);
    DEATH_ADD_BACKENDS(tc, bpf, test_next_stays_within_max);
    tcase_add_test(tc, test_per_member_refuses_what_it_cannot_pin);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, bpf);
    return s;
}

int main(void)
{
    return tu_run(backend_suite());
}
