/* SPDX-License-Identifier: MIT */
/*
 * The system calls libc does not wrap (Debian 12's glibc 2.36 has no futex,
 * membarrier or pidfd wrappers), written once for liborbit, liborbit-reaper
 * and the tools. Header-only: each is one syscall(2) with its arguments
 * typed. Each returns what the kernel returns (-1 with errno set on failure),
 * as libc's wrappers do; the callers keep their own policies (bounds, retry).
 */
#ifndef ORB_SYS_SYSCALLS_H
#define ORB_SYS_SYSCALLS_H

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/types.h>

/*
 * Sleep while *word == expected, until the absolute CLOCK_MONOTONIC time at
 * (NULL: no bound). Shared, not FUTEX_PRIVATE_FLAG: the words live in
 * segments other processes map. 0 woken; -1 with ETIMEDOUT, EINTR or EAGAIN
 * (the word already differs).
 */
static inline int orb_sys_futex_wait(const void *word, uint32_t expected, const struct timespec *at)
{
    return (int)syscall(SYS_futex, (uint32_t *)(uintptr_t)word, FUTEX_WAIT_BITSET, expected, at,
                        NULL, FUTEX_BITSET_MATCH_ANY);
}

/* Wake up to n sleepers on a shared word; the number woken, or -1. */
static inline int orb_sys_futex_wake(const void *word, int n)
{
    return (int)syscall(SYS_futex, (uint32_t *)(uintptr_t)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* membarrier(2): cmd is a MEMBARRIER_CMD_*; 0 (or the query's mask), or -1. */
static inline int orb_sys_membarrier(int cmd)
{
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

/* pidfd_open(2): a pidfd for pid (flags 0), or -1 (ENOSYS before Linux 5.3). */
static inline int orb_sys_pidfd_open(pid_t pid, unsigned int flags)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, flags);
#else
    (void)pid, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

/* pidfd_send_signal(2): sig to the process behind pidfd (info NULL, flags 0); 0 or -1. */
static inline int orb_sys_pidfd_send_signal(int pidfd, int sig, unsigned int flags)
{
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, flags);
#else
    (void)pidfd, (void)sig, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

#endif
