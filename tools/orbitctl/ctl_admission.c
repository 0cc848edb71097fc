/* SPDX-License-Identifier: MIT */
/* orbitctl show: the admission ledger's state, domains and live claims. */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/admission.h>
#include "ctl.h"
#include "tool.h"

#define CTL_UNITS_MAX 1024   /* max_domains upper bound */

static void text_claim(const struct ctl_ctx *c, struct orbit_admission *a, const struct orbit_claim_info *ci)
{
    FILE *out = c->out;
    struct orbit_units units[CTL_UNITS_MAX];
    ssize_t n = orbit_admission_claim_units(a, &ci->claim, units, CTL_UNITS_MAX);
    fprintf(out, "    serial %" PRIu64 "  held by ", ci->claim.serial);
    ctl_text_member(c, ci->claim.node, ci->claim.incarnation);
    fprintf(out, "  retained %" PRIu64 " bytes  units", ci->claim.retained_bytes);
    if (n < 0)
        fprintf(out, " (%s)", orbit_strerror((int)n));   /* released since the listing */
    for (ssize_t i = 0; i < n && i < CTL_UNITS_MAX; i++)
        fprintf(out, " %" PRIu32 ":%" PRIu64, units[i].domain, units[i].units);
    fputc('\n', out);
}

static void json_claim(const struct ctl_ctx *c, struct orbit_admission *a, const struct orbit_claim_info *ci)
{
    FILE *out = c->out;
    struct orbit_units units[CTL_UNITS_MAX];
    ssize_t n = orbit_admission_claim_units(a, &ci->claim, units, CTL_UNITS_MAX);
    fprintf(out, "{\"serial\":\"%" PRIu64 "\",\"slot\":%" PRIu32 ",\"holder\":", ci->claim.serial, ci->claim.slot);
    ctl_json_member(c, ci->claim.node, ci->claim.incarnation, false);
    fprintf(out, ",\"retained_bytes\":\"%" PRIu64 "\",\"live\":%s,\"units\":[", ci->claim.retained_bytes,
            n >= 0 ? "true" : "false");
    for (ssize_t i = 0; i < n && i < CTL_UNITS_MAX; i++)
        fprintf(out, "%s{\"domain\":%" PRIu32 ",\"units\":\"%" PRIu64 "\"}", i ? "," : "",
                units[i].domain, units[i].units);
    fputs("]}", out);
}

static void print_info(const struct orbit_admission_info *in, bool json, FILE *out)
{
    if (json) {
        fprintf(out, "\"max_domains\":%" PRIu32 ",\"max_claims\":%" PRIu32 ",\"retained_max_bytes\":\"%" PRIu64 "\""
                     ",\"retained_bytes\":\"%" PRIu64 "\",\"live_claims\":%" PRIu32 ",\"next_serial\":\"%" PRIu64 "\""
                     ",\"change_epoch\":\"%" PRIu64 "\",\"repairs\":\"%" PRIu64 "\",\"shutdown\":%s,\"poisoned\":%s,"
                     "\"poison_reason\":",
                in->spec.max_domains, in->spec.max_claims, in->spec.retained_max_bytes, in->retained_bytes,
                in->live_claims, in->next_serial, in->change_epoch, in->repairs,
                in->shutdown ? "true" : "false", in->poisoned ? "true" : "false");
        tool_json_str(out, in->poison_reason);
        return;
    }
    fprintf(out, "  ledger: %s%s, change epoch %" PRIu64 ", %" PRIu32 "/%" PRIu32 " claims live, next serial %"
                 PRIu64 ", %" PRIu64 " repairs\n",
            in->poisoned ? "POISONED: " : in->shutdown ? "shut down" : "open",
            in->poisoned ? in->poison_reason : "", in->change_epoch, in->live_claims, in->spec.max_claims,
            in->next_serial, in->repairs);
    if (in->spec.retained_max_bytes)
        fprintf(out, "  retained: %" PRIu64 " of %" PRIu64 " bytes\n", in->retained_bytes,
                in->spec.retained_max_bytes);
    else
        fprintf(out, "  retained: disabled\n");
}

/* Whether a claimer waits for a release (waiters wait for any release, not for a domain). */
static void print_waiting(const struct ctl_ctx *c, struct orbit_admission *a)
{
    struct orbit_admission_waiting w;
    int rc = orbit_admission_waiting(a, &w);
    bool waits = rc == 0 && w.parked && w.epoch_wanted > w.change_epoch;
    if (c->json) {
        fputs(",\"waiting\":", c->out);
        if (rc < 0)
            fputs("null", c->out);
        else
            fprintf(c->out, "{\"waits\":%s,\"parked\":%s,\"epoch_wanted\":\"%" PRIu64 "\"}",
                    waits ? "true" : "false", w.parked ? "true" : "false", w.epoch_wanted);
    } else if (rc < 0) {
        fprintf(c->out, "  waiting: (%s)\n", orbit_strerror(rc));
    } else if (waits) {
        fprintf(c->out, "  waiting: a claimer waits for a release (change epoch past %" PRIu64 ")\n",
                w.epoch_wanted - 1);
    } else {
        fputs("  waiting: none\n", c->out);
    }
}

