/* SPDX-License-Identifier: MIT */
/* The chaos suite: shared figures between the supervisor and its members, and the payload patterns. */
#ifndef ORBIT_CHAOS_H
#define ORBIT_CHAOS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <orbit/admission.h>
#include <orbit/exchange.h>
#include <orbit/pool.h>
#include <orbit/stream.h>

#define CHAOS_MEMBERS_MAX 12
#define CHAOS_FLEET_CAPACITY 16
#define CHAOS_KEYS 8
#define CHAOS_DOMAINS 3
#define CHAOS_FRAME 64               /* stream frames: header + pattern */
#define CHAOS_CHUNK_MAX 2048         /* exchange DATA chunk bytes */
#define CHAOS_EXIT_FALSE_DEATH 44    /* a member that found its own life reaped while it lived */
#define CHAOS_EXIT_NS_SETUP 43       /* a namespaced member whose pid namespace or /proc mount failed */

/* What a member is doing right now: the table a kill lands in. */
enum chaos_table { T_POOL, T_STREAMS, T_EXCHANGE, T_ADMISSION, T_URING, T_COUNT };
static const char *const chaos_table_name[T_COUNT] = { "pool", "streams", "exchange", "admission", "uring" };

/*
 * One member slot, in memory shared with the supervisor (written by the
 * member), or one forked child's (written by the child; pid by its parent too).
 */
struct chaos_slot {
    _Atomic uint32_t focus;          /* enum chaos_table: 3 of 4 operations of this life go there */
    _Atomic uint32_t table;          /* enum chaos_table of the current operation */
    _Atomic int32_t  ready;          /* joined and opened every table */
    _Atomic uint32_t node;
    _Atomic uint64_t incarnation;
    _Atomic uint64_t beats;          /* operations finished */
    _Atomic int64_t  last_beat_ns;   /* CLOCK_MONOTONIC of the last one */
    /* Set by the supervisor at spawn, for a member: */
    _Atomic uint32_t fork_at;        /* fork a child after this many operations; 0: never */
    _Atomic uint32_t kid_ops;        /* its child exits after this many; 0: runs until killed */
    /* A forked child's: */
    _Atomic int32_t  pid;            /* -1 while its parent forks it, then its pid; 0: slot free */
    _Atomic int32_t  ppid;           /* the parent member's pid */
    _Atomic int32_t  exited;         /* it is about to exit by itself (after kid_ops operations) */
};

struct chaos_shared {
    struct chaos_slot slot[CHAOS_MEMBERS_MAX];
    struct chaos_slot kid[CHAOS_MEMBERS_MAX];   /* kid[i]: the child a member of slot i forked */
    _Atomic uint64_t ops[T_COUNT], errors[T_COUNT];
    _Atomic uint64_t bytes_checked;       /* payload bytes members verified */
    _Atomic uint64_t wrong_bytes;         /* payload bytes that arrived wrong (no scribbler running) */
    _Atomic uint64_t scribbled_bytes;     /* the same while a scribbler runs: it may have hit payloads */
    _Atomic uint32_t hostile;             /* a scribbler is running */
    _Atomic uint64_t hostile_rounds, hostile_bytes;
    _Atomic uint64_t false_deaths;        /* members and children that found themselves reaped alive */
    _Atomic uint64_t kids_forked, fork_checks, fork_violations;
    _Atomic uint64_t member_reaps, member_reaped;   /* members' own orbit_fleet_reap calls, nodes they reported */
};

/*
 * Member main: joins fleet, opens every table, runs random operations until
 * killed. Outside the hostile phase it also reaps now and then, checks that
 * its node still carries its life (else it reports a false death and exits
 * CHAOS_EXIT_FALSE_DEATH), and forks a child at fork_at if the supervisor asked.
 */
void chaos_member(const char *fleet, struct chaos_shared *sh, int slot, uint64_t seed);
/* The scribbler: rounds of random bytes written at random offsets of the fleet's live segments. */
void chaos_scribbler(const char *fleet, struct chaos_shared *sh, uint64_t rounds, uint64_t seed);

/*
 * The hostile neighbour (chaos_neighbour.c): uid 65534's fleets beside the
 * victim's, made by hostile_fleet: 4,000 forged live nodes, a half-created
 * fleet segment, a half-created pool table, and a fleet it truncates under
 * the reaper (chaos_attacker_cut).
 */
#define CHAOS_ATTACKERS 4
#define CHAOS_FORGER    0
#define CHAOS_CUTTER    3
struct chaos_attacker {
    int n;
    pid_t pid[CHAOS_ATTACKERS];
    int keep[CHAOS_ATTACKERS];          /* its stdin: it stays while this is open */
    char fleet[CHAOS_ATTACKERS][64];
};
/* A private mount namespace with its own /dev/shm and hugetlbfs: NULL, or why not. */
const char *chaos_private_shm(void);
/* Start the attacker (hostile_fleet at bin, as uid 65534); 0, or -1 when one part did not get ready. */
int  chaos_attacker_start(struct chaos_attacker *a, const char *bin, const char *tag, unsigned round);
/* Shrink the cutter's fleet segment and pool table to 4 KiB (it checks its own handles see it). */
void chaos_attacker_cut(struct chaos_attacker *a);
/* Kill it (the forger's lives end with it) and remove its fleets; how many parts had ended on their
 * own first (a check of their own failed, the cutter's among them). */
int  chaos_attacker_stop(struct chaos_attacker *a);

static inline int64_t chaos_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t chaos_rand(uint64_t *s)
{
    uint64_t x = *s;   /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static inline uint32_t chaos_below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(chaos_rand(s) % n) : 0; }

/* The byte every payload carries at position i of (stream or exchange id, sequence). */
static inline uint8_t chaos_pattern(uint64_t id, uint64_t seq, uint64_t i)
{
    uint64_t x = (id * 0x9e3779b97f4a7c15ull) ^ (seq * 0xbf58476d1ce4e5b9ull) ^ (i * 0x94d049bb133111ebull);
    x ^= x >> 31;
    return (uint8_t)(x ^ (x >> 17));
}

/* Table specs every party opens with. */
static inline struct orbit_pool_spec chaos_pool_spec(void)
{
    struct orbit_pool_spec s = ORBIT_POOL_SPEC_DEFAULT;
    s.key_capacity = 64;
    s.lane_capacity = 16;
    return s;
}
static inline struct orbit_stream_spec chaos_stream_spec(void)
{
    struct orbit_stream_spec s = ORBIT_STREAM_SPEC_DEFAULT;
    s.lane_capacity = 32;
    s.buffer_bytes = 4096;
    return s;
}
static inline struct orbit_exchange_spec chaos_exchange_spec(void)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control.lane_capacity = 32;
    s.control.buffer_bytes = 4096;
    s.a_to_b.slot_bytes = 1024;
    s.a_to_b.slots_per_lane = 64;
    return s;
}

#endif
