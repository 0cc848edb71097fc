/* SPDX-License-Identifier: MIT */
/*
 * A fleet's metrics for Prometheus: its nodes, death reports, every table's
 * counters (fleet totals and per node) and gauges read from the tables.
 * Shared by orbitctl metrics and orbit-reaper --metrics; docs/operations.md
 * ("Monitoring") lists every metric.
 *
 * Totals and nodes are separate families so that totals never go backwards:
 *   orbit_<table>_<counter>_total{fleet,generation,table,kind}       every life, ended or not
 *   orbit_<table>_node_<counter>_total{fleet,generation,table,kind,node}  the node's lives not yet ended
 * A node's series go when its death or leave is reported (its counts move
 * into the totals then), and start again from 0 for the node's next life.
 * Counters every table has (parks, wakes, doorbells, io_uring waits) are
 * orbit_table_... with the table label saying which.
 */
#ifndef ORBIT_TOOL_PROM_FLEET_H
#define ORBIT_TOOL_PROM_FLEET_H

#include <orbit/fleet.h>
#include <orbit/inspect.h>
#include "prom.h"

/* Counter indices 0..PROM_COMMON_COUNTERS-1 are the same for every table type (orbit_counter_name(3)). */
#define PROM_COMMON_COUNTERS 5

/*
 * prom_fleet - the metrics of the fleet generation named ("web", "web@2"),
 * gathered into p (observed: no node is claimed, and a segment still being
 * created is not waited for: -ORBIT_EAGAIN), every series labelled with
 * its fleet and generation. orbit_fleet_up says whether it could be opened;
 * one of other layouts is up 0 with its live members and
 * orbit_fleet_generation_info. 0 (also for that one), or the negated code
 * that kept it from being opened.
 */
int prom_fleet(struct prom *p, const char *fleet);

/* orbit_fleet_up{fleet,generation} 0: a fleet served as down without opening it. */
void prom_fleet_down(struct prom *p, const char *fleet);

/*
 * prom_fleets - every generation of every fleet in names (NULL: every fleet
 * on this host, orbit_fleet_list; a generation's name: that one). Returns how many could not be read (0: all were), or a
 * negated code when the list itself failed. With tool, each failure is
 * named on stderr ("TOOL: FLEET: no such fleet").
 */
int prom_fleets(struct prom *p, const char *const *names, size_t n, const char *tool);

/*
 * prom_fleet_names - the generation names prom_fleets reads for names (NULL:
 * every fleet on this host), in an array the caller frees; *found their
 * count, or a negated code when the list failed.
 */
typedef char prom_name[ORBIT_FLEET_NAME_MAX + 1];
prom_name *prom_fleet_names(const char *const *names, size_t n, ssize_t *found);

/* The gauges of one table (prom_tables.c); errors counts reads that failed. */
void prom_table_gauges(struct prom *p, struct orbit_fleet *f, const struct orbit_table_info *t,
                       const struct prom_labels *table_labels, unsigned *errors);

#endif
