/* SPDX-License-Identifier: MIT */
/*
 * orbit-bench stream: what its throughput runs (bench_stream.c), its ping-pong
 * (bench_stream_pingpong.c) and its report (bench_stream_report.c) share.
 */
#ifndef ORBIT_BENCH_STREAM_H
#define ORBIT_BENCH_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <orbit/stream.h>
#include "bench_hist.h"
#include "bench_pair.h"
#include "bench_place.h"

#define NCHUNK 3
#define NRING  2
extern const size_t chunk_sizes[NCHUNK];
extern const uint32_t ring_sizes[NRING];

enum alt { ALT_PIPE, ALT_PIPE1M, ALT_SOCK, ALT_MEMCPY, ALT_COUNT };
extern const char *const alt_name[ALT_COUNT];
extern const char *const alt_key[ALT_COUNT];

enum pp_kind { PP_ORBIT, PP_PIPE, PP_SOCK, PP_COUNT };
extern const char *const pp_name[PP_COUNT];
extern const char *const pp_key[PP_COUNT];

/* One ping-pong transport over all pairs: every sample, each pair's median, where it ran. */
struct pp_figures {
    bool ok;
    struct hist rtt;
    struct series p50;
    struct place_summary where;
};

/* One orbit throughput cell over all pairs. */
struct orbit_cell { bool ok; struct series gbps, parks; };

struct bench {
    int cpu[2];                                  /* --cpus: reader/parent, writer/child; -1 none */
    uint64_t bytes;
    int rounds, pairs;
    bool modes[2];                               /* [0] blocking, [1] io_uring */
    const char *hist_dir, *plot;
    char fleet[64];
    struct orbit_fleet *f;
    struct orbit_streams *s[NRING];
    struct orbit_cell orbit[NCHUNK][NRING][2];
    struct series alt[NCHUNK][ALT_COUNT];        /* GB/s per pair; 0 when unavailable */
    struct pp_figures pp[PP_COUNT];
    struct bench_run run;
};

/* Control pipes between the parent and its child. */
struct ctl { int down[2], up[2]; };   /* down: parent -> child, up: child -> parent */
int bs_ctl_open(struct ctl *c);
void bs_ctl_close(struct ctl *c);
/* fork() with the child pinned to the writer's CPU (b->cpu[1]). */
pid_t bs_spawn(const struct bench *b);
struct orbit_fleet *bs_join_node(const char *name, int node);
struct orbit_stream_spec bs_spec_for(int ring);

/* One pair's 64-byte ping-pong through orbit (ring 0), two pipes, or a socketpair. */
void bs_orbit_pingpong(struct bench *b, int pair);
void bs_fd_pingpong(struct bench *b, bool sock, int pair);

void bs_print_text(const struct bench *b);
void bs_print_json(const struct bench *b);
/* --hist and --plot files: 0, or 1 after a message on stderr. */
int bs_write_outputs(const struct bench *b);

#endif
