/* SPDX-License-Identifier: MIT */
/* orbit-relay: addresses, sockets, SQEs, the latency histogram, table specs. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "relay.h"

const struct orbit_pool_spec relay_pool_spec = {
    .kind = ORBIT_POOL_KIND, .key_capacity = 64, .lane_capacity = 256, .generation_limit = 0 };
/* 256 streams a node, 16 KiB a direction: 8 MiB of lane per node. */
const struct orbit_stream_spec relay_stream_spec = {
    .kind = ORBIT_STREAM_KIND, .lane_capacity = 256, .buffer_bytes = 16384, .generation_limit = 0 };

int64_t relay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void relay_format_addr(const struct sockaddr_in *a, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
}

int relay_listen_socket(const struct sockaddr_in *a, bool reuseport)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        goto fail;
    /* Accepted sockets inherit it: no setsockopt a connection (nor one a direct descriptor cannot take). */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)a, sizeof *a) < 0 || listen(fd, 4096) < 0)
        goto fail;
    return fd;
fail:;
    int e = -errno;
    close(fd);
    return e;
}

int relay_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 32 ? 32 : (int)n;
}

struct io_uring_sqe *relay_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
    }
    if (!sqe)
        abort();   /* the SQ is drained by every submit: cannot stay full */
    io_uring_sqe_set_data64(sqe, 0);
    return sqe;
}

orbit_key relay_backend_key(const struct sockaddr_in *a)
{
    /* Two FNV-1a passes with different bases over "ip:port". */
    char text[64];
    relay_format_addr(a, text, sizeof text);
    uint64_t lo = 0xcbf29ce484222325ull, hi = 0x84222325cbf29ce4ull;
    for (const char *p = text; *p; p++) {
        lo = (lo ^ (uint8_t)*p) * 0x100000001b3ull;
        hi = (hi ^ (uint8_t)*p) * 0x100000001b3ull;
        hi ^= hi >> 29;
    }
    return (orbit_key){ .lo = lo, .hi = hi };
}

uint16_t relay_fleet_capacity(int workers)
{
    /* Room for the workers, their replacements while the dead are reclaimed, and spares. */
    int n = 2 * workers + 4;
    return (uint16_t)(n > ORBIT_FLEET_CAPACITY_MAX ? ORBIT_FLEET_CAPACITY_MAX : n);
}

/* ---- histogram ---------------------------------------------------------- */

static unsigned hist_bucket(uint64_t v)
{
    if (v < HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);          /* >= 6 */
    unsigned shift = msb - 6;                                     /* keep 6 bits below the msb */
    unsigned b = (shift + 1) * HIST_SUB + (unsigned)((v >> shift) & (HIST_SUB - 1));
    return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

static uint64_t hist_value(unsigned b)
{
    if (b < HIST_SUB)
        return b;
    unsigned shift = b / HIST_SUB - 1;
    uint64_t sub = b % HIST_SUB;
    return ((HIST_SUB + sub) << shift) + ((1ull << shift) >> 1);   /* bucket midpoint */
}

void relay_hist_add(struct relay_hist *h, uint64_t ns)
{
    h->b[hist_bucket(ns)]++;
    h->count++;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

uint64_t relay_hist_percentile(const struct relay_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)(p * (double)(h->count - 1)) + 1, seen = 0;
    for (unsigned b = 0; b < HIST_BUCKETS; b++) {
        seen += h->b[b];
        if (seen >= rank) {
            uint64_t v = hist_value(b);
            return v > h->max_ns ? h->max_ns : v;
        }
    }
    return h->max_ns;
}

void relay_opts_defaults(struct relay_opts *o)
{
    memset(o, 0, sizeof *o);
    o->restart = true;
    o->report_deaths = true;
    o->listen_fd = -1;
    o->max_head = 16384;
    o->max_body = 0;
    o->header_timeout_ms = 10000;
    o->idle_timeout_ms = 60000;
    o->connect_timeout_ms = 5000;
    o->response_timeout_ms = 60000;
    o->drain_timeout_ms = 5000;
}

size_t relay_buffered_max(const struct relay_opts *o)
{
    size_t body = o->max_body && o->max_body < RELAY_STREAM_MIN ? o->max_body : RELAY_STREAM_MIN;
    return o->max_head + body + 256;
}

bool relay_env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}
