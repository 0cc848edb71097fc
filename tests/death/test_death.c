/* SPDX-License-Identifier: MIT */
/*
 * Death reports on fleets and node records (both backends): kill -9, clean
 * leave, a leader that calls pthread_exit, pid reuse, fleets that appear
 * later, and the kill -> reclaim latency over 100 kills.
 */
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include "death_util.h"

#define KILLS 100

static struct orbit_fleet *observe(const char *name)
{
    struct orbit_fleet *f;
    int rc = orbit_fleet_observe(name, &f);
    ck_assert_msg(rc == 0, "observe %s: %s", name, orbit_strerror(rc));
    return f;
}

/* ---- the scene every reaper test sets --------------------------------------------- */

/*
 * The backend under test with a collector of its deaths, and a fresh fleet
 * name in *name (NULL tag: none). NULL when the backend cannot run here: the
 * test returns, skipped (death_open).
 */
static struct orbit_reaper *scene_open(int idx, const char *tag, struct deaths **c, const char **name)
{
    struct orbit_reaper *r = death_open(idx);
    if (!r)
        return NULL;
    *c = calloc(1, sizeof **c);
    ck_assert_ptr_nonnull(*c);
    ck_assert_int_eq(orbit_reaper_on_death(r, deaths_collect, *c, 0), 0);
    if (tag)
        *name = tu_fleet_name(tag);
    return r;
}

/* Watch the scene's fleet, each report waiting delay_ms first (ORBIT_TEST_REAPER_DELAY_MS,
 * read as the fleet is attached; 0: none); the rescan finds `live` members. */
static void scene_watch(struct orbit_reaper *r, const char *name, int delay_ms, int live)
{
    char ms[16];
    snprintf(ms, sizeof ms, "%d", delay_ms);
    if (delay_ms)
        setenv("ORBIT_TEST_REAPER_DELAY_MS", ms, 1);
    ck_assert_int_eq(orbit_reaper_watch(r, name), 0);
    unsetenv("ORBIT_TEST_REAPER_DELAY_MS");
    ck_assert_int_eq(orbit_reaper_rescan(r), live);
}

/* The scene's end: the reaper closed, the observer (if any) gone, the fleet removed. */
static void scene_close(struct orbit_reaper *r, struct orbit_fleet *obs, const char *name, void *c)
{
    orbit_reaper_close(r);
    if (obs)
        orbit_fleet_leave(obs);
    if (name)
        ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    free(c);
}

/* ---- argument checking ------------------------------------------------------ */

static void noop_death(void *ctx, const struct orbit_reaper_death *d) { (void)ctx; (void)d; }

