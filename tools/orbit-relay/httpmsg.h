/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's proxy-side HTTP/1.1: strict head checks (parse.c), the
 * head rewrite that drops hop-by-hop fields (parse.c), and message framing
 * by Content-Length, chunked and close (framing.c). libhttp-parser does the
 * grammar and the framing; the checks refuse what it is lenient about.
 */
#ifndef ORBIT_RELAY_HTTPMSG_H
#define ORBIT_RELAY_HTTPMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <http_parser.h>

enum hm_kind { HM_REQUEST, HM_RESPONSE };

/* What a head says. Pointers point into the buffer that was parsed. */
struct hm_head {
    size_t head_len;            /* through the blank line */
    unsigned method;            /* enum http_method (requests) */
    unsigned status;            /* responses */
    unsigned major, minor;
    bool keepalive;             /* the sender keeps the connection (RFC 9112 9.3) */
    bool chunked;               /* Transfer-Encoding: chunked */
    bool has_length;            /* Content-Length present */
    uint64_t content_length;
    bool expect_continue;       /* Expect: 100-continue */
    bool idempotent;            /* the method may be sent again (RFC 9110 9.2.2) */
    bool head_method;
    bool close_delimited;       /* a response whose body ends at the connection's close */
    const char *path; size_t path_len;
};

/* One message being read: its head, then its body through the parser. */
struct hm_msg {
    http_parser p;
    struct hm_head h;
    bool complete;              /* the message's last byte was fed */
    bool skip_body;             /* response to HEAD, or 1xx/204/304 */
    bool dechunk;               /* compact the chunked payload to the front of each buffer */
    char *wp;                   /* dechunk: where the next payload byte goes */
    uint64_t payload;           /* payload bytes seen */
};

/*
 * Parses and checks one head at buf. Returns the head's length (> 0), 0 while
 * it is incomplete, or -status: -400 malformed or ambiguous (smuggling
 * vectors, a Transfer-Encoding other than chunked), -431 longer than
 * max_head, -501 CONNECT, -505 not HTTP/1.x. head_request: the response
 * answers a HEAD.
 * On success m is ready for hm_body.
 */
int hm_head_parse(struct hm_msg *m, enum hm_kind kind, const char *buf, size_t len, size_t max_head,
                  bool head_request);

/* A bare CR or LF, or a NUL, in the first len bytes of a head still arriving. */
bool hm_head_bad_prefix(const char *buf, size_t len);

/*
 * Feeds body bytes. Returns how many bytes of buf belong to this message
 * (fewer than len when it ends inside buf: m->complete), or -1 when the body
 * is malformed. With m->dechunk, the payload of those bytes is moved to the
 * front of buf and *out says how long it is; otherwise *out = the return value.
 */
ssize_t hm_body(struct hm_msg *m, char *buf, size_t len, size_t *out);

/* The parser's callbacks (parse.c), shared with the framing. */
extern const http_parser_settings hm_settings;

/* The connection closed: 0 if that ends the message (close-delimited), -1 if it was cut short. */
int hm_eof(struct hm_msg *m);

/* Rewrite of a head for the next hop. */
struct hm_rewrite {
    bool drop_expect;           /* the proxy answered 100-continue itself */
    bool drop_te;               /* the body is re-framed: Transfer-Encoding and Content-Length go */
    bool add_length;            /* ... and Content-Length: length is added */
    uint64_t length;
    bool add_chunked;           /* ... or Transfer-Encoding: chunked (the body is re-chunked) */
    const char *connection;     /* "close", "keep-alive" or NULL: the Connection field to add */
};

/*
 * Copies the head at in (head_len bytes, checked by hm_head_parse) to out
 * without its hop-by-hop fields (RFC 9110 7.6.1: Connection and the fields it
 * names, Keep-Alive, TE, Upgrade, Proxy-*), plus what rw asks for. Returns
 * the length written, or -1 when it does not fit in cap.
 */
ssize_t hm_head_rewrite(const char *in, size_t head_len, const struct hm_rewrite *rw, char *out, size_t cap);

#endif
