/* SPDX-License-Identifier: MIT */
/* Fleets nobody lives in: counting live members and collecting, through an observer handle. */
#include <string.h>
#include "fleet_internal.h"
#include "generation.h"
#include "life.h"
#include "error_internal.h"

ssize_t orbit_fleet_live_members(const char *name)
{
    struct orbit_fleet *f;
    orb_error_clear();
    int rc = orbit_fleet_observe(name, &f);
    if (rc == -ORBIT_EGEOMETRY)
        return orb_gen_live_by_locks(name);   /* a generation of other layouts: its locks say it */
    rc = orb_error_outer(rc, __func__);
    if (rc < 0)
        return rc;
    ssize_t live = 0;
    for (uint32_t i = 0; i < f->capacity; i++)
        live += atomic_load_explicit(&f->nodes[i].state, memory_order_acquire) == ORBIT_NODE_LIVE &&
                orb_node_alive(f, (uint16_t)i);
    orbit_fleet_leave(f);
    return live;
}

int orbit_fleet_collect(const char *name)
{
    struct orbit_fleet *f;
    orb_error_clear();
    int rc = orbit_fleet_observe(name, &f);
    if (rc == -ORBIT_EGEOMETRY)
        return orb_gen_collect_by_locks(name);   /* an old generation left empty by a roll */
    rc = orb_error_outer(rc, __func__);
    if (rc < 0)
        return rc;
    /* The gate alone: no joiner is between its open and its published life while we hold it. */
    rc = orb_gate_take_alone(f);
    if (rc == 0) {
        int held = orb_life_probe_all(f->life_fd, f->capacity);
        rc = held > 0 ? orb_fail(-ORBIT_EBUSY, "orbit_fleet_collect: '%s' has a live member", name)
                      : held < 0 ? orb_fail(held, "'%s': probing its members' locks: %s", name, strerror(-held))
                                 : orb_error_outer(orbit_fleet_unlink(name), __func__);
    } else if (rc == -EAGAIN) {
        rc = orb_fail(-ORBIT_EBUSY, "orbit_fleet_collect: '%s': a member is joining", name);
    }
    orbit_fleet_leave(f);   /* closing the descriptor gives the gate back */
    return rc;
}
