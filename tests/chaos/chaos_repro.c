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
 *   lock_holder_of_a_colliding_namespace: a member of a namespace whose inode
 *     equals ours modulo 255 (what an 8-bit namespace tag in the lock word
 *     confused with ours), stopped inside the admission ledger lock under a
 *     pid that names nobody here, must not have its lock taken over while it
 *     lives.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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

#define HOLDERS_MAX 1024
#define NS_TAG(ino) ((ino) % 255u)   /* namespaces an 8-bit lock-word tag could not tell apart */

static uint64_t pidns_inode(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* In the namespace's init, told to: a member under pid want, stopped inside the ledger lock. */
static _Noreturn void park_member(const char *name, pid_t want, int resp)
{
    FILE *last = NULL;
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", 0, NULL) != 0 || !(last = fopen("/proc/sys/kernel/ns_last_pid", "w")))
        _exit(3);
    fprintf(last, "%d", (int)want - 1);
    fclose(last);
    pid_t member = fork();
    if (member == 0) {
        struct orbit_fleet *f;
        struct orbit_admission *a;
        setenv("ORBIT_TEST_ADMISSION_PARK_IN_MUTEX", "claim-commit", 1);
        if (join(name, 1, &f) != 0 || orbit_admission_open_existing(f, ORBIT_ADMISSION_KIND, &a) != 0)
            _exit(4);
        struct orbit_units u = { 1, 4 };
        struct orbit_demand d = { .claim = &u, .n_claim = 1 };
        struct orbit_admit_result r;
        orbit_admission_try_claim(a, &d, &r);   /* stops itself inside the ledger lock */
        _exit(0);
    }
    int st;
    char ok = member == want && waitpid(member, &st, WUNTRACED) == member && WIFSTOPPED(st) ? 's' : 'x';
    if (write(resp, &ok, 1) != 1)
        _exit(5);
    for (;;)
        pause();
}

/* A pid namespace whose init waits for a command: EOF holds it (its inode stays taken), 'm' parks a member. */
static pid_t new_namespace(const char *name, int own, int cmd[2], int resp[2])
{
    if (pipe(cmd) != 0 || pipe(resp) != 0 || unshare(CLONE_NEWPID) != 0)
        return -1;
    pid_t init = fork();
    if (init != 0) {
        close(cmd[0]);
        close(resp[1]);
        return setns(own, CLONE_NEWPID) == 0 ? init : -1;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(cmd[1]);
    close(resp[0]);
    pid_t want;
    if (read(cmd[0], &want, sizeof want) == sizeof want)
        park_member(name, want, resp[1]);
    for (;;)
        pause();
}

/* A pid free here, high enough that nothing takes it meanwhile. */
static pid_t free_pid(void)
{
    for (pid_t p = 30000; p > 1000; p--)
        if (kill(p, 0) != 0 && errno == ESRCH && pidns_inode(p) == 0)
            return p;
    return 0;
}

/* A claim of ours while the colliding member holds the ledger lock: it must not get through. */
static int claim_one(struct orbit_admission *a)
{
    struct orbit_units u = { 1, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    int rc = orbit_admission_try_claim(a, &d, &r);
    return rc < 0 ? rc : r.outcome == ORBIT_ADMIT_CLAIMED ? 0 : -ORBIT_EBUSY;
}

static int colliding_case(const char *name, struct orbit_admission *a, pid_t *holder, int *n)
{
    uint64_t ours = pidns_inode(getpid());
    int own = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC), cmd[2], resp[2];
    while (own >= 0 && *n < HOLDERS_MAX) {
        pid_t init = new_namespace(name, own, cmd, resp);
        if (init < 0)
            break;
        holder[(*n)++] = init;
        uint64_t ino = pidns_inode(init);
        if (ino && ino != ours && NS_TAG(ino) == NS_TAG(ours)) {
            pid_t want = free_pid();
            char parked = 0;
            if (write(cmd[1], &want, sizeof want) != sizeof want || read(resp[0], &parked, 1) != 1 || parked != 's')
                return printf("lock_holder_of_a_colliding_namespace: SKIPPED (no parked member)\n"), 0;
            int rc = claim_one(a);
            printf("lock_holder_of_a_colliding_namespace: %s (namespace inode %llu, ours %llu: tag %llu both; "
                   "a member as pid %d there, stopped inside the ledger lock; our claim: %s)\n", rc < 0 ? "PASS" : "FAIL",
                   (unsigned long long)ino, (unsigned long long)ours, (unsigned long long)NS_TAG(ours) + 1, (int)want,
                   rc < 0 ? orbit_strerror(rc) : "claimed: the live holder's lock was taken over");
            return rc < 0 ? 0 : 1;
        }
        close(cmd[1]);   /* EOF: this one only holds its inode */
        close(resp[0]);
    }
    return printf("lock_holder_of_a_colliding_namespace: SKIPPED (no colliding namespace made)\n"), 0;
}

static int lock_holder_of_a_colliding_namespace(void)
{
    char name[64];
    fleet_name(name, sizeof name, "nstag");
    struct orbit_fleet *f;
    struct orbit_admission *a;
    if (join(name, 0, &f) != 0 || orbit_admission_open(f, NULL, &a) != 0 || orbit_admission_set_capacity(a, 1, 10) != 0)
        return printf("lock_holder_of_a_colliding_namespace: SKIPPED (setup)\n"), 0;
    static pid_t holder[HOLDERS_MAX];
    int n = 0, bad = colliding_case(name, a, holder, &n);
    for (int i = 0; i < n; i++)
        kill(holder[i], SIGKILL);   /* each namespace's init: all in it die */
    for (int i = 0; i < n; i++)
        waitpid(holder[i], NULL, 0);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
    return bad;
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
    for (int i = 0; i < 3; i++) {
        pid_t c = fork();
        if (c == 0)
            _exit(i < 2 ? reaper_case(b[i], bn[i]) : lock_holder_of_a_colliding_namespace());
        int st = 0;
        waitpid(c, &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad ? 1 : 0;
}
