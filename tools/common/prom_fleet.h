/* SPDX-License-Identifier: MIT */
/*
 * A fleet's metrics for Prometheus: its nodes, death reports, every table's
 * counters (fleet totals and per node) and gauges read from the tables.
 * Shared by orbitctl metrics and orbit-reaper --metrics; docs/operations.md
 * ("Monitoring") lists every metric.
 *
 * Totals and nodes are separate families so that totals never go backwards:
 *   orbit_<table>_<counter>_total{fleet,table,kind}            every life, ended or not
 *   orbit_<table>_node_<counter>_total{fleet,table,kind,node}  the node's lives not yet ended
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
 * prom_fleet - the metrics of the fleet named, gathered into p (observed: no
 * node is claimed, and a segment still being created is not waited for:
 * -ORBIT_EAGAIN). orbit_fleet_up{fleet} says whether it could be opened.
 * 0, or the negated code that kept it from being opened.
 */
int prom_fleet(struct prom *p, const char *fleet);

/* orbit_fleet_up{fleet} 0: a fleet served as down without opening it. */
void prom_fleet_down(struct prom *p, const char *fleet);

/*
 * prom_fleets - every fleet in names (NULL: every fleet on this host,
 * orbit_fleet_list). Returns how many could not be read (0: all were), or a
 * negated code when the list itself failed. With tool, each failure is
 * named on stderr ("TOOL: FLEET: no such fleet").
 */
int prom_fleets(struct prom *p, const char *const *names, size_t n, const char *tool);

/* The gauges of one table (prom_tables.c); errors counts reads that failed. */
void prom_table_gauges(struct prom *p, struct orbit_fleet *f, const struct orbit_table_info *t,
                       const struct prom_labels *table_labels, unsigned *errors);

#endif
