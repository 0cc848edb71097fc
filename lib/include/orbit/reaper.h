/* SPDX-License-Identifier: MIT */
/*
 * orbit/reaper.h — death reports for fleets (liborbit-reaper, optional).
 *
 * A reaper watches the members of one or more fleets and turns each
 * confirmed death into node_dead on every table of that fleet (pool,
 * streams, admission, arena), then frees the node: a kill -9 leaks no
 * lease, stream side, admitted capacity or arena chunk.
 *
 * Backends:
 *   BPF    exit.bpf.c on tp_btf/sched_process_exit reports the exit that
 *          ends a whole thread group of a watched tgid (filtered in the
 *          kernel) through a ring buffer. Needs root (CAP_BPF+CAP_PERFMON),
 *          kernel BTF and a build with clang and bpftool (-Dbpf).
 *   PIDFD  one pidfd_open(2) descriptor per member in an epoll set; it
 *          polls readable when the member's whole thread group has exited.
 *   AUTO   BPF when it loads, else PIDFD (orbit_reaper_note says why).
 *
 * Identity: a report names a process by pid AND start time (field 22 of
 * /proc/<pid>/stat). A death is acted on only when the node record still
 * holds that pid, that start time and the incarnation seen alive, so a pid
 * reused by another process never ends a live node. A node whose pid now
 * names another process (other start time) is reported dead when found.
 *
 * Membership: each watched fleet's thread re-reads its node table every
 * interval (100 ms by default) and when orbit_reaper_process asks it to, so
 * members that join or leave are picked up without busy polling. A member that joins and dies between two reads (or is
 * already inside exit(2) when first read) is reported by that read as found
 * dead. A member that leaves (orbit_fleet_leave) and then exits is never
 * reported. A leader that calls pthread_exit while other threads run is not
 * a death: only the end of the whole thread group is.
 *
 * Thread safety: calls on one handle are serialised by an internal lock;
 * orbit_reaper_process may block in one thread while another calls
 * orbit_reaper_watch. The death and deferral callbacks run under that lock,
 * in the thread calling orbit_reaper_process, and must not call
 * orbit_reaper_* on the same handle; the quarantine callback likewise.
 * orbit_reaper_close must be last.
 *
 * Independence: each watched fleet has a thread of its own that alone opens
 * its segments, re-reads its node table and tests its members' locks, and
 * its death reports run on a worker thread of that fleet (started at its
 * first report, ended when the fleet is), so a fleet whose report must wait
 * for a table lock, or whose table is slow to read, delays no other fleet
 * (see orbit_reaper_on_deferral). The event loop only routes events to them.
 *
 * Pid namespaces: node records hold pids as the members see them, and the
 * member's pid namespace. Both backends watch only members of the reaper's
 * own pid namespace that its /proc shows with the recorded pid and start
 * time; every other member (another pid namespace, hidden by hidepid) is
 * watched through the lock the kernel holds for its life, tested by the
 * fleet's thread every 10 ms (or the interval, when shorter). A death is
 * confirmed by that lock whatever reported it, so the reaper may run in any
 * pid namespace and never reports a live member.
 *
 * Bounds: a watched fleet is shared memory its owner (and, when it is group-
 * shared, its group) writes as it likes, so nothing of it may stop or starve
 * the reaper. Each fleet is handled by a thread of its own, which alone opens
 * its segments and tests its locks: the event loop behind orbit_reaper_fd
 * never waits on any fleet. Segments still being created are not waited for
 * (orbit_fleet_observe_opts, ready_wait_ms 0). Descriptors come out of a
 * budget sized from RLIMIT_NOFILE at orbit_reaper_open (the soft limit, less
 * 96 kept for the reaper itself), threads out of 2,048 (an attached fleet
 * runs two: its own and its worker's), bytes mapped out of 8 TiB: one fleet
 * may hold an eighth of each, the fleets of one owner (the uid owning the
 * fleet segment) a quarter. A fleet's segment may be no larger than its
 * capacity needs (4 KiB a node and 4 MiB), and at most 256 of its members
 * are tested by lock on the short period. A fleet that would break a bound,
 * or that cannot be read, is quarantined (orbit_reaper_on_quarantine): it
 * gives back its descriptors and table mappings, and its thread tests every
 * member's lock on each re-read (at the interval, at most every 100 ms) and
 * reports the deaths it finds (64 at a time at most), thread and worker
 * taking a tenth of a CPU at most. Reviewed every 10 s: it is released once
 * it fits again. Every other fleet keeps its watches and its reclaim time.
 */
