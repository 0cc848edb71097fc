/* SPDX-License-Identifier: MIT */
/*
 * A rolling upgrade across a layout change, under load. The previous release
 * of the library (PREVIOUS_RELEASE, a commit of this repository that knows no
 * generations and writes fleet layout 3) is built once (build-previous.sh) and
 * a fleet of its members runs a pool + streams + admission workload, reaping
 * its own dead as a server's supervisor would. They are rolled one by one to
 * members of this library, which start generation 2 beside the old one and
 * leave their dead to orbit-reaper --fleet NAME --gc 1. One member of each
 * generation is killed with SIGKILL on the way. Checked: every operation of
 * every member that was not killed succeeded; each death was reclaimed in its
 * own generation (a member of that generation's release finds nothing of it
 * left in any table); the old generation's segments are gone at the end,
 * collected by the reaper of the new release.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <orbit/orbit.h>
#include "testutil.h"

/* The previous release: main when generations were written (fleet layout 3, no generations). */
#define PREVIOUS_RELEASE "6eba17b1bc509924ae95f74197013e62d4650b31"
#define MEMBERS 4
#define LINE_WAIT_MS 15000

struct member {
    pid_t pid;
    int out;                       /* its stdout */
    bool old;
    char name[ORBIT_FLEET_NAME_MAX + 1];
    unsigned generation, node;
    unsigned long long incarnation;
};

static const char *env(const char *name)
{
    const char *v = getenv(name);
    ck_assert_msg(v && *v, "%s unset: run under meson test", name);
    return v;
}

static char old_member_bin[512];

/* One line of a child's output; false at EOF or after LINE_WAIT_MS. */
static bool read_line(int fd, char *buf, size_t len)
{
    size_t n = 0;
    while (n + 1 < len) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, LINE_WAIT_MS) != 1)
            return false;
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0)
            return false;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return true;
}

