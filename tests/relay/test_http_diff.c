/* SPDX-License-Identifier: MIT */
/*
 * The relay's single-pass HTTP reader against the reader it replaced
 * (hm_oracle.c), on a deterministic corpus: the cases of test_http_parse.c;
 * heads cut at every length and with each byte replaced by bytes that
 * matter to the grammar; field names in every case; Content-Length,
 * Transfer-Encoding, Connection, Host, Expect and Upgrade values combined;
 * every method libhttp-parser knows and some it does not; every status
 * 100..599; heads at libhttp-parser's 80 KiB limit. hm_diff compares
 * every result; a difference fails with the input that showed it.
 *
 * HM_DIFF_SEEDS=dir also writes the base inputs there, as fuzz_http_diff
 * inputs (a flag byte, then the bytes).
 */
#include <stdio.h>
#include <string.h>
#include "hm_diff.h"
#include "http_smuggling.h"
#include "testutil.h"

/* The input, printable. */
static const char *shown(const char *s, size_t n)
{
    static char buf[4096];
    size_t at = 0;
    for (size_t i = 0; i < n && at + 8 < sizeof buf; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            buf[at++] = (char)c;
        else
            at += (size_t)snprintf(buf + at, sizeof buf - at, "\\x%02x", c);
    }
    buf[at] = 0;
    return buf;
}

static unsigned long n_runs;

static void diff_one(const char *s, size_t n, const struct hm_diff_case *c)
{
    n_runs++;
    const char *bad = hm_diff(s, n, c);
    ck_assert_msg(!bad, "%s %s%s%s, max_head %zu, step %zu: %s\n  input: %s", c->kind == HM_REQUEST ? "request" : "response",
                  c->head_request ? "head_request " : "", c->dechunk ? "dechunk " : "", "", c->max_head, c->step, bad,
                  shown(s, n));
}

/* One input read every way: both head_request, both dechunk, pieces of 1, 7 and all; small max_head too. */
static void diff_all(enum hm_kind kind, const char *s, size_t n)
{
    static const size_t steps[] = { 1, 7, 1 << 20 };
    for (int hr = 0; hr < 2; hr++)
        for (int dc = 0; dc < 2; dc++)
            for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
                diff_one(s, n, &(struct hm_diff_case){ kind, hr, dc, 8192, steps[i] });
    diff_one(s, n, &(struct hm_diff_case){ kind, false, false, 16, 3 });
    diff_one(s, n, &(struct hm_diff_case){ kind, false, false, 64, 3 });
    diff_one(s, n, &(struct hm_diff_case){ kind, false, false, n > 4 ? n - 4 : 1, 3 });
}

/* A mutant: fewer ways, as there are many. */
static void diff_some(enum hm_kind kind, const char *s, size_t n)
{
    diff_one(s, n, &(struct hm_diff_case){ kind, false, true, 8192, 3 });
    diff_one(s, n, &(struct hm_diff_case){ kind, true, false, 8192, 1 << 20 });
}

static void diff_str(enum hm_kind kind, const char *s)
{
    diff_all(kind, s, strlen(s));
}

/* ---- the cases of test_http_parse.c -------------------------------------- */

static const char *const unit_requests[] = {
    HTTP_SMUGGLING_VECTORS,
    "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\nHost",
    "GET / HTTP/1.1\r",
    "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET",
    "GET / HTTP/1.0\r\n\r\n",
    "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT",
    ("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret, Host\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\n"
     "TE: trailers\r\nUpgrade: h2c\r\nProxy-Authorization: x\r\nProxy-Connection: keep-alive\r\nExpect: 100-continue\r\n"
     "X-Kept: 2\r\n\r\n"),
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n",
};

static const char *const unit_responses[] = {
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 200 OK\r\n\r\nabc",
    "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
    "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n",
};

START_TEST(unit_cases)
{
    for (size_t i = 0; i < sizeof unit_requests / sizeof unit_requests[0]; i++)
        diff_str(HM_REQUEST, unit_requests[i]);
    for (size_t i = 0; i < sizeof unit_responses / sizeof unit_responses[0]; i++)
        diff_str(HM_RESPONSE, unit_responses[i]);
    char big[9000];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    diff_all(HM_REQUEST, big, sizeof big);
}
END_TEST

