/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay under systemd (Type=notify): the service manager's notify
 * socket (notify.c). The datagram protocol of sd_notify(3), without
 * libsystemd: one datagram of "VAR=value" lines to the AF_UNIX socket
 * NOTIFY_SOCKET names (a path, or '@' and an abstract name).
 */
#ifndef ORBIT_RELAY_NOTIFY_H
#define ORBIT_RELAY_NOTIFY_H

#include <sys/types.h>

/* The relay runs (READY=1), with pid as the service's main process (MAINPID=). 0, or -errno;
 * 0 without NOTIFY_SOCKET (not under a service manager). */
int notify_ready(pid_t pid);
/* The service's main process is pid from now on (a successor took over: MAINPID=). */
int notify_main_pid(pid_t pid);

#endif
