/* SPDX-License-Identifier: MIT */
/* orbit_id text forms: "kind:node:counter" in decimal, or 0x + hex. */
#include <stdio.h>
#include <string.h>
#include <orbit/fleet.h>
#include "error_internal.h"

int orbit_id_format(orbit_id id, char *buf, size_t len)
{
    char tmp[ORBIT_ID_TEXT_MAX];
    orb_error_clear();
    if (!buf)
        return orb_fail_text(-ORBIT_EMALFORMED, "buf is NULL");
    int n = snprintf(tmp, sizeof tmp, "%u:%u:%llu", (unsigned)orbit_id_kind(id),
                     (unsigned)orbit_id_node(id), (unsigned long long)orbit_id_counter(id));
    if (n < 0 || (size_t)n >= len)
        return orb_fail(-ORBIT_ETOOLARGE, "%s needs %d bytes, len is %zu", tmp, n + 1, len);
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}

/* Reads 1..20 decimal digits up to a non-digit; -1 on none or overflow past max. */
static int parse_decimal(const char **text, uint64_t max, uint64_t *out)
{
    const char *p = *text;
    uint64_t v = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *text = p;
    *out = v;
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int parse_hex(const char *p, orbit_id *out)
{
    uint64_t v = 0;
    size_t n = 0;
    for (; *p; p++, n++) {
        int h = hex_value(*p);
        if (h < 0 || n >= 16)
            return -ORBIT_EMALFORMED;
        v = (v << 4) | (uint64_t)h;
    }
    if (n == 0)
        return -ORBIT_EMALFORMED;
    *out = v;
    return 0;
}

int orbit_id_parse(const char *text, orbit_id *out)
{
    uint64_t kind, node, counter;
    orb_error_clear();
    if (!text || !out)
        return orb_fail_text(-ORBIT_EMALFORMED, "text or out is NULL");
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
        return parse_hex(text + 2, out) < 0 ? orb_fail(-ORBIT_EMALFORMED, "'%.40s' is not 0x and 1 to 16 hex "
                                                       "digits", text) : 0;
    const char *p = text;
    if (parse_decimal(&p, 0xff, &kind) || *p++ != ':' ||
        parse_decimal(&p, 0xffff, &node) || *p++ != ':' ||
        parse_decimal(&p, 0xffffffffffull, &counter) || *p != '\0')
        return orb_fail(-ORBIT_EMALFORMED, "'%.40s' is not an id: kind:node:counter in decimal (kind <= 255, "
                        "node <= 65535, counter < 2^40) or 0x and hex digits", text);
    *out = (kind << 56) | (node << 40) | counter;
    return 0;
}
