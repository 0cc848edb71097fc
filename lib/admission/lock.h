/* SPDX-License-Identifier: MIT */
/*
 * The admission ledger's lock, its repair and its wakes (lock.c): the inline
 * take and give every claim and release pays, the slow paths beside them.
 */
#ifndef ORBIT_ADMISSION_LOCK_H
#define ORBIT_ADMISSION_LOCK_H
#include "adm_layout.h"

/*
 * Lock and repair (lock.c). adm_lock: 0 held, or -ORBIT_EPOISONED (a lock
 * word no holder writes poisons the ledger), -ORBIT_ECORRUPT (a live holder
 * kept it past ORB_LOCK_BOUND_MS); with inspect, -ORBIT_ETIMEDOUT instead of
 * the latter (tools must not hang on a stopped holder), and
 * ADM_INSPECT_UNLOCKED for a forged word (the poisoned ledger is read as is).
 * adm_inspect_done(a, what adm_lock returned) ends an inspection.
 */
#define ADM_INSPECT_UNLOCKED 1
int  adm_lock_slow(struct orbit_admission *a, int taken, bool inspect);   /* orb_lock_take's result */
void adm_inspect_done(struct orbit_admission *a, int locked);
void adm_poison(struct orbit_admission *a, enum adm_poison why);   /* under the mutex */
void adm_park_stop(void);
/* Advance the change epoch by one (under the mutex): false when it cannot (then poisoned). */
bool adm_advance_epoch(struct orbit_admission *a);
void adm_repair(struct orbit_admission *a);
void adm_wake(struct orbit_admission *a);

static inline int adm_lock(struct orbit_admission *a, bool inspect)
{
    int rc = orb_flock_take_inline(&a->ledger->lock, &a->ledger->lock_sleepers, ORB_LOCK_BOUND_MS);
    return rc == ORB_LOCK_TAKEN ? 0 : adm_lock_slow(a, rc, inspect);
}

static inline void adm_unlock(struct orbit_admission *a)
{
    orb_flock_give(&a->ledger->lock, &a->ledger->lock_sleepers);
}

/* After a give that advanced the change epoch to epoch: wake a waiter that wants it (lock.c). */
static inline void adm_wake_wanted(struct orbit_admission *a, uint64_t epoch)
{
    if (atomic_load_explicit(&a->ledger->epoch_wanted, memory_order_relaxed) >= epoch)
        adm_wake(a);
}

static inline bool adm_is_poisoned(const struct orbit_admission *a)
{
    return atomic_load_explicit(&a->ledger->poisoned, memory_order_acquire) != ADM_OK;
}

/* A test hook point; nothing in a build without the test hooks (park is never set there). */
static inline void adm_park_here(const struct orbit_admission *a, enum adm_park point)
{
#ifdef ORBIT_TEST_HOOKS
    if (orb_unlikely(a->park != ADM_PARK_NONE) && a->park == point)
        adm_park_stop();
#else
    (void)a;
    (void)point;
#endif
}

#endif
