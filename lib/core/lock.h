/* SPDX-License-Identifier: MIT */
/*
 * A lock in shared memory whose holder may die and whose word another member
 * may overwrite: every take is bounded and every word it reads is validated.
 *
 * word = 0 (free) or holder start << 32 | LOCK_WAITERS | holder pid: start is
 * the low 32 bits of the holder's start time (clock ticks since boot), so a
 * pid reused by a later process does not pass for the dead holder. The futex
 * is the low half (pid and waiters bit). A waiter that finds the holder's
 * process gone takes the word over by CAS and is told so (repair what the
 * dead holder left half-done). A word no holder could have written is
 * ORBIT_ECORRUPT at once; a lock still held after the bound is
 * ORBIT_ETIMEDOUT (a stopped or stuck holder, or a forged live pid and start).
 * Holders are processes: pids of one pid namespace.
 */
#ifndef ORB_CORE_LOCK_H
#define ORB_CORE_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct orb_lock {
    _Atomic uint64_t word;
};
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the lock's futex is the word's low half: little-endian only"
#endif

#define ORB_LOCK_WAITERS   0x80000000u
#define ORB_LOCK_PID_MASK  0x007fffffu   /* pids are at most 2^22 (PID_MAX_LIMIT) */
#define ORB_LOCK_START(v)  ((uint32_t)((v) >> 32))
#define ORB_LOCK_BOUND_MS  2000          /* critical sections take microseconds */

enum { ORB_LOCK_TAKEN = 0, ORB_LOCK_RECOVERED = 1 };

static inline void orb_lock_init(struct orb_lock *l) { atomic_store(&l->word, 0); }
/* ORB_LOCK_TAKEN, ORB_LOCK_RECOVERED (the last holder died holding it), -ORBIT_ECORRUPT, -ORBIT_ETIMEDOUT. */
int  orb_lock_take(struct orb_lock *l, int bound_ms);
/* 0 taken, -EBUSY held by a live holder or invalid (never waits, never recovers). */
int  orb_lock_try(struct orb_lock *l);
void orb_lock_give(struct orb_lock *l);
/* A word some holder could have written: free, or a pid in range with only the waiters bit. */
static inline int orb_lock_word_valid(uint64_t word)
{
    uint32_t v = (uint32_t)word, pid = v & ORB_LOCK_PID_MASK;
    return word == 0 || ((v & ~(ORB_LOCK_PID_MASK | ORB_LOCK_WAITERS)) == 0 && pid != 0 && pid <= 4194304u);
}

/* The pid a valid held word names, 0 when free, -1 when the word is invalid. */
static inline long orb_lock_holder(struct orb_lock *l)
{
    uint64_t v = atomic_load(&l->word);
    return orb_lock_word_valid(v) ? (long)(v & ORB_LOCK_PID_MASK) : -1;
}

#endif
