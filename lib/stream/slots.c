/* SPDX-License-Identifier: MIT */
/* Streams: slots, sides, tickets; create, open, close, rearm. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stream_layout.h"

int stream_locate(const struct orbit_streams *s, orbit_id id, size_t *index)
{
    uint32_t gen = orbit_id_generation(id), slot = orbit_id_slot(id);
    uint16_t node = orbit_id_node(id);
    if (orbit_id_kind(id) != s->kind || node >= s->fleet_capacity || slot >= s->lane_capacity ||
        gen == 0 || gen > s->generation_limit)
        return orb_fail_text(-ORBIT_EMALFORMED, "the id is not a stream of this table");
    *index = (size_t)node * s->lane_capacity + slot;
    return 0;
}

void stream_dir_clear(struct stream_dir *d)
{
    atomic_store(&d->head, 0);
    atomic_store(&d->tail, 0);
    atomic_store(&d->copy_end, 0);   /* a new stream's head may reach the old copy's end */
    atomic_store(&d->flags, 0);
    atomic_store(&d->writer_need, 0);
    atomic_store(&d->watch, 0);
    atomic_store(&d->reader_need, 0);
    atomic_store(&d->reader_cpu, UINT32_MAX);   /* no waiter has parked yet */
    atomic_store(&d->writer_cpu, UINT32_MAX);
}

static void ring_node(struct orbit_streams *s, struct stream_slot *slot, unsigned side)
{
    /* A node read from shared memory: orb_fleet_ring_doorbell ignores one out of range. */
    orb_fleet_ring_doorbell(s->fleet, atomic_load(&slot->node[side]), &s->stats);
}

void stream_dir_wake(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t mask)
{
    struct stream_dir *d = &slot->dir[dir];
    /* Callers published with seq_cst before these loads. A waiter arms parked (or a
     * watch bit) before its last check, so one we do not see here sees the change:
     * with neither set there is nobody to wake, and the line the peer spins on is
     * left unwritten. */
    if (atomic_load(&d->wait.parked))
        orb_wait_signal(&d->wait, &s->stats);
    if (!(atomic_load(&d->watch) & mask))
        return;
    uint32_t rung = atomic_fetch_and(&d->watch, ~mask) & mask;
    if (rung & WATCH_READER)
        ring_node(s, slot, 1 - dir);
    if (rung & WATCH_WRITER)
        ring_node(s, slot, dir);
}

void stream_raise(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t flag)
{
    struct stream_dir *d = &slot->dir[dir];
    uint32_t before = atomic_fetch_or(&d->flags, flag);
    if (before & flag)
        return;
    stream_dir_wake(s, slot, dir, WATCH_READER | WATCH_WRITER);
    /* A writer watching for its reader's departure hears it without a pending try. */
    if ((before & DIR_CLOSE_WATCH) && (flag & (DIR_READER_GONE | DIR_RESET)))
        ring_node(s, slot, dir);
}

void stream_vacate_if_unheld(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                             unsigned other)
{
    /* Both sides release with seq_cst CAS then load the other: at least one sees both gone. */
    uint32_t held = atomic_load(&slot->claimed[other]);
    if (held == SIDE_CLAIMED)
        return;
    if (other == 1 && held == SIDE_FREE) {
        /* B was never opened: A's finished bytes wait for it while the linger lasts; else the
         * end takes B first (FREE -> DEAD), so no opener claims a side of an emptied slot. */
        if (!stream_lingers(slot) || stream_linger_over(s, slot, live, NULL))
            stream_linger_end(s, slot, live);
        return;
    }
    uint32_t expect = live;
    if (!atomic_compare_exchange_strong(&slot->tenancy, &expect, TENANCY(TENANCY_GEN(live), SLOT_EMPTY)))
        return;
    /* Waiters still holding this generation wake and find it stale. */
    for (unsigned dir = 0; dir < 2; dir++)
        stream_dir_wake(s, slot, dir, WATCH_READER | WATCH_WRITER);
}

void stream_end_side(struct orbit_streams *s, struct stream_slot *slot, uint32_t live, unsigned side)
{
    uint32_t claimed = SIDE_CLAIMED;
    if (side == 0 && (atomic_load(&slot->dir[0].flags) & DIR_FIN))
        stream_linger_mark(slot);   /* a finished A's bytes may outlive it: before its end */
    /* The CAS decides between this report and the holder's own release. */
    if (!atomic_compare_exchange_strong(&slot->claimed[side], &claimed, SIDE_DEAD))
        return;
    if (!(atomic_load(&slot->dir[side].flags) & DIR_FIN))
        stream_raise(s, slot, side, DIR_RESET);
    stream_raise(s, slot, 1 - side, DIR_READER_GONE);
    stream_vacate_if_unheld(s, slot, live, 1 - side);
}

