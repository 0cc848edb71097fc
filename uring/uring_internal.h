/* SPDX-License-Identifier: MIT */
/* io_uring glue the table modules use to implement their orbit_*_prep_* calls. */
#ifndef ORB_URING_INTERNAL_H
#define ORB_URING_INTERNAL_H

#include <liburing.h>
#include "core/wait.h"

/* Debian 12's liburing 2.3 and 6.1 uapi headers lack the futex opcodes (Linux 6.7). */
#ifndef IORING_OP_FUTEX_WAIT
#define IORING_OP_FUTEX_WAIT  51
#define IORING_OP_FUTEX_WAKE  52
#define IORING_OP_FUTEX_WAITV 53
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif

/*
 * What a public prep leaves in the caller's SQE: 0 means it holds a FUTEX_WAIT;
 * any other rc turns it into a plain NOP (flags cleared, user_data kept), so a
 * loop that submits every SQE it took stays correct. Returns rc.
 */
int orb_uring_prep_result(struct io_uring_sqe *sqe, int rc);

/* Fill sqe with FUTEX_WAIT on a shared u32 word expecting `expected`. */
void orb_uring_prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word, uint32_t expected);
/* Fill sqe with FUTEX_WAKE of every waiter on a shared u32 word. */
void orb_uring_prep_futex_wake(struct io_uring_sqe *sqe, _Atomic uint32_t *word);

/*
 * The waiter side of the wake protocol (core/wait.h) for an SQE: since = changes; pred; arm parked;
 * pred again; fill FUTEX_WAIT(changes == since). Returns 1 when pred says
 * ready, 0 when sqe holds the wait, pred's negative error, or -ORBIT_ENOTSUP
 * when the kernel lacks IORING_OP_FUTEX_WAIT; on any non-zero return sqe is
 * a NOP (orb_uring_prep_result). user_data is left as the caller set it.
 */
int orb_uring_prep_wait(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                        struct io_uring_sqe *sqe, struct orb_wait_stats *stats);

/*
 * Readiness descriptor for one table handle: an eventfd that becomes readable
 * when the doorbell word moves (kernel-signalled through a private ring with
 * a FUTEX_WAIT on it, or a driver thread where the opcode is missing).
 * orbit_readiness_drain(fd) re-arms it. Close with orb_readiness_close.
 */
int  orb_readiness_open(struct orb_waitword *doorbell);
void orb_readiness_close(int fd);

#endif
