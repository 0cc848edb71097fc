/* SPDX-License-Identifier: MIT */
/* orbitctl show: the admission ledger's state, domains and live claims. */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/admission.h>
#include "orbitctl.h"

#define CTL_UNITS_MAX 1024   /* max_domains upper bound */

/* The fleet's claimed nodes, to tell whether a claim's holder still lives. */
struct ctl_nodes { struct orbit_node_info *v; ssize_t n; };

static const char *holder_state(const struct ctl_nodes *nodes, const struct orbit_claim *c)
{
    for (ssize_t i = 0; i < nodes->n; i++)
        if (nodes->v[i].node == c->node && nodes->v[i].incarnation == c->incarnation)
            return nodes->v[i].alive ? "alive" : "dead";
    return "gone";   /* left the fleet, or the node has a new incarnation */
}

static void text_claim(struct orbit_admission *a, const struct ctl_nodes *nodes,
                       const struct orbit_claim_info *ci, FILE *out)
{
    struct orbit_units units[CTL_UNITS_MAX];
    ssize_t n = orbit_admission_claim_units(a, &ci->claim, units, CTL_UNITS_MAX);
    fprintf(out, "    serial %" PRIu64 "  node %u (%s)  incarnation %" PRIu64 "  retained %" PRIu64 "  units",
            ci->claim.serial, ci->claim.node, holder_state(nodes, &ci->claim), ci->claim.incarnation,
            ci->claim.retained_bytes);
    if (n < 0)
        fprintf(out, " (%s)", orbit_strerror((int)n));   /* released since the listing */
    for (ssize_t i = 0; i < n && i < CTL_UNITS_MAX; i++)
        fprintf(out, " %" PRIu32 ":%" PRIu64, units[i].domain, units[i].units);
    fputc('\n', out);
}

static void json_claim(struct orbit_admission *a, const struct ctl_nodes *nodes,
                       const struct orbit_claim_info *ci, FILE *out)
{
    struct orbit_units units[CTL_UNITS_MAX];
    ssize_t n = orbit_admission_claim_units(a, &ci->claim, units, CTL_UNITS_MAX);
    fprintf(out, "{\"serial\":\"%" PRIu64 "\",\"slot\":%" PRIu32 ",\"node\":%u,\"incarnation\":\"%" PRIu64 "\""
                 ",\"holder\":\"%s\",\"retained_bytes\":\"%" PRIu64 "\",\"live\":%s,\"units\":[",
            ci->claim.serial, ci->claim.slot, ci->claim.node, ci->claim.incarnation,
            holder_state(nodes, &ci->claim), ci->claim.retained_bytes, n >= 0 ? "true" : "false");
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

static void print_domains(const struct orbit_domain_info *d, ssize_t n, bool json, FILE *out)
{
    if (json)
        fputs(",\"domains\":[", out);
    else
        fprintf(out, "  domains (%zd):\n", n);
    for (ssize_t i = 0; i < n; i++) {
        if (json)
            fprintf(out, "%s{\"domain\":%" PRIu32 ",\"capacity\":\"%" PRIu64 "\",\"used\":\"%" PRIu64 "\""
                         ",\"free\":\"%" PRIu64 "\",\"availability_epoch\":\"%" PRIu64 "\"}",
                    i ? "," : "", d[i].domain, d[i].capacity, d[i].used,
                    d[i].used <= d[i].capacity ? d[i].capacity - d[i].used : 0, d[i].availability_epoch);
        else
            fprintf(out, "    %-10" PRIu32 " used %" PRIu64 " of %" PRIu64 "  availability epoch %" PRIu64 "\n",
                    d[i].domain, d[i].used, d[i].capacity, d[i].availability_epoch);
    }
    if (json)
        fputc(']', out);
}

/* The header is printed already: a failure here is reported inside the section. */
static void claims_error(int rc, bool json, FILE *out)
{
    if (json) {
        fputs(",\"claims_error\":", out);
        tool_json_str(out, orbit_strerror(rc));
    } else
        fprintf(out, "  claims: (%s)\n", orbit_strerror(rc));
}

static void print_claims(struct orbit_admission *a, const struct ctl_nodes *nodes, bool json, FILE *out)
{
    ssize_t n = orbit_admission_claims(a, NULL, 0);
    struct orbit_claim_info *c = n >= 0 ? calloc((size_t)n + 1, sizeof *c) : NULL;
    ssize_t got = c ? orbit_admission_claims(a, c, (size_t)n) : n < 0 ? n : -ENOMEM;
    if (got < 0) {
        claims_error((int)got, json, out);
        free(c);
        return;
    }
    if (got > n)
        got = n;   /* more were claimed since the count: show the first n */
    if (json)
        fputs(",\"claims\":[", out);
    else
        fprintf(out, "  claims (%zd):\n", got);
    for (ssize_t i = 0; i < got; i++) {
        if (json) {
            if (i)
                fputc(',', out);
            json_claim(a, nodes, &c[i], out);
        } else
            text_claim(a, nodes, &c[i], out);
    }
    if (json)
        fputc(']', out);
    free(c);
}

int ctl_show_admission(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    struct orbit_admission *a;
    int rc = orbit_admission_open_existing(f, kind, &a);
    if (rc < 0)
        return rc;
    struct orbit_admission_info info;
    struct orbit_domain_info domains[CTL_UNITS_MAX];
    ssize_t nd = 0;
    if ((rc = orbit_admission_info(a, &info)) == 0)
        nd = orbit_admission_domains(a, domains, CTL_UNITS_MAX);
    if (rc == 0 && nd < 0)
        rc = (int)nd;
    if (rc == 0) {
        if (json)
            fputc('{', out);
        print_info(&info, json, out);
        print_domains(domains, nd > CTL_UNITS_MAX ? CTL_UNITS_MAX : nd, json, out);
        struct ctl_nodes nodes = { calloc(ORBIT_FLEET_CAPACITY_MAX, sizeof(struct orbit_node_info)), 0 };
        nodes.n = nodes.v ? orbit_fleet_nodes(f, nodes.v, ORBIT_FLEET_CAPACITY_MAX) : 0;
        if (nodes.n < 0 || nodes.n > ORBIT_FLEET_CAPACITY_MAX)
            nodes.n = nodes.n < 0 ? 0 : ORBIT_FLEET_CAPACITY_MAX;
        print_claims(a, &nodes, json, out);
        free(nodes.v);
        if (json)
            fputc('}', out);
    }
    orbit_admission_close(a);
    return rc;
}