START_TEST(test_api_errors)
{
    struct orbit_reaper *r;
    ck_assert_int_eq(orbit_reaper_open((enum orbit_reaper_backend)7, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_open(ORBIT_REAPER_PIDFD, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_process(NULL, 0), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_fd(NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_rescan(NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_watch(NULL, "x"), -ORBIT_EMALFORMED);
    ck_assert_str_eq(orbit_reaper_backend_name(ORBIT_REAPER_BPF), "bpf");
    ck_assert_str_eq(orbit_reaper_backend_name(ORBIT_REAPER_PIDFD), "pidfd");
    ck_assert_str_eq(orbit_reaper_backend_name(ORBIT_REAPER_AUTO), "auto");

    ck_assert_int_eq(orbit_reaper_open(ORBIT_REAPER_PIDFD, &r), 0);
    ck_assert_int_eq(orbit_reaper_watch(r, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_watch(r, ""), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_watch(r, "a/b"), -ORBIT_EMALFORMED);
    char longname[ORBIT_FLEET_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ck_assert_int_eq(orbit_reaper_watch(r, longname), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_set_interval(r, 0), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_set_interval(r, 60001), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_reaper_on_death(r, noop_death, NULL, 2), -ORBIT_EMALFORMED);
    ck_assert_int_ge(orbit_reaper_fd(r), 0);
    /* A fleet that does not exist is watched from when it appears. */
    ck_assert_int_eq(orbit_reaper_watch(r, tu_fleet_name("absent")), 0);
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.fleets, 0);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);
    ck_assert_int_eq(orbit_reaper_process(r, 30), 0);   /* timer ticks come and go: no deaths */
    ck_assert_str_eq(orbit_reaper_note(r), "");
    orbit_reaper_close(r);

    /* AUTO: BPF where it loads, else pidfd and a note saying why. */
    ck_assert_int_eq(orbit_reaper_open(ORBIT_REAPER_AUTO, &r), 0);
    if (DEATH_HAVE_BPF && geteuid() == 0) {
        ck_assert_int_eq(orbit_reaper_backend(r), ORBIT_REAPER_BPF);
        ck_assert_str_eq(orbit_reaper_note(r), "");
    } else {
        ck_assert_int_eq(orbit_reaper_backend(r), ORBIT_REAPER_PIDFD);
        ck_assert_ptr_nonnull(strstr(orbit_reaper_note(r), "BPF"));
    }
    orbit_reaper_close(r);
}
END_TEST

/* Without privileges BPF cannot load: asked for, it fails; AUTO falls back and says why. */
static int unprivileged_open(void)
{
    struct orbit_reaper *r;
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
        return 10;
    int rc = orbit_reaper_open(ORBIT_REAPER_BPF, &r);
    if (rc >= 0)
        return 11;
    if (orbit_reaper_open(ORBIT_REAPER_AUTO, &r) != 0)
        return 12;
    bool fell_back = orbit_reaper_backend(r) == ORBIT_REAPER_PIDFD &&
                     strstr(orbit_reaper_note(r), "BPF backend unavailable") != NULL;
    orbit_reaper_close(r);
    return fell_back ? 0 : 13;
}

START_TEST(test_unprivileged_falls_back)
{
    if (geteuid() != 0 || !DEATH_HAVE_BPF) {
        tu_skip("unprivileged fallback: needs root to drop, and a BPF build");
        return;
    }
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(unprivileged_open());
    ck_assert_int_eq(tu_wait_child(pid, 10000), 0);
}
END_TEST

/* A fleet segment that is not an orbit segment cannot be watched. */
START_TEST(test_watch_corrupt)
{
    const char *name = tu_fleet_name("corrupt");
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", name);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    char junk[8192];
    memset(junk, 0x5a, sizeof junk);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    struct orbit_reaper *r;
    ck_assert_int_eq(orbit_reaper_open(ORBIT_REAPER_PIDFD, &r), 0);
    ck_assert_int_eq(orbit_reaper_watch(r, name), -ORBIT_ECORRUPT);
    orbit_reaper_close(r);
    unlink(path);
}
END_TEST

/* ---- kill -9 ------------------------------------------------------------------ */

START_TEST(test_kill9)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "kill9", &c, &name);
    if (!r)
        return;
    struct member m = member_fork(name, member_join_only, NULL);
    uint16_t node = (uint16_t)member_wait_ready(&m);
    struct orbit_fleet *obs = observe(name);
    struct orbit_node_info before = node_info(obs, node);
    ck_assert_int_eq(before.state, ORBIT_NODE_LIVE);
    scene_watch(r, name, 0, 1);

    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);   /* alive: nothing to report */
    ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
    deaths_wait(r, c, 1, 10000);

    struct orbit_reaper_death *d = &c->d[0];
    ck_assert_str_eq(d->fleet, name);
    ck_assert_uint_eq(d->node, node);
    ck_assert_int_eq(d->pid, m.pid);
    ck_assert_uint_eq(d->start_time, before.start_time);
    ck_assert_uint_eq(d->incarnation, before.incarnation);
    ck_assert_int_eq(d->backend, death_backends[_i]);
    ck_assert_int_eq(d->source, ORBIT_REAPER_EXIT_EVENT);
    ck_assert(!d->accounted);
    ck_assert_uint_ge(d->reclaimed_ns, d->detected_ns);
    if (death_backends[_i] == ORBIT_REAPER_BPF) {
        ck_assert_int_eq(d->status, SIGKILL);              /* the status waitpid reports */
        ck_assert_uint_gt(d->exit_ns, 0);
        ck_assert_uint_ge(d->detected_ns, d->exit_ns);
    } else {   /* the pidfd turned readable at the exit: that is its time */
        ck_assert_uint_gt(d->exit_ns, 0);
        ck_assert_uint_ge(d->detected_ns, d->exit_ns);
        ck_assert(d->status == -1 || d->status == SIGKILL);
    }
    ck_assert_int_eq(node_info(obs, node).state, ORBIT_NODE_FREE);
    ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);     /* reported once */
    ck_assert_int_eq(c->n, 1);
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.deaths, 1);
    ck_assert_uint_eq(s.watched, 0);
    ck_assert_uint_eq(s.fleets, 1);
    scene_close(r, obs, name, c);
}
END_TEST

/* ---- a member that leaves, then exits, is not reported ---------------------- */

