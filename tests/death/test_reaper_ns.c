/* SPDX-License-Identifier: MIT */
/*
 * The reaper across pid namespaces and /proc views: a member in a new pid
 * namespace with its own /proc, the reaper itself in one, another uid under
 * hidepid=2; through the library and the orbit-reaper binary, both backends.
 * A live member is never reported; a kill -9 is, within a bound. And --gc.
 * Real processes and real namespaces (root).
 */
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include "death_util.h"
#include "ns.h"
#include "proc.h"

#define OTHER_UID   65534
#define REAPER_UID  65533
#define QUIET_MS    1000   /* a live member must not be reported for this long */
#define REPORT_MS   500    /* a kill -9 must be reported (and reclaimed) within this */

enum where { OUTER, PID_NS, HIDEPID_OTHER_UID };

/*
 * Run fn in a child placed as where says: OUTER as is; PID_NS as pid 1 of a
 * new pid namespace with its own /proc; HIDEPID_OTHER_UID in a mount namespace
 * whose /proc has hidepid=2, as uid. Returns the pid to kill (as we see it) in
 * *victim and the pid to wait for.
 */
static pid_t place(enum where where, uid_t uid, void (*fn)(void *), void *arg, pid_t *victim)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        if (where != OUTER && unshare(CLONE_NEWNS | (where == PID_NS ? CLONE_NEWPID : 0)) != 0)
            tp_die("unshare: %s", strerror(errno));
        pid_t inner = where == PID_NS ? fork() : 0;
        if (inner < 0)
            tp_die("fork: %s", strerror(errno));
        if (inner == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int rc = where == OUTER ? 0 : tn_own_proc(where == HIDEPID_OTHER_UID);
            if (rc == 0 && where == HIDEPID_OTHER_UID)
                rc = tn_become(uid);
            if (rc < 0)
                tp_die("placing: %s", strerror(-rc));
            pid_t self = getpid();
            if (where != PID_NS)
                tp_send(p[1], &self, sizeof self);
            close(p[1]);
            fn(arg);
            _exit(0);
        }
        tp_send(p[1], &inner, sizeof inner);   /* its pid as the test sees it */
        close(p[1]);
        int status;
        waitpid(inner, &status, 0);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    close(p[1]);
    ck_assert(tp_recv(p[0], victim, sizeof *victim));
    close(p[0]);
    return pid;
}

/* ---- members -------------------------------------------------------------- */

struct member_arg { const char *fleet; int node; int ready_wr, cmd_rd; };
struct ns_member { pid_t pid, waitee; int ready_rd, cmd_wr; uint16_t node; };

/* Join, say so (the node, or -1), then stay until the command pipe closes; then leave. */
static void member_main(void *p)
{
    struct member_arg *a = p;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.node = a->node;
    o.backing = ORBIT_BACKING_SHM;
    o.gid = TN_SHARED_GID;
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(a->fleet, &o, &f);
    int32_t word = rc == 0 ? orbit_fleet_node(f) : -1;
    tp_send(a->ready_wr, &word, sizeof word);
    for (char c; read(a->cmd_rd, &c, 1) == 1;) {}
    orbit_fleet_leave(f);
}

static struct ns_member member_start(const char *fleet, enum where where, int node)
{
    int rp[2], cp[2];
    ck_assert_int_eq(pipe2(rp, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(cp, O_CLOEXEC), 0);
    struct member_arg a = { fleet, node, rp[1], cp[0] };
    struct ns_member m = { .ready_rd = rp[0], .cmd_wr = cp[1] };
    m.waitee = place(where, OTHER_UID, member_main, &a, &m.pid);
    close(rp[1]);
    close(cp[0]);
    int32_t word;
    ck_assert_msg(tp_recv(m.ready_rd, &word, sizeof word) && word >= 0, "member did not join");
    m.node = (uint16_t)word;
    return m;
}

static void member_kill(struct ns_member *m)
{
    kill(m->pid, SIGKILL);
    tu_wait_child(m->waitee, 10000);
    close(m->ready_rd);
    close(m->cmd_wr);
}

static void member_stop(struct ns_member *m)
{
    close(m->cmd_wr);   /* it leaves and exits */
    tu_wait_child(m->waitee, 10000);
    close(m->ready_rd);
}

/* Nodes of the fleet still claimed. */
static ssize_t claimed(const char *fleet)
{
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_observe(fleet, &f), 0);
    ssize_t n = orbit_fleet_nodes(f, NULL, 0);
    orbit_fleet_leave(f);
    return n;
}

