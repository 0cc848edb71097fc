/* SPDX-License-Identifier: MIT */
/* The admission ledger's top floor: the table ops the core calls (death: release.c, account: account.c). */
#include "adm_layout.h"
#include "core/table_ops.h"

/* ---- the admission table ops ------------------------------------------------- */

/* admission.h's node_dead is void (the ABI); the ledger's own is the op (release.c). */
static int ops_node_dead(void *t, uint16_t node, uint64_t inc) { return adm_node_dead(t, node, inc); }
static int ops_reset_all(void *t) { return orbit_admission_reset_all(t); }

static const struct orb_counter_def admission_counters[ADM_CTR_END - ORB_CTR_TABLE_FIRST] = {
    { "claims", "Claims granted." },
    { "deferred_refusals", "Claims refused for now: a domain lacked free units (ORBIT_ADMIT_DEFERRED)." },
    { "skipped_refusals", "Claims refused over a cap (ORBIT_ADMIT_SKIPPED)." },
    { "rejected_refusals", "Claims that can never fit their domains (ORBIT_ADMIT_REJECTED)." },
    { "waits", "Waits for a release (orbit_admission_wait)." },
    { "releases", "Claims released." },
};

static const struct orb_table_ops admission_ops = {
    .kind = &adm_kind, .name = "admission", .layout = ADM_LAYOUT_VERSION,
    .node_dead = ops_node_dead, .reset_all = ops_reset_all, .account = adm_account,
    .counters = admission_counters, .counter_count = ADM_CTR_END - ORB_CTR_TABLE_FIRST,
};
ORB_TABLE_REGISTER(admission_ops);
