/* SPDX-License-Identifier: MIT */
/*
 * The SIGBUS guard of named segments (as libwayland-server guards its
 * clients' wl_shm pools). A mapping of a file raises SIGBUS when a page it
 * touches lies past the file's end: anyone who may write a segment file
 * (its owner, a group peer) can shrink it under every process that maps it.
 *
 * Every mapping of a named segment is registered here before it is touched.
 * The first registration installs a process-wide SIGBUS handler. A fault
 * inside a registered mapping is answered by mapping anonymous memory over
 * the whole mapping (MAP_FIXED), so the faulting access completes, and by
 * marking the mapping broken: the handle bound to it has its generation word
 * poisoned (ORB_GEN_BROKEN), so its next call fails its entry check with
 * -ORBIT_ECORRUPT naming the file, at no cost to calls on intact handles.
 * Every other SIGBUS (another mapping, a signal sent by a process) goes to
 * the handler installed before ours, or takes the default action.
 *
 * The registry is lock-free for the handler: slots in chunks that are
 * allocated once and never freed, each with one state word (state, broken,
 * handlers inside, and a tenancy count against reuse between two looks).
 */
#ifndef ORB_CORE_GUARD_SIGBUS_H
#define ORB_CORE_GUARD_SIGBUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Or-ed into a handle's generation word: its segment broke (the low bits stay the generation). */
#define ORB_GEN_BROKEN 0x80000000u

/*
 * Register [base, base + len), a mapping of the file at path, before it is
 * touched: a slot (>= 0) for the calls below, or -ENOMEM (no memory for the
 * registry, or the handler could not be installed).
 */
int  orb_guard_map(void *base, size_t len, const char *path);
/* Forget a slot before its mapping is unmapped (waits for a handler still inside it). -1: none. */
void orb_guard_unmap(int slot);
/* The handle's generation word the handler poisons when this mapping breaks (now, if it has). */
void orb_guard_bind(int slot, uint32_t *generation);
/* Did this mapping break (its file shrank under it)? slot -1: never. */
bool orb_guard_broken(int slot);
/* Is addr inside a mapping that broke? One load when nothing ever broke in this process. */
bool orb_guard_broken_at(const void *addr);
/* The file of the broken mapping bound to this generation word, copied to buf; false if none. */
bool orb_guard_path_of(const uint32_t *generation, char *buf, size_t len);
/* Mappings broken in this process so far (tests, and the cheap test above). */
uint64_t orb_guard_breaks(void);

#endif
