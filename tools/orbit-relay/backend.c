/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay --backend: a tiny keep-alive HTTP/1.1 origin on one io_uring.
 * Every response body is http_body_fill(hash of the path), so a client can
 * verify each byte it gets. One connection does one thing at a time: receive,
 * then send the whole response, then receive again.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "httpmsg.h"
#include "http.h"
#include "modes.h"
#include "relay.h"

#define BE_IN   16384
#define BE_OUT  65536

enum { BE_ACCEPT = 1, BE_RECV, BE_SEND };

struct bconn {
    struct bconn *next, *prev;   /* every open connection, freed at exit */
    int fd;
    size_t in_len;
    size_t out_len, out_off;
    size_t body_left, body_pos;   /* body bytes still to generate */
    uint64_t body_hash;
    bool close_after;
    size_t discard;               /* body bytes still to read and drop before answering */
    bool chunked;                 /* a chunked body is being read and dropped (msg frames it) */
    struct hm_msg msg;
    char in[BE_IN];
    char out[BE_OUT];
};

/* The body of the last path asked for, as far as it was generated: a path
 * asked for again costs a copy, not http_body_fill's hash per 8 bytes (that
 * was 28 % of a 2-CPU machine at 64 KiB responses, the bench's bottleneck). */
#define BE_CACHE (1u << 20)
static struct { uint64_t hash; size_t len; char *buf; } be_cache;

static volatile sig_atomic_t be_stop;
static struct bconn *be_conns;
static void be_on_signal(int sig) { (void)sig; be_stop = 1; }

static void be_prep(struct io_uring *ring, struct bconn *c, int op)
{
    struct io_uring_sqe *sqe = relay_sqe(ring);
    if (op == BE_RECV)
        io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, BE_IN - c->in_len, 0);
    else
        io_uring_prep_send(sqe, c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | (uint64_t)op);
}

/* n bytes of the body of hash from off, through the cache when they fit in it. */
static void be_body(uint64_t hash, size_t off, char *out, size_t n)
{
    if (!be_cache.buf)
        be_cache.buf = malloc(BE_CACHE);
    if (!be_cache.buf || off + n > BE_CACHE) {
        http_body_fill(hash, off, out, n);
        return;
    }
    if (be_cache.hash != hash) {
        be_cache.hash = hash;
        be_cache.len = 0;
    }
    if (off + n > be_cache.len) {
        http_body_fill(hash, be_cache.len, be_cache.buf + be_cache.len, off + n - be_cache.len);
        be_cache.len = off + n;
    }
    memcpy(out, be_cache.buf + off, n);
}

/* Tops the out buffer up with the next part of the body. */
static void be_fill_body(struct bconn *c)
{
    size_t n = BE_OUT - c->out_len;
    if (n > c->body_left)
        n = c->body_left;
    be_body(c->body_hash, c->body_pos, c->out + c->out_len, n);
    c->out_len += n;
    c->body_pos += n;
    c->body_left -= n;
}

/* Drops up to discard bytes of input (a body longer than the buffer). */
static void be_discard(struct bconn *c)
{
    size_t n = c->in_len < c->discard ? c->in_len : c->discard;
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
    c->discard -= n;
}

/* Drops the chunked body's bytes in the input: 1 at its end, 0 for more, -1 malformed. */
static int be_discard_chunked(struct bconn *c)
{
    size_t out;
    ssize_t used = hm_body(&c->msg, c->in, c->in_len, &out);
    if (used < 0)
        return -1;
    memmove(c->in, c->in + used, c->in_len - (size_t)used);
    c->in_len -= (size_t)used;
    c->chunked = !c->msg.complete;
    return c->chunked ? 0 : 1;
}

/* 1: a response is queued in out; 0: need more input; -1: close. */
static int be_take_request(struct bconn *c)
{
    if (c->discard) {   /* the response is queued: it goes once the body is read */
        be_discard(c);
        return c->discard ? 0 : 1;
    }
    if (c->chunked)
        return be_discard_chunked(c);
    struct http_req rq;
    int r = http_parse_request(c->in, c->in_len, &rq);
    if (r <= 0)
        return r < 0 || c->in_len == BE_IN ? -1 : 0;
    size_t blen = http_body_len(rq.path, rq.path_len);
    c->body_hash = http_path_hash(rq.path, rq.path_len);
    c->body_pos = 0;
    c->body_left = rq.head_method ? 0 : blen;
    c->close_after = !rq.keepalive;
    int n = snprintf(c->out, BE_OUT, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nContent-Type: text/plain\r\n%s\r\n",
                     blen, c->close_after ? "Connection: close\r\n" : "");
    c->out_len = (size_t)n;
    c->out_off = 0;
    be_fill_body(c);
    if (rq.chunked) {   /* the parser frames the body; the head goes first */
        if (hm_head_parse(&c->msg, HM_REQUEST, c->in, rq.head_len, BE_IN, false) <= 0)
            return -1;
        c->discard = rq.head_len;
        be_discard(c);
        c->chunked = true;
        return be_discard_chunked(c);
    }
    c->discard = rq.head_len + rq.content_length;   /* any body size: read and dropped */
    be_discard(c);
    return c->discard ? 0 : 1;
}

