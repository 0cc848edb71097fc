/* SPDX-License-Identifier: MIT */
/*
 * Differential check of the relay's HTTP reader against the oracle (the
 * reader it replaced): see hm_diff.h.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "chunk_grammar.h"
#include "hm_diff.h"
#include "hm_oracle.h"

static char why[512];

static const char *differ(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return why;
}

struct hm_diff_case hm_diff_flags(unsigned char flags)
{
    static const size_t steps[] = { 1, 2, 3, 5, 8, 13, 64, 4096 };
    static const size_t max_heads[] = { 8192, 16, 64, 100000 };
    return (struct hm_diff_case){
        .kind = flags & 1 ? HM_RESPONSE : HM_REQUEST,
        .head_request = (flags & 2) != 0,
        .dechunk = (flags & 4) != 0,
        .step = steps[(flags >> 3) & 7],
        .max_head = max_heads[flags >> 6],
    };
}

/* Every field of struct hm_head; the target as an offset into each one's buffer. */
static const char *same_head(const struct hm_head *a, const char *abuf, const struct hm_head *b, const char *bbuf)
{
#define SAME(f)                                                                                      \
    if (a->f != b->f)                                                                                \
        return differ("h." #f ": %llu, oracle %llu", (unsigned long long)a->f, (unsigned long long)b->f);
    SAME(head_len) SAME(method) SAME(status) SAME(major) SAME(minor) SAME(keepalive) SAME(chunked)
    SAME(has_length) SAME(content_length) SAME(expect_continue) SAME(idempotent) SAME(head_method)
    SAME(close_delimited) SAME(path_len)
#undef SAME
    if (!a->path != !b->path || (a->path && a->path - abuf != b->path - bbuf))
        return differ("h.path differs");
    return NULL;
}

static const struct hm_rewrite rewrites[] = {
    { 0 },
    { .drop_expect = true, .connection = "close" },
    { .drop_te = true, .add_length = true, .length = 12345 },
    { .drop_te = true, .add_chunked = true, .connection = "keep-alive" },
    { .drop_expect = true, .drop_te = true, .add_length = true, .add_chunked = true, .connection = "" },
    { .add_length = true, .length = UINT64_MAX },
};

/* One rewrite set, both ways, with room and without. */
static const char *same_rewrite(const struct hm_msg *m, const char *abuf, const char *bbuf, const struct hm_rewrite *rw)
{
    static char want[1 << 17], got[1 << 17];
    size_t head_len = m->h.head_len;
    if (head_len + 200 > sizeof want)
        return differ("a head of %zu bytes: too long to compare", head_len);
    ssize_t w = oracle_head_rewrite(bbuf, head_len, rw, want, sizeof want);
    for (int by_msg = 0; by_msg < 2; by_msg++) {
        ssize_t g = by_msg ? hm_msg_rewrite(m, abuf, rw, got, sizeof got)
                           : hm_head_rewrite(abuf, head_len, rw, got, sizeof got);
        if (g != w || (w > 0 && memcmp(got, want, (size_t)w) != 0))
            return differ("%s: %zd bytes \"%.*s\", oracle %zd \"%.*s\"", by_msg ? "hm_msg_rewrite" : "hm_head_rewrite",
                          g, g > 0 ? (int)g : 0, got, w, w > 0 ? (int)w : 0, want);
        if (w <= 0)
            continue;
        size_t cap = (size_t)w - 1;   /* one byte short: both refuse */
        ssize_t s = by_msg ? hm_msg_rewrite(m, abuf, rw, got, cap) : hm_head_rewrite(abuf, head_len, rw, got, cap);
        if (s != oracle_head_rewrite(bbuf, head_len, rw, want, cap))
            return differ("%s with %zu bytes of room: %zd", by_msg ? "hm_msg_rewrite" : "hm_head_rewrite", cap, s);
    }
    return NULL;
}

/*
 * The body from off, fed in steps, then the EOF. A chunked body the RFC's
 * grammar refuses (chunk_grammar.h) is the one place the two may differ:
 * libhttp-parser reads on where the relay must refuse, in the very feed
 * that holds the first byte no correct body has there. Everywhere else,
 * the same answers.
 */
static const char *same_body(struct hm_msg *m, char *a, struct oracle_msg *o, char *b, size_t off, size_t len,
                             size_t step)
{
    size_t bad_at = 0;
    bool bad = m->framing == HM_CHUNKED && chunk_grammar(a + off, len - off, &bad_at) < 0;
    bad_at += off;
    for (int feed = 0; off <= len; feed++) {
        size_t n = len - off < step ? len - off : step, ao, bo;
        ssize_t ar = hm_body(m, a + off, n, &ao), br = oracle_body(o, b + off, n, &bo);
        if (bad && bad_at < off + n) {   /* this feed holds it (the oracle may have refused already) */
            if (ar != -1)
                return differ("feed %d (%zu bytes at %zu): %zd, not refused at byte %zu (oracle %zd)", feed, n, off,
                              ar, bad_at, br);
            return NULL;
        }
        if (ar != br || (ar >= 0 && ao != bo) || m->complete != o->complete || m->payload != o->payload)
            return differ("feed %d (%zu bytes at %zu): %zd out %zu complete %d payload %llu; oracle %zd out %zu "
                          "complete %d payload %llu", feed, n, off, ar, ao, m->complete, (unsigned long long)m->payload,
                          br, bo, o->complete, (unsigned long long)o->payload);
        if (memcmp(a + off, b + off, n) != 0)
            return differ("feed %d: the buffer differs after it", feed);
        if (ar <= 0)
            break;
        off += (size_t)ar;
    }
    int ae = hm_eof(m), be = oracle_eof(o);
    if (ae != be || m->complete != o->complete)
        return differ("eof: %d complete %d; oracle %d complete %d", ae, m->complete, be, o->complete);
    return NULL;
}

const char *hm_diff(const char *bytes, size_t len, const struct hm_diff_case *c)
{
    char *a = malloc(len + 1), *b = malloc(len + 1);
    memcpy(a, bytes, len);
    memcpy(b, bytes, len);
    const char *bad = NULL;
    struct hm_msg m;
    struct oracle_msg o;
    int r = hm_head_parse(&m, c->kind, a, len, c->max_head, c->head_request);
    int q = oracle_head_parse(&o, c->kind, b, len, c->max_head, c->head_request);
    if (hm_head_bad_prefix(a, len) != oracle_head_bad_prefix(b, len))
        bad = differ("hm_head_bad_prefix differs");
    else if (r != q)
        bad = differ("hm_head_parse: %d, oracle %d", r, q);
    else if (r > 0 && (m.complete != o.complete || m.skip_body != o.skip_body))
        bad = differ("complete %d skip_body %d; oracle %d %d", m.complete, m.skip_body, o.complete, o.skip_body);
    else if (r > 0)
        bad = same_head(&m.h, a, &o.h, b);
    for (size_t i = 0; r > 0 && !bad && i < sizeof rewrites / sizeof rewrites[0]; i++)
        bad = same_rewrite(&m, a, b, &rewrites[i]);
    if (r > 0 && !bad) {
        m.dechunk = o.dechunk = c->dechunk;
        bad = same_body(&m, a, &o, b, (size_t)r, len, c->step);
    }
    free(a);
    free(b);
    return bad;
}
