/* SPDX-License-Identifier: MIT */
/* A confirmed death reaches every table of the fleet: one node_dead per segment. */
#include "core/fleet_internal.h"
#include <orbit/pool.h>
#include <orbit/stream.h>
#include <orbit/admission.h>
#ifdef ORBIT_WITH_EXCHANGE
#include <orbit/exchange.h>
#endif

static void node_dead_in(struct orbit_fleet *f, uint8_t kind, uint8_t type, uint16_t node, uint64_t inc)
{
    switch (type) {
#ifdef ORBIT_WITH_POOL
    case ORB_TABLE_POOL: {
        struct orbit_pool *p;
        if (orbit_pool_open_existing(f, kind, &p) == 0) {
            orbit_pool_node_dead(p, node, inc);
            orbit_pool_close(p);
        }
        break;
    }
#endif
#ifdef ORBIT_WITH_STREAM
    case ORB_TABLE_STREAMS: {
        struct orbit_streams *s;
        if (orbit_streams_open_existing(f, kind, &s) == 0) {
            orbit_streams_node_dead(s, node, inc);
            orbit_streams_close(s);
        }
        break;
    }
#endif
#ifdef ORBIT_WITH_ADMISSION
    case ORB_TABLE_ADMISSION: {
        struct orbit_admission *a;
        if (orbit_admission_open_existing(f, kind, &a) == 0) {
            orbit_admission_node_dead(a, node, inc);
            orbit_admission_close(a);
        }
        break;
    }
#endif
#ifdef ORBIT_WITH_EXCHANGE
    case ORB_TABLE_ARENA: {
        struct orbit_arena *ar;
        if (orbit_arena_open_existing(f, kind, &ar) == 0) {
            orbit_arena_node_dead(ar, node, inc);
            orbit_arena_close(ar);
        }
        break;
    }
#endif
    default:
        (void)f; (void)kind; (void)node; (void)inc;
        break;
    }
}

int orb_dispatch_node_dead(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    uint8_t kinds[256], types[256];
    int n = orb_fleet_table_kinds(f, kinds, types, 256);
    for (int i = 0; i < n; i++)
        node_dead_in(f, kinds[i], types[i], node, incarnation);
    /* The dead may have rung a doorbell and died before its wake went out. */
    orb_fleet_kick_doorbells(f);
    return 0;
}