static void endpoint_bind(struct orbit_endpoint *ep, struct orbit_streams *s, size_t index,
                          uint32_t gen, enum orbit_side side, uint64_t epoch)
{
    unsigned w = side == ORBIT_SIDE_A ? 0 : 1;
    ep->s = s;
    ep->fork_generation = s->fork_generation;
    ep->slot = &s->slots[index];
    ep->wr = &ep->slot->dir[w];
    ep->rd = &ep->slot->dir[1 - w];
    ep->wr_ring = stream_ring(s, index, w);
    ep->rd_ring = stream_ring(s, index, 1 - w);
    ep->id = orbit_id_make(s->kind, (uint16_t)(index / s->lane_capacity), gen,
                           (uint32_t)(index % s->lane_capacity));
    ep->epoch = epoch;
    ep->live = TENANCY(gen, SLOT_LIVE);
    ep->index = (uint32_t)index;
    ep->side = side;
}

/* Fill a slot we hold in SLOT_INSTALLING, then publish it live. */
static void install(struct orbit_streams *s, struct stream_slot *slot, uint32_t gen)
{
    atomic_store(&slot->claimed[0], SIDE_CLAIMED);
    atomic_store(&slot->claimed[1], SIDE_FREE);
    atomic_store(&slot->node[0], s->node);
    atomic_store(&slot->incarnation[0], s->incarnation);
    atomic_store(&slot->node[1], STREAM_NODE_NONE);
    atomic_store(&slot->incarnation[1], 0);
    atomic_store(&slot->offer, 0);
    atomic_store(&slot->linger_until, s->linger_off ? STREAM_LINGER_OFF : 0);
    stream_dir_clear(&slot->dir[0]);
    stream_dir_clear(&slot->dir[1]);
    /* Release: every field above is in place before an opener can see the generation live. */
    atomic_store_explicit(&slot->tenancy, TENANCY(gen, SLOT_LIVE), memory_order_release);
}

/* Take the lowest free slot of our lane (hot slots and rings are reused first). */
static int allocate(struct orbit_streams *s, size_t *index, uint32_t *gen)
{
    size_t base = (size_t)s->node * s->lane_capacity;
    for (size_t i = 0; i < s->lane_capacity; i++) {
        struct stream_slot *slot = &s->slots[base + i];
        uint32_t t = atomic_load_explicit(&slot->tenancy, memory_order_acquire);
        /* A stream of ours that lingered past its end, unopened: ended here, then reused. */
        if (stream_linger_expire(s, slot, t, NULL))
            t = atomic_load_explicit(&slot->tenancy, memory_order_acquire);
        while (TENANCY_STATE(t) == SLOT_EMPTY) {
            uint32_t g = TENANCY_GEN(t);
            bool spent = g >= s->generation_limit;
            uint32_t next = spent ? TENANCY(g, SLOT_EXHAUSTED) : TENANCY(g + 1, SLOT_INSTALLING);
            /* The rings' pages before the slot is ours: a mount out of room refuses the create
             * with nothing taken (a populate lost to another creator's CAS costs nothing). */
            int rc = spent ? 0 : stream_rings_ready(s, base + i);
            if (rc < 0)
                return rc;
            /* The CAS is the allocation: one creator moves a slot out of EMPTY. */
            if (!atomic_compare_exchange_strong(&slot->tenancy, &t, next))
                continue;
            if (spent)
                break;
            stream_park_here(s, STREAM_PARK_INSTALLING);
            install(s, slot, g + 1);
            *index = base + i;
            *gen = g + 1;
            return 0;
        }
    }
    return orb_fail_text(-ORBIT_EFULL, "this node's lane of streams is full (lane_capacity streams are live or ending)");
}

