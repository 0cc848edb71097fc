/* SPDX-License-Identifier: MIT */
/* io_uring futex glue: probe, FUTEX_WAIT/WAKE preps, the per-thread wake batch. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/uring.h>
#include "uring_internal.h"
#include "core/error_internal.h"

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

bool orbit_uring_futex_supported(void)
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

int orb_uring_prep_wait(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                        struct io_uring_sqe *sqe, struct orb_wait_stats *stats)
{
    if (!sqe)
        return -ORBIT_EMALFORMED;
    if (!orbit_uring_futex_supported())
        return orb_uring_prep_result(sqe, -ORBIT_ENOTSUP);
    uint32_t since = orb_wait_since(w);
    int r = pred ? pred(ctx) : 0;
    if (r == 0) {
        orb_wait_arm(w);
        /* Checked again after arming: a change from here on moves the word we wait on. */
        r = pred ? pred(ctx) : 0;
    }
    if (r != 0) {
        if (r > 0 && stats)
            orb_count(stats->ctr, ORB_CTR_URING_READY, 1);
        return orb_uring_prep_result(sqe, r > 0 ? 1 : r);
    }
    __u64 user_data = sqe->user_data;
    orb_uring_prep_futex_wait(sqe, &w->changes, since);
    sqe->user_data = user_data;
    if (stats) {
        atomic_fetch_add_explicit(&stats->parks, 1, memory_order_relaxed);
        orb_count(stats->ctr, ORB_CTR_URING_ARMED, 1);
    }
    return 0;
}

/* ---- the wake batch ---------------------------------------------------- */

static int queue_wake(void *ctx, _Atomic uint32_t *word)
{
    struct io_uring *ring = ctx;
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        return -1;   /* SQ full: the caller issues futex(2) itself */
    orb_uring_prep_futex_wake(sqe, word);
    sqe->user_data = ORBIT_URING_WAKE_USER_DATA;
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;   /* the caller sees a CQE only if a wake fails */
    return 0;
}

int orbit_uring_attach_wakes(struct io_uring *ring)
{
    orb_error_clear();
    if (!ring)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ring is NULL", __func__);
    if (!orbit_uring_futex_supported())
        return orb_fail(-ORBIT_ENOTSUP, "%s: this kernel lacks io_uring futex operations (Linux 6.7)", __func__);
    orb_wait_set_wake_hook(queue_wake, ring);
    return 0;
}

void orbit_uring_detach_wakes(void)
{
    orb_error_clear();
    orb_wait_set_wake_hook(NULL, NULL);
}
