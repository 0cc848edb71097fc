/* SPDX-License-Identifier: MIT */
/*
 * The wake protocol (docs/design.md §4), one implementation for every table.
 *
 * A waitable thing owns a struct orb_waitword in shared memory:
 *   changes - u32 futex word, bumped on every change that may satisfy a waiter;
 *   parked  - u32 flag, "someone may be asleep on changes".
 * Waiter: since = changes; check; parked = 1 (seq_cst); check again; sleep
 * while changes == since. Waker: publish; changes++; fence; wake only when
 * exchange(parked, 0) was 1, after moving changes once more (the flag taken
 * may be a waiter's whose since already counted the first bump). The waker
 * clears the flag, so an abandoned waiter costs at most one spurious wake.
 */
#ifndef ORB_CORE_WAIT_H
#define ORB_CORE_WAIT_H

#include "counters.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct orb_waitword {
    _Atomic uint32_t changes;
    _Atomic uint32_t parked;
};

/* Per table handle, process-local counters (orbit_*_stats). */
struct orb_wait_stats {
    _Atomic uint64_t parks;      /* times a waiter went to sleep in the kernel */
    _Atomic uint64_t wakes;      /* FUTEX_WAKEs issued (syscall or SQE) */
    _Atomic uint64_t doorbells;  /* node doorbells rung */
    struct orb_ctr_ref *ctr;     /* the handle's shared counters (counters.h), or NULL */
};

/* An absolute CLOCK_MONOTONIC deadline; forever when timeout_ms < 0. */
struct orb_deadline {
    int64_t at_ns;
    bool forever;
};

int64_t orb_now_ns(void);                 /* CLOCK_MONOTONIC */
uint64_t orb_wall_ms(void);               /* CLOCK_REALTIME in ms */
/* A table's next epoch (reset_all, a first epoch): max(now in ms, previous + 1). */
uint64_t orb_next_epoch(uint64_t previous);
/* CLOCK_REALTIME_COARSE in ms: one clock tick (1-10 ms) behind, ~10x cheaper to read;
 * inline, as the pool's reserve stamps with it. */
