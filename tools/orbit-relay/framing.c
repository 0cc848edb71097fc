/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: where a message's body ends (RFC 9112 6.3): after
 * Content-Length bytes, after the last chunk and its trailers, or at the
 * connection's close for a response with neither. libhttp-parser walks the
 * body; its callbacks (parse.c) stop it at the message's last byte.
 */
#include "httpmsg.h"

ssize_t hm_body(struct hm_msg *m, char *buf, size_t len, size_t *out)
{
    *out = 0;
    if (m->complete || len == 0)   /* a zero-length feed would mean EOF to the parser */
        return 0;
    m->wp = buf;
    size_t n = http_parser_execute(&m->p, &hm_settings, buf, len);
    enum http_errno err = HTTP_PARSER_ERRNO(&m->p);
    if ((err != HPE_OK && err != HPE_PAUSED) || (!m->complete && n != len) || n > len)
        return -1;
    *out = m->dechunk ? (size_t)(m->wp - buf) : n;
    return (ssize_t)n;
}

int hm_eof(struct hm_msg *m)
{
    if (m->complete)
        return 0;
    if (!m->h.close_delimited)
        return -1;
    http_parser_execute(&m->p, &hm_settings, NULL, 0);
    return m->complete ? 0 : -1;
}
