/* SPDX-License-Identifier: MIT */
/* What a dead incarnation held, as a report counts it (reaper_account.c). */
#ifndef ORB_REAPER_ACCOUNT_H
#define ORB_REAPER_ACCOUNT_H

#include <stdint.h>
#include <orbit/fleet.h>
#include <orbit/reaper.h>

/* What (node, incarnation) holds in the fleet's tables (orbit_fleet_account); zeros when it cannot tell. */
void rp_account(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, struct orbit_reaper_reclaim *out);

#endif
