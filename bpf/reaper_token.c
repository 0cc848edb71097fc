/* SPDX-License-Identifier: MIT */
/*
 * The token watch: members the pidfd and BPF backends cannot see (another
 * pid namespace, a /proc that hides them) are watched through the lock the
 * kernel holds for their life. A private io_uring holds one
 * orbit_fleet_prep_wait_node_death per such member. The ring belongs to a
 * thread of its own, which submits every SQE: a FUTEX_WAIT completes by task
 * work on its submitter, and that would cut the caller's epoll_wait short
 * with EINTR. The thread hands completions to the event loop through a list
 * and an eventfd in the reaper's epoll set, so orbit_reaper_fd stays the one
 * thing to poll. A completion only says "look": the event loop confirms the
 * death with the lock itself (rp_life_over) and arms again when it is not over.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <liburing.h>
#include <orbit/uring.h>
#include "reaper_internal.h"

#define RP_TOKEN_SQ      256u
#define RP_TOKEN_CQ      8192u
#define RP_TOKEN_IGNORED 0ull          /* user_data of cancels and NOPs: nothing to look at */
#define RP_TOKEN_BELL    (~0ull)       /* user_data of the doorbell's poll */
#define RP_TOKEN_WAIT_MS 1000          /* bound on the wait for the thread to submit an arming */

/* Everything below ring is under mu; the ring's SQ is filled under mu and submitted by the thread. */
struct rp_token {
    struct io_uring ring;
    int efd;                    /* in the reaper's epoll set: fired tags are waiting */
    int bellfd;                 /* the thread's doorbell: SQEs to submit, or stop */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int ready;                  /* 0 starting, 1 running, < 0 the thread could not set the ring up */
    bool stop;
    uint64_t queued, submitted; /* SQEs queued / submitted so far */
    uint64_t *fired;
    size_t n_fired, cap_fired;
};

/* user_data: which arming of which node of which fleet (seq is never 0, so neither is this). */
static uint64_t token_tag(uint32_t fleet_id, uint16_t node, uint16_t seq)
{
    return ((uint64_t)fleet_id << 32) | ((uint64_t)node << 16) | seq;
}

static void ring_bell(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0) {
        /* EAGAIN: saturated, and so already readable. */
    }
}

/* mu held, in the thread. */
static void arm_bell(struct rp_token *t)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
    if (!sqe)
        return;   /* the ring is full: the next submit makes room and the caller rings again */
    io_uring_prep_poll_multishot(sqe, t->bellfd, POLLIN);
    io_uring_sqe_set_data64(sqe, RP_TOKEN_BELL);
    t->queued++;
}

/* In the thread: completions of armed waits go to the event loop; the doorbell is drained. */
static void harvest(struct rp_token *t)
{
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    bool fired = false;
    pthread_mutex_lock(&t->mu);
    io_uring_for_each_cqe(&t->ring, head, cqe) {
        n++;
        uint64_t tag = cqe->user_data;
        if (tag == RP_TOKEN_BELL) {
            uint64_t count;
            if (read(t->bellfd, &count, sizeof count) < 0) { /* EAGAIN: drained already */ }
            if (!(cqe->flags & IORING_CQE_F_MORE))
                arm_bell(t);
        } else if (tag != RP_TOKEN_IGNORED) {
            if (t->n_fired == t->cap_fired) {
                size_t cap = t->cap_fired ? t->cap_fired * 2 : 64;
                uint64_t *v = realloc(t->fired, cap * sizeof *v);
                if (!v)
                    continue;   /* that member is found on the next re-read (its watch is re-armed) */
                t->fired = v;
                t->cap_fired = cap;
            }
            t->fired[t->n_fired++] = tag;   /* -EAGAIN, -ECANCELED or 0: the event loop checks */
            fired = true;
        }
    }
    io_uring_cq_advance(&t->ring, n);
    pthread_mutex_unlock(&t->mu);
    if (fired)
        ring_bell(t->efd);
}

static int ring_setup(struct rp_token *t)
{
    if (!orbit_uring_futex_supported())   /* probed here: its ring's task work lands on this thread */
        return -ORBIT_ENOTSUP;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = RP_TOKEN_CQ;
    int rc = io_uring_queue_init_params(RP_TOKEN_SQ, &t->ring, &p);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&t->mu);
    arm_bell(t);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static void *token_main(void *arg)
{
    struct rp_token *t = arg;
    int rc = ring_setup(t);
    pthread_mutex_lock(&t->mu);
    t->ready = rc < 0 ? rc : 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->mu);
    if (rc < 0)
        return NULL;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        bool stop = t->stop;
        uint64_t gen = t->queued;
        if (!stop && io_uring_submit(&t->ring) >= 0)
            t->submitted = gen;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->mu);
        if (stop)
            break;
        struct io_uring_cqe *cqe;
        io_uring_wait_cqe(&t->ring, &cqe);   /* -EINTR and the like: harvest what is there, loop */
        harvest(t);
    }
    io_uring_queue_exit(&t->ring);   /* cancels every wait still in it, from their submitter */
    return NULL;
}

static void token_free(struct rp_token *t)
{
    if (t->efd >= 0)
        close(t->efd);
    if (t->bellfd >= 0)
        close(t->bellfd);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->mu);
    free(t->fired);
    free(t);
}

/* The thread, with every signal blocked: the process's signals are not its business. */
static int token_start(struct rp_token *t)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = -pthread_create(&t->thread, NULL, token_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&t->mu);
    while (t->ready == 0)
        pthread_cond_wait(&t->cond, &t->mu);
    rc = t->ready < 0 ? t->ready : 0;
    pthread_mutex_unlock(&t->mu);
    if (rc < 0)
        pthread_join(t->thread, NULL);
    return rc;
}

