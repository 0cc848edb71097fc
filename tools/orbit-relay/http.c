/* SPDX-License-Identifier: MIT */
/* orbit-relay: just enough HTTP/1.1, and the deterministic bodies. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include "http.h"

uint64_t http_path_hash(const char *path, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)path[i]) * 0x100000001b3ull;
    return h;
}

/* "/size/N..." asks for exactly N bytes (up to HTTP_BODY_MAX); any other path
 * gets 32..2048 bytes chosen by its hash. */
size_t http_body_len(const char *path, size_t len)
{
    if (len > 6 && memcmp(path, "/size/", 6) == 0) {
        size_t n = 0;
        for (size_t i = 6; i < len && isdigit((unsigned char)path[i]) && n <= HTTP_BODY_MAX; i++)
            n = n * 10 + (size_t)(path[i] - '0');
        return n > HTTP_BODY_MAX ? HTTP_BODY_MAX : n;
    }
    return 32 + (size_t)(http_path_hash(path, len) % 2017);
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Byte i of the body is a letter picked by a counter-based generator, so any
 * range can be produced (or checked) without the bytes before it. */
void http_body_fill(uint64_t hash, size_t off, char *buf, size_t n)
{
    static const char alphabet[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t i = 0;
    while (i < n) {
        size_t pos = off + i;
        uint64_t r = splitmix64(hash ^ (uint64_t)(pos / 8) * 0xd1b54a32d192ed03ull);
        for (size_t k = pos % 8; k < 8 && i < n; k++, i++)
            buf[i] = alphabet[(r >> (k * 8)) & 63];
    }
}

/* Bytes through the blank line that ends the head, or 0 while it is incomplete. */
static size_t head_length(const char *buf, size_t len)
{
    const char *p = memmem(buf, len, "\r\n\r\n", 4);
    return p ? (size_t)(p - buf) + 4 : 0;
}

/* The next "\r\n" in [p, end), or NULL. */
static const char *find_crlf(const char *p, const char *end)
{
    for (; p + 1 < end; p++)
        if (p[0] == '\r' && p[1] == '\n')
            return p;
    return NULL;
}

/* Header value of a line "Name: value\r\n" if its name matches. */
static bool header_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n < k + 1 || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *val = v;
    *vlen = (size_t)(end - v);
    return true;
}

static bool contains_token(const char *v, size_t n, const char *tok)
{
    size_t k = strlen(tok);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp(v + i, tok, k) == 0)
            return true;
    return false;
}

static int parse_length(const char *v, size_t n, size_t *out)
{
    size_t x = 0;
    if (n == 0 || n > 12)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return -1;
        x = x * 10 + (size_t)(v[i] - '0');
    }
    *out = x;
    return 0;
}

/* Walks the header lines after the first; fills length and connection flags. */
static int parse_headers(const char *p, const char *end, size_t *clen, int *conn, bool *chunked)
{
    *clen = 0;
    *conn = 0;      /* 1 keep-alive, -1 close */
    *chunked = false;
    while (p < end) {
        const char *eol = find_crlf(p, end);
        if (!eol)
            return -1;
        size_t n = (size_t)(eol - p);
        const char *v;
        size_t vn;
        if (n == 0)
            break;
        if (header_is(p, n, "Content-Length", &v, &vn) && parse_length(v, vn, clen) < 0)
            return -1;
        if (header_is(p, n, "Transfer-Encoding", &v, &vn) && contains_token(v, vn, "chunked"))
            *chunked = true;
        if (header_is(p, n, "Connection", &v, &vn))
            *conn = contains_token(v, vn, "close") ? -1 : contains_token(v, vn, "keep-alive") ? 1 : 0;
        p = eol + 2;
    }
    return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_req *out)
{
    size_t head = head_length(buf, len);
    if (head == 0)
        return len > 16384 ? -1 : 0;
    const char *end = buf + head;
    const char *eol = find_crlf(buf, end);
    if (!eol)
        return -1;
    const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || (size_t)(eol - sp2 - 1) != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->head_len = head;
    out->path = sp1 + 1;
    out->path_len = (size_t)(sp2 - sp1 - 1);
    out->http10 = sp2[8] == '0';
    out->head_method = sp1 - buf == 4 && memcmp(buf, "HEAD", 4) == 0;
    int conn;
    bool chunked;
    if (parse_headers(eol + 2, end, &out->content_length, &conn, &chunked) < 0 || (chunked && out->content_length))
        return -1;
    out->chunked = chunked;
    out->keepalive = out->http10 ? conn > 0 : conn >= 0;
    return 1;
}

int http_parse_response(const char *buf, size_t len, struct http_resp *out)
{
    size_t head = head_length(buf, len);
    if (head == 0)
        return len > 16384 ? -1 : 0;
    const char *end = buf + head;
    if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
        return -1;
    memset(out, 0, sizeof *out);
    out->head_len = head;
    out->status = atoi(buf + 9);
    const char *eol = find_crlf(buf, end);
    if (!eol)
        return -1;
    int conn;
    bool chunked;
    if (out->status < 100 || parse_headers(eol + 2, end, &out->content_length, &conn, &chunked) < 0 || chunked)
        return -1;
    out->keepalive = conn >= 0;
    return 1;
}

int http_error(char *buf, size_t len, int status, const char *reason, bool close)
{
    size_t rl = strlen(reason) + 1;
    int n = snprintf(buf, len, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nContent-Type: text/plain\r\n%s\r\n%s\n",
                     status, reason, rl, close ? "Connection: close\r\n" : "", reason);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

const char *http_reason(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}
