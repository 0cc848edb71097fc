/* SPDX-License-Identifier: MIT */
/*
 * Streams: bytes and FIN that outlive their writer (design.md section 6).
 *
 * Side A lets go (close, a death report, a leave) with its direction
 * finished and side B never opened: the slot lingers, LIVE, so the ticket
 * can still be opened and its bytes read, then FIN, as a pipe's are. It ends
 * as any stream does once B opened and let go; unopened, it ends when its
 * linger is over: ORBIT_STREAM_LINGER_MS (default 30 s) after A let go, or
 * at once when the node it was offered to no longer holds a LIVE life (that
 * node's death report or leave ends it). Whoever finds it over ends it by
 * taking side B (FREE -> DEAD: no opener can claim it after) and vacating,
 * then tells its handle's linger_ended (an exchange's control stream: the
 * chunks its events named go back to their lane, design.md section 7).
 */
#include <stdlib.h>
#include "stream_layout.h"
#include "streams_internal.h"

#define LINGER_MS_DEFAULT 30000u
#define LINGER_MS_MAX     3600000u

static _Atomic uint32_t linger_setting = UINT32_MAX;   /* UINT32_MAX: not read yet */

uint32_t stream_linger_ms(void)
{
    uint32_t v = atomic_load_explicit(&linger_setting, memory_order_relaxed);
    if (v != UINT32_MAX)
        return v;
    const char *env = getenv("ORBIT_STREAM_LINGER_MS");
    char *end = NULL;
    unsigned long ms = env && *env ? strtoul(env, &end, 10) : LINGER_MS_DEFAULT;
    if (env && *env && (*end || ms > LINGER_MS_MAX))
        ms = LINGER_MS_DEFAULT;   /* not a number of ms up to an hour: the default */
    atomic_store_explicit(&linger_setting, (uint32_t)ms, memory_order_relaxed);
    return (uint32_t)ms;
}

void stream_linger_mark(struct stream_slot *slot)
{
    uint32_t ms = stream_linger_ms();
    /* Before the side's let-go CAS (seq_cst): whoever sees it let go sees the deadline. */
    atomic_store(&slot->linger_until, ms ? orb_wall_ms() + ms : 0);
}

bool stream_lingers(struct stream_slot *slot)
{
    uint32_t a = atomic_load(&slot->claimed[0]);
    uint32_t flags = atomic_load(&slot->dir[0].flags);
    /* A let go (released, or ended by a report) after FIN, not a RESET: its bytes are whole. */
    return (a == SIDE_RELEASED || a == SIDE_DEAD) && (flags & (DIR_FIN | DIR_RESET)) == DIR_FIN &&
           atomic_load(&slot->claimed[1]) == SIDE_FREE;
}

/* The node slot's live offer names (taken or not), or -1 when it names none. */
static int32_t offered_to(const struct orbit_streams *s, struct stream_slot *slot, uint32_t live)
{
    uint64_t v = atomic_load(&slot->offer);
    uint32_t to = (uint32_t)v & STREAM_OFFER_NODE_MASK;
    /* From shared memory: another generation's word, or a node past the fleet, names none. */
    if ((uint32_t)(v >> 32) != TENANCY_GEN(live) || to == 0 || to > s->fleet_capacity)
        return -1;
    return (int32_t)(to - 1);
}

/* The node the stream was offered to holds no LIVE life, or `dead` is that life. */
static bool offer_gone(const struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                       const struct orbit_owner *dead)
{
    int32_t to = offered_to(s, slot, live);
    if (to < 0)
        return false;   /* offered to nobody: the ticket went another way; the time bounds it */
    /*
     * seq_cst, after our let-go CAS: a death report of that node moves it off LIVE
     * (seq_cst) before it scans the slots, so either we see it off LIVE here, or its
     * scan sees our side let go and ends the linger itself.
     */
    struct orb_node_record *rec = orb_fleet_record(s->fleet, (uint32_t)to);
    if (!rec || atomic_load(&rec->state) != ORBIT_NODE_LIVE)
        return true;
    /* A report of that node's life (the record may still read LIVE to a direct caller of
     * node_dead), unless the node carries another life now: the offer is the node's. */
    return dead && dead->node == (uint16_t)to && atomic_load(&rec->incarnation) == dead->incarnation;
}

