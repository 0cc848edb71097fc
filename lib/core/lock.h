/* SPDX-License-Identifier: MIT */
/*
 * A lock in shared memory whose holder may die and whose word another member
 * may overwrite: every take is bounded and every word it reads is validated.
 *
 * word = 0 (free) or start << 40 | ns_hi << 32 | LOCK_WAITERS | ns_lo << 23 |
 * holder pid: start is the low 24 bits of the holder's start time (clock
 * ticks since boot, 46 hours at 100 Hz), so a pid reused by a later process
 * does not pass for the dead holder; ns is a 16-bit tag of the holder's pid
 * namespace (1 + inode % 65535: namespace inodes are handed out densely, so
 * two namespaces alive together differ), whose pids only processes of that
 * namespace may judge. Others learn of the holder's death from its node's
 * kernel lock, through the death report (orb_lock_set_dead), and a member of
 * this process's fleets whose record names another namespace behind the same
 * tag is never judged by pid either. The futex
 * is the low half (pid and waiters bit). A waiter that finds the holder's
 * process gone takes the word over by CAS and is told so (repair what the
 * dead holder left half-done). A word no holder could have written is
 * ORBIT_ECORRUPT at once; a lock still held after the bound is
 * ORBIT_ETIMEDOUT (a stopped or stuck holder, or a forged live pid and start).
 * Holders are processes.
 */
#ifndef ORB_CORE_LOCK_H
#define ORB_CORE_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct orb_lock {
    _Atomic uint64_t word;
};
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the lock's futex is the word's low half: little-endian only"
#endif

#define ORB_LOCK_WAITERS   0x80000000u
#define ORB_LOCK_PID_MASK  0x007fffffu   /* pids are at most 2^22 (PID_MAX_LIMIT) */
#define ORB_LOCK_NS_SHIFT  23            /* bits 23..30: the low byte of the holder's pid namespace tag */
#define ORB_LOCK_NS_MASK   0x7f800000u
#define ORB_LOCK_NS_HI_MASK 0x000000ff00000000ull   /* bits 32..39: its high byte */
#define ORB_LOCK_TAG_BITS  (ORB_LOCK_NS_HI_MASK | ORB_LOCK_NS_MASK)
#define ORB_LOCK_START(v)  ((uint32_t)((v) >> 40))   /* the low 24 bits of the start time */
#define ORB_LOCK_BOUND_MS  2000          /* critical sections take microseconds */

enum { ORB_LOCK_TAKEN = 0, ORB_LOCK_RECOVERED = 1 };

static inline void orb_lock_init(struct orb_lock *l) { atomic_store(&l->word, 0); }
/* ORB_LOCK_TAKEN, ORB_LOCK_RECOVERED (the last holder died holding it), -ORBIT_ECORRUPT, -ORBIT_ETIMEDOUT. */
int  orb_lock_take(struct orb_lock *l, int bound_ms);
/* 0 taken, -EBUSY held by a live holder or invalid (never waits, never recovers). */
int  orb_lock_try(struct orb_lock *l);
void orb_lock_give(struct orb_lock *l);

/*
 * The identity part of a held word (waiters bit clear) a process with that
 * pid, start time and pid namespace writes (pidns 0: unknown, tag 0). A
 * holder whose tag differs from ours is judged only through
 * orb_lock_set_dead, never by its pid.
 */
uint64_t orb_lock_identity(uint32_t pid, uint64_t start_time, uint64_t pidns);
/* This thread's death report: a holder with that identity is dead (0: none). */
void orb_lock_set_dead(uint64_t identity);
/* Set by the fleet layer: does a member record name this holder in another pid namespace? */
void orb_lock_set_foreign_check(bool (*foreign)(uint64_t identity));

/* This process's held word (start << 32 | pid) once a take has run (0 before, and in a
 * fresh fork child). */
extern _Atomic uint64_t orb_lock_self __attribute__((visibility("hidden")));
/* 1 when this process is registered for global membarriers: its flock gives may be stores. */
extern _Atomic uint32_t orb_lock_store_give __attribute__((visibility("hidden")));

/*
 * The flock: the same lock, whose give is one plain store when nobody sleeps.
 * Sleepers count themselves in a word of the caller's (beside the lock word,
 * so the caller packs its own line) instead of setting the waiters bit, and
 * make every process run a full barrier (membarrier) before they look at the
 * lock word a last time; a process registered for that barrier gives by a
 * store, then reads the count. Same errors and recovery as orb_lock_take;
 * the word is an orb_lock's (orb_lock_holder works on it).
 */
int  orb_flock_take(struct orb_lock *l, _Atomic uint32_t *sleepers, int bound_ms);
/* Wakes one sleeper; drops a count nobody answers. */
void orb_flock_wake(struct orb_lock *l, _Atomic uint32_t *sleepers);
/* A full barrier here and in every process that gives by a store (a waiter's side of a
 * store-then-load handshake with a giver). */
bool orb_lock_fence_others(void);   /* false: refused to this process (bound your sleeps) */

/* A word some holder could have written: free, or a pid in range with only the waiters bit. */
static inline int orb_lock_word_valid(uint64_t word)
{
    uint32_t pid = (uint32_t)word & ORB_LOCK_PID_MASK;
    return word == 0 || (pid != 0 && pid <= 4194304u);   /* the waiters bit and any ns tag */
}

/* The pid a valid held word names, 0 when free, -1 when the word is invalid. */
static inline long orb_lock_holder(struct orb_lock *l)
{
    uint64_t v = atomic_load(&l->word);
    return orb_lock_word_valid(v) ? (long)(v & ORB_LOCK_PID_MASK) : -1;
}

static inline void orb_flock_init(struct orb_lock *l, _Atomic uint32_t *sleepers)
{
    orb_lock_init(l);
    atomic_store(sleepers, 0);
}

static inline int orb_flock_take_inline(struct orb_lock *l, _Atomic uint32_t *sleepers, int bound_ms)
{
    uint64_t v = 0, me = atomic_load_explicit(&orb_lock_self, memory_order_relaxed);
    /* Acquire: what the last holder wrote under the lock is visible to us. */
    if (me != 0 && atomic_compare_exchange_strong_explicit(&l->word, &v, me, memory_order_acquire,
                                                           memory_order_relaxed))
        return ORB_LOCK_TAKEN;
    return orb_flock_take(l, sleepers, bound_ms);
}

/*
 * Release: what we wrote under the lock is visible to the next taker. A
 * registered process gives by a store: a sleeper's membarrier orders it before
 * our read of the count. Otherwise a seq_cst exchange does (against the
 * sleeper's seq_cst fence).
 */
static inline void orb_flock_give(struct orb_lock *l, _Atomic uint32_t *sleepers)
{
    if (atomic_load_explicit(&orb_lock_store_give, memory_order_relaxed))
        atomic_store_explicit(&l->word, 0, memory_order_release);
    else
        atomic_exchange_explicit(&l->word, 0, memory_order_seq_cst);
    atomic_signal_fence(memory_order_seq_cst);   /* the count is read after the give, in program order */
    if (atomic_load_explicit(sleepers, memory_order_seq_cst) != 0)
        orb_flock_wake(l, sleepers);
}

#endif
