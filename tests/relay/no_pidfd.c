/* SPDX-License-Identifier: MIT */
/*
 * no-pidfd - run a program where pidfd_open(2) is refused (ENOSYS), as
 * valgrind and some seccomp profiles refuse it; every other system call is
 * allowed. The filter is inherited by every child and kept across execve.
 *
 *   no-pidfd PROGRAM [ARGS...]
 *
 * Exit 125 when the filter cannot be loaded (or pidfd_open still works), 127
 * when PROGRAM cannot be run; otherwise PROGRAM's own exit status.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: no-pidfd PROGRAM [ARGS...]\n");
        return 2;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = ctx ? seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(pidfd_open), 0) : -ENOMEM;
    if (rc == 0)
        rc = seccomp_load(ctx);   /* sets no_new_privs first, as an unprivileged runtime does */
    seccomp_release(ctx);
    if (rc < 0 || syscall(SYS_pidfd_open, getpid(), 0) >= 0) {
        fprintf(stderr, "no-pidfd: the filter: %s\n", rc < 0 ? strerror(-rc) : "pidfd_open still works");
        return 125;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "no-pidfd: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
