/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: a head for the next hop (RFC 9110 7.6.1): without Connection
 * and the fields it names, Keep-Alive, TE, Upgrade and Proxy-*, and with
 * what the relay adds. The plan (httpmsg.h) says which lines may go: the
 * scanner notes it while it reads a head; without it a walk over the field
 * lines notes it. Connection naming a field the plan has no kind for is
 * rare: the head is then read again, name by name.
 */
#include <string.h>
#include "hm_bytes.h"
#include "hm_fields.h"
#include "httpmsg.h"

/* Connection tokens honoured, protected ones aside; the ones after them are ignored. */
#define HM_MAX_NAMED 16

/* Fields a Connection header may not remove: the framing and the target. */
static bool protected_kind(enum hm_field kind)
{
    return kind == HF_CONTENT_LENGTH || kind == HF_TRANSFER_ENCODING || kind == HF_HOST;
}

/* A field line of this kind goes (named: bits of the kinds Connection names). */
static bool drops(enum hm_field kind, const struct hm_rewrite *rw, unsigned named)
{
    switch (kind) {
    case HF_CONNECTION: case HF_PROXY_CONNECTION: case HF_PROXY: case HF_KEEP_ALIVE: case HF_TE: case HF_UPGRADE:
        return true;
    case HF_EXPECT:
        return rw->drop_expect || (named & 1u << HF_EXPECT);
    case HF_TRANSFER_ENCODING: case HF_CONTENT_LENGTH:
        return rw->drop_te;
    case HF_TRAILER:
        return rw->drop_te || (named & 1u << HF_TRAILER);
    case HF_CLOSE:
        return (named & 1u << HF_CLOSE) != 0;
    default:
        return false;
    }
}

struct span { const char *p; size_t n; };

/* The next token of a Connection value at *v, up to end: runs between SP, HTAB and ','. */
static bool next_token(const char **v, const char *end, struct span *t)
{
    const char *p = *v;
    while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
        p++;
    const char *start = p;
    while (p < end && *p != ',' && *p != ' ' && *p != '\t')
        p++;
    *v = p;
    *t = (struct span){ start, (size_t)(p - start) };
    return p > start;
}

void hm_plan_connection(struct hm_plan *plan, unsigned *n_named, const char *v, const char *eol)
{
    struct span t;
    while (next_token(&v, eol, &t)) {
        enum hm_field kind = hf_kind(t.p, t.n);
        if (protected_kind(kind) || *n_named >= HM_MAX_NAMED)
            continue;
        ++*n_named;
        if (kind == HF_EXPECT || kind == HF_TRAILER || kind == HF_CLOSE)
            plan->named = (uint16_t)(plan->named | 1u << kind);
        else if (kind == HF_OTHER || kind == HF_TRANSFER_ENCODING_MORE)
            plan->walk = true;   /* the plan knows no lines of that name */
    }
}

/* The field line at p in the checked head at in, up to end: its name's length, and its CR. */
static const char *field_line(const char *in, const char *p, const char *end, size_t *name_len)
{
    const char *colon = hb_find(in, p, end, ':');
    *name_len = (size_t)(colon - p);
    return hb_find(in, colon, end, '\r');
}

/* The plan of a checked head of head_len bytes, from its field lines. */
static void plan_head(const char *in, size_t head_len, struct hm_plan *plan)
{
    plan->n_lines = 0;
    plan->named = 0;
    plan->walk = false;
    unsigned n_named = 0;
    const char *end = in + head_len - 2;
    for (const char *p = hb_find(in, in, in + head_len, '\n') + 1; p < end;) {
        size_t name_len;
        const char *eol = field_line(in, p, end, &name_len);
        enum hm_field kind = hf_kind(p, name_len);
        if (hf_noted(kind))
            hm_plan_note(plan, kind, (size_t)(p - in), (size_t)(eol + 2 - p));
        if (kind == HF_CONNECTION)
            hm_plan_connection(plan, &n_named, p + name_len + 1, eol);
        p = eol + 2;
    }
}

/* ---- what the relay adds ------------------------------------------------- */

static size_t decimal(char *out, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = digits[n - 1 - i];
    return n;
}

static size_t put_text(char *out, const char *s, size_t n)
{
    memcpy(out, s, n);
    return n;
}

#define TEXT(s) s, sizeof s - 1

/* The lines rw adds and the blank line after them. */
struct tail {
    char digits[20];            /* add_length: the length, in decimal */
    size_t n_digits, n_connection, len;
};

static inline void tail_of(const struct hm_rewrite *rw, struct tail *t)
{
    t->len = 2;
    if (rw->add_length) {
        t->n_digits = decimal(t->digits, rw->length);
        t->len += sizeof "Content-Length: \r\n" - 1 + t->n_digits;
    }
    if (rw->add_chunked)
        t->len += sizeof "Transfer-Encoding: chunked\r\n" - 1;
    if (rw->connection) {
        t->n_connection = strlen(rw->connection);
        t->len += sizeof "Connection: \r\n" - 1 + t->n_connection;
    }
}

