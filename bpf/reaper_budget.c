/* SPDX-License-Identifier: MIT */
/*
 * The budget a reaper's fleets live in. Descriptors: RLIMIT_NOFILE's soft
 * limit at orbit_reaper_open, less RP_RESERVED_FDS for the reaper itself (its
 * epoll set, timers, eventfds, the BPF program's maps and links, a metrics
 * server and its clients, stdio), so that whatever the fleets hold, the
 * reaper's own opens never meet EMFILE. Threads: RP_THREADS_TOTAL (each
 * attached fleet runs two: its own and its worker), within the unit's
 * TasksMax. Bytes mapped: RP_MAPPED_TOTAL, a sixteenth of a 47-bit address
 * space. Of each, one fleet may hold an eighth and the fleets of one owner
 * (the uid owning the fleet segment) a quarter: no one user's fleets can
 * take what another user's need.
 */
#include <stdlib.h>
#include <sys/resource.h>
#include "reaper_budget.h"

#define RP_RESERVED_FDS  96
#define RP_MIN_FDS       32
#define RP_MAX_FDS       (1ll << 20)
#define RP_MAPPED_TOTAL  (8ll << 40)
#define RP_THREADS_TOTAL 2048
#define RP_FLEET_SHARE   8      /* a fleet: an eighth of each total */
#define RP_OWNER_SHARE   4      /* an owner's fleets: a quarter */

void rp_budget_init(struct rp_budget *b)
{
    pthread_mutex_init(&b->mu, NULL);
    struct rlimit rl;
    int64_t soft = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (int64_t)rl.rlim_cur
                                                                                        : RP_MAX_FDS;
    if (soft > RP_MAX_FDS)
        soft = RP_MAX_FDS;
    int64_t fds = soft - RP_RESERVED_FDS;
    b->total = (struct rp_cost){ .fds = fds < RP_MIN_FDS ? RP_MIN_FDS : fds, .threads = RP_THREADS_TOTAL,
                                        .bytes = RP_MAPPED_TOTAL };
}

void rp_budget_free(struct rp_budget *b)
{
    free(b->owners);
    b->owners = NULL;
    b->n_owners = b->cap_owners = 0;
    pthread_mutex_destroy(&b->mu);
}

/* mu held: the owner's entry (added when asked for), or NULL when out of memory. */
static struct rp_owner_use *owner_use(struct rp_budget *b, uid_t uid, bool add)
{
    for (size_t i = 0; i < b->n_owners; i++)
        if (b->owners[i].uid == uid)
            return &b->owners[i];
    if (!add)
        return NULL;
    if (b->n_owners == b->cap_owners) {
        size_t cap = b->cap_owners ? b->cap_owners * 2 : 8;
        struct rp_owner_use *v = realloc(b->owners, cap * sizeof *v);
        if (!v)
            return NULL;
        b->owners = v;
        b->cap_owners = cap;
    }
    b->owners[b->n_owners] = (struct rp_owner_use){ .uid = uid };
    return &b->owners[b->n_owners++];
}

/* Does adding want to held stay within bound? If not, say so. */
static bool within(int64_t held, int64_t want, int64_t bound, int64_t *bound_out, int64_t *wanted_out)
{
    if (want <= 0 || held + want <= bound)
        return true;
    *bound_out = bound;
    *wanted_out = held + want;
    return false;
}

/* The first bound of one dimension that refuses want: the fleet's, the owner's, the reaper's. */
static bool fits(const int64_t held[3], int64_t want, int64_t total, int64_t *bound, int64_t *wanted)
{
    return within(held[0], want, total / RP_FLEET_SHARE, bound, wanted) &&
           within(held[1], want, total / RP_OWNER_SHARE, bound, wanted) &&
           within(held[2], want, total, bound, wanted);
}

/* held + sign * c, never below zero. */
static void add(struct rp_cost *held, const struct rp_cost *c, int sign)
{
    int64_t *v[3] = { &held->fds, &held->threads, &held->bytes };
    const int64_t by[3] = { c->fds, c->threads, c->bytes };
    for (int i = 0; i < 3; i++)
        *v[i] = *v[i] + sign * by[i] > 0 ? *v[i] + sign * by[i] : 0;
}

int rp_budget_take(struct rp_budget *b, struct rp_cost *held, uid_t uid, const struct rp_cost *c,
                   int64_t *bound, int64_t *wanted)
{
    pthread_mutex_lock(&b->mu);
    struct rp_owner_use *o = owner_use(b, uid, true);
    int why = 0;
    if (!o) {
        why = ORBIT_REAPER_QUARANTINE_DESCRIPTORS;
        *bound = *wanted = 0;
    } else if (!fits((int64_t[3]){ held->fds, o->held.fds, b->used.fds }, c->fds, b->total.fds, bound, wanted)) {
        why = ORBIT_REAPER_QUARANTINE_DESCRIPTORS;
    } else if (!fits((int64_t[3]){ held->threads, o->held.threads, b->used.threads }, c->threads,
                     b->total.threads, bound, wanted)) {
        why = ORBIT_REAPER_QUARANTINE_THREADS;
    } else if (!fits((int64_t[3]){ held->bytes, o->held.bytes, b->used.bytes }, c->bytes, b->total.bytes,
                     bound, wanted)) {
        why = ORBIT_REAPER_QUARANTINE_MAPPED;
    } else {
        add(held, c, 1);
        add(&o->held, c, 1);
        add(&b->used, c, 1);
    }
    pthread_mutex_unlock(&b->mu);
    return why;
}


void rp_budget_give(struct rp_budget *b, struct rp_cost *held, uid_t uid, const struct rp_cost *c)
{
    pthread_mutex_lock(&b->mu);
    struct rp_owner_use *o = owner_use(b, uid, false);
    add(held, c, -1);
    if (o)
        add(&o->held, c, -1);
    add(&b->used, c, -1);
    pthread_mutex_unlock(&b->mu);
}

bool rp_budget_room(struct rp_budget *b, int64_t owner)
{
    pthread_mutex_lock(&b->mu);
    struct rp_owner_use *o = owner < 0 ? NULL : owner_use(b, (uid_t)owner, false);
    bool room = b->used.fds + RP_BASE_FDS <= b->total.fds && b->used.threads + RP_BASE_THREADS <= b->total.threads &&
                (!o || (o->held.fds + RP_BASE_FDS <= b->total.fds / RP_OWNER_SHARE &&
                        o->held.threads + RP_BASE_THREADS <= b->total.threads / RP_OWNER_SHARE));
    pthread_mutex_unlock(&b->mu);
    return room;
}

void rp_budget_descriptors(struct rp_budget *b, uint32_t *held, uint32_t *total)
{
    pthread_mutex_lock(&b->mu);
    *held = (uint32_t)b->used.fds;
    *total = (uint32_t)b->total.fds;
    pthread_mutex_unlock(&b->mu);
}
