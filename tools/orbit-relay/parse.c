/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: heads, read in one walk. The walk refuses what a proxy must
 * not pass on (RFC 9112 2.2, 3, 5.1, 5.2, 6.1, 6.3): NUL, bare CR or LF,
 * whitespace before a colon, obs-fold, a duplicate or invalid
 * Content-Length, Content-Length beside Transfer-Encoding, a
 * Transfer-Encoding other than chunked, a missing or repeated Host. What it
 * lets through it reads as libhttp-parser reads a head, quirks included
 * (its methods, request targets, Connection and Transfer-Encoding tokens,
 * its 80 KiB limit): framing and keep-alive are what the checks plus
 * libhttp-parser over the head make of it. tests/relay/hm_oracle.c is that
 * reference reader; the differential tests (test_http_diff, fuzz_http_diff)
 * hold the walk to its answers.
 */
#include <string.h>
#include "hm_bytes.h"
#include "hm_fields.h"
#include "httpmsg.h"

/* ---- bytes --------------------------------------------------------------- */

static inline bool is_tchar(unsigned c)
{
    return hb_is_tchar((unsigned char)c);
}

static inline bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

bool hm_head_bad_prefix(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (c == 0 || (c == '\n' && (i == 0 || buf[i - 1] != '\r')) ||
            (c == '\r' && i + 1 < len && buf[i + 1] != '\n'))
            return true;
    }
    return false;
}

/* ---- what a head says ---------------------------------------------------- */

/* Connection options as libhttp-parser notes them (bit i: connection_options' word i). */
enum { CONN_KEEP_ALIVE = 1, CONN_CLOSE = 2, CONN_UPGRADE = 4 };

/* One head as the walk read it: what the relay's rules count and what libhttp-parser would note. */
struct head {
    size_t len;
    unsigned method, status, minor;
    const char *target;
    size_t target_len;
    unsigned n_cl, n_te, n_host, n_named;
    uint64_t content_length;
    bool te_chunked_only;       /* the relay: the Transfer-Encoding value is "chunked" */
    bool te_noted;              /* libhttp-parser: a field name began with transfer-encoding */
    bool chunked;               /* libhttp-parser: chunked is the final coding of the last such field */
    bool expect_continue;
    bool upgrade_field;         /* libhttp-parser: an Upgrade with a value */
    unsigned conn;              /* libhttp-parser: CONN_* */
};

/* ---- the start line ------------------------------------------------------ */

static const struct method {
    char name[12];
    uint8_t len, id;
} methods[] = {
#define XX(num, name, string) { #string, sizeof #string - 1, num },
    HTTP_METHOD_MAP(XX)
#undef XX
};

/* libhttp-parser's methods, exactly as it spells them; -1 for any other. */
static int method_id(const char *s, size_t n)
{
    if (n == 3 && memcmp(s, "GET", 3) == 0)   /* the common case first */
        return HTTP_GET;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].len == n && memcmp(methods[i].name, s, n) == 0)
            return methods[i].id;
    return -1;
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* libhttp-parser's userinfo and host bytes (its IS_USERINFO_CHAR, '[' and ']'). */
static bool is_server_char(char c)
{
    if (is_alpha(c) || is_digit(c))
        return true;
    switch (c) {
    case '-': case '_': case '.': case '!': case '~': case '*': case '\'': case '(': case ')':
    case '%': case ';': case ':': case '&': case '=': case '+': case '$': case ',': case '[': case ']':
        return true;
    default:
        return false;
    }
}

/*
 * A request target libhttp-parser accepts (n target bytes, none of them
 * whitespace). From a path or query on it accepts every such byte; before
 * that an absolute-form scheme and authority have a grammar of their own,
 * and CONNECT's target is an authority from its first byte.
 */