START_TEST(test_leave_not_reported)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "leave", &c, &name);
    if (!r)
        return;
    struct member leaver = member_fork(name, member_join_only, NULL);
    member_wait_ready(&leaver);
    struct member control = member_fork(name, member_join_only, NULL);
    uint16_t control_node = (uint16_t)member_wait_ready(&control);
    scene_watch(r, name, 0, 2);

    member_send(&leaver, 'L');
    ck_assert_int_eq(member_reap(&leaver), 0);
    /* The control's death comes after the leaver's exit in every backend's
     * order; once it is reported, a report of the leaver would have been too. */
    ck_assert_int_eq(kill(control.pid, SIGKILL), 0);
    deaths_wait(r, c, 1, 10000);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);
    ck_assert_int_eq(c->n, 1);
    ck_assert_uint_eq(c->d[0].node, control_node);
    ck_assert_int_eq(c->d[0].pid, control.pid);
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.deaths, 1);
    /* The leaver's exit, if a backend saw it before its fleet's thread re-read the table (BPF: its
     * tgid was still filtered in), is one report ignored; after the re-read, none. Never a death. */
    ck_assert_uint_le(s.ignored, 1);
    ck_assert_int_eq(member_reap(&control), 128 + SIGKILL);
    scene_close(r, NULL, name, c);
}
END_TEST

/* ---- a leader that calls pthread_exit ------------------------------------------ */

static void *linger(void *arg)
{
    int cmd_fd = *(int *)arg;
    char ch;
    if (read(cmd_fd, &ch, 1) < 0)
        _exit(96);
    _exit(0);   /* the last thread ends the group (_exit: no sanitizer report at exit) */
}

static void member_pthread_exit(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    (void)arg;
    static int fd;
    fd = cmd_fd;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.backing = tu_backing();
    struct orbit_fleet *f;
    pthread_t t;
    if (orbit_fleet_join(fleet, &o, &f) != 0 || pthread_create(&t, NULL, linger, &fd) != 0)
        _exit(98);
    member_ready(ready_fd, orbit_fleet_node(f));
    pthread_exit(NULL);
}

/* Has the thread-group leader finished do_exit (state Z) while its threads run on? */
static bool leader_exited(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "re");
    if (!fp)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'Z';
}

START_TEST(test_pthread_exit_leader)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "pthexit", &c, &name);
    if (!r)
        return;
    struct member m = member_fork(name, member_pthread_exit, NULL);
    uint16_t node = (uint16_t)member_wait_ready(&m);
    struct member control = member_fork(name, member_join_only, NULL);
    uint16_t control_node = (uint16_t)member_wait_ready(&control);
    scene_watch(r, name, 0, 2);
    for (int i = 0; i < 5000 && !leader_exited(m.pid); i++)
        tu_sleep_ms(1);
    ck_assert_msg(leader_exited(m.pid), "the leader did not exit");

    /* A reaper that starts now finds the member alive despite its zombie leader. */
    struct orbit_reaper *late = death_open(_i);
    ck_assert_int_eq(orbit_reaper_watch(late, name), 0);
    ck_assert_int_eq(orbit_reaper_rescan(late), 2);
    ck_assert_int_eq(orbit_reaper_process(late, 0), 0);
    orbit_reaper_close(late);

    /* The leader's exit was seen before the control's death: none reported for it. */
    ck_assert_int_eq(kill(control.pid, SIGKILL), 0);
    deaths_wait(r, c, 1, 10000);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);
    ck_assert_int_eq(c->n, 1);
    ck_assert_uint_eq(c->d[0].node, control_node);
    struct orbit_fleet *obs = observe(name);
    ck_assert_int_eq(node_info(obs, node).state, ORBIT_NODE_LIVE);

    /* The last thread ends: now the member is dead. */
    member_send(&m, 'X');
    deaths_wait(r, c, 2, 10000);
    ck_assert_uint_eq(c->d[1].node, node);
    ck_assert_int_eq(c->d[1].pid, m.pid);
    ck_assert_int_eq(node_info(obs, node).state, ORBIT_NODE_FREE);
    int code = member_reap(&m);
    ck_assert_int_eq(code, 0);
    if (death_backends[_i] == ORBIT_REAPER_BPF)
        ck_assert_int_eq(c->d[1].status, code << 8);   /* the status waitpid reported */
    ck_assert_int_eq(member_reap(&control), 128 + SIGKILL);
    scene_close(r, obs, name, c);
}
END_TEST

/* ---- pid reuse ------------------------------------------------------------------ */

static void member_gated_join(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    if (member_command(cmd_fd) != 'G')
        _exit(0);
    member_join_only(fleet, ready_fd, cmd_fd, arg);
}

static void set_last_pid(pid_t pid)
{
    FILE *fp = fopen("/proc/sys/kernel/ns_last_pid", "we");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp, "%d", (int)pid);
    fclose(fp);
}

/* A member forked with exactly that pid (root: ns_last_pid), joined to the fleet. */
static struct member member_fork_at(pid_t want, const char *fleet)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        set_last_pid(want - 1);
        struct member m = member_fork(fleet, member_gated_join, NULL);
        if (m.pid == want) {
            member_send(&m, 'G');
            return m;
        }
        member_send(&m, 'Q');
        member_reap(&m);
    }
    ck_abort_msg("could not fork with pid %d", (int)want);
    return (struct member){ -1, -1, -1 };
}

