/* SPDX-License-Identifier: MIT */
/* Counters in the fleet segment: slots for writers, folds of ended lives (counters.h). */
#include <stdlib.h>
#include <string.h>
#include "counters.h"
#include "fleet_internal.h"
#include "guard.h"

__thread struct orb_ctr_tls orb_ctr_tls[ORB_CTR_TLS_WAYS] __attribute__((tls_model("initial-exec")));
__thread char orb_ctr_me __attribute__((tls_model("initial-exec")));

const uint64_t orb_ctr_reclaim_bounds_ns[ORB_CTR_RECLAIM_BUCKETS] = {
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 50000000, 250000000,
    1000000000, UINT64_MAX,
};

static pthread_mutex_t ctr_mutex = PTHREAD_MUTEX_INITIALIZER;   /* refs, their slots, thread entries */
static struct orb_ctr_ref *live_refs;
static _Atomic uint64_t next_gen = 1;
static pthread_once_t ctr_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;

_Static_assert(sizeof(struct orb_ctr_header) <= ORB_CTR_HEADER_BYTES, "the counters header fits its bytes");

void orb_ctr_region_init(void *region, uint32_t capacity)
{
    struct orb_ctr_header *h = region;
    memset(region, 0, orb_ctr_region_bytes(capacity));
    orb_lock_init(&h->fold_lock);
    h->slot_count = orb_ctr_slot_count(capacity);
}

/* ---- the process's refs ---- */

static bool ref_live(const struct orb_ctr_ref *r, uint64_t gen)
{
    for (struct orb_ctr_ref *x = live_refs; x; x = x->next)
        if (x == r)
            return x->gen == gen;
    return false;
}

static void owned_drop(struct orb_ctr_ref *r, uint32_t slot)
{
    for (uint32_t i = 0; i < r->owned_count; i++)
        if (r->owned[i] == slot) {
            r->owned[i] = r->owned[--r->owned_count];
            return;
        }
}

static bool owned_add(struct orb_ctr_ref *r, uint32_t slot)
{
    if (r->owned_count == r->owned_cap) {
        uint32_t cap = r->owned_cap ? r->owned_cap * 2 : 4;
        uint32_t *v = realloc(r->owned, cap * sizeof *v);
        if (!v)
            return false;
        r->owned = v;
        r->owned_cap = cap;
    }
    r->owned[r->owned_count++] = slot;
    return true;
}

/* ctr_mutex held: the slot keeps its counts for the next thread of the same life. */
static void orphan(struct orb_ctr_ref *r, uint32_t slot)
{
    struct orbit_fleet *f = r->fleet;
    if (slot >= f->ctr_slot_count)
        return;
    struct orb_ctr_slot *s = &f->ctr_slots[slot];
    uint64_t held = ORB_SLOT_TAG(ORB_SLOT_HELD, r->kind, f->node);
    /* Release: this thread's last stores are visible to whoever adopts the slot. */
    atomic_compare_exchange_strong_explicit(&s->tag, &held, ORB_SLOT_TAG(ORB_SLOT_ORPHAN, r->kind, f->node),
                                            memory_order_release, memory_order_relaxed);
}

/* ctr_mutex held: give up a thread entry's slot if its ref still lives. */
static void entry_release(struct orb_ctr_tls *e)
{
    struct orb_ctr_ref *r = (struct orb_ctr_ref *)(uintptr_t)e->ref;
    if (r && ref_live(r, e->gen) && atomic_load(&r->fast_thread) == &orb_ctr_me && r->fast_v == e->v)
        atomic_store(&r->fast_thread, NULL);   /* this thread no longer owns that slot */
    if (r && e->v && !e->shared && ref_live(r, e->gen) && !r->off) {
        orphan(r, e->slot);
        owned_drop(r, e->slot);
    }
    memset(e, 0, sizeof *e);
}

static void thread_gone(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&ctr_mutex);
    for (unsigned i = 0; i < ORB_CTR_TLS_WAYS; i++)
        entry_release(&orb_ctr_tls[i]);
    pthread_mutex_unlock(&ctr_mutex);
}

