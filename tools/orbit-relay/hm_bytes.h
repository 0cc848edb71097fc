/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: runs of head bytes, 16 at a time where SSE2 is there (every
 * x86-64): field values and request targets are most of a head's bytes, and
 * a byte at a time is most of the time spent reading one. Each finder takes
 * base, where the buffer begins: fewer than 16 bytes before end are read as
 * the last 16 of the buffer, the ones before p masked off, when it has 16.
 */
#ifndef ORBIT_RELAY_HM_BYTES_H
#define ORBIT_RELAY_HM_BYTES_H

#include <stdbool.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define HB_TCHAR(c)                                                                                     \
    (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || ((c) >= '0' && (c) <= '9') ||        \
     (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' || (c) == '&' || (c) == '\'' || (c) == '*' || \
     (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' ||  \
     (c) == '~')
#define HB_TCHAR_ROW(r)                                                                                 \
    HB_TCHAR(r), HB_TCHAR(r + 1), HB_TCHAR(r + 2), HB_TCHAR(r + 3), HB_TCHAR(r + 4), HB_TCHAR(r + 5),   \
    HB_TCHAR(r + 6), HB_TCHAR(r + 7), HB_TCHAR(r + 8), HB_TCHAR(r + 9), HB_TCHAR(r + 10),             \
    HB_TCHAR(r + 11), HB_TCHAR(r + 12), HB_TCHAR(r + 13), HB_TCHAR(r + 14), HB_TCHAR(r + 15)

/* A token's bytes (RFC 9110 5.6.2): one lookup per byte of a method, a field name, a chunk extension. */
static const bool hb_tchars[256] = {
    HB_TCHAR_ROW(0x00), HB_TCHAR_ROW(0x10), HB_TCHAR_ROW(0x20), HB_TCHAR_ROW(0x30),
    HB_TCHAR_ROW(0x40), HB_TCHAR_ROW(0x50), HB_TCHAR_ROW(0x60), HB_TCHAR_ROW(0x70),
    HB_TCHAR_ROW(0x80), HB_TCHAR_ROW(0x90), HB_TCHAR_ROW(0xa0), HB_TCHAR_ROW(0xb0),
    HB_TCHAR_ROW(0xc0), HB_TCHAR_ROW(0xd0), HB_TCHAR_ROW(0xe0), HB_TCHAR_ROW(0xf0),
};

static inline bool hb_is_tchar(unsigned char c)
{
    return hb_tchars[c];
}

/* VCHAR, obs-text, SP and HTAB: what a field value holds. */
static inline bool hb_is_value(unsigned char c)
{
    return c >= 0x20 ? c != 0x7f : c == '\t';
}

/* What a request target holds: no whitespace, no control byte. */
static inline bool hb_is_target(unsigned char c)
{
    return c > 0x20 && c != 0x7f;
}

#ifdef __SSE2__
/* Bit i: byte i of v is <= max (unsigned). */
static inline unsigned hb_at_most(__m128i v, unsigned char max)
{
    __m128i m = _mm_set1_epi8((char)max);
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(v, m), v));
}

static inline unsigned hb_equal(__m128i v, char c)
{
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c)));
}

static inline __m128i hb_load(const char *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* The position of the first set bit of stop, bit 0 at p, or end when none. */
static inline const char *hb_first(const char *p, const char *end, unsigned stop)
{
    return stop ? p + __builtin_ctz(stop) : end;
}

/*
 * Runs a finder's test (a macro of a vector giving a bit mask) over p..end:
 * whole vectors, then the rest as the buffer's last vector when it has one.
 */
#define HB_SCAN(base, p, end, test)                                                                 \
    do {                                                                                            \
        for (; (end) - (p) >= 16; (p) += 16) {                                                      \
            unsigned stop_ = test(hb_load(p));                                                      \
            if (stop_)                                                                              \
                return (p) + __builtin_ctz(stop_);                                                  \
        }                                                                                           \
        if ((p) < (end) && (end) - (base) >= 16)                                                    \
            return hb_first(p, end, test(hb_load((end) - 16)) >> (16 - ((end) - (p))));            \
    } while (0)

#define HB_NOT_VALUE(v) ((hb_at_most(v, 0x1f) & ~hb_equal(v, '\t')) | hb_equal(v, 0x7f))
#define HB_NOT_TARGET(v) (hb_at_most(v, 0x20) | hb_equal(v, 0x7f))
#define HB_LINE_END(v) (hb_equal(v, '\r') | hb_equal(v, '\n') | hb_equal(v, 0))
#endif

/* The first byte from p on that a field value cannot hold (its CR, in a good line), or end. */
static inline const char *hb_value_run(const char *base, const char *p, const char *end)
{
#ifdef __SSE2__
    HB_SCAN(base, p, end, HB_NOT_VALUE);
#else
    (void)base;
#endif
    while (p < end && hb_is_value((unsigned char)*p))
        p++;
    return p;
}

/* The first byte from p on that a request target cannot hold (its SP, in a good line), or end. */
static inline const char *hb_target_run(const char *base, const char *p, const char *end)
{
#ifdef __SSE2__
    HB_SCAN(base, p, end, HB_NOT_TARGET);
#else
    (void)base;
#endif
    while (p < end && hb_is_target((unsigned char)*p))
        p++;
    return p;
}

/* The first CR, LF or NUL from p on (a reason phrase holds any other byte), or end. */
static inline const char *hb_line_end(const char *base, const char *p, const char *end)
{
#ifdef __SSE2__
    HB_SCAN(base, p, end, HB_LINE_END);
#else
    (void)base;
#endif
    while (p < end && *p != '\r' && *p != '\n' && *p != 0)
        p++;
    return p;
}

/* The first c from p on, or end. */
static inline const char *hb_find(const char *base, const char *p, const char *end, char c)
{
#ifdef __SSE2__
#define HB_IS_C(v) hb_equal(v, c)
    HB_SCAN(base, p, end, HB_IS_C);
#undef HB_IS_C
#else
    (void)base;
#endif
    while (p < end && *p != c)
        p++;
    return p;
}

#endif
