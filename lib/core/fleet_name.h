/* SPDX-License-Identifier: MIT */
/*
 * Fleet names and generation-qualified names. A fleet's first generation
 * lives under its name ("web": segments orbit.web.<kind>); a later one under
 * "web@N" (N >= 2, decimal, no leading zero: orbit.web@N.<kind>). '@' is in
 * no fleet name, so a release that knows no generations never opens a later
 * generation's files: its scans read "web@N" as a name it refuses.
 */
#ifndef ORB_CORE_FLEET_NAME_H
#define ORB_CORE_FLEET_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/fleet.h>

/*
 * Split a fleet name or a generation-qualified one: 0 with base (may be NULL)
 * and *generation (0 when the name carries none, else N >= 2), or
 * -ORBIT_EMALFORMED. The whole name is at most ORBIT_FLEET_NAME_MAX bytes.
 */
int  orb_fleet_name_split(const char *name, char base[ORBIT_FLEET_NAME_MAX + 1], uint32_t *generation);
/* A name segment files may carry: a fleet name, or one qualified with its generation. */
bool orb_fleet_name_valid(const char *name);
/* "base" for generation 1, "base@N" for N >= 2: its length, or -ORBIT_ETOOLARGE / -ORBIT_EMALFORMED. */
int  orb_fleet_name_of(const char *base, uint32_t generation, char *buf, size_t len);

#endif
