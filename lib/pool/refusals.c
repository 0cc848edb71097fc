/* SPDX-License-Identifier: MIT */
/* Why a call on a resource id was refused: the sentence orbit_last_error gives. */
#include <stdio.h>
#include "pool_layout.h"

/* Why a call on resource id was refused with rc, for orbit_last_error; returns rc. */
ORB_COLD int pool_id_refused(const struct orbit_pool *p, int rc, orbit_id id)
{
    char text[ORBIT_ID_TEXT_MAX];
    snprintf(text, sizeof text, "%u:%u:%llu", (unsigned)orbit_id_kind(id), (unsigned)orbit_id_node(id),
             (unsigned long long)orbit_id_counter(id));
    switch (-rc) {
    case ORBIT_EBUSY:
        return orb_fail_text(rc, "every unit of the resource is reserved or active, or 16 reservations wait "
                                 "for its owner to accept them");
    case ORBIT_EMALFORMED:
        return orb_fail(rc, "id %s is not a resource of this pool (kind %u, %u nodes, %u slots a lane, "
                        "generation 1 or more)", text, p->kind, p->geo.fleet_capacity, p->geo.lane_capacity);
    case ORBIT_ESTALE:
        return orb_fail(rc, "resource %s: no such live resource (unregistered, its owner died or left, the "
                        "pool was reset, or never registered)", text);
    case ORBIT_ENOTOWNER:
        return orb_fail(rc, "resource %s is node %u's; this handle is node %u%s", text, orbit_id_node(id),
                        p->node, p->observer ? " (an observer)" : "");
    case ORBIT_EDRAINING:
        return orb_fail(rc, "resource %s is draining: it takes no new reservations", text);
    default:
        return orb_fail(rc, "resource %s: %s", text, orbit_strerror(rc));
    }
}
