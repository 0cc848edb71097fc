/* SPDX-License-Identifier: MIT */
/*
 * orbit/admission.h — a fleet-wide ledger of multi-domain capacity claims.
 *
 * The ledger lives in its own segment (kind 245 by default) and is shared by
 * every process of the fleet. It holds up to max_domains capacity domains
 * (arbitrary uint32 ids: bytes of a device, slots, blocks...) each with a
 * capacity and the units in use, and up to max_claims live claims. A claim
 * takes units from several domains at once, all or nothing:
 *
 *     struct orbit_units want[] = { { .domain = KV_BYTES, .units = 1 << 20 },
 *                                   { .domain = SLOTS,    .units = 1 } };
 *     struct orbit_demand d = { .claim = want, .n_claim = 2 };
 *     struct orbit_admit_result r;
 *     for (;;) {
 *         if ((ret = orbit_admission_try_claim(adm, &d, &r)) < 0) return ret;
 *         if (r.outcome != ORBIT_ADMIT_DEFERRED) break;
 *         orbit_admission_wait(adm, r.release_epoch, -1, NULL);   // until a release
 *     }
 *     if (r.outcome == ORBIT_ADMIT_CLAIMED) { ...; orbit_admission_release(adm, &r.claim); }
 *
 * Outcomes: CLAIMED (units charged; the claim carries a serial never reused
 * by this ledger), DEFERRED (does not fit now: wait past release_epoch and
 * try again), SKIPPED (an optional retained claim refused by retention
 * policy: never wait for it), REJECTED (can never fit: a demand above a
 * domain's capacity).
 *
 * Fail-closed: every checked overflow and every broken invariant the ledger
 * detects poisons it; from then on every mutating call and every wait returns
 * -ORBIT_EPOISONED (inspection calls keep working, for diagnosis).
 *
 * Death: claims are recorded with the claimer's (node, incarnation);
 * orbit_admission_node_dead (run by orbit_fleet_reap and the reaper) releases
 * what a dead process held. A process that dies inside the ledger's mutex
 * is repaired by the next caller (a waiter takes the lock over once the
 * holder's process is gone, zombie included): used and retained bytes are
 * recomputed from the live claim records; a record caught half-written
 * poisons instead.
 *
 * Bounded: no call waits on the mutex for ever. A mutex word no holder could
 * have written (a member scribbled on it) poisons the ledger at once; a live
 * holder that keeps it for 2 s (stopped, stuck) ends the call with
 * -ORBIT_ECORRUPT (inspection calls: -ORBIT_ETIMEDOUT) and leaves the
 * ledger as it was. Holders are processes of one pid namespace.
 *
 * Thread safety: every call may be made from any thread on a shared handle,
 * except orbit_admission_close, which must be the last call on the handle.
 */
#ifndef ORBIT_ADMISSION_H
#define ORBIT_ADMISSION_H

#include <orbit/fleet.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORBIT_ADMISSION_KIND 245

/*
 * max_domains 1..1024, max_claims 1..1048576 (and the table at most 1 GiB),
 * retained_max_bytes the cap on the retained bytes of all live retained
 * claims (0: retention disabled). Every process must open with the same spec
 * (else -ORBIT_EGEOMETRY).
 */
struct orbit_admission_spec {
    uint8_t  kind;
    uint32_t max_domains;
    uint32_t max_claims;
    uint64_t retained_max_bytes;    /* 0: retention disabled */
    uint64_t resv[4];      /* zero; a later release may give it meaning */
};
#define ORBIT_ADMISSION_SPEC_DEFAULT { .kind = ORBIT_ADMISSION_KIND, .max_domains = 16, .max_claims = 4096, \
                                      .retained_max_bytes = 0, .resv = { 0 } }