static bool bpf_unavailable(int idx)
{
    if (death_backends[idx] != ORBIT_REAPER_BPF || (DEATH_HAVE_BPF && geteuid() == 0))
        return false;
    tu_skip(DEATH_HAVE_BPF ? "bpf backend: not root" : "bpf backend: built without BPF");
    return true;
}

/* ---- the reaper in the test's namespace (library) ------------------------------ */

/* Process for ms; fails if any death is reported meanwhile. */
static void quiet_for(struct orbit_reaper *r, struct deaths *c, int ms)
{
    int64_t end = tu_now_ns() + (int64_t)ms * 1000000;
    for (int64_t left; (left = (end - tu_now_ns()) / 1000000) > 0;)
        ck_assert_int_ge(orbit_reaper_process(r, (int)left), 0);
    ck_assert_msg(c->n == 0, "a live member was reported dead (node %u, pid %d, source %d)",
                  c->d[0].node, (int)c->d[0].pid, (int)c->d[0].source);
}

static void kill_and_expect(struct orbit_reaper *r, struct deaths *c, struct ns_member *m, const char *fleet)
{
    int64_t t0 = tu_now_ns();
    kill(m->pid, SIGKILL);
    deaths_wait(r, c, c->n + 1, REPORT_MS);
    int64_t took = tu_now_ns() - t0;
    ck_assert_uint_eq(c->d[c->n - 1].node, m->node);
    ck_assert_msg(took < (int64_t)REPORT_MS * 1000000, "reported after %lld us", (long long)(took / 1000));
    tu_wait_child(m->waitee, 10000);
    close(m->ready_rd);
    close(m->cmd_wr);
    (void)fleet;
}

static void here_watching(int idx, enum where member_where)
{
    const char *name = tu_fleet_name("rpns");
    struct ns_member outer = member_start(name, OUTER, 0);
    struct ns_member m = member_start(name, member_where, 1);
    struct orbit_reaper *r = death_open(idx);
    if (!r) {
        member_stop(&m);
        member_stop(&outer);
        return;
    }
    struct deaths c = { 0 };
    ck_assert_int_eq(orbit_reaper_on_death(r, deaths_collect, &c, 0), 0);
    ck_assert_int_eq(orbit_reaper_watch(r, name), 0);
    quiet_for(r, &c, QUIET_MS);
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.watched, 2);
    kill_and_expect(r, &c, &m, name);
    ck_assert_int_eq(claimed(name), 1);   /* reclaimed: only the outer member is left */
    member_kill(&outer);                  /* the visible one through the backend */
    deaths_wait(r, &c, 2, REPORT_MS);
    ck_assert_int_eq(claimed(name), 0);
    orbit_reaper_close(r);
    orbit_fleet_unlink(name);
}

START_TEST(a_member_in_a_new_pid_namespace_is_not_reported_until_it_dies)
{
    here_watching(_i, PID_NS);
}
END_TEST

START_TEST(a_member_of_another_uid_under_hidepid_is_not_reported_until_it_dies)
{
    here_watching(_i, HIDEPID_OTHER_UID);
}
END_TEST

/* ---- the reaper in a new pid namespace (library) -------------------------------- */

struct far_arg { const char *fleet; enum orbit_reaper_backend backend; int out; };
struct far_msg { int32_t kind; int32_t rc; uint16_t node; };   /* kind 0: watching, 1: a death */

static void far_death(void *ctx, const struct orbit_reaper_death *d)
{
    struct far_msg msg = { 1, 0, d->node };
    tp_send(*(int *)ctx, &msg, sizeof msg);
}

/* The reaper, wherever place put it: says when it watches, then one message per death. */
static void far_reaper(void *p)
{
    struct far_arg *a = p;
    struct orbit_reaper *r = NULL;
    struct far_msg msg = { 0, orbit_reaper_open(a->backend, &r), 0 };
    if (msg.rc == 0) {
        orbit_reaper_set_interval(r, 10);
        orbit_reaper_on_death(r, far_death, &a->out, 0);
        msg.rc = orbit_reaper_watch(r, a->fleet);
        msg.node = (uint16_t)orbit_reaper_rescan(r);
    }
    tp_send(a->out, &msg, sizeof msg);
    while (msg.rc == 0)
        orbit_reaper_process(r, -1);
    _exit(1);
}

/* Waits up to ms for the far reaper's next message; false on timeout. */
static bool far_next(int fd, struct far_msg *m, int ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    return poll(&pfd, 1, ms) == 1 && tp_recv(fd, m, sizeof *m);
}