/* ---- mutants of typical messages ----------------------------------------- */

static const char *const base_requests[] = {
    "GET /size/100 HTTP/1.1\r\nHost: 127.0.0.1:28002\r\n\r\n",
    "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;e=1\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT",
    "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    ("GET http://u@h:80/p?q#f HTTP/1.1\r\nHost: h\r\nConnection: close, X-A\r\nX-A: 1\r\nKeep-Alive: 5\r\n"
     "Expect: 100-continue\r\n\r\n"),
    "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    "HEAD / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: x\r\n\r\n",
    "PUT /a HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\nTE: trailers\r\nTrailer: X\r\nContent-Length: 0\r\n\r\n",
    "M-SEARCH * HTTP/1.1\r\nHost: a\r\nClose: 1\r\nConnection: close\r\n\r\n",
};

static const char *const base_responses[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Type: text/plain\r\n\r\nxxxxxxxxxxHTTP",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP",
    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
    "HTTP/1.1 200 OK\r\n\r\nclose-delimited body",
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nxx",
    "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: x\r\nClose: y\r\n"
     "Connection: close\r\n\r\nbody"),
};

static const char interesting[] = { '\r', '\n', 0, ' ', '\t', ':', ',', 0x7f, (char)0x80, 'A', 'a', '-', '0', '9',
                                    '/', '?', '@', '#', 'c', 'k', 'u', ';', '"', '_' };

static void mutants(enum hm_kind kind, const char *s)
{
    size_t n = strlen(s);
    char m[512];
    ck_assert_uint_lt(n + 2, sizeof m);
    for (size_t len = 0; len <= n; len++)   /* cut at every length */
        diff_all(kind, s, len);
    for (size_t i = 0; i < n; i++) {
        memcpy(m, s, n);
        for (size_t k = 0; k < sizeof interesting; k++) {   /* each byte replaced */
            m[i] = interesting[k];
            diff_some(kind, m, n);
        }
        memcpy(m, s, i);   /* each byte gone */
        memcpy(m + i, s + i + 1, n - i - 1);
        diff_some(kind, m, n - 1);
        for (size_t k = 0; k < 6; k++) {   /* a byte more */
            memcpy(m, s, i);
            m[i] = interesting[k];
            memcpy(m + i + 1, s + i, n - i);
            diff_some(kind, m, n + 1);
        }
    }
}

START_TEST(mutated_requests)
{
    mutants(HM_REQUEST, base_requests[_i]);
}
END_TEST

START_TEST(mutated_responses)
{
    mutants(HM_RESPONSE, base_responses[_i]);
}
END_TEST

/* ---- chunked bodies: the smuggling vectors and correct bodies ------------ */

/* A chunked head of kind, the body, then the next message's first bytes; read every way,
 * and with mutants of them all when mutate. */
static void diff_chunked(enum hm_kind kind, const char *body, size_t len, bool mutate)
{
    static char s[512];
    const char *head = kind == HM_REQUEST ? "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                          : "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t h = strlen(head);
    ck_assert_uint_lt(h + len + 8, sizeof s);
    memcpy(s, head, h);
    memcpy(s + h, body, len);
    memcpy(s + h + len, "GET /", 6);
    diff_all(kind, s, h + len + 5);
    if (mutate)
        mutants(kind, s);
}

START_TEST(chunked_vectors)
{
    static const struct http_chunked_vector bad[] = { HTTP_CHUNKED_SMUGGLING_VECTORS };
    static const struct http_chunked_good good[] = { HTTP_CHUNKED_GOOD_BODIES };
    for (int kind = HM_REQUEST; kind <= HM_RESPONSE; kind++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            diff_chunked((enum hm_kind)kind, bad[i].body, bad[i].len, false);
        for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
            diff_chunked((enum hm_kind)kind, good[i].body, strlen(good[i].body), true);
    }
}
END_TEST

/* ---- field names and values ---------------------------------------------- */

static const char *const names[] = {
    "Content-Length", "Transfer-Encoding", "Connection", "Proxy-Connection", "Host", "Expect", "Upgrade",
    "Keep-Alive", "TE", "Trailer", "Proxy-Authorization", "Proxy-", "Close", "Transfer-Encodingx",
    "Transfer-Encoding-Ext", "Content-Lengthx", "Connectionx", "Upgradex", "Hos", "Content-Lengt", "X-Other",
};

