/* SPDX-License-Identifier: MIT */
/*
 * The reference reader for the relay's HTTP: strict checks, then
 * libhttp-parser over the whole head and the body; the rewrite reads the
 * head twice. Simple rather than fast, so the differential tests
 * (test_http_diff, fuzz_http_diff) hold tools/orbit-relay/{parse,rewrite,
 * framing}.c to its answers.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "hm_oracle.h"

static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    switch (c) {   /* a switch, not strchr: this runs for every byte of every field name */
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return true;
    default:
        return false;
    }
}

/* VCHAR, obs-text, SP and HTAB: what a field value may hold. */
static bool is_value_char(unsigned char c)
{
    return c == '\t' || c >= 0x20 ? c != 0x7f : false;
}

bool oracle_head_bad_prefix(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (c == 0 || (c == '\n' && (i == 0 || buf[i - 1] != '\r')) ||
            (c == '\r' && i + 1 < len && buf[i + 1] != '\n'))
            return true;
    }
    return false;
}

static bool name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

static bool value_is(const char *v, size_t n, const char *want)
{
    return name_is(v, n, want);
}

/* What the field lines say about framing. */
struct facts { int n_cl, n_te, n_host; bool te_chunked_only, expect_continue, te_prefix; };

/* One field line [p, end): name, colon, OWS value OWS. 0 or -400. */
static int check_field(const char *p, const char *end, struct facts *f)
{
    const char *q = p;
    while (q < end && is_tchar((unsigned char)*q))
        q++;
    if (q == p || q == end || *q != ':')
        return -400;   /* obs-fold, whitespace before the colon, or no name */
    size_t nlen = (size_t)(q - p);
    const char *v = q + 1, *ve = end;
    for (const char *c = v; c < ve; c++)
        if (!is_value_char((unsigned char)*c))
            return -400;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    size_t vlen = (size_t)(ve - v);
    if (nlen >= 17 && strncasecmp(p, "transfer-encoding", 17) == 0)
        f->te_prefix = true;   /* libhttp-parser notes it, and reads no chunked after it */
    if (name_is(p, nlen, "content-length")) {
        f->n_cl++;
        if (vlen == 0 || vlen > 18)
            return -400;
        for (size_t i = 0; i < vlen; i++)
            if (v[i] < '0' || v[i] > '9')
                return -400;
    } else if (name_is(p, nlen, "transfer-encoding")) {
        f->n_te++;
        f->te_chunked_only = value_is(v, vlen, "chunked");
    } else if (name_is(p, nlen, "host")) {
        f->n_host++;
    } else if (name_is(p, nlen, "expect")) {
        f->expect_continue = value_is(v, vlen, "100-continue");
    }
    return 0;
}

/* "HTTP/1.x" exactly: the parser does not check the letters. */
static bool version_ok(const char *p, const char *end)
{
    return end - p >= 8 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '0' || p[7] == '1');
}

/* request-line = method SP target SP version; status-line = version SP 3DIGIT SP reason. */
static int check_start_line(enum hm_kind kind, const char *p, const char *eol)
{
    if (kind == HM_RESPONSE)
        return version_ok(p, eol) && eol - p >= 12 && p[8] == ' ' && p[9] >= '1' && p[9] <= '5' &&
               p[10] >= '0' && p[10] <= '9' && p[11] >= '0' && p[11] <= '9' && (eol - p == 12 || p[12] == ' ')
               ? 0 : -400;
    const char *q = p;
    while (q < eol && is_tchar((unsigned char)*q))
        q++;
    if (q == p || q == eol || *q != ' ')
        return -400;
    const char *t = ++q;
    while (q < eol && (unsigned char)*q > 0x20 && *q != 0x7f)
        q++;
    if (q == t || q == eol || *q != ' ' || eol - q != 9)
        return -400;
    if (version_ok(q + 1, eol))
        return 0;
    bool other = memcmp(q + 1, "HTTP/", 5) == 0 && q[6] >= '0' && q[6] <= '9' && q[7] == '.' && q[8] >= '0' &&
                 q[8] <= '9';
    return other ? -505 : -400;
}

/* Every field line of a head whose lines all end in CRLF. */
static int check_fields(const char *buf, size_t head_len, struct facts *f)
{
    const char *end = buf + head_len - 2;   /* the blank line's CRLF */
    const char *p = memchr(buf, '\n', head_len) + 1;
    memset(f, 0, sizeof *f);
    while (p < end) {
        const char *eol = memchr(p, '\r', (size_t)(end - p));
        if (!eol)
            return -400;
        if (check_field(p, eol, f) < 0)
            return -400;
        p = eol + 2;
    }
    return 0;
}

