/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: may this process use io_uring? Every mode of the relay runs
 * on io_uring (the workers, the backend, the load generator), and nothing
 * else does their work. Where io_uring is refused (Docker's default seccomp
 * profile, containerd 2.0's RuntimeDefault, Android, RHEL 9, or the sysctl
 * kernel.io_uring_disabled), the relay says so at start, in one line that
 * names the cause and what lifts it, before it forks or creates anything;
 * a worker that met the refusal itself could only say "Operation not
 * permitted", and its supervisor waited for it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "modes.h"

/* A number from a /proc file's first line after prefix (NULL: the first line), or fallback. */
static long proc_number(const char *path, const char *prefix, long fallback)
{
    FILE *f = fopen(path, "re");
    char line[160];
    long v = fallback;
    size_t n = prefix ? strlen(prefix) : 0;
    while (f && fgets(line, sizeof line, f)) {
        if (prefix && strncmp(line, prefix, n) != 0)
            continue;
        if (sscanf(line + n, "%ld", &v) != 1)
            v = fallback;
        break;
    }
    if (f)
        fclose(f);
    return v;
}

static bool in_group(long gid)
{
    if (gid < 0)
        return false;
    if ((long)getegid() == gid)
        return true;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if ((long)groups[i] == gid)
            return true;
    return false;
}

/* The cause of err from call, and what lifts it, as the rest of one line. */
static void say_cause(FILE *out, const char *call, int err)
{
    long disabled = proc_number("/proc/sys/kernel/io_uring_disabled", NULL, -1);
    long group = proc_number("/proc/sys/kernel/io_uring_group", NULL, -1);
    bool filtered = proc_number("/proc/self/status", "Seccomp:", -1) == 2;
    char sysctl[64];
    if (disabled < 0)
        snprintf(sysctl, sizeof sysctl, "kernel.io_uring_disabled is not on this kernel");
    else
        snprintf(sysctl, sizeof sysctl, "kernel.io_uring_disabled = %ld", disabled);
    fprintf(out, "orbit-relay: io_uring is refused here (%s: %s): ", call, strerror(-err));
    if ((err == -EPERM || err == -EACCES) && disabled == 2)
        fprintf(out, "the sysctl %s turns it off for every process; `sysctl kernel.io_uring_disabled=0` "
                "turns it on", sysctl);
    else if ((err == -EPERM || err == -EACCES) && disabled == 1 && geteuid() != 0 && !in_group(group))
        fprintf(out, "the sysctl %s allows it only to CAP_SYS_ADMIN and the group kernel.io_uring_group "
                "(%ld); `sysctl kernel.io_uring_disabled=0`, or run orbit-relay in that group", sysctl, group);
    else if (filtered)
        fprintf(out, "this process runs under a seccomp filter that refuses io_uring_setup, io_uring_enter "
                "or io_uring_register, as Docker's default profile and containerd's RuntimeDefault do "
                "(%s, so not the sysctl); allow those three calls in the profile (docker run "
                "--security-opt seccomp=PROFILE.json; Kubernetes securityContext.seccompProfile)", sysctl);
    else if (err == -ENOSYS)
        fprintf(out, "this kernel has no io_uring (CONFIG_IO_URING), and no seccomp filter is in force (%s)",
                sysctl);
    else
        fprintf(out, "no seccomp filter is in force and %s", sysctl);
    if (filtered && (disabled == 2 || disabled == 1))
        fprintf(out, " (a seccomp filter is in force as well)");
    fprintf(out, "; orbit-relay runs on io_uring only and does not start\n");
}

int uring_check(void)
{
    struct io_uring ring;
    const char *call = "io_uring_setup";
    int rc = io_uring_queue_init(4, &ring, 0);
    if (rc == 0) {
        call = "io_uring_enter";
        io_uring_prep_nop(io_uring_get_sqe(&ring));
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc >= 0) {
            struct io_uring_probe probe[2];   /* room for the header; the kernel fills what fits */
            call = "io_uring_register";
            rc = io_uring_register_probe(&ring, (struct io_uring_probe *)memset(probe, 0, sizeof probe), 1);
        }
        io_uring_queue_exit(&ring);
    }
    if (rc >= 0)
        return 0;
    say_cause(stderr, call, rc);
    return rc;
}
