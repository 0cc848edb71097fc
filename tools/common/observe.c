/* SPDX-License-Identifier: MIT */
/* Reading a fleet without stalling on one still being created (observe.h). */
#include <errno.h>
#include <stdlib.h>
#include <orbit/inspect.h>
#include "observe.h"

int tool_observe(const char *name, int wait_ms, struct orbit_fleet **out)
{
    struct orbit_observe_opts o = ORBIT_OBSERVE_OPTS_DEFAULT;
    o.ready_wait_ms = wait_ms;
    return orbit_fleet_observe_opts(name, &o, out);
}

ssize_t tool_live_members(const char *name, int wait_ms)
{
    struct orbit_fleet *f;
    int rc = tool_observe(name, wait_ms, &f);
    if (rc == -ORBIT_EGEOMETRY)
        return orbit_fleet_live_members(name);   /* a generation of other layouts: by its locks */
    if (rc < 0)
        return rc;
    struct orbit_node_info *nodes = calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof *nodes);
    ssize_t n = nodes ? orbit_fleet_nodes(f, nodes, ORBIT_FLEET_CAPACITY_MAX) : -ENOMEM, live = n < 0 ? n : 0;
    for (ssize_t i = 0; i < n && i < ORBIT_FLEET_CAPACITY_MAX; i++)
        live += nodes[i].alive;
    free(nodes);
    orbit_fleet_leave(f);
    return live;
}

const char *tool_open_error(int rc)
{
    return rc == -ORBIT_EAGAIN ? "being created" : rc == -ENOENT ? "no such fleet" : orbit_strerror(rc);
}
