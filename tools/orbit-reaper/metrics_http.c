/* SPDX-License-Identifier: MIT */
/* orbit-reaper --metrics: a small, bounded HTTP/1.1 server for GET /metrics (metrics_http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "metrics_http.h"
#include "prom_fleet.h"

#define HEAD_MAX 8192

struct metrics_http {
    int listen_fd, stop_fd;
    pthread_t thread;
    const char *const *fleets;
    size_t n_fleets;
    const char *backend;
    pthread_mutex_t lock;            /* stats */
    struct orbit_reaper_stats stats;
};

int metrics_addr_parse(const char *text, struct metrics_addr *out, const char **why)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    if (!colon) {
        *why = "not HOST:PORT";
        return -1;
    }
    size_t hl = (size_t)(colon - text);
    if (hl >= sizeof host) {
        *why = "host name too long";
        return -1;
    }
    memcpy(host, text, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {   /* [IPV6] */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    } else if (strchr(host, ':') || strchr(host, '[') || strchr(host, ']')) {
        *why = "an IPv6 address goes in brackets: [::1]:PORT";
        return -1;
    }
    uint64_t port;
    if (cli_parse_u64(colon + 1, 0, 65535, &port, why) < 0 || strncmp(colon + 1, "0x", 2) == 0) {
        *why = "PORT is not a number in 0..65535";
        return -1;
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res;
    char ports[8];
    snprintf(ports, sizeof ports, "%u", (unsigned)port);
    if (!*host)
        snprintf(host, sizeof host, "0.0.0.0");
    int rc = getaddrinfo(host, ports, &hints, &res);
    if (rc != 0) {
        *why = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
        return -1;
    }
    memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
    out->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline; false on timeout, error or a stop request. */
static bool wait_fd(struct metrics_http *m, int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return false;
        struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = m->stop_fd, .events = POLLIN } };
        int n = poll(p, 2, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        return n > 0 && !p[1].revents && (p[0].revents & (events | POLLHUP | POLLERR));
    }
}

/* The request head (up to the blank line), NUL-terminated; its length, or -1 (timeout, EOF), -2 (too long). */
static ssize_t read_head(struct metrics_http *m, int c, char *buf, size_t cap)
{
    int64_t deadline = now_ms() + METRICS_HEAD_TIMEOUT_MS;
    size_t len = 0;
    while (len + 1 < cap) {
        if (!wait_fd(m, c, POLLIN, deadline))
            return -1;
        ssize_t got = recv(c, buf + len, cap - 1 - len, 0);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (got <= 0)
            return -1;
        len += (size_t)got;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return (ssize_t)len;
    }
    return -2;
}