static const char *const values[] = {
    "0", "5", "18", "000000000000000005", "1000000000000000000", "5 ", "5  ", "5\t", " 5", "\t5", "+5", "5,5",
    "5 5", "", " ", "chunked", "Chunked", "CHUNKED", "chunked ", "chunked\t", "chunked,", "chunked, gzip",
    "gzip, chunked", "gzip,chunked", "gzip , chunked", "gzip,\tchunked", "gzip, _x, chunked", "gzip, \"x\", chunked",
    "chunkedx", "chunked,chunked", ",chunked", "x, chunked", "identity", "close", "Close", "CLOSE", "close ",
    "close\t", "closed", "clos", "keep-alive", "Keep-Alive", "keep-alive,close", "close, keep-alive", "upgrade",
    "Upgrade", "upgrade, close", "foo, close", "foo,,close", ", close", " _x, close", "@x, close", "[x], close",
    "keep-alive\t", "x-a, keep-alive", "te, trailer, close, expect", "X-Other", "Host", "Content-Length",
    "100-continue", "100-Continue ", "100-continuex", "h2c", "a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, X-Other",
    "\x80\xff", "a:b", "/",
};

/* A request and a response each holding name: value, and naming it from Connection. */
static void field_pair(const char *name, const char *value)
{
    static const char *const bodies[] = { "", "3\r\nabc\r\n0\r\n\r\nNEXT", "abcdefGET / HTTP/1.1\r\n" };
    char s[1024];
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
        snprintf(s, sizeof s, "POST /p HTTP/1.1\r\nHost: a\r\n%s: %s\r\nX-Other: 1\r\n\r\n%s", name, value, bodies[b]);
        diff_some(HM_REQUEST, s, strlen(s));
        snprintf(s, sizeof s, "GET / HTTP/1.0\r\nConnection: %s, x\r\n%s:%s\r\n\r\n%s", name, name, value, bodies[b]);
        diff_some(HM_REQUEST, s, strlen(s));
        snprintf(s, sizeof s, "HTTP/1.1 200 OK\r\n%s: %s\r\nClose: x\r\n\r\n%s", name, value, bodies[b]);
        diff_some(HM_RESPONSE, s, strlen(s));
        snprintf(s, sizeof s, "HTTP/1.0 200 OK\r\n%s:%s \r\nConnection: %s\r\n\r\n%s", name, value, value, bodies[b]);
        diff_some(HM_RESPONSE, s, strlen(s));
    }
}

START_TEST(field_names_and_values)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char v[64];
        size_t n = strlen(names[i]);
        for (size_t j = 0; j < sizeof values / sizeof values[0]; j++)
            field_pair(names[i], values[j]);
        for (size_t k = 0; k <= n + 1; k++) {   /* lower, upper, and each letter's case turned */
            for (size_t c = 0; c < n; c++)
                v[c] = k == n ? (char)(names[i][c] | 0x20) : k == n + 1 ? (char)(names[i][c] & ~0x20) : names[i][c];
            if (k < n)
                v[k] = (char)(v[k] ^ 0x20);
            for (size_t c = 0; c < n; c++)
                if (!((v[c] | 0x20) >= 'a' && (v[c] | 0x20) <= 'z'))
                    v[c] = names[i][c];   /* only letters change case */
            v[n] = 0;
            field_pair(v, "chunked");
            field_pair(v, "5");
            field_pair(v, "close");
            field_pair(v, "100-continue");
        }
    }
}
END_TEST

/* ---- more lines than the plan notes --------------------------------------- */