/* Live claims with units in each domain, by domain index (a racy count, like the listing). */
static void count_claims(struct orbit_admission *a, const struct orbit_claim_info *ci, ssize_t n,
                         const struct orbit_domain_info *d, ssize_t nd, uint32_t *per)
{
    struct orbit_units units[CTL_UNITS_MAX];
    for (ssize_t i = 0; i < n; i++) {
        ssize_t nu = orbit_admission_claim_units(a, &ci[i].claim, units, CTL_UNITS_MAX);
        for (ssize_t u = 0; u < nu && u < CTL_UNITS_MAX; u++)
            for (ssize_t k = 0; k < nd; k++)
                if (d[k].domain == units[u].domain && units[u].units)
                    per[k]++;
    }
}

static void print_domains(const struct ctl_ctx *c, const struct orbit_domain_info *d, ssize_t n, const uint32_t *per)
{
    FILE *out = c->out;
    if (c->json)
        fputs(",\"domains\":[", out);
    else
        fprintf(out, "  domains (%zd):\n", n);
    for (ssize_t i = 0; i < n; i++) {
        uint64_t free_units = d[i].used <= d[i].capacity ? d[i].capacity - d[i].used : 0;
        if (c->json)
            fprintf(out, "%s{\"domain\":%" PRIu32 ",\"capacity\":\"%" PRIu64 "\",\"used\":\"%" PRIu64 "\""
                         ",\"free\":\"%" PRIu64 "\",\"claims\":%" PRIu32 ",\"availability_epoch\":\"%" PRIu64 "\"}",
                    i ? "," : "", d[i].domain, d[i].capacity, d[i].used, free_units, per[i],
                    d[i].availability_epoch);
        else
            fprintf(out, "    domain %-6" PRIu32 " used %" PRIu64 " of %" PRIu64 " (%u%%), %" PRIu32
                         " claim%s  availability epoch %" PRIu64 "\n",
                    d[i].domain, d[i].used, d[i].capacity,
                    d[i].capacity ? (unsigned)(d[i].used * 100u / d[i].capacity) : 0u, per[i],
                    per[i] == 1 ? "" : "s", d[i].availability_epoch);
    }
    if (c->json)
        fputc(']', out);
}

/* The header is printed already: a failure here is reported inside the section. */
static void claims_error(const struct ctl_ctx *c, int rc)
{
    if (c->json) {
        fputs(",\"domains\":[],\"claims\":[],\"claims_error\":", c->out);
        tool_json_str(c->out, orbit_strerror(rc));
    } else
        fprintf(c->out, "  claims: (%s)\n", orbit_strerror(rc));
}

static void print_claims(const struct ctl_ctx *c, struct orbit_admission *a, const struct orbit_domain_info *d,
                         ssize_t nd)
{
    ssize_t n = orbit_admission_claims(a, NULL, 0);
    struct orbit_claim_info *ci = n >= 0 ? calloc((size_t)n + 1, sizeof *ci) : NULL;
    uint32_t *per = calloc((size_t)nd + 1, sizeof *per);
    ssize_t got = ci && per ? orbit_admission_claims(a, ci, (size_t)n) : n < 0 ? n : -ENOMEM;
    if (got < 0) {
        claims_error(c, (int)got);
        free(ci);
        free(per);
        return;
    }
    if (got > n)
        got = n;   /* more were claimed since the count: show the first n */
    count_claims(a, ci, got, d, nd, per);
    print_domains(c, d, nd, per);
    if (c->json)
        fputs(",\"claims\":[", c->out);
    else
        fprintf(c->out, "  claims (%zd):\n", got);
    for (ssize_t i = 0; i < got; i++) {
        if (c->json) {
            if (i)
                fputc(',', c->out);
            json_claim(c, a, &ci[i]);
        } else
            text_claim(c, a, &ci[i]);
    }
    if (c->json)
        fputc(']', c->out);
    free(ci);
    free(per);
}

int ctl_section_admission(const struct ctl_ctx *c, uint8_t kind)
{
    struct orbit_admission *a;
    int rc = orbit_admission_open_existing(c->f, kind, &a);
    if (rc < 0)
        return rc;
    struct orbit_admission_info info;
    struct orbit_domain_info *domains = calloc(CTL_UNITS_MAX, sizeof *domains);
    ssize_t nd = 0;
    if (!domains)
        rc = -ENOMEM;
    else if ((rc = orbit_admission_info(a, &info)) == 0)
        nd = orbit_admission_domains(a, domains, CTL_UNITS_MAX);
    if (rc == 0 && nd < 0)
        rc = (int)nd;
    if (rc == 0) {
        if (c->json) {
            ctl_json_table_head(c, "admission", kind, ctl_table_epoch(c, kind));
            fputc(',', c->out);
        }
        print_info(&info, c->json, c->out);
        print_waiting(c, a);
        print_claims(c, a, domains, nd > CTL_UNITS_MAX ? CTL_UNITS_MAX : nd);
        if (c->json)
            fputc('}', c->out);
    }
    free(domains);
    orbit_admission_close(a);
    return rc;
}

int ctl_show_admission(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    return ctl_show_with(ctl_section_admission, f, kind, json, out);
}