/* units must be > 0; a domain appears at most once per vector. */
struct orbit_units { uint32_t domain; uint64_t units; };
struct orbit_demand { const struct orbit_units *claim; size_t n_claim;     /* immediate, non-empty */
                      const struct orbit_units *fit;   size_t n_fit;       /* must fit under maximum; may be empty */
                      uint64_t retained_bytes; };                          /* 0: ordinary claim; else must equal the claim's sum */

/*
 * A claim as returned by try_claim: plain data the caller owns and may copy
 * to another process of the fleet (any process may release it). slot and
 * incarnation, beyond the four fields a caller reads, are the record's
 * index (so release is O(1)) and the claimer's incarnation. Do not edit it:
 * a claim whose fields disagree with a live record of the same serial
 * poisons the ledger on release. Serials only grow and are never reused; each
 * ledger starts them at a random point below 2^62, so a claim of another
 * ledger (or of an earlier ledger of the same name) is never taken for one of
 * this ledger's: releasing it is -ORBIT_ENOTRESERVED.
 */
struct orbit_claim { uint64_t serial; uint16_t node; uint64_t retained_bytes; bool released;
                     uint32_t slot; uint64_t incarnation; };
enum orbit_admit { ORBIT_ADMIT_CLAIMED, ORBIT_ADMIT_DEFERRED, ORBIT_ADMIT_SKIPPED, ORBIT_ADMIT_REJECTED };
enum orbit_skip  { ORBIT_SKIP_NONE, ORBIT_SKIP_DISABLED, ORBIT_SKIP_CAPACITY };
struct orbit_admit_result { enum orbit_admit outcome; struct orbit_claim claim;
                            uint64_t release_epoch;          /* DEFERRED: wait past this */
                            uint32_t blocker_domain;         /* DEFERRED/REJECTED: first blocking domain */
                            uint64_t blocker_free, blocker_maximum;
                            enum orbit_skip skip; uint64_t retained_now, retained_max; };
struct orbit_domain_info {
    uint32_t domain;
    uint64_t capacity, used, availability_epoch;
    uint64_t resv[2];      /* zero; a later release may give it meaning */
};

struct orbit_admission;

/*
 * orbit_admission_open - open (creating if needed) the fleet's ledger.
 * spec NULL means ORBIT_ADMISSION_SPEC_DEFAULT. A new ledger has no domains:
 * set them up with orbit_admission_set_capacity.
 * On an observer fleet (orbit_fleet_observe) it creates nothing: the ledger
 * must exist (else -ENOENT) with this spec.
 * Errors: -ORBIT_EMALFORMED (bad spec, kind 255), -ORBIT_EGEOMETRY (the
 * ledger exists with another spec), -ORBIT_ECORRUPT, -ENOMEM, -EACCES.
 *
 * Testing only: when the environment variable ORBIT_TEST_ADMISSION_PARK_IN_MUTEX
 * is set at open to "claim-writing", "claim-commit" or "release", calls made
 * through this handle stop the whole process with SIGSTOP at that point
 * inside the ledger mutex (a half-written claim record; a live record with
 * its units partly charged; a record partly released), so a test can see it
 * stopped (waitpid WUNTRACED) and kill -9 it there. SIGCONT resumes it.
 */
int  orbit_admission_open(struct orbit_fleet *, const struct orbit_admission_spec *, struct orbit_admission **out);

/*
 * orbit_admission_open_existing - open the existing ledger of that kind,
 * taking its spec from the segment (for tools and the reaper; works on an
 * observer fleet). -ENOENT when there is none; -ORBIT_EGEOMETRY when that
 * segment is not an admission ledger of this layout.
 */
int  orbit_admission_open_existing(struct orbit_fleet *, uint8_t kind, struct orbit_admission **out);
void orbit_admission_close(struct orbit_admission *);                          /* the handle */

/*
 * orbit_admission_set_capacity - create domain with that capacity, or change
 * an existing domain's capacity. Growing a domain advances its availability
 * epoch and the change epoch, waking deferred claimers. Capacity 0 is
 * allowed (every claim on it is REJECTED).
 * Errors: -ORBIT_EBUSY (below the units in use), -ORBIT_EKEYFULL (max_domains
 * domains exist), -ORBIT_EPOISONED, -ORBIT_EMALFORMED.
 */
