/* SPDX-License-Identifier: MIT */
/*
 * The relay tests' harness: a scripted backend (a forked process, one child
 * per connection) whose answer depends on the path, the relay started as a
 * program, and raw-socket clients.
 */
#ifndef RELAY_HARNESS_H
#define RELAY_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "testutil.h"

/* Outside a running test (set-up): print and abort. */
#define H_REQUIRE(cond, ...) \
    do { if (!(cond)) { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } } while (0)

/* Bytes the backend keeps of what reached it while the test asks (record). */
#define BACKEND_LOG_MAX (8u << 20)

/* What the backend saw, shared with the test. */
struct backend_seen {
    _Atomic int requests, posts;
    _Atomic int release;   /* /early sends its final response once the test sets this */
    _Atomic int record;    /* every byte any connection reads goes to log while set */
    _Atomic size_t log_len;   /* may pass BACKEND_LOG_MAX: then the log is cut short */
    char log[BACKEND_LOG_MAX];
};

/* Appends what a connection read to the log, when the test asks. */
static inline void backend_record(struct backend_seen *seen, const char *p, size_t n)
{
    if (!atomic_load(&seen->record))
        return;
    size_t at = atomic_fetch_add(&seen->log_len, n);
    if (at < BACKEND_LOG_MAX)
        memcpy(seen->log + at, p, n < BACKEND_LOG_MAX - at ? n : BACKEND_LOG_MAX - at);
}

static inline const char *relay_bin(void)
{
    const char *p = getenv("ORBIT_RELAY_BIN");
    H_REQUIRE(p && access(p, X_OK) == 0, "ORBIT_RELAY_BIN names no program");
    return p;
}

static inline void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0)
            return;
        c += k;
        n -= (size_t)k;
    }
}

/* Reads into buf until it holds stop (if any), EOF or timeout; NUL-terminated. Returns bytes. */
static inline size_t read_until(int fd, char *buf, size_t cap, const char *stop, int timeout_ms)
{
    size_t got = 0;
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    buf[0] = 0;
    while (got + 1 < cap && !(stop && strstr(buf, stop))) {
        int left = (int)((end - tu_now_ns()) / 1000000);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t k = read(fd, buf + got, cap - 1 - got);   /* sockets and pipes */
        if (k <= 0)
            break;
        got += (size_t)k;
        buf[got] = 0;
    }
    return got;
}

/* The value of a Content-Length field in a head, or -1. */
static inline long head_length(const char *head)
{
    const char *p = strcasestr(head, "\r\ncontent-length:");
    return p ? strtol(p + 17, NULL, 10) : -1;
}

/* One Content-Length response: head and body into buf. Returns its length, 0 if none came. */
static inline size_t read_response(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t got = read_until(fd, buf, cap, "\r\n\r\n", timeout_ms);
    char *e = strstr(buf, "\r\n\r\n");
    if (!e)
        return got;
    size_t head = (size_t)(e - buf) + 4;
    long cl = head_length(buf);
    while (cl >= 0 && got < head + (size_t)cl && got + 1 < cap) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, timeout_ms) <= 0)
            break;
        ssize_t k = recv(fd, buf + got, cap - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    buf[got] = 0;
    return got;
}

/* The peer closed the connection within ms (EOF or reset, after any bytes left). */
static inline bool closed_within(int fd, int ms)
{
    char b[4096];
    int64_t end = tu_now_ns() + (int64_t)ms * 1000000;
    for (;;) {
        int left = (int)((end - tu_now_ns()) / 1000000);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return false;
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0)
            return true;
    }
}

static inline int connect_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001) };
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* ---- the scripted backend ------------------------------------------------ */

static inline void put_str(int fd, const char *s) { send_all(fd, s, strlen(s)); }

/* A 200 whose body is text. */
static inline void put_body(int fd, const char *text, size_t n)
{
    char head[128];
    snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
    put_str(fd, head);
    send_all(fd, text, n);
}

