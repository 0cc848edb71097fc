/* SPDX-License-Identifier: MIT */
/*
 * How the tools open a fleet they only read (orbitctl ls, show, top, metrics;
 * orbit-reaper's scrapes and --gc): as observers that bound their wait for a
 * segment still being created. Such a segment's creator has not published it
 * yet: normally for milliseconds, but another local user may leave one that
 * way for good, and a tool that waited its 10 s on each would stall on them.
 */
#ifndef ORBIT_TOOL_OBSERVE_H
#define ORBIT_TOOL_OBSERVE_H

#include <sys/types.h>
#include <orbit/fleet.h>

/*
 * tool_observe - orbit_fleet_observe_opts with ready_wait_ms wait_ms: a segment
 * still being created after that long is -ORBIT_EAGAIN (for the fleet, and for
 * every table opened through the handle). Otherwise as orbit_fleet_observe.
 * The tools pass 0: a fleet (or table) caught mid-creation is said to be
 * "being created" and left for the next look, where a wait per table per
 * read (orbitctl show accounts each node) would add up to seconds.
 */
int tool_observe(const char *name, int wait_ms, struct orbit_fleet **out);

/*
 * tool_live_members - members of the named generation whose process is alive,
 * as orbit_fleet_live_members counts them (one of other layouts by its locks),
 * waiting at most wait_ms for a segment still being created (-ORBIT_EAGAIN).
 */
ssize_t tool_live_members(const char *name, int wait_ms);

/* "being created" for -ORBIT_EAGAIN from the calls above, "no such fleet" for -ENOENT, else orbit_strerror. */
const char *tool_open_error(int rc);

#endif
