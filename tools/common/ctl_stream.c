/* SPDX-License-Identifier: MIT */
/* orbitctl show: the live streams of one stream table (sides, holders, bytes queued, flags). */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/stream.h>
#include "tool.h"

static const char *side_state(enum orbit_side_state s)
{
    switch (s) {
    case ORBIT_SIDE_FREE:     return "free";
    case ORBIT_SIDE_CLAIMED:  return "claimed";
    case ORBIT_SIDE_RELEASED: return "released";
    case ORBIT_SIDE_DEAD:     return "dead";
    }
    return "?";
}

/* "FIN|RESET" style; "-" when none. */
static const char *flag_text(uint32_t f, char *buf, size_t len)
{
    static const char *names[] = { "FIN", "RESET", "READER_GONE", "CLOSE_WATCH" };
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < 4; i++)
        if (f & (1u << i))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", names[i]);
    return n ? buf : "-";
}

static void print_side_text(FILE *out, const struct orbit_stream_info *si, unsigned k)
{
    if (si->side[k].state == ORBIT_SIDE_FREE)
        fprintf(out, " %c=free", k ? 'b' : 'a');
    else
        fprintf(out, " %c=%s(node %u inc %" PRIu64 ")", k ? 'b' : 'a', side_state(si->side[k].state),
                (unsigned)si->side[k].node, si->side[k].incarnation);
}

static void print_text(FILE *out, const struct orbit_stream_spec *spec, uint64_t epoch,
                       const struct orbit_stream_info *si, size_t n, size_t total)
{
    fprintf(out, "  lane %u x ring %u bytes (kind %u), epoch %" PRIu64 ", %zu live stream%s\n",
            spec->lane_capacity, spec->buffer_bytes, (unsigned)spec->kind, epoch, total, total == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        char id[ORBIT_ID_TEXT_MAX], f0[64], f1[64];
        orbit_id_format(si[i].id, id, sizeof id);
        fprintf(out, "    %-18s", id);
        print_side_text(out, &si[i], 0);
        print_side_text(out, &si[i], 1);
        fprintf(out, "  a->b %" PRIu64 "B %s  b->a %" PRIu64 "B %s\n", si[i].dir[0].queued,
                flag_text(si[i].dir[0].flags, f0, sizeof f0), si[i].dir[1].queued,
                flag_text(si[i].dir[1].flags, f1, sizeof f1));
    }
    if (n < total)
        fprintf(out, "    ... %zu more\n", total - n);
}

static void print_json(FILE *out, const struct orbit_stream_spec *spec, uint64_t epoch,
                       const struct orbit_stream_info *si, size_t n)
{
    fprintf(out, "{\"type\":\"streams\",\"kind\":%u,\"lane_capacity\":%u,\"buffer_bytes\":%u,"
            "\"epoch\":\"%" PRIu64 "\",\"streams\":[", (unsigned)spec->kind, spec->lane_capacity,
            spec->buffer_bytes, epoch);
    for (size_t i = 0; i < n; i++) {
        char id[ORBIT_ID_TEXT_MAX], f[64];
        orbit_id_format(si[i].id, id, sizeof id);
        fprintf(out, "%s{\"id\":", i ? "," : "");
        tool_json_str(out, id);
        fprintf(out, ",\"sides\":[");
        for (unsigned k = 0; k < 2; k++)
            fprintf(out, "%s{\"side\":\"%c\",\"state\":\"%s\",\"node\":%u,\"incarnation\":\"%" PRIu64 "\"}",
                    k ? "," : "", k ? 'b' : 'a', side_state(si[i].side[k].state),
                    (unsigned)si[i].side[k].node, si[i].side[k].incarnation);
        fprintf(out, "],\"directions\":[");
        for (unsigned k = 0; k < 2; k++) {
            fprintf(out, "%s{\"dir\":\"%s\",\"queued\":\"%" PRIu64 "\",\"flags\":", k ? "," : "",
                    k ? "b->a" : "a->b", si[i].dir[k].queued);
            const char *t = flag_text(si[i].dir[k].flags, f, sizeof f);
            tool_json_str(out, t[0] == '-' ? "" : t);
            fputc('}', out);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "]}");
}

int ctl_show_stream(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    struct orbit_streams *s;
    int rc = orbit_streams_open_existing(f, kind, &s);
    if (rc < 0)
        return rc;
    struct orbit_stream_spec spec;
    orbit_streams_spec(s, &spec);
    ssize_t total = orbit_streams_list(s, NULL, 0);
    size_t cap = total > 0 ? (size_t)total + 16 : 1;   /* room for streams that appear meanwhile */
    struct orbit_stream_info *si = calloc(cap, sizeof *si);
    if (total < 0 || !si) {
        free(si);
        orbit_streams_close(s);
        return total < 0 ? (int)total : -ENOMEM;
    }
    total = orbit_streams_list(s, si, cap);
    size_t n = total < 0 ? 0 : (size_t)total < cap ? (size_t)total : cap;
    if (json)
        print_json(out, &spec, orbit_streams_epoch(s), si, n);
    else
        print_text(out, &spec, orbit_streams_epoch(s), si, n, total < 0 ? 0 : (size_t)total);
    free(si);
    orbit_streams_close(s);
    return 0;
}
