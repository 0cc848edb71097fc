/* SPDX-License-Identifier: MIT */
/* orbit-relay: one worker process of the fleet (worker.c), forked by the supervisor. */
#ifndef ORBIT_RELAY_WORKER_H
#define ORBIT_RELAY_WORKER_H

#include "relay.h"

/* Joins the fleet, serves on o->listen_fd until SIGTERM (then drains); the exit status. */
int worker_main(const struct relay_opts *o, struct relay_stats *st, int slot, int ready_fd);

#endif
