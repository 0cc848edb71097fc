/* SPDX-License-Identifier: MIT */
/* io_uring futex glue: probe, FUTEX_WAIT/WAKE preps, the per-thread wake batch. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "uring_internal.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool futex_ops_supported;

static void probe_futex_ops(void)
{
    const char *off = getenv("ORBIT_DISABLE_URING_FUTEX");
    if (off && *off && strcmp(off, "0") != 0)
        return;   /* forced fallback, for testing the futex(2) paths */
    struct io_uring ring;
    if (io_uring_queue_init(2, &ring, 0) != 0)
        return;   /* io_uring disabled (sysctl, seccomp): every path falls back */
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    if (probe) {
        futex_ops_supported = io_uring_opcode_supported(probe, IORING_OP_FUTEX_WAIT) &&
                              io_uring_opcode_supported(probe, IORING_OP_FUTEX_WAKE);
        io_uring_free_probe(probe);
    }
    io_uring_queue_exit(&ring);
}

bool orb_uring_futex_ops(void)
{
    pthread_once(&probe_once, probe_futex_ops);
    return futex_ops_supported;
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
