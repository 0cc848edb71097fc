/* SPDX-License-Identifier: MIT */
/* The bounded, validated, dead-holder-recovering shared lock. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <orbit/error.h>
#include "lock.h"
#include "segment.h"
#include "wait.h"

#define SPINS_BEFORE_SLEEP 100
#define SLEEP_SLICE_NS     (10 * 1000000LL)   /* re-check the holder's life this often */

static _Atomic uint64_t self_word;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void forget_self(void) { atomic_store_explicit(&self_word, 0, memory_order_relaxed); }
static void register_fork_hook(void) { pthread_atfork(NULL, NULL, forget_self); }

/* Our held word (start << 32 | pid): system calls, so cached, and forgotten in a forked child. */
static uint64_t me(void)
{
    uint64_t w = atomic_load_explicit(&self_word, memory_order_relaxed);
    if (w == 0) {
        pthread_once(&self_once, register_fork_hook);
        int pid = getpid();
        w = (uint64_t)(uint32_t)orb_proc_start_time(pid) << 32 | (uint32_t)pid;
        atomic_store_explicit(&self_word, w, memory_order_relaxed);
    }
    return w;
}

/* A live process under the pid, but not the holder: the pid was reused (start times differ). */
static int pid_reused(uint32_t pid, uint32_t start)
{
    uint64_t now = start ? orb_proc_start_time((int)pid) : 0;
    return now != 0 && (uint32_t)now != start;   /* unreadable /proc: no evidence either way */
}

/* The holder's process has exited (a zombie counts: it can never release), or its pid is another's. */
static int holder_gone(uint64_t v)
{
    uint32_t pid = (uint32_t)v & ORB_LOCK_PID_MASK;
    if (pid == (uint32_t)me())
        return 0;
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd >= 0) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int exited = poll(&pf, 1, 0) == 1;
        close(fd);
        return exited || pid_reused(pid, ORB_LOCK_START(v));
    }
    if (errno != ENOSYS)
        return errno == ESRCH;
#endif
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    return pid_reused(pid, ORB_LOCK_START(v));
}

/* The futex is the word's low half (pid and waiters bit). */
static uint32_t *futex_of(struct orb_lock *l) { return (uint32_t *)(void *)&l->word; }

static void futex_sleep(struct orb_lock *l, uint32_t v, int64_t until_ns)
{
    struct timespec ts = { .tv_sec = until_ns / 1000000000, .tv_nsec = until_ns % 1000000000 };
    syscall(SYS_futex, futex_of(l), FUTEX_WAIT_BITSET, v, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

int orb_lock_try(struct orb_lock *l)
{
    uint64_t v = 0;
    /* Acquire: what the last holder wrote under the lock is visible to us. */
    return atomic_compare_exchange_strong_explicit(&l->word, &v, me(), memory_order_acquire,
                                                   memory_order_relaxed) ? 0 : -EBUSY;
}

/* Taken over from a dead holder, or -1 when someone else changed the word first. */
static int take_over(struct orb_lock *l, uint64_t v)
{
    /* The CAS names the dead holder's word: of several waiters that saw it dead, one wins. */
    return atomic_compare_exchange_strong_explicit(&l->word, &v, me() | ORB_LOCK_WAITERS,
                                                   memory_order_acquire, memory_order_relaxed)
               ? ORB_LOCK_RECOVERED : -1;
}

static int take_slow(struct orb_lock *l, int bound_ms)
{
    int64_t start = orb_now_ns(), end = start + (int64_t)bound_ms * 1000000, next_check = start;
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
        int64_t now = orb_now_ns();
        if (now >= next_check) {
            if (holder_gone(v)) {
                int r = take_over(l, v);
                if (r >= 0)
                    return r;
                continue;
            }
            next_check = now + SLEEP_SLICE_NS;
        }
        if (now >= end)
            return -ORBIT_ETIMEDOUT;
        /* The bit before the sleep: a give that clears the word after this wakes us. */
        if (!(v & ORB_LOCK_WAITERS) &&
            !atomic_compare_exchange_weak(&l->word, &v, v | ORB_LOCK_WAITERS))
            continue;
        futex_sleep(l, (uint32_t)v | ORB_LOCK_WAITERS, now + SLEEP_SLICE_NS < end ? now + SLEEP_SLICE_NS : end);
        waiters = ORB_LOCK_WAITERS;
    }
}

int orb_lock_take(struct orb_lock *l, int bound_ms)
{
    uint64_t v = 0;
    if (atomic_compare_exchange_strong_explicit(&l->word, &v, me(), memory_order_acquire,
                                                memory_order_relaxed))
        return ORB_LOCK_TAKEN;
    return take_slow(l, bound_ms);
}

void orb_lock_give(struct orb_lock *l)
{
    /* Release: everything written under the lock is visible to the next taker. */
    uint64_t v = atomic_exchange_explicit(&l->word, 0, memory_order_release);
    if (v & ORB_LOCK_WAITERS)
        syscall(SYS_futex, futex_of(l), FUTEX_WAKE, 1, NULL, NULL, 0);
}
