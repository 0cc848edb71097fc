/* SPDX-License-Identifier: MIT */
/*
 * Probes of one process of the reaper's own pid namespace, through /proc and
 * a pidfd: whether the process a record names is still the one running. The
 * pidfd backend pins a member with them; a fleet's thread asks them about a
 * member the BPF backend watches.
 */
#ifndef ORB_REAPER_PROBE_H
#define ORB_REAPER_PROBE_H

#include <stdbool.h>
#include <stdint.h>

/* Readable: the pidfd's whole thread group has exited. */
bool rp_pidfd_exited(int pidfd);
/*
 * Does this pid (of the reaper's own namespace) name a live process with that
 * start time, as /proc confirms? Keeps its pidfd in *pidfd if asked. False
 * means "not seen", not "dead": only the life's lock says dead.
 */
bool rp_probe_alive(int32_t pid, uint64_t start_time, int *pidfd);
/* rp_probe_alive, and not every thread already inside do_exit. */
bool rp_member_alive(int32_t pid, uint64_t start_time);

#endif
