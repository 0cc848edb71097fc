/* SPDX-License-Identifier: MIT */
/*
 * Lives the kernel vouches for: open-file-description (OFD) locks on bytes of
 * the fleet segment file, far past its end. The kernel drops a process's OFD
 * locks when its last descriptor goes, at exit however it dies, and every
 * process that can open the file can test them: from any pid namespace, as
 * any user with access to the segment, whatever /proc shows. Pids stay in the
 * node records for display and for the fast paths that work in one namespace.
 *
 *   LIFE_BASE + node * 64 + joins % 64   write-locked by the node's member for its life
 *   OWNER_BASE + node                    write-locked while a joiner or reporter moves the node
 *   GATE                                 read-locked by joiners, write-locked by a collector
 *
 * A life's death is pushed, not polled for: a watcher thread of any process
 * that waits on it (orbit_fleet_wait_node_death, its io_uring prep) blocks
 * for a read lock on the life's byte, which the kernel grants once the member
 * is gone; it then kicks the record's life_end word, which every waiter of
 * every process sleeps on (a futex, or an io_uring FUTEX_WAIT).
 */
#ifndef ORB_CORE_LIFE_H
#define ORB_CORE_LIFE_H

#include <stdbool.h>
#include <stdint.h>
#include "fleet_internal.h"

#define ORB_LIFE_SLOTS 64u

/* The process's fork generation: moved in a fork child, so an inherited handle is refused. */
extern _Atomic uint32_t orb_fork_generation __attribute__((visibility("hidden")));

/* 0, or -ORBIT_EFORKED (with the reason for orbit_last_error) for a parent's handle in a child. */
int  orb_fleet_usable(const struct orbit_fleet *f, const char *call);

/*
 * A descriptor of our own on f's fleet file: a new open file description of
 * the same inode. The handle's locks are all taken through one (life_fd),
 * never mapped: a mapping would keep its description, and so a dead
 * process's locks, alive in a fork child that inherited it.
 */
int  orb_life_reopen(struct orbit_fleet *f);

/* Make f one of the process's handles (fork closes their descriptors in a child) / forget it. */
void orb_life_register(struct orbit_fleet *f);
void orb_life_unregister(struct orbit_fleet *f);
/*
 * f->life_fd opened (orb_life_reopen) and f registered in one step, so no
 * fork from another thread copies it unregistered / unregistered and closed
 * in one step. 0 or a negative code.
 */
int  orb_life_open(struct orbit_fleet *f);
void orb_life_close(struct orbit_fleet *f);
/* Does another handle of this process hold that node of the same fleet file? */
bool orb_life_held_here(const struct orbit_fleet *f, uint16_t node);

/* The node's lock bytes (non-blocking): 0 or -EAGAIN (held by another), another -errno. */
int  orb_life_hold(struct orbit_fleet *f, uint16_t node, uint64_t joins);
void orb_life_drop(struct orbit_fleet *f, uint16_t node, uint64_t joins);
/* 1 when some life of the node holds its lock (as seen from f's descriptor), 0 when none, -errno. */
int  orb_life_probe(struct orbit_fleet *f, uint16_t node);
/* 1 when any node's life is held, 0 when none, -errno. */
int  orb_life_probe_all(int fd, uint32_t capacity);
/*
 * orb_life_probe and orb_gate_take_alone on a descriptor of any fleet file: the
 * lock bytes are the same in every layout of segment header 1, so a generation
 * of other layouts is judged alive or empty by them (generation.c).
 */
int  orb_life_probe_fd(int fd, uint16_t node);
int  orb_gate_take_alone_fd(int fd);

/* The owner byte: true when this thread now moves the node (a gone mover's step is ours). */
bool orb_owner_take(struct orbit_fleet *f, uint16_t node);
void orb_owner_drop(struct orbit_fleet *f, uint16_t node);

/* The gate: joiners share it while they open and claim; a collector takes it alone. */
int  orb_gate_enter(struct orbit_fleet *f);
void orb_gate_leave(struct orbit_fleet *f);
/* A collector's: 0, -EAGAIN (a joiner is in), or another -errno. Given back with the descriptor. */
int  orb_gate_take_alone(struct orbit_fleet *f);

/* This process life's incarnation: random, the same for every join of this life. */
uint64_t orb_life_incarnation(void);

/*
 * A watcher of that life of the node (it holds lock byte joins % 64): ensures
 * this process has one (a thread that kicks the record's life_end once the
 * kernel grants it the byte). 0, or a negative code.
 */
int  orb_life_watch(struct orbit_fleet *f, uint16_t node, uint64_t joins);

/* Is that incarnation of the node still the live one? 1 over (dead, left, replaced), 0 alive. */
int  orb_life_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation);

/* The death waits' argument checks: a handle of this process, a node of the fleet, not our own life. */
int  orb_life_check_wait(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, const char *call);
/* orb_life_over as a wait predicate (ctx: struct orb_life_ctx). */
struct orb_life_ctx { struct orbit_fleet *f; uint16_t node; uint64_t incarnation; };
int  orb_life_over_pred(void *ctx);

/* The wait of orbit_fleet_wait_node_death, once its arguments are checked. */
int  orb_life_wait_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, int timeout_ms);
/* Ready a death wait: 1 over already, 0 a watcher runs and life_end is the word to wait on. */
int  orb_life_arm(struct orbit_fleet *f, uint16_t node, uint64_t incarnation);

#endif