int orbit_streams_create(struct orbit_streams *s, struct orbit_endpoint **a, struct orbit_ticket *b_ticket)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    if (!a || !b_ticket)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__, !a ? "a" : "b_ticket");
    if (!stream_is_member(s))
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer creates no streams (join as a member)", __func__);
    struct orbit_endpoint *ep = calloc(1, sizeof *ep);   /* fail before taking a slot */
    if (!ep)
        return orb_fail_text(-ENOMEM, "out of memory for an endpoint");
    uint64_t epoch = stream_epoch(s);
    size_t index = 0;
    uint32_t gen = 0;
    int rc = allocate(s, &index, &gen);
    if (rc < 0) {
        free(ep);
        return rc;
    }
    endpoint_bind(ep, s, index, gen, ORBIT_SIDE_A, epoch);
    orb_count(&s->ctr, STREAM_CTR_CREATED, 1);
    *a = ep;
    *b_ticket = (struct orbit_ticket){ ep->id, ORBIT_SIDE_B, epoch };
    return 0;
}

/* Our node back off a side we stamped but did not claim (CAS: only our own stamp). */
static void side_unstamp(struct orbit_streams *s, struct stream_slot *slot, unsigned side)
{
    uint32_t me = s->node;
    atomic_compare_exchange_strong(&slot->node[side], &me, STREAM_NODE_NONE);
}

/*
 * Take a side: the node CAS (NONE -> us) decides between openers, then the
 * incarnation, then the claim. A death report ends a claimed side stamped
 * with the dead node, and unstamps a free one: an opener killed at any step
 * leaves the side to its report, never claimed by nobody.
 */
static int side_take(struct orbit_streams *s, struct stream_slot *slot, unsigned side, uint32_t live)
{
    uint32_t none = STREAM_NODE_NONE;
    if (!atomic_compare_exchange_strong(&slot->node[side], &none, s->node))
        return orb_fail_text(-ORBIT_ECLAIMED, "that side of the stream is held already");
    atomic_store(&slot->incarnation[side], s->incarnation);
    stream_park_here(s, STREAM_PARK_OPENING);
    /* seq_cst: node and incarnation are in before a report can see the side claimed. */
    uint32_t expect = SIDE_FREE;
    if (!atomic_compare_exchange_strong(&slot->claimed[side], &expect, SIDE_CLAIMED)) {
        side_unstamp(s, slot, side);
        /* DEAD and never held: the stream ended before anyone opened the side (its linger). */
        if (expect == SIDE_DEAD)
            return orb_fail_text(-ORBIT_ESTALE, "the stream ended before this side was opened (its writer's linger expired, or its offer's node left)");
        return orb_fail_text(-ORBIT_ECLAIMED, "that side of the stream is held already");
    }
    /* The slot may have ended between the look and the claim: give the claim back. */
    if (atomic_load(&slot->tenancy) != live) {
        expect = SIDE_CLAIMED;
        atomic_compare_exchange_strong(&slot->claimed[side], &expect, SIDE_FREE);
        side_unstamp(s, slot, side);
        return orb_fail_text(-ORBIT_ESTALE, "the ticket names a stream that has ended (closed, its creator died, or the table was reset)");
    }
    return 0;
}

int orbit_streams_open_ticket(struct orbit_streams *s, const struct orbit_ticket *t,
                              struct orbit_endpoint **out)
{
    int refused = streams_enter(s, __func__);
    if (refused < 0)
        return refused;
    size_t index;
    if (!t || !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: %s is NULL", __func__, !t ? "ticket" : "out");
    if (t->side != ORBIT_SIDE_A && t->side != ORBIT_SIDE_B)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ticket side %d: ORBIT_SIDE_A or ORBIT_SIDE_B", __func__,
                        (int)t->side);
    if (stream_locate(s, t->id, &index) < 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: ticket id %#llx is not a stream of this table", __func__,
                        (unsigned long long)t->id);
    if (!stream_is_member(s))
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer opens no streams (join as a member)", __func__);
    uint32_t gen = orbit_id_generation(t->id), live = TENANCY(gen, SLOT_LIVE);
    struct stream_slot *slot = &s->slots[index];
    if (t->epoch != stream_epoch(s) || atomic_load(&slot->tenancy) != live)
        return orb_fail(-ORBIT_ESTALE, "%s: ticket id %#llx: the stream ended or the table was reset "
                        "since the ticket was made", __func__, (unsigned long long)t->id);
    if (t->side == ORBIT_SIDE_B && stream_linger_expire(s, slot, live, NULL))
        return orb_fail(-ORBIT_ESTALE, "%s: ticket id %#llx: its writer finished and let go, and nobody "
                        "opened it before its linger ended (%u ms, or the node it was offered to left)",
                        __func__, (unsigned long long)t->id, stream_linger_ms());
    struct orbit_endpoint *ep = calloc(1, sizeof *ep);
    if (!ep)
        return orb_fail_text(-ENOMEM, "out of memory for an endpoint");
    endpoint_bind(ep, s, index, gen, t->side, t->epoch);
    unsigned side = t->side == ORBIT_SIDE_A ? 0 : 1;
    int rc = side_take(s, slot, side, live);
    if (rc < 0) {
        free(ep);
        return rc == -ORBIT_ECLAIMED ? orb_fail(rc, "%s: side %c of stream %#llx is held already", __func__,
                                                side ? 'B' : 'A', (unsigned long long)t->id)
                                     : rc;
    }
    orb_count(&s->ctr, STREAM_CTR_OPENED, 1);
    *out = ep;
    return 0;
}

