/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: a running relay hands its listening sockets to its successor
 * (orbit-relay --upgrade), over a unix socket with SCM_RIGHTS.
 *
 * Why the descriptors, not a second SO_REUSEPORT group member: a listener's
 * accept queue belongs to that socket, and closing it resets every
 * connection in the queue; a new SYN is hashed to any member of the group,
 * so a member that is about to close takes connections it will reset. The
 * same sockets passed on are never closed while the upgrade runs: the
 * successor's workers accept from them beside the old workers until those
 * stop accepting, and nothing queued is lost (no failed connect, whatever
 * net.ipv4.tcp_migrate_req says).
 *
 * The exchange, on a SOCK_SEQPACKET connection to the running supervisor's
 * control socket (mode 0600; each side checks the other's uid is its own or
 * root):
 *   successor  HELLO (the fleet's name)
 *   running    LISTENERS (its pid, the address) + the listeners' descriptors
 *   successor  READY, once its workers run on them and accept
 *   running    stops its workers gracefully (they finish what they hold,
 *              Connection: close on the next response), then DONE, and exits
 * A successor that goes away before READY leaves the running relay as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include "handover.h"

#define HO_MAGIC   0x4f48524fu   /* "ORHO" */
#define HO_VERSION 1
enum { HO_HELLO = 1, HO_LISTENERS, HO_READY, HO_DONE, HO_REFUSED };

struct ho_msg {
    uint32_t magic;
    uint16_t version, kind;
    int32_t pid;
    int32_t status;              /* HO_REFUSED: a negative errno */
    uint32_t n_fds;              /* HO_LISTENERS: descriptors that came with it */
    struct sockaddr_in listen;
    char fleet[ORBIT_FLEET_NAME_MAX + 8];
};

void handover_default_path(const char *fleet, char *buf, size_t len)
{
    snprintf(buf, len, "/dev/shm/orbit-relay.%s.ctl", fleet);
}

/* The peer is this user or root (SO_PEERCRED). */
static bool peer_trusted(int fd, pid_t *pid)
{
    struct ucred uc;
    socklen_t len = sizeof uc;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
        return false;
    if (pid)
        *pid = uc.pid;
    return uc.uid == geteuid() || uc.uid == 0;
}

/* One message and up to max descriptors; the count of descriptors in *n_fds. 0, or -errno (-EPIPE at EOF). */
static int ho_recv(int fd, struct ho_msg *m, int *fds, int max, int *n_fds, int timeout_ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return r == 0 ? -ETIMEDOUT : -errno;
    union { char buf[CMSG_SPACE(sizeof(int) * RELAY_STATS_SLOTS)]; struct cmsghdr align; } ctl;
    struct iovec iov = { .iov_base = m, .iov_len = sizeof *m };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
    ssize_t k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (k < 0)
        return -errno;
    *n_fds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < n; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (*n_fds < max)
                fds[(*n_fds)++] = got;
            else
                close(got);
        }
    }
    if (k == 0)
        return -EPIPE;
    if ((size_t)k != sizeof *m || m->magic != HO_MAGIC || m->version != HO_VERSION || (mh.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < *n_fds; i++)
            close(fds[i]);
        *n_fds = 0;
        return -EPROTO;
    }
    return 0;
}

static int ho_send(int fd, uint16_t kind, int32_t status, const struct sockaddr_in *listen, const char *fleet,
                   const int *fds, int n_fds)
{
    struct ho_msg m = { .magic = HO_MAGIC, .version = HO_VERSION, .kind = kind, .pid = getpid(), .status = status,
                        .n_fds = (uint32_t)n_fds };
    if (listen)
        m.listen = *listen;
    if (fleet)
        snprintf(m.fleet, sizeof m.fleet, "%s", fleet);
    union { char buf[CMSG_SPACE(sizeof(int) * RELAY_STATS_SLOTS)]; struct cmsghdr align; } ctl;
    struct iovec iov = { .iov_base = &m, .iov_len = sizeof m };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (n_fds > 0) {
        memset(ctl.buf, 0, sizeof ctl.buf);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n_fds);
    }
    return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof m ? 0 : -errno;
}

/* ---- the running relay's side -------------------------------------------- */

int handover_serve(struct handover_server *s, const char *path)
{
    *s = (struct handover_server){ .lfd = -1, .conn = -1 };
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int n = snprintf(a.sun_path, sizeof a.sun_path, "%s.%d", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof a.sun_path || strlen(path) >= sizeof s->path)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    unlink(a.sun_path);
    /* Bound beside the path, then renamed over it: whoever connects by the path reaches a
     * listening socket, this one or the one it replaced. */
    int rc = 0;
    struct stat sb;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(a.sun_path, 0600) < 0 || listen(fd, 4) < 0 ||
        rename(a.sun_path, path) < 0 || stat(path, &sb) < 0) {
        rc = -errno;
        unlink(a.sun_path);
        close(fd);
        return rc;
    }
    s->lfd = fd;
    s->dev = sb.st_dev;
    s->ino = sb.st_ino;
    snprintf(s->path, sizeof s->path, "%s", path);
    return 0;
}

void handover_unserve(struct handover_server *s)
{
    struct stat sb;
    if (s->lfd >= 0 && stat(s->path, &sb) == 0 && sb.st_dev == s->dev && sb.st_ino == s->ino)
        unlink(s->path);   /* still ours: a successor's replaced it otherwise */
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->conn >= 0)
        close(s->conn);
    s->lfd = s->conn = -1;
}