struct reuse { const char *name; struct orbit_fleet *obs; struct member b;
               struct orbit_node_info dead, live; };

/* A joins and is killed; B joins with A's pid (and a later start time). */
static void pid_reuse_setup(struct reuse *u, struct orbit_reaper *watching_before)
{
    u->name = tu_fleet_name("reuse");
    struct member a = member_fork(u->name, member_join_only, NULL);
    uint16_t a_node = (uint16_t)member_wait_ready(&a);
    u->obs = observe(u->name);
    u->dead = node_info(u->obs, a_node);
    if (watching_before) {
        ck_assert_int_eq(orbit_reaper_watch(watching_before, u->name), 0);
        ck_assert_int_eq(orbit_reaper_rescan(watching_before), 1);
    }
    ck_assert_int_eq(kill(a.pid, SIGKILL), 0);
    ck_assert_int_eq(member_reap(&a), 128 + SIGKILL);
    tu_sleep_ms(25);   /* B's start time lands on a later 10 ms tick */
    u->b = member_fork_at(a.pid, u->name);
    uint16_t b_node = (uint16_t)member_wait_ready(&u->b);
    u->live = node_info(u->obs, b_node);
    ck_assert_int_eq(u->live.pid, u->dead.pid);
    ck_assert_uint_ne(u->live.start_time, u->dead.start_time);
    ck_assert_uint_ne(u->live.node, u->dead.node);
    ck_assert_int_eq(node_info(u->obs, u->dead.node).state, ORBIT_NODE_LIVE);   /* not reaped yet */
}

static void pid_reuse_check(struct reuse *u, struct orbit_reaper *r, struct deaths *c,
                            enum orbit_reaper_source source)
{
    deaths_wait(r, c, 1, 10000);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);
    ck_assert_int_eq(c->n, 1);
    ck_assert_uint_eq(c->d[0].node, u->dead.node);
    ck_assert_uint_eq(c->d[0].incarnation, u->dead.incarnation);
    ck_assert_uint_eq(c->d[0].start_time, u->dead.start_time);
    ck_assert_int_eq(c->d[0].source, source);
    ck_assert_int_eq(node_info(u->obs, u->dead.node).state, ORBIT_NODE_FREE);
    struct orbit_node_info live = node_info(u->obs, u->live.node);
    ck_assert_int_eq(live.state, ORBIT_NODE_LIVE);
    ck_assert_uint_eq(live.incarnation, u->live.incarnation);
    /* The pid's new life is watched in its own right. */
    ck_assert_int_eq(kill(u->b.pid, SIGKILL), 0);
    deaths_wait(r, c, 2, 10000);
    ck_assert_uint_eq(c->d[1].node, u->live.node);
    ck_assert_uint_eq(c->d[1].start_time, u->live.start_time);
    ck_assert_int_eq(member_reap(&u->b), 128 + SIGKILL);
    orbit_fleet_leave(u->obs);
    ck_assert_int_eq(orbit_fleet_unlink(u->name), 0);
}

/* Watching before the death: the exit report names the old life only. */
START_TEST(test_pid_reuse_exit_event)
{
    struct deaths *c;
    struct orbit_reaper *r = scene_open(_i, NULL, &c, NULL);
    if (!r)
        return;
    struct reuse u;
    pid_reuse_setup(&u, r);
    pid_reuse_check(&u, r, c, ORBIT_REAPER_EXIT_EVENT);
    scene_close(r, NULL, NULL, c);
}
END_TEST

/* Watching after: the record whose pid now names another process is found dead. */
START_TEST(test_pid_reuse_found_dead)
{
    struct deaths *c;
    struct orbit_reaper *r = scene_open(_i, NULL, &c, NULL);
    if (!r)
        return;
    struct reuse u;
    pid_reuse_setup(&u, NULL);
    ck_assert_int_eq(orbit_reaper_watch(r, u.name), 0);
    pid_reuse_check(&u, r, c, ORBIT_REAPER_FOUND_DEAD);
    scene_close(r, NULL, NULL, c);
}
END_TEST

/* ---- fleets that appear later --------------------------------------------------- */

/* Process until the reaper watches want members (bounded). */
static void wait_watched(struct orbit_reaper *r, uint32_t want)
{
    struct orbit_reaper_stats s;
    for (int i = 0; i < 500; i++) {
        orbit_reaper_stats(r, &s);
        if (s.watched == want)
            return;
        ck_assert_int_eq(orbit_reaper_process(r, 20), 0);
    }
    ck_abort_msg("reaper watches %u members, want %u", s.watched, want);
}