int  orbit_admission_set_capacity(struct orbit_admission *, uint32_t domain, uint64_t capacity);
int  orbit_admission_try_claim(struct orbit_admission *, const struct orbit_demand *, struct orbit_admit_result *out);
     /* Checks in this order: empty claim, retained fee != claim sum (both -ORBIT_EMALFORMED),
      * poisoned (-ORBIT_EPOISONED), shut down (-ORBIT_ECLOSEDADM), retained claim with retention
      * disabled (SKIPPED), any claim or fit entry above its domain's capacity (REJECTED), claim not
      * free now (DEFERRED), retained cap exceeded (SKIPPED), else CLAIMED. Domain ids are arbitrary
      * uint32 values set up by set_capacity; an unknown domain or a domain named twice in one vector
      * is -ORBIT_EMALFORMED. The fit vector only takes part in the REJECTED check.
      * blocker_maximum is the domain's capacity. Returns 0 whatever the outcome. */
/*
 * try_claim, in more detail. Before the ledger is consulted: NULL
 * arguments, an entry with 0 units, more entries than max_domains, a domain
 * twice in one vector, or a retained fee whose claim sum overflows are also
 * -ORBIT_EMALFORMED; a handle on an observer fleet (no node) is
 * -ORBIT_ENOTOWNER. An unknown domain is found after the SKIPPED-disabled
 * check. When the claim table holds max_claims live claims, a claim that
 * would otherwise be CLAIMED is -ORBIT_EFULL (wait for a release). A claim
 * that would make the serial, an epoch, a usage or the retained total
 * overflow poisons the ledger (-ORBIT_EPOISONED). out is filled for every
 * outcome: release_epoch is the current change epoch, retained_now and
 * retained_max the ledger's retained total and cap; claim is zero unless
 * CLAIMED; blocker_* are set for DEFERRED and REJECTED only.
 */

int  orbit_admission_release(struct orbit_admission *, struct orbit_claim *);
     /* exactly once, sets claim->released; a claim that is not live (released before, or by node_dead)
      * is -ORBIT_ENOTRESERVED and changes nothing; a live record that disagrees with the claim poisons */
/*
 * release, in more detail: a claim already marked released, a slot out of
 * range or a serial not live there is -ORBIT_ENOTRESERVED. The record's node,
 * incarnation and retained bytes must match the claim's, and the ledger's
 * totals must cover the record: otherwise the ledger is poisoned and the
 * call returns -ORBIT_EPOISONED. On success each domain's used drops, its
 * availability epoch and the change epoch advance, and waiters wake.
 */

int  orbit_admission_wait(struct orbit_admission *, uint64_t since_epoch, int timeout_ms, uint64_t *now);
     /* waits until the ledger's change epoch (release_epoch in results) passes since_epoch; it
      * advances on every release, node_dead release and capacity growth. *now is always written.
      * Nothing changed within timeout_ms (0 included): -ORBIT_ETIMEDOUT */
/*
 * wait, in more detail: now may be NULL. The change epoch also advances once
 * when the ledger is shut down (so a deferred claimer learns it, from
 * try_claim's -ORBIT_ECLOSEDADM) and when a crashed holder is repaired. A
 * poisoned ledger ends the wait with -ORBIT_EPOISONED. The wait spins
 * briefly, then parks on a futex word (no polling). Returns 0 when the epoch
 * passed since_epoch. The io_uring form is orbit_admission_prep_wait in
 * orbit/uring.h.
 */

/* No new claims (-ORBIT_ECLOSEDADM); outstanding claims stay valid and releasable.
 * Idempotent; -ORBIT_EPOISONED on a poisoned ledger. */
int  orbit_admission_shutdown(struct orbit_admission *);                       /* no new claims; outstanding stay valid */

