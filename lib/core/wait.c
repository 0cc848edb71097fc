/* SPDX-License-Identifier: MIT */
/* The wake protocol: change word + parked flag, spin then park on futex(2). */
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <orbit/fleet.h>
#include "syscalls.h"
#include "uring_internal.h"
#include "wait.h"
#include "guard_sigbus.h"
#include <orbit/error.h>

static _Atomic uint32_t spin_ns_setting = UINT32_MAX;   /* UINT32_MAX: not read yet */

void orbit_set_spin_ns(uint32_t ns)
{
    atomic_store(&spin_ns_setting, ns > 1000000 ? 1000000 : ns);
}

uint32_t orbit_spin_ns(void)
{
    uint32_t v = atomic_load_explicit(&spin_ns_setting, memory_order_relaxed);
    if (v == UINT32_MAX) {
        const char *env = getenv("ORBIT_SPIN_NS");
        long parsed = env ? strtol(env, NULL, 10) : 2000;
        v = parsed < 0 ? 0 : parsed > 1000000 ? 1000000 : (uint32_t)parsed;
        atomic_store(&spin_ns_setting, v);
    }
    return v;
}

int orb_futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct orb_deadline *deadline)
{
    struct timespec ts, *tsp = NULL;
    if (deadline && !deadline->forever) {
        ts.tv_sec = deadline->at_ns / 1000000000;
        ts.tv_nsec = deadline->at_ns % 1000000000;
        tsp = &ts;
    }
    /* An absolute CLOCK_MONOTONIC deadline, on a shared word (syscalls.h). */
    if (orb_sys_futex_wait(word, expected, tsp) == 0)
        return 0;
    if (errno == ETIMEDOUT)
        return -ETIMEDOUT;
    if (errno == EINTR)
        return -EINTR;
    return -EAGAIN;   /* the word already moved */
}

void orb_futex_wake_all(_Atomic uint32_t *word)
{
    if (orb_uring_batch_wake(word) == 0)
        return;   /* queued in the ring attached by orbit_uring_attach_wakes */
    orb_sys_futex_wake(word, INT_MAX);
}

void orb_futex_wake_one(_Atomic uint32_t *word)
{
    orb_sys_futex_wake(word, 1);
}

bool orb_wait_signal_bumped(struct orb_waitword *w, struct orb_wait_stats *stats)
{
    /* seq_cst load after the bump: either we see parked, or the waiter's later futex check
     * sees the new changes value and does not sleep. */
    if (atomic_load_explicit(&w->parked, memory_order_seq_cst) == 0)
        return false;
    if (atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst) == 0)
        return false;
    /* The flag we took may be a waiter's that read since after our bump: move the word again
     * (after the take), so that waiter's futex check fails and it arms anew. */
    atomic_fetch_add_explicit(&w->changes, 1, memory_order_seq_cst);
    orb_futex_wake_all(&w->changes);
    if (stats) {
        atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        if (stats->ctr)
            orb_count(stats->ctr, ORB_CTR_WAKES, 1);
    }
    return true;
}

bool orb_wait_signal(struct orb_waitword *w, struct orb_wait_stats *stats)
{
    /* changes moves first: a waiter that armed after this sees its futex value differ. */
    atomic_fetch_add_explicit(&w->changes, 1, memory_order_seq_cst);
    return orb_wait_signal_bumped(w, stats);
}

void orb_wait_kick(struct orb_waitword *w)
{
    /* changes first: a waiter between its arm and its futex call does not sleep. */
    atomic_fetch_add_explicit(&w->changes, 1, memory_order_seq_cst);
    orb_futex_wake_all(&w->changes);
}

int orb_wait_park(struct orb_waitword *w, uint32_t since, const struct orb_deadline *deadline,
                  struct orb_wait_stats *stats)
{
    int rc = orb_futex_wait(&w->changes, since, deadline);
    if (rc != -EAGAIN && stats) {
        atomic_fetch_add_explicit(&stats->parks, 1, memory_order_relaxed);
        if (stats->ctr)
            orb_count(stats->ctr, ORB_CTR_PARKS, 1);
    }
    return rc == -EAGAIN ? 0 : rc;
}

/* A learned budget may grow past the setting up to this many times it: events that
 * keep arriving just after we park (a peer copying 64 KiB) are worth spinning for. */
#define SPIN_CEILING_FACTOR 16u

static uint32_t spin_ceiling(uint32_t setting)
{
    uint64_t c = (uint64_t)setting * SPIN_CEILING_FACTOR;
    return c > 1000000 ? 1000000 : (uint32_t)c;
}

/*
 * A spinning thread that loses its CPU for longer than CONTENDED_GAP_NS (a
 * check that came that late, or a sched_yield that ran another task) is on
 * a contended CPU: spinning there only delays the task it waits for, often
 * the peer itself. A contended thread yields before each check instead of
 * pausing, until CONTENDED_MEMORY yields in a row came back at once.
 */
#define CONTENDED_GAP_NS 5000
#define CONTENDED_MEMORY 16u
static _Thread_local unsigned cpu_contended;

/* One step of the spin: yield or pause; returns the time of the next check. */
static int64_t spin_step(int64_t last_check, bool check_now)
{
    bool yielding = cpu_contended != 0;
    if (yielding)
        sched_yield();
    else
        orb_cpu_relax();
    if (!yielding && !check_now)
        return last_check;
    int64_t now = orb_now_ns();
    if (now - last_check > CONTENDED_GAP_NS)
        cpu_contended = CONTENDED_MEMORY;
    else if (yielding)
        cpu_contended--;
    return now;
}

bool orb_wait_may_poll(void)
{
    return cpu_contended == 0 && orbit_spin_ns() != 0;
}