static void fork_prepare(void) { pthread_mutex_lock(&ctr_mutex); }
static void fork_parent(void) { pthread_mutex_unlock(&ctr_mutex); }
/* The child is no member: its refs and entries name the parent's slots, which it must never write. */
static void fork_child(void)
{
    for (struct orb_ctr_ref *r = live_refs; r; r = r->next)
        atomic_store(&r->fast_thread, NULL);   /* this thread's address is the parent's thread's */
    memset(orb_ctr_tls, 0, sizeof orb_ctr_tls);
    live_refs = NULL;
    pthread_mutex_unlock(&ctr_mutex);
}

static bool counting_refused;   /* ORBIT_COUNTERS=off: this process counts nothing */

static void ctr_setup(void)
{
    const char *v = getenv("ORBIT_COUNTERS");
    counting_refused = v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
    pthread_key_create(&thread_key, thread_gone);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void orb_ctr_ref_open(struct orb_ctr_ref *r, struct orbit_fleet *f, uint8_t kind)
{
    pthread_once(&ctr_once, ctr_setup);
    memset(r, 0, sizeof *r);
    r->fleet = f;
    r->kind = kind;
    r->fork_generation = f->fork_generation;
    r->off = !f->ctr || counting_refused;
    r->nodeless = f->observer || f->node == ORBIT_NODE_NONE;   /* a reporter's work: totals only */
    pthread_mutex_lock(&ctr_mutex);
    r->gen = atomic_fetch_add(&next_gen, 1);
    r->next = live_refs;
    live_refs = r;
    pthread_mutex_unlock(&ctr_mutex);
}

void orb_ctr_ref_close(struct orb_ctr_ref *r)
{
    if (!r->fleet)
        return;
    pthread_mutex_lock(&ctr_mutex);
    bool ours = orb_handle_ours(r->fork_generation);   /* a fork child touches no shared slot */
    for (struct orb_ctr_ref **p = &live_refs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    for (uint32_t i = 0; ours && !r->off && i < r->owned_count; i++)
        orphan(r, r->owned[i]);
    pthread_mutex_unlock(&ctr_mutex);
    free(r->owned);
    memset(r, 0, sizeof *r);
}

void orb_ctr_fleet_gone(struct orbit_fleet *f)
{
    pthread_mutex_lock(&ctr_mutex);
    for (struct orb_ctr_ref *r = live_refs; r; r = r->next)
        if (r->fleet == f) {
            r->off = true;   /* its slots are about to be folded: nobody writes them again */
            atomic_store(&r->fast_thread, NULL);
            r->owned_count = 0;
            r->gen = atomic_fetch_add(&next_gen, 1);
        }
    pthread_mutex_unlock(&ctr_mutex);
}

/* ---- folds ---- */

static void redo_apply(struct orbit_fleet *f, struct orb_ctr_redo *d)
{
    uint32_t slot = atomic_load(&d->slot);
    if (slot >= f->ctr_slot_count)
        return;   /* a garbled record: nothing of it can be trusted */
    struct orb_ctr_slot *s = &f->ctr_slots[slot];
    uint8_t kind = ORB_SLOT_KIND(atomic_load(&s->tag));
    struct orb_ctr_totals *t = &f->ctr_totals[kind];
    /* Idempotent: the totals are old + add however often this runs, then the slot is empty. */
    for (unsigned i = 0; i < ORB_CTR_VALUES; i++)
        atomic_store_explicit(&t->folded[i], atomic_load(&d->old[i]) + atomic_load(&d->add[i]),
                              memory_order_relaxed);
    for (unsigned i = 0; i < ORB_CTR_VALUES; i++)
        atomic_store_explicit(&s->v[i], 0, memory_order_relaxed);
    atomic_store_explicit(&s->incarnation, 0, memory_order_relaxed);
    atomic_store_explicit(&s->tag, ORB_SLOT_TAG(ORB_SLOT_FREE, 0, 0), memory_order_release);
    atomic_store_explicit(&d->active, 0, memory_order_release);
}

static int fold_lock(struct orbit_fleet *f)
{
    struct orb_ctr_header *h = f->ctr;
    int rc = orb_lock_take(&h->fold_lock, ORB_LOCK_BOUND_MS);
    if (rc < 0)
        return rc;
    /* A folder died holding the lock: finish its fold, end its odd sequence. */
    if (atomic_load_explicit(&h->redo.active, memory_order_acquire))
        redo_apply(f, &h->redo);
    uint64_t seq = atomic_load(&h->fold_seq);
    if (seq & 1)
        atomic_store_explicit(&h->fold_seq, seq + 1, memory_order_release);
    return 0;
}

int orb_ctr_lock(struct orbit_fleet *f) { return f->ctr ? fold_lock(f) : -ORBIT_ECORRUPT; }
void orb_ctr_unlock(struct orbit_fleet *f) { orb_lock_give(&f->ctr->fold_lock); }

/* Fold lock held, the slot's writer gone: its counts join the kind's totals, the slot is free. */
static void fold_slot(struct orbit_fleet *f, uint32_t slot)
{
    struct orb_ctr_header *h = f->ctr;
    struct orb_ctr_slot *s = &f->ctr_slots[slot];
    uint64_t tag = atomic_load_explicit(&s->tag, memory_order_acquire);
    unsigned state = ORB_SLOT_STATE(tag);
    if (state != ORB_SLOT_HELD && state != ORB_SLOT_ORPHAN)
        return;
    struct orb_ctr_totals *t = &f->ctr_totals[ORB_SLOT_KIND(tag)];
    /* Odd first: a reader that saw this fold's moves sees the sequence change. */
    atomic_store_explicit(&h->fold_seq, atomic_load(&h->fold_seq) + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&h->redo.slot, slot, memory_order_relaxed);
    for (unsigned i = 0; i < ORB_CTR_VALUES; i++) {
        atomic_store_explicit(&h->redo.old[i], atomic_load(&t->folded[i]), memory_order_relaxed);
        atomic_store_explicit(&h->redo.add[i], atomic_load(&s->v[i]), memory_order_relaxed);
    }
    /* Release: the record is whole before it says active. */
    atomic_store_explicit(&h->redo.active, 1, memory_order_release);
    redo_apply(f, &h->redo);
    atomic_store_explicit(&h->fold_seq, atomic_load(&h->fold_seq) + 1, memory_order_release);
}

void orb_ctr_fold_life(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    if (!f->ctr || fold_lock(f) < 0)
        return;   /* counts stay in their slots, still counted; a later claim's sweep folds them */
    for (uint32_t i = 0; i < f->ctr_slot_count; i++) {
        uint64_t tag = atomic_load_explicit(&f->ctr_slots[i].tag, memory_order_acquire);
        if (ORB_SLOT_NODE(tag) == node && ORB_SLOT_STATE(tag) >= ORB_SLOT_HELD &&
            atomic_load(&f->ctr_slots[i].incarnation) == incarnation)
            fold_slot(f, i);
    }
    orb_lock_give(&f->ctr->fold_lock);
}

/* Is the life that counted in this slot over (its node since reclaimed, freed or reported)? */
static bool slot_life_over(struct orbit_fleet *f, uint64_t tag, uint64_t incarnation)
{
    struct orb_node_record *rec = orb_fleet_record(f, ORB_SLOT_NODE(tag));
    if (!rec)
        return true;   /* no such node: garbage, folded away */
    return atomic_load_explicit(&rec->state, memory_order_acquire) != ORBIT_NODE_LIVE ||
           atomic_load(&rec->incarnation) != incarnation;
}

/* Fold the slots of ended lives that nobody reported (a leave before counters, a garbled tag). */
static void sweep_ended(struct orbit_fleet *f)
{
    if (fold_lock(f) < 0)
        return;
    for (uint32_t i = 0; i < f->ctr_slot_count; i++) {
        struct orb_ctr_slot *s = &f->ctr_slots[i];
        uint64_t tag = atomic_load_explicit(&s->tag, memory_order_acquire);
        if (ORB_SLOT_STATE(tag) >= ORB_SLOT_HELD && slot_life_over(f, tag, atomic_load(&s->incarnation)))
            fold_slot(f, i);
    }
    orb_lock_give(&f->ctr->fold_lock);
}

/* ---- claims ---- */

static bool take_slot(struct orbit_fleet *f, uint8_t kind, uint32_t *out)
{
    uint64_t orphan_tag = ORB_SLOT_TAG(ORB_SLOT_ORPHAN, kind, f->node);
    for (uint32_t i = 0; i < f->ctr_slot_count; i++) {   /* the same life's orphan first: its counts go on */
        struct orb_ctr_slot *s = &f->ctr_slots[i];
        uint64_t t = orphan_tag;
        if (atomic_load_explicit(&s->tag, memory_order_relaxed) == orphan_tag &&
            atomic_load(&s->incarnation) == f->incarnation &&
            atomic_compare_exchange_strong_explicit(&s->tag, &t, ORB_SLOT_TAG(ORB_SLOT_HELD, kind, f->node),
                                                    memory_order_acquire, memory_order_relaxed)) {
            *out = i;
            return true;
        }
    }
    for (uint32_t i = 0; i < f->ctr_slot_count; i++) {
        struct orb_ctr_slot *s = &f->ctr_slots[i];
        uint64_t t = ORB_SLOT_TAG(ORB_SLOT_FREE, 0, 0);
        if (!atomic_compare_exchange_strong(&s->tag, &t, ORB_SLOT_TAG(ORB_SLOT_CLAIMING, kind, f->node)))
            continue;
        for (unsigned j = 0; j < ORB_CTR_VALUES; j++)
            atomic_store_explicit(&s->v[j], 0, memory_order_relaxed);
        atomic_store_explicit(&s->incarnation, f->incarnation, memory_order_relaxed);
        /* Release: zeroed values and the life come before readers count the slot. */
        atomic_store_explicit(&s->tag, ORB_SLOT_TAG(ORB_SLOT_HELD, kind, f->node), memory_order_release);
        *out = i;
        return true;
    }
    return false;
}

struct orb_ctr_tls *orb_ctr_claim(struct orb_ctr_ref *r, struct orb_ctr_tls *e)
{
    pthread_mutex_lock(&ctr_mutex);
    pthread_setspecific(thread_key, orb_ctr_tls);   /* non-NULL: thread_gone runs at its exit */
    entry_release(e);
    e->ref = r;
    e->gen = r->gen;
    struct orbit_fleet *f = r->fleet;
    if (!r->off && orb_handle_ours(r->fork_generation) && r->nodeless) {
        e->v = f->ctr_totals[r->kind].overflow;
        e->shared = true;
    } else if (!r->off && orb_handle_ours(r->fork_generation)) {
        uint32_t slot;
        bool got = take_slot(f, r->kind, &slot);
        if (!got) {
            sweep_ended(f);
            got = take_slot(f, r->kind, &slot);
        }
        if (got && owned_add(r, slot)) {
            e->v = f->ctr_slots[slot].v;
            e->slot = slot;
            if (!atomic_load(&r->fast_thread)) {   /* the ref's first thread skips the lookup */
                r->fast_v = e->v;
                atomic_store(&r->fast_thread, &orb_ctr_me);
            }
        } else {
            if (got)
                orphan(r, slot);
            e->v = f->ctr_totals[r->kind].overflow;   /* counted, under no node */
            e->shared = true;
        }
    }
    pthread_mutex_unlock(&ctr_mutex);
    return e;
}

void orb_ctr_note_death(struct orbit_fleet *f, uint64_t ns)
{
    struct orb_ctr_header *h = f->ctr;
    if (!h)
        return;
    unsigned b = 0;
    while (b + 1 < ORB_CTR_RECLAIM_BUCKETS && ns > orb_ctr_reclaim_bounds_ns[b])
        b++;
    atomic_fetch_add_explicit(&h->reclaim_le[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->reclaim_ns_sum, ns, memory_order_relaxed);
}

void orb_ctr_note_leave(struct orbit_fleet *f)
{
    if (f->ctr)
        atomic_fetch_add_explicit(&f->ctr->leaves, 1, memory_order_relaxed);
}
