/* SPDX-License-Identifier: MIT */
/* The reaper's own threads (each fleet's, each fleet's worker): how they start and pace themselves. */
#ifndef ORB_REAPER_THREAD_H
#define ORB_REAPER_THREAD_H

#include <pthread.h>

/*
 * A fleet's thread idles RP_PACE times as long as each re-read took, at
 * least (a quarter of a CPU at most); a quarantined fleet's thread and
 * worker RP_PACE_QUARANTINE times (a tenth).
 */
#define RP_PACE            3
#define RP_PACE_QUARANTINE 9

/* One per attached fleet, and one per worker: a small stack each. */
#define RP_THREAD_STACK (256u * 1024u)

/*
 * Start fn(arg) on a thread of RP_THREAD_STACK whose mask blocks every
 * signal (the process's signals are not its business) but the ones a fault
 * raises: a SIGBUS from a segment truncated under its mapping must reach
 * liborbit's guard; blocked, the kernel would kill the whole reaper with it
 * instead. 0 or -errno.
 */
int rp_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
