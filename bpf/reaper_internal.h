/* SPDX-License-Identifier: MIT */
/*
 * liborbit-reaper internals: the event loop (reaper.c), one thread per watched
 * fleet (reaper_fleet.c), its reports (reaper_report.c), the budget every
 * fleet's descriptors and mappings come out of (reaper_budget.c), backends.
 *
 * Who touches what. The event loop (the thread in orbit_reaper_process) owns
 * the list of fleets, reads the backends' events and routes each to the inbox
 * of the fleet it is about; it never reads a fleet's segment or tests a lock,
 * so nothing a fleet holds (a slow lock list, a half-made segment, a forged
 * record) can delay another fleet. Each fleet's thread owns everything of that
 * fleet: its observer handle, its node watches, its lock tests and re-reads.
 * Locks, in the order they may nest: r->lock (event loop), rf->mu (an inbox:
 * held briefly by both sides), r->work_lock, r->budget_mu, r->tgid_mu. A
 * fleet's thread never takes r->lock.
 */
#ifndef ORB_REAPER_INTERNAL_H
#define ORB_REAPER_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <orbit/reaper.h>
#include "backend.h"

/* The event loop's epoll tags. */
#define RP_TAG_TIMER   (~0ull)
#define RP_TAG_BACKEND (~0ull - 1)
#define RP_TAG_DONE    (~0ull - 2)   /* workers' results, fleets' notices (reaper_report.c) */

/* A member's key with a per-member backend: the event names its fleet and node. */
static inline uint64_t rp_member_key(uint32_t fleet_id, uint16_t node)
{
    return ((uint64_t)fleet_id << 16) | node;
}

/* One node record as read at one moment. */
struct rp_snap {
    uint32_t state;
    int32_t  pid;
    uint64_t start_time, incarnation, joins, pidns;
};

/*
 * How a member is watched. PIDFD and BPF only for a member the reaper can
 * see: in its own pid namespace, with the recorded pid and start time. Any
 * other (another pid namespace, /proc hiding it) by its life's lock, tested
 * by the fleet's thread on a short period (LOCK): no thread, descriptor or
 * mapping per member.
 */
enum rp_via { RP_VIA_NONE, RP_VIA_PIDFD, RP_VIA_BPF, RP_VIA_LOCK };

/* A node of a watched fleet: the member we watch there, if any. */
struct rp_watch {
    bool watched;
    bool reporting;             /* reported's death is with the fleet's worker: not watched again */
    struct rp_snap reported;    /* that life: a later life's watch must not take its place */
    struct rp_snap seen;        /* the LIVE record we watch */
    enum rp_via via;
    bool hinted;                /* a backend saw the exit before the kernel let the lock go */
    int hint_status;            /* what it said: kept for the report the lock confirms */
    uint64_t hint_exit_ns;
    int64_t lockless_ns;        /* when a re-read first found the life's lock gone (0: held) */
    int64_t midway_ns;          /* when a re-read first found the node mid-way (joining, reported; 0: not) */
    uint64_t midway_joins;      /* ...in that claim */
};

/* RP_EXIT_NODE: a backend fired for one node; RP_EXIT_TGID: a BPF event; RP_FOUND_DEAD: a re-read. */
enum rp_kind { RP_EXIT_TGID, RP_EXIT_NODE, RP_FOUND_DEAD };

/* An exit to confirm. */
struct rp_exit {
    enum rp_kind kind;
    uint32_t fleet_id;
    uint16_t node;
    struct rp_snap seen;        /* RP_EXIT_NODE, RP_FOUND_DEAD: the identity watched */
    uint32_t tgid;              /* RP_EXIT_TGID */
    uint64_t start_ticks;       /* RP_EXIT_TGID */
    int status;
    uint64_t exit_ns, detected_ns;
};

/* What the event loop leaves in a fleet's inbox. */
enum rp_msg_kind {
    RP_MSG_PIDFD,               /* a per-member backend saw node's member exit (exit) */
    RP_MSG_TGID,                /* a BPF exit of a tgid this fleet watches (exit) */
    RP_MSG_DONE,                /* the worker finished the report of node's life (life) */
};
struct rp_msg {
    enum rp_msg_kind kind;
    uint16_t node;
    struct rp_exit exit;
    struct rp_snap life;
};

/*
 * A fleet's thread idles RP_PACE times as long as each re-read took, at
 * least (a quarter of a CPU at most); a quarantined fleet's thread and
 * worker RP_PACE_QUARANTINE times (a tenth).
 */
#define RP_PACE            3
#define RP_PACE_QUARANTINE 9

/* An attached fleet's descriptors: its handle (2), the table a report opens (1), one spare. */
#define RP_BASE_FDS 4

/* An attached fleet's threads: its own, and its worker's while it has reports; their stacks. */
#define RP_BASE_THREADS 2
#define RP_THREAD_STACK (256u * 1024u)

