/* SPDX-License-Identifier: MIT */
/* Shared by the tools: the JSON string printer, and the pool and stream sections
 * that orbitctl show and orbit-relay --stats print (ctl_pool.c, ctl_stream.c). */
#ifndef ORBIT_TOOL_H
#define ORBIT_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <orbit/fleet.h>

/*
 * A table's show section: one function per table type. Each prints its
 * section for the segment of that kind: human text, or with json a single
 * JSON object (no trailing newline) that the caller embeds. Returns 0 or a
 * negative code. orbitctl.h declares the sections only orbitctl prints.
 */
int ctl_show_pool(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);
int ctl_show_stream(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);

/* Print a JSON string literal (quoted, escaped). */
static inline void tool_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

#endif
