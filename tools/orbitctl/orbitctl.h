/* SPDX-License-Identifier: MIT */
/* orbitctl's own show sections (the pool and stream ones are in tools/common). */
#ifndef ORBITCTL_H
#define ORBITCTL_H

#include "tool.h"

int ctl_show_admission(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);
int ctl_show_exchange(struct orbit_fleet *f, uint8_t kind, bool json, FILE *out);   /* arena segments */
/* The mounts ls reports the room of: /dev/shm and every directory holding a segment. */
#define CTL_ROOM_MAX 8
struct ctl_room { int n; char dir[CTL_ROOM_MAX][256]; };
void ctl_room_add(struct ctl_room *r, const char *dir);
void ctl_room_note(struct ctl_room *r, const char *segment_path);   /* its directory */
void ctl_room_print(const struct ctl_room *r, bool json);   /* JSON: ,"room":[...] */

/* unlink FLEET [--force]: the process's exit status. */
int ctl_cmd_unlink(const char *name, bool force, bool json);

#endif
