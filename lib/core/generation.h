/* SPDX-License-Identifier: MIT */
/*
 * Generations of a fleet name (orbit/fleet.h): which one a joiner opens, what
 * each is made at, and the reading of a generation of other layouts.
 *
 * A generation's fleet segment records in its geometry its number and the
 * layout version of every segment its members make (ORBIT_LAYOUT_*). A joiner
 * compares them with its own from the segment header alone, before it maps
 * anything, so no member maps a segment of layouts it cannot read; an observer
 * refuses one the same way. A fleet of fleet layout 3 (orbit before
 * generations) records neither: it is generation 1, of other layouts than any
 * release that records them.
 *
 * What every layout under segment header 1 shares, and so what a newer release
 * reads of an older generation: the segment header (capacity, creator's
 * version) and the kernel-held lock bytes of the fleet file (life.h). Live
 * members are counted and an empty generation is collected by those alone.
 */
#ifndef ORB_CORE_GENERATION_H
#define ORB_CORE_GENERATION_H

#include <orbit/fleet.h>
#include "fleet_internal.h"

/* A fleet geometry's generation fields: its number and this library's layouts. */
void orb_gen_geometry(struct orb_fleet_geometry *g, uint32_t generation);

/*
 * An observer's check of the fleet segment it mapped for name: 0 and the
 * generation when it is of this library's layouts, else -ORBIT_EGEOMETRY
 * with the sentence naming both sides' versions (call names the API).
 */
int  orb_gen_check_observed(const struct orb_seg_header *h, const char *name, uint32_t *generation,
                            const char *call);

/*
 * orbit_fleet_join's open of a named fleet: checks opts' generation fields,
 * picks the generation (the name's, opts->generation), sets f->name to its
 * qualified name and f->generation, and opens it with open_fleet (the join's
 * gated open). One made meanwhile by another version under the name picked is
 * passed over and the pick made again. A PRIVATE fleet (name NULL) is
 * generation 1. 0, or a negative code with its sentence.
 */
int  orb_gen_join_open(struct orbit_fleet *f, const char *name, const struct orbit_fleet_opts *o,
                       int (*open_fleet)(struct orbit_fleet *f));

/* A generation of other layouts (observing it said -ORBIT_EGEOMETRY): by its locks alone. */
ssize_t orb_gen_live_by_locks(const char *name);
int     orb_gen_collect_by_locks(const char *name);

#endif
