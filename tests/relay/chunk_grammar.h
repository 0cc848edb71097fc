/* SPDX-License-Identifier: MIT */
/*
 * RFC 9112 7.1's chunked body, written a second way for the tests: a
 * recursive descent over the whole of a buffer (the relay's checker,
 * tools/orbit-relay/chunked.c, is a state machine fed piece by piece). It
 * takes the relay's reading: no whitespace in a size line, and the limits
 * httpmsg.h names. chunk_grammar says where the first byte is that no
 * correct body has there, so a test can require the relay to refuse in
 * the very piece that holds it, and to accept every body it calls correct.
 */
#ifndef RELAY_CHUNK_GRAMMAR_H
#define RELAY_CHUNK_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "httpmsg.h"

enum { CG_OK, CG_MORE, CG_BAD };

struct cg {
    const unsigned char *p;
    size_t n, i;               /* the view's end and the cursor */
};

static inline bool cg_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static inline int cg_hex(unsigned char c)
{
    const char *digits = "0123456789abcdef0123456789ABCDEF";
    const char *d = c ? strchr(digits, c) : NULL;
    return d ? (int)((d - digits) % 16) : -1;
}

#define CG_NEED(g) do { if ((g)->i >= (g)->n) return CG_MORE; } while (0)

static inline int cg_byte(struct cg *g, char c)
{
    CG_NEED(g);
    if (g->p[g->i] != (unsigned char)c)
        return CG_BAD;
    g->i++;
    return CG_OK;
}

static inline int cg_crlf(struct cg *g)
{
    int r = cg_byte(g, '\r');
    return r == CG_OK ? cg_byte(g, '\n') : r;
}

static inline int cg_token(struct cg *g)
{
    CG_NEED(g);
    if (!cg_tchar(g->p[g->i]))
        return CG_BAD;
    while (g->i < g->n && cg_tchar(g->p[g->i]))
        g->i++;
    return CG_OK;
}

/* DQUOTE *( qdtext / "\" ( HTAB / SP / VCHAR / obs-text ) ) DQUOTE */
static inline int cg_quoted(struct cg *g)
{
    int r = cg_byte(g, '"');
    if (r != CG_OK)
        return r;
    for (;;) {
        CG_NEED(g);
        unsigned char c = g->p[g->i];
        if (c == '"') {
            g->i++;
            return CG_OK;
        }
        if (c == '\\') {
            g->i++;
            CG_NEED(g);
            c = g->p[g->i];
            if (!(c == '\t' || (c >= 0x20 && c != 0x7f)))
                return CG_BAD;
        } else if (!(c == '\t' || (c >= 0x20 && c != 0x7f))) {
            return CG_BAD;
        }
        g->i++;
    }
}

/* chunk-size [ chunk-ext ] CRLF, the size in *size. */
static inline int cg_size_line(struct cg *g, uint64_t *size)
{
    CG_NEED(g);
    if (cg_hex(g->p[g->i]) < 0)
        return CG_BAD;
    *size = 0;
    while (g->i < g->n && cg_hex(g->p[g->i]) >= 0) {
        uint64_t d = (uint64_t)cg_hex(g->p[g->i]);
        if (*size > (HM_CHUNK_SIZE_MAX - d) / 16)
            return CG_BAD;
        *size = *size * 16 + d;
        g->i++;
    }
    for (;;) {
        CG_NEED(g);
        if (g->p[g->i] != ';')
            return cg_crlf(g);
        g->i++;
        int r = cg_token(g);
        if (r != CG_OK)
            return r;
        CG_NEED(g);
        if (g->p[g->i] == '=') {
            g->i++;
            CG_NEED(g);
            r = g->p[g->i] == '"' ? cg_quoted(g) : cg_token(g);
            if (r != CG_OK)
                return r;
        }
    }
}

/* *( field-name ":" field-value CRLF ) CRLF */
static inline int cg_trailers(struct cg *g)
{
    for (;;) {
        CG_NEED(g);
        if (g->p[g->i] == '\r')
            return cg_crlf(g);
        int r = cg_token(g);
        if (r == CG_OK)
            r = cg_byte(g, ':');
        if (r != CG_OK)
            return r;
        while (g->i < g->n && (g->p[g->i] == '\t' || (g->p[g->i] >= 0x20 && g->p[g->i] != 0x7f)))
            g->i++;
        r = cg_crlf(g);
        if (r != CG_OK)
            return r;
    }
}

/* A production over at most limit bytes from the cursor: past them, the body is refused there. */
static inline int cg_bounded(struct cg *g, size_t limit, int (*what)(struct cg *, uint64_t *), uint64_t *arg)
{
    size_t n = g->n;
    if (n - g->i > limit)
        g->n = g->i + limit;
    int r = what(g, arg);
    if (r == CG_MORE && g->n < n) {
        g->i = g->n;   /* the byte past the limit */
        r = CG_BAD;
    }
    g->n = n;
    return r;
}

static inline int cg_trailers_arg(struct cg *g, uint64_t *unused)
{
    (void)unused;
    return cg_trailers(g);
}

/*
 * The chunked body at p[0..n): 1 when it is whole (*at: its length), 0 when
 * every byte could begin a correct body, -1 when one cannot (*at: its index).
 */
static inline int chunk_grammar(const char *p, size_t n, size_t *at)
{
    struct cg g = { (const unsigned char *)p, n, 0 };
    int r;
    for (;;) {
        uint64_t size = 0;
        r = cg_bounded(&g, HM_CHUNK_LINE_MAX, cg_size_line, &size);
        if (r != CG_OK || size == 0)
            break;
        if (g.n - g.i < size) {
            r = CG_MORE;
            break;
        }
        g.i += (size_t)size;
        if ((r = cg_crlf(&g)) != CG_OK)
            break;
    }
    if (r == CG_OK)
        r = cg_bounded(&g, HM_TRAILERS_MAX, cg_trailers_arg, NULL);
    *at = g.i;
    return r == CG_OK ? 1 : r == CG_MORE ? 0 : -1;
}

#endif
