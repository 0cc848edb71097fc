/* SPDX-License-Identifier: MIT */
/* Probes of one process: is the process a record names (pid, start time) still running? */
#include <poll.h>
#include <unistd.h>
#include <orbit/inspect.h>
#include "reaper_probe.h"
#include "syscalls.h"

bool rp_pidfd_exited(int pidfd)
{
    struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
    return poll(&pfd, 1, 0) > 0;   /* readable once the whole thread group has exited */
}

/*
 * Open a pidfd, then check the start time: if /proc still shows the start
 * time of the record, the pidfd pins that very process (opened before the
 * check, so a reuse in between would show another start time). Seen only
 * on evidence: a /proc that cannot tell (hidepid) shows nothing, and the
 * caller watches that member through the token instead.
 */
bool rp_probe_alive(int32_t pid, uint64_t start_time, int *pidfd)
{
    if (pid <= 0)
        return false;
    int fd = orb_sys_pidfd_open((pid_t)pid, 0);
    if (fd < 0)
        return false;
    uint64_t now = 0;
    int rc = orbit_process_start_time(pid, &now);
    bool alive = rc == 0 && now == start_time && !rp_pidfd_exited(fd);
    if (alive && pidfd)
        *pidfd = fd;
    else
        close(fd);
    return alive;
}

/*
 * Alive, and not every thread already inside do_exit: then the group is as
 * good as dead, though its pidfd turns readable only once teardown is over.
 * The BPF backend needs this: a member whose exit began before its tgid
 * entered the filter is never reported by the kernel.
 */
bool rp_member_alive(int32_t pid, uint64_t start_time)
{
    return rp_probe_alive(pid, start_time, NULL) && orbit_process_exiting(pid) != 1;
}