START_TEST(test_fleet_appears_later)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "later", &c, &name);
    if (!r)
        return;
    scene_watch(r, name, 0, 0);
    struct member m = member_fork(name, member_join_only, NULL);
    uint16_t node = (uint16_t)member_wait_ready(&m);
    wait_watched(r, 1);   /* the timer attaches the fleet */
    ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
    deaths_wait(r, c, 1, 10000);
    ck_assert_uint_eq(c->d[0].node, node);
    ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);

    /* Removed and created again: the reaper follows the new fleet segment. */
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    struct member m2 = member_fork(name, member_join_only, NULL);
    member_wait_ready(&m2);
    wait_watched(r, 1);
    ck_assert_int_eq(kill(m2.pid, SIGKILL), 0);
    deaths_wait(r, c, 2, 10000);
    ck_assert_int_eq(c->d[1].pid, m2.pid);
    ck_assert_int_eq(member_reap(&m2), 128 + SIGKILL);
    scene_close(r, NULL, name, c);
}
END_TEST

/* Joins 50 ms after the fork and kills itself at once: usually before any re-read saw it. */
static void member_join_and_die(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    (void)ready_fd; (void)cmd_fd; (void)arg;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.backing = tu_backing();
    struct orbit_fleet *f;
    tu_sleep_ms(50);
    if (orbit_fleet_join(fleet, &o, &f) != 0)
        _exit(98);
    raise(SIGKILL);
}

/* One blocking process call sees a member join and die (the timer re-reads the table). */
START_TEST(test_join_and_die_during_process)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "brief", &c, &name);
    if (!r)
        return;
    struct member first = member_fork(name, member_join_only, NULL);
    member_wait_ready(&first);
    ck_assert_int_eq(orbit_reaper_watch(r, name), 0);
    struct member m = member_fork(name, member_join_and_die, NULL);
    ck_assert_int_eq(orbit_reaper_process(r, 10000), 1);
    ck_assert_int_eq(c->n, 1);
    ck_assert_int_eq(c->d[0].pid, m.pid);   /* found dead, or seen alive by a tick and then exiting */
    ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);
    member_send(&first, 'L');
    ck_assert_int_eq(member_reap(&first), 0);
    scene_close(r, NULL, name, c);
}
END_TEST

/* ---- a report under way while the node's next life comes and goes ---------- */

/* Join node *arg exactly, report ready (word: the incarnation), exit on EOF. */
static void member_join_node(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.backing = tu_backing();
    o.node = *(const int *)arg;
    struct orbit_fleet *f;
    int rc = orbit_fleet_join(fleet, &o, &f);
    if (rc != 0) {
        fprintf(stderr, "member: join node %d: %s (%s)\n", o.node, orbit_strerror(rc), orbit_last_error());
        _exit(98);
    }
    member_ready(ready_fd, orbit_fleet_incarnation(f));
    member_command(cmd_fd);
    _exit(0);
}

static void wait_node_state(struct orbit_fleet *obs, uint16_t node, enum orbit_node_state want, int timeout_ms)
{
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    while (node_info(obs, node).state != want) {
        ck_assert_msg(tu_now_ns() < end, "node %u not in state %d after %d ms", node, (int)want, timeout_ms);
        tu_sleep_ms(1);
    }
}

/* Each death with the state its node was in when the callback ran. */
struct deaths_seen {
    struct deaths all;
    struct orbit_fleet *obs;
    enum orbit_node_state state_then[DEATHS_MAX];
};

static void deaths_collect_state(void *ctx, const struct orbit_reaper_death *d)
{
    struct deaths_seen *c = ctx;
    if (c->all.n < DEATHS_MAX)
        c->state_then[c->all.n] = node_info(c->obs, d->node).state;
    deaths_collect(&c->all, d);
}

/*
 * The worker frees the node before the event loop hears of it: a re-read in
 * between watches the node's next life (B) while the first life's death (A)
 * is still being delivered. B's death must be reported and its node freed,
 * not taken for the report of A under way. Each report waits 300 ms
 * (ORBIT_TEST_REAPER_DELAY_MS), and no process call runs meanwhile, so the
 * re-read comes first for certain.
 */
