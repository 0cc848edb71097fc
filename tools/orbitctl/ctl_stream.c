/* SPDX-License-Identifier: MIT */
/* orbitctl show: the live streams of one stream table (holders, ring fill, flags, who waits). */
#include <inttypes.h>
#include <stdlib.h>
#include <orbit/stream.h>
#include "ctl.h"
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

/* Both rings of a stream; from the listing's counts when they could not be read (-1: stale). */
static int rings_of(struct orbit_streams *s, const struct orbit_stream_info *si, uint32_t capacity,
                    struct orbit_stream_ring r[2])
{
    int rc = orbit_streams_rings(s, si->id, r);
    if (rc == 0)
        return 0;
    for (unsigned k = 0; k < 2; k++)
        r[k] = (struct orbit_stream_ring){ .capacity = capacity, .flags = si->dir[k].flags,
                                           .queued = si->dir[k].queued > capacity ? capacity
                                                                                 : (uint32_t)si->dir[k].queued };
    return rc;
}

static unsigned fill_pct(const struct orbit_stream_ring *r)
{
    return r->capacity ? (unsigned)((uint64_t)r->queued * 100u / r->capacity) : 0;
}

static void text_side(const struct ctl_ctx *c, const struct orbit_stream_info *si, unsigned k)
{
    fprintf(c->out, "      side %c %s", k ? 'b' : 'a', side_state(si->side[k].state));
    if (si->side[k].state != ORBIT_SIDE_FREE) {
        fputs("  ", c->out);
        ctl_text_member(c, si->side[k].node, si->side[k].incarnation);
    }
    fputc('\n', c->out);
}

static void text_ring(const struct ctl_ctx *c, const struct orbit_stream_ring *r, unsigned k)
{
    char f[64];
    fprintf(c->out, "      %s  %" PRIu32 " of %" PRIu32 " bytes queued (%u%%)  %s", k ? "b->a" : "a->b",
            r->queued, r->capacity, fill_pct(r), flag_text(r->flags, f, sizeof f));
    if (r->reader_waits)
        fprintf(c->out, "  reader (side %c) waits for %" PRIu32 " bytes", k ? 'a' : 'b',
                r->reader_need ? r->reader_need : 1);
    if (r->writer_waits)
        fprintf(c->out, "  writer (side %c) waits for %" PRIu32 " free bytes", k ? 'b' : 'a',
                r->writer_need ? r->writer_need : 1);
    fputc('\n', c->out);
}

static void print_text(const struct ctl_ctx *c, struct orbit_streams *s, const struct orbit_stream_spec *spec,
                       uint64_t epoch, const struct orbit_stream_info *si, size_t n, size_t total)
{
    fprintf(c->out, "  lane %u x ring %u bytes (kind %u), epoch %" PRIu64 ", %zu live stream%s\n",
            spec->lane_capacity, spec->buffer_bytes, (unsigned)spec->kind, epoch, total, total == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        char id[ORBIT_ID_TEXT_MAX];
        struct orbit_stream_ring r[2];
        orbit_id_format(si[i].id, id, sizeof id);
        int rc = rings_of(s, &si[i], spec->buffer_bytes, r);
        fprintf(c->out, "    stream %s%s%s\n", id, rc < 0 ? "  rings: " : "", rc < 0 ? orbit_strerror(rc) : "");
        for (unsigned k = 0; k < 2; k++)
            text_side(c, &si[i], k);
        for (unsigned k = 0; k < 2; k++)
            text_ring(c, &r[k], k);
    }
    if (n < total)
        fprintf(c->out, "    ... %zu more\n", total - n);
}

static void json_stream(const struct ctl_ctx *c, struct orbit_streams *s, uint32_t capacity,
                        const struct orbit_stream_info *si)
{
    char id[ORBIT_ID_TEXT_MAX], f[64];
    struct orbit_stream_ring r[2];
    int rc = rings_of(s, si, capacity, r);
    orbit_id_format(si->id, id, sizeof id);
    fputs("{\"id\":", c->out);
    tool_json_str(c->out, id);
    fputs(",\"sides\":[", c->out);
    for (unsigned k = 0; k < 2; k++) {
        fprintf(c->out, "%s{\"side\":\"%c\",\"state\":\"%s\",\"holder\":", k ? "," : "", k ? 'b' : 'a',
                side_state(si->side[k].state));
        if (si->side[k].state == ORBIT_SIDE_FREE)
            fputs("null", c->out);
        else
            ctl_json_member(c, si->side[k].node, si->side[k].incarnation, false);
        fputc('}', c->out);
    }
    fputs("],\"directions\":[", c->out);
    for (unsigned k = 0; k < 2; k++) {
        const char *t = flag_text(r[k].flags, f, sizeof f);
        fprintf(c->out, "%s{\"dir\":\"%s\",\"capacity\":%" PRIu32 ",\"queued\":%" PRIu32 ",\"fill_pct\":%u,\"flags\":",
                k ? "," : "", k ? "b->a" : "a->b", r[k].capacity, r[k].queued, fill_pct(&r[k]));
        tool_json_str(c->out, t[0] == '-' ? "" : t);
        fprintf(c->out, ",\"reader_waits\":%s,\"writer_waits\":%s,\"reader_need\":%" PRIu32 ",\"writer_need\":%"
                        PRIu32 "}", r[k].reader_waits ? "true" : "false", r[k].writer_waits ? "true" : "false",
                r[k].reader_need, r[k].writer_need);
    }
    fputc(']', c->out);
    if (rc < 0) {
        fputs(",\"rings_error\":", c->out);
        tool_json_str(c->out, orbit_strerror(rc));
    }
    fputc('}', c->out);
}

static void print_json(const struct ctl_ctx *c, struct orbit_streams *s, const struct orbit_stream_spec *spec,
                       uint64_t epoch, const struct orbit_stream_info *si, size_t n)
{
    ctl_json_table_head(c, "streams", spec->kind, epoch);
    fprintf(c->out, ",\"lane_capacity\":%u,\"buffer_bytes\":%u,\"streams\":[", spec->lane_capacity,
            spec->buffer_bytes);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', c->out);
        json_stream(c, s, spec->buffer_bytes, &si[i]);
    }
    fputs("]}", c->out);
}

int ctl_section_stream(const struct ctl_ctx *c, uint8_t kind)
{
    struct orbit_streams *s;
    int rc = orbit_streams_open_existing(c->f, kind, &s);
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
    if (c->json)
        print_json(c, s, &spec, orbit_streams_epoch(s), si, n);
    else
        print_text(c, s, &spec, orbit_streams_epoch(s), si, n, total < 0 ? 0 : (size_t)total);
    free(si);
    orbit_streams_close(s);
    return 0;
}

int ctl_show_stream(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out)
{
    return ctl_show_with(ctl_section_stream, f, kind, json, out);
}
