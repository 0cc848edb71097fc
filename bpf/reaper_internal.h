/* SPDX-License-Identifier: MIT */
/* liborbit-reaper internals: watched fleets, queued exits, backends. */
#ifndef ORB_REAPER_INTERNAL_H
#define ORB_REAPER_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>
#include <orbit/reaper.h>

/* epoll tags: anything else is a pidfd watch, (fleet id << 16) | node. */
#define RP_TAG_TIMER   (~0ull)
#define RP_TAG_RING    (~0ull - 1)
#define RP_TAG_DONE    (~0ull - 2)   /* a fleet's worker has results (reaper_report.c) */
#define RP_TAG_TOKEN   (~0ull - 3)   /* the token ring has completions (reaper_token.c) */

/* One node record as read at one moment. */
struct rp_snap {
    uint32_t state;
    int32_t  pid;
    uint64_t start_time, incarnation, joins;
};

/*
 * How a member is watched. PIDFD and BPF only for a member the reaper can
 * see: in its own pid namespace, with the recorded pid and start time. Any
 * other (another pid namespace, /proc hiding it) through the token: the
 * kernel-held lock of its life, waited for in the token ring.
 */
enum rp_via { RP_VIA_NONE, RP_VIA_PIDFD, RP_VIA_BPF, RP_VIA_TOKEN };

/* A node of a watched fleet: the member we watch there, if any. */
struct rp_watch {
    bool watched;
    bool reporting;             /* reported's death is with the fleet's worker: not watched again */
    struct rp_snap reported;    /* that life: a later life's watch must not take its place */
    struct rp_snap seen;        /* the LIVE record we watch */
    enum rp_via via;
    int pidfd;                  /* RP_VIA_PIDFD; -1 otherwise */
    uint16_t token_seq;         /* RP_VIA_TOKEN: tells this arming's completion from older ones */
    bool token_armed;           /* RP_VIA_TOKEN: a wait is in the ring */
    bool hinted;                /* a backend saw the exit before the kernel let the lock go */
    int hint_status;            /* what it said: kept for the report the token confirms */
    uint64_t hint_exit_ns;
    int64_t lockless_ns;        /* when a re-read first found the life's lock gone (0: held) */
};

struct rp_worker;

struct rp_fleet {
    uint32_t id;                /* never reused within a reaper: tags pidfd events */
    char name[ORBIT_FLEET_NAME_MAX + 1];
    bool from_all;              /* added by watch_all: dropped when it disappears */
    struct orbit_fleet *f;      /* observer handle; NULL while detached */
    uint16_t capacity;
    struct rp_watch *nodes;     /* capacity entries */
    struct orbit_node_info *info;   /* capacity entries: a rescan's orbit_fleet_nodes, when needed */
    struct rp_worker *worker;   /* runs this fleet's reports; NULL while detached */
};

/* RP_EXIT_NODE: a pidfd or the token fired for one node; RP_EXIT_TGID: a BPF event. */
enum rp_kind { RP_EXIT_TGID, RP_EXIT_NODE, RP_FOUND_DEAD };

/* A queued exit, handled after the events are read. */
struct rp_exit {
    enum rp_kind kind;
    uint32_t fleet_id;          /* RP_EXIT_NODE, RP_FOUND_DEAD */
    uint16_t node;
    struct rp_snap seen;        /* RP_EXIT_NODE, RP_FOUND_DEAD: the identity watched */
    uint32_t tgid;              /* RP_EXIT_TGID */
    uint64_t start_ticks;       /* RP_EXIT_TGID */
    int status;
    uint64_t exit_ns, detected_ns;
};

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

struct rp_bpf;
struct rp_token;

struct orbit_reaper {
    pthread_mutex_t lock;
    enum orbit_reaper_backend backend;
    char note[640];
    int epfd, timerfd;
    int interval_ms;
    bool all;
    uint32_t next_fleet_id;
    struct rp_fleet **fleets;
    size_t n_fleets, cap_fleets;
    struct rp_exit *queue;
    size_t n_queue, cap_queue;
    orbit_reaper_death_fn on_death;
    void *ctx;
    unsigned flags;
    struct orbit_reaper_stats stats;
    struct rp_bpf *bpf;
    struct rp_token *token;     /* NULL when io_uring futex waits are unavailable (note says so) */
    uint64_t pidns;             /* the reaper's pid namespace inode; 0: no member counts as visible */
    orbit_reaper_deferral_fn on_deferral;
    void *deferral_ctx;
    /* reaper_report.c: the workers' side, under work_lock (taken after lock, never before). */
    pthread_mutex_t work_lock;
    int donefd;                 /* eventfd: results are waiting */
    struct rp_result *results;
    size_t n_results, cap_results;
    struct rp_worker **retired; /* detached fleets whose worker has not ended yet */
    size_t n_retired, cap_retired;
};

