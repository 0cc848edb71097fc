/* SPDX-License-Identifier: MIT */
/*
 * orbit-reaper --metrics: a small, bounded HTTP/1.1 server for GET /metrics
 * (metrics_http.h). One thread and one epoll set serve every client at once,
 * each socket non-blocking with its own deadline: a client that sends its
 * request a byte at a time, or never reads its answer, holds its own slot
 * until its deadline and delays nobody else's scrape.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <orbit/fleet.h>
#include "cli.h"
#include "metrics_http.h"
#include "prom_fleet.h"

#define HEAD_MAX 8192
#define TAG_LISTEN UINT64_MAX
#define TAG_STOP   (UINT64_MAX - 1)

/* One connection: reading its request head, then sending its answer. */
struct client {
    int fd;                     /* -1: a free slot */
    bool sending;
    int64_t deadline_ms;        /* the head must be in, or the answer taken, by then */
    size_t got;                 /* head bytes read */
    char head[HEAD_MAX];
    char *out;                  /* the answer, head and body */
    size_t out_len, sent;
};

/* A quarantined fleet (the reaper's callback): served as down, never opened by a scrape. */
struct quarantined { char fleet[ORBIT_FLEET_NAME_MAX + 1]; char reason[16]; };

struct metrics_http {
    int listen_fd, stop_fd, ep;
    pthread_t thread;
    const char *const *fleets;
    size_t n_fleets;
    const char *backend;
    struct client clients[METRICS_CLIENTS_MAX];
    pthread_mutex_t lock;            /* stats, quarantined */
    struct orbit_reaper_stats stats;
    struct quarantined *q;
    size_t n_q, cap_q;
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

/* ---- the exposition -------------------------------------------------------- */

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
    prom_u64(p, "orbit_reaper_quarantines_total", PROM_COUNTER, "Fleets put in quarantine: they broke a bound "
             "or could not be read.", "", NULL, s.quarantines);
    prom_u64(p, "orbit_reaper_quarantined_fleets", PROM_GAUGE, "Fleets in quarantine now.", "", NULL,
             s.quarantined);
    prom_u64(p, "orbit_reaper_descriptors", PROM_GAUGE, "Descriptors the reaper holds for fleets and members.",
             "", NULL, s.descriptors);
    prom_u64(p, "orbit_reaper_descriptor_budget", PROM_GAUGE, "Descriptors it may hold for them "
             "(RLIMIT_NOFILE less its own).", "", NULL, s.descriptor_budget);
}

static bool is_quarantined(struct metrics_http *m, const char *fleet)
{
    for (size_t i = 0; i < m->n_q; i++)
        if (strcmp(m->q[i].fleet, fleet) == 0)
            return true;
    return false;
}

/*
 * The fleets (each generation): every one served but those in quarantine,
 * which are not opened (a fleet that broke a bound is no scrape's to read)
 * and read as down.
 */
static void fleet_metrics(struct metrics_http *m, struct prom *p)
{
    ssize_t n;
    prom_name *names = prom_fleet_names(m->n_fleets ? m->fleets : NULL, m->n_fleets, &n);
    bool *down = calloc(n > 0 ? (size_t)n : 1, sizeof *down);
    pthread_mutex_lock(&m->lock);
    for (ssize_t i = 0; down && i < n; i++)
        down[i] = is_quarantined(m, names[i]);
    for (size_t i = 0; i < m->n_q; i++) {
        char base[ORBIT_FLEET_NAME_MAX + 1];
        const char *at = strchr(m->q[i].fleet, '@');
        snprintf(base, sizeof base, "%.*s", at ? (int)(at - m->q[i].fleet) : ORBIT_FLEET_NAME_MAX, m->q[i].fleet);
        struct prom_labels l = prom_with(NULL, "fleet", base);
        l = prom_with(&l, "generation", at ? at + 1 : "1");
        l = prom_with(&l, "reason", m->q[i].reason);
        prom_u64(p, "orbit_reaper_quarantined", PROM_GAUGE, "1 for a fleet in quarantine (the reason label says "
                 "why): its members are tested on each re-read, a scrape does not open it.", "", &l, 1);
    }
    pthread_mutex_unlock(&m->lock);
    for (ssize_t i = 0; down && i < n; i++) {
        if (down[i])
            prom_fleet_down(p, names[i]);
        else
            prom_fleet(p, names[i]);
    }
    free(down);
    free(names);
}

