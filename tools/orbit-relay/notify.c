/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: sd_notify's datagram, written here (the protocol is one
 * sendto; libsystemd would be a dependency for it). In an upgrade under
 * systemd, the running relay names its successor the main process once the
 * successor runs (the running relay is the one systemd hears from with
 * NotifyAccess=main), and the successor says so itself too (heard with
 * NotifyAccess=all): when the running relay then exits, the service stays up.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "notify.h"

/* One datagram of text to NOTIFY_SOCKET: 0 sent (or no socket to send to), or -errno. */
static int notify_send(const char *text)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof a.sun_path)
        return -EINVAL;
    memcpy(a.sun_path, path, n);
    if (path[0] == '@')
        a.sun_path[0] = 0;   /* an abstract name: its length counts, no NUL after it */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    ssize_t k = sendto(fd, text, strlen(text), MSG_NOSIGNAL, (const struct sockaddr *)&a, len);
    int rc = k < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int notify_ready(pid_t pid)
{
    char text[64];
    snprintf(text, sizeof text, "READY=1\nMAINPID=%d\n", (int)pid);
    return notify_send(text);
}

int notify_main_pid(pid_t pid)
{
    char text[32];
    snprintf(text, sizeof text, "MAINPID=%d\n", (int)pid);
    return notify_send(text);
}
