/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay --load: a closed-loop keep-alive HTTP/1.1 load generator on one
 * io_uring. Each connection sends a GET for /item/<conn>/<seq>, checks the
 * status, the length and every byte of the body against http_body_fill, and
 * records the latency. A connection that ends with a request in flight counts
 * that request as lost and reconnects.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "cli.h"
#include "http.h"
#include "load.h"
#include "relay.h"

#define LD_BUF 16384
#define LD_RECONNECT_NS 20000000ll   /* pause after a refused connect */

enum { LD_CONNECT = 1, LD_SEND, LD_RECV, LD_TIMER, LD_DELAY };

struct lconn {
    int id, fd;
    uint64_t seq;
    bool busy;                 /* an SQE of this connection is in flight */
    bool in_request;           /* a request was sent (at least partly) */
    int64_t t0;
    char req[256];
    size_t req_len, req_off;
    /* the response being read */
    char head[LD_BUF];
    size_t head_len;
    struct http_resp resp;
    bool head_done;
    size_t body_seen, body_len;
    uint64_t body_hash;
    bool body_ok;
    char *chunk;               /* recv buffer for the body */
    struct __kernel_timespec delay;
};

struct load {
    const struct load_opts *o;
    struct load_result *r;
    struct io_uring ring;
    struct lconn *c;
    int64_t start, deadline;
    bool stopping;
    int active;                /* connections not yet retired */
    struct __kernel_timespec tick;
};

static volatile sig_atomic_t ld_interrupted;
static void ld_on_signal(int sig) { (void)sig; ld_interrupted = 1; }

static uint64_t ld_ud(struct lconn *c, int op) { return ((uint64_t)c->id << 8) | (uint64_t)op; }

static void ld_connect(struct load *L, struct lconn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        L->r->connect_errors++;
        c->busy = false;
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct io_uring_sqe *sqe = relay_sqe(&L->ring);
    io_uring_prep_connect(sqe, c->fd, (const struct sockaddr *)&L->o->addr, sizeof L->o->addr);
    io_uring_sqe_set_data64(sqe, ld_ud(c, LD_CONNECT));
    c->busy = true;
}

static void ld_send(struct load *L, struct lconn *c)
{
    struct io_uring_sqe *sqe = relay_sqe(&L->ring);
    io_uring_prep_send(sqe, c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, ld_ud(c, LD_SEND));
    c->busy = true;
}

static void ld_recv(struct load *L, struct lconn *c)
{
    struct io_uring_sqe *sqe = relay_sqe(&L->ring);
    if (c->head_done)
        io_uring_prep_recv(sqe, c->fd, c->chunk, LD_BUF, 0);
    else
        io_uring_prep_recv(sqe, c->fd, c->head + c->head_len, LD_BUF - c->head_len, 0);
    io_uring_sqe_set_data64(sqe, ld_ud(c, LD_RECV));
    c->busy = true;
}

static bool ld_want_more(struct load *L)
{
    if (L->stopping || ld_interrupted)
        return false;
    if (L->o->requests && L->r->sent >= L->o->requests)
        return false;
    if (L->deadline && relay_now_ns() >= L->deadline)
        return false;
    return true;
}

static void ld_retire(struct load *L, struct lconn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->busy = false;
    L->active--;
}

/* Starts the connection's next request, or retires it when the run is over. */
static void ld_next(struct load *L, struct lconn *c)
{
    if (!ld_want_more(L)) {
        ld_retire(L, c);
        return;
    }
    int n = snprintf(c->req, sizeof c->req, "GET /item/%d/%" PRIu64 " HTTP/1.1\r\nHost: %s\r\n\r\n",
                     c->id, c->seq++, L->o->host);
    c->req_len = (size_t)n;
    c->req_off = 0;
    c->head_len = 0;
    c->head_done = false;
    c->in_request = true;
    c->t0 = relay_now_ns();
    const char *path = c->req + 4;
    size_t plen = (size_t)(strchr(path, ' ') - path);
    c->body_hash = http_path_hash(path, plen);
    c->body_len = http_body_len(path, plen);
    L->r->sent++;
    ld_send(L, c);
}

/* The connection broke: a request in flight is lost; connect again. */
static void ld_broken(struct load *L, struct lconn *c)
{
    if (c->in_request) {
        L->r->lost++;
        c->in_request = false;
    }
    close(c->fd);
    c->fd = -1;
    if (!ld_want_more(L)) {
        c->busy = false;
        L->active--;
        return;
    }
    L->r->reconnects++;
    ld_connect(L, c);
}

