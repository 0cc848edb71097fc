/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's head checks, hop-by-hop rewrite and body framing, case by
 * case: what a proxy must refuse (RFC 9112 smuggling vectors), what it must
 * strip (RFC 9110 7.6.1) and where each kind of message ends.
 */
#include <stdlib.h>
#include <string.h>
#include "httpmsg.h"
#include "chunk_grammar.h"
#include "http_smuggling.h"
#include "testutil.h"

static int req(const char *text)
{
    struct hm_msg m;
    return hm_head_parse(&m, HM_REQUEST, text, strlen(text), 8192, false);
}

START_TEST(refuses_smuggling_vectors)
{
    static const char *const bad[] = {
        HTTP_SMUGGLING_VECTORS
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(req(bad[i]) == -400, "case %zu accepted (%d): %s", i, req(bad[i]), bad[i]);
    ck_assert_int_eq(req("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), -505);
    ck_assert_int_eq(req("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"), -501);
    /* A bare LF is refused before the head is complete: nothing waits for more. */
    ck_assert(hm_head_bad_prefix("GET / HTTP/1.1\nHost", 19));
    ck_assert(!hm_head_bad_prefix("GET / HTTP/1.1\r", 15));
    char big[9000];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    struct hm_msg m;
    ck_assert_int_eq(hm_head_parse(&m, HM_REQUEST, big, sizeof big, 8192, false), -431);
}
END_TEST

START_TEST(reads_keepalive_and_framing)
{
    struct hm_msg m;
    const char *a = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET";
    int n = hm_head_parse(&m, HM_REQUEST, a, strlen(a), 8192, false);
    ck_assert_int_eq(n, (int)strlen(a) - 6);
    ck_assert(m.h.keepalive && m.h.has_length && m.h.content_length == 3 && !m.h.idempotent);
    ck_assert(m.h.path_len == 2 && memcmp(m.h.path, "/x", 2) == 0);
    char body[] = "abcGET";
    size_t out;
    ck_assert_int_eq(hm_body(&m, body, 6, &out), 3);
    ck_assert(m.complete);
    const char *b = "GET / HTTP/1.0\r\n\r\n";
    ck_assert_int_gt(hm_head_parse(&m, HM_REQUEST, b, strlen(b), 8192, false), 0);
    ck_assert(!m.h.keepalive && m.complete && m.h.idempotent);
    const char *c = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    ck_assert_int_gt(hm_head_parse(&m, HM_REQUEST, c, strlen(c), 8192, false), 0);
    ck_assert(m.h.keepalive);
    const char *d = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n";
    ck_assert_int_gt(hm_head_parse(&m, HM_REQUEST, d, strlen(d), 8192, false), 0);
    ck_assert(!m.h.keepalive && m.h.expect_continue);
}
END_TEST

START_TEST(chunked_request_with_trailers)
{
    struct hm_msg m;
    const char *h = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    ck_assert_int_eq(hm_head_parse(&m, HM_REQUEST, h, strlen(h), 8192, false), (int)strlen(h));
    ck_assert(m.h.chunked && !m.complete);
    m.dechunk = true;
    char body[] = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
    size_t len = strlen(body), out, total = 0;
    /* Fed in two pieces: the framing holds across calls. */
    ssize_t u1 = hm_body(&m, body, 9, &out);
    ck_assert_int_eq(u1, 9);
    memmove(body + out, body + 9, len - 9);   /* keep the payload contiguous, as the relay does */
    total = out;
    ssize_t u2 = hm_body(&m, body + total, len - 9, &out);
    ck_assert(m.complete);
    ck_assert_int_eq(u2, (ssize_t)(len - 9 - 4));
    total += out;
    ck_assert_uint_eq(total, 11);
    ck_assert(memcmp(body, "hello world", 11) == 0);
}
END_TEST

static const char chunked_head[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
static const char chunked_resp_head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

/* A chunked body after a head of kind: fed in pieces of step bytes (dechunked), the
 * index of the piece refused (-1: none), the payload in out (NUL-terminated). */
static long feed_chunked(enum hm_kind kind, const char *body, size_t len, size_t step, char *out, bool *complete)
{
    const char *head = kind == HM_REQUEST ? chunked_head : chunked_resp_head;
    struct hm_msg m;
    ck_assert_int_eq(hm_head_parse(&m, kind, head, strlen(head), 8192, false), (int)strlen(head));
    m.dechunk = true;
    char *buf = malloc(len + 1);
    memcpy(buf, body, len);
    size_t off = 0, got = 0;
    long refused = -1;
    for (long piece = 0; off < len && !m.complete; piece++) {
        size_t n = len - off < step ? len - off : step, o;
        ssize_t used = hm_body(&m, buf + off, n, &o);
        if (used < 0) {
            refused = piece;
            break;
        }
        memcpy(out + got, buf + off, o);
        got += o;
        off += (size_t)used;
    }
    out[got] = 0;
    *complete = m.complete;
    free(buf);
    return refused;
}

START_TEST(refuses_malformed_chunk_lines)
{
    static const struct http_chunked_vector bad[] = { HTTP_CHUNKED_SMUGGLING_VECTORS };
    char out[256];
    bool complete;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t at;
        ck_assert_msg(chunk_grammar(bad[i].body, bad[i].len, &at) == -1, "%s: the grammar takes it", bad[i].name);
        for (int kind = HM_REQUEST; kind <= HM_RESPONSE; kind++) {
            ck_assert_msg(feed_chunked((enum hm_kind)kind, bad[i].body, bad[i].len, 1 << 20, out, &complete) == 0,
                          "%s: taken whole", bad[i].name);
            /* A byte at a time: refused at the first byte no correct body has there, not later. */
            long piece = feed_chunked((enum hm_kind)kind, bad[i].body, bad[i].len, 1, out, &complete);
            ck_assert_msg(piece == (long)at, "%s: refused at byte %ld, the grammar says %zu", bad[i].name, piece, at);
        }
    }
}
END_TEST

START_TEST(takes_correct_chunked_bodies)
{
    static const struct http_chunked_good good[] = { HTTP_CHUNKED_GOOD_BODIES };
    char out[256];
    bool complete;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t at, len = strlen(good[i].body);
        ck_assert_int_eq(chunk_grammar(good[i].body, len, &at), 1);
        ck_assert_uint_eq(at, len);
        for (size_t step = 1; step <= len; step += step < 8 ? 1 : 13) {
            ck_assert_int_eq(feed_chunked(HM_REQUEST, good[i].body, len, step, out, &complete), -1);
            ck_assert_msg(complete && strcmp(out, good[i].payload) == 0, "body %zu, step %zu: '%s'", i, step, out);
        }
    }
}
END_TEST

START_TEST(chunk_line_and_trailer_limits)
{
    /* A size line of HM_CHUNK_LINE_MAX bytes (its CRLF included) is taken; one byte more is not.
     * The same for the trailer section and HM_TRAILERS_MAX. */
    static char body[HM_TRAILERS_MAX + 64], out[64];
    bool complete;
    for (int over = 0; over < 2; over++) {
        size_t n = 0;
        memcpy(body, "1;a=", 4);
        n = 4;
        while (n < HM_CHUNK_LINE_MAX - 2 + (size_t)over)
            body[n++] = 'v';
        n += (size_t)sprintf(body + n, "\r\nx\r\n0\r\n\r\n");
        long r = feed_chunked(HM_REQUEST, body, n, 1000, out, &complete);
        ck_assert_msg(over ? r == 4 : (r == -1 && complete), "size line %s the limit: %ld", over ? "past" : "at", r);
        n = (size_t)sprintf(body, "0\r\nX-T: ");
        size_t start = 3;
        while (n - start < HM_TRAILERS_MAX - 4 + (size_t)over)
            body[n++] = 't';
        n += (size_t)sprintf(body + n, "\r\n\r\n");
        r = feed_chunked(HM_REQUEST, body, n, 1000, out, &complete);
        ck_assert_msg(over ? r >= 0 : (r == -1 && complete), "trailers %s the limit: %ld", over ? "past" : "at", r);
    }
}
END_TEST

START_TEST(response_framing)
{
    struct hm_msg m;
    /* 1xx: a head of its own, never the final response. */
    const char *r1 = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    int n = hm_head_parse(&m, HM_RESPONSE, r1, strlen(r1), 8192, false);
    ck_assert_int_eq(n, 25);
    ck_assert(m.h.status == 100 && m.complete);
    n = hm_head_parse(&m, HM_RESPONSE, r1 + 25, strlen(r1) - 25, 8192, false);
    ck_assert(n > 0 && m.h.status == 200 && !m.complete && m.h.keepalive);
    /* Close-delimited: ends only at EOF, and the connection is not kept. */
    const char *r2 = "HTTP/1.1 200 OK\r\n\r\n";
    ck_assert_int_gt(hm_head_parse(&m, HM_RESPONSE, r2, strlen(r2), 8192, false), 0);
    ck_assert(m.h.close_delimited && !m.h.keepalive && !m.complete);
    char b[] = "abc";
    size_t out;
    ck_assert_int_eq(hm_body(&m, b, 3, &out), 3);
    ck_assert(!m.complete);
    ck_assert_int_eq(hm_eof(&m), 0);
    /* A cut Content-Length body is an error at EOF. */
    const char *r3 = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
    ck_assert_int_gt(hm_head_parse(&m, HM_RESPONSE, r3, strlen(r3), 8192, false), 0);
    ck_assert_int_eq(hm_eof(&m), -1);
    /* No body after 204, 304 or for HEAD, whatever the fields say. */
    const char *r4 = "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n";
    ck_assert_int_gt(hm_head_parse(&m, HM_RESPONSE, r4, strlen(r4), 8192, false), 0);
    ck_assert(m.complete && m.h.keepalive);
    ck_assert_int_gt(hm_head_parse(&m, HM_RESPONSE, r3, strlen(r3), 8192, true), 0);
    ck_assert(m.complete);
    /* Duplicate lengths and a bare LF are refused in responses too. */
    const char *r5 = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
    ck_assert_int_eq(hm_head_parse(&m, HM_RESPONSE, r5, strlen(r5), 8192, false), -400);
    const char *r6 = "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n";
    ck_assert_int_eq(hm_head_parse(&m, HM_RESPONSE, r6, strlen(r6), 8192, false), -400);
}
END_TEST

START_TEST(rewrite_drops_hop_by_hop)
{
    const char *in = "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret, Host\r\nX-Secret: 1\r\n"
                     "Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Authorization: x\r\n"
                     "Proxy-Connection: keep-alive\r\nExpect: 100-continue\r\nX-Kept: 2\r\n\r\n";
    struct hm_msg m;
    int n = hm_head_parse(&m, HM_REQUEST, in, strlen(in), 8192, false);
    ck_assert_int_gt(n, 0);
    char out[512];
    struct hm_rewrite rw = { .drop_expect = true, .connection = "close" };
    ssize_t k = hm_head_rewrite(in, (size_t)n, &rw, out, sizeof out);
    ck_assert_int_gt(k, 0);
    out[k] = 0;
    ck_assert_str_eq(out, "GET / HTTP/1.1\r\nHost: a\r\nX-Kept: 2\r\nConnection: close\r\n\r\n");
    struct hm_rewrite len = { .drop_te = true, .add_length = true, .length = 11 };
    const char *c = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n";
    n = hm_head_parse(&m, HM_REQUEST, c, strlen(c), 8192, false);
    k = hm_head_rewrite(c, (size_t)n, &len, out, sizeof out);
    ck_assert_int_gt(k, 0);
    out[k] = 0;
    ck_assert_str_eq(out, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n");
    ck_assert_int_eq(hm_head_rewrite(c, (size_t)n, &len, out, 20), -1);
    /* Re-chunked: the framing fields and Trailer go, one Transfer-Encoding: chunked comes. */
    struct hm_rewrite rechunk = { .drop_te = true, .add_chunked = true };
    k = hm_head_rewrite(c, (size_t)n, &rechunk, out, sizeof out);
    ck_assert_int_gt(k, 0);
    out[k] = 0;
    ck_assert_str_eq(out, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("relay_http");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, refuses_smuggling_vectors);
    tcase_add_test(tc, reads_keepalive_and_framing);
    tcase_add_test(tc, chunked_request_with_trailers);
    tcase_add_test(tc, refuses_malformed_chunk_lines);
    tcase_add_test(tc, takes_correct_chunked_bodies);
    tcase_add_test(tc, chunk_line_and_trailer_limits);
    tcase_add_test(tc, response_framing);
    tcase_add_test(tc, rewrite_drops_hop_by_hop);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
