/* SPDX-License-Identifier: MIT */
/*
 * Which fleets watch a tgid through a per-tgid backend (BPF), under mu: the
 * backend is told of a tgid when its first fleet watches it and forgets it
 * when its last one stops; the event loop asks which fleets an exit is for.
 */
#ifndef ORB_REAPER_TGID_H
#define ORB_REAPER_TGID_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "backend.h"

struct rp_tgid;

struct rp_tgids {
    pthread_mutex_t mu;
    const struct rp_backend_ops *ops;   /* the backend the index arms: called only through its ops */
    struct rp_backend *be;
    struct rp_tgid *v;          /* sorted by (tgid, fleet): an exit's fleets are one run */
    size_t n, cap;
};

void rp_tgids_init(struct rp_tgids *t, const struct rp_backend_ops *ops, struct rp_backend *be);
void rp_tgids_free(struct rp_tgids *t);
/* A fleet's thread: its fleet watches tgid (once more); 0, or what the backend or the allocator refused. */
int  rp_tgid_watch(struct rp_tgids *t, uint32_t fleet_id, int32_t tgid);
void rp_tgid_unwatch(struct rp_tgids *t, uint32_t fleet_id, int32_t tgid);
/* The event loop: the fleets (at most max of them, into ids) watching tgid; their count. */
size_t rp_tgid_fleets(struct rp_tgids *t, int32_t tgid, uint32_t *ids, size_t max);

#endif
