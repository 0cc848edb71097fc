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

struct death_ctx { struct orbit_fleet *f; uint16_t node; uint64_t incarnation; };

static int death_pred(void *arg)
{
    struct death_ctx *c = arg;
    return orb_life_over(c->f, c->node, c->incarnation);
}

int orbit_fleet_prep_wait_node_death(struct orbit_fleet *f, uint16_t node, uint64_t incarnation,
                                     struct io_uring_sqe *sqe)
{
    const char *call = __func__;
    int rc = orb_enter_fleet(f, call);
    if (rc == 0 && !orb_fleet_record(f, node))
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: node %u: the fleet has %u nodes", call, (unsigned)node,
                      (unsigned)f->capacity);
    if (rc == 0 && !f->observer && node == f->node && incarnation == f->incarnation)
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: node %u is this handle's own life", call, (unsigned)node);
    if (rc == 0 && !sqe)
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: sqe is NULL", call);
    if (rc == 0 && !orbit_uring_futex_supported())
        rc = -ORBIT_ENOTSUP;
    /* The watcher first: a death after the checks below kicks the word the SQE waits on. */
    if (rc == 0)
        rc = orb_life_arm(f, node, incarnation);
    if (rc != 0)
        return orb_uring_prep_result(sqe, rc);
    struct death_ctx c = { f, node, incarnation };
    return orb_uring_prep_wait(&f->nodes[node].life_end, death_pred, &c, sqe, NULL);
}