static void be_close(struct bconn *c)
{
    if (c->prev) c->prev->next = c->next; else be_conns = c->next;
    if (c->next) c->next->prev = c->prev;
    close(c->fd);
    free(c);
}

/* After input arrived or a response went out: answer the next request or read. */
static void be_advance(struct io_uring *ring, struct bconn *c)
{
    int r = be_take_request(c);
    if (r < 0)
        be_close(c);
    else if (r > 0)
        be_prep(ring, c, BE_SEND);
    else
        be_prep(ring, c, BE_RECV);
}

static void be_on_send(struct io_uring *ring, struct bconn *c, int res)
{
    if (res <= 0) {
        be_close(c);
        return;
    }
    c->out_off += (size_t)res;
    if (c->out_off < c->out_len) {
        be_prep(ring, c, BE_SEND);
        return;
    }
    if (c->body_left) {
        c->out_len = c->out_off = 0;
        be_fill_body(c);
        be_prep(ring, c, BE_SEND);
        return;
    }
    if (c->close_after) {
        be_close(c);
        return;
    }
    be_advance(ring, c);
}

static void be_accept(struct io_uring *ring, int lfd)
{
    struct io_uring_sqe *sqe = relay_sqe(ring);
    io_uring_prep_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, BE_ACCEPT);
}

static void be_on_accept(struct io_uring *ring, int lfd, int res)
{
    if (res >= 0) {
        struct bconn *c = malloc(sizeof *c);
        if (!c) {
            close(res);
        } else {
            c->fd = res;
            c->in_len = 0;
            c->discard = 0;
            c->chunked = false;
            c->prev = NULL;
            c->next = be_conns;
            if (be_conns)
                be_conns->prev = c;
            be_conns = c;
            int one = 1;
            setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            be_prep(ring, c, BE_RECV);
        }
    }
    be_accept(ring, lfd);
}

int backend_main(const struct sockaddr_in *addr, int ready_fd, bool quiet)
{
    int lfd = relay_listen_socket(addr, false);
    if (lfd < 0) {
        fprintf(stderr, "orbit-relay backend: listen: %s\n", strerror(-lfd));
        return 1;
    }
    struct sockaddr_in bound;
    socklen_t bl = sizeof bound;
    getsockname(lfd, (struct sockaddr *)&bound, &bl);
    struct io_uring ring;
    int rc = io_uring_queue_init(256, &ring, 0);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay backend: io_uring: %s\n", strerror(-rc));
        return 1;
    }
    struct sigaction sa = { .sa_handler = be_on_signal };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    char text[64];
    relay_format_addr(&bound, text, sizeof text);
    if (!quiet) {
        printf("backend listening on %s\n", text);
        fflush(stdout);
    }
    if (ready_fd >= 0) {
        uint16_t port = ntohs(bound.sin_port);
        if (write(ready_fd, &port, sizeof port) != sizeof port)
            return 1;
        close(ready_fd);
    }
    be_accept(&ring, lfd);
    while (!be_stop) {
        struct io_uring_cqe *cqe;
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
            break;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            uint64_t ud = cqe->user_data;
            int res = cqe->res;
            seen++;
            struct bconn *c = (struct bconn *)(uintptr_t)(ud & ~7ull);
            switch (ud & 7) {
            case BE_ACCEPT: be_on_accept(&ring, lfd, res); break;
            case BE_RECV:
                if (res <= 0) {
                    be_close(c);
                } else {
                    c->in_len += (size_t)res;
                    be_advance(&ring, c);
                }
                break;
            case BE_SEND: be_on_send(&ring, c, res); break;
            default: break;
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
    io_uring_queue_exit(&ring);
    while (be_conns)
        be_close(be_conns);
    free(be_cache.buf);
    be_cache.buf = NULL;
    close(lfd);
    return 0;
}
