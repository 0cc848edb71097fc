/* SPDX-License-Identifier: MIT */
/* The bounded, validated, dead-holder-recovering shared lock. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <orbit/error.h>
#include "syscalls.h"
#include "life.h"
#include "lock.h"
#include "segment.h"
#include "wait.h"

/* Short: a waiter that spins longer only pulls the holder's lines away from it. */
#define SPINS_BEFORE_SLEEP 16
#define YIELDS_BEFORE_SLEEP 4
#define SLEEP_SLICE_NS     (10 * 1000000LL)   /* re-check the holder's life this often */
#define FIRST_CHECK_NS     (1000000LL)        /* the first look, this long after the spin */

_Atomic uint64_t orb_lock_self;
_Atomic uint32_t orb_lock_store_give;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static _Atomic int membarrier_off = -1;   /* ORBIT_DISABLE_MEMBARRIER read once: -1 not yet */

/* ORBIT_DISABLE_MEMBARRIER=1: behave as if a seccomp filter refused membarrier(2). */
static bool membarrier_refused(void)
{
    int off = atomic_load_explicit(&membarrier_off, memory_order_relaxed);
    if (off < 0) {
        const char *v = getenv("ORBIT_DISABLE_MEMBARRIER");
        off = v && strcmp(v, "1") == 0;
        atomic_store_explicit(&membarrier_off, off, memory_order_relaxed);
    }
    return off;
}

/* A fork child is a new process: new pid, and not registered for membarrier until it asks. */
static void forget_pid(void)
{
    atomic_store_explicit(&orb_lock_store_give, 0, memory_order_relaxed);
    atomic_store_explicit(&orb_lock_self, 0, memory_order_relaxed);
    atomic_store_explicit(&membarrier_off, -1, memory_order_relaxed);
}
static void register_fork_hook(void) { pthread_atfork(NULL, NULL, forget_pid); }

/* Our held word (start << 32 | pid): system calls, so cached, and forgotten in a forked
 * child. The first call also registers for global membarriers: only then may this process
 * give an orb_flock by a plain store (a sleeper's membarrier must reach it). */
static uint64_t me(void)
{
    uint64_t w = atomic_load_explicit(&orb_lock_self, memory_order_relaxed);
    if (w == 0) {
        pthread_once(&self_once, register_fork_hook);
        int pid = getpid();
        w = orb_lock_identity((uint32_t)pid, orb_proc_start_time(pid), orb_pidns_self());
        bool reg = !membarrier_refused() &&
                   orb_sys_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
        atomic_store_explicit(&orb_lock_store_give, reg, memory_order_relaxed);
        atomic_store_explicit(&orb_lock_self, w, memory_order_relaxed);
    }
    return w;
}

/*
 * A full barrier in every running process registered above (they give by a
 * plain store), and in this thread. Without the syscall on an old kernel no
 * process could register, so every give is an exchange, a full barrier of
 * its own, and the local fence is enough. Refused to this process alone (a
 * seccomp filter others lack), it returns false: the caller cannot count on
 * registered processes' plain stores, and bounds its sleeps.
 */
bool orb_lock_fence_others(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    return !membarrier_refused() && orb_sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}

static uint32_t ns_tag(uint64_t pidns)
{
    return pidns ? 1u + (uint32_t)(pidns % 65535u) : 0u;
}

uint64_t orb_lock_identity(uint32_t pid, uint64_t start_time, uint64_t pidns)
{
    uint32_t tag = ns_tag(pidns);
    return (uint64_t)(start_time & 0xffffffu) << 40 | (uint64_t)(tag >> 8) << 32 |
           (tag & 0xffu) << ORB_LOCK_NS_SHIFT | (pid & ORB_LOCK_PID_MASK);
}

static bool (*_Atomic foreign_check)(uint64_t identity);

void orb_lock_set_foreign_check(bool (*foreign)(uint64_t identity))
{
    atomic_store(&foreign_check, foreign);
}

static _Thread_local uint64_t reported_dead;

void orb_lock_set_dead(uint64_t identity)
{
    reported_dead = identity;
}

