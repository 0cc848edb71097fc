/* SPDX-License-Identifier: MIT */
/* The fleet as supervisors read it: one node record at a time, and whether the segment moved. */
#include <string.h>
#include <sys/stat.h>
#include <orbit/inspect.h>
#include "error_internal.h"
#include "fleet_internal.h"
#include "guard.h"

int orbit_fleet_node_snapshot(struct orbit_fleet *f, uint16_t node, struct orbit_node_snapshot *out)
{
    int refused = orb_enter_fleet(f, __func__);   /* a fleet file that shrank: -ORBIT_ECORRUPT */
    if (refused < 0)
        return refused;
    struct orb_node_record *rec = orb_fleet_record(f, node);
    if (!rec || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s", !out ? "out is NULL" : "node out of the fleet's range");
    for (int tries = 0; tries < 8; tries++) {
        uint64_t joins = atomic_load(&rec->joins);
        uint32_t state = atomic_load(&rec->state);   /* seq_cst: pairs with publish's release */
        int32_t pid = atomic_load(&rec->pid);
        uint64_t start_time = atomic_load(&rec->start_time), inc = atomic_load(&rec->incarnation);
        uint64_t pidns = atomic_load(&rec->pidns);
        /* joins moves on every claim and state on every change: equal before and after the
         * field reads means the fields belong to that one publication. */
        if (atomic_load(&rec->state) != state || atomic_load(&rec->joins) != joins)
            continue;
        memset(out, 0, sizeof *out);
        out->node = node;
        out->state = state == ORBIT_NODE_FREE || state == ORBIT_NODE_LIVE ? (enum orbit_node_state)state
                                                                         : ORBIT_NODE_JOINING;
        out->pid = pid;
        out->start_time = start_time;
        out->incarnation = inc;
        out->joins = joins;
        out->pid_namespace = pidns;
        /* A read that faulted (the file shrank under it) read the guard's zeros: not a record. */
        return orb_fleet_usable(f, __func__);
    }
    return orb_fail(-ORBIT_EAGAIN, "node %u's record kept changing while read (8 tries): try again", node);
}

int orbit_fleet_replaced(struct orbit_fleet *f)
{
    struct stat mapped, named;
    orb_error_clear();
    if (!f)
        return orb_fail_text(-ORBIT_EMALFORMED, "the fleet handle is NULL");
    if (f->is_private || f->seg.fd < 0)
        return 0;
    if (fstat(f->seg.fd, &mapped) != 0)
        return orb_fail(-errno, "%s: %s", f->seg.path, strerror(errno));
    if (stat(f->seg.path, &named) != 0)
        return errno == ENOENT ? 1 : orb_fail(-errno, "%s: %s", f->seg.path, strerror(errno));
    return mapped.st_dev != named.st_dev || mapped.st_ino != named.st_ino;
}
