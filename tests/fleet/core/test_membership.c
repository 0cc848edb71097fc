/* SPDX-License-Identifier: MIT */
/*
 * Membership where servers run: members in another pid namespace (with its own
 * /proc), another user under hidepid=2, rejoins, death waits with no reaper,
 * and fleets nobody lives in. Real processes and real namespaces (root).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <liburing.h>
#include <orbit/orbit.h>
#include <orbit/uring.h>
#include "ns.h"
#include "proc.h"

#define OTHER_UID 65534

enum where { OUTER, PID_NS, HIDEPID_OTHER_UID };

/* The members' backing: ORBIT_TEST_BACKING, but /dev/shm where another user joins (hugetlbfs
 * mounts are root's). */
static enum orbit_backing backing = ORBIT_BACKING_AUTO;

/* A member process driven over two pipes: it answers 'r' (reap) and 'a' (alive count). */
struct member {
    pid_t pid;          /* the process to kill -9 (as the test's namespace sees it) */
    pid_t waitee;       /* what to waitpid: the intermediate for a namespaced member */
    int cmd, resp;
    uint16_t node;
    uint64_t incarnation;
    int32_t pid_inside;
};

struct member_hello { uint16_t node; uint64_t incarnation; int32_t pid_inside; int rc; };

static void die_with_parent(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static void member_loop(const char *name, enum where where, int node, int cmd, int resp)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.node = node;
    o.backing = backing;
    o.gid = TN_SHARED_GID;
    struct member_hello h = { .pid_inside = (int32_t)getpid() };
    struct orbit_fleet *f = NULL;
    h.rc = where == HIDEPID_OTHER_UID ? tn_become(OTHER_UID) : 0;
    if (h.rc == 0)
        h.rc = orbit_fleet_join(name, &o, &f);
    if (h.rc == 0) {
        h.node = orbit_fleet_node(f);
        h.incarnation = orbit_fleet_incarnation(f);
    }
    tp_send(resp, &h, sizeof h);
    if (h.rc != 0)
        _exit(2);
    for (char c; read(cmd, &c, 1) == 1;) {
        int rc = 0;
        if (c == 'r') {
            rc = orbit_fleet_reap(f);
        } else if (c == 'a') {
            struct orbit_node_info ni[8];
            ssize_t n = orbit_fleet_nodes(f, ni, 8);
            for (ssize_t i = 0; i < n && i < 8; i++)
                rc += ni[i].alive;
        }
        tp_send(resp, &rc, sizeof rc);
    }
    orbit_fleet_leave(f);
    _exit(0);
}

