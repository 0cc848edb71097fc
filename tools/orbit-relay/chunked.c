/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: a chunked body's lines held to RFC 9112 7.1, byte by byte,
 * before libhttp-parser reads them (framing.c). libhttp-parser, as Debian
 * builds it, is lenient exactly where request smuggling lives: it skips
 * any byte but CR in a chunk extension (a bare LF included), takes any
 * byte after a CR for its LF and any two bytes for the CRLF after chunk
 * data, and reads trailer lines ended by a bare LF. A front proxy that
 * reads those bytes the RFC's way sees other requests than the relay
 * would (TERM.EXT, EXT.TERM, TERM.SPILL, SPILL.TERM).
 *
 *   chunked-body = *chunk last-chunk trailer-section CRLF
 *   chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
 *   chunk-size   = 1*HEXDIG
 *   last-chunk   = 1*("0") [ chunk-ext ] CRLF
 *   chunk-ext    = *( ";" token [ "=" ( token / quoted-string ) ] )
 *   trailer-section = *( field-name ":" field-value CRLF )
 *
 * The RFC lets BWS stand around an extension's ";" and "="; no client
 * sends it, and whitespace in a size line is what parsers disagree on
 * ("5 ", " 5", "5 ;x"), so none is taken. A field value is what a head's
 * is (hm_bytes.h); a trailer line that begins with whitespace (obs-fold)
 * is refused, as in a head.
 */
#include "hm_bytes.h"
#include "httpmsg.h"

enum {
    CK_SIZE_START,      /* a chunk's first size digit */
    CK_SIZE,            /* more digits, ";" or CR */
    CK_EXT_NAME_START,  /* after ";" */
    CK_EXT_NAME,
    CK_EXT_VALUE_START, /* after "=" */
    CK_EXT_TOKEN,
    CK_EXT_QUOTED,
    CK_EXT_QUOTED_PAIR, /* after a backslash in a quoted string */
    CK_EXT_END,         /* after a quoted string's closing quote */
    CK_SIZE_LF,         /* the size line's CR was read */
    CK_DATA,
    CK_DATA_CR,
    CK_DATA_LF,
    CK_TRAILER_START,   /* a trailer line, or the body's last CRLF */
    CK_TRAILER_NAME,
    CK_TRAILER_VALUE,
    CK_TRAILER_LF,
    CK_LAST_LF,
    CK_DONE,
    CK_BAD,             /* refused: every later byte is too */
};

void hm_chunk_check_init(struct hm_chunk_check *k)
{
    *k = (struct hm_chunk_check){ .state = CK_SIZE_START };
}

static int unhex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* qdtext (RFC 9110 5.6.4): HTAB, SP, VCHAR but '"' and '\', obs-text. */
static bool is_qdtext(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f);
}

/* What ends a size line's token or extension: ";" begins another extension, CR the line's end. */
static int ext_next(unsigned char c)
{
    return c == ';' ? CK_EXT_NAME_START : c == '\r' ? CK_SIZE_LF : -1;
}

/* The state after c in a size line, from state s (CK_SIZE .. CK_SIZE_LF); -1: c cannot be there. */
static int size_line_step(struct hm_chunk_check *k, int s, unsigned char c)
{
    int d;
    switch (s) {
    case CK_SIZE_START:
        if ((d = unhex(c)) < 0)
            return -1;   /* SP, HTAB, "-", "+", a CR or LF: no size */
        k->left = (uint64_t)d;
        return CK_SIZE;
    case CK_SIZE:
        if ((d = unhex(c)) < 0)
            return ext_next(c);
        if (k->left > (HM_CHUNK_SIZE_MAX - (uint64_t)d) / 16)
            return -1;
        k->left = k->left * 16 + (uint64_t)d;
        return CK_SIZE;
    case CK_EXT_NAME_START:
        return hb_is_tchar(c) ? CK_EXT_NAME : -1;
    case CK_EXT_NAME:
        return hb_is_tchar(c) ? CK_EXT_NAME : c == '=' ? CK_EXT_VALUE_START : ext_next(c);
    case CK_EXT_VALUE_START:
        return hb_is_tchar(c) ? CK_EXT_TOKEN : c == '"' ? CK_EXT_QUOTED : -1;
    case CK_EXT_TOKEN:
        return hb_is_tchar(c) ? CK_EXT_TOKEN : ext_next(c);
    case CK_EXT_QUOTED:
        return is_qdtext(c) ? CK_EXT_QUOTED : c == '"' ? CK_EXT_END : c == '\\' ? CK_EXT_QUOTED_PAIR : -1;
    case CK_EXT_QUOTED_PAIR:
        return c == '\t' || (c >= 0x20 && c != 0x7f) ? CK_EXT_QUOTED : -1;
    case CK_EXT_END:
        return ext_next(c);
    case CK_SIZE_LF:
        if (c != '\n')
            return -1;
        return k->left ? CK_DATA : CK_TRAILER_START;
    default:
        return -1;
    }
}

/* The state after c in the trailer section, from state s (CK_TRAILER_START .. CK_LAST_LF). */
static int trailer_step(int s, unsigned char c)
{
    switch (s) {
    case CK_TRAILER_START:   /* whitespace here is obs-fold, or a name that begins with it */
        return c == '\r' ? CK_LAST_LF : hb_is_tchar(c) ? CK_TRAILER_NAME : -1;
    case CK_TRAILER_NAME:
        return hb_is_tchar(c) ? CK_TRAILER_NAME : c == ':' ? CK_TRAILER_VALUE : -1;
    case CK_TRAILER_VALUE:
        return hb_is_value(c) ? CK_TRAILER_VALUE : c == '\r' ? CK_TRAILER_LF : -1;
    case CK_TRAILER_LF:
        return c == '\n' ? CK_TRAILER_START : -1;
    case CK_LAST_LF:
        return c == '\n' ? CK_DONE : -1;
    default:
        return -1;
    }
}

ssize_t hm_chunk_check(struct hm_chunk_check *k, const char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)buf, *end = p + len;
    int s = k->state;
    if (s == CK_BAD)
        return -1;
    while (p < end && s != CK_DONE) {
        if (s == CK_DATA) {
            size_t take = (size_t)(end - p) < k->left ? (size_t)(end - p) : (size_t)k->left;
            p += take;
            k->left -= take;
            if (k->left == 0)
                s = CK_DATA_CR;
            continue;
        }
        unsigned char c = *p++;
        if (s == CK_DATA_CR || s == CK_DATA_LF) {   /* exactly CRLF after the data */
            if (c != (s == CK_DATA_CR ? '\r' : '\n')) {
                k->state = CK_BAD;
                return -1;
            }
            s = s == CK_DATA_CR ? CK_DATA_LF : CK_SIZE_START;
            k->line = 0;
            continue;
        }
        if (s >= CK_TRAILER_START) {
            s = ++k->line > HM_TRAILERS_MAX ? -1 : trailer_step(s, c);
        } else {
            s = ++k->line > HM_CHUNK_LINE_MAX ? -1 : size_line_step(k, s, c);
            if (s == CK_TRAILER_START)
                k->line = 0;   /* the trailer section's bytes are counted from here */
        }
        if (s < 0) {
            k->state = CK_BAD;
            return -1;
        }
    }
    k->state = (uint8_t)s;
    return (ssize_t)(p - (const unsigned char *)buf);
}

bool hm_chunk_check_done(const struct hm_chunk_check *k)
{
    return k->state == CK_DONE;
}