static void far_watching(int idx, enum where reaper_where)
{
    if (bpf_unavailable(idx))
        return;
    const char *name = tu_fleet_name("rpfar");
    struct ns_member m = member_start(name, OUTER, 0);
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    struct far_arg a = { name, death_backends[idx], p[1] };
    pid_t victim, reaper = place(reaper_where, REAPER_UID, far_reaper, &a, &victim);
    close(p[1]);
    struct far_msg msg;
    ck_assert_msg(far_next(p[0], &msg, 10000), "the reaper did not start");
    ck_assert_msg(msg.rc == 0, "reaper: %s", orbit_strerror(msg.rc));
    ck_assert_uint_eq(msg.node, 1);   /* it watches the member */
    ck_assert_msg(!far_next(p[0], &msg, QUIET_MS), "a live member was reported dead (node %u)", msg.node);
    int64_t t0 = tu_now_ns();
    kill(m.pid, SIGKILL);
    ck_assert_msg(far_next(p[0], &msg, REPORT_MS), "no report within %d ms", REPORT_MS);
    ck_assert_msg(tu_now_ns() - t0 < (int64_t)REPORT_MS * 1000000, "late");
    ck_assert_int_eq(msg.kind, 1);
    ck_assert_uint_eq(msg.node, m.node);
    ck_assert_int_eq(claimed(name), 0);
    tu_wait_child(m.waitee, 10000);
    kill(victim, SIGKILL);
    tu_wait_child(reaper, 10000);
    close(p[0]);
    orbit_fleet_unlink(name);
}

START_TEST(a_reaper_in_a_new_pid_namespace_reports_a_member_outside)
{
    far_watching(_i, PID_NS);
}
END_TEST

/* Another uid under hidepid=2 sees no member in /proc: pidfd only (BPF needs root). */
START_TEST(a_reaper_of_another_uid_under_hidepid_reports_a_root_member)
{
    far_watching(1, HIDEPID_OTHER_UID);
}
END_TEST

/* ---- the orbit-reaper binary ------------------------------------------------------ */

struct bin_arg { const char *const *argv; int out; };

static void bin_main(void *p)
{
    struct bin_arg *a = p;
    dup2(a->out, 1);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execv(getenv("ORBIT_REAPER_BIN"), (char *const *)a->argv);
    _exit(127);
}

struct lines { int fd; char buf[16384]; size_t len; };

/* The next line containing want, within ms (NULL on timeout or EOF). */
static const char *line_with(struct lines *l, const char *want, int ms, char *line, size_t cap)
{
    int64_t end = tu_now_ns() + (int64_t)ms * 1000000;
    for (;;) {
        char *nl;
        while ((nl = memchr(l->buf, '\n', l->len))) {
            size_t n = (size_t)(nl - l->buf);
            snprintf(line, cap, "%.*s", (int)n, l->buf);
            memmove(l->buf, nl + 1, l->len - n - 1);
            l->len -= n + 1;
            if (strstr(line, want))
                return line;
        }
        int left = (int)((end - tu_now_ns()) / 1000000);
        struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
        if (left <= 0 || poll(&pfd, 1, left) != 1)
            return NULL;
        ssize_t got = read(l->fd, l->buf + l->len, sizeof l->buf - l->len);
        if (got <= 0)
            return NULL;
        l->len += (size_t)got;
    }
}

static pid_t bin_start(enum where where, const char *const *argv, struct lines *l, pid_t *victim)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    struct bin_arg a = { argv, p[1] };
    pid_t pid = place(where, REAPER_UID, bin_main, &a, victim);
    close(p[1]);
    l->fd = p[0];
    l->len = 0;
    return pid;
}

static void binary_case(int idx, enum where reaper_where, enum where member_where)
{
    if (bpf_unavailable(idx))
        return;
    const char *name = tu_fleet_name("rpbin");
    struct ns_member m = member_start(name, member_where, 0);
    const char *argv[] = { "orbit-reaper", "-f", name, "-b", orbit_reaper_backend_name(death_backends[idx]),
                           "-i", "10", NULL };
    struct lines l;
    pid_t victim, reaper = bin_start(reaper_where, argv, &l, &victim);
    char line[4096];
    ck_assert_msg(line_with(&l, "\"event\":\"start\"", 10000, line, sizeof line), "orbit-reaper did not start");
    ck_assert_msg(!line_with(&l, "\"event\":\"death\"", QUIET_MS, line, sizeof line),
                  "a live member was reported dead: %s", line);
    int64_t t0 = tu_now_ns();
    kill(m.pid, SIGKILL);
    ck_assert_msg(line_with(&l, "\"event\":\"death\"", REPORT_MS, line, sizeof line), "no death line within %d ms",
                  REPORT_MS);
    ck_assert_msg(tu_now_ns() - t0 < (int64_t)REPORT_MS * 1000000, "late");
    ck_assert_int_eq(claimed(name), 0);
    tu_wait_child(m.waitee, 10000);
    kill(victim, SIGTERM);
    ck_assert_ptr_nonnull(line_with(&l, "\"event\":\"stop\"", 10000, line, sizeof line));
    tu_wait_child(reaper, 10000);
    close(l.fd);
    orbit_fleet_unlink(name);
}

