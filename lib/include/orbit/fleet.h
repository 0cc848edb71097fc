/* SPDX-License-Identifier: MIT */
/*
 * orbit/fleet.h — fleets, nodes, ids and segments.
 *
 * A fleet is a named set of up to 4096 cooperating processes on one host.
 * Each process that joins claims a node (a small integer, a role a
 * replacement may inherit) and carries an incarnation (a 64-bit number that
 * tells one process life from the next). Every table of the fleet (pool,
 * streams, admission) lives in its own shared-memory segment named
 * "orbit.<fleet>.<kind in decimal>", on hugetlbfs when it can, else /dev/shm.
 *
 * Thread safety: a fleet handle may be shared by the threads of its process;
 * orbit_fleet_leave must be the last call on it.
 */
#ifndef ORBIT_FLEET_H
#define ORBIT_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <orbit/error.h>
#include <orbit/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ids ---------------------------------------------------------------
 * orbit_id: kind:8 | node:16 | counter:40, where
 * counter = generation:24 | slot:16. The kind is the table's segment kind,
 * the node the lane (creator) it lives in, the slot its index in that lane
 * and the generation the slot's tenancy; a later tenant has another
 * generation, so an old id answers -ORBIT_ESTALE. */
typedef uint64_t orbit_id;

#define ORBIT_ID_GENERATION_MAX 0xffffffu
#define ORBIT_ID_SLOT_MAX       0xffffu

static inline uint8_t  orbit_id_kind(orbit_id id)       { return (uint8_t)(id >> 56); }
static inline uint16_t orbit_id_node(orbit_id id)       { return (uint16_t)(id >> 40); }
static inline uint64_t orbit_id_counter(orbit_id id)    { return id & 0xffffffffffull; }
static inline uint32_t orbit_id_slot(orbit_id id)       { return (uint32_t)(id & 0xffffu); }
/* 0 is never a live generation. */
static inline uint32_t orbit_id_generation(orbit_id id) { return (uint32_t)((id >> 16) & 0xffffffu); }
static inline orbit_id orbit_id_make(uint8_t kind, uint16_t node, uint32_t generation, uint32_t slot)
{
    return ((uint64_t)kind << 56) | ((uint64_t)node << 40) |
           ((uint64_t)(generation & 0xffffffu) << 16) | (uint64_t)(slot & 0xffffu);
}

/*
 * orbit_id_format - write "kind:node:counter" in decimal plus a NUL.
 * Returns the text's length, or -ORBIT_ETOOLARGE when len cannot hold it
 * (nothing useful is written then), -ORBIT_EMALFORMED for a NULL buf.
 * At most 30 bytes are ever needed (ORBIT_ID_TEXT_MAX).
 */
#define ORBIT_ID_TEXT_MAX 32
int orbit_id_format(orbit_id id, char *buf, size_t len);

/*
 * orbit_id_parse - read an id from its decimal "kind:node:counter" form, or
 * from "0x" followed by 1..16 hex digits. Fields are plain decimal digits
 * (no sign, no spaces); a field out of range (kind > 255, node > 65535,
 * counter >= 2^40), an empty field or any trailing byte is -ORBIT_EMALFORMED
 * and *out is left untouched.
 */
int orbit_id_parse(const char *text, orbit_id *out);

/* ---- fleets ------------------------------------------------------------ */

/* A member's life: its node and the incarnation it joined with (what holds a
 * pool resource, a stream's side or an exchange's peer). */
struct orbit_owner { uint16_t node; uint64_t incarnation; };

enum orbit_backing {
    ORBIT_BACKING_AUTO,     /* hugetlbfs, else /dev/shm + MADV_HUGEPAGE, else plain pages */
    ORBIT_BACKING_HUGETLB,  /* huge pages or -ENOMEM */
    ORBIT_BACKING_SHM,      /* /dev/shm */
    ORBIT_BACKING_PRIVATE,  /* anonymous memory: this process only (threads) */
};

