/* SPDX-License-Identifier: MIT */
/* Process identity: pid + start time from /proc, one zombie rule, "every thread exiting", and
 * this process life's fork generation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <orbit/inspect.h>
#include "error_internal.h"
#include "life.h"
#include "segment.h"

/* Moves in a fork child (life.c's atfork handler): a handle of another generation is a parent's. */
_Atomic uint32_t orb_fork_generation = 1;

#define PF_EXITING_FLAG 0x4u   /* task->flags (stat field 9): set as do_exit begins, never cleared */

struct proc_stat { char state; uint64_t flags, threads, start_time; };

/* Fields 3 (state), 9 (flags), 20 (threads) and 22 (start time) of a /proc stat file. */
static int stat_read(const char *path, struct proc_stat *out)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = n < 0 ? errno : 0;
    close(fd);
    if (n <= 0)
        return err == ESRCH || n == 0 ? -ESRCH : -err;   /* the process went while we read */
    buf[n] = '\0';
    char *p = strrchr(buf, ')');   /* comm may hold spaces and parens: fields follow the last ')' */
    if (!p || p[1] != ' ')
        return -EIO;
    p += 2;                        /* field 3: state */
    out->state = *p;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -EIO;
        p++;
        if (field + 1 == 9)
            out->flags = strtoull(p, NULL, 10);
        else if (field + 1 == 20)
            out->threads = strtoull(p, NULL, 10);
    }
    out->start_time = strtoull(p, NULL, 10);
    return 0;
}

static int start_time_of(int32_t pid, uint64_t *out)
{
    char path[64];
    struct proc_stat st;
    if (pid <= 0 || !out)
        return -ESRCH;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int rc = stat_read(path, &st);
    if (rc < 0)
        return rc;
    /* A zombie leader whose other threads still run is alive; a lone zombie has exited. */
    if ((st.state == 'Z' || st.state == 'X') && st.threads <= 1)
        return -ESRCH;
    *out = st.start_time;
    return 0;
}

int orbit_process_start_time(int32_t pid, uint64_t *out)
{
    orb_error_clear();
    int rc = start_time_of(pid, out);
    if (rc < 0)
        return orb_fail(rc, "pid %d: %s", (int)pid, !out ? "out is NULL" : rc == -ESRCH ? "no such live process "
                        "in this /proc (gone, a zombie, or another pid namespace)" : strerror(-rc));
    return 0;
}

uint64_t orb_proc_start_time(int pid)
{
    uint64_t t = 0;
    return start_time_of(pid, &t) == 0 ? t : 0;
}

/* Is every thread of the directory's batch (getdents64 records) exiting? Counts those seen. */
static int batch_exiting(int32_t pid, const char *buf, long len, int *seen)
{
    int all = 1;
    for (long off = 0; all && off < len;) {
        const struct dirent64 *e = (const struct dirent64 *)(const void *)(buf + off);
        off += e->d_reclen;
        struct proc_stat st;
        char path[96];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%.16s/stat", (int)pid, e->d_name);
        if (stat_read(path, &st) < 0)
            continue;   /* that thread is gone already */
        (*seen)++;
        all = (st.flags & PF_EXITING_FLAG) != 0;
    }
    return all;
}

/*
 * Threads cannot be added once all are exiting, so "all seen exiting" stays
 * true. Threads that vanish while we look are exiting too. The directory is
 * read into a buffer on the stack, not through opendir: no allocation, so a
 * thread of a supervisor that forks meanwhile never leaves an allocator
 * lock taken in the child.
 */
int orbit_process_exiting(int32_t pid)
{
    char path[96];
    orb_error_clear();
    if (pid <= 0)
        return 1;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT)   /* unreadable (hidepid): no evidence either way */
        return orb_fail(-errno, "%s: %s (a /proc mounted with hidepid hides other users' processes)", path,
                        strerror(errno));
    if (fd < 0)
        return 1;
    int all = 1, seen = 0;
    _Alignas(struct dirent64) char buf[2048];
    for (ssize_t n; all && (n = getdents64(fd, buf, sizeof buf)) > 0;)
        all = batch_exiting(pid, buf, (long)n, &seen);
    close(fd);
    if (seen > 0)
        return all;
    /*
     * No thread readable: reaped while we looked. Its threads leave the list
     * before its pid goes, so /proc/PID may still resolve for a moment: the
     * process's own stat says gone (1), dead or exiting (1), or running (0).
     */
    struct proc_stat st;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int rc = stat_read(path, &st);
    if (rc < 0)
        return rc == -ESRCH ? 1 : 0;   /* another failure is no evidence either way */
    return st.state == 'Z' || st.state == 'X' || (st.flags & PF_EXITING_FLAG) ? 1 : 0;
}

uint64_t orb_pidns_self(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}
