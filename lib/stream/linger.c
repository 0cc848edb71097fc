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
 * taking side B (FREE -> DEAD: no opener can claim it after) and vacating.
 * An exchange's control streams never linger (the exchange ends, and its
 * chunks return, when A closes first): their creator's handle says so and
 * the slot carries it from install (STREAM_LINGER_OFF), for reporters too.
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
    if (atomic_load(&slot->linger_until) == STREAM_LINGER_OFF)
        return;   /* made by a table whose streams never linger (exchanges): only install writes it */
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

bool stream_linger_over(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                        const struct orbit_owner *dead)
{
    uint64_t until = atomic_load(&slot->linger_until);
    if (until == 0 || until == STREAM_LINGER_OFF || orb_wall_ms() >= until)
        return true;
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
    return true;
}

bool stream_linger_expire(struct orbit_streams *s, struct stream_slot *slot, uint32_t live,
                          const struct orbit_owner *dead)
{
    /* The first load is of the line the caller just read the tenancy from: a held A ends the look. */
    return TENANCY_STATE(live) == SLOT_LIVE && atomic_load(&slot->claimed[0]) != SIDE_CLAIMED &&
           stream_lingers(slot) && stream_linger_over(s, slot, live, dead) && stream_linger_end(s, slot, live);
}

void stream_table_linger_off(struct orbit_streams *s)
{
    s->linger_off = true;   /* before any create through the handle: its opener's own thread */
}