START_TEST(test_next_life_before_delivery)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "nextlife", &c, &name);
    if (!r)
        return;
    int node = 1;
    struct member a = member_fork(name, member_join_node, &node);
    uint64_t inc_a = member_wait_ready(&a);
    struct orbit_fleet *obs = observe(name);
    scene_watch(r, name, 300, 1);   /* its worker reads the delay */
    ck_assert_int_eq(kill(a.pid, SIGKILL), 0);
    ck_assert_int_eq(member_reap(&a), 128 + SIGKILL);
    /* A's death goes to the worker (the BPF event may go by the token first); it waits 300 ms. */
    int64_t until = tu_now_ns() + 100 * 1000000LL;
    while (tu_now_ns() < until)
        ck_assert_int_ge(orbit_reaper_process(r, 10), 0);
    ck_assert_int_eq(c->n, 0);
    /* The worker frees the node, and B takes it, before the next process call. */
    wait_node_state(obs, (uint16_t)node, ORBIT_NODE_FREE, 5000);
    struct member b = member_fork(name, member_join_node, &node);
    uint64_t inc_b = member_wait_ready(&b);
    ck_assert_uint_ne(inc_b, inc_a);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 1);   /* re-read (B watched), then A delivered */
    ck_assert_int_eq(c->n, 1);
    ck_assert_uint_eq(c->d[0].incarnation, inc_a);
    ck_assert_int_eq(kill(b.pid, SIGKILL), 0);
    ck_assert_int_eq(member_reap(&b), 128 + SIGKILL);
    deaths_wait(r, c, 2, 5000);
    ck_assert_uint_eq(c->d[1].incarnation, inc_b);
    ck_assert_int_eq(c->d[1].pid, b.pid);
    ck_assert_int_eq(node_info(obs, (uint16_t)node).state, ORBIT_NODE_FREE);
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.deaths, 2);
    /* B may die while its fleet's thread is still setting its watch up (the re-read process asks
     * for runs beside this thread): its exit then reaches no watch (one report ignored) and B is
     * found dead instead, as the check of c->d[1] above says. */
    ck_assert_uint_le(s.ignored, 1);
    scene_close(r, obs, name, c);
}
END_TEST

/*
 * The death of A is with the worker (its try waits 1 s) when someone else
 * reports A, the node's next life B joins, and B dies: B's death comes while
 * A's job is still listed, and must get a report of its own.
 */
START_TEST(test_later_life_dies_while_a_report_is_listed)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "listed", &c, &name);
    if (!r)
        return;
    int node = 1;
    struct member a = member_fork(name, member_join_node, &node);
    uint64_t inc_a = member_wait_ready(&a);
    struct orbit_fleet *obs = observe(name);
    scene_watch(r, name, 1000, 1);   /* its worker reads the delay */
    ck_assert_int_eq(kill(a.pid, SIGKILL), 0);
    ck_assert_int_eq(member_reap(&a), 128 + SIGKILL);
    int64_t until = tu_now_ns() + 100 * 1000000LL;   /* A handed to the worker */
    while (tu_now_ns() < until)
        ck_assert_int_ge(orbit_reaper_process(r, 10), 0);
    ck_assert_int_eq(orbit_fleet_node_dead(obs, (uint16_t)node, inc_a), 0);   /* reported by another */
    struct member b = member_fork(name, member_join_node, &node);
    uint64_t inc_b = member_wait_ready(&b);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);   /* B is watched */
    ck_assert_int_eq(kill(b.pid, SIGKILL), 0);
    ck_assert_int_eq(member_reap(&b), 128 + SIGKILL);
    deaths_wait(r, c, 2, 8000);
    ck_assert_uint_eq(c->d[0].incarnation, inc_a);
    ck_assert_uint_eq(c->d[1].incarnation, inc_b);
    ck_assert_int_eq(node_info(obs, (uint16_t)node).state, ORBIT_NODE_FREE);
    scene_close(r, obs, name, c);
}
END_TEST

/*
 * A re-read finds a joiner mid-way (JOINING) for over 100 ms and hands the
 * worker a report to finish, which names no life. While that try runs, the joiner (B) publishes
 * and dies, and B's death merges into the job: the try begun before is not
 * B's report. B is delivered once, after its node is free. The joiner is held
 * in JOINING by a read lock on its life byte (tu_hold_life_byte).
 */
