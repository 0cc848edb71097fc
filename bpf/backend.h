/* SPDX-License-Identifier: MIT */
/*
 * The one interface every liborbit-reaper backend implements. A backend is
 * told which processes to watch and answers with the exits it saw; it knows
 * nothing of fleets, nodes or the hub that reads it, and calls nothing of
 * them: what it has to say is what next() returns. The hub keeps one ops
 * table and one backend, and calls only through the table.
 *
 * Threads: watch and unwatch may be called from any thread at once (each
 * fleet's thread watches its own members); fd and next from the one thread
 * that reads the backend (the event loop); open and close with no other
 * call under way.
 */
#ifndef ORB_REAPER_BACKEND_H
#define ORB_REAPER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/reaper.h>
#include "reaper_clock.h"   /* the clock of every time a backend reports */

/* One exit a backend saw. */
struct rp_event {
    uint64_t key;               /* what watch was given */
    int32_t pid;                /* the thread group that ended, in the reaper's pid namespace */
    uint64_t start_time;        /* its start time in ticks (/proc/<pid>/stat field 22) */
    int status;                 /* as waitpid(2) reports it; -1 when not known */
    uint64_t exit_ns;           /* CLOCK_MONOTONIC at the exit, or when it was read (pidfd) */
};

struct rp_backend;              /* each backend's own state */

struct rp_backend_ops {
    enum orbit_reaper_backend kind;     /* its name: orbit_reaper_backend_name */
    /*
     * true: one watch per tgid, whoever wants it (the caller counts who),
     * its key the tgid, and the start time is checked by the caller;
     * false: one watch per member, under a key the caller chooses, which
     * pins that process (pid and start time) or refuses it.
     */
    bool per_tgid;
    /* 0, or -errno / -ORBIT_ENOTSUP with why (a sentence) filled in. */
    int  (*open)(struct rp_backend **out, char *why, size_t why_len);
    /* Readable (level-triggered) while next has something to say. */
    int  (*fd)(struct rp_backend *b);
    /* 0: watched; -ESRCH: that process is not seen (a per-member backend); else -errno. */
    int  (*watch)(struct rp_backend *b, uint64_t key, int32_t pid, uint64_t start_time);
    int  (*unwatch)(struct rp_backend *b, uint64_t key);
    /*
     * Up to max exits ready now into out (never waits): their count, or
     * -errno. *lost: exits the backend lost since the last call (its
     * watches may have ended unseen: the caller tests them itself).
     */
    int  (*next)(struct rp_backend *b, struct rp_event *out, size_t max, uint64_t *lost);
    void (*close)(struct rp_backend *b);
};

/* exit.c: the BPF exit ring (open fails with -ORBIT_ENOTSUP when built without BPF). */
extern const struct rp_backend_ops rp_bpf_backend;
/* reaper_pidfd.c: a pidfd per member. */
extern const struct rp_backend_ops rp_pidfd_backend;

#endif
