/* SPDX-License-Identifier: MIT */
/* orbit-relay: the binary's modes beside the relay fleet (supervisor.h) and the load (load.h). */
#ifndef ORBIT_RELAY_MODES_H
#define ORBIT_RELAY_MODES_H

#include "relay.h"

/* --backend: a keep-alive HTTP/1.1 origin whose bodies are a function of the path (backend.c). */
int backend_main(const struct sockaddr_in *addr, int ready_fd, bool quiet);
/* --stats FLEET: the counters, each worker's io_uring features, the pool and stream tables (stats_show.c). */
int stats_main(const char *fleet, bool json);
/* --demo (demo.c). */
int demo_main(int argc, char **argv);
/* 0 when io_uring works here; else one line on stderr naming why not (a seccomp filter,
 * kernel.io_uring_disabled) and what lifts it, and the negative errno (uring_check.c). */
int uring_check(void);

#endif