/*
 * Generations. A fleet name may hold more than one generation at once: the
 * members of one generation share its segments, all made at the layouts of
 * one library (orbit_layout_version); members of another layout start or
 * join a generation of their own beside it, under the same name. Nothing
 * crosses between generations. The first generation is named by the fleet's
 * name ("web": segments orbit.web.<kind>), a later one by the name qualified
 * with its number ("web@2": orbit.web@2.<kind>); every call that takes a
 * fleet name takes a qualified one, and an unqualified name (but in
 * orbit_fleet_join) means generation 1. A generation lives while it has
 * members and is removed, like any fleet, once nobody lives in it
 * (orbit_fleet_collect, orbit-reaper --gc).
 *
 * opts.generation says which one orbit_fleet_join joins:
 *   ORBIT_GENERATION_AUTO  the newest generation whose layouts are this
 *                          library's; a new one beside the others (one past
 *                          the newest) only when none is. The default: a
 *                          rolling restart onto a library of other layouts
 *                          needs nothing else.
 *   ORBIT_GENERATION_NEW   a new generation beside the others, whatever their
 *                          layouts (a clean start for a new release of a
 *                          server whose library did not change).
 *   1..ORBIT_GENERATION_MAX  exactly that one (created if nobody made it):
 *                          one of other layouts is -ORBIT_EGEOMETRY, and
 *                          orbit_last_error names both sides' versions.
 */
#define ORBIT_GENERATION_AUTO 0u
#define ORBIT_GENERATION_NEW  0xffffffffu
#define ORBIT_GENERATION_MAX  999999999u

struct orbit_fleet_opts {
    uint16_t capacity;          /* nodes, 1..4096; must match an existing fleet */
    int32_t  node;              /* -1: first free node; otherwise claim exactly this node */
    uint64_t incarnation;       /* 0: a random one (top bit set), unique per process life */
    enum orbit_backing backing;
    uint32_t mode;              /* 0: 0600 (0660 with a gid); else these bits, gid or not (0600 at least, none for others) */
    int64_t  gid;               /* -1: none; 0..4294967294: segments are chowned to it (0660 unless mode says) */
    uint32_t generation;        /* ORBIT_GENERATION_AUTO (0), ORBIT_GENERATION_NEW, or exactly that one */
    uint32_t resv32;            /* zero */
    uint64_t resv[3];      /* zero; a later release may give it meaning */
};
#define ORBIT_FLEET_OPTS_DEFAULT { .capacity = 64, .node = -1, .incarnation = 0, \
                                   .backing = ORBIT_BACKING_AUTO, .mode = 0, .gid = -1, \
                                   .generation = ORBIT_GENERATION_AUTO, .resv32 = 0, .resv = { 0 } }

#define ORBIT_FLEET_CAPACITY_MAX 4096
#define ORBIT_FLEET_NAME_MAX     64     /* bytes, without the NUL; [A-Za-z0-9_.-] */
#define ORBIT_NODE_NONE          0xffffu /* orbit_fleet_node of an observer handle */

struct orbit_fleet;

/*
 * orbit_fleet_join - join (creating if needed) the fleet called name and
 * claim a node, in the generation opts->generation picks (above). opts NULL
 * means ORBIT_FLEET_OPTS_DEFAULT. name NULL makes a PRIVATE fleet of this
 * process only, whatever opts->backing says (generation 1). A qualified name
 * ("web@2") asks for that generation, as opts->generation = 2 would.
 *
 * Errors: -ORBIT_EMALFORMED (bad name, capacity outside 1..4096, node >=
 * capacity, mode with world bits, gid outside -1 and 0..4294967294, a
 * qualified name and another opts->generation), -ORBIT_EGEOMETRY (the
 * generation exists with another capacity; the generation asked for is of
 * other layouts, or a new one's qualified name would pass 64 bytes:
 * orbit_last_error names both sides' versions), -ORBIT_ECORRUPT (the fleet segment is truncated or not
 * an orbit segment, or the record of the node asked for is garbled), -ORBIT_EFULL (no free node), -ORBIT_ECLAIMED (the node
 * asked for is held by a live process), -ENOMEM (HUGETLB and no huge pages),
 * -EACCES (permissions; or a segment under the name that no member made: a
 * symlink, a non-regular file, one others may open, or another user's not
 * shared with opts->gid; table opens refuse such a segment the same way),
 * or another negated errno. AUTO takes /dev/shm when
 * there are no huge pages or hugetlbfs is not writable by this user.
 */