START_TEST(test_death_merged_into_a_try_under_way)
{
    struct orbit_reaper *r = death_open(_i);
    if (!r)
        return;
    struct deaths_seen *c = calloc(1, sizeof *c);
    ck_assert_int_eq(orbit_reaper_on_death(r, deaths_collect_state, c, 0), 0);
    const char *name = tu_fleet_name("merged");
    struct member keep = member_fork(name, member_join_only, NULL);   /* node 0: makes the fleet */
    ck_assert_uint_eq(member_wait_ready(&keep), 0);
    c->obs = observe(name);
    scene_watch(r, name, 1000, 1);   /* its worker reads the delay */
    int node = 1;
    struct orbit_node_snapshot ns;
    ck_assert_int_eq(orbit_fleet_node_snapshot(c->obs, (uint16_t)node, &ns), 0);
    int byte = tu_hold_life_byte(name, (uint16_t)node, ns.joins);
    struct member b = member_fork(name, member_join_node, &node);
    wait_node_state(c->obs, (uint16_t)node, ORBIT_NODE_JOINING, 900);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);
    tu_sleep_ms(300);   /* mid-way past 100 ms: a re-read hands the worker a report to finish */
    tu_release_life_byte(byte);
    uint64_t inc_b = member_wait_ready(&b);
    ck_assert_int_eq(orbit_reaper_process(r, 0), 0);   /* B is watched */
    ck_assert_int_eq(kill(b.pid, SIGKILL), 0);
    ck_assert_int_eq(member_reap(&b), 128 + SIGKILL);
    deaths_wait(r, &c->all, 1, 8000);
    ck_assert_uint_eq(c->all.d[0].incarnation, inc_b);
    ck_assert_int_eq(c->state_then[0], ORBIT_NODE_FREE);   /* delivered once reclaimed, not before */
    ck_assert_int_eq(node_info(c->obs, (uint16_t)node).state, ORBIT_NODE_FREE);
    int64_t until = tu_now_ns() + 2500 * 1000000LL;   /* past another delayed try: no second report */
    while (tu_now_ns() < until)
        ck_assert_int_ge(orbit_reaper_process(r, 50), 0);
    ck_assert_int_eq(c->all.n, 1);
    member_send(&keep, 'L');
    ck_assert_int_eq(member_reap(&keep), 0);
    scene_close(r, c->obs, name, c);
}
END_TEST