/* A live process under the pid, but not the holder: the pid was reused (start times differ). */
static int pid_reused(uint32_t pid, uint32_t start)
{
    uint64_t now = start ? orb_proc_start_time((int)pid) : 0;
    return now != 0 && (now & 0xffffffu) != start;   /* unreadable /proc: no evidence either way */
}

/* The holder's process has exited (a zombie counts: it can never release), or its pid is another's. */
static int holder_gone(uint64_t v)
{
    uint32_t pid = (uint32_t)v & ORB_LOCK_PID_MASK;
    if (reported_dead && (v & ~(uint64_t)ORB_LOCK_WAITERS) == reported_dead)
        return 1;   /* the kernel's lock said this holder's node is dead: we report it */
    if ((v & ORB_LOCK_TAG_BITS) != (me() & ORB_LOCK_TAG_BITS))
        return 0;   /* a pid of another namespace names nobody here: never judged by it */
    bool (*foreign)(uint64_t) = atomic_load(&foreign_check);
    if (foreign && foreign(v & ~(uint64_t)ORB_LOCK_WAITERS))
        return 0;   /* the same tag, yet a member record says another namespace */
    if (pid == ((uint32_t)me() & ORB_LOCK_PID_MASK))
        return 0;
    int fd = orb_sys_pidfd_open((pid_t)pid, 0);
    if (fd >= 0) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int exited = poll(&pf, 1, 0) == 1;
        close(fd);
        return exited || pid_reused(pid, ORB_LOCK_START(v));
    }
    if (errno != ENOSYS)
        return errno == ESRCH;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    return pid_reused(pid, ORB_LOCK_START(v));
}

/* The futex is the word's low half (pid and waiters bit). */
static uint32_t *futex_of(struct orb_lock *l) { return (uint32_t *)(void *)&l->word; }

static void futex_sleep(struct orb_lock *l, uint32_t v, int64_t until_ns)
{
    struct timespec ts = { .tv_sec = until_ns / 1000000000, .tv_nsec = until_ns % 1000000000 };
    orb_sys_futex_wait(futex_of(l), v, &ts);
}

int orb_lock_try(struct orb_lock *l)
{
    uint64_t v = 0;
    /* Acquire: what the last holder wrote under the lock is visible to us. */
    return atomic_compare_exchange_strong_explicit(&l->word, &v, me(), memory_order_acquire,
                                                   memory_order_relaxed) ? 0 : -EBUSY;
}

/* Taken over from a dead holder, or -1 when someone else changed the word first. */
static int take_over(struct orb_lock *l, uint64_t v, uint64_t waiters)
{
    /* The CAS names the dead holder's word: of several waiters that saw it dead, one wins. */
    return atomic_compare_exchange_strong_explicit(&l->word, &v, me() | waiters,
                                                   memory_order_acquire, memory_order_relaxed)
               ? ORB_LOCK_RECOVERED : -1;
}

/* Saturating: a count a dead sleeper left (or a reset) never wraps below zero. */
static void sleepers_leave(_Atomic uint32_t *sleepers)
{
    uint32_t n = atomic_load_explicit(sleepers, memory_order_relaxed);
    while (n != 0 && !atomic_compare_exchange_weak_explicit(sleepers, &n, n - 1, memory_order_relaxed,
                                                            memory_order_relaxed))
        ;
}

/*
 * An orb_flock sleeper: counted, then a fence in every process (a holder may
 * give by a plain store and then read the count), then the word once more:
 * either the giver reads our count, or we read its give and do not sleep.
 */
static void flock_sleep(struct orb_lock *l, _Atomic uint32_t *sleepers, uint64_t v, int64_t until_ns)
{
    atomic_fetch_add_explicit(sleepers, 1, memory_order_relaxed);
    orb_lock_fence_others();
    if (atomic_load_explicit(&l->word, memory_order_relaxed) == v)
        futex_sleep(l, (uint32_t)v, until_ns);
    sleepers_leave(sleepers);
}

/* sleepers NULL: the waiters bit in the word says someone sleeps (struct orb_lock);
 * else the count does (struct orb_flock). */
