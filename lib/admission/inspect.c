/* SPDX-License-Identifier: MIT */
/* Whether a claimer waits for a release: a snapshot for tools. */
#include "adm_layout.h"

int orbit_admission_waiting(struct orbit_admission *a, struct orbit_admission_waiting *out)
{
    int rc = adm_enter(a, __func__);
    if (rc < 0)
        return rc;
    if (!a || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__, a ? "out" : "the admission handle");
    struct adm_ledger *l = a->ledger;
    /* The wanted epoch first: a waiter raises it before it parks, a release passes it after. */
    uint64_t wanted = atomic_load_explicit(&l->epoch_wanted, memory_order_acquire);
    *out = (struct orbit_admission_waiting){
        .parked = atomic_load_explicit(&l->change.parked, memory_order_acquire) != 0,
        .epoch_wanted = wanted,
        .change_epoch = atomic_load_explicit(&l->change_epoch, memory_order_acquire) };
    return 0;
}
