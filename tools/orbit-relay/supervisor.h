/* SPDX-License-Identifier: MIT */
/* orbit-relay's supervisor: the workers, their restarts and reaps, upgrades (supervisor.c). */
#ifndef ORBIT_RELAY_SUPERVISOR_H
#define ORBIT_RELAY_SUPERVISOR_H

#include "handover.h"
#include "relay.h"

struct sup_fleet {
    struct relay_opts opts;
    struct relay_stats *st;
    pid_t pids[RELAY_STATS_SLOTS];
    int slot_of[RELAY_STATS_SLOTS];   /* worker index -> stats slot */
    int lfds[RELAY_STATS_SLOTS];      /* worker index -> its listener */
    struct orbit_fleet *observer;     /* for reaps and inspection */
    int ready_rd, ready_wr;
    int cpus[RELAY_STATS_SLOTS];      /* the CPUs the workers are pinned to, in turn */
    int n_cpus;                       /* 0: not pinned */
};

/* Starts the workers, on listeners of their own or on those take holds (NULL: none). */
int  sup_start(struct sup_fleet *rf, const struct relay_opts *o, struct handover_take *take);
/* Reaps exited children; returns the number of worker deaths seen. */
int  sup_on_sigchld(struct sup_fleet *rf, pid_t *other_pids, int n_other, int *other_status);
int  sup_spawn(struct sup_fleet *rf, int index);
void sup_stop(struct sup_fleet *rf, int timeout_ms);
/* orbit-relay --fleet: runs the fleet until SIGTERM or SIGINT, or until a successor took over. */
int  sup_run(const struct relay_opts *o);
int  sup_signalfd(void);                 /* blocks SIGCHLD/TERM/INT; a signalfd for them */
void sup_child_signals(void);            /* in a forked child: default signals, none blocked */
int  sup_end_child(pid_t pid, int timeout_ms);   /* SIGTERM, wait, SIGKILL; the wait status */

#endif