int  orbit_fleet_join(const char *name, const struct orbit_fleet_opts *opts, struct orbit_fleet **out);

/*
 * orbit_fleet_observe - open an existing fleet without claiming a node, for
 * tools and supervisors (orbitctl, the reaper). Tables opened through an
 * observer may be inspected and may report deaths, but create nothing. An
 * observer with read access only (a 0640 fleet's group) gets a read-only
 * handle: it inspects; reap, node_dead, reset_tables and death waits are
 * -EACCES. name is a generation's qualified name ("web" is generation 1).
 * -ENOENT when it does not exist; -ORBIT_EGEOMETRY when it is of other layouts
 * (orbit_last_error names both sides' versions: observe a generation of
 * this library's layouts, orbit_fleet_generations lists them).
 */
int  orbit_fleet_observe(const char *name, struct orbit_fleet **out);

/*
 * orbit_fleet_observe_opts - orbit_fleet_observe, told how long to wait for a
 * segment whose creator is still initialising it (the header says not ready
 * and the creator, alive, holds its creation lock; normally a few
 * milliseconds). A process that must never stall on another user's fleet (the
 * reaper, a scrape) waits 0 ms: such a segment is -ORBIT_EAGAIN at once, and
 * orbit_last_error() names its file. The bound holds for the fleet segment
 * and for every table opened through the handle (their *_open_existing calls,
 * death reports, orbit_fleet_account). opts NULL is orbit_fleet_observe.
 * Errors: those of orbit_fleet_observe; -ORBIT_EAGAIN (still being created
 * after ready_wait_ms); -ORBIT_EMALFORMED (ready_wait_ms below -1 or above
 * ORBIT_OBSERVE_WAIT_MAX_MS, flags or resv not zero).
 */
struct orbit_observe_opts {
    int32_t  ready_wait_ms;     /* -1: the library's bound (10 s, then -ORBIT_ECORRUPT); 0..60000: that long */
    uint32_t flags;             /* zero: no flag is defined yet */
    uint64_t resv[4];           /* zero; a later release may give it meaning */
};
#define ORBIT_OBSERVE_OPTS_DEFAULT { .ready_wait_ms = -1, .flags = 0, .resv = { 0 } }
#define ORBIT_OBSERVE_WAIT_MAX_MS 60000
int  orbit_fleet_observe_opts(const char *name, const struct orbit_observe_opts *opts, struct orbit_fleet **out);

/*
 * Releases the node (if any) and unmaps the fleet; tables must be closed first.
 * A member's leave gives back what its life still holds exactly as its death
 * report would (orbit_fleet_node_dead): unaccepted reservations on others'
 * resources, resources it owns, stream sides, claims, arena chunks.
 */
void orbit_fleet_leave(struct orbit_fleet *);
uint16_t orbit_fleet_node(const struct orbit_fleet *);
uint64_t orbit_fleet_incarnation(const struct orbit_fleet *);
uint16_t orbit_fleet_capacity(const struct orbit_fleet *);
enum orbit_backing orbit_fleet_backing(const struct orbit_fleet *);
/* Its generation-qualified name ("web", or "web@2" for generation 2); "" for PRIVATE. */
const char *orbit_fleet_name(const struct orbit_fleet *);
/* The generation this handle is in (1 for PRIVATE fleets; 0 for NULL). */
uint32_t orbit_fleet_generation(const struct orbit_fleet *);

