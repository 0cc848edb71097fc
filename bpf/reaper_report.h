/* SPDX-License-Identifier: MIT */
/*
 * Each fleet's death reports, on a worker thread of that fleet
 * (reaper_report.c), and what they hand back to the event loop: results
 * (a report finished or deferred) and the fleets' quarantine notices, in
 * lists under one lock with an eventfd the event loop polls. A worker knows
 * its fleet by handle, id and name only.
 */
#ifndef ORB_REAPER_REPORT_H
#define ORB_REAPER_REPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <orbit/fleet.h>
#include <orbit/reaper.h>

/* One node record as read at one moment. */
struct rp_snap {
    uint32_t state;
    int32_t  pid;
    uint64_t start_time, incarnation, joins, pidns;
};

/* The same life of a node: same process, same incarnation, same claim. */
static inline bool rp_same_life(const struct rp_snap *a, const struct rp_snap *b)
{
    return a->pid == b->pid && a->start_time == b->start_time &&
           a->incarnation == b->incarnation && a->joins == b->joins;
}

/*
 * One report a fleet's worker runs: orbit_fleet_node_dead until it returns
 * 0, tried again after a backoff while a table cannot give the share back.
 */
struct rp_job {
    uint64_t id;                /* tells the job apart from a later life's job for the same node */
    uint32_t merges;            /* moves when a death is merged in: a try begun before is not its report */
    uint16_t node;
    bool death;                 /* a death to hand to the callback; false: finish a report cut short */
    bool account;               /* count what it held first (ORBIT_REAPER_ACCOUNT) */
    struct rp_snap seen;        /* the life being ended */
    int status;
    enum orbit_reaper_source source;
    uint64_t exit_ns, detected_ns;
    uint32_t attempts;
    uint32_t backoff_ms;        /* the wait before the next try */
    uint64_t due_ns;            /* not tried again before */
    bool accounted;
    struct orbit_reaper_reclaim reclaimed;
};

/* A report that finished, or a try that had to be deferred, for the event loop to deliver. */
struct rp_result {
    uint32_t fleet_id;
    char fleet[ORBIT_FLEET_NAME_MAX + 1];
    struct rp_job job;
    int error;                  /* deferred: what node_dead returned; 0 when finished */
    uint64_t at_ns;             /* when node_dead returned */
};

/* A fleet's quarantine begun or ended, for the event loop to hand to the callback. */
struct rp_notice {
    char fleet[ORBIT_FLEET_NAME_MAX + 1];
    struct orbit_reaper_quarantine q;
    char detail[160];
};

struct rp_worker;

/* The workers' side of the reaper, under lock. */
struct rp_reports {
    pthread_mutex_t lock;
    int donefd;                 /* eventfd: results or notices are waiting */
    struct rp_result *results;
    size_t n_results, cap_results;
    struct rp_result *spare_results;    /* the list the event loop gave back: workers fill it next */
    size_t cap_spare_results;
    struct rp_notice *notices;
    size_t n_notices, cap_notices;
    struct rp_worker **retired; /* detached fleets' workers that have not ended yet */
    size_t n_retired, cap_retired;
};

/* The lists, and donefd (readable while results or notices wait). */
int  rp_reports_open(struct rp_reports *rep);
/* After every fleet is detached: waits for the retired workers' tries under way. */
void rp_reports_close(struct rp_reports *rep);

/*
 * A fleet's worker, for its handle f (left when the worker is freed), its id
 * and name; paced: a quarantined fleet's, which idles RP_PACE_QUARANTINE
 * times as long as each try took. Its thread starts at the first report.
 * NULL when out of memory.
 */
struct rp_worker *rp_worker_new(struct rp_reports *rep, struct orbit_fleet *f, uint32_t fleet_id,
                                const char *name, bool paced);
/* Detached fleet: its worker ends after the try under way, then the fleet handle is left. */
void rp_worker_end(struct rp_reports *rep, struct rp_worker *w);
/*
 * Hand a report to the fleet's worker. A death merges into a resumed report of
 * its node and a duplicate is dropped; a death of a later life gets a job of
 * its own, as the earlier life's report may still be listed.
 */
int  rp_report(struct rp_reports *rep, struct rp_worker *w, const struct rp_job *job);

/*
 * The event loop: the results so far (*n of them, in a list of *cap), and
 * retired workers that ended are joined; the list goes back with
 * rp_results_done, so that workers allocate nothing in steady state.
 */
struct rp_result *rp_results_take(struct rp_reports *rep, size_t *n, size_t *cap);
void rp_results_done(struct rp_reports *rep, struct rp_result *v, size_t cap);
/* A fleet's thread: a quarantine notice for the event loop; / the event loop: take them (caller frees). */
void rp_notice_post(struct rp_reports *rep, const struct rp_notice *n);
struct rp_notice *rp_notices_take(struct rp_reports *rep, size_t *n);

#endif