START_TEST(orbit_reaper_here_reports_a_member_in_a_new_pid_namespace_only_when_dead)
{
    binary_case(_i, OUTER, PID_NS);
}
END_TEST

START_TEST(orbit_reaper_in_a_new_pid_namespace_reports_a_member_outside_only_when_dead)
{
    binary_case(_i, PID_NS, OUTER);
}
END_TEST

/* --gc 1: the fleet whose members all died goes after a second; the one with a live member stays. */
START_TEST(orbit_reaper_gc_removes_a_dead_fleet_and_keeps_a_live_one)
{
    char dead[64], live[64];
    snprintf(dead, sizeof dead, "%s", tu_fleet_name("gcdead"));
    snprintf(live, sizeof live, "%s", tu_fleet_name("gclive"));
    struct ns_member a = member_start(dead, PID_NS, 0);
    struct ns_member b = member_start(live, PID_NS, 0);
    const char *argv[] = { "orbit-reaper", "-f", dead, "-f", live, "-b", "pidfd", "-i", "10", "--gc", "1", NULL };
    struct lines l;
    pid_t victim, reaper = bin_start(OUTER, argv, &l, &victim);
    char line[4096], want[128];
    ck_assert_msg(line_with(&l, "\"event\":\"start\"", 10000, line, sizeof line), "orbit-reaper did not start");
    int64_t t0 = tu_now_ns();
    member_kill(&a);
    ck_assert_ptr_nonnull(line_with(&l, "\"event\":\"death\"", REPORT_MS, line, sizeof line));
    snprintf(want, sizeof want, "\"event\":\"collected\",\"fleet\":\"%s\"", dead);
    ck_assert_msg(line_with(&l, want, 3000, line, sizeof line), "%s was not collected", dead);
    int64_t after = (tu_now_ns() - t0) / 1000000;
    ck_assert_msg(after >= 950, "collected %lld ms after the death, before --gc 1 s", (long long)after);
    ck_assert_int_eq(orbit_fleet_live_members(dead), -ENOENT);
    snprintf(want, sizeof want, "\"fleet\":\"%s\"", live);
    ck_assert_msg(!line_with(&l, want, 1500, line, sizeof line), "the live fleet was touched: %s", line);
    ck_assert_int_eq(orbit_fleet_live_members(live), 1);
    kill(victim, SIGTERM);
    tu_wait_child(reaper, 10000);
    close(l.fd);
    member_stop(&b);
    orbit_fleet_unlink(live);
}
END_TEST

int main(void)
{
    const char *why = tn_namespaces_unavailable();
    if (why) {
        printf("skipped: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("reaper_ns");
    TCase *tc = tcase_create("reaper_ns");
    TCase *bpf = tu_optional_tcase("reaper_ns_bpf");
    tcase_set_timeout(tc, 60);
    tcase_set_timeout(bpf, 60);
    DEATH_ADD_BACKENDS(tc, bpf, a_member_in_a_new_pid_namespace_is_not_reported_until_it_dies);
    DEATH_ADD_BACKENDS(tc, bpf, a_member_of_another_uid_under_hidepid_is_not_reported_until_it_dies);
    DEATH_ADD_BACKENDS(tc, bpf, a_reaper_in_a_new_pid_namespace_reports_a_member_outside);
    tcase_add_test(tc, a_reaper_of_another_uid_under_hidepid_reports_a_root_member);
    DEATH_ADD_BACKENDS(tc, bpf, orbit_reaper_here_reports_a_member_in_a_new_pid_namespace_only_when_dead);
    DEATH_ADD_BACKENDS(tc, bpf, orbit_reaper_in_a_new_pid_namespace_reports_a_member_outside_only_when_dead);
    tcase_add_test(tc, orbit_reaper_gc_removes_a_dead_fleet_and_keeps_a_live_one);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, bpf);
    return tu_run(s);
}