static bool target_ok(const char *t, size_t n, bool connect)
{
    enum { START, SCHEME, SCHEME_SLASH, SCHEME_SLASH2, SERVER_START, SERVER, SERVER_AT } st;
    st = connect ? SERVER_START : START;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        switch (st) {
        case START:
            if (c == '/' || c == '*')
                return true;
            if (!is_alpha(c))
                return false;
            st = SCHEME;
            break;
        case SCHEME:
            if (c == ':')
                st = SCHEME_SLASH;
            else if (!is_alpha(c))
                return false;
            break;
        case SCHEME_SLASH:
        case SCHEME_SLASH2:
            if (c != '/')
                return false;
            st = st == SCHEME_SLASH ? SCHEME_SLASH2 : SERVER_START;
            break;
        case SERVER_AT:
            if (c == '@')
                return false;
            /* fall through */
        case SERVER_START:
        case SERVER:
            if (c == '/' || c == '?')
                return true;
            if (c == '@')
                st = SERVER_AT;
            else if (is_server_char(c))
                st = SERVER;
            else
                return false;
            break;
        }
    }
    return st == SERVER || st == SERVER_AT;   /* the target may end in the authority, not before it */
}

/*
 * request-line = method SP request-target SP HTTP-version CRLF. Returns the
 * line's length, or -400 / -505 (a well-formed version other than 1.0 and
 * 1.1), or -400 for a method or target libhttp-parser refuses. A line cut
 * short by end is -400 too: only a complete head's verdict counts.
 */