/* A successor connects: one at a time, this user's or root's. */
static void serve_accept(struct handover_server *s)
{
    int c = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    pid_t pid;
    if (s->conn >= 0 || s->draining || !peer_trusted(c, &pid)) {
        ho_send(c, HO_REFUSED, s->conn >= 0 || s->draining ? -EBUSY : -EPERM, NULL, NULL, NULL, 0);
        close(c);
        return;
    }
    s->conn = c;
    s->peer = pid;
}

/* A message from the successor: its HELLO is answered with the listeners; READY starts the drain. */
static int serve_message(struct handover_server *s, const struct handover_offer *of)
{
    struct ho_msg m;
    int fds[1], n_fds;
    int rc = ho_recv(s->conn, &m, fds, 0, &n_fds, 0);
    if (rc == 0 && m.kind == HO_HELLO && strncmp(m.fleet, of->fleet, sizeof m.fleet) == 0) {
        int lfds[RELAY_STATS_SLOTS], n = 0;
        for (int i = 0; i < of->n_lfds && n < RELAY_STATS_SLOTS; i++)
            if (of->lfds[i] >= 0)
                lfds[n++] = of->lfds[i];
        if (ho_send(s->conn, HO_LISTENERS, 0, of->listen, of->fleet, lfds, n) == 0)
            return HANDOVER_NONE;
    } else if (rc == 0 && m.kind == HO_HELLO) {
        ho_send(s->conn, HO_REFUSED, -ENOENT, NULL, NULL, NULL, 0);   /* another fleet's */
    } else if (rc == 0 && m.kind == HO_READY) {
        s->draining = true;
        return HANDOVER_DRAIN;
    }
    if (!s->draining)   /* gone before READY: this relay carries on as it was */
        fprintf(stderr, "orbit-relay: the upgrade by pid %d ended before it took over; carrying on\n", (int)s->peer);
    close(s->conn);
    s->conn = -1;
    return HANDOVER_NONE;
}

int handover_fds(const struct handover_server *s, struct pollfd *p)
{
    int n = 0;
    if (s->lfd >= 0)
        p[n++] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
    if (s->conn >= 0)
        p[n++] = (struct pollfd){ .fd = s->conn, .events = POLLIN };
    return n;
}

int handover_on_poll(struct handover_server *s, const struct handover_offer *offer, const struct pollfd *p, int n)
{
    int ev = HANDOVER_NONE;
    for (int i = 0; i < n; i++) {
        if (!p[i].revents)
            continue;
        if (p[i].fd == s->lfd)
            serve_accept(s);
        else if (p[i].fd == s->conn && s->conn >= 0)
            ev = serve_message(s, offer);
    }
    return ev;
}

void handover_done(struct handover_server *s)
{
    if (s->conn >= 0)
        ho_send(s->conn, HO_DONE, 0, NULL, NULL, NULL, 0);
}

/* ---- the successor's side -------------------------------------------------- */

/* Each descriptor a listening TCP socket of IPv4. */
static bool listeners_ok(const int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        int v = 0;
        socklen_t len = sizeof v;
        if (getsockopt(fds[i], SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || !v)
            return false;
        len = sizeof v;
        if (getsockopt(fds[i], SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_INET)
            return false;
    }
    return true;
}

static int take_fail(struct handover_take *t, const char *path, const char *why, int rc)
{
    fprintf(stderr, "orbit-relay: --upgrade: %s at %s: %s\n", why, path, strerror(-rc));
    for (int i = 0; i < t->n; i++)
        close(t->fds[i]);
    t->n = 0;
    if (t->conn >= 0)
        close(t->conn);
    t->conn = -1;
    return rc;
}

int handover_take(const char *path, const char *fleet, struct handover_take *t)
{
    *t = (struct handover_take){ .conn = -1 };
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path)
        return take_fail(t, path, "the control socket's path is too long", -ENAMETOOLONG);
    memcpy(a.sun_path, path, strlen(path));
    t->conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (t->conn < 0 || connect(t->conn, (struct sockaddr *)&a, sizeof a) < 0)
        return take_fail(t, path, "no relay of this fleet answers", -errno);
    if (!peer_trusted(t->conn, NULL))
        return take_fail(t, path, "the control socket belongs to another user", -EPERM);
    struct ho_msg m;
    int rc = ho_send(t->conn, HO_HELLO, 0, NULL, fleet, NULL, 0);
    if (rc == 0)
        rc = ho_recv(t->conn, &m, t->fds, RELAY_STATS_SLOTS, &t->n, 10000);
    if (rc < 0)
        return take_fail(t, path, "the running relay did not answer", rc);
    if (m.kind == HO_REFUSED)
        return take_fail(t, path, m.status == -EBUSY ? "the running relay is handing over already"
                                  : m.status == -ENOENT ? "the relay there runs another fleet"
                                  : "the running relay refused", m.status < 0 ? m.status : -EPROTO);
    if (m.kind != HO_LISTENERS || t->n == 0 || (uint32_t)t->n != m.n_fds || !listeners_ok(t->fds, t->n))
        return take_fail(t, path, "the running relay's answer holds no listeners", -EPROTO);
    t->old_pid = m.pid;
    t->listen = m.listen;
    return 0;
}

int handover_ready(struct handover_take *t)
{
    return ho_send(t->conn, HO_READY, 0, NULL, NULL, NULL, 0);
}

int handover_wait_done(struct handover_take *t, int timeout_ms)
{
    struct ho_msg m;
    int fds[1], n_fds;
    int rc = ho_recv(t->conn, &m, fds, 0, &n_fds, timeout_ms);
    close(t->conn);
    t->conn = -1;
    return rc == 0 && m.kind == HO_DONE ? 0 : rc < 0 ? rc : -EPROTO;
}