#ifndef ORBIT_REAPER_H
#define ORBIT_REAPER_H

#include <orbit/fleet.h>
#include <orbit/inspect.h>

#ifdef __cplusplus
extern "C" {
#endif

enum orbit_reaper_backend { ORBIT_REAPER_AUTO, ORBIT_REAPER_BPF, ORBIT_REAPER_PIDFD };
struct orbit_reaper;

/*
 * orbit_reaper_open - a reaper with the given backend, watching nothing yet.
 * Errors: -ORBIT_ENOTSUP (BPF asked for, but this build has no BPF program),
 * -EPERM (BPF asked for without the privilege to load it), another negated
 * errno from the BPF load, -ORBIT_EMALFORMED (unknown backend or out NULL),
 * -ENOMEM. AUTO never fails for want of BPF: it falls back to PIDFD.
 */
int  orbit_reaper_open(enum orbit_reaper_backend, struct orbit_reaper **out);

/*
 * orbit_reaper_watch - watch the fleet called fleet_name: every generation
 * of it (orbit/fleet.h) whose layouts this library reads, later ones picked
 * up as they appear and dropped when they are gone; or, for a qualified name
 * ("web@2"), that generation only. A fleet that does not exist yet (or is
 * removed and created again) is attached when it appears on a later re-read;
 * a generation of other layouts is left to a reaper of its release. Watching
 * a name twice is a no-op. Returns 0; -ORBIT_EMALFORMED for a bad name,
 * -ORBIT_ECORRUPT when the fleet segment exists but cannot be read (and
 * -ORBIT_EGEOMETRY for a qualified name of other layouts), -ENOMEM.
 */
int  orbit_reaper_watch(struct orbit_reaper *, const char *fleet_name);

/*
 * orbit_reaper_fd - an fd that polls readable when orbit_reaper_process
 * has work (an exit, or the membership timer). Level-triggered; owned by
 * the reaper. Suitable for epoll or an io_uring POLL_ADD.
 */
int  orbit_reaper_fd(struct orbit_reaper *);                  /* pollable */

/*
 * orbit_reaper_process - ask every fleet's thread to re-read its node table,
 * then handle what is ready: every confirmed death is handed to its fleet's
 * worker (by the fleet's thread), and every
 * death a worker has reclaimed (node_dead on every table, node freed) is
 * reported to the callback. Waits up to timeout_ms (-1: forever, 0: handle
 * what is ready now) until at least one death has been handled. Returns the number of deaths handled, 0 when none came within
 * timeout_ms, -EINTR when a signal interrupted the wait before any, or
 * -ORBIT_EMALFORMED for a NULL handle.
 */
int  orbit_reaper_process(struct orbit_reaper *, int timeout_ms); /* returns deaths handled */
enum orbit_reaper_backend orbit_reaper_backend(struct orbit_reaper *);
void orbit_reaper_close(struct orbit_reaper *);

/* ---- watching every fleet, timers, death reports, statistics ----------- */

/* "auto", "bpf", "pidfd". */
const char *orbit_reaper_backend_name(enum orbit_reaper_backend);

/* Why AUTO fell back to PIDFD ("" when it did not): for logs. */
const char *orbit_reaper_note(struct orbit_reaper *);

/*
 * orbit_reaper_watch_all - watch every fleet on this host, now and as they
 * are created (looked for on each timer tick). Fleets that disappear are
 * dropped. Returns 0 or a negative code.
 */
int  orbit_reaper_watch_all(struct orbit_reaper *);

/*
 * orbit_reaper_set_interval - period of the membership timer in ms (1..60000;
 * default 100). It bounds how late a member that joined after the last
 * re-read is watched (and so how late a death of such a member is seen).
 * -ORBIT_EMALFORMED outside the range.
 */
int  orbit_reaper_set_interval(struct orbit_reaper *, int interval_ms);

/*
 * orbit_reaper_rescan - re-read the node tables now (what process asks for
 * on entry), waiting up to 2 s for every fleet's thread to have done so.
 * Returns the number of members watched, or a negative code. Deaths it
 * finds are handled by the next orbit_reaper_process.
 */
int  orbit_reaper_rescan(struct orbit_reaper *);

/*
 * What a death gave back, counted from the tables just before node_dead
 * (orbit_fleet_account; the same fields as struct orbit_reclaim).
 */
struct orbit_reaper_reclaim {
    uint32_t tables;             /* table segments node_dead ran on */
    uint32_t pool_resources;     /* resources the incarnation owned, now closed */
    uint64_t pool_units;         /* their capacity */
    uint64_t pool_leases;        /* reservations and active leases on them */
    uint64_t pool_creating;      /* creation claims its node held, returned */
    uint32_t stream_sides;       /* stream sides it held */
    uint64_t stream_unread;      /* bytes queued towards it that nobody will read */
    uint32_t admission_claims;   /* live admission claims it held */
    uint64_t admission_units;    /* their units, summed over domains */
    uint32_t arena_chunks;       /* arena runs it reserved, committed unread, or was reading */
    uint64_t arena_bytes;        /* slot bytes those runs occupied, now free */
    uint64_t resv[6];            /* zero */
};

enum orbit_reaper_source {
    ORBIT_REAPER_EXIT_EVENT,     /* the backend saw the thread group end */
    ORBIT_REAPER_FOUND_DEAD,     /* found gone (or pid reused) when read */
};

struct orbit_reaper_death {
    const char *fleet;           /* valid during the callback only */
    uint16_t node;
    int32_t  pid;
    uint64_t start_time;         /* /proc/<pid>/stat field 22 */
    uint64_t incarnation;
    int      status;             /* waitpid(2) status; -1 when unknown */
    enum orbit_reaper_backend backend;  /* BPF or PIDFD */
    enum orbit_reaper_source source;
    uint64_t exit_ns;            /* CLOCK_MONOTONIC of the exit; 0 when unknown */
    uint64_t detected_ns;        /* CLOCK_MONOTONIC when the reaper took it up */
    uint64_t reclaimed_ns;       /* CLOCK_MONOTONIC when node_dead had finished */
    bool     accounted;          /* reclaimed holds counts (ORBIT_REAPER_ACCOUNT) */
    struct orbit_reaper_reclaim reclaimed;
    uint32_t attempts;           /* orbit_fleet_node_dead tries it took (1 unless deferred) */
    uint32_t resv32;             /* zero */
    uint64_t resv[3];            /* zero */
};

typedef void (*orbit_reaper_death_fn)(void *ctx, const struct orbit_reaper_death *);

#define ORBIT_REAPER_ACCOUNT 1u  /* count what each death gave back (costs a table walk) */

/* Call fn for each death handled; flags: ORBIT_REAPER_ACCOUNT. fn NULL: none. */
int  orbit_reaper_on_death(struct orbit_reaper *, orbit_reaper_death_fn fn, void *ctx, unsigned flags);

struct orbit_reaper_stats {
    uint64_t events;             /* exit reports received from the backend */
    uint64_t deaths;             /* deaths reclaimed */
    uint64_t ignored;            /* reports that matched no live node record (left, reused, done) */
    uint64_t drops;              /* BPF events lost to a full ring (a sweep follows) */
    uint64_t rescans;
    uint32_t fleets;             /* fleets attached */
    uint32_t watched;            /* members watched */
    uint64_t quarantines;        /* fleets put in quarantine so far (orbit_reaper_on_quarantine) */
    uint32_t quarantined;        /* fleets in quarantine now */
    uint32_t descriptors;        /* descriptors held for fleets and their members now */
    uint32_t descriptor_budget;  /* what may be held: RLIMIT_NOFILE less the reaper's own */
    uint32_t resv32;             /* zero */
    uint64_t resv[1];            /* zero */
};
void orbit_reaper_stats(struct orbit_reaper *, struct orbit_reaper_stats *out);

/* ---- reports that must wait ---------------------------------------------- */

/*
 * Each watched fleet's reports run on a thread of their own, so one fleet
 * whose report cannot finish delays no other fleet's. A report cannot finish
 * while a live member holds one of the fleet's table locks past its bound
 * (orbit_fleet_node_dead then fails and the node stays reserved): it is
 * deferred and tried again later, after a backoff that doubles from 100 ms
 * to 1 s, until it finishes; the death is then handled (and reported to the
 * death callback) like any other, its reclaimed_ns - detected_ns the whole
 * wait. orbit_reaper_close waits for a try under way (at most the bound of
 * the locks it meets).
 */
struct orbit_reaper_deferral {
    const char *fleet;           /* valid during the callback only */
    uint16_t node;
    int32_t  pid;                /* the life being ended */
    uint64_t start_time;
    uint64_t incarnation;
    bool     death;              /* a death the callback will get; false: a report another left unfinished */
    int      error;              /* what orbit_fleet_node_dead returned (-ORBIT_ECORRUPT: a lock held past its bound) */
    uint32_t attempts;           /* tries so far */
    uint32_t retry_ms;           /* the next try starts no sooner */
    uint64_t detected_ns;        /* CLOCK_MONOTONIC when the reaper took it up */
    uint64_t deferred_ns;        /* CLOCK_MONOTONIC when this try gave up */
    uint64_t resv[4];            /* zero */
};

typedef void (*orbit_reaper_deferral_fn)(void *ctx, const struct orbit_reaper_deferral *);

/*
 * Call fn (from orbit_reaper_process, like the death callback) each time a
 * report is deferred. fn NULL: none. Returns 0, -ORBIT_EMALFORMED for NULL.
 */
int  orbit_reaper_on_deferral(struct orbit_reaper *, orbit_reaper_deferral_fn fn, void *ctx);

/* ---- quarantine ------------------------------------------------------------ */

enum orbit_reaper_quarantine_reason {
    ORBIT_REAPER_QUARANTINE_DESCRIPTORS = 1,  /* it (or its owner, or all) would hold too many descriptors */
    ORBIT_REAPER_QUARANTINE_MAPPED,           /* its segments are larger than its capacity or a bound allows */
    ORBIT_REAPER_QUARANTINE_MEMBERS,          /* more members to test by lock than a fleet's bound (256) */
    ORBIT_REAPER_QUARANTINE_FAULT,            /* it cannot be read: still being created past 1 s, corrupt, refused */
    ORBIT_REAPER_QUARANTINE_THREADS,          /* its owner's fleets (or all) would run more threads than allowed */
};

/* "descriptors", "mapped", "members", "fault", "threads". */
const char *orbit_reaper_quarantine_reason_name(enum orbit_reaper_quarantine_reason);

struct orbit_reaper_quarantine {
    const char *fleet;           /* valid during the callback only */
    const char *detail;          /* one sentence: what broke which bound (valid during the callback) */
    enum orbit_reaper_quarantine_reason reason;
    bool     released;           /* false: put in quarantine now; true: watched as before again */
    int64_t  owner;              /* uid owning the fleet segment; -1 when not known */
    uint64_t wanted;             /* what it would have held (descriptors, bytes) or members to test */
    uint64_t bound;              /* the bound that refused it */
    int      error;              /* FAULT: what kept it from being read */
    uint32_t resv32;             /* zero */
    uint64_t resv[4];            /* zero */
};

typedef void (*orbit_reaper_quarantine_fn)(void *ctx, const struct orbit_reaper_quarantine *);

/*
 * Call fn (from orbit_reaper_process, like the death callback) each time a
 * fleet is put in quarantine or released from it (see Bounds above). fn
 * NULL: none. Returns 0, -ORBIT_EMALFORMED for NULL.
 */
int  orbit_reaper_on_quarantine(struct orbit_reaper *, orbit_reaper_quarantine_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
