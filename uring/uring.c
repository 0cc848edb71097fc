/* SPDX-License-Identifier: MIT */
/* io_uring futex glue: probe, FUTEX_WAIT/WAKE preps, the per-thread wake batch. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "uring_internal.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool futex_ops_supported;
static char probe_status[640] = "io_uring futex waits in use";

/* A small integer from a /proc/sys file; fallback when it cannot be read. */
static long read_sysctl(const char *path, long fallback)
{
    FILE *f = fopen(path, "re");
    long v = fallback;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = fallback;
        fclose(f);
    }
    return v;
}

/* Seccomp mode of this process as /proc/self/status says (2: a filter), -1 when it cannot tell. */
static int seccomp_mode(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    int mode = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Seccomp: %d", &mode) == 1)
            break;
    if (f)
        fclose(f);
    return mode;
}

static bool in_group(gid_t gid)
{
    if (getegid() == gid)
        return true;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/* The errno names an operator searches for; strerror for the rest. */
static const char *errno_text(int err)
{
    switch (err) {
    case -EPERM: return "EPERM";
    case -EACCES: return "EACCES";
    case -ENOSYS: return "ENOSYS";
    default: return strerror(-err);
    }
}

int orb_uring_refusal(int err, char *buf, size_t len)
{
    long disabled = read_sysctl("/proc/sys/kernel/io_uring_disabled", -1);
    long group = read_sysctl("/proc/sys/kernel/io_uring_group", -1);
    bool filtered = seccomp_mode() == 2, denied = err == -EPERM || err == -EACCES;
    char sysctl[64];
    if (disabled < 0)
        snprintf(sysctl, sizeof sysctl, "kernel.io_uring_disabled is not on this kernel");
    else
        snprintf(sysctl, sizeof sysctl, "kernel.io_uring_disabled = %ld", disabled);
    const char *also = filtered ? " (a seccomp filter is in force as well)" : "";
    if (denied && disabled == 2)
        return snprintf(buf, len, "the sysctl %s turns io_uring off for every process (%s); "
                        "`sysctl kernel.io_uring_disabled=0` turns it on%s", sysctl, errno_text(err), also);
    if (denied && disabled == 1 && geteuid() != 0 && (group < 0 || !in_group((gid_t)group)))
        return snprintf(buf, len, "the sysctl %s allows io_uring only to CAP_SYS_ADMIN and the group "
                        "kernel.io_uring_group (%ld), and this process is in neither (%s); "
                        "`sysctl kernel.io_uring_disabled=0` lifts it, or run it in that group%s",
                        sysctl, group, errno_text(err), also);
    if (filtered && (denied || err == -ENOSYS))
        return snprintf(buf, len, "this process's seccomp filter refuses io_uring_setup, io_uring_enter or "
                        "io_uring_register (%s), as Docker's default profile, containerd's RuntimeDefault and "
                        "Android do (%s, so not the sysctl); a profile that allows those three calls lifts it "
                        "(docker run --security-opt seccomp=PROFILE.json; Kubernetes "
                        "securityContext.seccompProfile)", errno_text(err), sysctl);
    if (err == -ENOSYS)
        return snprintf(buf, len, "this kernel has no io_uring (ENOSYS; CONFIG_IO_URING), and no seccomp "
                        "filter is in force (%s)", sysctl);
    return snprintf(buf, len, "%s, with no seccomp filter in force and %s", errno_text(err), sysctl);
}

/* Why io_uring_setup failed with err (a negated errno), in words an operator can act on. */
static void say_refused(int err)
{
    int n = snprintf(probe_status, sizeof probe_status,
                     "no io_uring futex waits (futex(2) and driver threads instead): ");
    orb_uring_refusal(err, probe_status + n, sizeof probe_status - (size_t)n);
}

static void probe_futex_ops(void)
{
    const char *off = getenv("ORBIT_DISABLE_URING_FUTEX");
    if (off && *off && strcmp(off, "0") != 0) {   /* forced fallback, for testing the futex(2) paths */
        snprintf(probe_status, sizeof probe_status, "no io_uring futex waits (futex(2) and driver "
                 "threads instead): ORBIT_DISABLE_URING_FUTEX is set");
        return;
    }
    struct io_uring ring;
    int rc = io_uring_queue_init(2, &ring, 0);
    if (rc != 0) {
        say_refused(rc);   /* io_uring disabled (sysctl, seccomp): every path falls back */
        return;
    }
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    if (probe) {
        futex_ops_supported = io_uring_opcode_supported(probe, IORING_OP_FUTEX_WAIT) &&
                              io_uring_opcode_supported(probe, IORING_OP_FUTEX_WAKE);
        io_uring_free_probe(probe);
    }
    io_uring_queue_exit(&ring);
    if (!futex_ops_supported)
        snprintf(probe_status, sizeof probe_status, "no io_uring futex waits (futex(2) and driver "
                 "threads instead): this kernel's io_uring lacks FUTEX_WAIT and FUTEX_WAKE (Linux 6.7)");
}

bool orb_uring_futex_ops(void)
{
    pthread_once(&probe_once, probe_futex_ops);
    return futex_ops_supported;
}

const char *orb_uring_status(void)
{
    pthread_once(&probe_once, probe_futex_ops);
    return probe_status;
}

void orb_uring_prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word, uint32_t expected)
{
    /* fd carries the futex2 flags: a 32-bit word, shared (FUTEX2_PRIVATE clear). */
    io_uring_prep_rw(IORING_OP_FUTEX_WAIT, sqe, FUTEX2_SIZE_U32, (const void *)word, 0, expected);
    sqe->addr3 = 0xffffffffu;   /* mask; prep_rw cleared it and 0 is -EINVAL */
}

void orb_uring_prep_futex_wake(struct io_uring_sqe *sqe, _Atomic uint32_t *word)
{
    io_uring_prep_rw(IORING_OP_FUTEX_WAKE, sqe, FUTEX2_SIZE_U32, (const void *)word, 0, INT_MAX);
    sqe->addr3 = 0xffffffffu;
}

int orb_uring_prep_result(struct io_uring_sqe *sqe, int rc)
{
    if (rc != 0 && sqe) {
        __u64 user_data = sqe->user_data;
        io_uring_prep_nop(sqe);   /* clears flags: no link, drain or fixed file */
        sqe->user_data = user_data;
    }
    return rc;
}

/* ---- the wake batch ---------------------------------------------------- */

static _Thread_local struct io_uring *batch_ring;
static _Thread_local uint64_t batch_user_data;

void orb_uring_batch_set(struct io_uring *ring, uint64_t user_data)
{
    batch_ring = ring;
    batch_user_data = user_data;
}

int orb_uring_batch_wake(_Atomic uint32_t *word)
{
    struct io_uring_sqe *sqe = batch_ring ? io_uring_get_sqe(batch_ring) : NULL;
    if (!sqe)
        return -1;   /* no batch, or its SQ is full */
    orb_uring_prep_futex_wake(sqe, word);
    sqe->user_data = batch_user_data;
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;   /* the caller sees a CQE only if a wake fails */
    return 0;
}
