/* SPDX-License-Identifier: MIT */
/* orbit/reaper.h — see the comments below; documented per call. */
#ifndef ORBIT_REAPER_H
#define ORBIT_REAPER_H

#include <orbit/fleet.h>

#ifdef __cplusplus
extern "C" {
#endif

enum orbit_reaper_backend { ORBIT_REAPER_AUTO, ORBIT_REAPER_BPF, ORBIT_REAPER_PIDFD };
struct orbit_reaper;
int  orbit_reaper_open(enum orbit_reaper_backend, struct orbit_reaper **out);
int  orbit_reaper_watch(struct orbit_reaper *, const char *fleet_name);
int  orbit_reaper_fd(struct orbit_reaper *);                  /* pollable */
int  orbit_reaper_process(struct orbit_reaper *, int timeout_ms); /* returns deaths handled */
enum orbit_reaper_backend orbit_reaper_backend(struct orbit_reaper *);
void orbit_reaper_close(struct orbit_reaper *);

#ifdef __cplusplus
}
#endif
#endif