/*
 * orbit_admission_node_dead - release every claim recorded for that node
 * AND incarnation (a later process on the same node keeps its claims). A
 * record found inconsistent poisons the ledger. Waiters are woken once even
 * when nothing was released (see orbit_fleet_node_dead). Works on observer
 * handles.
 */
void orbit_admission_node_dead(struct orbit_admission *, uint16_t node, uint64_t incarnation); /* that node AND incarnation */

/*
 * orbit_admission_reset_all - quiescent owner boot: every live claim is
 * released (capacities and domains stay; a shut-down or poisoned ledger
 * stays so), a new table epoch starts and waiters wake. Later releases of
 * those claims are -ORBIT_ENOTRESERVED. 0; -ORBIT_ETIMEDOUT when a stopped
 * process keeps the ledger's mutex; -ORBIT_EPOISONED.
 */
int  orbit_admission_reset_all(struct orbit_admission *);

/* Sum of the retained bytes of live retained claims (0 on a NULL handle). */
uint64_t orbit_admission_retained_bytes(struct orbit_admission *);

/* Fills up to max domains in set-up order; returns how many exist (may exceed max). */
ssize_t orbit_admission_domains(struct orbit_admission *, struct orbit_domain_info *out, size_t max);
bool orbit_admission_poisoned(struct orbit_admission *);

/* ---- inspection, for tools and supervisors ------------------------------ */

/* The current change epoch (the release_epoch of results). */
uint64_t orbit_admission_epoch(struct orbit_admission *);

/* One live claim and how many domains it charges. */
struct orbit_claim_info { struct orbit_claim claim; uint32_t n_units; uint64_t resv[2]; /* zero */ };

/*
 * orbit_admission_claims - fills up to max live claims in slot order;
 * returns how many are live (may exceed max). A returned claim may be
 * released with orbit_admission_release (an operator's tool may do so).
 */
ssize_t orbit_admission_claims(struct orbit_admission *, struct orbit_claim_info *out, size_t max);

/*
 * orbit_admission_claim_units - the units a live claim charges: fills up to
 * max entries, returns how many it has. -ORBIT_ENOTRESERVED when the claim
 * is not live.
 */
ssize_t orbit_admission_claim_units(struct orbit_admission *, const struct orbit_claim *,
                                    struct orbit_units *out, size_t max);

struct orbit_admission_info {
    struct orbit_admission_spec spec;
    uint32_t n_domains, live_claims;
    uint64_t next_serial, retained_bytes, change_epoch;
    uint64_t repairs;          /* holders that died inside the mutex and were repaired */
    bool shutdown, poisoned;
    const char *poison_reason; /* static text; "" when healthy */
    uint64_t resv[4];      /* zero; a later release may give it meaning */
};
int  orbit_admission_info(struct orbit_admission *, struct orbit_admission_info *out);

/* This handle's counters since it was opened. */
struct orbit_admission_stats { uint64_t parks, wakes; uint64_t resv[6]; /* zero */ };
void orbit_admission_stats(struct orbit_admission *, struct orbit_admission_stats *out);

/* Whether a claimer waits for a release (orbit_admission_wait), for tools. */
struct orbit_admission_waiting {
    bool     parked;             /* a waiter may be asleep on the ledger's change word */
    uint64_t epoch_wanted;       /* the highest change epoch a sleeping waiter asked for */
    uint64_t change_epoch;       /* the change epoch now */
    uint64_t resv[4];            /* zero */
};
/*
 * orbit_admission_waiting - a racy snapshot: a waiter waits while parked and
 * epoch_wanted > change_epoch (waiters wait for any release, not for a
 * domain, and name no node). A waiter that gave up leaves its mark until the
 * next release. 0; -ORBIT_EMALFORMED (out NULL).
 */
int orbit_admission_waiting(struct orbit_admission *, struct orbit_admission_waiting *out);

#ifdef __cplusplus
}
#endif
#endif
