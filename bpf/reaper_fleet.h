/* SPDX-License-Identifier: MIT */
/*
 * One thread per watched fleet (reaper_fleet.c): the fleet as the event loop
 * and that thread share it, its members' watches, the exits it confirms and
 * the messages the event loop leaves in its inbox.
 */
#ifndef ORB_REAPER_FLEET_H
#define ORB_REAPER_FLEET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <orbit/fleet.h>
#include <orbit/reaper.h>
#include "hub.h"

/* A member's key with a per-member backend: its exit names its fleet and node. */
static inline uint64_t rp_member_key(uint32_t fleet_id, uint16_t node)
{
    return ((uint64_t)fleet_id << 16) | node;
}
static inline uint32_t rp_member_key_fleet(uint64_t key) { return (uint32_t)(key >> 16); }
static inline uint16_t rp_member_key_node(uint64_t key) { return (uint16_t)(key & 0xffff); }

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
    uint32_t tgid;              /* RP_EXIT_TGID, and a backend's event: the process it names... */
    uint64_t start_ticks;       /* ...and its start time */
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

/* Why a fleet is quarantined (RP_Q_NONE: it is not): the public reasons, which the budget returns too. */
enum rp_quarantine {
    RP_Q_NONE = 0,
    /* more descriptors than a fleet, its owner or the reaper may hold */
    RP_Q_DESCRIPTORS = ORBIT_REAPER_QUARANTINE_DESCRIPTORS,
    /* its segments are larger than a fleet, its owner or the reaper may map */
    RP_Q_MAPPED = ORBIT_REAPER_QUARANTINE_MAPPED,
    /* more members to test by lock than its bound */
    RP_Q_MEMBERS = ORBIT_REAPER_QUARANTINE_MEMBERS,
    /* it cannot be read (half-made past the bound, corrupt, refused) */
    RP_Q_FAULT = ORBIT_REAPER_QUARANTINE_FAULT,
    /* its owner's fleets, or all, would run more threads than the bound */
    RP_Q_THREADS = ORBIT_REAPER_QUARANTINE_THREADS,
};

struct rp_worker;

/*
 * A fleet the reaper knows of. The fields above "thread's own" are shared as
 * their comments say; the rest belong to the fleet's thread while it runs.
 */
struct rp_fleet {
    struct rp_hub *hub;         /* what the event loop shares with the fleets' threads */
    uint32_t id;                /* never reused within a reaper: keys its members' watches */
    char name[ORBIT_FLEET_NAME_MAX + 1];
    _Atomic bool from_all;      /* added by watch_all: dropped when it disappears */
    _Atomic uint32_t watched;   /* members watched now */
    _Atomic bool attached;
    _Atomic int quarantine;     /* enum rp_quarantine */
    /* The event loop's, under its lock. */
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

/* The thread, with the process's signals blocked (rp_thread_start). */
int  rp_fleet_start(struct rp_fleet *rf);
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
/* A stopped thread's fleet: join it (the thread is out of its loop). */
void rp_fleet_join(struct rp_fleet *rf);

#endif