static inline size_t put_tail(char *out, const struct hm_rewrite *rw, const struct tail *t)
{
    if (t->len == 2)
        return put_text(out, TEXT("\r\n"));
    size_t n = 0;
    if (rw->add_length) {
        n += put_text(out + n, TEXT("Content-Length: "));
        n += put_text(out + n, t->digits, t->n_digits);
        n += put_text(out + n, TEXT("\r\n"));
    }
    if (rw->add_chunked)
        n += put_text(out + n, TEXT("Transfer-Encoding: chunked\r\n"));
    if (rw->connection) {
        n += put_text(out + n, TEXT("Connection: "));
        n += put_text(out + n, rw->connection, t->n_connection);
        n += put_text(out + n, TEXT("\r\n"));
    }
    n += put_text(out + n, TEXT("\r\n"));
    return n;
}

/* ---- writing the head ---------------------------------------------------- */

/* The head by its plan: the runs between the lines that go, then the tail. */
static ssize_t by_plan(const char *in, size_t head_len, const struct hm_plan *plan, const struct hm_rewrite *rw,
                       char *out, size_t cap)
{
    size_t gone = 0;
    unsigned drop = 0;   /* bit i: line[i] goes */
    for (unsigned i = 0; i < plan->n_lines; i++)
        if (drops((enum hm_field)plan->line[i].kind, rw, plan->named)) {
            drop |= 1u << i;
            gone += plan->line[i].len;
        }
    struct tail t;
    tail_of(rw, &t);
    if (head_len - 2 - gone + t.len > cap)
        return -1;
    size_t at = 0, from = 0;
    for (unsigned i = 0; drop; i++, drop >>= 1)
        if (drop & 1) {
            at += put_text(out + at, in + from, plan->line[i].off - from);
            from = plan->line[i].off + plan->line[i].len;
        }
    at += put_text(out + at, in + from, head_len - 2 - from);
    at += put_tail(out + at, rw, &t);
    return (ssize_t)at;
}

/* a and b (n bytes each) are equal but for the case of ASCII letters. */
static bool same_name(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x | 0x20);
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y | 0x20);
        if (x != y)
            return false;
    }
    return true;
}

/* The first HM_MAX_NAMED unprotected tokens of the head's Connection fields. */
static size_t named_fields(const char *in, const char *first, const char *end, struct span *named)
{
    size_t n = 0;
    for (const char *p = first; p < end;) {
        size_t name_len;
        const char *eol = field_line(in, p, end, &name_len);
        if (hf_kind(p, name_len) == HF_CONNECTION) {
            const char *v = p + name_len + 1;
            struct span t;
            while (next_token(&v, eol, &t))
                if (n < HM_MAX_NAMED && !protected_kind(hf_kind(t.p, t.n)))
                    named[n++] = t;
        }
        p = eol + 2;
    }
    return n;
}

/* The head line by line, each name compared with the ones Connection names. */
static ssize_t by_names(const char *in, size_t head_len, const struct hm_rewrite *rw, char *out, size_t cap)
{
    const char *end = in + head_len - 2, *first = hb_find(in, in, in + head_len, '\n') + 1;
    struct span named[HM_MAX_NAMED];
    size_t n_named = named_fields(in, first, end, named);
    size_t at = (size_t)(first - in);
    if (at > cap)
        return -1;
    memcpy(out, in, at);
    for (const char *p = first; p < end;) {
        size_t name_len;
        const char *eol = field_line(in, p, end, &name_len);
        bool goes = drops(hf_kind(p, name_len), rw, 0);
        for (size_t i = 0; i < n_named && !goes; i++)
            goes = named[i].n == name_len && same_name(named[i].p, p, name_len);
        size_t n = (size_t)(eol + 2 - p);
        if (!goes) {
            if (at + n > cap)
                return -1;
            at += put_text(out + at, p, n);
        }
        p = eol + 2;
    }
    struct tail t;
    tail_of(rw, &t);
    if (at + t.len > cap)
        return -1;
    at += put_tail(out + at, rw, &t);
    return (ssize_t)at;
}

ssize_t hm_head_rewrite(const char *in, size_t head_len, const struct hm_rewrite *rw, char *out, size_t cap)
{
    struct hm_plan plan;
    plan_head(in, head_len, &plan);
    return plan.walk ? by_names(in, head_len, rw, out, cap) : by_plan(in, head_len, &plan, rw, out, cap);
}

ssize_t hm_msg_rewrite(const struct hm_msg *m, const char *in, const struct hm_rewrite *rw, char *out, size_t cap)
{
    if (m->plan.walk)
        return by_names(in, m->h.head_len, rw, out, cap);
    return by_plan(in, m->h.head_len, &m->plan, rw, out, cap);
}