/* Answers one request by its path; false to close the connection. */
static inline bool backend_answer(int fd, const char *req, size_t head_len, size_t body_len, struct backend_seen *seen)
{
    char path[256] = "";
    sscanf(req, "%*s %255s", path);
    atomic_fetch_add(&seen->requests, 1);
    if (strncmp(req, "POST ", 5) == 0)
        atomic_fetch_add(&seen->posts, 1);
    if (strcmp(path, "/drop") == 0)
        return false;                       /* took the request, never answers */
    if (strcmp(path, "/slow") == 0) {
        sleep(30);
        return false;
    }
    if (strcmp(path, "/early") == 0) {       /* interim responses; the final one once released */
        put_str(fd, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\nKeep-Alive: timeout=1\r\n\r\n");
        for (int i = 0; i < 5000 && !atomic_load(&seen->release); i++)
            usleep(1000);
        put_str(fd, "HTTP/1.1 102 Processing\r\n\r\n");
        put_body(fd, path, strlen(path));
    } else if (strcmp(path, "/big") == 0) {          /* 64 MiB: more than any socket buffers hold */
        static char chunk[1 << 16];
        memset(chunk, 'b', sizeof chunk);
        put_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 67108864\r\n\r\n");
        for (int i = 0; i < 1024; i++)
            send_all(fd, chunk, sizeof chunk);
    } else if (strcmp(path, "/stall-long") == 0 || strcmp(path, "/cut-long") == 0) {
        /* A long body (the relay splices it) that stops after 256 KiB of 1 MiB: stalled, or cut. */
        static char part[256 << 10];
        memset(part, 'c', sizeof part);
        put_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n");
        send_all(fd, part, sizeof part);
        if (path[1] == 's')
            sleep(30);
        return false;
    } else if (strcmp(path, "/stall-body") == 0) {   /* a head and part of the body, then nothing */
        put_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        sleep(30);
        return false;
    } else if (strcmp(path, "/early-slow") == 0) {   /* an interim response, then nothing */
        put_str(fd, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n");
        sleep(30);
        return false;
    } else if (strncmp(path, "/100/", 5) == 0) {
        put_str(fd, "HTTP/1.1 100 Continue\r\n\r\n");
        put_body(fd, path, strlen(path));
    } else if (strcmp(path, "/chunked") == 0) {
        put_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
                    "5\r\nhello\r\n6;x=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n");
    } else if (strcmp(path, "/chunked-bare-lf") == 0) {   /* TERM.EXT in a response */
        put_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;\nhello\r\n0\r\n\r\n");
    } else if (strcmp(path, "/close") == 0) {
        put_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nclose-delimited body");
        return false;
    } else if (strcmp(path, "/hop") == 0) {
        put_str(fd, "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                    "Upgrade: h2\r\nProxy-Authenticate: Basic\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok");
    } else if (strcmp(path, "/echo") == 0) {
        char *out = malloc(head_len + 64);
        int n = snprintf(out, head_len + 64, "%.*sbody=%zu", (int)head_len, req, body_len);
        put_body(fd, out, (size_t)n);
        free(out);
    } else {
        put_body(fd, path, strlen(path));
    }
    return true;
}

static inline uint64_t fnv1a(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_BASIS 0xcbf29ce484222325ull

/* The backend's input: bytes [off, len) of buf are unread; more come from fd. */
struct bin { int fd; char *buf; size_t cap, off, len; struct backend_seen *seen; };

/* At least want unread bytes (want < cap/2), or the connection ended. */
static inline void bin_need(struct bin *b, size_t want)
{
    while (b->len - b->off < want) {
        if (b->off > b->cap / 2) {
            memmove(b->buf, b->buf + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        ssize_t k = recv(b->fd, b->buf + b->len, b->cap - 1 - b->len, 0);
        if (k <= 0)
            _exit(0);
        backend_record(b->seen, b->buf + b->len, (size_t)k);
        b->len += (size_t)k;
    }
}

/* One CRLF-ended line (without it), NUL-terminated in place. */
static inline char *bin_line(struct bin *b)
{
    char *eol;
    while (!(eol = memmem(b->buf + b->off, b->len - b->off, "\r\n", 2))) {
        if (b->len - b->off > 4096)
            _exit(0);
        bin_need(b, b->len - b->off + 1);
    }
    char *line = b->buf + b->off;
    *eol = 0;
    b->off = (size_t)(eol - b->buf) + 2;
    return line;
}

/* Reads a chunked body as it comes (any length): its payload's length and hash, its trailer count. */
static inline void backend_chunked(struct bin *b, uint64_t *n, uint64_t *hash, int *trailers)
{
    *n = 0;
    *hash = FNV_BASIS;
    *trailers = 0;
    for (;;) {
        char *line = bin_line(b), *end;
        unsigned long long size = strtoull(line, &end, 16);
        if (end == line)
            _exit(0);
        if (size == 0)
            break;
        while (size > 0) {
            bin_need(b, 1);
            size_t take = b->len - b->off < size ? b->len - b->off : (size_t)size;
            *hash = fnv1a(*hash, b->buf + b->off, take);
            b->off += take;
            *n += take;
            size -= take;
        }
        if (*bin_line(b) != 0)
            _exit(0);   /* chunk data not followed by CRLF */
    }
    while (*bin_line(b) != 0)
        (*trailers)++;
}

/* One connection: requests with Content-Length or chunked bodies, answered in order.
 * /sum answers the body's length, hash and framing. */
static inline void backend_conn(int fd, struct backend_seen *seen)
{
    struct bin b = { .fd = fd, .cap = 4 << 20, .seen = seen };
    b.buf = malloc(b.cap);
    for (;;) {
        char *e;
        while (!(b.buf[b.len] = 0, e = strstr(b.buf + b.off, "\r\n\r\n")))
            bin_need(&b, b.len - b.off + 1);
        size_t head = (size_t)(e - b.buf) + 4 - b.off;
        char *req = malloc(head + 1);
        memcpy(req, b.buf + b.off, head);
        req[head] = 0;
        b.off += head;
        bool chunked = strcasestr(req, "\r\ntransfer-encoding: chunked\r\n") != NULL;
        long cl = head_length(req);
        uint64_t body = cl > 0 ? (uint64_t)cl : 0, hash = FNV_BASIS;
        int trailers = 0;
        if (chunked) {
            backend_chunked(&b, &body, &hash, &trailers);
        } else {
            for (uint64_t left = body; left > 0;) {
                bin_need(&b, 1);
                size_t take = b.len - b.off < left ? b.len - b.off : (size_t)left;
                hash = fnv1a(hash, b.buf + b.off, take);
                b.off += take;
                left -= take;
            }
        }
        bool more;
        if (strncmp(req, "POST /sum ", 10) == 0 || strncmp(req, "PUT /sum ", 9) == 0) {
            char out[160];
            atomic_fetch_add(&seen->requests, 1);
            atomic_fetch_add(&seen->posts, req[1] == 'O');
            int k = snprintf(out, sizeof out, "bytes=%llu fnv=%016llx framing=%s trailers=%d",
                             (unsigned long long)body, (unsigned long long)hash,
                             chunked ? "chunked" : "length", trailers);
            put_body(fd, out, (size_t)k);
            more = true;
        } else {
            more = backend_answer(fd, req, head, (size_t)body, seen);
        }
        free(req);
        if (!more)
            _exit(0);
    }
}

/* Starts the backend; returns its port. */
static inline uint16_t backend_start(pid_t *pid, struct backend_seen **seen)
{
    *seen = mmap(NULL, sizeof **seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    H_REQUIRE(*seen != MAP_FAILED, "mmap failed");
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
    H_REQUIRE(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0, "bind failed");
    H_REQUIRE(listen(lfd, 512) == 0, "listen failed");
    socklen_t al = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &al);
    *pid = fork();
    H_REQUIRE(*pid >= 0, "fork failed");
    if (*pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGCHLD, SIG_IGN);
        for (;;) {
            int c = accept(lfd, NULL, NULL);
            if (c < 0)
                continue;
            if (fork() == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(lfd);
                backend_conn(c, *seen);
            }
            close(c);
        }
    }
    close(lfd);
    return ntohs(a.sin_port);
}

/* ---- the relay ------------------------------------------------------------ */

/* Starts argv with stdout on a pipe; returns the pipe's read end. */
static inline int spawn_out(char *const argv[], pid_t *pid)
{
    int p[2];
    H_REQUIRE(pipe(p) == 0, "pipe failed");
    *pid = fork();
    H_REQUIRE(*pid >= 0, "fork failed");
    if (*pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    return p[0];
}

/* Starts orbit-relay with extra arguments; returns the port it listens on. */
static inline uint16_t relay_start(const char *fleet, uint16_t backend_port, char *const extra[], pid_t *pid)
{
    char up[32];
    snprintf(up, sizeof up, "127.0.0.1:%u", backend_port);
    char *argv[32] = { (char *)relay_bin(), "--fleet", (char *)fleet, "--listen", "127.0.0.1:0",
                       "--upstream", up };
    int n = 7;
    for (int i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    int fd = spawn_out(argv, pid);
    char line[256];
    size_t got = read_until(fd, line, sizeof line, "\n", 15000);
    close(fd);
    H_REQUIRE(got > 0, "the relay did not start");
    char *p = strstr(line, " workers on ");
    H_REQUIRE(p, "unexpected first line '%s'", line);
    p = strchr(p + 12, ':');
    H_REQUIRE(p, "no port in '%s'", line);
    return (uint16_t)atoi(p + 1);
}

static inline void relay_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    tu_wait_child(pid, 10000);
}

#endif