static int framing_rules(enum hm_kind kind, const struct facts *f, const http_parser *p)
{
    if (f->n_cl > 1 || f->n_te > 1 || (f->n_cl && f->n_te))
        return -400;
    if (kind == HM_RESPONSE)
        return 0;
    if ((f->te_prefix && !(p->flags & F_CHUNKED)) || (f->n_te && (!f->te_chunked_only || p->http_minor == 0)))
        return -400;
    if (f->n_host > 1 || (p->http_minor == 1 && f->n_host == 0))
        return -400;
    return 0;
}

/* ---- the parser's callbacks --------------------------------------------- */

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct oracle_msg *m = p->data;
    if (!m->h.path)
        m->h.path = at;
    m->h.path_len += n;
    return 0;
}

/* 1: this message has no body whatever its fields say. */
static int on_headers_complete(http_parser *p)
{
    struct oracle_msg *m = p->data;
    if (p->type == HTTP_RESPONSE &&
        (p->status_code / 100 == 1 || p->status_code == 204 || p->status_code == 304))
        m->skip_body = true;
    return m->skip_body ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct oracle_msg *m = p->data;
    if (m->dechunk) {
        memmove(m->wp, at, n);   /* wp never passes at: the payload only shrinks */
        m->wp += n;
    }
    m->payload += n;
    return 0;
}