static bool send_all(struct metrics_http *m, int c, const char *p, size_t n, int64_t deadline)
{
    while (n) {
        if (!wait_fd(m, c, POLLOUT, deadline))
            return false;
        ssize_t put = send(c, p, n, MSG_NOSIGNAL);
        if (put < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (put <= 0)
            return false;
        p += put;
        n -= (size_t)put;
    }
    return true;
}

static void respond(struct metrics_http *m, int c, const char *status, const char *extra, const char *type,
                    const char *body, size_t len, bool head_only)
{
    char head[512];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n", status, type, len, extra);
    int64_t deadline = now_ms() + METRICS_SEND_TIMEOUT_MS;
    if (n > 0 && (size_t)n < sizeof head && send_all(m, c, head, (size_t)n, deadline) && !head_only)
        send_all(m, c, body, len, deadline);
}

static void respond_text(struct metrics_http *m, int c, const char *status, const char *extra, bool head_only)
{
    char body[128];
    int n = snprintf(body, sizeof body, "%s\n", status);
    respond(m, c, status, extra, "text/plain; charset=utf-8", body, (size_t)n, head_only);
}

/* The reaper's own series, from the last snapshot the reaper's thread handed over. */
static void reaper_metrics(struct metrics_http *m, struct prom *p)
{
    struct orbit_reaper_stats s;
    pthread_mutex_lock(&m->lock);
    s = m->stats;
    pthread_mutex_unlock(&m->lock);
    struct prom_labels b = prom_with(NULL, "backend", m->backend);
    prom_u64(p, "orbit_reaper_info", PROM_GAUGE, "1; the backend label names how the reaper sees exits.", "",
             &b, 1);
    prom_u64(p, "orbit_reaper_deaths_total", PROM_COUNTER, "Deaths this reaper reclaimed.", "", NULL, s.deaths);
    prom_u64(p, "orbit_reaper_events_total", PROM_COUNTER, "Exit reports received from the backend.", "", NULL,
             s.events);
    prom_u64(p, "orbit_reaper_ignored_total", PROM_COUNTER, "Exit reports that matched no live node record.", "",
             NULL, s.ignored);
    prom_u64(p, "orbit_reaper_drops_total", PROM_COUNTER, "BPF events lost to a full ring (a sweep follows).", "",
             NULL, s.drops);
    prom_u64(p, "orbit_reaper_fleets", PROM_GAUGE, "Fleets the reaper is attached to.", "", NULL, s.fleets);
    prom_u64(p, "orbit_reaper_watched_members", PROM_GAUGE, "Members the reaper watches.", "", NULL, s.watched);
}

/* The exposition, in a buffer the caller frees; NULL when out of memory. */
static char *exposition(struct metrics_http *m, size_t *len)
{
    struct prom *p = prom_new();
    char *text = NULL;
    FILE *out = p ? open_memstream(&text, len) : NULL;
    if (out) {
        reaper_metrics(m, p);
        prom_fleets(p, m->n_fleets ? m->fleets : NULL, m->n_fleets, NULL);
        prom_write(p, out);
        if (fclose(out) != 0) {
            free(text);
            text = NULL;
        }
    }
    prom_free(p);
    return text;
}

/* 200 with the exposition, or why not; the request's method and path decide. */
static void answer(struct metrics_http *m, int c, const char *method, const char *target)
{
    bool head = strcmp(method, "HEAD") == 0;
    size_t path = strcspn(target, "?#");
    if (!head && strcmp(method, "GET") != 0) {
        respond_text(m, c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", false);
    } else if (path != 8 || strncmp(target, "/metrics", 8) != 0) {
        respond_text(m, c, "404 Not Found", "", head);
    } else {
        size_t len = 0;
        char *text = exposition(m, &len);
        if (text)
            respond(m, c, "200 OK", "", PROM_CONTENT_TYPE, text, len, head);
        else
            respond_text(m, c, "500 Internal Server Error", "", head);
        free(text);
    }
}

static void serve_one(struct metrics_http *m, int c)
{
    char buf[HEAD_MAX], method[16], target[1024], version[16];
    ssize_t n = read_head(m, c, buf, sizeof buf);
    if (n == -2)
        respond_text(m, c, "431 Request Header Fields Too Large", "", false);
    else if (n < 0)
        ;   /* timed out, or gone: nothing to answer */
    else if (sscanf(buf, "%15s %1023s %15s", method, target, version) != 3 || strncmp(version, "HTTP/1.", 7) != 0)
        respond_text(m, c, "400 Bad Request", "", false);
    else
        answer(m, c, method, target);
}

static void *serve(void *arg)
{
    struct metrics_http *m = arg;
    for (;;) {
        struct pollfd p[2] = { { .fd = m->listen_fd, .events = POLLIN }, { .fd = m->stop_fd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int c = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
                nanosleep(&(struct timespec){ 0, 100000000 }, NULL);   /* no busy loop while out of fds */
            continue;
        }
        serve_one(m, c);
        close(c);
    }
    return NULL;
}

static void format_bound(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            port = ntohs(a->sin_port);
        }
    }
    snprintf(out, cap, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
}

static int listen_on(const struct metrics_addr *addr)
{
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0)
        return -errno;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, 16) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int metrics_http_start(const struct metrics_addr *addr, const char *const *fleets, size_t n,
                       const char *backend, struct metrics_http **out, char *bound, size_t bound_len)
{
    struct metrics_http *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (struct metrics_http){ .fleets = fleets, .n_fleets = n, .backend = backend, .stop_fd = -1 };
    pthread_mutex_init(&m->lock, NULL);
    m->listen_fd = listen_on(addr);
    int rc = m->listen_fd < 0 ? m->listen_fd : 0;
    if (rc == 0 && (m->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0)
        rc = -pthread_create(&m->thread, NULL, serve, m);
    if (rc < 0) {
        if (m->listen_fd >= 0)
            close(m->listen_fd);
        if (m->stop_fd >= 0)
            close(m->stop_fd);
        free(m);
        return rc;
    }
    format_bound(m->listen_fd, bound, bound_len);
    *out = m;
    return 0;
}

void metrics_http_stats(struct metrics_http *m, const struct orbit_reaper_stats *s)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stats = *s;
    pthread_mutex_unlock(&m->lock);
}

void metrics_http_stop(struct metrics_http *m)
{
    if (!m)
        return;
    uint64_t one = 1;
    if (write(m->stop_fd, &one, sizeof one) != (ssize_t)sizeof one)
        pthread_cancel(m->thread);   /* cannot happen with a fresh eventfd; never leave the join hanging */
    pthread_join(m->thread, NULL);
    close(m->listen_fd);
    close(m->stop_fd);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
