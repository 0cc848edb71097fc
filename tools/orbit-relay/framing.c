/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: where a message's body ends (RFC 9112 6.3): after
 * Content-Length bytes (counted here), after the last chunk and its
 * trailers, or at the connection's close for a response with neither.
 * libhttp-parser walks chunked bodies: the hard part, from the library the
 * relay trusts for it. The head was read without it (parse.c), so the
 * parser is brought to the body by a head of the same kind that says
 * chunked and nothing else, the state a real chunked head leaves it in
 * as far as the body is concerned. libhttp-parser is lenient about the
 * lines between chunks: chunked.c holds them to the RFC first, and a body
 * the two read differently is refused.
 */
#include <stdio.h>
#include <string.h>
#include "httpmsg.h"

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct hm_msg *m = p->data;
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
    struct hm_msg *m = p->data;
    m->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

/* Only the body's callbacks: the head that brings the parser to the body must not touch h. */
static const http_parser_settings body_settings = {
    .on_body = on_body, .on_message_complete = on_message_complete,
};

static const char chunked_request[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
static const char chunked_response[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

/* Brings m->p to the start of a chunked body. */
static void chunked_parser(struct hm_msg *m)
{
    const char *head = m->response ? chunked_response : chunked_request;
    size_t n = m->response ? sizeof chunked_response - 1 : sizeof chunked_request - 1;
    http_parser_init(&m->p, m->response ? HTTP_RESPONSE : HTTP_REQUEST);
    m->p.data = m;
    http_parser_execute(&m->p, &body_settings, head, n);
    hm_chunk_check_init(&m->check);
    m->parser_ready = true;
}

static ssize_t chunked_body(struct hm_msg *m, char *buf, size_t len, size_t *out)
{
    if (!m->parser_ready)
        chunked_parser(m);
    ssize_t strict = hm_chunk_check(&m->check, buf, len);
    if (strict < 0)
        return -1;   /* before the parser moves a byte: the request is refused whole */
    m->p.data = m;
    m->wp = buf;
    size_t n = http_parser_execute(&m->p, &body_settings, buf, len);
    enum http_errno err = HTTP_PARSER_ERRNO(&m->p);
    if ((err != HPE_OK && err != HPE_PAUSED) || (!m->complete && n != len) || n > len)
        return -1;
    if (m->complete != hm_chunk_check_done(&m->check) || n != (size_t)strict)
        return -1;   /* the two end the body in different places: neither is trusted */
    *out = m->dechunk ? (size_t)(m->wp - buf) : n;
    return (ssize_t)n;
}

ssize_t hm_body(struct hm_msg *m, char *buf, size_t len, size_t *out)
{
    *out = 0;
    if (m->complete || len == 0)
        return 0;
    switch (m->framing) {
    case HM_BY_LENGTH: {
        size_t n = len < m->left ? len : (size_t)m->left;
        hm_body_passed(m, n);
        *out = n;
        return (ssize_t)n;
    }
    case HM_BY_CLOSE:
        m->payload += len;
        *out = len;
        return (ssize_t)len;
    case HM_CHUNKED:
        return chunked_body(m, buf, len, out);
    default:
        return 0;   /* HM_NO_BODY is complete from its head on */
    }
}

void hm_body_passed(struct hm_msg *m, uint64_t n)
{
    if (m->framing != HM_BY_LENGTH || m->complete)
        return;
    if (n > m->left)
        n = m->left;
    m->left -= n;
    m->payload += n;
    m->complete = m->left == 0;
}

int hm_eof(struct hm_msg *m)
{
    if (m->complete)
        return 0;
    if (!m->h.close_delimited)
        return -1;
    m->complete = true;
    return 0;
}

size_t hm_chunk_line(char line[HM_CHUNK_LINE_LEN], size_t n)
{
    return (size_t)snprintf(line, HM_CHUNK_LINE_LEN, "%zx\r\n", n);
}

char *hm_chunk_tail(char *e, size_t n, bool last)
{
    if (n) {
        memcpy(e, "\r\n", 2);
        e += 2;
    }
    if (last) {
        memcpy(e, "0\r\n\r\n", 5);   /* trailers are not passed on */
        e += 5;
    }
    return e;
}