/* The namespaced member: unshare, then a child that is pid 1 with its own /proc. */
static void namespaced(const char *name, enum where where, int node, int cmd, int resp)
{
    int flags = CLONE_NEWNS | (where == PID_NS ? CLONE_NEWPID : 0);
    if (unshare(flags) != 0)
        tp_die("unshare: %s", strerror(errno));
    int go[2];
    if (pipe(go) != 0)
        tp_die("pipe: %s", strerror(errno));
    pid_t inner = fork();
    if (inner < 0)
        tp_die("fork: %s", strerror(errno));
    if (inner == 0) {
        die_with_parent();
        char c;
        if (read(go[0], &c, 1) != 1)   /* the intermediate sends our pid first */
            _exit(2);
        int rc = tn_own_proc(where == HIDEPID_OTHER_UID);
        if (rc < 0)
            tp_die("mount proc: %s", strerror(-rc));
        member_loop(name, where, node, cmd, resp);
    }
    tp_send(resp, &inner, sizeof inner);   /* its pid as the test sees it */
    tp_send(go[1], "g", 1);
    int status;
    waitpid(inner, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static struct member member_start(const char *name, enum where where, int node)
{
    int c[2], r[2];
    ck_assert_int_eq(pipe(c), 0);
    ck_assert_int_eq(pipe(r), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        die_with_parent();
        close(c[1]);
        close(r[0]);
        if (where == OUTER)
            member_loop(name, where, node, c[0], r[1]);
        namespaced(name, where, node, c[0], r[1]);
    }
    close(c[0]);
    close(r[1]);
    struct member m = { .pid = pid, .waitee = pid, .cmd = c[1], .resp = r[0] };
    if (where != OUTER)
        tp_recv(m.resp, &m.pid, sizeof m.pid);
    struct member_hello h;
    tp_recv(m.resp, &h, sizeof h);
    ck_assert_msg(h.rc == 0, "member join: %s", orbit_strerror(h.rc));
    m.node = h.node;
    m.incarnation = h.incarnation;
    m.pid_inside = h.pid_inside;
    return m;
}

static int member_ask(struct member *m, char what)
{
    int rc;
    tp_send(m->cmd, &what, 1);
    tp_recv(m->resp, &rc, sizeof rc);
    return rc;
}

static void member_kill(struct member *m)
{
    kill(m->pid, SIGKILL);
    int status;
    waitpid(m->waitee, &status, 0);
    close(m->cmd);
    close(m->resp);
}

static void member_stop(struct member *m)
{
    close(m->cmd);   /* its loop ends: it leaves and exits */
    int status;
    waitpid(m->waitee, &status, 0);
    close(m->resp);
}

static struct orbit_fleet *observe(const char *name)
{
    struct orbit_fleet *f;
    int rc = orbit_fleet_observe(name, &f);
    ck_assert_msg(rc == 0, "observe: %s", orbit_strerror(rc));
    return f;
}

static int alive_count(struct orbit_fleet *f)
{
    struct orbit_node_info ni[8];
    ssize_t n = orbit_fleet_nodes(f, ni, 8);
    int alive = 0;
    for (ssize_t i = 0; i < n && i < 8; i++)
        alive += ni[i].alive;
    return alive;
}

START_TEST(a_member_in_another_pid_namespace_is_never_reaped_and_its_death_is)
{
    const char *name = tu_fleet_name("pidns");
    struct member a = member_start(name, OUTER, 0);
    struct member b = member_start(name, PID_NS, 1);
    ck_assert_int_eq(b.pid_inside, 1);   /* pid 1 of its own namespace */
    ck_assert_int_eq(member_ask(&b, 'r'), 0);   /* the inner member reaps nobody alive */
    ck_assert_int_eq(member_ask(&b, 'a'), 2);
    ck_assert_int_eq(member_ask(&a, 'r'), 0);   /* nor does the outer one */
    struct orbit_fleet *obs = observe(name);
    ck_assert_int_eq(orbit_fleet_reap(obs), 0);
    ck_assert_int_eq(alive_count(obs), 2);

    member_kill(&b);   /* a death inside is reclaimed from outside */
    ck_assert_int_eq(member_ask(&a, 'r'), 1);
    struct member c = member_start(name, PID_NS, 1);
    member_kill(&a);   /* and a death outside from inside */
    ck_assert_int_eq(member_ask(&c, 'r'), 1);
    ck_assert_int_eq(alive_count(obs), 1);
    member_stop(&c);
    orbit_fleet_leave(obs);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(another_user_under_hidepid_reaps_nobody_alive)
{
    const char *name = tu_fleet_name("hidepid");
    backing = ORBIT_BACKING_SHM;
    struct member a = member_start(name, OUTER, 0);
    struct member b = member_start(name, HIDEPID_OTHER_UID, 1);
    ck_assert_int_eq(member_ask(&b, 'r'), 0);
    ck_assert_int_eq(member_ask(&b, 'a'), 2);
    member_kill(&a);
    ck_assert_int_eq(member_ask(&b, 'r'), 1);   /* a real death is still seen */
    member_stop(&b);
    orbit_fleet_unlink(name);
}
END_TEST

/* Waits for one CQE up to 2 s; its user_data, or 0 on timeout. */
static uint64_t next_cqe(struct io_uring *ring)
{
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = { .tv_sec = 2 };
    if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) != 0)
        return 0;
    uint64_t ud = cqe->user_data;
    io_uring_cqe_seen(ring, cqe);
    return ud;
}

START_TEST(a_ring_waiter_learns_of_a_death_in_another_namespace_without_a_reaper)
{
    const char *name = tu_fleet_name("ringdeath");
    struct member a = member_start(name, OUTER, 0);
    struct member b = member_start(name, PID_NS, 1);
    struct orbit_fleet *obs = observe(name);
    if (!orbit_uring_futex_supported()) {
        /* The futex(2) form of the same wait, as ORBIT_DISABLE_URING_FUTEX builds use. */
        ck_assert_int_eq(orbit_fleet_wait_node_death(obs, b.node, b.incarnation, 0), -ORBIT_ETIMEDOUT);
        int64_t t0 = tu_now_ns();
        kill(b.pid, SIGKILL);
        ck_assert_int_eq(orbit_fleet_wait_node_death(obs, b.node, b.incarnation, 2000), 0);
        ck_assert_int_lt(tu_now_ns() - t0, 100 * 1000000LL);
    } else {
        struct io_uring ring;
        ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
        /* Two ring waiters on the same life, beside a blocking one in another member. */
        for (uint64_t ud = 1; ud <= 2; ud++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            ck_assert_int_eq(orbit_fleet_prep_wait_node_death(obs, b.node, b.incarnation, sqe), 0);
            sqe->user_data = ud;
        }
        ck_assert_int_eq(io_uring_submit(&ring), 2);
        struct io_uring_cqe *cqe;
        ck_assert_int_ne(io_uring_peek_cqe(&ring, &cqe), 0);   /* nothing yet: it lives */
        int64_t t0 = tu_now_ns();
        kill(b.pid, SIGKILL);
        uint64_t first = next_cqe(&ring), second = next_cqe(&ring);
        int64_t took = tu_now_ns() - t0;
        ck_assert_msg(first && second, "a ring waiter never completed");
        ck_assert_msg(took < 100 * 1000000LL, "the ring learnt of the death after %lld ms",
                      (long long)(took / 1000000));
        /* Dead already: 1 with a NOP. */
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        ck_assert_int_eq(orbit_fleet_prep_wait_node_death(obs, b.node, b.incarnation, sqe), 1);
        ck_assert_uint_eq(sqe->opcode, IORING_OP_NOP);
        io_uring_queue_exit(&ring);
    }
    int status;
    waitpid(b.waitee, &status, 0);
    ck_assert_int_eq(orbit_fleet_reap(obs), 1);   /* the waiter reports; nothing else did */
    member_stop(&a);
    orbit_fleet_leave(obs);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(every_blocking_waiter_of_a_life_wakes_at_its_death)
{
    const char *name = tu_fleet_name("waiters");
    struct member b = member_start(name, OUTER, 1);
    pid_t waiters[3];
    for (int i = 0; i < 3; i++) {
        fflush(NULL);
        waiters[i] = fork();
        ck_assert_int_ge(waiters[i], 0);
        if (waiters[i] == 0) {
            die_with_parent();
            struct orbit_fleet *o;
            TP_CHECK(orbit_fleet_observe(name, &o) == 0, "observe");
            _exit(orbit_fleet_wait_node_death(o, b.node, b.incarnation, 5000) == 0 ? 0 : 3);
        }
    }
    usleep(100 * 1000);   /* the waiters park (if not, they find the death at once: same result) */
    kill(b.pid, SIGKILL);
    for (int i = 0; i < 3; i++) {
        int status;
        ck_assert_int_eq(waitpid(waiters[i], &status, 0), waiters[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "waiter %d: status %#x", i, status);
    }
    waitpid(b.waitee, NULL, 0);
    orbit_fleet_unlink(name);
}
END_TEST

/* A watcher thread does not cross fork: the child of a watching process that is gone starts its own. */
static int watch_then_fork(const char *name, struct member *b, int ready)
{
    struct orbit_fleet *obs;
    TP_CHECK(orbit_fleet_observe(name, &obs) == 0, "observe");
    /* A wait that parks (not a look with timeout 0): it starts this process's watcher. */
    TP_CHECK(orbit_fleet_wait_node_death(obs, b->node, b->incarnation, 10) == -ORBIT_ETIMEDOUT, "alive");
    pid_t child = fork();   /* the child outlives us: its wait must not count on our watcher */
    TP_CHECK(child >= 0, "fork");
    if (child == 0) {
        struct orbit_fleet *mine;
        TP_CHECK(orbit_fleet_observe(name, &mine) == 0, "observe");
        TP_CHECK(orbit_fleet_wait_node_death(obs, b->node, b->incarnation, 0) == -ORBIT_EFORKED,
                 "the parent's handle was not refused");
        TP_CHECK(orbit_fleet_wait_node_death(mine, b->node, b->incarnation, 0) == -ORBIT_ETIMEDOUT, "alive");
        tp_send(ready, "r", 1);
        char verdict = orbit_fleet_wait_node_death(mine, b->node, b->incarnation, 3000) == 0 ? 'y' : 'n';
        tp_send(ready, &verdict, 1);
        _exit(0);
    }
    _exit(0);
}

START_TEST(a_forked_child_watches_a_life_for_itself)
{
    const char *name = tu_fleet_name("forkwatch");
    struct member b = member_start(name, OUTER, 1);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    fflush(NULL);
    pid_t parent = fork();
    ck_assert_int_ge(parent, 0);
    if (parent == 0)
        watch_then_fork(name, &b, ready[1]);
    char c;
    ck_assert(tp_recv(ready[0], &c, 1));
    ck_assert_int_eq(waitpid(parent, NULL, 0), parent);   /* its watcher is gone with it */
    int64_t t0 = tu_now_ns();
    kill(b.pid, SIGKILL);
    waitpid(b.waitee, NULL, 0);
    struct pollfd pf = { .fd = ready[0], .events = POLLIN };
    ck_assert_msg(poll(&pf, 1, 5000) == 1 && tp_recv(ready[0], &c, 1), "the child never answered");
    int64_t took_ms = (tu_now_ns() - t0) / 1000000;
    ck_assert_msg(c == 'y' && took_ms < 1000, "the orphaned child's death wait: %c after %lld ms (its "
                  "3 s deadline: nobody woke it)", c, (long long)took_ms);
    close(ready[0]);
    close(ready[1]);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(joining_a_node_this_process_holds_is_claimed)
{
    const char *name = tu_fleet_name("rejoin");
    struct orbit_fleet *f = tu_join(name, 4, 2, 0, backing), *again = NULL;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    o.node = 2;
    o.backing = backing;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &again), -ORBIT_ECLAIMED);
    ck_assert_ptr_null(again);
    ck_assert_ptr_nonnull(strstr(orbit_last_error(), "this process"));
    /* Another process cannot take it either: the first handle still holds it. */
    fflush(NULL);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        struct orbit_fleet *g;
        _exit(orbit_fleet_join(name, &o, &g) == -ORBIT_ECLAIMED ? 0 : 4);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_join(name, &o, &again), 0);   /* free once left */
    orbit_fleet_leave(again);
    orbit_fleet_unlink(name);
}
END_TEST

static int segment_count(const char *name)
{
    struct orbit_segment_info si[8];
    return (int)orbit_fleet_segments(name, si, 8);
}

START_TEST(a_fleet_nobody_lives_in_is_collected_and_a_live_one_never)
{
    const char *name = tu_fleet_name("collect");
    struct member a = member_start(name, OUTER, 0);
    struct member b = member_start(name, PID_NS, 1);
    ck_assert_int_eq(orbit_fleet_live_members(name), 2);
    ck_assert_int_eq(orbit_fleet_collect(name), -ORBIT_EBUSY);
    member_kill(&a);
    ck_assert_int_eq(orbit_fleet_live_members(name), 1);   /* the namespaced one counts */
    ck_assert_int_eq(orbit_fleet_collect(name), -ORBIT_EBUSY);
    ck_assert_int_ge(segment_count(name), 1);
    member_kill(&b);
    ck_assert_int_eq(orbit_fleet_live_members(name), 0);
    ck_assert_int_eq(orbit_fleet_collect(name), 0);
    ck_assert_int_eq(segment_count(name), 0);
    ck_assert_int_eq(orbit_fleet_collect(name), -ENOENT);
}
END_TEST

#define DOMAIN 1

static int claim_units(struct orbit_admission *a, uint64_t units)
{
    struct orbit_units u = { DOMAIN, units };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    int rc = orbit_admission_try_claim(a, &d, &r);
    return rc < 0 ? rc : r.outcome == ORBIT_ADMIT_CLAIMED ? 0 : -ORBIT_EBUSY;
}

/* pid 2 of a new pid namespace (pid 1 ignores its own SIGSTOP): joins, stops inside the ledger lock. */
static void parked_in_namespace(const char *name, int resp)
{
    if (unshare(CLONE_NEWNS | CLONE_NEWPID) != 0)
        tp_die("unshare: %s", strerror(errno));
    pid_t init = fork();
    if (init < 0)
        tp_die("fork: %s", strerror(errno));
    if (init > 0) {
        tp_send(resp, &init, sizeof init);
        waitpid(init, NULL, 0);
        _exit(0);
    }
    die_with_parent();
    if (tn_own_proc(false) < 0)
        tp_die("mount proc");
    pid_t member = fork();
    if (member == 0) {
        die_with_parent();
        struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
        o.capacity = 8;
        o.node = 1;
        o.backing = backing;
        struct orbit_fleet *f;
        struct orbit_admission *a;
        setenv("ORBIT_TEST_ADMISSION_PARK_IN_MUTEX", "claim-commit", 1);
        TP_CHECK(orbit_fleet_join(name, &o, &f) == 0, "join");
        TP_CHECK(orbit_admission_open_existing(f, ORBIT_ADMISSION_KIND, &a) == 0, "open");
        claim_units(a, 4);   /* stops itself inside the ledger lock */
        _exit(0);
    }
    int st;
    char ok = waitpid(member, &st, WUNTRACED) == member && WIFSTOPPED(st) ? 's' : 'x';
    tp_send(resp, &ok, 1);
    waitpid(member, &st, 0);   /* until the test kills this namespace */
    _exit(0);
}

/*
 * A ledger lock held by a member of another pid namespace: its pid names nobody (or someone
 * else) here, yet it is never taken over while it lives; once its namespace is killed, the
 * death report takes the lock over and repairs the ledger.
 */
START_TEST(a_lock_holder_in_another_pid_namespace_is_taken_over_only_once_dead)
{
    const char *name = tu_fleet_name("nslock");
    struct orbit_fleet *f = tu_join(name, 8, 0, 0, backing);
    struct orbit_admission *a;
    ck_assert_int_eq(orbit_admission_open(f, NULL, &a), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, DOMAIN, 10), 0);
    int r[2];
    ck_assert_int_eq(pipe(r), 0);
    fflush(NULL);
    pid_t mid = fork();
    ck_assert_int_ge(mid, 0);
    if (mid == 0) {
        die_with_parent();
        parked_in_namespace(name, r[1]);
    }
    pid_t init;
    char parked;
    ck_assert(tp_recv(r[0], &init, sizeof init) && tp_recv(r[0], &parked, 1));
    ck_assert_msg(parked == 's', "the namespaced member did not stop inside the lock");
    /* Alive and holding: our claim waits out the bound and takes nothing over. */
    ck_assert_int_lt(claim_units(a, 1), 0);
    ck_assert(!orbit_admission_poisoned(a));
    ck_assert_int_eq(orbit_fleet_reap(f), 0);
    kill(init, SIGKILL);   /* the namespace's init: every process in it dies */
    ck_assert_int_eq(waitpid(mid, NULL, 0), mid);
    int64_t until = tu_now_ns() + 5000 * 1000000LL;
    int reaped = 0;
    while (reaped == 0 && tu_now_ns() < until)
        reaped = orbit_fleet_reap(f);   /* the kernel lock says dead once its holder is gone */
    ck_assert_int_eq(reaped, 1);
    ck_assert_int_eq(claim_units(a, 10), 0);   /* the whole capacity: the dead claim gave back */
    ck_assert(!orbit_admission_poisoned(a));
    close(r[0]);
    close(r[1]);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

int main(void)
{
    const char *why = tn_namespaces_unavailable();
    if (why) {
        printf("skipped: %s\n", why);
        return 77;
    }
    backing = tu_backing();
    Suite *s = suite_create("membership");
    TCase *tc = tcase_create("membership");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_member_in_another_pid_namespace_is_never_reaped_and_its_death_is);
    tcase_add_test(tc, another_user_under_hidepid_reaps_nobody_alive);
    tcase_add_test(tc, a_ring_waiter_learns_of_a_death_in_another_namespace_without_a_reaper);
    tcase_add_test(tc, every_blocking_waiter_of_a_life_wakes_at_its_death);
    tcase_add_test(tc, a_forked_child_watches_a_life_for_itself);
    tcase_add_test(tc, joining_a_node_this_process_holds_is_claimed);
    tcase_add_test(tc, a_fleet_nobody_lives_in_is_collected_and_a_live_one_never);
    tcase_add_test(tc, a_lock_holder_in_another_pid_namespace_is_taken_over_only_once_dead);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
