/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's request and response parsing: the strict head checks, the
 * hop-by-hop rewrite and the body framing on arbitrary bytes. The first byte
 * picks the kind, HEAD, dechunking and how the body is cut into feeds.
 * Asserts: counts stay within the buffers, a rewritten head parses again with
 * the same framing (a chunked request's re-chunked head too), and it carries
 * no hop-by-hop field.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "httpmsg.h"

#define MAX_HEAD 8192

static void check_rewrite(const char *buf, const struct hm_msg *m, enum hm_kind kind, bool head_req)
{
    static char out[MAX_HEAD + 256];
    struct hm_rewrite rw = { .drop_expect = true, .connection = "close" };
    ssize_t n = hm_head_rewrite(buf, m->h.head_len, &rw, out, sizeof out);
    if (n < 0)
        return;
    if ((size_t)n > sizeof out)
        abort();
    struct hm_msg again;
    if (hm_head_parse(&again, kind, out, (size_t)n, sizeof out, head_req) != (int)n)
        abort();   /* a head we let through, rewritten, must still be valid */
    if (again.h.chunked != m->h.chunked || again.h.content_length != m->h.content_length || again.h.keepalive)
        abort();
    if (kind == HM_REQUEST && m->h.chunked) {
        /* Re-chunked for a streamed body: still chunked, no Content-Length. */
        struct hm_rewrite rc = { .drop_te = true, .add_chunked = true, .connection = "close" };
        ssize_t k = hm_head_rewrite(buf, m->h.head_len, &rc, out, sizeof out);
        if (k > 0 && (hm_head_parse(&again, kind, out, (size_t)k, sizeof out, head_req) != (int)k ||
                      !again.h.chunked || again.h.has_length))
            abort();
        n = hm_head_rewrite(buf, m->h.head_len, &rw, out, sizeof out);
    }
    static const char *const hop[] = { "keep-alive:", "upgrade:", "te:", "proxy-" };
    for (const char *p = out; (p = memchr(p, '\n', (size_t)(out + n - p))) != NULL; p++)
        for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
            if ((size_t)(out + n - (p + 1)) >= strlen(hop[i]) && strncasecmp(p + 1, hop[i], strlen(hop[i])) == 0)
                abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned flags = data[0];
    enum hm_kind kind = flags & 1 ? HM_RESPONSE : HM_REQUEST;
    bool head_req = flags & 2;
    size_t step = 1 + (flags >> 3);
    char *buf = malloc(size - 1);
    memcpy(buf, data + 1, size - 1);
    size_t len = size - 1;
    struct hm_msg m;
    int r = hm_head_parse(&m, kind, buf, len, MAX_HEAD, head_req);
    if (r > 0) {
        if ((size_t)r > len)
            abort();
        check_rewrite(buf, &m, kind, head_req);
        m.dechunk = (flags & 4) && m.h.chunked;
        size_t off = (size_t)r;
        while (off < len && !m.complete) {
            size_t n = len - off < step ? len - off : step, out;
            ssize_t used = hm_body(&m, buf + off, n, &out);
            if (used < 0)
                break;
            if ((size_t)used > n || out > (size_t)used)
                abort();
            off += (size_t)used;
        }
        if (!m.complete)
            hm_eof(&m);
    } else if (r != 0 && r != -400 && r != -431 && r != -501 && r != -505) {
        abort();
    }
    free(buf);
    return 0;
}
