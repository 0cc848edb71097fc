/* SPDX-License-Identifier: MIT */
/*
 * The registry of table ops: every table module built in registered its ops
 * in the linker section orb_tables (table_ops.h); this walks it. Under the
 * table base and everything that runs a table's ops (tables.c): it calls
 * nothing.
 */
#include <orbit/inspect.h>
#include "segment.h"
#include "table_ops.h"

/* Provided by the linker when any module registered ops; weak: a build may have none. */
extern const struct orb_table_ops *const __start_orb_tables[] __attribute__((weak));
extern const struct orb_table_ops *const __stop_orb_tables[] __attribute__((weak));

const struct orb_table_ops *orb_table_ops_of(uint8_t type)
{
    for (const struct orb_table_ops *const *p = __start_orb_tables; p && p < __stop_orb_tables; p++)
        if (*p && (*p)->kind->type == type)
            return *p;
    return NULL;
}

const char *orbit_table_type_name(unsigned type)
{
    if (type == ORB_TABLE_FLEET)
        return "fleet";
    const struct orb_table_ops *ops = type <= 255 ? orb_table_ops_of((uint8_t)type) : NULL;
    return ops ? ops->name : "unknown";
}
