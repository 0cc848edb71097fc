/* SPDX-License-Identifier: MIT */
/* orbitctl's own show sections (the pool and stream ones are in tools/common). */
#ifndef ORBITCTL_H
#define ORBITCTL_H

#include "tool.h"

int ctl_show_admission(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);
int ctl_show_exchange(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);   /* arena segments */
/* unlink FLEET [--force]: the process's exit status. */
int ctl_cmd_unlink(const char *name, bool force, bool json);

#endif
