/* SPDX-License-Identifier: MIT */
/*
 * The pidfd backend: a member of the reaper's own pid namespace is watched
 * through a pidfd in the reaper's epoll set, readable once its thread group
 * has exited. The same probes tell the BPF backend whether a tgid it just
 * filtered is still the recorded process.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "reaper_internal.h"
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

/* Best effort: PIDFD_GET_INFO (Linux 6.15) gives the status once the task is reaped. */
struct rp_pidfd_info {
    uint64_t mask, cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t  exit_code;
};
#define RP_PIDFD_GET_INFO  _IOWR(0xFF, 11, struct rp_pidfd_info)
#define RP_PIDFD_INFO_EXIT (1ull << 3)
#define RP_P_PIDFD 3   /* waitid's idtype for a pidfd (Linux 5.4) */

int rp_pidfd_status(int pidfd)
{
    /* Our own child: waitid(P_PIDFD) reads its status and leaves it for the waiter (WNOWAIT). */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(RP_P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0)
        return si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
    struct rp_pidfd_info info;
    memset(&info, 0, sizeof info);
    info.mask = RP_PIDFD_INFO_EXIT;
    if (ioctl(pidfd, RP_PIDFD_GET_INFO, &info) != 0 || !(info.mask & RP_PIDFD_INFO_EXIT))
        return -1;
    return info.exit_code;
}

/*
 * Watch a LIVE member by its pidfd, tagged (fleet id << 16) | node in the
 * epoll set, one-shot: the event loop hands the event to the fleet's thread,
 * which takes the pidfd out of the set (a readable pidfd stays readable).
 */
bool rp_pidfd_watch(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node)
{
    struct rp_watch *w = &rf->nodes[node];
    int fd = -1;
    if (!rp_probe_alive(w->seen.pid, w->seen.start_time, &fd))
        return false;
    w->pidfd = fd;   /* before the event can fire: the fleet's thread looks at it */
    struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = ((uint64_t)rf->id << 16) | node };
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        w->pidfd = -1;
        close(fd);
        return false;
    }
    return true;
}
