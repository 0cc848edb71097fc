/* SPDX-License-Identifier: MIT */
/* Requests a proxy must refuse with 400 (RFC 9112 smuggling vectors and
 * malformed heads), for the parser's unit test and its differential test. */
#ifndef RELAY_HTTP_SMUGGLING_H
#define RELAY_HTTP_SMUGGLING_H

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

#endif
