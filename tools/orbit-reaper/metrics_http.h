/* SPDX-License-Identifier: MIT */
/*
 * orbit-reaper --metrics HOST:PORT: GET /metrics answered from a thread of its
 * own, with the fleets' exposition (tools/common/prom_fleet.h) and the
 * reaper's own counts. Up to METRICS_CLIENTS_MAX connections served at once
 * (non-blocking, one epoll set), one request per connection (Connection:
 * close), each client bounded by its own deadline: a slow or silent client
 * delays no other scrape, and when every slot is taken the one that has
 * waited longest for its request gives way. A scrape opens no fleet in
 * quarantine and waits for no segment still being created.
 */
#ifndef ORBIT_REAPER_METRICS_HTTP_H
#define ORBIT_REAPER_METRICS_HTTP_H

#include <stddef.h>
#include <sys/socket.h>
#include <orbit/reaper.h>

#define METRICS_HEAD_TIMEOUT_MS 3000    /* for a client to send its request head */
#define METRICS_SEND_TIMEOUT_MS 10000   /* for it to take the answer */
#define METRICS_CLIENTS_MAX     32      /* connections served at once */

struct metrics_addr { struct sockaddr_storage ss; socklen_t len; };

/*
 * metrics_addr_parse - "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every IPv4
 * interface); HOST a literal or a name that resolves, PORT 0..65535 (0: any
 * free port). 0, or -1 with *why a static reason.
 */
int metrics_addr_parse(const char *text, struct metrics_addr *out, const char **why);

struct metrics_http;

/*
 * metrics_http_start - listen on addr and serve from a new thread (start it
 * with the signals the daemon takes by signalfd blocked). fleets: the names
 * served (n 0: every fleet on the host at each scrape). bound gets the
 * address listened on ("127.0.0.1:9464"). 0, or a negated errno.
 */
int metrics_http_start(const struct metrics_addr *addr, const char *const *fleets, size_t n,
                       const char *backend, struct metrics_http **out, char *bound, size_t bound_len);

/* The reaper's counts, served as orbit_reaper_*: called by the thread that owns the reaper. */
void metrics_http_stats(struct metrics_http *, const struct orbit_reaper_stats *);

/* A fleet put in quarantine (reason: its name) or released from it (reason NULL): from the reaper's callback. */
void metrics_http_quarantine(struct metrics_http *, const char *fleet, const char *reason);

/* Stops the thread (an answer in progress is cut at its next wait) and closes the socket. */
void metrics_http_stop(struct metrics_http *);

#endif