static int take_slow(struct orb_lock *l, _Atomic uint32_t *sleepers, int bound_ms)
{
    int64_t start = 0, end = 0, next_check = 0;   /* the clock is read once the spin is over */
    uint64_t waiters = 0;   /* once we slept, others may sleep too: keep the bit for them */
    for (unsigned n = 0;; n++) {
        uint64_t v = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (!orb_lock_word_valid(v))
            return -ORBIT_ECORRUPT;
        if (v == 0) {
            if (atomic_compare_exchange_weak_explicit(&l->word, &v, me() | waiters, memory_order_acquire,
                                                      memory_order_relaxed))
                return ORB_LOCK_TAKEN;
            continue;
        }
        if (n < SPINS_BEFORE_SLEEP) {
            orb_cpu_relax();
            continue;
        }
        if (n < SPINS_BEFORE_SLEEP + YIELDS_BEFORE_SLEEP) {
            sched_yield();   /* a holder preempted on this CPU runs; an idle CPU returns at once */
            continue;
        }
        int64_t now = orb_now_ns();
        if (start == 0) {
            /* A live holder is the common case: its life (three syscalls) is looked at
             * after a first short sleep, not before every first sleep. */
            start = now;
            next_check = now + FIRST_CHECK_NS;
            end = start + (int64_t)bound_ms * 1000000;
        }
        if (now >= next_check) {
            if (holder_gone(v)) {
                int r = take_over(l, v, sleepers ? 0 : ORB_LOCK_WAITERS);
                if (r >= 0)
                    return r;
                continue;
            }
            next_check = now + SLEEP_SLICE_NS;
        }
        if (now >= end)
            return -ORBIT_ETIMEDOUT;
        if (sleepers) {
            flock_sleep(l, sleepers, v, next_check < end ? next_check : end);
            continue;
        }
        /* The bit before the sleep: a give that clears the word after this wakes us. */
        if (!(v & ORB_LOCK_WAITERS) &&
            !atomic_compare_exchange_weak(&l->word, &v, v | ORB_LOCK_WAITERS))
            continue;
        futex_sleep(l, (uint32_t)v | ORB_LOCK_WAITERS, next_check < end ? next_check : end);
        waiters = ORB_LOCK_WAITERS;
    }
}

int orb_lock_take(struct orb_lock *l, int bound_ms)
{
    uint64_t v = 0;
    if (atomic_compare_exchange_strong_explicit(&l->word, &v, me(), memory_order_acquire,
                                                memory_order_relaxed))
        return ORB_LOCK_TAKEN;
    return take_slow(l, NULL, bound_ms);
}

int orb_flock_take(struct orb_lock *l, _Atomic uint32_t *sleepers, int bound_ms)
{
    uint64_t v = 0;
    if (atomic_compare_exchange_strong_explicit(&l->word, &v, me(), memory_order_acquire,
                                                memory_order_relaxed))
        return ORB_LOCK_TAKEN;
    return take_slow(l, sleepers, bound_ms);
}

/* Gives that found the count up and woke nobody, in a row: a sleeper that died counted. */
static _Thread_local unsigned idle_wakes;
#define IDLE_WAKES_BEFORE_RESET 64

void orb_flock_wake(struct orb_lock *l, _Atomic uint32_t *sleepers)
{
    int woken = orb_sys_futex_wake(futex_of(l), 1);
    if (woken != 0) {
        idle_wakes = 0;
        return;
    }
    /* A count nobody answers for is dropped; a sleeper caught between its count and its
     * sleep then waits out one slice (bounded), instead of every give paying a syscall. */
    if (++idle_wakes >= IDLE_WAKES_BEFORE_RESET) {
        idle_wakes = 0;
        atomic_store_explicit(sleepers, 0, memory_order_relaxed);
    }
}

void orb_lock_give(struct orb_lock *l)
{
    /* Release: everything written under the lock is visible to the next taker. */
    uint64_t v = atomic_exchange_explicit(&l->word, 0, memory_order_release);
    if (v & ORB_LOCK_WAITERS)
        orb_sys_futex_wake(futex_of(l), 1);
}