/* The exposition, in a buffer the caller frees; NULL when out of memory. */
static char *exposition(struct metrics_http *m, size_t *len)
{
    struct prom *p = prom_new();
    char *text = NULL;
    FILE *out = p ? open_memstream(&text, len) : NULL;
    if (out) {
        reaper_metrics(m, p);
        fleet_metrics(m, p);
        prom_write(p, out);
        if (fclose(out) != 0) {
            free(text);
            text = NULL;
        }
    }
    prom_free(p);
    return text;
}

/* ---- one client --------------------------------------------------------------- */

/* The answer: status line, fields, body (NULL: a short text body saying the status). */
static void respond(struct client *c, const char *status, const char *extra, const char *type, const char *body,
                    size_t len, bool head_only)
{
    char text[128];
    if (!body) {
        len = (size_t)snprintf(text, sizeof text, "%s\n", status);
        body = text;
        type = "text/plain; charset=utf-8";
    }
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    if (!f)
        return;
    fprintf(f, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
            type, len, extra);
    if (!head_only)
        fwrite(body, 1, len, f);
    if (fclose(f) != 0) {
        free(out);
        return;
    }
    c->out = out;
    c->out_len = n;
    c->sent = 0;
}

/* 200 with the exposition, or why not; the request's method and path decide. */
static void answer(struct metrics_http *m, struct client *c, const char *method, const char *target)
{
    bool head = strcmp(method, "HEAD") == 0;
    size_t path = strcspn(target, "?#");
    if (!head && strcmp(method, "GET") != 0) {
        respond(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", NULL, NULL, 0, false);
    } else if (path != 8 || strncmp(target, "/metrics", 8) != 0) {
        respond(c, "404 Not Found", "", NULL, NULL, 0, head);
    } else {
        size_t len = 0;
        char *text = exposition(m, &len);
        if (text)
            respond(c, "200 OK", "", PROM_CONTENT_TYPE, text, len, head);
        else
            respond(c, "500 Internal Server Error", "", NULL, NULL, 0, head);
        free(text);
    }
}

/* The head is in (or too long): the answer, to be sent from now on. */
static void head_done(struct metrics_http *m, struct client *c, bool too_long)
{
    char method[16], target[1024], version[16];
    if (too_long)
        respond(c, "431 Request Header Fields Too Large", "", NULL, NULL, 0, false);
    else if (sscanf(c->head, "%15s %1023s %15s", method, target, version) != 3 ||
             strncmp(version, "HTTP/1.", 7) != 0)
        respond(c, "400 Bad Request", "", NULL, NULL, 0, false);
    else
        answer(m, c, method, target);
    c->sending = true;
    c->deadline_ms = now_ms() + METRICS_SEND_TIMEOUT_MS;
}

static void drop(struct metrics_http *m, struct client *c)
{
    epoll_ctl(m->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out);
    c->fd = -1;
    c->out = NULL;
}

/* Send what the socket takes now; false when the client is done (all sent, or gone). */
static bool send_some(struct client *c)
{
    while (c->out && c->sent < c->out_len) {
        ssize_t put = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_NOSIGNAL);
        if (put < 0 && errno == EINTR)
            continue;
        if (put < 0 && errno == EAGAIN)
            return true;
        if (put <= 0)
            return false;
        c->sent += (size_t)put;
    }
    return false;
}

/* Read what came; the head complete (or too long) turns the client to sending. False: drop it. */
static bool read_some(struct metrics_http *m, struct client *c)
{
    for (;;) {
        ssize_t got = recv(c->fd, c->head + c->got, sizeof c->head - 1 - c->got, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return true;
        if (got <= 0)
            return false;   /* gone before its request was in: nothing to answer */
        c->got += (size_t)got;
        c->head[c->got] = '\0';
        bool done = strstr(c->head, "\r\n\r\n") || strstr(c->head, "\n\n");
        if (done || c->got + 1 >= sizeof c->head) {
            head_done(m, c, !done);
            struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = (uint64_t)(c - m->clients) };
            epoll_ctl(m->ep, EPOLL_CTL_MOD, c->fd, &ev);
            return send_some(c);
        }
    }
}

static void client_event(struct metrics_http *m, struct client *c, uint32_t events)
{
    bool keep = c->sending ? !(events & (EPOLLERR | EPOLLHUP)) && send_some(c) : read_some(m, c);
    if (!keep)
        drop(m, c);
}

