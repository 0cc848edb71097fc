/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition format 0.0.4, written by orbitctl metrics and
 * orbit-reaper --metrics.
 *
 * Samples are gathered per metric family in the order families are first
 * used, then written out at once: each family's HELP and TYPE lines, then all
 * of its samples, whichever fleet or table they came from (the format wants a
 * family's samples together). Label values and HELP texts are escaped as the
 * format says (backslash, double quote in label values, line feed).
 */
#ifndef ORBIT_TOOL_PROM_H
#define ORBIT_TOOL_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROM_LABELS_MAX 8

enum prom_type { PROM_COUNTER, PROM_GAUGE, PROM_HISTOGRAM };

/* One label set: up to PROM_LABELS_MAX pairs; values are copied when a sample is added. */
struct prom_labels {
    size_t n;
    const char *name[PROM_LABELS_MAX];
    const char *value[PROM_LABELS_MAX];
};

struct prom;

struct prom *prom_new(void);
void prom_free(struct prom *);

/* A copy of l with one more pair (dropped, with prom_error set, past PROM_LABELS_MAX). */
struct prom_labels prom_with(const struct prom_labels *l, const char *name, const char *value);

/*
 * prom_u64 / prom_f64 - one sample of family name (created with type and help
 * on first use). suffix is appended to the sample's name ("" for counters and
 * gauges; "_bucket", "_sum", "_count" for a histogram's parts). A name that
 * breaks the format's rules, a family used again with another type, or no
 * memory: the sample is dropped and prom_error says why.
 */
void prom_u64(struct prom *, const char *name, enum prom_type, const char *help, const char *suffix,
              const struct prom_labels *, uint64_t value);
void prom_f64(struct prom *, const char *name, enum prom_type, const char *help, const char *suffix,
              const struct prom_labels *, double value);

/* The first error met while gathering (NULL: none). */
const char *prom_error(const struct prom *);

/* Every family, HELP and TYPE first. 0, or -1 when out fails. */
int prom_write(const struct prom *, FILE *out);

/* A metric name as the format takes it: ^[a-zA-Z_:][a-zA-Z0-9_:]*$ */
bool prom_name_ok(const char *name);

#endif
