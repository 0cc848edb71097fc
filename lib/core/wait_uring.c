/* SPDX-License-Identifier: MIT */
/* The wake protocol through io_uring: a wait as an SQE, and the calls that own the wake batch. */
#include <orbit/uring.h>
#include "error_internal.h"
#include "uring_internal.h"
#include "wait.h"

bool orbit_uring_futex_supported(void)
{
    return orb_uring_futex_ops();
}

const char *orbit_uring_futex_status(void)
{
    return orb_uring_status();
}

int orbit_uring_refusal(int err, char *buf, size_t len)
{
    orb_error_clear();
    if (err >= 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: err %d is not a negated errno", __func__, err);
    if (!buf && len > 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: buf is NULL, len %zu", __func__, len);
    return orb_uring_refusal(err, buf, len);
}

/* A prep without the kernel's futex ops: -ORBIT_ENOTSUP, the probe's reason its sentence. */
int orb_uring_unsupported(struct io_uring_sqe *sqe)
{
    return orb_uring_prep_result(sqe, orb_fail(-ORBIT_ENOTSUP, "%s", orb_uring_status()));
}

int orb_uring_prep_wait(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                        struct io_uring_sqe *sqe, struct orb_wait_stats *stats)
{
    if (!sqe)
        return orb_fail_text(-ORBIT_EMALFORMED, "the sqe is NULL");
    if (!orb_uring_futex_ops())
        return orb_uring_unsupported(sqe);
    uint32_t since = orb_wait_since(w);
    int r = pred ? pred(ctx) : 0;
    if (r == 0) {
        orb_wait_arm(w);
        /* Checked again after arming: a change from here on moves the word we wait on. */
        r = pred ? pred(ctx) : 0;
    }
    if (r != 0) {
        if (r > 0 && stats && stats->ctr)
            orb_count(stats->ctr, ORB_CTR_URING_READY, 1);
        return orb_uring_prep_result(sqe, r > 0 ? 1 : r);
    }
    __u64 user_data = sqe->user_data;
    orb_uring_prep_futex_wait(sqe, &w->changes, since);
    sqe->user_data = user_data;
    if (stats) {
        atomic_fetch_add_explicit(&stats->parks, 1, memory_order_relaxed);
        if (stats->ctr)
            orb_count(stats->ctr, ORB_CTR_URING_ARMED, 1);
    }
    return 0;
}

int orbit_uring_attach_wakes(struct io_uring *ring)
{
    orb_error_clear();
    if (!ring)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ring is NULL", __func__);
    if (!orb_uring_futex_ops())
        return orb_fail(-ORBIT_ENOTSUP, "%s: %s", __func__, orb_uring_status());
    orb_uring_batch_set(ring, ORBIT_URING_WAKE_USER_DATA);
    return 0;
}

void orbit_uring_detach_wakes(void)
{
    orb_error_clear();
    orb_uring_batch_set(NULL, 0);
}
