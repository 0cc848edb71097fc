/* SPDX-License-Identifier: MIT */
/* Requests a proxy must refuse with 400 (RFC 9112 smuggling vectors and
 * malformed heads), for the parser's unit test and its differential test. */
#ifndef RELAY_HTTP_SMUGGLING_H
#define RELAY_HTTP_SMUGGLING_H

#include <stddef.h>

#define HTTP_SMUGGLING_VECTORS \
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n", \
    "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  folded\r\n\r\n", \
    "GET / HTTP/1.1\r\nHost: a\r\n\tX-A: 1\r\n\r\n", \
    "GET / HTTP/1.1\nHost: a\r\n\r\n", \
    "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", \
    "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", \
    /* Read as no body because of the upgrade, yet the field would go upstream. */ \
    "POST / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nTransfer-Encoding: chunked\t\r\n\r\n", \
    "POST / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nTransfer-Encoding: chunked\r\n" \
    "Transfer-Encoding-X: y\r\n\r\n", \
    /* A transfer-encoding* field alone: libhttp-parser notes it and reads no body. */ \
    "POST / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nTransfer-Encoding-X: y\r\n\r\n", \
    "GET / HTTP/1.1\r\n\r\n", \
    "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", \
    "GET / HTTX/1.1\r\nHost: a\r\n\r\n", \
    "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", \
    "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x01" "b\r\n\r\n"

/*
 * Chunked bodies a proxy must refuse (RFC 9112 7.1: chunk = chunk-size
 * [ chunk-ext ] CRLF chunk-data CRLF; CRLF only), each after a head that
 * says chunked: HTTP_CV(name, body). The names are the published chunked
 * smuggling patterns (a front proxy and the relay reading the line ends,
 * extensions or chunk-data ends differently: TERM.EXT, EXT.TERM,
 * TERM.SPILL, SPILL.TERM) and the size and trailer forms parsers disagree
 * on. Each body would be followed by another request; the relay must
 * answer 400, close, and forward nothing of it.
 */
struct http_chunked_vector { const char *name, *body; size_t len; };
#define HTTP_CV(name, body) { name, body, sizeof(body) - 1 }   /* NUL bytes included */
#define HTTP_CHUNKED_SMUGGLING_VECTORS \
    HTTP_CV("TERM.EXT: bare LF after ';'", "2;\nxx\r\n3b\r\n0\r\n\r\n"), \
    HTTP_CV("TERM.EXT: bare LF after an extension", "2;a=b\nxx\r\n3b\r\n0\r\n\r\n"), \
    HTTP_CV("EXT.TERM: bare LF in a quoted extension", "2;a=\"\nxx\"\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("EXT.TERM: bare LF ends a size line", "47\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("TERM.SPILL: two bytes, not CRLF, after chunk data", "3\r\nabcXY0\r\n\r\n"), \
    HTTP_CV("TERM.SPILL: chunk data longer than its size", "3\r\nabcdef\r\n0\r\n\r\n"), \
    HTTP_CV("SPILL.TERM: bare LF after chunk data", "3\r\nabc\n0\r\n\r\n"), \
    HTTP_CV("SPILL.TERM: bare CR after chunk data", "3\r\nabc\r0\r\n\r\n"), \
    HTTP_CV("bare CR ends a size line", "2\rxx\r\n0\r\n\r\n"), \
    HTTP_CV("bare CR in an extension", "2;a\rb\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("bare CR in a trailer", "0\r\nX-T: a\rb\r\n\r\n"), \
    HTTP_CV("bare CR before the last CRLF", "0\r\n\r\r\n"), \
    HTTP_CV("a size of 2^60, past 15 hex digits", "1000000000000000\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("a size of 2^64 - 1", "ffffffffffffffff\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("a size that overflows 64 bits", "10000000000000002\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("leading space in a size", " 2\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("trailing space in a size", "2 \r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("trailing tab in a size", "2\t\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("space before ';'", "2 ;a\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("space after ';'", "2; a\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("space around '=' in an extension", "2;a = b\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("0x prefix", "0x2\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("negative size", "-2\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("plus sign", "+2\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("no size", "\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("an extension without a size", ";a\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("an extension without a name", "2;=b\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("an extension name that is no token", "2;a,b\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("an unterminated quoted extension", "2;a=\"b\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("NUL in an extension", "2;a\0b\r\nxx\r\n0\r\n\r\n"), \
    HTTP_CV("bare LF ends the last chunk", "0\n\r\n"), \
    HTTP_CV("bare LF ends a trailer", "0\r\nX-T: 1\n\r\n"), \
    HTTP_CV("bare LF ends the trailers", "0\r\nX-T: 1\r\n\n"), \
    HTTP_CV("bare LF is the last line", "0\r\n\n"), \
    HTTP_CV("obs-fold in a trailer", "0\r\nX-T: 1\r\n 2\r\n\r\n"), \
    HTTP_CV("space before a trailer's colon", "0\r\nX-T : 1\r\n\r\n"), \
    HTTP_CV("a trailer without a colon", "0\r\nX-T\r\n\r\n")

/* Chunked bodies every reader must take, with the payload each carries. */
struct http_chunked_good { const char *body, *payload; };
#define HTTP_CHUNKED_GOOD_BODIES \
    { "5\r\nhello\r\n0\r\n\r\n", "hello" }, \
    { "5;a=b;c=\"d;\\\"e\"\r\nhello\r\n6;x\r\n world\r\n0;y=z\r\n\r\n", "hello world" }, \
    { "A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij" }, \
    { "0000000000000000000003\r\nabc\r\n000\r\n\r\n", "abc" }, \
    { "3\r\nabc\r\n0\r\nX-A: 1\r\nX-B:\r\nX-C: \t\x80 v\r\n\r\n", "abc" }

#endif