/* Checks body bytes [body_seen, body_seen + n) against the expected body. */
static void ld_check_body(struct lconn *c, const char *p, size_t n)
{
    char want[4096];
    size_t done = 0;
    while (done < n && c->body_ok) {
        size_t k = n - done < sizeof want ? n - done : sizeof want;
        http_body_fill(c->body_hash, c->body_seen + done, want, k);
        if (memcmp(want, p + done, k) != 0)
            c->body_ok = false;
        done += k;
    }
    c->body_seen += n;
}

static void ld_finish_response(struct load *L, struct lconn *c)
{
    c->in_request = false;
    if (c->resp.status != 200)
        L->r->bad_status++;
    else if (!c->body_ok || c->body_seen != c->body_len)
        L->r->bad_body++;
    else {
        L->r->ok++;
        relay_hist_add(&L->r->hist, (uint64_t)(relay_now_ns() - c->t0));
    }
    L->r->bytes += c->resp.head_len + c->body_seen;
    if (!c->resp.keepalive) {
        close(c->fd);
        c->fd = -1;
        if (ld_want_more(L))
            ld_connect(L, c);
        else
            ld_retire(L, c);
        return;
    }
    ld_next(L, c);
}

static void ld_on_recv(struct load *L, struct lconn *c, int res)
{
    if (res <= 0) {
        ld_broken(L, c);
        return;
    }
    size_t n = (size_t)res;
    if (!c->head_done) {
        c->head_len += n;
        int r = http_parse_response(c->head, c->head_len, &c->resp);
        if (r == 0) {
            ld_recv(L, c);
            return;
        }
        if (r < 0) {
            L->r->bad_body++;
            c->in_request = false;
            ld_broken(L, c);
            return;
        }
        c->head_done = true;
        c->body_seen = 0;
        c->body_ok = c->resp.status != 200 || c->resp.content_length == c->body_len;
        n = c->head_len - c->resp.head_len;
        if (n > c->resp.content_length) {
            L->r->bad_body++;
            c->in_request = false;
            ld_broken(L, c);
            return;
        }
        if (c->resp.status == 200)
            ld_check_body(c, c->head + c->resp.head_len, n);
        else
            c->body_seen += n;
    } else {
        if (c->body_seen + n > c->resp.content_length) {
            L->r->bad_body++;
            c->in_request = false;
            ld_broken(L, c);
            return;
        }
        if (c->resp.status == 200)
            ld_check_body(c, c->chunk, n);
        else
            c->body_seen += n;
    }
    if (c->body_seen < c->resp.content_length)
        ld_recv(L, c);
    else
        ld_finish_response(L, c);
}

static void ld_on_cqe(struct load *L, uint64_t ud, int res)
{
    int op = (int)(ud & 0xff);
    if (op == LD_TIMER)
        return;
    struct lconn *c = &L->c[ud >> 8];
    c->busy = false;
    switch (op) {
    case LD_CONNECT:
        if (res < 0) {
            L->r->connect_errors++;
            close(c->fd);
            c->fd = -1;
            /* Try again shortly (a listener may be restarting). */
            c->delay.tv_sec = 0;
            c->delay.tv_nsec = LD_RECONNECT_NS;
            struct io_uring_sqe *sqe = relay_sqe(&L->ring);
            io_uring_prep_timeout(sqe, &c->delay, 0, 0);
            io_uring_sqe_set_data64(sqe, ld_ud(c, LD_DELAY));
            c->busy = true;
        } else {
            ld_next(L, c);
        }
        break;
    case LD_DELAY:
        if (ld_want_more(L))
            ld_connect(L, c);
        else
            ld_retire(L, c);
        break;
    case LD_SEND:
        if (res <= 0) {
            ld_broken(L, c);
        } else {
            c->req_off += (size_t)res;
            if (c->req_off < c->req_len)
                ld_send(L, c);
            else
                ld_recv(L, c);
        }
        break;
    case LD_RECV: ld_on_recv(L, c, res); break;
    default: break;
    }
}

/* A periodic timeout makes the loop notice the deadline while everything waits. */
static void ld_arm_tick(struct load *L)
{
    L->tick.tv_sec = 0;
    L->tick.tv_nsec = 50000000;
    struct io_uring_sqe *sqe = relay_sqe(&L->ring);
    io_uring_prep_timeout(sqe, &L->tick, 0, 0);
    io_uring_sqe_set_data64(sqe, LD_TIMER);
}

/* After the run: requests still in flight get this long to finish, then count as timeouts. */
#define LD_DRAIN_NS 5000000000ll