/* Stops the parser at the message's last byte: what follows is the next message. */
static int on_message_complete(http_parser *p)
{
    struct oracle_msg *m = p->data;
    m->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings oracle_settings = {
    .on_url = on_url, .on_headers_complete = on_headers_complete, .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static bool idempotent(unsigned method)
{
    switch (method) {
    case HTTP_GET: case HTTP_HEAD: case HTTP_OPTIONS: case HTTP_TRACE: case HTTP_PUT: case HTTP_DELETE:
        return true;
    default:
        return false;
    }
}

static void fill_head(struct oracle_msg *m, enum hm_kind kind, const struct facts *f, size_t head_len)
{
    const http_parser *p = &m->p;
    m->h.head_len = head_len;
    m->h.method = p->method;
    m->h.status = p->status_code;
    m->h.major = p->http_major;
    m->h.minor = p->http_minor;
    m->h.chunked = (p->flags & F_CHUNKED) != 0;
    m->h.has_length = f->n_cl == 1;
    m->h.content_length = m->h.has_length ? p->content_length : 0;
    m->h.expect_continue = kind == HM_REQUEST && f->expect_continue && p->http_minor == 1;
    m->h.idempotent = idempotent(p->method);
    m->h.head_method = kind == HM_REQUEST && p->method == HTTP_HEAD;
    m->h.close_delimited = kind == HM_RESPONSE && !m->skip_body && !m->h.chunked && !m->h.has_length;
    m->h.keepalive = http_should_keep_alive(p) && !m->h.close_delimited;
}

int oracle_head_parse(struct oracle_msg *m, enum hm_kind kind, const char *buf, size_t len, size_t max_head,
                  bool head_request)
{
    const char *e = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
    size_t head_len = e ? (size_t)(e - buf) + 4 : 0;
    if (head_len > max_head || (!e && len > max_head))
        return -431;
    if (oracle_head_bad_prefix(buf, e ? head_len : len))
        return -400;
    if (!e)
        return 0;
    struct facts f;
    int bad = check_start_line(kind, buf, memchr(buf, '\r', head_len));
    if (bad < 0)
        return bad;
    if (check_fields(buf, head_len, &f) < 0)
        return -400;
    memset(m, 0, sizeof *m);
    http_parser_init(&m->p, kind == HM_REQUEST ? HTTP_REQUEST : HTTP_RESPONSE);
    m->p.data = m;
    m->skip_body = head_request;
    size_t n = http_parser_execute(&m->p, &oracle_settings, buf, head_len);
    enum http_errno err = HTTP_PARSER_ERRNO(&m->p);
    if (err != HPE_OK && err != HPE_PAUSED)
        return err == HPE_INVALID_VERSION ? -505 : -400;
    if (n != head_len)
        return -400;
    if (m->p.http_major != 1 || m->p.http_minor > 1)
        return -505;
    if (kind == HM_REQUEST && m->p.method == HTTP_CONNECT)
        return -501;
    if (framing_rules(kind, &f, &m->p) < 0)
        return -400;
    fill_head(m, kind, &f, head_len);
    return (int)head_len;
}

/* ---- the rewrite -------------------------------------------------------- */

#define HM_MAX_NAMED 16

/* Fields a Connection header may not remove: the framing and the target. */
static bool protected_field(const char *name, size_t n)
{
    return name_is(name, n, "content-length") || name_is(name, n, "transfer-encoding") ||
           name_is(name, n, "host");
}

struct span { const char *p; size_t n; };

/* The field names a Connection header lists (RFC 9110 7.6.1). */
static int connection_tokens(const char *v, const char *end, struct span *out, int n)
{
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *t = v;
        while (v < end && *v != ',' && *v != ' ' && *v != '\t')
            v++;
        if (v > t && n < HM_MAX_NAMED && !protected_field(t, (size_t)(v - t)))
            out[n++] = (struct span){ t, (size_t)(v - t) };
    }
    return n;
}

static bool hop_by_hop(const char *name, size_t n, const struct hm_rewrite *rw, const struct span *named, int n_named)
{
    if (name_is(name, n, "connection") || name_is(name, n, "keep-alive") || name_is(name, n, "te") ||
        name_is(name, n, "upgrade") || (n >= 6 && strncasecmp(name, "proxy-", 6) == 0))
        return true;
    if (rw->drop_expect && name_is(name, n, "expect"))
        return true;
    if (rw->drop_te && (name_is(name, n, "transfer-encoding") || name_is(name, n, "content-length") ||
                        name_is(name, n, "trailer")))
        return true;
    for (int i = 0; i < n_named; i++)
        if ((named[i].n == n && strncasecmp(named[i].p, name, n) == 0))
            return true;
    return false;
}

/* Appends n bytes; false when out of room. */
static bool put(char *out, size_t cap, size_t *at, const char *p, size_t n)
{
    if (*at + n > cap)
        return false;
    memcpy(out + *at, p, n);
    *at += n;
    return true;
}

ssize_t oracle_head_rewrite(const char *in, size_t head_len, const struct hm_rewrite *rw, char *out, size_t cap)
{
    const char *end = in + head_len - 2;
    const char *first = memchr(in, '\n', head_len) + 1;
    struct span named[HM_MAX_NAMED];
    int n_named = 0;
    for (const char *p = first; p < end;) {
        const char *eol = memchr(p, '\r', (size_t)(end - p)), *colon = memchr(p, ':', (size_t)(eol - p));
        if (name_is(p, (size_t)(colon - p), "connection"))
            n_named = connection_tokens(colon + 1, eol, named, n_named);
        p = eol + 2;
    }
    size_t at = 0;
    if (!put(out, cap, &at, in, (size_t)(first - in)))
        return -1;
    for (const char *p = first; p < end;) {
        const char *eol = memchr(p, '\r', (size_t)(end - p)), *colon = memchr(p, ':', (size_t)(eol - p));
        if (!hop_by_hop(p, (size_t)(colon - p), rw, named, n_named) && !put(out, cap, &at, p, (size_t)(eol - p) + 2))
            return -1;
        p = eol + 2;
    }
    char extra[128];
    int n = 0;
    if (rw->add_length)
        n += snprintf(extra, sizeof extra, "Content-Length: %llu\r\n", (unsigned long long)rw->length);
    if (rw->add_chunked)
        n += snprintf(extra + n, sizeof extra - (size_t)n, "Transfer-Encoding: chunked\r\n");
    if (rw->connection)
        n += snprintf(extra + n, sizeof extra - (size_t)n, "Connection: %s\r\n", rw->connection);
    if (!put(out, cap, &at, extra, (size_t)n) || !put(out, cap, &at, "\r\n", 2))
        return -1;
    return (ssize_t)at;
}

/* ---- the framing -------------------------------------------------------- */

ssize_t oracle_body(struct oracle_msg *m, char *buf, size_t len, size_t *out)
{
    *out = 0;
    if (m->complete || len == 0)   /* a zero-length feed would mean EOF to the parser */
        return 0;
    m->wp = buf;
    size_t n = http_parser_execute(&m->p, &oracle_settings, buf, len);
    enum http_errno err = HTTP_PARSER_ERRNO(&m->p);
    if ((err != HPE_OK && err != HPE_PAUSED) || (!m->complete && n != len) || n > len)
        return -1;
    *out = m->dechunk ? (size_t)(m->wp - buf) : n;
    return (ssize_t)n;
}

int oracle_eof(struct oracle_msg *m)
{
    if (m->complete)
        return 0;
    if (!m->h.close_delimited)
        return -1;
    http_parser_execute(&m->p, &oracle_settings, NULL, 0);
    return m->complete ? 0 : -1;
}
