/* SPDX-License-Identifier: MIT */
/*
 * The pidfd backend: each member watched through a pidfd of its own, pinned
 * by the probe (reaper_probe.c) and kept in the backend's epoll set, readable
 * once its thread group has exited. next reads that set: an exit is what a
 * pidfd still watched under its key says, with the status it can give.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "backend.h"
#include "reaper_probe.h"

/* One member's watch. */
struct pidfd_watch {
    uint64_t key;
    int fd;
    int32_t pid;
    uint64_t start_time;
};

/* The watches, sorted by key, under mu: the fleets' threads watch, the event loop reads. */
struct rp_backend {
    pthread_mutex_t mu;
    int epfd;
    struct pidfd_watch *v;
    size_t n, cap;
};

/* Best effort: PIDFD_GET_INFO (Linux 6.15) gives the status once the task is reaped. */
struct rp_pidfd_info {
    uint64_t mask, cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t  exit_code;
};
#define RP_PIDFD_GET_INFO  _IOWR(0xFF, 11, struct rp_pidfd_info)
#define RP_PIDFD_INFO_EXIT (1ull << 3)
#define RP_P_PIDFD 3   /* waitid's idtype for a pidfd (Linux 5.4) */

static int pidfd_status(int pidfd)
{
    /* Our own child: waitid(P_PIDFD) reads its status and leaves it for the waiter (WNOWAIT). */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(RP_P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0)
        return si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
    struct rp_pidfd_info info;
    memset(&info, 0, sizeof info);
    info.mask = RP_PIDFD_INFO_EXIT;
    if (ioctl(pidfd, RP_PIDFD_GET_INFO, &info) != 0 || !(info.mask & RP_PIDFD_INFO_EXIT))
        return -1;
    return info.exit_code;
}

/* mu held: where key is, or would go. */
static size_t key_lower(const struct rp_backend *b, uint64_t key)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->v[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* mu held: the watch under key, or NULL. */
static struct pidfd_watch *find(struct rp_backend *b, uint64_t key)
{
    size_t i = key_lower(b, key);
    return i < b->n && b->v[i].key == key ? &b->v[i] : NULL;
}

/* mu held: room for one more watch (grown, never shrunk: steady state allocates nothing). */
static int reserve(struct rp_backend *b)
{
    if (b->n < b->cap)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 64;
    struct pidfd_watch *v = realloc(b->v, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    b->v = v;
    b->cap = cap;
    return 0;
}

static void pidfd_close(struct rp_backend *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        close(b->v[i].fd);
    if (b->epfd >= 0)
        close(b->epfd);
    free(b->v);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static int pidfd_open_backend(struct rp_backend **out, char *why, size_t why_len)
{
    (void)why;
    (void)why_len;
    struct rp_backend *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    pthread_mutex_init(&b->mu, NULL);
    b->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (b->epfd < 0) {
        int rc = -errno;
        pidfd_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

static int pidfd_fd(struct rp_backend *b)
{
    return b->epfd;
}

/*
 * Watch a LIVE member by its pidfd, under key in the set, one-shot: a
 * readable pidfd stays readable, so it is reported once and kept until
 * unwatch (its descriptor is the caller's to count).
 */
static int pidfd_watch(struct rp_backend *b, uint64_t key, int32_t pid, uint64_t start_time)
{
    int fd = -1;
    if (!rp_probe_alive(pid, start_time, &fd))
        return -ESRCH;
    pthread_mutex_lock(&b->mu);
    int rc = find(b, key) ? -EEXIST : reserve(b);
    if (rc == 0) {
        size_t i = key_lower(b, key);
        memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof *b->v);
        /* Listed before the event can fire: next looks the key up. */
        b->v[i] = (struct pidfd_watch){ .key = key, .fd = fd, .pid = pid, .start_time = start_time };
        b->n++;
        struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = key };
        if (epoll_ctl(b->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            rc = -errno;
            memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof *b->v);
            b->n--;
        }
    }
    pthread_mutex_unlock(&b->mu);
    if (rc < 0)
        close(fd);
    return rc;
}

static int pidfd_unwatch(struct rp_backend *b, uint64_t key)
{
    pthread_mutex_lock(&b->mu);
    size_t i = key_lower(b, key);
    int fd = -1;
    if (i < b->n && b->v[i].key == key) {
        fd = b->v[i].fd;
        memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof *b->v);
        b->n--;
        /* Out of the set before the descriptor closes: no event names a key no longer listed. */
        epoll_ctl(b->epfd, EPOLL_CTL_DEL, fd, NULL);
    }
    pthread_mutex_unlock(&b->mu);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? 0 : -ENOENT;
}

static int pidfd_next(struct rp_backend *b, struct rp_event *out, size_t max, uint64_t *lost)
{
    struct epoll_event evs[64];
    *lost = 0;   /* a readable pidfd stays readable: nothing is ever lost */
    if (max == 0)
        return 0;
    int n = epoll_wait(b->epfd, evs, (int)(max < 64 ? max : 64), 0);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    /* A pidfd turns readable as the thread group exits: now is the exit, to the loop's latency. */
    uint64_t now = rp_now_ns();
    int got = 0;
    pthread_mutex_lock(&b->mu);   /* held while a pidfd is read: unwatch cannot close it under us */
    for (int i = 0; i < n; i++) {
        struct pidfd_watch *w = find(b, evs[i].data.u64);
        /* The event may predate a re-watch under the key: act on the pidfd listed now, if it says so. */
        if (!w || !rp_pidfd_exited(w->fd))
            continue;
        out[got++] = (struct rp_event){ .key = w->key, .pid = w->pid, .start_time = w->start_time,
                                        .status = pidfd_status(w->fd), .exit_ns = now };
    }
    pthread_mutex_unlock(&b->mu);
    return got;
}

const struct rp_backend_ops rp_pidfd_backend = {
    .kind = ORBIT_REAPER_PIDFD, .per_tgid = false,
    .open = pidfd_open_backend, .fd = pidfd_fd, .watch = pidfd_watch, .unwatch = pidfd_unwatch,
    .next = pidfd_next, .close = pidfd_close,
};