int load_run(const struct load_opts *o, struct load_result *r)
{
    struct load L = { .o = o, .r = r };
    memset(r, 0, sizeof *r);
    int n = o->connections;
    int rc = io_uring_queue_init((unsigned)(n * 2 + 64 > 4096 ? 4096 : n * 2 + 64), &L.ring, 0);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay load: io_uring: %s\n", strerror(-rc));
        return -1;
    }
    L.c = calloc((size_t)n, sizeof *L.c);
    char *chunks = malloc((size_t)n * LD_BUF);
    if (!L.c || !chunks)
        return -1;
    struct sigaction sa = { .sa_handler = ld_on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    L.start = relay_now_ns();
    L.deadline = o->duration_s > 0 ? L.start + (int64_t)(o->duration_s * 1e9) : 0;
    for (int i = 0; i < n; i++) {
        L.c[i].id = i;
        L.c[i].chunk = chunks + (size_t)i * LD_BUF;
        ld_connect(&L, &L.c[i]);
        if (L.c[i].busy)
            L.active++;
    }
    ld_arm_tick(&L);
    int64_t drain_end = 0;
    while (L.active > 0) {
        rc = io_uring_submit_and_wait(&L.ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -ETIME)
            break;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        bool ticked = false;
        io_uring_for_each_cqe(&L.ring, head, cqe) {
            seen++;
            if (cqe->user_data == LD_TIMER)
                ticked = true;
            ld_on_cqe(&L, cqe->user_data, cqe->res);
        }
        io_uring_cq_advance(&L.ring, seen);
        if (!ld_want_more(&L) && !drain_end)
            drain_end = relay_now_ns() + LD_DRAIN_NS;
        if (drain_end && relay_now_ns() >= drain_end)
            break;
        if (ticked)
            ld_arm_tick(&L);
    }
    r->elapsed_s = (double)(relay_now_ns() - L.start) / 1e9;
    for (int i = 0; i < n; i++) {
        if (L.c[i].in_request)
            r->timeouts++;
        if (L.c[i].fd >= 0)
            close(L.c[i].fd);
    }
    io_uring_queue_exit(&L.ring);
    free(chunks);
    free(L.c);
    return 0;
}

void load_print(const struct load_opts *o, const struct load_result *r, FILE *out)
{
    uint64_t failed = r->bad_status + r->bad_body + r->timeouts;
    double rps = r->elapsed_s > 0 ? (double)r->ok / r->elapsed_s : 0;
    if (o->json) {
        fprintf(out, "{\"connections\":%d,\"elapsed_s\":%.3f,\"sent\":" CLI_JSON_U64 ",\"ok\":" CLI_JSON_U64
                     ",\"failed\":" CLI_JSON_U64 ",\"lost\":" CLI_JSON_U64 ",\"bad_status\":" CLI_JSON_U64
                     ",\"bad_body\":" CLI_JSON_U64 ",\"timeouts\":" CLI_JSON_U64 ",\"connect_errors\":" CLI_JSON_U64
                     ",\"reconnects\":" CLI_JSON_U64 ",\"bytes\":" CLI_JSON_U64 ",\"rps\":%.1f,\"p50_us\":%.1f"
                     ",\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}\n",
                o->connections, r->elapsed_s, r->sent, r->ok, failed, r->lost, r->bad_status, r->bad_body,
                r->timeouts, r->connect_errors, r->reconnects, r->bytes, rps,
                (double)relay_hist_percentile(&r->hist, 0.50) / 1e3, (double)relay_hist_percentile(&r->hist, 0.99) / 1e3,
                (double)relay_hist_percentile(&r->hist, 0.999) / 1e3, (double)r->hist.max_ns / 1e3);
        return;
    }
    fprintf(out, "%" PRIu64 " requests in %.2f s over %d connections: %.0f req/s\n", r->ok, r->elapsed_s,
            o->connections, rps);
    fprintf(out, "latency p50 %.1f us  p99 %.1f us  p99.9 %.1f us  max %.1f us\n",
            (double)relay_hist_percentile(&r->hist, 0.50) / 1e3, (double)relay_hist_percentile(&r->hist, 0.99) / 1e3,
            (double)relay_hist_percentile(&r->hist, 0.999) / 1e3, (double)r->hist.max_ns / 1e3);
    fprintf(out, "errors: %" PRIu64 " failed (status %" PRIu64 ", body %" PRIu64 ", timeout %" PRIu64 "), %" PRIu64
                 " lost with their connection, %" PRIu64 " connect errors, %" PRIu64 " reconnects\n",
            failed, r->bad_status, r->bad_body, r->timeouts, r->lost, r->connect_errors, r->reconnects);
}
