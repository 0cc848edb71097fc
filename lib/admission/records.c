/* SPDX-License-Identifier: MIT */
/* The claim records' free lists: a node's own, the spare list, and their rebuild by repair. */
#include "adm_layout.h"

/* The slow part of a claim's record: its node's list is empty. */
uint32_t adm_take_free(struct orbit_admission *a)
{
    uint32_t cap = a->geo.fleet_capacity, me = a->node < cap ? a->node : 0;
    uint32_t s = adm_list_pop(a, &a->lanes[me].free_head);
    if (s != ADM_NO_SLOT)
        return s;
    if ((s = adm_list_pop(a, &a->ledger->spare_head)) != ADM_NO_SLOT)
        return s;
    /* Every record not live sits on some node's list: take one of the next node's that has one. */
    for (uint32_t i = 1; i < cap; i++) {
        uint32_t n = me + i < cap ? me + i : me + i - cap;
        if ((s = adm_list_pop(a, &a->lanes[n].free_head)) != ADM_NO_SLOT)
            return s;
    }
    return ADM_NO_SLOT;
}

void adm_lists_rebuild(struct orbit_admission *a)
{
    for (uint32_t n = 0; n < a->geo.fleet_capacity; n++)
        a->lanes[n].free_head = ADM_NO_SLOT;
    a->ledger->spare_head = ADM_NO_SLOT;
    /* From the top down, so the spare list hands out the lowest slots first. */
    for (uint32_t s = a->geo.max_claims; s-- > 0;) {
        struct adm_record *r = adm_record(a, s);
        if (atomic_load_explicit(&r->state, memory_order_relaxed) == ADM_REC_LIVE)
            continue;
        atomic_store_explicit(&r->state, ADM_REC_FREE, memory_order_relaxed);
        adm_list_push(a, &a->ledger->spare_head, s);
    }
}
