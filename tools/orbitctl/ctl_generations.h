/* SPDX-License-Identifier: MIT */
/* Generations of a fleet as orbitctl shows them (ctl_generations.c). */
#ifndef ORBITCTL_GENERATIONS_H
#define ORBITCTL_GENERATIONS_H

#include <stdint.h>
#include <stdio.h>
#include <orbit/orbit.h>

#define CTL_GENERATIONS_MAX 64

/* "0.2.0" from an orbit_version() number; "?" for 0 (not recorded). */
void ctl_version_text(uint32_t v, char *buf, size_t len);
/* orbit_fleet_generations, at most max of them. */
ssize_t ctl_generations(const char *name, struct orbit_generation_info *out, size_t max);
/* The one named name ("web@2") in gi[0..n), or NULL. */
const struct orbit_generation_info *ctl_generation_of(const struct orbit_generation_info *gi, ssize_t n,
                                                      const char *name);
/*
 * The generation show and top read for name: a qualified name is that one; a
 * fleet's name is its generation 1 when this orbitctl reads it, else the newest
 * one it reads, else the name itself (whose open then says why). Written to out.
 */
const char *ctl_generation_to_read(const char *name, char out[ORBIT_FLEET_NAME_MAX + 1]);
/* "generation 2, orbit 0.2.0" (or what differs: "..., fleet layout 3: another release's layouts"). */
void ctl_generation_line(FILE *out, const struct orbit_generation_info *g);
/* A table of the fleet's generations (GEN, NAME, LIVE, VERSION) when it has more than one. */
void ctl_generations_text(FILE *out, const char *name);
/* One generation as a JSON object; every generation of the fleet as "generations":[...]. */
void ctl_generation_json(FILE *out, const struct orbit_generation_info *g);
void ctl_generations_json(FILE *out, const char *name);

#endif
