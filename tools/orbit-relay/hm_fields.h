/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: the field names the head scanner (parse.c) and the rewrite
 * (rewrite.c) act on, told apart by length and a case-folded compare, and
 * the notes the scanner takes of them for the rewrite (struct hm_plan).
 */
#ifndef ORBIT_RELAY_HM_FIELDS_H
#define ORBIT_RELAY_HM_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "httpmsg.h"

/* A field's kind, by its name. */
enum hm_field {
    HF_OTHER,
    HF_HOST,
    HF_CONTENT_LENGTH,
    HF_TRANSFER_ENCODING,
    HF_TRANSFER_ENCODING_MORE,  /* "transfer-encoding" and more: libhttp-parser notes a Transfer-Encoding */
    HF_EXPECT,
    HF_CONNECTION,
    HF_PROXY_CONNECTION,        /* libhttp-parser reads it as Connection */
    HF_PROXY,                   /* any other proxy-* */
    HF_KEEP_ALIVE,
    HF_TE,
    HF_UPGRADE,
    HF_TRAILER,
    HF_CLOSE,                   /* a field named "close": Connection: close names it */
};

static inline uint64_t hf_load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t hf_load4(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint16_t hf_load2(const char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/*
 * s equals lit (n bytes of lower-case letters, digits and '-') in any ASCII
 * case. Setting bit 5 folds A-Z onto a-z; the only other bytes it folds onto
 * such a lit are control bytes, which no checked name or value holds. Whole
 * words at a time (overlapping at the end): n and lit are constants where
 * this is inlined, so lit's words are immediates.
 */
static inline bool hf_is(const char *s, size_t n, const char *lit)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if ((hf_load8(s + i) | 0x2020202020202020u) != hf_load8(lit + i))
                return false;
        return (hf_load8(s + n - 8) | 0x2020202020202020u) == hf_load8(lit + n - 8);
    }
    if (n >= 4)
        return (hf_load4(s) | 0x20202020u) == hf_load4(lit) &&
               (hf_load4(s + n - 4) | 0x20202020u) == hf_load4(lit + n - 4);
    if (n >= 2)
        return (hf_load2(s) | 0x2020u) == hf_load2(lit) && (s[n - 1] | 0x20) == lit[n - 1];
    return n == 0 || (s[0] | 0x20) == lit[0];
}

/* The kind of the field named by the n bytes at name (tchars, or a Connection token). */
static inline enum hm_field hf_kind(const char *name, size_t n)
{
    switch (n) {
    case 2:
        return hf_is(name, 2, "te") ? HF_TE : HF_OTHER;
    case 4:
        return hf_is(name, 4, "host") ? HF_HOST : HF_OTHER;
    case 5:
        return hf_is(name, 5, "close") ? HF_CLOSE : HF_OTHER;
    case 6:
        if (hf_is(name, 6, "expect"))
            return HF_EXPECT;
        break;
    case 7:
        if (hf_is(name, 7, "upgrade"))
            return HF_UPGRADE;
        if (hf_is(name, 7, "trailer"))
            return HF_TRAILER;
        break;
    case 10:
        if (hf_is(name, 10, "connection"))
            return HF_CONNECTION;
        if (hf_is(name, 10, "keep-alive"))
            return HF_KEEP_ALIVE;
        break;
    case 14:
        if (hf_is(name, 14, "content-length"))
            return HF_CONTENT_LENGTH;
        break;
    case 16:
        if (hf_is(name, 16, "proxy-connection"))
            return HF_PROXY_CONNECTION;
        break;
    case 17:
        if (hf_is(name, 17, "transfer-encoding"))
            return HF_TRANSFER_ENCODING;
        break;
    default:
        if (n < 6)
            return HF_OTHER;
        break;
    }
    if ((name[0] | 0x20) == 'p' && hf_is(name, 6, "proxy-"))
        return HF_PROXY;
    if (n > 17 && (name[0] | 0x20) == 't' && hf_is(name, 17, "transfer-encoding"))
        return HF_TRANSFER_ENCODING_MORE;
    return HF_OTHER;
}

/* Field lines a rewrite may drop: hop-by-hop ones, Expect, the framing
 * fields, and ones Connection may name by a known name. */
static inline bool hf_noted(enum hm_field kind)
{
    return kind != HF_OTHER && kind != HF_HOST && kind != HF_TRANSFER_ENCODING_MORE;
}

/* Notes the field line [off, off + len) of the head (CRLF included). */
static inline void hm_plan_note(struct hm_plan *plan, enum hm_field kind, size_t off, size_t len)
{
    if (plan->n_lines == HM_PLAN_LINES) {
        plan->walk = true;
        return;
    }
    plan->line[plan->n_lines++] = (struct hm_plan_line){ (uint32_t)off, (uint32_t)len, (uint8_t)kind };
}

/* Notes the fields a Connection value (v..eol, after the colon) names; *n_named counts its tokens so far (rewrite.c). */
void hm_plan_connection(struct hm_plan *plan, unsigned *n_named, const char *v, const char *eol);

#endif