/*
 * Liveness. A member holds, for its whole life, a lock the kernel keeps on a
 * byte of the fleet segment file (an open-file-description lock): the kernel
 * drops it when the process is gone, however it died, and any process that
 * can open the segment tests it, from any pid namespace, as any user with
 * access to it, whatever /proc shows. That is what "alive" means everywhere
 * (orbit_fleet_reap, orbit_fleet_nodes, orbitctl, orbit-reaper); pids and
 * start times are for display. A pid reused by another process fools
 * nothing.
 *
 * Fork. A handle belongs to the process that made it. In a forked child every
 * inherited handle (fleet and table handles alike) is refused with
 * -ORBIT_EFORKED and changes nothing of the parent's; closing or leaving it
 * only frees the child's memory. The child joins for itself (orbit_fleet_join
 * after fork, another node or the node of a parent that is gone). The child's
 * copies of the parent's descriptors are closed at fork, so the parent's
 * death is seen while the child lives. (A child made by a raw clone(2),
 * without the C library's fork, keeps them: use fork, posix_spawn or exec.)
 */

/*
 * orbit_fleet_reap - one liveness sweep over the node table: every claimed
 * node whose process is gone (or whose pid now names a process with another
 * start time) is reported dead on every table segment of the fleet that
 * exists and is freed. Returns the number of nodes reported (each death is
 * reported once), or a negative code.
 */
int  orbit_fleet_reap(struct orbit_fleet *);

/*
 * orbit_fleet_wait_node_death - waits until that incarnation of node is
 * dead as the kernel reports it: its process is gone (in any pid namespace),
 * or it left, or the node no longer carries that incarnation. Needs no
 * reaper, supervisor or BPF: the kernel releases the member's lock, a watcher
 * thread of this process that waits for it wakes every waiter of the node in
 * every process at once. Returns 0 when dead (at once if it is already),
 * -ORBIT_ETIMEDOUT (timeout 0 only looks, and starts no watcher),
 * -ORBIT_EMALFORMED (node >= capacity, a timeout below -1,
 * this handle's own life), -ORBIT_EFORKED, or another negative code. It
 * reports nothing: run orbit_fleet_reap or orbit_fleet_node_dead next. The
 * io_uring form is orbit_fleet_prep_wait_node_death (below).
 */
int  orbit_fleet_wait_node_death(struct orbit_fleet *, uint16_t node, uint64_t incarnation, int timeout_ms);

/*
 * The fleet's io_uring waits, by the prep contract of <orbit/uring.h>.
 * prep_wait_doorbell completes when this member's doorbell rings (a watched
 * key, an offer, a peer's data: what its readiness fds report).
 * prep_wait_node_death completes when that incarnation of node is dead,
 * left, or replaced (as orbit_fleet_wait_node_death): 1 with a NOP when it
 * is so already. Put it beside a peer's readable wait: no reaper is needed
 * to learn of the death. The completion reports nothing; call
 * orbit_fleet_reap (or node_dead) next.
 */
struct io_uring_sqe;
int  orbit_fleet_prep_wait_doorbell(struct orbit_fleet *, struct io_uring_sqe *);
int  orbit_fleet_prep_wait_node_death(struct orbit_fleet *, uint16_t node, uint64_t incarnation,
                                      struct io_uring_sqe *);

/*
 * orbit_fleet_live_members - how many members of the named fleet (one
 * generation: "web" is generation 1) are alive (hold their kernel lock)
 * now, whatever layouts the generation has; -ENOENT when there is no such
 * fleet, -ORBIT_EGEOMETRY when its segment header is of another version
 * (its locks cannot be told).
 */
ssize_t orbit_fleet_live_members(const char *name);

