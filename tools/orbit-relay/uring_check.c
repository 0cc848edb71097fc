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
#include <orbit/uring.h>
#include "modes.h"

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
    char why[640];
    orbit_uring_refusal(rc, why, sizeof why);   /* the library names the cause: one place for it */
    fprintf(stderr, "orbit-relay: io_uring is refused here (%s: %s): %s; orbit-relay runs on io_uring only "
            "and does not start\n", call, strerror(-rc), why);
    return rc;
}