/* A free slot; when every one is taken, the client that has waited longest for its head gives way. */
static struct client *slot(struct metrics_http *m)
{
    struct client *oldest = NULL;
    for (int i = 0; i < METRICS_CLIENTS_MAX; i++) {
        struct client *c = &m->clients[i];
        if (c->fd < 0)
            return c;
        if (!c->sending && (!oldest || c->deadline_ms < oldest->deadline_ms))
            oldest = c;
    }
    if (oldest)
        drop(m, oldest);
    return oldest;
}

static void accept_all(struct metrics_http *m)
{
    for (;;) {
        int fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;   /* EAGAIN: all taken; EMFILE and the like: tried again on the next event */
        struct client *c = slot(m);
        if (!c) {
            close(fd);   /* every slot is sending an answer: this one comes back later */
            continue;
        }
        *c = (struct client){ .fd = fd, .deadline_ms = now_ms() + METRICS_HEAD_TIMEOUT_MS };
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)(c - m->clients) };
        if (epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            c->fd = -1;
        }
    }
}

/* Clients past their deadline are dropped; returns the wait until the next one's (-1: none). */
static int expire(struct metrics_http *m)
{
    int64_t now = now_ms(), next = -1;
    for (int i = 0; i < METRICS_CLIENTS_MAX; i++) {
        struct client *c = &m->clients[i];
        if (c->fd < 0)
            continue;
        if (c->deadline_ms <= now)
            drop(m, c);
        else if (next < 0 || c->deadline_ms - now < next)
            next = c->deadline_ms - now;
    }
    return (int)next;
}

static void *serve(void *arg)
{
    struct metrics_http *m = arg;
    for (;;) {
        struct epoll_event evs[16];
        int n = epoll_wait(m->ep, evs, 16, expire(m));
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == TAG_STOP)
                return NULL;
            if (tag == TAG_LISTEN)
                accept_all(m);
            else if (tag < METRICS_CLIENTS_MAX && m->clients[tag].fd >= 0)
                client_event(m, &m->clients[tag], evs[i].events);
        }
    }
    return NULL;
}

/* ---- the server ---------------------------------------------------------------- */

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
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int watch_fd(int ep, int fd, uint64_t tag)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static void server_free(struct metrics_http *m)
{
    for (int i = 0; i < METRICS_CLIENTS_MAX; i++)
        if (m->clients[i].fd >= 0)
            drop(m, &m->clients[i]);
    if (m->listen_fd >= 0)
        close(m->listen_fd);
    if (m->stop_fd >= 0)
        close(m->stop_fd);
    if (m->ep >= 0)
        close(m->ep);
    pthread_mutex_destroy(&m->lock);
    free(m->q);
    free(m);
}

int metrics_http_start(const struct metrics_addr *addr, const char *const *fleets, size_t n,
                       const char *backend, struct metrics_http **out, char *bound, size_t bound_len)
{
    struct metrics_http *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->fleets = fleets;
    m->n_fleets = n;
    m->backend = backend;
    m->stop_fd = m->ep = -1;
    for (int i = 0; i < METRICS_CLIENTS_MAX; i++)
        m->clients[i].fd = -1;
    pthread_mutex_init(&m->lock, NULL);
    m->listen_fd = listen_on(addr);
    int rc = m->listen_fd < 0 ? m->listen_fd : 0;
    if (rc == 0 && ((m->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0 || (m->ep = epoll_create1(EPOLL_CLOEXEC)) < 0))
        rc = -errno;
    if (rc == 0 && (rc = watch_fd(m->ep, m->listen_fd, TAG_LISTEN)) == 0)
        rc = watch_fd(m->ep, m->stop_fd, TAG_STOP);
    if (rc == 0)
        rc = -pthread_create(&m->thread, NULL, serve, m);
    if (rc < 0) {
        server_free(m);
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

void metrics_http_quarantine(struct metrics_http *m, const char *fleet, const char *reason)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    size_t i = 0;
    while (i < m->n_q && strcmp(m->q[i].fleet, fleet) != 0)
        i++;
    if (!reason && i < m->n_q) {
        m->q[i] = m->q[--m->n_q];   /* released */
    } else if (reason) {
        if (i == m->n_q && m->n_q == m->cap_q) {
            size_t cap = m->cap_q ? m->cap_q * 2 : 8;
            struct quarantined *v = realloc(m->q, cap * sizeof *v);
            if (v) {
                m->q = v;
                m->cap_q = cap;
            }
        }
        if (i < m->cap_q) {
            snprintf(m->q[i].fleet, sizeof m->q[i].fleet, "%s", fleet);
            snprintf(m->q[i].reason, sizeof m->q[i].reason, "%s", reason);
            m->n_q += i == m->n_q;
        }
    }
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
    server_free(m);
}
