/* SPDX-License-Identifier: MIT */
/* What one life holds in an admission ledger: its live claims and their units. */
#include <stdlib.h>
#include <orbit/inspect.h>
#include "adm_layout.h"

void adm_account(void *table, uint16_t node, uint64_t inc, struct orbit_reclaim *out)
{
    struct orbit_admission *adm = table;
    ssize_t n = orbit_admission_claims(adm, NULL, 0);
    struct orbit_claim_info *v = n > 0 ? calloc((size_t)n, sizeof *v) : NULL;
    ssize_t got = v ? orbit_admission_claims(adm, v, (size_t)n) : 0;
    for (ssize_t i = 0; i < got && i < n; i++) {
        if (v[i].claim.node != node || v[i].claim.incarnation != inc)
            continue;
        out->admission_claims++;
        struct orbit_units u[64];
        ssize_t nu = orbit_admission_claim_units(adm, &v[i].claim, u, 64);
        for (ssize_t j = 0; j < nu && j < 64; j++)
            out->admission_units += u[j].units;
    }
    free(v);
}
