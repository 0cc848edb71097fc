/* SPDX-License-Identifier: MIT */
/*
 * chaos-repro - the chaos suite's failures under its member kinds, pinned
 * deterministically (each case prints PASS, FAIL or SKIPPED; exit 1 on a FAIL):
 *
 *   forked_child_pins_parent_life: a member forks a child, the member is
 *     killed -9: its death must be seen (orbit_fleet_wait_node_death returns,
 *     orbit_fleet_reap frees its node) while the child lives.
 *   reaper_judges_namespaced_member_alive: a member that is pid 1 of a pid
 *     namespace of its own (own /proc) is watched by liborbit-reaper (pidfd and
 *     BPF backends): its node must stay its own while it lives.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/orbit.h>
#include <orbit/reaper.h>

static void fleet_name(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "t-chaos-repro-%s-%d", tag, (int)getpid());
    orbit_fleet_unlink(buf);
}

static int join(const char *name, int32_t node, struct orbit_fleet **f)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    o.node = node;
    return orbit_fleet_join(name, &o, f);
}

/* Node 1's incarnation while it is LIVE, else 0. */
static uint64_t live_incarnation(struct orbit_fleet *f, uint16_t node)
{
    struct orbit_node_info n[4];
    ssize_t got = orbit_fleet_nodes(f, n, 4);
    for (ssize_t k = 0; k < got && k < 4; k++)
        if (n[k].node == node && n[k].state == ORBIT_NODE_LIVE)
            return n[k].incarnation;
    return 0;
}

/* A member on node 1 that forks a sleeping child and tells its pid; then sleeps until killed. */
static pid_t start_parent(const char *name, const int pipe_fds[2], pid_t *child)
{
    pid_t parent = fork();
    if (parent == 0) {
        struct orbit_fleet *f;
        if (join(name, 1, &f) != 0)
            _exit(3);
        pid_t kid = fork();
        if (kid == 0)
            for (;;)
                pause();
        if (write(pipe_fds[1], &kid, sizeof kid) != sizeof kid)
            _exit(4);
        for (;;)
            pause();
    }
    return read(pipe_fds[0], child, sizeof *child) == sizeof *child ? parent : -1;
}

static int forked_child_pins_parent_life(void)
{
    char name[64];
    fleet_name(name, sizeof name, "fork");
    struct orbit_fleet *sup;
    int p[2];
    if (join(name, 0, &sup) != 0 || pipe(p) != 0)
        return printf("forked_child_pins_parent_life: SKIPPED (setup)\n"), 0;
    pid_t kid = 0, parent = start_parent(name, p, &kid);
    uint64_t inc = live_incarnation(sup, 1);
    kill(parent, SIGKILL);
    waitpid(parent, NULL, 0);
    int wait = orbit_fleet_wait_node_death(sup, 1, inc, 2000);
    int reaped = orbit_fleet_reap(sup);
    bool ok = wait == 0 && reaped == 1 && live_incarnation(sup, 1) == 0;
    printf("forked_child_pins_parent_life: %s (parent killed -9, its forked child alive: wait_node_death %s, "
           "reap reported %d, node 1 %s)\n", ok ? "PASS" : "FAIL", wait == 0 ? "returned" : orbit_strerror(wait),
           reaped, live_incarnation(sup, 1) ? "still LIVE" : "freed");
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);   /* ours: PR_SET_CHILD_SUBREAPER */
    orbit_fleet_leave(sup);
    orbit_fleet_unlink(name);
    return ok ? 0 : 1;
}

/* A member on node 1 that is pid 1 of its own pid namespace with its own /proc; 0 setup failed. */
static pid_t start_namespaced(const char *name)
{
    int own = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (own < 0 || unshare(CLONE_NEWPID) != 0)
        return 0;
    pid_t pid = fork();
    if (pid != 0 && setns(own, CLONE_NEWPID) != 0)   /* our later children (and threads) stay in ours */
        return 0;
    if (pid == 0) {
        struct orbit_fleet *f;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 || join(name, 1, &f) != 0)
            _exit(3);
        for (;;)
            pause();
    }
    close(own);
    return pid;
}

static int reaper_case(enum orbit_reaper_backend b, const char *bname)
{
    char name[64];
    fleet_name(name, sizeof name, bname);
    struct orbit_fleet *sup;
    struct orbit_reaper *r;
    if (join(name, 0, &sup) != 0)
        return printf("reaper_judges_namespaced_member_alive (%s): SKIPPED (setup)\n", bname), 0;
    pid_t m = start_namespaced(name);
    uint64_t inc = 0;
    for (int i = 0; m > 0 && i < 200 && !(inc = live_incarnation(sup, 1)); i++)
        usleep(5000);
    int rc = orbit_reaper_open(b, &r);
    if (!inc || rc < 0) {
        printf("reaper_judges_namespaced_member_alive (%s): SKIPPED (%s)\n", bname,
               !inc ? "no namespaced member" : orbit_strerror(rc));
        if (m > 0)
            kill(m, SIGKILL), waitpid(m, NULL, 0);
        orbit_fleet_leave(sup);
        orbit_fleet_unlink(name);
        return 0;
    }
    orbit_reaper_watch(r, name);
    for (int i = 0; i < 10; i++)
        orbit_reaper_process(r, 50);
    uint64_t now = live_incarnation(sup, 1);
    int alive = kill(m, 0) == 0 && waitpid(m, NULL, WNOHANG) == 0;
    bool ok = now == inc;
    printf("reaper_judges_namespaced_member_alive (%s): %s (member pid 1 of its own namespace, %s: node 1 %s)\n",
           bname, ok ? "PASS" : "FAIL", alive ? "running" : "gone",
           ok ? "still its own" : now ? "taken by another life" : "freed: reported dead while running");
    orbit_reaper_close(r);
    kill(m, SIGKILL);
    waitpid(m, NULL, 0);
    orbit_fleet_leave(sup);
    orbit_fleet_unlink(name);
    return ok ? 0 : 1;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int bad = forked_child_pins_parent_life();
    if (geteuid() != 0) {
        printf("reaper_judges_namespaced_member_alive: SKIPPED (not root)\n");
        return bad ? 1 : 0;
    }
    enum orbit_reaper_backend b[2] = { ORBIT_REAPER_PIDFD, ORBIT_REAPER_BPF };
    const char *bn[2] = { "pidfd", "bpf" };
    for (int i = 0; i < 2; i++) {
        pid_t c = fork();
        if (c == 0)
            _exit(reaper_case(b[i], bn[i]));
        int st = 0;
        waitpid(c, &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad ? 1 : 0;
}
