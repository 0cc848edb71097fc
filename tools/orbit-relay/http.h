/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: the demo's own HTTP/1.1 (http.c): the bodies the backend
 * serves and the load generator checks, just enough parsing for those two,
 * and the canned responses the relay answers errors with.
 */
#ifndef ORBIT_RELAY_HTTP_H
#define ORBIT_RELAY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The body the backend returns for a path: its length and bytes are a pure
 * function of the path, so the load generator can check every byte. */
uint64_t http_path_hash(const char *path, size_t len);
size_t http_body_len(const char *path, size_t len);
void http_body_fill(uint64_t hash, size_t off, char *buf, size_t n);
#define HTTP_BODY_MAX (1u << 20)

struct http_req {
    size_t head_len;        /* through the blank line */
    size_t content_length;  /* body bytes after the head */
    const char *path; size_t path_len;
    bool keepalive;
    bool http10;
    bool head_method;       /* HEAD: no body in the response */
    bool chunked;           /* a chunked body follows the head */
};
/* 1: a complete head parsed; 0: need more bytes; -1: malformed or unsupported. */
int http_parse_request(const char *buf, size_t len, struct http_req *out);

struct http_resp { size_t head_len; size_t content_length; int status; bool keepalive; };
int http_parse_response(const char *buf, size_t len, struct http_resp *out);

/* A canned error response (no body beyond the reason). Returns its length. */
int http_error(char *buf, size_t len, int status, const char *reason, bool close);
/* The reason phrase of the statuses the relay answers with ("Error" for others). */
const char *http_reason(int status);

#endif