START_TEST(many_noted_lines)
{
    static const char *const lines[] = { "TE: t\r\n", "Proxy-A: p\r\n", "Keep-Alive: k\r\n", "Close: c\r\n",
                                         "Trailer: x\r\n", "Expect: e\r\n", "X-N: n\r\n", "Upgrade: u\r\n" };
    static const char *const connections[] = { "", "Connection: close\r\n", "Connection: x-n, trailer\r\n",
                                               "Connection: a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,close,x-n\r\n" };
    char fields[2048], s[4096];
    for (unsigned n = 0; n <= HM_PLAN_LINES + 3; n++)
        for (size_t c = 0; c < sizeof connections / sizeof connections[0]; c++) {
            size_t at = (size_t)snprintf(fields, sizeof fields, "%s", connections[c]);
            for (unsigned i = 0; i < n; i++)
                at += (size_t)snprintf(fields + at, sizeof fields - at, "%s", lines[(i * 3 + c) % 8]);
            snprintf(s, sizeof s, "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n", fields);
            diff_some(HM_REQUEST, s, strlen(s));
            snprintf(s, sizeof s, "HTTP/1.1 200 OK\r\n%s\r\n", fields);
            diff_some(HM_RESPONSE, s, strlen(s));
        }
}
END_TEST

/* ---- combinations -------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static unsigned rng(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

#define PICK(a) (a)[rng(sizeof(a) / sizeof((a)[0]))]

static const char *const methods[] = {
#define XX(num, name, string) #string,
    HTTP_METHOD_MAP(XX)
#undef XX
    "get", "GETS", "GE", "MSEARCH", "M-SEARC", "PROPPATC", "PURGEX", "CONNECTX", "BREW", "X-METHOD", "POST",
    "GET", "GET", "HEAD", "A", "UNLINKED", "PATCHY",
};

static const char *const targets[] = {
    "/", "*", "/a?b#c", "/\x80\xff", "http://a/b", "http://u@h:1/p?q", "HTTP://H", "http://a", "http://a?x",
    "http://a@b@c/", "http://a@@b/", "http:/x", "http://", "http:x", "h", "a:443", "[::1]:80", "a@b:1", "1a",
    "/a b", "%", "x/", "http://[::1]:8/", "http://a#b", "http://a%20b/", "*x", "?",
};

static const char *const versions[] = { "HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "HTTP/1.2",
                                        "HTTX/1.1", "http/1.1", "HTTP/1.10", "HTTP/11", "ICE/1.0" };

static const char *const bodies[] = {
    "", "abc", "5\r\nhello\r\n0\r\n\r\n", "0\r\n\r\nGET / HTTP/1.1\r\n", "3\r\nab", "z\r\n",
    "5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\nrest", "0\r\nContent-Length: 5\r\n\r\n", "1\r\na\r\n0\r\nX:\r\n\r\n",
    "A \r\n0123456789\r\n0\r\n\r\n", "0\r\n\r", "ffffffffffffffffff\r\n", "2\r\nabc\r\n0\r\n\r\n",
};

/* One field line from the pools, or a Host. */
static int random_field(char *at, size_t room)
{
    if (rng(4) == 0)
        return snprintf(at, room, "Host: h\r\n");
    const char *sep = rng(5) == 0 ? ":\t" : rng(4) == 0 ? ":" : ": ";
    return snprintf(at, room, "%s%s%s\r\n", PICK(names), sep, PICK(values));
}

static void random_message(enum hm_kind kind)
{
    char s[2048];
    size_t at;
    if (kind == HM_REQUEST)
        at = (size_t)snprintf(s, sizeof s, "%s %s %s\r\n", PICK(methods), PICK(targets), PICK(versions));
    else
        at = (size_t)snprintf(s, sizeof s, "%s %u %s\r\n", rng(6) ? PICK(versions) : "HTTP/1.1", 100 + rng(500),
                              rng(4) ? "OK" : "");
    for (unsigned n = rng(7); n > 0; n--)
        at += (size_t)random_field(s + at, sizeof s - at);
    at += (size_t)snprintf(s + at, sizeof s - at, "\r\n%s", PICK(bodies));
    diff_one(s, at, &(struct hm_diff_case){ kind, rng(5) == 0, rng(2), 8192, 1 + rng(9) });
}

START_TEST(combinations)
{
    for (int i = 0; i < 40000; i++) {
        random_message(HM_REQUEST);
        random_message(HM_RESPONSE);
    }
}
END_TEST

/* ---- start lines --------------------------------------------------------- */