bool stream_linger_over(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                        const struct orbit_owner *dead)
{
    uint64_t until = atomic_load(&slot->linger_until), now = orb_wall_ms();
    /* Shared and maybe garbled: a deadline past the longest linger (or the never-linger mark
     * UINT64_MAX a previous release installed) counts as over, so no linger outlasts its bound. */
    if (until == 0 || now >= until || until - now > LINGER_MS_MAX)
        return true;
    return offer_gone(s, slot, live, dead);
}

bool stream_linger_end(struct orbit_streams *s, struct stream_slot *slot, uint32_t live)
{
    uint32_t free_side = SIDE_FREE;
    /* The CAS decides between an opener and the end: an opener that claimed first keeps it. */
    if (!atomic_compare_exchange_strong(&slot->claimed[1], &free_side, SIDE_DEAD))
        return false;
    uint32_t expect = live;
    /* Both sides let go and neither can be claimed again: the slot empties (a CAS, once). */
    if (!atomic_compare_exchange_strong(&slot->tenancy, &expect, TENANCY(TENANCY_GEN(live), SLOT_EMPTY)))
        return false;
    for (unsigned dir = 0; dir < 2; dir++)
        stream_dir_wake(s, slot, dir, WATCH_READER | WATCH_WRITER);
    /* After the vacate: nobody can open it any more, so what rode on it can go. */
    if (s->linger_ended)
        s->linger_ended(s->linger_ctx, stream_id_at(s, (size_t)(slot - s->slots), TENANCY_GEN(live)));
    return true;
}

bool stream_linger_expire(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                          const struct orbit_owner *dead)
{
    /* The first load is of the line the caller just read the tenancy from: a held A ends the look. */
    return TENANCY_STATE(live) == SLOT_LIVE && atomic_load(&slot->claimed[0]) != SIDE_CLAIMED &&
           stream_lingers(slot) && stream_linger_over(s, slot, live, dead) && stream_linger_end(s, slot, live);
}

void stream_table_on_linger_end(struct orbit_streams *s, void (*fn)(void *ctx, orbit_id id), void *ctx)
{
    s->linger_ended = fn;   /* before the handle is shared: its opener's own thread */
    s->linger_ctx = ctx;
}

/* Side A held by `dead`, whose report is under way: will the stream linger once it ends A? */
static bool will_linger(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                        const struct orbit_owner *dead)
{
    return (atomic_load(&slot->dir[0].flags) & (DIR_FIN | DIR_RESET)) == DIR_FIN && stream_linger_ms() != 0 &&
           !offer_gone(s, slot, live, dead);
}

bool stream_linger_holds(struct orbit_streams *s, orbit_id id, const struct orbit_owner *dead, bool act)
{
    size_t i;
    if (!stream_index_of(s, id, &i))
        return false;
    struct stream_slot *slot = &s->slots[i];
    uint32_t live = TENANCY(orbit_id_generation(id), SLOT_LIVE);
    if (atomic_load_explicit(&slot->tenancy, memory_order_acquire) != live)
        return false;
    uint32_t b = atomic_load(&slot->claimed[1]);
    if (b != SIDE_FREE)
        return b == SIDE_CLAIMED;   /* opened meanwhile: its reader has it */
    if (atomic_load(&slot->claimed[0]) == SIDE_CLAIMED) {
        bool dying = dead && atomic_load(&slot->node[0]) == dead->node &&
                     atomic_load(&slot->incarnation[0]) == dead->incarnation;
        return !dying || will_linger(s, slot, live, dead);
    }
    if (!stream_lingers(slot))
        return false;
    if (!stream_linger_over(s, slot, live, dead))
        return true;
    if (!act)
        return false;
    if (stream_linger_end(s, slot, live))
        return false;
    /* Not ended: an opener claimed B first (it reads), or the slot moved on. */
    return atomic_load(&slot->tenancy) == live && atomic_load(&slot->claimed[1]) == SIDE_CLAIMED;
}
