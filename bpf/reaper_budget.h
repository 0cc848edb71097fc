/* SPDX-License-Identifier: MIT */
/*
 * The budget every fleet's descriptors, threads and mappings come out of
 * (reaper_budget.c): totals, and what each owner holds, under its mu. A
 * fleet keeps what it holds in a struct rp_cost of its own, which take and
 * give move with the totals.
 */
#ifndef ORB_REAPER_BUDGET_H
#define ORB_REAPER_BUDGET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <orbit/reaper.h>

/* An attached fleet's descriptors: its handle (2), the table a report opens (1), one spare. */
#define RP_BASE_FDS 4

/* An attached fleet's threads: its own, and its worker's while it has reports. */
#define RP_BASE_THREADS 2

/* What a fleet costs the budget: descriptors, threads, bytes mapped. */
struct rp_cost {
    int64_t fds;
    int64_t threads;
    int64_t bytes;
};

struct rp_owner_use { uid_t uid; struct rp_cost held; };
struct rp_budget {
    pthread_mutex_t mu;
    struct rp_cost total;       /* what the reaper may hold in all */
    struct rp_cost used;
    struct rp_owner_use *owners;
    size_t n_owners, cap_owners;
};

/* The totals: from RLIMIT_NOFILE (descriptors), fixed (threads, bytes mapped). */
void rp_budget_init(struct rp_budget *b);
void rp_budget_free(struct rp_budget *b);
/*
 * Take c for a fleet holding *held (of owner uid): 0, or the bound that
 * refuses it as the reason its fleet is quarantined for
 * (ORBIT_REAPER_QUARANTINE_DESCRIPTORS, _THREADS or _MAPPED), with *bound and
 * *wanted the numbers that broke it; nothing is taken then. *held grows by c.
 */
int  rp_budget_take(struct rp_budget *b, struct rp_cost *held, uid_t uid, const struct rp_cost *c,
                    int64_t *bound, int64_t *wanted);
/* Give back c (*held shrinks). */
void rp_budget_give(struct rp_budget *b, struct rp_cost *held, uid_t uid, const struct rp_cost *c);
/* Could an owner with nothing held now take a fleet's base cost? (whether to start a fleet's thread) */
bool rp_budget_room(struct rp_budget *b, int64_t owner);
/* Descriptors held now, and the total (stats). */
void rp_budget_descriptors(struct rp_budget *b, uint32_t *held, uint32_t *total);

#endif
