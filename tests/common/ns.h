/* SPDX-License-Identifier: MIT */
/* Namespace helpers for tests with members where servers run: another pid namespace, another user. */
#ifndef ORBIT_TEST_NS_H
#define ORBIT_TEST_NS_H

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#define TN_SHARED_GID 4242   /* the group a fleet shared with another user is chowned to */

/* In a new mount namespace: our own /proc (of the pid namespace we are in), hidepid=2 if asked. */
static inline int tn_own_proc(bool hidepid)
{
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -errno;
    return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, hidepid ? "hidepid=2" : NULL) == 0
               ? 0 : -errno;
}

/* Become uid with TN_SHARED_GID as our group (and only group). */
static inline int tn_become(uid_t uid)
{
    gid_t g = TN_SHARED_GID;
    return setgroups(1, &g) == 0 && setgid(TN_SHARED_GID) == 0 && setuid(uid) == 0 ? 0 : -errno;
}

/*
 * A mount namespace of our own with its own /dev/shm (and hugetlbfs, else
 * none at all: ORBIT_HUGETLB_DIR=""), so a reaper watching every fleet sees
 * only ours. NULL, or why not.
 */
static inline const char *tn_private_shm(void)
{
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return "no private mount namespace";
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        return "cannot mount a tmpfs on /dev/shm";
    if (access("/dev/hugepages", F_OK) != 0 || mount("none", "/dev/hugepages", "hugetlbfs", 0, NULL) != 0)
        setenv("ORBIT_HUGETLB_DIR", "", 1);
    return NULL;
}

/* Why these tests cannot run here (not root, no new pid namespaces), or NULL. */
static inline const char *tn_namespaces_unavailable(void)
{
    if (geteuid() != 0)
        return "not root";
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(unshare(CLONE_NEWNS | CLONE_NEWPID) == 0 ? 0 : 1);
    int status = 0;
    waitpid(p, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? NULL : "unshare(CLONE_NEWPID) refused";
}

#endif