orbit_id orbit_endpoint_id(const struct orbit_endpoint *ep)
{
    orb_error_clear();
    return ep ? ep->id : 0;
}

enum orbit_side orbit_endpoint_side(const struct orbit_endpoint *ep)
{
    orb_error_clear();
    return ep ? ep->side : ORBIT_SIDE_A;
}

int orbit_endpoint_peer(const struct orbit_endpoint *ep, struct orbit_owner *out)
{
    orb_error_clear();
    if (!ep || !out)
        return orb_fail_text(-ORBIT_EMALFORMED, "the endpoint or out is NULL");
    struct stream_slot *slot = ep->slot;
    unsigned other = ep->side == ORBIT_SIDE_A ? 1u : 0u;
    /* Acquire: a claimed side's node and incarnation were stamped before its claim. */
    uint32_t claimed = atomic_load_explicit(&slot->claimed[other], memory_order_acquire);
    uint32_t node = atomic_load(&slot->node[other]);
    uint64_t inc = atomic_load(&slot->incarnation[other]);
    if (atomic_load(&slot->tenancy) != ep->live)
        return orb_fail_text(-ORBIT_ESTALE, "the stream has ended");
    if (claimed == SIDE_FREE)
        return orb_fail_text(-ORBIT_EAGAIN, "nobody opened the other side yet");      /* nobody opened the other side yet */
    if (claimed != SIDE_CLAIMED)
        return orb_fail_text(-ORBIT_EPEERGONE, "the other side was released, or ended by a death report");   /* released, or ended by a death report */
    if (node >= ep->s->fleet_capacity)
        return orb_fail_text(-ORBIT_ECORRUPT, "the other side's holder record is garbled");
    *out = (struct orbit_owner){ .node = (uint16_t)node, .incarnation = inc };
    return 0;
}

/* In a fork child only the child's memory goes: the side stays claimed by the parent. */
void orbit_endpoint_close(struct orbit_endpoint *ep)
{
    orb_error_clear();
    if (!ep)
        return;
    struct orbit_streams *s = ep->s;
    struct stream_slot *slot = ep->slot;
    unsigned side = ep->side == ORBIT_SIDE_A ? 0 : 1;
    if (orb_handle_ours(ep->fork_generation) && stream_ep_check(ep) == 0 && atomic_load(&slot->claimed[side]) == SIDE_CLAIMED) {
        /* Flags before the release: once released, a rearm may clear them. */
        if (!ep->write_shut)
            stream_raise(s, slot, side, DIR_RESET);
        else if (side == 0)
            stream_linger_mark(slot);   /* finished: its bytes may wait for B (before the release) */
        stream_raise(s, slot, 1 - side, DIR_READER_GONE);
        uint32_t expect = SIDE_CLAIMED;
        if (atomic_compare_exchange_strong(&slot->claimed[side], &expect, SIDE_RELEASED))
            stream_vacate_if_unheld(s, slot, ep->live, 1 - side);
    }
    free(ep);
}

int orbit_endpoint_rearm(struct orbit_endpoint *ep)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    if (!ep || ep->side != ORBIT_SIDE_A)
        return orb_fail_text(-ORBIT_EMALFORMED, "rearm is for side A only");
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    struct stream_slot *slot = ep->slot;
    uint32_t far = atomic_load(&slot->claimed[1]);
    if (far == SIDE_CLAIMED)
        return orb_fail_text(-ORBIT_EAGAIN, "side B is still held: rearm once the peer has closed");
    if (far != SIDE_RELEASED)
        return orb_fail_text(-ORBIT_ESTALE, "side B was never opened (a late open may still come) or its holder died");   /* never opened (a late open may still come) or died */
    stream_dir_clear(&slot->dir[0]);
    stream_dir_clear(&slot->dir[1]);
    ep->tail_seen = 0;
    atomic_store(&slot->node[1], STREAM_NODE_NONE);
    atomic_store(&slot->incarnation[1], 0);
    /* Released is terminal for its holder and death only ends a claimed side: this CAS
     * publishes the cleared state to the next opener. */
    uint32_t expect = SIDE_RELEASED;
    if (!atomic_compare_exchange_strong(&slot->claimed[1], &expect, SIDE_FREE))
        return orb_fail_text(-ORBIT_ESTALE, "the stream ended while rearming");
    ep->write_shut = false;
    return 0;
}

