/* SPDX-License-Identifier: MIT */
/*
 * The io_uring floor: futex words, SQEs and the per-thread wake batch. It
 * knows no orbit structure and includes nothing of lib/: the core and the
 * tables hand it a word, the value to wait on, the user_data to stamp, and
 * decide themselves when a wait is safe to arm or a wake is owed.
 */
#ifndef ORB_URING_INTERNAL_H
#define ORB_URING_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <liburing.h>

/* Debian 12's liburing 2.3 and 6.1 uapi headers lack the futex opcodes (Linux 6.7). */
#ifndef IORING_OP_FUTEX_WAIT
#define IORING_OP_FUTEX_WAIT  51
#define IORING_OP_FUTEX_WAKE  52
#define IORING_OP_FUTEX_WAITV 53
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif

/* Does this kernel run IORING_OP_FUTEX_WAIT/WAKE? Probed once per process;
 * ORBIT_DISABLE_URING_FUTEX (non-empty, not "0") forces false, for testing
 * the futex(2) paths. */
bool orb_uring_futex_ops(void);
/* What the probe found, as one sentence ("no io_uring futex waits ...: why"; static). */
const char *orb_uring_status(void);
/* Why io_uring refused this process with err (a negated errno): the cause (the sysctl
 * kernel.io_uring_disabled, a seccomp filter, a kernel without it) and what lifts it,
 * as snprintf writes it into buf; the whole sentence's length. */
int orb_uring_refusal(int err, char *buf, size_t len);

/* Fill sqe with FUTEX_WAIT on a shared u32 word expecting `expected`. */
void orb_uring_prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word, uint32_t expected);
/* Fill sqe with FUTEX_WAKE of every waiter on a shared u32 word. */
void orb_uring_prep_futex_wake(struct io_uring_sqe *sqe, _Atomic uint32_t *word);

/*
 * What a public prep leaves in the caller's SQE: 0 means it holds a FUTEX_WAIT;
 * any other rc turns it into a plain NOP (flags cleared, user_data kept), so a
 * loop that submits every SQE it took stays correct. Returns rc.
 */
int orb_uring_prep_result(struct io_uring_sqe *sqe, int rc);

/*
 * The wake batch of this thread: with a ring set, orb_uring_batch_wake queues
 * a FUTEX_WAKE SQE there, stamped user_data and IOSQE_CQE_SKIP_SUCCESS (a CQE
 * shows only a failed wake), for the ring owner's next submit. ring NULL
 * ends the batch.
 */
void orb_uring_batch_set(struct io_uring *ring, uint64_t user_data);
/* 0 when the wake of every sleeper on word was queued; -1 when there is no
 * batch or its SQ is full: the caller issues futex(2) itself. */
int  orb_uring_batch_wake(_Atomic uint32_t *word);

#endif
