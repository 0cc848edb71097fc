/* SPDX-License-Identifier: MIT */
/* What the stream bench's throughput, ping-pong and report files share: sizes, names, processes. */
#include <stdio.h>
#include <unistd.h>
#include <orbit/stream.h>
#include "bench.h"
#include "bench_stream.h"
#include "bench_place.h"

static const uint8_t ring_kinds[NRING] = { 240, 241 };
const size_t chunk_sizes[NCHUNK] = { 4096, 65536, 1u << 20 };
const uint32_t ring_sizes[NRING] = { 65536, 1u << 20 };
const char *const alt_name[ALT_COUNT] = { "pipe", "pipe 1M", "socketpair", "memcpy" };
const char *const alt_key[ALT_COUNT] = { "pipe", "pipe_1m", "socketpair", "memcpy" };

/* ---- small pipe protocol between parent and child ------------------------- */

/* Pin the caller to --cpus' CPU for its role (0 parent/reader, 1 child/writer). */
static void pin(const struct bench *b, int role)
{
    place_pin(b->cpu[role]);
}

pid_t bs_spawn(const struct bench *b)
{
    fflush(NULL);
    pid_t pid = bench_fork();
    if (pid == 0)
        pin(b, 1);
    return pid;
}

int bs_ctl_open(struct ctl *c)
{
    return pipe(c->down) == 0 && pipe(c->up) == 0 ? 0 : -1;
}

void bs_ctl_close(struct ctl *c)
{
    close(c->down[0]); close(c->down[1]); close(c->up[0]); close(c->up[1]);
}

struct orbit_fleet *bs_join_node(const char *name, int node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.node = node;
    o.backing = ORBIT_BACKING_AUTO;
    struct orbit_fleet *f = NULL;
    return orbit_fleet_join(name, &o, &f) == 0 ? f : NULL;
}

struct orbit_stream_spec bs_spec_for(int ring)
{
    return (struct orbit_stream_spec){ .kind = ring_kinds[ring], .lane_capacity = 4,
                                       .buffer_bytes = ring_sizes[ring] };
}