/* argv[0] run with its stdout into *out (a pipe), or into the file log when log is set. */
static pid_t spawn(const char *const argv[], int *out, const char *log)
{
    int p[2] = { -1, -1 };
    if (log)
        p[1] = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    else
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    ck_assert_int_ge(p[1], 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(p[1], STDOUT_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    if (out)
        *out = p[0];
    return pid;
}

static void member_start(struct member *m, bool old, const char *fleet)
{
    const char *bin = old ? old_member_bin : env("UPGRADE_MEMBER");
    /* The old release reaps its own dead; this one leaves them to the reaper. */
    const char *argv[] = { bin, "serve", fleet, old ? "self" : "reaper", NULL };
    memset(m, 0, sizeof *m);
    m->old = old;
    m->pid = spawn(argv, &m->out, NULL);
    char line[256];
    ck_assert_msg(read_line(m->out, line, sizeof line), "%s member %d did not join", old ? "old" : "new",
                  (int)m->pid);
    ck_assert_msg(sscanf(line, "joined %64s %u %u %llu", m->name, &m->generation, &m->node, &m->incarnation) == 4,
                  "member said '%s'", line);
}

/* SIGTERM: it stops, leaves, says "done OPS FAILED REAPED" and exits 0 when nothing failed. */
static void member_stop(struct member *m)
{
    kill(m->pid, SIGTERM);
    char line[256] = "", last[256] = "";
    while (read_line(m->out, line, sizeof line))
        snprintf(last, sizeof last, "%s", line);
    close(m->out);
    int status = tu_wait_child(m->pid, 10000);
    unsigned long ops = 0, failed = 1, reaped = 0;
    ck_assert_msg(sscanf(last, "done %lu %lu %lu", &ops, &failed, &reaped) == 3, "member %d (%s) ended with '%s'",
                  (int)m->pid, m->name, last);
    ck_assert_msg(status == 0 && failed == 0, "member %d (%s generation %u): %lu of its operations failed, "
                  "exit %d", (int)m->pid, m->name, m->generation, failed, status);
    ck_assert_msg(ops >= 30, "member %d (%s) did only %lu operations", (int)m->pid, m->name, ops);
    fprintf(stderr, "%s member %d of %s (node %u): %lu operations, none failed; reported %lu dead\n",
            m->old ? "old" : "new", (int)m->pid, m->name, m->node, ops, reaped);
}

static void member_kill(struct member *m)
{
    kill(m->pid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(m->pid, 10000), 128 + SIGKILL);
    close(m->out);
}

/* A member of the dead one's release confirms its death was reclaimed in its generation. */
static void check_reclaimed(const struct member *dead)
{
    char node[16], inc[32];
    snprintf(node, sizeof node, "%u", dead->node);
    snprintf(inc, sizeof inc, "%llu", dead->incarnation);
    const char *argv[] = { dead->old ? old_member_bin : env("UPGRADE_MEMBER"), "check", dead->name, node, inc, NULL };
    int out;
    pid_t pid = spawn(argv, &out, NULL);
    char line[256] = "";
    read_line(out, line, sizeof line);
    close(out);
    ck_assert_msg(tu_wait_child(pid, 20000) == 0, "the death of %s node %u was not reclaimed: %s", dead->name,
                  dead->node, line);
    fprintf(stderr, "killed %s member %d: %s\n", dead->old ? "old" : "new", (int)dead->pid, line);
}

static void pause_ms(int ms) { tu_sleep_ms(ms); }

/* Did the reaper's log (JSON lines) say this event for this fleet? */
static bool logged(const char *log, const char *event, const char *fleet)
{
    FILE *f = fopen(log, "re");
    char line[2048], want_event[64], want_fleet[128];
    bool found = false;
    snprintf(want_event, sizeof want_event, "\"event\":\"%s\"", event);
    snprintf(want_fleet, sizeof want_fleet, "\"fleet\":\"%s\"", fleet ? fleet : "");
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, want_event) && (!fleet || strstr(line, want_fleet));
    if (f)
        fclose(f);
    return found;
}

/* false: no previous release can be built here (not a git checkout). */
static bool build_previous(void)
{
    const char *out = env("UPGRADE_PREVIOUS_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s' '%s' '%s'", env("UPGRADE_BUILD_PREVIOUS"),
             env("UPGRADE_SOURCE_ROOT"), PREVIOUS_RELEASE, out, env("UPGRADE_MEMBER_SOURCE"), env("UPGRADE_CC"));
    int64_t t0 = tu_now_ns();
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        return false;
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "building the previous release failed (%s)", cmd);
    fprintf(stderr, "previous release %.12s ready in %.1f s\n", PREVIOUS_RELEASE, (double)(tu_now_ns() - t0) / 1e9);
    snprintf(old_member_bin, sizeof old_member_bin, "%s/upgrade_member", out);
    return true;
}