int rp_token_open(struct orbit_reaper *r, char *why, size_t why_len)
{
    struct rp_token *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    t->bellfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = RP_TAG_TOKEN };
    int rc = t->efd < 0 || t->bellfd < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, t->efd, &ev) != 0 ? -errno : 0;
    if (rc == 0)
        rc = token_start(t);
    if (rc < 0) {
        snprintf(why, why_len, "%s", rc == -ORBIT_ENOTSUP ? orbit_uring_futex_status() : strerror(-rc));
        if (t->efd >= 0)
            epoll_ctl(r->epfd, EPOLL_CTL_DEL, t->efd, NULL);
        token_free(t);
        return rc;
    }
    r->token = t;
    return 0;
}

void rp_token_close(struct orbit_reaper *r)
{
    struct rp_token *t = r->token;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_mutex_unlock(&t->mu);
    ring_bell(t->bellfd);
    pthread_join(t->thread, NULL);
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, t->efd, NULL);
    token_free(t);
    r->token = NULL;
}

/* mu held: an SQE, waiting (bounded) for the thread to make room when the ring is full. */
static struct io_uring_sqe *token_sqe(struct rp_token *t)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
    if (!sqe) {
        ring_bell(t->bellfd);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += RP_TOKEN_WAIT_MS / 1000;
        while (t->submitted < t->queued && !t->stop &&
               pthread_cond_timedwait(&t->cond, &t->mu, &until) == 0) {}
        sqe = io_uring_get_sqe(&t->ring);
    }
    return sqe;
}

/* mu held: the thread has submitted everything up to gen (false after the bound). */
static bool wait_submitted(struct rp_token *t, uint64_t gen)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += RP_TOKEN_WAIT_MS / 1000;
    while (t->submitted < gen && !t->stop)
        if (pthread_cond_timedwait(&t->cond, &t->mu, &until) != 0)
            break;
    return t->submitted >= gen;
}

/*
 * The SQE is prepared here, where the fleet handle is known to be mapped, and
 * submitted by the thread before this returns: once in the kernel the wait is
 * keyed by the segment file, not by our mapping, so a later unmap is harmless.
 */
int rp_token_arm(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, struct rp_watch *w)
{
    struct rp_token *t = r->token;
    if (!t)
        return -ORBIT_ENOTSUP;
    pthread_mutex_lock(&t->mu);
    struct io_uring_sqe *sqe = token_sqe(t);
    int rc = sqe ? orbit_fleet_prep_wait_node_death(rf->f, node, w->seen.incarnation, sqe) : -ORBIT_EFULL;
    if (++w->token_seq == 0)
        w->token_seq = 1;
    if (sqe) {
        /* A NOP (over already, or an error) goes in too: the SQE was taken. */
        io_uring_sqe_set_data64(sqe, rc == 0 ? token_tag(rf->id, node, w->token_seq) : RP_TOKEN_IGNORED);
        uint64_t gen = ++t->queued;
        ring_bell(t->bellfd);
        if (rc == 0 && !wait_submitted(t, gen))
            rc = -ORBIT_ETIMEDOUT;   /* its completion, if any, carries a seq no longer armed */
    }
    pthread_mutex_unlock(&t->mu);
    w->token_armed = rc == 0;
    return rc;
}

void rp_token_cancel(struct orbit_reaper *r, struct rp_fleet *rf, uint16_t node, struct rp_watch *w)
{
    struct rp_token *t = r->token;
    if (!t || !w->token_armed)
        return;
    w->token_armed = false;
    pthread_mutex_lock(&t->mu);
    struct io_uring_sqe *sqe = token_sqe(t);
    if (sqe) {   /* else the wait ends with the life anyway, and its seq is stale by then */
        io_uring_prep_cancel64(sqe, token_tag(rf->id, node, w->token_seq), 0);
        io_uring_sqe_set_data64(sqe, RP_TOKEN_IGNORED);
        t->queued++;
        ring_bell(t->bellfd);
    }
    pthread_mutex_unlock(&t->mu);
}

/* One completion: the armed wait of a watch that still exists, or nothing. */
static void token_fired(struct orbit_reaper *r, uint64_t tag)
{
    struct rp_fleet *rf = rp_find_fleet_id(r, (uint32_t)(tag >> 32));
    uint16_t node = (uint16_t)(tag >> 16);
    if (!rf || !rf->f || node >= rf->capacity)
        return;
    struct rp_watch *w = &rf->nodes[node];
    if (!w->watched || w->via != RP_VIA_TOKEN || !w->token_armed || w->token_seq != (uint16_t)tag)
        return;   /* cancelled, re-armed or unwatched since */
    w->token_armed = false;
    struct rp_exit e = { .kind = RP_EXIT_NODE, .fleet_id = rf->id, .node = node, .seen = w->seen,
                         .status = w->hinted ? w->hint_status : -1,
                         .exit_ns = w->hinted ? w->hint_exit_ns : 0, .detected_ns = rp_now_ns() };
    r->stats.events++;
    rp_queue_push(r, &e);
}

void rp_token_consume(struct orbit_reaper *r)
{
    struct rp_token *t = r->token;
    if (!t)
        return;
    uint64_t count;
    if (read(t->efd, &count, sizeof count) < 0) {
        /* EAGAIN: taken with an earlier read; the list is looked at anyway. */
    }
    pthread_mutex_lock(&t->mu);
    uint64_t *v = t->fired;
    size_t n = t->n_fired;
    t->fired = NULL;
    t->n_fired = t->cap_fired = 0;
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++)
        token_fired(r, v[i]);
    free(v);
}