static int request_line(struct head *h, const char *buf, const char *end)
{
    const char *p = buf;
    while (p < end && is_tchar((unsigned char)*p))
        p++;
    if (p == buf || p == end || *p != ' ')
        return -400;
    size_t method_len = (size_t)(p - buf);
    const char *target = ++p;
    p = hb_target_run(buf, p, end);
    if (p == target || end - p < 11 || *p != ' ' || p[9] != '\r')
        return -400;
    const char *v = p + 1;
    if (memcmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1'))
        return memcmp(v, "HTTP/", 5) == 0 && is_digit(v[5]) && v[6] == '.' && is_digit(v[7]) ? -505 : -400;
    if (v[9] != '\n')
        return -400;
    int id = method_id(buf, method_len);
    h->target = target;
    h->target_len = (size_t)(p - target);
    if (id < 0 || !target_ok(target, h->target_len, id == HTTP_CONNECT))
        return -400;
    h->method = (unsigned)id;
    h->minor = (unsigned)(v[7] - '0');
    return (int)(v + 10 - buf);
}

/* status-line = HTTP-version SP 3DIGIT SP [reason] CRLF, the first digit 1 to 5. The line's length or -400. */
static int status_line(struct head *h, const char *buf, const char *end)
{
    if (end - buf < 13 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ' ||
        buf[9] < '1' || buf[9] > '5' || !is_digit(buf[10]) || !is_digit(buf[11]))
        return -400;
    const char *p = buf + 12;
    if (*p == ' ')
        p = hb_line_end(buf, p, end);   /* the reason: any other byte */
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
        return -400;
    h->minor = (unsigned)(buf[7] - '0');
    h->status = (unsigned)((buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0'));
    return (int)(p + 2 - buf);
}

/* ---- field values -------------------------------------------------------- */

/* Bit 5 set, as libhttp-parser folds a byte before it compares it with a token. */
static unsigned folded(char c)
{
    return (unsigned char)c | 0x20u;
}

/*
 * The Connection options libhttp-parser notes in a value (v: its first byte
 * after the leading whitespace; eol: its end), replayed as it reads them
 * since keep-alive follows them: an option is matched letter by letter; one
 * that matched counts if spaces only or a comma follow; after a comma, a
 * byte that is neither a space nor (folded) a token character ends the
 * reading of the value.
 */
static unsigned connection_options(const char *v, const char *eol)
{
    static const char *const word[] = { "keep-alive", "close", "upgrade" };
    static const unsigned char word_len[] = { 10, 5, 7 };
    enum { AT_TOKEN, MATCHING, MATCHED, IN_TOKEN } st = IN_TOKEN;
    unsigned flags = 0, w = 0, i = 0;
    for (const char *p = v; p < eol; p++) {
        unsigned c = folded(*p);
        if (p == v || st == AT_TOKEN) {
            unsigned k = c == 'k' ? 0 : c == 'c' ? 1 : c == 'u' ? 2 : 3;
            if (k < 3) {
                st = MATCHING, w = k, i = 0;
                continue;
            }
            if (p == v || (c != ' ' && is_tchar(c)))
                st = IN_TOKEN;
            else if (c != ' ')
                return flags;
            continue;
        }
        switch (st) {
        case MATCHING:
            if (c != (unsigned char)word[w][++i])
                st = IN_TOKEN;
            else if (i == word_len[w] - 1u)
                st = MATCHED;
            break;
        case MATCHED:
            if (*p == ',') {
                flags |= 1u << w;
                st = AT_TOKEN;
            } else if (*p != ' ') {
                st = IN_TOKEN;
            }
            break;
        default:
            if (*p == ',')
                st = AT_TOKEN;
            break;
        }
    }
    return st == MATCHED ? flags | 1u << w : flags;
}

/*
 * Whether libhttp-parser takes chunked for the final coding of a
 * Transfer-Encoding value (v: its first byte after the leading whitespace):
 * "chunked" followed by spaces only, after the start or a comma; after a
 * comma, a byte that is neither a space nor (folded) a token character ends
 * its reading of the value, and a comma right after "chunked" does not begin
 * a new coding.
 */
static bool te_chunked(const char *v, const char *eol)
{
    static const char chunked[] = "chunked";
    enum { AT_TOKEN, MATCHING, MATCHED, IN_TOKEN } st = IN_TOKEN;
    unsigned i = 0;
    for (const char *p = v; p < eol; p++) {
        unsigned c = folded(*p);
        if (p == v || st == AT_TOKEN) {
            if (c == 'c')
                st = MATCHING, i = 0;
            else if (p == v || (c != ' ' && is_tchar(c)))
                st = IN_TOKEN;
            else if (c != ' ')
                return false;
            continue;
        }
        switch (st) {
        case MATCHING:
            if (c != (unsigned char)chunked[++i])
                st = IN_TOKEN;
            else if (i == sizeof chunked - 2)
                st = MATCHED;
            break;
        case MATCHED:
            if (*p != ' ')
                st = IN_TOKEN;
            break;
        default:
            if (*p == ',')
                st = AT_TOKEN;
            break;
        }
    }
    return st == MATCHED;
}

/*
 * Content-Length: 1 to 18 digits (the relay's rule), then spaces only
 * (libhttp-parser refuses a tab there). v: after the leading whitespace.
 */
static int content_length(struct head *h, const char *v, const char *eol)
{
    uint64_t n = 0;
    const char *p = v;
    while (p < eol && is_digit(*p))
        n = n * 10 + (uint64_t)(*p++ - '0');
    size_t digits = (size_t)(p - v);
    while (p < eol && *p == ' ')
        p++;
    if (digits == 0 || digits > 18 || p != eol)
        return -400;
    h->content_length = n;
    return 0;
}

/* v..eol without the whitespace around it equals lit (n bytes, lower case) in any case. */
static bool trimmed_is(const char *v, const char *eol, const char *lit, size_t n)
{
    while (eol > v && is_ows(eol[-1]))
        eol--;
    return (size_t)(eol - v) == n && hf_is(v, n, lit);
}

/*
 * One field line of a kind that means something (its name at line): what
 * it says, and what the rewrite needs to know of it. value..eol is the value
 * after the colon. 0, or -400. libhttp-parser as Debian ships it (2.9.4-5,
 * CVE-2020-8287) forgets an earlier chunked at each name that begins with
 * transfer-encoding: the last such field decides.
 */
static int special_field(struct head *h, struct hm_plan *plan, const char *buf, enum hm_field kind,
                         const char *line, const char *value, const char *eol)
{
    if (kind == HF_HOST) {
        h->n_host++;
        return 0;
    }
    if (hf_noted(kind))
        hm_plan_note(plan, kind, (size_t)(line - buf), (size_t)(eol + 2 - line));
    const char *v = value;
    while (v < eol && is_ows(*v))
        v++;
    switch (kind) {
    case HF_CONTENT_LENGTH:
        if (++h->n_cl > 1)   /* libhttp-parser refuses a second one, before CONNECT is answered */
            return -400;
        return content_length(h, v, eol);
    case HF_TRANSFER_ENCODING:
        h->n_te++;
        h->te_chunked_only = trimmed_is(v, eol, "chunked", 7);
        h->te_noted = true;
        h->chunked = v < eol && te_chunked(v, eol);
        return 0;
    case HF_TRANSFER_ENCODING_MORE:
        h->te_noted = true;
        h->chunked = false;
        return 0;
    case HF_EXPECT:
        h->expect_continue = trimmed_is(v, eol, "100-continue", 12);
        return 0;
    case HF_CONNECTION:
        hm_plan_connection(plan, &h->n_named, value, eol);
        /* fall through */
    case HF_PROXY_CONNECTION:
        if (v < eol)
            h->conn |= connection_options(v, eol);
        return 0;
    case HF_UPGRADE:
        if (v < eol)
            h->upgrade_field = true;
        return 0;
    default:
        return 0;
    }
}

/*
 * The field lines from p to the blank line. Returns the head's length, or
 * -400 (also for a head cut short by end: only a complete head's verdict
 * counts).
 */
static int fields(struct head *h, struct hm_plan *plan, const char *buf, const char *p, const char *end)
{
    for (;;) {
        if (end - p < 2)
            return -400;
        if (*p == '\r')
            return p[1] == '\n' ? (int)(p + 2 - buf) : -400;
        const char *name = p;
        while (p < end && is_tchar((unsigned char)*p))
            p++;
        if (p == name || p == end || *p != ':')
            return -400;   /* no name, whitespace before the colon, or obs-fold */
        const char *value = ++p;
        p = hb_value_run(buf, p, end);
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return -400;
        enum hm_field kind = hf_kind(name, (size_t)(value - 1 - name));
        if (kind != HF_OTHER && special_field(h, plan, buf, kind, name, value, p) < 0)
            return -400;
        p += 2;
    }
}

/*
 * Reads the head at buf, looking no further than end. Returns its length,
 * or -status. The verdict is exact for a complete head free of NUL and bare
 * CR or LF (what hm_head_parse checks first); on any other input a value
 * <= 0 only says the walk did not accept it.
 */
static int walk(struct head *h, struct hm_plan *plan, enum hm_kind kind, const char *buf, const char *end)
{
    memset(h, 0, sizeof *h);
    plan->n_lines = 0;
    plan->named = 0;
    plan->walk = false;
    int n = kind == HM_REQUEST ? request_line(h, buf, end) : status_line(h, buf, end);
    if (n < 0)
        return n;
    return fields(h, plan, buf, buf + n, end);
}

/* ---- what follows from it ------------------------------------------------ */

static bool idempotent(unsigned method)
{
    switch (method) {
    case HTTP_GET: case HTTP_HEAD: case HTTP_OPTIONS: case HTTP_TRACE: case HTTP_PUT: case HTTP_DELETE:
        return true;
    default:
        return false;
    }
}

/* What the message is once its head is read: its framing, and whether it is kept. */
struct verdict {
    bool skip_body, complete, close_delimited, keepalive;
    enum hm_framing framing;
};

/*
 * How libhttp-parser frames the body once the head is read: no body after
 * HEAD, 1xx, 204 and 304, nor for an upgrade (CONNECT included) without one;
 * a Transfer-Encoding that does not end in chunked is read to the close in
 * a response, refused (-400) in a request.
 */
static int framing_of(const struct head *h, bool request, bool skip_body)
{
    bool connect = request && h->method == HTTP_CONNECT;
    bool upgrade = connect || ((h->conn & CONN_UPGRADE) && h->upgrade_field && (request || h->status == 101));
    bool has_body = h->chunked || (h->n_cl && h->content_length > 0);
    if (skip_body || (upgrade && (connect || !has_body)))
        return HM_NO_BODY;
    if (h->chunked)
        return HM_CHUNKED;
    if (h->te_noted)
        return request ? -400 : HM_BY_CLOSE;
    if (h->n_cl)
        return h->content_length ? HM_BY_LENGTH : HM_NO_BODY;
    return request ? HM_NO_BODY : HM_BY_CLOSE;
}

/*
 * The rules that need the whole head, in the order that decides the
 * status: libhttp-parser's refusals (past its 80 KiB, Content-Length beside
 * a Transfer-Encoding, framing_of's) before CONNECT's 501, the relay's
 * framing rules after it. Returns 0 or -status.
 */
static int judge(const struct head *h, enum hm_kind kind, bool head_request, struct verdict *v)
{
    bool request = kind == HM_REQUEST;
    if (h->len > HTTP_MAX_HEADER_SIZE || (h->n_cl && h->te_noted))
        return -400;
    v->skip_body = head_request || (!request && (h->status / 100 == 1 || h->status == 204 || h->status == 304));
    int framing = framing_of(h, request, v->skip_body);
    if (framing < 0)
        return framing;
    if (request && h->method == HTTP_CONNECT)
        return -501;
    if (h->n_te > 1 || (h->n_cl && h->n_te))
        return -400;
    /* A Transfer-Encoding (or transfer-encoding* field) not read as chunked
     * (libhttp-parser's reading: a tab after the token, a later
     * transfer-encoding* field) frames nothing here, yet beside an upgrade it
     * went upstream, where a backend may read the next bytes of the connection
     * (another client's request) as its body: refused, upgrade or not. */
    if (request && ((h->te_noted && !h->chunked) || (h->n_te && (!h->te_chunked_only || h->minor == 0)) ||
                    h->n_host > 1 || (h->minor == 1 && h->n_host == 0)))
        return -400;
    v->framing = (enum hm_framing)framing;
    v->complete = framing == HM_NO_BODY;
    v->close_delimited = !request && !v->skip_body && !h->chunked && !h->n_cl;
    /* libhttp-parser's http_should_keep_alive: its "needs EOF" is close_delimited here. */
    bool kept = h->minor == 1 ? !(h->conn & CONN_CLOSE) : (h->conn & CONN_KEEP_ALIVE) != 0;
    v->keepalive = kept && !v->close_delimited;
    return 0;
}

static void commit(struct hm_msg *m, enum hm_kind kind, const struct head *h, const struct verdict *v,
                   const struct hm_plan *plan)
{
    bool request = kind == HM_REQUEST;
    m->h = (struct hm_head){
        .head_len = h->len,
        .method = h->method,   /* HTTP_DELETE (0) in a response, as libhttp-parser left it */
        .status = h->status,
        .major = 1,
        .minor = h->minor,
        .keepalive = v->keepalive,
        .chunked = h->chunked,
        .has_length = h->n_cl == 1,
        .content_length = h->content_length,
        .expect_continue = request && h->expect_continue && h->minor == 1,
        .idempotent = idempotent(h->method),
        .head_method = request && h->method == HTTP_HEAD,
        .close_delimited = v->close_delimited,
        .path = h->target,
        .path_len = h->target_len,
    };
    m->complete = v->complete;
    m->skip_body = v->skip_body;
    m->dechunk = false;
    m->wp = NULL;
    m->payload = 0;
    m->framing = (uint8_t)v->framing;
    m->response = !request;
    m->parser_ready = false;
    m->left = v->framing == HM_BY_LENGTH ? h->content_length : 0;
    m->plan.n_lines = plan->n_lines;
    m->plan.named = plan->named;
    m->plan.walk = plan->walk;
    if (plan->n_lines)
        memcpy(m->plan.line, plan->line, plan->n_lines * sizeof plan->line[0]);
}

/*
 * What decides first for a head the walk did not accept: where the head
 * ends (-431 past max_head), NUL or a bare CR or LF in it (-400, also while
 * it is still arriving), or 0 while it is incomplete. 1 with *head_len when
 * it is complete.
 */
static int head_bounds(const char *buf, size_t len, size_t max_head, size_t *head_len)
{
    const char *e = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
    size_t n = e ? (size_t)(e - buf) + 4 : 0;
    if (n > max_head || (!e && len > max_head))
        return -431;
    if (hm_head_bad_prefix(buf, e ? n : len))
        return -400;
    if (!e)
        return 0;
    *head_len = n;
    return 1;
}

int hm_head_parse(struct hm_msg *m, enum hm_kind kind, const char *buf, size_t len, size_t max_head,
                  bool head_request)
{
    struct head h;
    struct hm_plan plan;
    /* A walk that accepts a head saw every byte of it, up to its first blank
     * line within max_head: what head_bounds would say. Anything else takes
     * head_bounds' steps first, then the walk's verdict on the head alone. */
    int n = walk(&h, &plan, kind, buf, buf + (len < max_head ? len : max_head));
    if (n <= 0) {
        size_t head_len;
        int r = head_bounds(buf, len, max_head, &head_len);
        if (r <= 0)
            return r;
        n = walk(&h, &plan, kind, buf, buf + head_len);
        if (n <= 0)
            return n;
    }
    h.len = (size_t)n;
    struct verdict v;
    int bad = judge(&h, kind, head_request, &v);
    if (bad < 0)
        return bad;
    commit(m, kind, &h, &v, &plan);
    return n;
}
