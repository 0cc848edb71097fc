/* SPDX-License-Identifier: MIT */
/* The fleet's io_uring waits: its node's doorbell, and a member's death. */
#include <orbit/uring.h>
#include "error_internal.h"
#include "fleet_internal.h"
#include "guard.h"
#include "life.h"
#include "uring_internal.h"

int orbit_fleet_prep_wait_doorbell(struct orbit_fleet *f, struct io_uring_sqe *sqe)
{
    int rc = orb_enter_fleet(f, __func__);
    if (rc == 0 && f->observer)
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: an observer has no doorbell (join as a member)", __func__);
    if (rc == 0 && !sqe)
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: sqe is NULL", __func__);
    if (rc < 0)
        return orb_uring_prep_result(sqe, rc);
    return orb_uring_prep_wait(&f->nodes[f->node].doorbell, NULL, NULL, sqe, NULL);
}

int orbit_fleet_prep_wait_node_death(struct orbit_fleet *f, uint16_t node, uint64_t incarnation,
                                     struct io_uring_sqe *sqe)
{
    int rc = orb_life_check_wait(f, node, incarnation, __func__);
    if (rc == 0 && !sqe)
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: sqe is NULL", __func__);
    if (rc == 0 && !orbit_uring_futex_supported())
        rc = orb_uring_unsupported(NULL);
    /* The watcher first: a death after the checks below kicks the word the SQE waits on. */
    if (rc == 0)
        rc = orb_life_arm(f, node, incarnation);
    if (rc != 0)
        return orb_uring_prep_result(sqe, rc);
    struct orb_life_ctx c = { f, node, incarnation };
    return orb_uring_prep_wait(&f->nodes[node].life_end, orb_life_over_pred, &c, sqe, NULL);
}