/* The spin's budget for this wait: the learned one, the setting when exploring. */
static uint32_t spin_budget(struct orb_spin *spin, uint32_t setting, bool *explore)
{
    *explore = true;
    if (!spin)
        return setting;
    uint32_t budget = atomic_load_explicit(&spin->budget_ns, memory_order_relaxed);
    /* A plain count, no locked add: two threads waiting at once only blur when it explores. */
    uint32_t waits = atomic_load_explicit(&spin->waits, memory_order_relaxed);
    atomic_store_explicit(&spin->waits, waits + 1, memory_order_relaxed);
    *explore = (waits & 7) == 7;
    if (budget == 0 || (*explore && budget < setting))
        budget = setting;
    return budget > spin_ceiling(setting) ? spin_ceiling(setting) : budget;
}

/*
 * Spin up to the adaptive budget; returns pred's non-zero value or 0.
 * A hit keeps at least the full setting, a miss halves the budget (floor: a
 * sixteenth of the setting), every 8th wait explores with at least the full
 * setting, and orb_wait_park_until raises the budget (up to the ceiling) when
 * a park ended soon after it began. On a contended CPU the spin yields
 * between checks (spin_step), so the budget is wall time others could use.
 */
/* Checks a spin makes before its first clock read. */
#define SPIN_EARLY_CHECKS 8u

int orb_wait_spin(orb_wait_pred pred, void *ctx, struct orb_spin *spin,
                  const struct orb_deadline *deadline)
{
    uint32_t setting = orbit_spin_ns();
    if (setting == 0)
        return 0;
    bool explore;
    uint32_t budget = spin_budget(spin, setting, &explore);
    int r = 0;
    /* A few checks before the first clock read: a peer that answers within them
     * (a ping-pong partner) costs no clock read; the budget runs from that read. */
    for (unsigned i = 0; i < SPIN_EARLY_CHECKS && cpu_contended == 0; i++) {
        orb_cpu_relax();
        if ((r = pred(ctx)) != 0)
            goto learn;
    }
    int64_t now = orb_now_ns();
    int64_t end = now + budget;
    if (!deadline->forever && deadline->at_ns < end)
        end = deadline->at_ns;
    for (unsigned i = 1;; i++) {
        int64_t checked = spin_step(now, (i & 15) == 0);
        if ((r = pred(ctx)) != 0)
            break;
        if (checked == now)
            continue;   /* no clock read this step */
        now = checked;
        if (now >= end)
            break;
    }
learn:
    if (spin && (r || !explore)) {
        uint32_t floor = setting / 16 ? setting / 16 : 1;
        uint32_t next = r ? (budget > setting ? budget : setting) : budget / 2;
        atomic_store_explicit(&spin->budget_ns, next < floor ? floor : next, memory_order_relaxed);
    }
    return r;
}

/* A park that ended with the event soon after it began: spin that long next time. */
static void learn_from_park(struct orb_spin *spin, int64_t parked_ns)
{
    uint32_t setting = orbit_spin_ns();
    if (!spin || setting == 0 || parked_ns <= 0)
        return;
    uint32_t budget = atomic_load_explicit(&spin->budget_ns, memory_order_relaxed);
    uint64_t want = ((uint64_t)(budget > setting ? budget : setting) + (uint64_t)parked_ns) * 5 / 4;
    if (want <= spin_ceiling(setting))
        atomic_store_explicit(&spin->budget_ns, (uint32_t)want, memory_order_relaxed);
}

/*
 * A park lasts at most this long before the waiter looks again: a segment file
 * shrunk under us leaves a sleeper that no waker can reach (their stores to the
 * word fault too), and its next look finds the SIGBUS guard broke the mapping.
 */
#define PARK_SLICE_NS 1000000000ll

/* The deadline of one park: the caller's, or a slice of a longer one. */
static struct orb_deadline park_slice(const struct orb_deadline *deadline, int64_t now)
{
    struct orb_deadline d = { now + PARK_SLICE_NS, false };
    if (!deadline->forever && deadline->at_ns < d.at_ns)
        d.at_ns = deadline->at_ns;
    return d;
}

int orb_wait_park_until(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                        const struct orb_deadline *deadline, struct orb_spin *spin,
                        struct orb_wait_stats *stats)
{
    for (;;) {
        /* since is read before the last check, so a change after that check moves the word. */
        uint32_t since = orb_wait_since(w);
        orb_wait_arm(w);
        int r = pred(ctx);
        if (r != 0)
            return r;
        if (orb_guard_broken_at(w))
            return -ORBIT_ECORRUPT;   /* the word is ours alone now: nobody will ever move it */
        if (orb_deadline_passed(deadline))
            return -ETIMEDOUT;
        int64_t parked_at = orb_now_ns();
        struct orb_deadline slice = park_slice(deadline, parked_at);
        int rc = orb_wait_park(w, since, &slice, stats);
        if (rc == -ETIMEDOUT && !orb_deadline_passed(deadline))
            continue;   /* a slice ended: look again */
        if (rc == -ETIMEDOUT) {
            r = pred(ctx);
            return r != 0 ? r : -ETIMEDOUT;
        }
        if ((r = pred(ctx)) != 0) {
            learn_from_park(spin, orb_now_ns() - parked_at);
            return r;
        }
    }
}

int orb_wait_until(struct orb_waitword *w, orb_wait_pred pred, void *ctx,
                   const struct orb_deadline *deadline, struct orb_spin *spin,
                   struct orb_wait_stats *stats)
{
    int r = pred(ctx);
    if (r != 0)
        return r;
    if (orb_deadline_passed(deadline))
        return -ETIMEDOUT;
    if ((r = orb_wait_spin(pred, ctx, spin, deadline)) != 0)
        return r;
    return orb_wait_park_until(w, pred, ctx, deadline, spin, stats);
}
