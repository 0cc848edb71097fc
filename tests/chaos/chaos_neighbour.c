/* SPDX-License-Identifier: MIT */
/*
 * The chaos suite's hostile neighbour: another user (uid 65534) with fleets
 * of its own beside the victim fleet, doing what issue 34 found a local user
 * can do to a root reaper: 4,000 forged live nodes kept "alive" by one OFD
 * lock, a fleet segment and a table segment left half-created (not ready, the
 * creator-lock byte held), a fleet whose files it truncates under the reaper's
 * mappings. hostile_fleet (tests/hostile) does each; this file
 * starts and stops them, and gives the supervisor a /dev/shm of its own, so
 * a reaper watching every fleet sees only this run's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "chaos.h"
#include "ns.h"

#define NOBODY 65534

const char *chaos_private_shm(void)
{
    return geteuid() != 0 ? "not root" : tn_private_shm();
}

/* hostile_fleet VERB FLEET ARG as uid 65534 (setpriv --reuid --regid --clear-groups); its pid once ready. */
static pid_t run_as_nobody(const char *bin, const char *verb, const char *fleet, const char *arg, int *keep)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        gid_t g = NOBODY;
        if (setgroups(1, &g) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 || setresuid(NOBODY, NOBODY, NOBODY) != 0)
            _exit(126);
        execl(bin, bin, verb, fleet, arg, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    char line[128] = "";
    struct pollfd pfd = { .fd = out[0], .events = POLLIN };
    ssize_t got = pid > 0 && poll(&pfd, 1, 20000) == 1 ? read(out[0], line, sizeof line - 1) : -1;
    close(out[0]);
    if (got <= 0 || strncmp(line, "ready", 5) != 0) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        close(in[1]);
        return -1;
    }
    *keep = in[1];   /* held open: it stays until we close it or kill it */
    return pid;
}

int chaos_attacker_start(struct chaos_attacker *a, const char *bin, const char *tag, unsigned round)
{
    static const char *const verb[CHAOS_ATTACKERS] = { "forge", "plant", "plant", "truncate" };
    static const char *const arg[CHAOS_ATTACKERS] = { "4000", "255", "247", "4096" };
    static const char *const kind[CHAOS_ATTACKERS] = { "forged", "half", "table", "cut" };
    memset(a, 0, sizeof *a);
    for (int i = 0; i < CHAOS_ATTACKERS; i++) {
        snprintf(a->fleet[i], sizeof a->fleet[i], "t-chaos-%s-%s-%d-%u", tag, kind[i], (int)getpid(), round);
        a->pid[i] = run_as_nobody(bin, verb[i], a->fleet[i], arg[i], &a->keep[i]);
        if (a->pid[i] < 0) {
            fprintf(stderr, "chaos: the attacker's %s %s did not get ready\n", verb[i], a->fleet[i]);
            chaos_attacker_stop(a);
            return -1;
        }
        a->n = i + 1;
    }
    return 0;
}

void chaos_attacker_cut(struct chaos_attacker *a)
{
    if (a->n > CHAOS_CUTTER && write(a->keep[CHAOS_CUTTER], "cut\n", 4) != 4)
        fprintf(stderr, "chaos: the attacker's cutter did not take its command\n");
}

int chaos_attacker_stop(struct chaos_attacker *a)
{
    int ended = 0;
    for (int i = 0; i < a->n; i++) {
        int st;
        ended += waitpid(a->pid[i], &st, WNOHANG) == a->pid[i];   /* it stays until we close its stdin */
        kill(a->pid[i], SIGKILL);   /* the forger's 4,000 lives end with it */
        waitpid(a->pid[i], NULL, 0);   /* ECHILD: killed and reaped already */
        close(a->keep[i]);
        orbit_fleet_unlink(a->fleet[i]);
    }
    a->n = 0;
    return ended;
}