/* ---- tickets -------------------------------------------------------------- */

int orbit_ticket_format(const struct orbit_ticket *t, char *buf, size_t len)
{
    orb_error_clear();
    char id[ORBIT_ID_TEXT_MAX], text[ORBIT_ID_TEXT_MAX + 32];
    if (!t || !buf || (t->side != ORBIT_SIDE_A && t->side != ORBIT_SIDE_B))
        return orb_fail_text(-ORBIT_EMALFORMED, "the ticket or buf is NULL, or its side is neither A nor B");
    int n = ORB_NESTED(orbit_id_format(t->id, id, sizeof id));
    if (n < 0)
        return n;
    n = snprintf(text, sizeof text, "%s/%c/%llu", id, t->side == ORBIT_SIDE_A ? 'a' : 'b',
                 (unsigned long long)t->epoch);
    if (n < 0 || (size_t)n >= len)
        return orb_fail_text(-ORBIT_ETOOLARGE, "the ticket's text does not fit in len bytes (64 always do)");
    memcpy(buf, text, (size_t)n + 1);
    return n;
}

/* 1..20 decimal digits filling the whole string, without overflow. */
static int parse_u64(const char *p, uint64_t *out)
{
    uint64_t v = 0;
    if (!*p)
        return -ORBIT_EMALFORMED;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -ORBIT_EMALFORMED;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ORBIT_EMALFORMED;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int orbit_ticket_parse(const char *text, struct orbit_ticket *out)
{
    orb_error_clear();
    char buf[ORBIT_ID_TEXT_MAX + 32];
    if (!text || !out)
        return orb_fail_text(-ORBIT_EMALFORMED, "text or out is NULL");
    size_t n = strnlen(text, sizeof buf);
    if (n >= sizeof buf)
        return orb_fail_text(-ORBIT_EMALFORMED, "not a ticket: <id>/<a|b>/<epoch>");
    memcpy(buf, text, n + 1);
    char *epoch = strrchr(buf, '/');
    if (!epoch)
        return orb_fail_text(-ORBIT_EMALFORMED, "not a ticket: <id>/<a|b>/<epoch>");
    *epoch++ = '\0';
    char *side = strrchr(buf, '/');
    if (!side)
        return orb_fail_text(-ORBIT_EMALFORMED, "not a ticket: <id>/<a|b>/<epoch>");
    *side++ = '\0';
    struct orbit_ticket t;
    if ((strcmp(side, "a") != 0 && strcmp(side, "b") != 0) || parse_u64(epoch, &t.epoch) < 0 ||
        ORB_NESTED(orbit_id_parse(buf, &t.id)) < 0)
        return orb_fail_text(-ORBIT_EMALFORMED, "not a ticket: <id>/<a|b>/<epoch>");
    t.side = side[0] == 'a' ? ORBIT_SIDE_A : ORBIT_SIDE_B;
    *out = t;
    return 0;
}

bool orbit_streams_is_live(struct orbit_streams *s, orbit_id id)
{
    if (streams_enter(s, __func__) < 0)
        return false;
    size_t index;
    if (!s || stream_locate(s, id, &index) < 0)
        return false;
    return atomic_load_explicit(&s->slots[index].tenancy, memory_order_acquire) ==
           TENANCY(orbit_id_generation(id), SLOT_LIVE);
}

int stream_said(int rc)
{
    if (orb_error_in_call() || rc >= 0)
        return rc;
    switch (-rc) {
    case ORBIT_ESTALE:    return orb_fail_text(rc, "the stream has ended: its sides were closed, a side's "
                                                   "holder died, or the table was reset");
    case ORBIT_ECORRUPT:  return orb_fail_text(rc, "the stream's slot is garbled (a shared value failed a bounds "
                                                   "check)");
    case ORBIT_ETIMEDOUT: return orb_fail_text(rc, "nothing happened within the timeout");
    default:              return orb_fail(rc, "%s", orbit_strerror(rc));
    }
}