START_TEST(every_method)
{
    char s[256];
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
            snprintf(s, sizeof s, "%s %s HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcd", methods[i], targets[t]);
            diff_some(HM_REQUEST, s, strlen(s));
            snprintf(s, sizeof s, "%s %s HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", methods[i], targets[t]);
            diff_some(HM_REQUEST, s, strlen(s));
            snprintf(s, sizeof s, "%s %s HTTP/1.1\r\nHost: a\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nxy", methods[i],
                     targets[t]);
            diff_some(HM_REQUEST, s, strlen(s));
        }
}
END_TEST

START_TEST(every_status)
{
    static const char *const framing[] = {
        "Content-Length: 3\r\n", "Transfer-Encoding: chunked\r\n", "", "Content-Length: 0\r\n",
        "Upgrade: x\r\nConnection: upgrade\r\n", "Transfer-Encoding: gzip\r\nConnection: keep-alive\r\n",
    };
    char s[256];
    for (unsigned status = 100; status < 600; status++)
        for (size_t f = 0; f < sizeof framing / sizeof framing[0]; f++)
            for (int minor = 0; minor < 2; minor++) {
                snprintf(s, sizeof s, "HTTP/1.%d %u%s\r\n%s\r\n3\r\nabc\r\n0\r\n\r\n", minor, status,
                         status % 7 ? " Reason" : "", framing[f]);
                diff_some(HM_RESPONSE, s, strlen(s));
            }
}
END_TEST

/* ---- libhttp-parser's 80 KiB --------------------------------------------- */

START_TEST(header_size_limit)
{
    static char s[HTTP_MAX_HEADER_SIZE + 64];
    static const char *const starts[] = { "GET / HTTP/1.1\r\nHost: a\r\nX: ", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX: ",
                                          "HTTP/1.1 200 OK\r\nX: " };
    for (size_t k = 0; k < 3; k++)
        for (size_t len = HTTP_MAX_HEADER_SIZE - 2; len <= HTTP_MAX_HEADER_SIZE + 2; len++) {
            size_t at = (size_t)snprintf(s, sizeof s, "%s", starts[k]);
            memset(s + at, 'v', len - at - 4);
            memcpy(s + len - 4, "\r\n\r\nab", 6);
            enum hm_kind kind = k == 2 ? HM_RESPONSE : HM_REQUEST;
            diff_one(s, len + 2, &(struct hm_diff_case){ kind, false, false, 100000, 1 << 20 });
            diff_one(s, len + 2, &(struct hm_diff_case){ kind, false, false, len, 1 });
            diff_one(s, len + 2, &(struct hm_diff_case){ kind, false, false, len - 1, 1 });
        }
}
END_TEST

/* The base inputs as fuzz_http_diff seeds: flag byte (kind; pieces of 3 bytes), then the bytes. */
static void write_seeds(const char *dir)
{
    const char *const *lists[] = { base_requests, base_responses, unit_requests, unit_responses };
    size_t counts[] = { sizeof base_requests / sizeof base_requests[0], sizeof base_responses / sizeof base_responses[0],
                        sizeof unit_requests / sizeof unit_requests[0], sizeof unit_responses / sizeof unit_responses[0] };
    for (size_t l = 0; l < 4; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            char path[512];
            snprintf(path, sizeof path, "%s/seed-%zu-%zu", dir, l, i);
            FILE *f = fopen(path, "wb");
            if (!f)
                continue;
            fputc((l & 1 ? 1 : 0) | 2 << 3, f);
            fwrite(lists[l][i], 1, strlen(lists[l][i]), f);
            fclose(f);
        }
}

int main(void)
{
    if (getenv("HM_DIFF_SEEDS")) {
        write_seeds(getenv("HM_DIFF_SEEDS"));
        return 0;
    }
    Suite *s = suite_create("relay_http_diff");
    TCase *tc = tcase_create("diff");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, unit_cases);
    tcase_add_loop_test(tc, mutated_requests, 0, sizeof base_requests / sizeof base_requests[0]);
    tcase_add_loop_test(tc, mutated_responses, 0, sizeof base_responses / sizeof base_responses[0]);
    tcase_add_test(tc, chunked_vectors);
    tcase_add_test(tc, field_names_and_values);
    tcase_add_test(tc, many_noted_lines);
    tcase_add_test(tc, combinations);
    tcase_add_test(tc, every_method);
    tcase_add_test(tc, every_status);
    tcase_add_test(tc, header_size_limit);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