/* A private /dev/shm (and no hugetlbfs): only this test's fleets exist. */
static void private_segments(void)
{
    ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
    ck_assert_int_eq(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    ck_assert_int_eq(mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777"), 0);
    setenv("ORBIT_HUGETLB_DIR", "", 1);
}

START_TEST(test_watch_all)
{
    if (geteuid() != 0) {
        tu_skip("watch_all: needs root for a private /dev/shm");
        return;
    }
    private_segments();
    struct deaths *c;
    struct orbit_reaper *r = scene_open(_i, NULL, &c, NULL);
    if (!r)
        return;
    char one[64], two[64];
    snprintf(one, sizeof one, "%s", tu_fleet_name("all1"));
    struct member m1 = member_fork(one, member_join_only, NULL);
    member_wait_ready(&m1);
    ck_assert_int_eq(orbit_reaper_watch_all(r), 0);
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    ck_assert_uint_eq(s.fleets, 1);
    ck_assert_uint_eq(s.watched, 1);

    snprintf(two, sizeof two, "%s", tu_fleet_name("all2"));   /* created after watch_all */
    struct member m2 = member_fork(two, member_join_only, NULL);
    member_wait_ready(&m2);
    wait_watched(r, 2);
    ck_assert_int_eq(kill(m2.pid, SIGKILL), 0);
    ck_assert_int_eq(kill(m1.pid, SIGKILL), 0);
    deaths_wait(r, c, 2, 10000);
    ck_assert_str_ne(c->d[0].fleet, c->d[1].fleet);
    ck_assert_int_eq(member_reap(&m1), 128 + SIGKILL);
    ck_assert_int_eq(member_reap(&m2), 128 + SIGKILL);

    /* A fleet that disappears is dropped. */
    ck_assert_int_eq(orbit_fleet_unlink(one), 0);
    for (int i = 0; i < 500; i++) {
        orbit_reaper_stats(r, &s);
        if (s.fleets == 1)
            break;
        ck_assert_int_eq(orbit_reaper_process(r, 20), 0);
    }
    ck_assert_uint_eq(s.fleets, 1);
    scene_close(r, NULL, two, c);
}
END_TEST

/* ---- members and reaper in their own pid namespace ------------------------------ */

/* Runs as pid 1 of a new pid namespace with its own /proc: a kill -9 is reported. */
static int pidns_init(int idx, const char *name)
{
    /* A mount namespace of its own: the test process keeps its /proc. */
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", 0, NULL) != 0)
        return 10;
    struct deaths *c;
    struct orbit_reaper *r = scene_open(idx, NULL, &c, NULL);
    struct member m = member_fork(name, member_join_only, NULL);
    uint16_t node = (uint16_t)member_wait_ready(&m);
    ck_assert_int_lt(m.pid, 100);   /* a namespace-local pid */
    scene_watch(r, name, 0, 1);
    ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
    deaths_wait(r, c, 1, 10000);
    ck_assert_uint_eq(c->d[0].node, node);
    ck_assert_int_eq(c->d[0].pid, m.pid);
    ck_assert_int_eq(c->d[0].source, ORBIT_REAPER_EXIT_EVENT);
    ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);
    scene_close(r, NULL, name, c);
    return 0;
}

START_TEST(test_pid_namespace)
{
    if (geteuid() != 0 || (death_backends[_i] == ORBIT_REAPER_BPF && !DEATH_HAVE_BPF)) {
        tu_skip("pid namespace: needs root and the backend");
        return;
    }
    char name[64];   /* named out here: inside, every test's pid is 1 */
    snprintf(name, sizeof name, "%s", tu_fleet_name("pidns"));
    /* A helper enters the namespace, so this process can still fork (and LSan run) after. */
    pid_t helper = fork();
    ck_assert_int_ge(helper, 0);
    if (helper == 0) {
        if (unshare(CLONE_NEWPID) != 0)
            _exit(20);
        pid_t init = fork();
        if (init == 0)
            _exit(pidns_init(_i, name));
        int st;
        _exit(init > 0 && waitpid(init, &st, 0) == init && WIFEXITED(st) ? WEXITSTATUS(st) : 21);
    }
    ck_assert_int_eq(tu_wait_child(helper, 30000), 0);
}
END_TEST

/* ---- latency: kill -> reclaim over 100 kills (fleet and node records only) ------ */

START_TEST(test_latency_fleet_only)
{
    struct deaths *c;
    const char *name;
    struct orbit_reaper *r = scene_open(_i, "lat", &c, &name);
    if (!r)
        return;
    uint64_t lat[KILLS];
    struct orbit_fleet *obs = NULL;
    for (int i = 0; i < KILLS; i++) {
        struct member m = member_fork(name, member_join_only, NULL);
        uint16_t node = (uint16_t)member_wait_ready(&m);
        if (!obs) {
            obs = observe(name);
            ck_assert_int_eq(orbit_reaper_watch(r, name), 0);
        }
        ck_assert_int_eq(orbit_reaper_rescan(r), 1);
        int64_t t0 = tu_now_ns();
        ck_assert_int_eq(kill(m.pid, SIGKILL), 0);
        deaths_wait(r, c, i + 1, 10000);
        ck_assert_uint_eq(c->d[i].node, node);
        ck_assert_int_eq(c->d[i].pid, m.pid);
        lat[i] = c->d[i].reclaimed_ns - (uint64_t)t0;
        if (getenv("DEATH_TRACE"))
            printf("kill->exit %lld detect %lld reclaim %lld\n",
                   (long long)c->d[i].exit_ns - t0, (long long)(c->d[i].detected_ns - c->d[i].exit_ns),
                   (long long)(c->d[i].reclaimed_ns - c->d[i].detected_ns));
        ck_assert_int_eq(node_info(obs, node).state, ORBIT_NODE_FREE);
        ck_assert_int_eq(member_reap(&m), 128 + SIGKILL);
    }
    printf("death latency, fleet only (%s): kill -> reclaim p50 %.1f us, p99 %.1f us over %d kills\n",
           orbit_reaper_backend_name(death_backends[_i]), (double)percentile(lat, KILLS, 0.50) / 1e3,
           (double)percentile(lat, KILLS, 0.99) / 1e3, KILLS);
    scene_close(r, obs, name, c);
}
END_TEST

static Suite *death_suite(void)
{
    Suite *s = suite_create("death");
    TCase *tc = tcase_create("reaper");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_api_errors);
    tcase_add_test(tc, test_watch_corrupt);
    /* Tests that need root or a BPF build run apart (tu_skip): see testutil.h. */
    TCase *bpf = tu_optional_tcase("bpf");
    tcase_set_timeout(bpf, 120);
    TCase *root = tu_optional_tcase("root");
    tcase_set_timeout(root, 120);
    tcase_add_test(bpf, test_unprivileged_falls_back);
    DEATH_ADD_BACKENDS(tc, bpf, test_kill9);
    DEATH_ADD_BACKENDS(tc, bpf, test_leave_not_reported);
    DEATH_ADD_BACKENDS(tc, bpf, test_pthread_exit_leader);
    DEATH_ADD_BACKENDS(tc, bpf, test_pid_reuse_exit_event);
    DEATH_ADD_BACKENDS(tc, bpf, test_pid_reuse_found_dead);
    DEATH_ADD_BACKENDS(tc, bpf, test_fleet_appears_later);
    DEATH_ADD_BACKENDS(tc, bpf, test_join_and_die_during_process);
    DEATH_ADD_BACKENDS(tc, bpf, test_next_life_before_delivery);
    DEATH_ADD_BACKENDS(tc, bpf, test_death_merged_into_a_try_under_way);
    DEATH_ADD_BACKENDS(tc, bpf, test_later_life_dies_while_a_report_is_listed);
    tcase_add_loop_test(root, test_watch_all, 0, 2);
    tcase_add_loop_test(root, test_pid_namespace, 0, 2);
    DEATH_ADD_BACKENDS(tc, bpf, test_latency_fleet_only);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, bpf);
    suite_add_tcase(s, root);
    return s;
}

int main(void)
{
    return tu_run(death_suite());
}
