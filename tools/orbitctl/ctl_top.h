/* SPDX-License-Identifier: MIT */
/*
 * orbitctl top: a live view of one fleet. ctl_top.c runs the loop and the
 * terminal, ctl_top_sample.c reads a sample (counters, nodes, gauges),
 * ctl_top_render.c lays two samples out as lines of a given width and height.
 */
#ifndef ORBIT_CTL_TOP_H
#define ORBIT_CTL_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <orbit/orbit.h>

/* orbitctl top FLEET [--interval S] [--count N] [--sort units|recent]: the exit status. */
int ctl_top(int argc, char **argv, bool json);

#define TOP_TABLES  16     /* table segments followed */
#define TOP_NODES   128    /* nodes whose own counters are read each refresh */
#define TOP_ROWS    256    /* keys, streams, domains kept per sample */
#define TOP_EVENTS  8      /* recent deaths and reclaims remembered */
#define TOP_GENERATIONS 8  /* generations of the fleet listed beside the one read */
#define TOP_COLS    256    /* widest line drawn */
#define TOP_NO_IDX  0xffu

struct top_table {
    uint8_t kind, type;
    bool built;
    char name[ORBIT_TABLE_NAME_MAX + 1];
    uint8_t headline;                /* the counter shown per node (TOP_NO_IDX: none) */
    int rc;                          /* of the totals' read */
    struct orbit_counters total;
};

struct top_node {
    struct orbit_node_info info;
    bool have[TOP_TABLES];                        /* this node's counters were read */
    uint64_t v[TOP_TABLES][ORBIT_COUNTERS_MAX];
    bool have_holds;                              /* dead nodes: what a report gives back */
    struct orbit_reclaim holds;
};

struct top_key {
    uint8_t kind;
    orbit_key key;
    uint32_t candidates, capacity, reserved, active, watchers;
    uint64_t last_reserve_ms;        /* the latest over its candidates (wall clock); 0 never */
};

struct top_stream {
    uint8_t kind;
    uint32_t ring;                   /* the lane's ring bytes */
    struct orbit_stream_info info;
};

struct top_domain { uint8_t kind; uint32_t domain; uint64_t capacity, used; };

struct top_sample {
    uint64_t mono_ns;                /* CLOCK_MONOTONIC at the read */
    time_t wall;
    uint64_t wall_ms;                /* CLOCK_REALTIME, as the pool stamps reservations */
    uint16_t capacity;
    size_t n_tables;
    struct top_table t[TOP_TABLES];
    size_t claimed, live, dead, joining;          /* over every claimed node */
    size_t n_nodes;                                /* nodes[] read (at most TOP_NODES) */
    struct top_node nodes[TOP_NODES];
    size_t n_keys, keys_total;
    struct top_key keys[TOP_ROWS];
    size_t n_streams, streams_total;
    struct top_stream streams[TOP_ROWS];
    size_t n_domains, domains_total;
    struct top_domain domains[TOP_ROWS];
    int deaths_rc;
    struct orbit_death_counters deaths;
    size_t n_generations;                          /* of the fleet's name, the one read among them */
    struct orbit_generation_info generations[TOP_GENERATIONS];
};

/* One remembered happening: a node seen dying, a death reported, a node reclaimed. */
struct top_event { time_t at; char text[TOP_COLS]; };

struct top_history {
    size_t n;                        /* events[0] is the newest */
    struct top_event ev[TOP_EVENTS];
};

/* top_sample_take - read everything the view shows; 0, or the fleet's error (nodes, tables). */
int top_sample_take(struct orbit_fleet *f, struct top_sample *s);
/* top_history_note - record what changed from prev (NULL: none yet) to cur. */
void top_history_note(struct top_history *h, const struct top_sample *prev, const struct top_sample *cur);
/* "2 leases, 1 resource, 2 sides, 1 claim, 3 units" or "nothing": what a death gives back. */
void top_holds_text(const struct orbit_reclaim *r, char *buf, size_t len);

enum top_sort { TOP_SORT_UNITS, TOP_SORT_RECENT };

struct top_view {
    const char *fleet;
    double interval_s;
    enum top_sort sort;
    bool tty;                        /* interactive: mention the keys */
    size_t cols, rows;               /* rows 0: no height limit (plain output) */
    const char *note;                /* one line shown under the title, or NULL */
};

/* Lines of text, each at most cols characters, no newline. */
struct top_lines { size_t n, cap; char (*l)[TOP_COLS + 1]; };
void top_lines_free(struct top_lines *);

/* top_render - lay out cur (rates against prev, which may be NULL) into out. 0 or -ENOMEM. */
int top_render(const struct top_view *v, const struct top_sample *prev, const struct top_sample *cur,
               const struct top_history *h, struct top_lines *out);

/* "12", "3.4", "56k", "7.8M": a count or rate in at most 5 characters. */
void top_human(double v, char *buf, size_t len);

#endif