/*
 * The mask a fleet's thread and worker start with: every signal blocked (the
 * process's signals are not their business) but the ones a fault raises. A
 * SIGBUS from a segment truncated under its mapping must reach liborbit's
 * guard; blocked, the kernel would kill the whole reaper with it instead.
 */
void rp_thread_signals(sigset_t *set);

/* What a fleet costs the budget: descriptors, threads, bytes mapped. */
struct rp_cost {
    int64_t fds;
    int64_t threads;
    int64_t bytes;
};

/* Why a fleet is quarantined (RP_Q_NONE: it is not). */
enum rp_quarantine {
    RP_Q_NONE = 0,
    RP_Q_DESCRIPTORS,           /* more descriptors than a fleet, its owner or the reaper may hold */
    RP_Q_MAPPED,                /* its segments are larger than a fleet, its owner or the reaper may map */
    RP_Q_MEMBERS,               /* more members to test by lock than its bound */
    RP_Q_FAULT,                 /* it cannot be read (half-made past the bound, corrupt, refused) */
    RP_Q_THREADS,               /* its owner's fleets, or all, would run more threads than the bound */
};

struct rp_worker;

/*
 * A fleet the reaper knows of. The fields above "thread's own" are shared as
 * their comments say; the rest belong to the fleet's thread while it runs.
 */
struct rp_fleet {
    struct orbit_reaper *r;
    uint32_t id;                /* never reused within a reaper: tags pidfd events */
    char name[ORBIT_FLEET_NAME_MAX + 1];
    _Atomic bool from_all;      /* added by watch_all: dropped when it disappears */
    _Atomic uint32_t watched;   /* members watched now */
    _Atomic bool attached;
    _Atomic int quarantine;     /* enum rp_quarantine */
    /* The event loop's, under r->lock. */
    pthread_t thread;
    bool running;               /* a thread was started and is not joined */
    int64_t start_after_ns;     /* no thread: not started again before */
    _Atomic int64_t owner;      /* the fleet segment's owner; -1 not known yet */
    /* The inbox, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct rp_msg *inbox;       /* the event loop appends here... */
    size_t n_inbox, cap_inbox;
    struct rp_msg *taken;       /* ...the thread reads what it took here: the two swap, never freed */
    size_t cap_taken;
    unsigned pokes;             /* RP_POKE_*: asked of the thread, not yet taken */
    bool ended;                 /* the thread is out of its loop: join it */
    bool gone;                  /* ...because the fleet is gone and came from watch_all */
    bool parked;                /* ...because the budget had no room for it: start again later */
    uint64_t scans_begun;       /* re-reads begun, and finished: orbit_reaper_rescan waits for */
    uint64_t scans;             /* one begun after its kick to finish */
    bool tried;                 /* an attach was tried */
    int attach_rc;              /* its result (orbit_reaper_watch answers with it) */
    /* The thread's own. */
    struct orbit_fleet *f;      /* observer handle; NULL while detached */
    uint16_t capacity;
    struct rp_watch *nodes;     /* capacity entries */
    struct rp_worker *worker;   /* runs this fleet's reports; NULL while detached */
    struct orbit_segment_info *segs;    /* room for its segments' listing (RP_SEGMENTS_MAX) */
    struct rp_exit *queue;      /* exits to confirm */
    size_t n_queue, cap_queue;
    struct rp_cost held;        /* what it holds of the budget */
    struct rp_cost base;        /* of which its handle and tables */
    int64_t seg_bytes;          /* the fleet segment's size */
    bool account;               /* its reports count what a death gave back (not in quarantine) */
    int64_t next_scan_ns, next_backstop_ns, next_review_ns, next_attach_ns;
    int64_t scan_floor_ns;      /* no re-read before: RP_PACE times the last one's duration after it */
    int64_t last_poll_ns;       /* members tested by lock were last looked at */
    uint32_t poll_cost_ns;      /* and that took: the next look waits at least three times it */
    int64_t busy_since_ns;      /* first attach that found the fleet still being created (0: none) */
    uint32_t attach_backoff_ms;
    int fault;                  /* RP_Q_FAULT: the error */
};

/* The reaper's own counts (orbit_reaper_stats): atomics, moved by any thread. */
struct rp_counts {
    _Atomic uint64_t events, deaths, ignored, drops, rescans, quarantines;
    _Atomic uint32_t fleets, watched, quarantined;
};

