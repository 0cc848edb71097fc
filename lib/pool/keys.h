/* SPDX-License-Identifier: MIT */
/* What keys.c offers the hot calls inline: a change told to a key's lookers (accept.c). */
#ifndef ORB_POOL_KEYS_H
#define ORB_POOL_KEYS_H

#include "pool_layout.h"

/*
 * A change published by one release store on the hot path (a completion): a
 * process registered for global membarriers needs no fence, since a waiter
 * about to sleep runs orb_lock_fence_others and then folds the key's DONE
 * entries itself (pool_key_fold_after_fence); otherwise the fence orders the store
 * before the loads.
 */
static inline void pool_key_changed_after_store(struct orbit_pool *p, uint32_t i)
{
    if (atomic_load_explicit(&orb_lock_store_give, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
    if (i <= p->key_mask && pool_key_unlooked(pool_key_at(p, i)))
        return;   /* the common case, without a call */
    pool_key_changed_after_rmw(p, i);
}

#endif