/* reaper.c */
int  rp_queue_push(struct orbit_reaper *r, const struct rp_exit *e);
uint64_t rp_now_ns(void);
/* Is that life of the node over as the kernel says (its lock released, or the record moved on)? */
bool rp_life_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation);
/* The reaper's pid namespace, when its /proc is of that namespace (else 0: nothing is visible). */
uint64_t rp_pidns_self(void);
/* A node is watched (via what) / no longer: its backend's watch is dropped too. */
void rp_watched_via(struct orbit_reaper *r, struct rp_watch *w, enum rp_via via);
void rp_unwatch(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node);

/* reaper_pidfd.c: the pidfd backend, and the probes the BPF backend shares. */
/*
 * Does this pid (of the reaper's own namespace) name a live process with that
 * start time, as /proc confirms? Keeps its pidfd in *pidfd if asked. False
 * means "not seen", not "dead": only the life's lock says dead.
 */
bool rp_probe_alive(int32_t pid, uint64_t start_time, int *pidfd);
/* rp_probe_alive, and not every thread already inside do_exit. */
bool rp_member_alive(int32_t pid, uint64_t start_time);
bool rp_pidfd_exited(int pidfd);
int  rp_pidfd_status(int pidfd);
/* Watch the node's LIVE member by a pidfd in the epoll set; false when it is not seen. */
bool rp_pidfd_watch(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node);
/* The epoll event of a pidfd watch (its tag): queue the exit it reports. */
void rp_pidfd_event(struct orbit_reaper *r, uint64_t tag);

/* reaper_account.c: what (node, incarnation) holds in the fleet's tables (orbit_fleet_account). */
void rp_account(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, struct orbit_reaper_reclaim *out);

/* reaper_report.c: each fleet's reports on a thread of its own (started on demand). */
int  rp_reports_open(struct orbit_reaper *r);
void rp_reports_close(struct orbit_reaper *r);
int  rp_worker_attach(struct orbit_reaper *r, struct rp_fleet *rf);
/* Detached fleet: its worker ends after the try under way, then the fleet handle is left. */
void rp_worker_detach(struct orbit_reaper *r, struct rp_fleet *rf);
/*
 * Hand a report to the fleet's worker. A death merges into a resumed report of
 * its node and a duplicate is dropped; a death of a later life gets a job of
 * its own, as the earlier life's report may still be listed.
 */
int  rp_report(struct orbit_reaper *r, struct rp_fleet *rf, const struct rp_job *job);
/* The results so far (caller frees), and retired workers that ended are joined. */
struct rp_result *rp_results_take(struct orbit_reaper *r, size_t *n);

/* reaper_token.c: a private io_uring with one orbit_fleet_prep_wait_node_death per token watch. */
int  rp_token_open(struct orbit_reaper *r, char *why, size_t why_len);
void rp_token_close(struct orbit_reaper *r);
/* Wait for the end of w->seen's life of node: 0 armed, 1 over already, or a negative code. */
int  rp_token_arm(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, struct rp_watch *w);
void rp_token_cancel(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, struct rp_watch *w);
/* Queues an RP_EXIT_NODE for every armed wait that completed. */
void rp_token_consume(struct orbit_reaper *r);

/* reaper.c, for reaper_token.c */
struct rp_fleet *rp_find_fleet_id(struct orbit_reaper *r, uint32_t id);

/* exit.c, the BPF backend (stubs returning -ORBIT_ENOTSUP when built without BPF). */
int  rp_bpf_open(struct orbit_reaper *r, char *why, size_t why_len);
void rp_bpf_close(struct orbit_reaper *r);
int  rp_bpf_watch(struct orbit_reaper *r, int32_t tgid);
int  rp_bpf_unwatch(struct orbit_reaper *r, int32_t tgid);
/* Reads the ring into the queue; returns true when events were lost. */
bool rp_bpf_consume(struct orbit_reaper *r);

#endif