/* A fleet's quarantine begun or ended, for the event loop to hand to the callback. */
struct rp_notice {
    char fleet[ORBIT_FLEET_NAME_MAX + 1];
    struct orbit_reaper_quarantine q;
    char detail[160];
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

/* The budget (reaper_budget.c): totals, and what each owner holds, under budget_mu. */
struct rp_owner_use { uid_t uid; struct rp_cost held; };
struct rp_budget {
    struct rp_cost total;       /* what the reaper may hold in all */
    struct rp_cost used;
    struct rp_owner_use *owners;
    size_t n_owners, cap_owners;
};

struct rp_tgid;

struct orbit_reaper {
    pthread_mutex_t lock;       /* the fleets' list, the event queue, the callbacks */
    enum orbit_reaper_backend backend;
    char note[640];
    int epfd, timerfd;
    _Atomic int interval_ms;
    bool all;
    uint32_t next_fleet_id;
    struct rp_fleet **fleets;
    size_t n_fleets, cap_fleets;
    orbit_reaper_death_fn on_death;
    void *ctx;
    _Atomic unsigned flags;
    struct rp_counts counts;
    const struct rp_backend_ops *ops;   /* the backend, called only through its ops */
    struct rp_backend *be;
    pthread_mutex_t tgid_mu;    /* the tgids watched through BPF, and by which fleets */
    struct rp_tgid *tgids;
    size_t n_tgids, cap_tgids;
    uint64_t pidns;             /* the reaper's pid namespace inode; 0: no member counts as visible */
    orbit_reaper_deferral_fn on_deferral;
    void *deferral_ctx;
    orbit_reaper_quarantine_fn on_quarantine;
    void *quarantine_ctx;
    pthread_mutex_t budget_mu;
    struct rp_budget budget;
    /* reaper_report.c: the workers' side, under work_lock. */
    pthread_mutex_t work_lock;
    int donefd;                 /* eventfd: results or notices are waiting */
    struct rp_result *results;
    size_t n_results, cap_results;
    struct rp_result *spare_results;    /* the list the event loop gave back: workers fill it next */
    size_t cap_spare_results;
    struct rp_notice *notices;
    size_t n_notices, cap_notices;
    struct rp_worker **retired; /* detached fleets whose worker has not ended yet */
    size_t n_retired, cap_retired;
};

/* reaper.c */
/* The reaper's pid namespace, when its /proc is of that namespace (else 0: nothing is visible). */
uint64_t rp_pidns_self(void);

/* reaper_fleet.c: a fleet's thread and everything it does. */
int  rp_fleet_start(struct orbit_reaper *r, struct rp_fleet *rf);
/* Leave a message in the fleet's inbox and wake its thread. */
void rp_fleet_post(struct rp_fleet *rf, const struct rp_msg *m);
/*
 * Wake its thread: re-read as soon as its pace allows (KICK), test its
 * BPF-watched members (SWEEP), end (STOP). NUDGE is kick_all's KICK for a
 * fleet not in quarantine (orbit_reaper_process on entry): a quarantined one
 * re-reads at its own pace only.
 */
#define RP_POKE_KICK  1u
#define RP_POKE_NUDGE 2u
#define RP_POKE_SWEEP 4u
#define RP_POKE_STOP  8u
void rp_fleet_poke(struct rp_fleet *rf, unsigned what);
/* A stopped thread's fleet: join it and free what is left (the thread is out of its loop). */
void rp_fleet_join(struct rp_fleet *rf);
/* Is that life of the node over as the kernel says (its lock released, or the record moved on)? */
bool rp_life_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation);

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
/*
 * The results so far (*n of them, in a list of *cap), and retired workers
 * that ended are joined; the list goes back with rp_results_done, so that
 * workers allocate nothing in steady state.
 */
struct rp_result *rp_results_take(struct orbit_reaper *r, size_t *n, size_t *cap);
void rp_results_done(struct orbit_reaper *r, struct rp_result *v, size_t cap);
/* A fleet's thread: a quarantine notice for the event loop; / the event loop: take them (caller frees). */
void rp_notice_post(struct orbit_reaper *r, const struct rp_notice *n);
struct rp_notice *rp_notices_take(struct orbit_reaper *r, size_t *n);

/* reaper_budget.c */
/* The totals: from RLIMIT_NOFILE (descriptors), fixed (threads, bytes mapped). */
void rp_budget_init(struct orbit_reaper *r);
void rp_budget_free(struct orbit_reaper *r);
/*
 * Take c for fleet rf (of owner uid): 0, or the quarantine its bound says
 * (RP_Q_DESCRIPTORS, RP_Q_THREADS or RP_Q_MAPPED) with *bound and *wanted the numbers
 * that broke it; nothing is taken then. rf->held grows by c.
 */
int  rp_budget_take(struct orbit_reaper *r, struct rp_fleet *rf, uid_t uid, const struct rp_cost *c,
                    int64_t *bound, int64_t *wanted);
/* Give back c (rf->held shrinks). */
void rp_budget_give(struct orbit_reaper *r, struct rp_fleet *rf, uid_t uid, const struct rp_cost *c);
/* Could an owner with nothing held now take a fleet's base cost? (whether to start a fleet's thread) */
bool rp_budget_room(struct orbit_reaper *r, int64_t owner);
/* Descriptors held now, and the total (stats). */
void rp_budget_descriptors(struct orbit_reaper *r, uint32_t *held, uint32_t *total);

/* reaper_bpf tgid index (reaper.c): which fleets watch a tgid through BPF. */
int  rp_tgid_watch(struct orbit_reaper *r, uint32_t fleet_id, int32_t tgid);
void rp_tgid_unwatch(struct orbit_reaper *r, uint32_t fleet_id, int32_t tgid);

#endif