START_TEST(a_fleet_rolls_to_a_release_of_other_layouts_under_load)
{
    if (!build_previous()) {
        tu_skip("the source tree is not a git checkout: the previous release cannot be built");
        return;
    }
    char fleet[ORBIT_FLEET_NAME_MAX + 1], fleet2[ORBIT_FLEET_NAME_MAX + 1], log[600];
    snprintf(fleet, sizeof fleet, "%s", tu_fleet_name("roll"));
    ck_assert_int_gt(orbit_fleet_generation_name(fleet, 2, fleet2, sizeof fleet2), 0);
    snprintf(log, sizeof log, "%s/reaper-%d.log", env("UPGRADE_PREVIOUS_DIR"), (int)getpid());

    /* The new release's reaper, as an operator upgrades it first: it watches every generation of
     * the fleet it reads and collects one nobody lives in. */
    const char *rargv[] = { env("ORBIT_REAPER_BIN"), "--fleet", fleet, "--gc", "1", "--backend", "pidfd",
                            "--interval", "50", NULL };
    pid_t reaper = spawn(rargv, NULL, log);
    for (int i = 0; i < 500 && !logged(log, "start", NULL); i++)
        pause_ms(10);
    ck_assert_msg(logged(log, "start", NULL), "the reaper did not start (%s)", log);

    struct member old[MEMBERS], young[MEMBERS + 2];
    size_t n_young = 0;
    for (int i = 0; i < MEMBERS; i++) {
        member_start(&old[i], true, fleet);
        ck_assert_str_eq(old[i].name, fleet);
        ck_assert_uint_eq(old[i].generation, 1);
    }
    pause_ms(300);
    struct orbit_generation_info gi[4];
    ck_assert_int_eq(orbit_fleet_generations(fleet, gi, 4), 1);
    ck_assert(!gi[0].readable);
    ck_assert_uint_eq(gi[0].layouts[ORBIT_LAYOUT_FLEET], 3);
    ck_assert_int_eq(gi[0].live_members, MEMBERS);

    /* A new member that pins generation 1 cannot join it: it says so, with both versions. */
    {
        char line[512] = "", want[256];
        int out;
        const char *argv[] = { env("UPGRADE_MEMBER"), "join", fleet, "1", NULL };
        pid_t pid = spawn(argv, &out, NULL);
        read_line(out, line, sizeof line);
        close(out);
        ck_assert_int_eq(tu_wait_child(pid, 10000), 3);
        snprintf(want, sizeof want, "refused -71 orbit_fleet_join: fleet '%s' generation 1 is at fleet layout 3; "
                 "this library (orbit %s) writes fleet layout 4", fleet, orbit_version_string());
        ck_assert_msg(strcmp(line, want) == 0, "a pinned join of the old generation said '%s'", line);
        fprintf(stderr, "pinned: %s\n", line);
    }

    /* A worker of the old release crashes; its supervisor starts the new binary in its place. */
    member_kill(&old[1]);
    check_reclaimed(&old[1]);
    member_start(&young[n_young++], false, fleet);
    ck_assert_str_eq(young[0].name, fleet2);
    ck_assert_uint_eq(young[0].generation, 2);

    /* The roll: each old worker stops (drains, leaves), a new one takes its place. */
    int order[] = { 0, 2, 3 };
    for (int k = 0; k < 3; k++) {
        pause_ms(200);
        member_stop(&old[order[k]]);
        member_start(&young[n_young++], false, fleet);
        ck_assert_str_eq(young[n_young - 1].name, fleet2);
        if (k == 1) {
            /* And one of the new generation is killed mid-roll: the new release's reaper reclaims it. */
            member_kill(&young[0]);
            check_reclaimed(&young[0]);
            member_start(&young[n_young++], false, fleet);
            ck_assert_str_eq(young[n_young - 1].name, fleet2);
        }
    }
    ssize_t live_old = orbit_fleet_live_members(fleet);   /* none, or collected already */
    ck_assert_msg(live_old == 0 || live_old == -ENOENT, "the old generation: %zd", live_old);
    ck_assert_int_eq(orbit_fleet_live_members(fleet2), MEMBERS);

    /* The old generation, empty now, is collected: every segment of it gone, in both directories. */
    int64_t until = tu_now_ns() + 15 * 1000000000ll;
    while (orbit_fleet_segments(fleet, NULL, 0) > 0 && tu_now_ns() < until)
        pause_ms(50);
    ck_assert_int_eq(orbit_fleet_segments(fleet, NULL, 0), 0);
    ck_assert_int_eq(orbit_fleet_generations(fleet, gi, 4), 1);
    ck_assert_uint_eq(gi[0].generation, 2);
    ck_assert(gi[0].readable);
    ck_assert_int_eq(gi[0].live_members, MEMBERS);
    pause_ms(200);

    for (size_t i = 1; i < n_young; i++)
        member_stop(&young[i]);
    kill(reaper, SIGTERM);
    ck_assert_int_eq(tu_wait_child(reaper, 10000), 0);
    ck_assert_msg(logged(log, "death", fleet2), "the reaper did not reclaim the death in %s (%s)", fleet2, log);
    ck_assert_msg(logged(log, "collected", fleet), "the reaper did not collect %s (%s)", fleet, log);
    FILE *f = fopen(log, "re");
    char line[2048];
    while (f && fgets(line, sizeof line, f))
        fprintf(stderr, "reaper: %s", line);
    if (f)
        fclose(f);
    int rc = orbit_fleet_collect(fleet2);   /* the reaper may have been first */
    ck_assert_msg(rc == 0 || rc == -ENOENT, "collect %s: %s", fleet2, orbit_strerror(rc));
    unlink(log);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("roll");
    TCase *tc = tu_optional_tcase("roll");   /* skips outside a git checkout */
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, a_fleet_rolls_to_a_release_of_other_layouts_under_load);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