static inline uint64_t orb_wall_ms_coarse(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
/* Inline: every blocking call begins with one, and forever reads no clock. */
static inline struct orb_deadline orb_deadline_in(int timeout_ms)
{
    /* Below -1 is malformed (callers refuse it): never forever, already passed. */
    struct orb_deadline d = { 0, timeout_ms == -1 };
    if (timeout_ms >= 0)
        d.at_ns = orb_now_ns() + (int64_t)timeout_ms * 1000000;
    return d;
}
/* Timeouts are -1 (forever), 0 (once) or milliseconds: any other negative is malformed. */
static inline bool orb_timeout_valid(int timeout_ms) { return timeout_ms >= -1; }
static inline bool orb_deadline_passed(const struct orb_deadline *d)
{
    return !d->forever && orb_now_ns() >= d->at_ns;
}

/* Adaptive spin budget kept by one waiter (process-local, may be shared). */
struct orb_spin {
    _Atomic uint32_t budget_ns;   /* 0 = not initialised: take orbit_spin_ns() */
    _Atomic uint32_t waits;       /* every 8th wait explores with the full budget */
};

/*
 * Predicate for orb_wait_until: > 0 ready (returned as is), < 0 an error
 * (returned as is), 0 not yet.
 */
typedef int (*orb_wait_pred)(void *ctx);

/*
 * orb_wait_until - the whole waiter side: check, spin for the adaptive
 * budget, arm the parked flag, check again, park on changes, repeat.
 * Returns what pred returned (> 0 or < 0), or -ORBIT_ETIMEDOUT at deadline
 * (pred is checked once more first). A deadline already passed still checks
 * pred once. parks are counted in stats (may be NULL).
 */
int orb_wait_until(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                   const struct orb_deadline *deadline, struct orb_spin *spin,
                   struct orb_wait_stats *stats);

/*
 * The two halves of orb_wait_until, for callers that do something between
 * them (io_uring preps, a stream noting its CPU): spin for the adaptive budget
 * (a hit keeps at least the full setting, a miss halves it, every 8th wait
 * explores with the full setting); then arm, re-check and park until pred or
 * deadline. A park whose event came soon after it began raises the budget
 * (up to 16x the setting), so a peer that answers in ~10 us is caught spinning.
 */
int orb_wait_spin(orb_wait_pred pred, void *ctx, struct orb_spin *spin,
                  const struct orb_deadline *deadline);
/* Whether a waiter may poll a few times now, before any clock read, as orb_wait_spin's
 * first checks do: spinning is on and this thread's CPU was not found contended. */
bool orb_wait_may_poll(void);
int orb_wait_park_until(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                        const struct orb_deadline *deadline, struct orb_spin *spin,
                        struct orb_wait_stats *stats);

/* Low-level pieces, for callers that build their own loops (io_uring prep). */
static inline uint32_t orb_wait_since(struct orb_waitword *w)
{
    return atomic_load_explicit(&w->changes, memory_order_acquire);
}
/* Arm: after this, a waker that changes anything will wake us. */
static inline void orb_wait_arm(struct orb_waitword *w)
{
    atomic_store_explicit(&w->parked, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
}
/* Sleep while changes == since, until deadline. 0 woken/changed, -ETIMEDOUT, -EINTR. */
int orb_wait_park(struct orb_waitword *w, uint32_t since, const struct orb_deadline *deadline,
                  struct orb_wait_stats *stats);

/*
 * orb_wait_signal - waker side, after the change is published: bump changes
 * and wake sleepers only if one may be parked. Returns true if a wake went
 * out (counted in stats).
 */
bool orb_wait_signal(struct orb_waitword *w, struct orb_wait_stats *stats);
/* Its second half, after the bump (tests drive the two halves apart). */
bool orb_wait_signal_bumped(struct orb_waitword *w, struct orb_wait_stats *stats);

/*
 * orb_wait_kick - for death reports: bump changes and wake every sleeper on w,
 * whatever parked says. A waker killed after orb_wait_signal took parked but
 * before its FUTEX_WAKE went out (at once, or from an io_uring wake batch it
 * never submitted) leaves a sleeper that later signals skip, since parked
 * reads 0. A spurious wake costs a waiter one look at its predicate.
 */
void orb_wait_kick(struct orb_waitword *w);

/* Bump changes without waking anyone (a change no waiter can be parked for). */
static inline void orb_wait_bump(struct orb_waitword *w)
{
    atomic_fetch_add_explicit(&w->changes, 1, memory_order_release);
}

/* futex(2) helpers on a shared (non-private) u32 word. */
int orb_futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct orb_deadline *deadline);
/* Wakes every sleeper: through this thread's io_uring wake batch when there is one. */
void orb_futex_wake_all(_Atomic uint32_t *word);
/* Wakes at most one sleeper (futex(2) directly). */
void orb_futex_wake_one(_Atomic uint32_t *word);

/*
 * The waiter side of the wake protocol for an SQE (wait_uring.c): since =
 * changes; pred; arm parked; pred again; fill FUTEX_WAIT(changes == since).
 * Returns 1 when pred says ready, 0 when sqe holds the wait, pred's negative
 * error, or -ORBIT_ENOTSUP when the kernel lacks IORING_OP_FUTEX_WAIT; on
 * any non-zero return sqe is a NOP (orb_uring_prep_result). user_data is
 * left as the caller set it.
 */
struct io_uring_sqe;
int orb_uring_prep_wait(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                        struct io_uring_sqe *sqe, struct orb_wait_stats *stats);
/* -ORBIT_ENOTSUP with the probe's reason for orbit_last_error; sqe (if any) becomes a NOP. */
int orb_uring_unsupported(struct io_uring_sqe *sqe);

/* Spin for up to budget; returns true as soon as pred becomes non-zero. */
void orb_cpu_relax(void);

#endif
