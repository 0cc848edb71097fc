/* SPDX-License-Identifier: MIT */
/*
 * seccomp-no-uring - run a program where io_uring is refused, as Docker's
 * default seccomp profile, containerd 2.0's RuntimeDefault and Android refuse
 * it: io_uring_setup, io_uring_enter and io_uring_register fail with EPERM
 * (or the errno given), every other system call is allowed. The filter is
 * inherited by every child and kept across execve, so a whole test (its
 * forked members, the tools it starts) runs under it.
 *
 *   seccomp-no-uring [--errno NAME|NUMBER] PROGRAM [ARGS...]
 *   seccomp-no-uring --check      exit 0 when this process is already filtered so
 *
 * Usable as `meson test --wrapper`. Exit 125 when the filter cannot be loaded,
 * 127 when PROGRAM cannot be run; otherwise PROGRAM's own exit status.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const int refused[] = { SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter), SCMP_SYS(io_uring_register) };

static int errno_named(const char *s)
{
    static const struct { const char *name; int value; } known[] = {
        { "EPERM", EPERM }, { "ENOSYS", ENOSYS }, { "EACCES", EACCES }, { "EINVAL", EINVAL },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(s, known[i].name) == 0)
            return known[i].value;
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v > 0 && v < 4096 ? (int)v : -1;
}

/* Is io_uring refused to this process already (the filter is in place)? */
static int already_refused(void)
{
    long rc = syscall(SYS_io_uring_setup, 0u, NULL);   /* 0 entries: EINVAL when allowed */
    return rc < 0 && errno != EINVAL && errno != EFAULT;
}

static int load_filter(int err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0] && rc == 0; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint32_t)err), refused[i], 0);
    if (rc == 0)
        rc = seccomp_load(ctx);   /* sets no_new_privs first, as an unprivileged runtime does */
    seccomp_release(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    int err = EPERM, i = 1;
    if (argc == 2 && strcmp(argv[1], "--check") == 0)
        return already_refused() ? 0 : 1;
    if (i + 1 < argc && strcmp(argv[i], "--errno") == 0) {
        err = errno_named(argv[i + 1]);
        if (err < 0) {
            fprintf(stderr, "seccomp-no-uring: --errno %s: a name (EPERM, ENOSYS, EACCES, EINVAL) or a "
                    "number 1..4095\n", argv[i + 1]);
            return 2;
        }
        i += 2;
    }
    if (i >= argc || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
        fprintf(i < argc ? stdout : stderr, "usage: seccomp-no-uring [--errno NAME|NUMBER] PROGRAM [ARGS...]\n"
                "       seccomp-no-uring --check\n"
                "Runs PROGRAM with io_uring_setup, io_uring_enter and io_uring_register refused\n"
                "(EPERM unless --errno says otherwise), as Docker's default seccomp profile does.\n");
        return i < argc ? 0 : 2;
    }
    int rc = load_filter(err);
    if (rc < 0) {
        fprintf(stderr, "seccomp-no-uring: loading the filter: %s\n", strerror(-rc));
        return 125;
    }
    if (!already_refused()) {
        fprintf(stderr, "seccomp-no-uring: the filter is loaded but io_uring_setup is still allowed\n");
        return 125;
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "seccomp-no-uring: %s: %s\n", argv[i], strerror(errno));
    return 127;
}
