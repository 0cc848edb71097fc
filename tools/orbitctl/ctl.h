/* SPDX-License-Identifier: MIT */
/* orbitctl's shared pieces: the show context, members by node, ages, reclaim reports. */
#ifndef ORBIT_CTL_H
#define ORBIT_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <orbit/fleet.h>
#include <orbit/inspect.h>

/* What every show section reads: the fleet, its node records taken once, and now. */
struct ctl_ctx {
    struct orbit_fleet *f;
    bool json;
    FILE *out;
    uint64_t now_ms;                 /* CLOCK_REALTIME ms: what reserve stamps are in */
    struct orbit_node_info *nodes;   /* claimed nodes, in node order */
    size_t n_nodes;
};

int  ctl_ctx_open(struct ctl_ctx *c, struct orbit_fleet *f, bool json, FILE *out);
void ctl_ctx_close(struct ctl_ctx *c);

/* The record of node, or NULL when the node is not claimed. */
const struct orbit_node_info *ctl_node(const struct ctl_ctx *c, uint16_t node);

/*
 * One state word for a node record: "alive"; "dead" (its process is gone and
 * its death not reported yet); "joining" (being claimed, or its death being
 * reported).
 */
const char *ctl_node_state(const struct orbit_node_info *ni);

/*
 * The state word of one life (node, incarnation) that a table names: the
 * node's word while the node carries that incarnation, else "gone" (that
 * life ended and was reported; the node is free or another life's).
 */
const char *ctl_life_state(const struct ctl_ctx *c, uint16_t node, uint64_t incarnation);

/* "41 ms", "3.2 s", "4 min 10 s", "2.5 h", "3 d"; "-" for an unknown time. */
const char *ctl_age(char *buf, size_t len, uint64_t ms);
/* now - then in ms, 0 when then is in the future (clock steps, coarse ticks). */
uint64_t ctl_age_ms(const struct ctl_ctx *c, uint64_t then_ms);

/*
 * A member in JSON: {"node":N,"incarnation":"I","pid":P,"state":"W"}; pid is
 * null when the node is not (or no longer) that life's. With incarnation 0 and
 * any_life set, the node's current life is described (incarnation from its record).
 */
void ctl_json_member(const struct ctl_ctx *c, uint16_t node, uint64_t incarnation, bool any_life);
/* The same in text: "node N pid P (W)" or "node N (gone)". */
void ctl_text_member(const struct ctl_ctx *c, uint16_t node, uint64_t incarnation);

/* What a death gives back (struct orbit_reclaim): a JSON object, or one text line's words. */
void ctl_json_reclaim(FILE *out, const struct orbit_reclaim *r);
void ctl_text_reclaim(FILE *out, const struct orbit_reclaim *r);
bool ctl_reclaim_empty(const struct orbit_reclaim *r);

/* orbitctl reap / node-dead: what came back, per table. Exit status. */
int ctl_cmd_reap(const char *fleet, bool json);
int ctl_cmd_node_dead(const char *fleet, uint16_t node, uint64_t incarnation, bool json);

/*
 * One show section per table type: text, or one JSON object with its "type"
 * first (tool.h's ctl_show_* wrap these for orbit-relay).
 */
int ctl_section_pool(const struct ctl_ctx *c, uint8_t kind);
int ctl_section_stream(const struct ctl_ctx *c, uint8_t kind);
int ctl_section_admission(const struct ctl_ctx *c, uint8_t kind);
int ctl_section_exchange(const struct ctl_ctx *c, uint8_t kind);   /* arena segments */

/* A section with a context of its own: tool.h's ctl_show_* (orbit-relay's --stats). */
int ctl_show_with(int (*section)(const struct ctl_ctx *, uint8_t), struct orbit_fleet *f, uint8_t kind,
                  bool json, FILE *out);

/* The epoch orbit_fleet_tables gives the table of that kind (0 when not listed). */
uint64_t ctl_table_epoch(const struct ctl_ctx *c, uint8_t kind);

/* Start a table's JSON object: {"type":"T","kind":K,"epoch":"E" (the caller continues). */
void ctl_json_table_head(const struct ctl_ctx *c, const char *type, uint8_t kind, uint64_t epoch);

#endif
