/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: the loop's objects. A user_data is an operation (its
 * top byte, 0: no object's), a generation and an index in the object
 * table: a completion for an object that was freed and whose place was
 * taken again carries the old generation and is dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include "loop.h"

uint64_t loop_ud(const struct loop_obj *o, unsigned op)
{
    return (uint64_t)op << 56 | (uint64_t)(o->gen & 0xffffffu) << 32 | o->idx;
}

int loop_obj_add(struct loop *l, struct loop_obj *o, const struct loop_kind *kind)
{
    uint32_t idx;
    if (l->n_free) {
        idx = l->free_idx[--l->n_free];
    } else {
        if (l->n_objs == l->cap_objs) {
            uint32_t cap = l->cap_objs ? l->cap_objs * 2 : 256;
            struct loop_obj **no = realloc(l->objs, cap * sizeof *no);
            uint32_t *ng = no ? realloc(l->gens, cap * sizeof *ng) : NULL;
            uint32_t *nf = ng ? realloc(l->free_idx, cap * sizeof *nf) : NULL;
            if (no) l->objs = no;
            if (ng) l->gens = ng;
            if (!nf)
                return -ENOMEM;
            l->free_idx = nf;
            l->cap_objs = cap;
        }
        idx = l->n_objs++;
        l->gens[idx] = 1;
    }
    l->objs[idx] = o;
    o->idx = idx;
    o->gen = l->gens[idx];
    o->pending = 0;
    o->dead = false;
    o->kind = kind;
    return 0;
}

static struct loop_obj *obj_lookup(struct loop *l, uint64_t ud)
{
    uint32_t idx = (uint32_t)ud, gen = (uint32_t)(ud >> 32) & 0xffffffu;
    if (idx >= l->n_objs || !l->objs[idx] || (l->gens[idx] & 0xffffffu) != gen)
        return NULL;
    return l->objs[idx];
}

/* A dead object with nothing in flight goes to the grave, freed after the batch. */
static void obj_settle(struct loop *l, struct loop_obj *o)
{
    if (!o->dead || o->pending > 0 || !l->objs[o->idx])
        return;
    l->objs[o->idx] = NULL;
    l->gens[o->idx]++;
    l->free_idx[l->n_free++] = o->idx;
    if (l->n_grave == l->cap_grave) {
        uint32_t cap = l->cap_grave ? l->cap_grave * 2 : 64;
        struct loop_obj **ng = realloc(l->grave, cap * sizeof *ng);
        if (!ng)
            abort();
        l->grave = ng;
        l->cap_grave = cap;
    }
    l->grave[l->n_grave++] = o;
}

void loop_obj_kill(struct loop *l, struct loop_obj *o)
{
    o->dead = true;
    obj_settle(l, o);
}

static void obj_free(struct loop_obj *o)
{
    if (o && o->kind->free)
        o->kind->free(o);
}

void loop_settle(struct loop *l)
{
    for (uint32_t i = 0; i < l->n_grave; i++)
        obj_free(l->grave[i]);
    l->n_grave = 0;
}

struct io_uring_sqe *loop_obj_sqe(struct loop *l, struct loop_obj *o, unsigned op)
{
    struct io_uring_sqe *sqe = loop_sqe(l);
    io_uring_sqe_set_data64(sqe, loop_ud(o, op));
    o->pending++;
    return sqe;
}

void loop_cancel(struct loop *l, struct loop_obj *o, unsigned op)
{
    struct io_uring_sqe *sqe = loop_sqe(l);
    io_uring_prep_cancel64(sqe, loop_ud(o, op), 0);
    io_uring_sqe_set_data64(sqe, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

bool loop_cqe_dead(struct loop *l, struct loop_obj *o, int res, uint32_t flags)
{
    if (!o->dead)
        return false;
    loop_buf_drop(l, flags, res);
    obj_settle(l, o);
    return true;
}

static void on_cqe(struct loop *l, uint64_t ud, int res, uint32_t flags)
{
    unsigned op = (unsigned)(ud >> 56);
    if (op == 0)
        return;
    struct loop_obj *o = obj_lookup(l, ud);
    if (!o) {
        loop_buf_drop(l, flags, res);
        return;
    }
    if (!(flags & IORING_CQE_F_MORE))   /* a multishot op, or a zero-copy send, ends last */
        o->pending--;
    o->kind->on_cqe(o, op, res, flags);
}

void loop_reap(struct loop *l)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&l->ring, head, cqe) {
        seen++;
        on_cqe(l, cqe->user_data, cqe->res, cqe->flags);
    }
    io_uring_cq_advance(&l->ring, seen);
    loop_waited(l, seen);
}

void loop_tick(struct loop *l, int64_t now)
{
    for (uint32_t i = 0; i < l->n_objs; i++) {
        struct loop_obj *o = l->objs[i];
        if (o && !o->dead && o->kind->on_tick)
            o->kind->on_tick(o, now);
    }
}

void loop_close(struct loop *l)
{
    loop_ring_exit(l);
    for (uint32_t i = 0; i < l->n_objs; i++)
        obj_free(l->objs[i]);
    loop_settle(l);
    free(l->objs);
    free(l->gens);
    free(l->free_idx);
    free(l->grave);
    l->objs = l->grave = NULL;
    l->gens = l->free_idx = NULL;
    l->n_objs = l->cap_objs = l->n_free = l->cap_grave = 0;
}
