/* SPDX-License-Identifier: MIT */
/* Versions: of the library, and of each layout it writes (orbit/version.h). */
#include <string.h>
#include <orbit/version.h>
#include "fleet_internal.h"
#include "table_ops.h"

const char *orbit_version_string(void)
{
    return ORBIT_VERSION_STRING;
}

unsigned orbit_version(void)
{
    return ORBIT_VERSION_NUMBER;
}

void orb_layouts(uint16_t out[ORBIT_LAYOUTS_MAX])
{
    memset(out, 0, ORBIT_LAYOUTS_MAX * sizeof *out);
    out[ORBIT_LAYOUT_SEGMENT] = ORB_SEG_VERSION;
    out[ORBIT_LAYOUT_FLEET] = ORB_FLEET_LAYOUT_VERSION;
    /* A table's layout is its segment type's: the registry numbers them as ORBIT_LAYOUT_*. */
    for (unsigned t = ORBIT_LAYOUT_POOL; t < ORBIT_LAYOUTS_MAX; t++) {
        const struct orb_table_ops *ops = orb_table_ops_of((uint8_t)t);
        out[t] = ops ? (uint16_t)ops->layout : 0;
    }
#ifdef ORBIT_TEST_LAYOUT_BUMP
    /* The test build of "another release" (tests/upgrade): one layout reads 100 higher. */
    out[ORBIT_TEST_LAYOUT_BUMP] = (uint16_t)(out[ORBIT_TEST_LAYOUT_BUMP] + 100);
#endif
}

unsigned orbit_layout_version(unsigned layout)
{
    uint16_t v[ORBIT_LAYOUTS_MAX];
    orb_layouts(v);
    return layout < ORBIT_LAYOUTS_MAX ? v[layout] : 0;
}

const char *orbit_layout_name(unsigned layout)
{
    static const char *const names[] = { "segment", "fleet", "pool", "streams", "admission", "arena" };
    return layout < sizeof names / sizeof names[0] ? names[layout] : "unknown";
}
