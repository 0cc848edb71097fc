/* SPDX-License-Identifier: MIT */
/* Reading the fleet's counters from any process: consistent sums, names (counters.h). */
#include <sched.h>
#include <string.h>
#include <orbit/inspect.h>
#include "counters.h"
#include "fleet_internal.h"
#include "guard.h"
#include "table_ops.h"

_Static_assert(ORBIT_COUNTERS_MAX == ORB_CTR_VALUES, "the public array holds every slot value");
_Static_assert(ORBIT_RECLAIM_BUCKETS == ORB_CTR_RECLAIM_BUCKETS, "one bucket list");

static const struct orb_counter_def common[ORB_CTR_TABLE_FIRST] = {
    [ORB_CTR_PARKS] = { "parks", "Waiters that slept in the kernel (futex or io_uring) on this table." },
    [ORB_CTR_WAKES] = { "wakes", "FUTEX_WAKEs issued for this table's waiters." },
    [ORB_CTR_DOORBELLS] = { "doorbells", "Node doorbells rung by this table's changes." },
    [ORB_CTR_URING_ARMED] = { "uring_waits_armed", "io_uring FUTEX_WAIT requests prepared on this table." },
    [ORB_CTR_URING_READY] = { "uring_waits_ready", "io_uring wait preps that found the event already there." },
};

static const struct orb_counter_def *counter_def(unsigned type, unsigned index)
{
    if (type == ORB_TABLE_FLEET || type > 255)
        return NULL;
    const struct orb_table_ops *ops = orb_table_ops_of((uint8_t)type);
    if (!ops)
        return NULL;
    if (index < ORB_CTR_TABLE_FIRST)
        return &common[index];
    index -= ORB_CTR_TABLE_FIRST;
    return index < ops->counter_count && index + ORB_CTR_TABLE_FIRST < ORB_CTR_VALUES ? &ops->counters[index]
                                                                                   : NULL;
}

const char *orbit_counter_name(unsigned type, unsigned index)
{
    const struct orb_counter_def *d = counter_def(type, index);
    return d ? d->name : NULL;
}

const char *orbit_counter_help(unsigned type, unsigned index)
{
    const struct orb_counter_def *d = counter_def(type, index);
    return d ? d->help : NULL;
}

/* One pass over the region; the caller checks the fold sequence around it. */
static void sum_once(struct orbit_fleet *f, uint8_t kind, uint16_t node, struct orbit_counters *out)
{
    memset(out->value, 0, sizeof out->value);
    out->slots = 0;
    if (node == ORBIT_NODE_NONE) {
        struct orb_ctr_totals *t = &f->ctr_totals[kind];
        for (unsigned i = 0; i < ORB_CTR_VALUES; i++)
            out->value[i] = atomic_load_explicit(&t->folded[i], memory_order_relaxed) +
                            atomic_load_explicit(&t->overflow[i], memory_order_relaxed);
    }
    for (uint32_t s = 0; s < f->ctr_slot_count; s++) {
        struct orb_ctr_slot *slot = &f->ctr_slots[s];
        /* Acquire: a slot read as held shows the zeroed values its claimer wrote before the tag. */
        uint64_t tag = atomic_load_explicit(&slot->tag, memory_order_acquire);
        if (ORB_SLOT_STATE(tag) < ORB_SLOT_HELD || ORB_SLOT_KIND(tag) != kind ||
            (node != ORBIT_NODE_NONE && ORB_SLOT_NODE(tag) != node))
            continue;
        out->slots++;
        for (unsigned i = 0; i < ORB_CTR_VALUES; i++)
            out->value[i] += atomic_load_explicit(&slot->v[i], memory_order_relaxed);
    }
}

int orbit_fleet_counters(struct orbit_fleet *f, uint8_t kind, uint16_t node, struct orbit_counters *out)
{
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    if (node != ORBIT_NODE_NONE && node >= f->capacity)
        return orb_fail(-ORBIT_EMALFORMED, "%s: node %u: the fleet has nodes 0..%u (or ORBIT_NODE_NONE)",
                        __func__, (unsigned)node, (unsigned)f->capacity - 1u);
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->node = node;
    if (!f->ctr)
        return orb_fail(-ORBIT_ECORRUPT, "%s: the fleet has no counters region", __func__);
    struct orb_ctr_header *h = f->ctr;
    for (int tries = 0; tries < 10000; tries++) {
        uint64_t before = atomic_load_explicit(&h->fold_seq, memory_order_acquire);
        if (before & 1) {
            sched_yield();   /* a fold moves counts for a microsecond */
            continue;
        }
        sum_once(f, kind, node, out);
        /* Acquire fence: the sums were read before the sequence is read again. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&h->fold_seq, memory_order_relaxed) == before)
            return 0;
    }
    /* Folds kept coming, or a folder died mid-fold: read under the lock (which finishes its fold). */
    rc = orb_ctr_lock(f);
    if (rc < 0)
        return orb_fail(rc == -ORBIT_ETIMEDOUT ? rc : -ORBIT_ECORRUPT, "%s: the counters' fold lock %s",
                        __func__, rc == -ORBIT_ETIMEDOUT ? "stayed held past its bound" : "is garbled");
    sum_once(f, kind, node, out);
    orb_ctr_unlock(f);
    return 0;
}

int orbit_fleet_death_counters(struct orbit_fleet *f, struct orbit_death_counters *out)
{
    int rc = orb_enter_fleet(f, __func__);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", __func__);
    memset(out, 0, sizeof *out);
    struct orb_ctr_header *h = f->ctr;
    if (!h)
        return orb_fail(-ORBIT_ECORRUPT, "%s: the fleet has no counters region", __func__);
    uint64_t cumulative = 0;
    for (unsigned b = 0; b < ORB_CTR_RECLAIM_BUCKETS; b++) {
        cumulative += atomic_load_explicit(&h->reclaim_le[b], memory_order_relaxed);
        out->reclaim_le[b] = cumulative;
        out->reclaim_bound_ns[b] = orb_ctr_reclaim_bounds_ns[b];
    }
    out->reclaim_ns_sum = atomic_load_explicit(&h->reclaim_ns_sum, memory_order_relaxed);
    out->deaths_reported = cumulative;   /* the buckets are the count: the +Inf one holds every report */
    out->leaves = atomic_load_explicit(&h->leaves, memory_order_relaxed);
    return 0;
}
