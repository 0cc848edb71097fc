/* SPDX-License-Identifier: MIT */
/* orbit-relay: upgrades: a running relay hands its listeners to a successor (handover.c). */
#ifndef ORBIT_RELAY_HANDOVER_H
#define ORBIT_RELAY_HANDOVER_H

#include "relay.h"

struct pollfd;
/* The running relay's control socket, and the successor it talks to. */
struct handover_server {
    int lfd, conn;
    pid_t peer;
    bool draining;                    /* the successor said READY */
    dev_t dev; ino_t ino;             /* the path's inode while it is ours */
    char path[108];
};
enum { HANDOVER_NONE, HANDOVER_DRAIN };
void handover_default_path(const char *fleet, char *buf, size_t len);
int  handover_serve(struct handover_server *s, const char *path);
void handover_unserve(struct handover_server *s);
int  handover_fds(const struct handover_server *s, struct pollfd *p);   /* at most 2 */

/* What the running relay hands over: its fleet's name, its listeners and their address. */
struct handover_offer {
    const char *fleet;
    const struct sockaddr_in *listen;
    const int *lfds;                  /* -1: none in that place */
    int n_lfds;
};
/* A successor's connect or message: HANDOVER_DRAIN once it runs (stop the workers). */
int  handover_on_poll(struct handover_server *s, const struct handover_offer *offer, const struct pollfd *p, int n);
void handover_done(struct handover_server *s);   /* the workers are gone: tell the successor */

/* What a successor took over. */
struct handover_take {
    int conn;
    pid_t old_pid;
    int n, fds[RELAY_STATS_SLOTS];    /* the listeners */
    struct sockaddr_in listen;
};
/* Connects to path, says hello as a relay of fleet, takes the listeners (one line on stderr if not). */
int  handover_take(const char *path, const char *fleet, struct handover_take *t);
int  handover_ready(struct handover_take *t);
int  handover_wait_done(struct handover_take *t, int timeout_ms);

#endif