/*
 * orbit_fleet_collect - removes the named fleet (as orbit_fleet_unlink) if
 * nobody lives in it: no member holds its kernel lock and no joiner is
 * mid-way (joiners hold the fleet's gate, which the collector takes alone
 * for its check and the unlink, so a fleet with a live member is never
 * touched). One generation: "web" is generation 1, "web@2" the next; a
 * generation of other layouts is judged by the same kernel-held locks, so an
 * empty old generation is collected by a newer release. 0 removed;
 * -ORBIT_EBUSY (someone lives in it or is joining), -ENOENT,
 * -ORBIT_EGEOMETRY (a segment header of another version: not judged).
 */
int  orbit_fleet_collect(const char *name);

/*
 * orbit_fleet_unlink - removes every segment of that fleet (both backings;
 * one generation: "web" is generation 1, "web@2" the next)
 * and the small files in /dev/shm (orbit.<name>.<kind>.lock) whose flock
 * makes creating a segment name race-free (a creator removes its own when
 * done; one killed while creating leaves it), and half-built segments
 * (orbit.<name>.<kind>.tmp.<pid>.*) whose creator is gone or is the caller.
 * Returns 0 when it removed anything, -ENOENT if there was nothing.
 * Creation never waits on a lock file of another user (one planted to block
 * it is ignored), nor on any holder for longer than 10 s.
 */
int  orbit_fleet_unlink(const char *name);

/* ---- generations --------------------------------------------------------- */

/* One generation of a fleet name, as orbit_fleet_generations reads it from its fleet segment. */
struct orbit_generation_info {
    uint32_t generation;                     /* 1, 2, ... */
    char     name[ORBIT_FLEET_NAME_MAX + 1]; /* its qualified name: "web", "web@2" */
    bool     readable;                       /* made at this library's layouts: it may join, observe, reap it */
    uint16_t capacity;                       /* nodes */
    int32_t  live_members;                   /* members whose process lives (any version); negated code: unknown */
    uint32_t library_version;                /* orbit_version() of the library that started it; 0: not recorded */
    uint32_t layouts[ORBIT_LAYOUTS_MAX];     /* its layout versions by ORBIT_LAYOUT_*; 0: not recorded */
    enum orbit_backing backing;              /* HUGETLB or SHM: where its fleet segment is */
    uint64_t resv[4];                        /* zero */
};

/*
 * orbit_fleet_generations - the generations of the named fleet (a
 * qualified name counts as its fleet's), oldest first. Fills up to max;
 * returns how many there are (may exceed max), 0 when there is none, or
 * -ORBIT_EMALFORMED. Versions come from each generation's segment header,
 * which every release can read: a generation made before generations were
 * recorded (a fleet of orbit 0.1) shows its segment and fleet layouts only,
 * and live members are counted by the kernel-held locks, whatever the
 * layout. A generation whose fleet segment cannot be read (garbled,
 * another user's) is listed with live_members the negated code.
 */
ssize_t orbit_fleet_generations(const char *name, struct orbit_generation_info *out, size_t max);

/*
 * orbit_fleet_generation_name - write the qualified name of that generation
 * of fleet name ("web" for 1, "web@N" after) plus a NUL: its length,
 * -ORBIT_ETOOLARGE (the qualified name would pass ORBIT_FLEET_NAME_MAX
 * bytes, or len cannot hold it), -ORBIT_EMALFORMED (a name that is
 * qualified already, a generation outside 1..ORBIT_GENERATION_MAX).
 */
int orbit_fleet_generation_name(const char *name, uint32_t generation, char *buf, size_t len);

/* ---- inspection, for tools and supervisors ------------------------------ */

