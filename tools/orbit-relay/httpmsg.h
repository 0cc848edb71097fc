/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's proxy-side HTTP/1.1: the strict head scanner (parse.c), the
 * head rewrite that drops hop-by-hop fields (rewrite.c), and message framing
 * by Content-Length, chunked and close (framing.c). A head is read in one
 * walk that refuses what a proxy must not pass on and otherwise reads it as
 * libhttp-parser would; libhttp-parser walks chunked bodies.
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

/* At most this many field lines a rewrite may drop are noted while a head is read. */
#define HM_PLAN_LINES 16

/*
 * What the rewrite needs from a head, noted while it is read: the field lines
 * it may drop (hop-by-hop, Expect, the framing fields) and the fields the
 * Connection header names. With none of them the rewrite is one copy.
 */
struct hm_plan {
    uint16_t n_lines;           /* lines noted in line[] */
    uint16_t named;             /* the field kinds Connection names: bit 1 << enum hm_field (hm_fields.h) */
    bool walk;                  /* the notes do not say it all: the rewrite reads the head again */
    struct hm_plan_line {
        uint32_t off, len;      /* the line in the head, its CRLF included */
        uint8_t kind;           /* its field's kind */
    } line[HM_PLAN_LINES];
};

/* How a message's body ends once its head is read. */
enum hm_framing { HM_NO_BODY, HM_BY_LENGTH, HM_BY_CLOSE, HM_CHUNKED };

/*
 * A chunked body's framing held to RFC 9112 7.1 (chunked.c): CRLF only, no
 * whitespace in a size line, extensions and trailer lines by their grammar,
 * exactly CRLF after chunk data. Beyond these limits a body is refused too.
 */
#define HM_CHUNK_LINE_MAX 4096                          /* a size line, extensions and CRLF included */
#define HM_TRAILERS_MAX   16384                         /* the trailer section and the body's last CRLF */
#define HM_CHUNK_SIZE_MAX UINT64_C(0x0fffffffffffffff)  /* 15 hex digits past leading zeros */

struct hm_chunk_check {
    uint64_t left;              /* the chunk's size, then its data bytes still to come */
    uint32_t line;              /* bytes of the size line, or of the trailer section, so far */
    uint8_t state;
};

void hm_chunk_check_init(struct hm_chunk_check *k);
/* The next len bytes of a chunked body: how many belong to it (len while it goes on,
 * fewer once its last CRLF was among them), or -1 at a byte no correct body has there
 * (then for every call after it too). */
ssize_t hm_chunk_check(struct hm_chunk_check *k, const char *buf, size_t len);
/* The body's last CRLF was read. */
bool hm_chunk_check_done(const struct hm_chunk_check *k);

/* One message being read: its head, then its body. */
struct hm_msg {
    http_parser p;              /* a chunked body's parser, set up on the body's first bytes */
    struct hm_head h;
    bool complete;              /* the message's last byte was fed */
    bool skip_body;             /* response to HEAD, or 1xx/204/304 */
    bool dechunk;               /* compact the chunked payload to the front of each buffer */
    char *wp;                   /* dechunk: where the next payload byte goes */
    uint64_t payload;           /* payload bytes seen */
    uint8_t framing;            /* enum hm_framing */
    bool response;
    bool parser_ready;          /* p is inside the chunked body, and check at its start */
    struct hm_chunk_check check; /* the same body's lines, held to the RFC */
    uint64_t left;              /* HM_BY_LENGTH: body bytes still to come */
    struct hm_plan plan;
};

/*
 * Parses and checks one head at buf. Returns the head's length (> 0), 0 while
 * it is incomplete, or -status: -400 malformed or ambiguous (smuggling
 * vectors, a Transfer-Encoding other than chunked), -431 longer than
 * max_head, -501 CONNECT, -505 not HTTP/1.x. head_request: the response
 * answers a HEAD.
 * On success m is ready for hm_body (and hm_msg_rewrite); otherwise m is
 * left as it was.
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

/* n bytes of a Content-Length body went on without passing through hm_body
 * (a splice, socket to socket): counted as read, to the body's end at most. */
void hm_body_passed(struct hm_msg *m, uint64_t n);

/* The connection closed: 0 if that ends the message (close-delimited), -1 if it was cut short. */
int hm_eof(struct hm_msg *m);

/* Re-chunking a body that streams on: each piece of payload becomes one chunk. */
#define HM_CHUNK_LINE_LEN 20
/* A chunk's size line for n payload bytes (hex and CRLF) into line; its length. */
size_t hm_chunk_line(char line[HM_CHUNK_LINE_LEN], size_t n);
/* After a chunk's n payload bytes at e: their CRLF (none for n = 0), and the last
 * chunk when last (trailers are not passed on). Returns the new end. */
char *hm_chunk_tail(char *e, size_t n, bool last);

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

/*
 * hm_head_rewrite of the head m was just read from (hm_head_parse returned
 * > 0 for in), by the notes taken while it was read: the same bytes, without
 * reading the head again in the common case.
 */
ssize_t hm_msg_rewrite(const struct hm_msg *m, const char *in, const struct hm_rewrite *rw, char *out, size_t cap);

#endif