enum orbit_node_state { ORBIT_NODE_FREE = 0, ORBIT_NODE_JOINING = 1, ORBIT_NODE_LIVE = 2 };
struct orbit_node_info {
    uint16_t node;
    enum orbit_node_state state;
    int32_t  pid;
    uint64_t start_time;     /* field 22 of /proc/<pid>/stat, clock ticks since boot */
    uint64_t incarnation;
    bool     alive;          /* LIVE and its process holds its kernel lock (any pid namespace) */
    uint64_t pid_namespace;  /* inode of the member's pid namespace (pid is in it); 0 unknown */
    uint64_t resv[1];      /* zero; a later release may give it meaning */
};
/* Fills up to max records of claimed nodes; returns how many are claimed. */
ssize_t orbit_fleet_nodes(struct orbit_fleet *, struct orbit_node_info *out, size_t max);

/*
 * orbit_fleet_node_dead - report one confirmed death. If the node still
 * carries that incarnation, this call takes it (exactly one reporter does),
 * runs node_dead for (node, incarnation) on every table segment of the fleet
 * that exists, and frees the node. A node already freed or claimed by a later
 * life is left alone. Returns 0, or -ORBIT_EMALFORMED for node >= capacity,
 * or the error of a table that could not give the share back yet (a live
 * member held its lock past the bound: -ORBIT_ECORRUPT); the node then stays
 * reserved, and a later orbit_fleet_reap or report finishes it. While another
 * reporter, sweep or joiner is moving the node the call waits for it (up to
 * about 3 s) and then reports what is still owed; -ORBIT_EAGAIN when it stayed
 * busy that long (try again).
 * orbit_fleet_reap and the reaper use it; call it yourself only for a process
 * you know is gone. Reports are resumable: the node records who is reporting
 * (pid and start time), and a report whose reporter died half-way is finished
 * by the next orbit_fleet_node_dead or orbit_fleet_reap that reaches the node,
 * by a joiner that would take it, or by orbit-reaper's rescan. (The tables' own *_node_dead calls act unconditionally.)
 * A death report also wakes every waiter the dead process may have owed a
 * wake: one killed between claiming a sleeper's wake and issuing it (at once,
 * or from an io_uring wake batch it never submitted) would otherwise leave
 * that sleeper deaf to later signals. Every node's doorbell is woken here, and
 * each table's node_dead wakes its shared words (offers, keys, credit, change);
 * a woken waiter that finds nothing parks again.
 */
int  orbit_fleet_node_dead(struct orbit_fleet *, uint16_t node, uint64_t incarnation);

struct orbit_segment_info {
    uint8_t  kind;
    enum orbit_backing backing;   /* HUGETLB or SHM */
    uint64_t size;                /* bytes mapped */
    uint64_t epoch;
    char     path[256];
    uint64_t resident;            /* bytes of memory the file holds now (huge pages or shm pages) */
    uint64_t resv[1];      /* zero; a later release may give it meaning */
};
/* Segments of the named fleet that exist; returns how many (may exceed max). */
ssize_t orbit_fleet_segments(const char *name, struct orbit_segment_info *out, size_t max);

/*
 * Fleets present on this host (fleet segments found), one entry per
 * generation: a fleet's first generation by its name, a later one by its
 * qualified name ("web@2"); returns how many.
 */
ssize_t orbit_fleet_list(char (*names)[ORBIT_FLEET_NAME_MAX + 1], size_t max);

const char *orbit_backing_name(enum orbit_backing);  /* "auto", "hugetlb", "shm", "private" */

/*
 * Spin before park (the wake protocol): every blocking wait spins with `pause` for
 * up to this many nanoseconds before it parks in the kernel (default 2000,
 * or the ORBIT_SPIN_NS environment variable at first use; 0 disables). The
 * budget adapts per waiter: spins that keep failing shrink it, parks that
 * end just after they began grow it (up to 16 times the setting). A thread
 * that finds its CPU contended (it lost the CPU while spinning) calls
 * sched_yield between checks instead of pausing, so the task it waits for
 * can run, until yields come back at once again. Process-wide.
 */
void     orbit_set_spin_ns(uint32_t ns);
uint32_t orbit_spin_ns(void);

#ifdef __cplusplus
}
#endif
#endif
