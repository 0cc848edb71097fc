/* SPDX-License-Identifier: MIT */
/*
 * Readiness descriptors: an eventfd the kernel signals when a node's doorbell
 * word moves. With io_uring futex ops, a private ring holds one FUTEX_WAIT on
 * the doorbell and has the eventfd registered, so the completion itself
 * signals it; orbit_readiness_drain reaps and re-arms. Without them, one
 * driver thread per descriptor blocks in futex(2) and writes the eventfd.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <orbit/uring.h>
#include "guard.h"
#include "readiness.h"
#include "uring_internal.h"

struct driver {
    int efd;
    struct orb_waitword *doorbell;
    bool use_ring;
    bool wait_in_flight;
    struct io_uring ring;
    pthread_t thread;
    _Atomic bool stop;
    uint32_t open_since;         /* doorbell value when the descriptor was made */
    uint32_t fork_generation;    /* the process that made it: a fork child has no driver thread */
    pthread_mutex_t lock;        /* serialises drain against close */
    struct driver *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct driver *registry;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/*
 * A fork copies the registry lock as it is: taken by another thread (a drain,
 * an open, a close), it would stay taken in the child, whose first readiness
 * call would then wait forever. The fork takes it first, so the child gets it
 * free. A driver's own lock is never taken in a child (drain and close check
 * the generation first): its holder may be a thread the child does not have.
 */
static void fork_prepare(void) { pthread_mutex_lock(&registry_lock); }
static void fork_release(void) { pthread_mutex_unlock(&registry_lock); }
static void fork_hooks(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }

static struct driver *find_locked(int fd)
{
    for (struct driver *d = registry; d; d = d->next)
        if (d->efd == fd)
            return d;
    return NULL;
}

/* Queue one FUTEX_WAIT on the doorbell from its current value. */
static int arm_ring(struct driver *d)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);
    if (!sqe)
        return -ORBIT_EAGAIN;
    uint32_t since = orb_wait_since(d->doorbell);
    orb_wait_arm(d->doorbell);
    orb_uring_prep_futex_wait(sqe, &d->doorbell->changes, since);
    io_uring_sqe_set_data64(sqe, 1);
    int rc = io_uring_submit(&d->ring);
    if (rc < 0)
        return rc;
    d->wait_in_flight = true;
    return 0;
}

static void *driver_thread(void *arg)
{
    struct driver *d = arg;
    uint32_t since = d->open_since;   /* read in orb_readiness_open: no change is missed */
    while (!atomic_load(&d->stop)) {
        orb_wait_arm(d->doorbell);
        /* Armed before this read: a later change either shows here or wakes the futex. */
        uint32_t now = orb_wait_since(d->doorbell);
        if (now != since) {
            since = now;
            eventfd_write(d->efd, 1);   /* the counter coalesces until drained */
            continue;
        }
        struct orb_deadline forever = orb_deadline_in(-1);
        orb_futex_wait(&d->doorbell->changes, since, &forever);
    }
    return NULL;
}

static int start_driver(struct driver *d)
{
    if (orb_uring_futex_ops() && io_uring_queue_init(4, &d->ring, 0) == 0) {
        if (io_uring_register_eventfd(&d->ring, d->efd) == 0 && arm_ring(d) == 0) {
            d->use_ring = true;
            return 0;
        }
        io_uring_queue_exit(&d->ring);
    }
    d->open_since = orb_wait_since(d->doorbell);
    int rc = pthread_create(&d->thread, NULL, driver_thread, d);
    return rc ? -rc : 0;
}

int orb_readiness_open(struct orb_waitword *doorbell)
{
    if (!doorbell)
        return -ORBIT_EMALFORMED;
    pthread_once(&fork_once, fork_hooks);
    struct driver *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->doorbell = doorbell;
    d->fork_generation = orb_generation_now();
    pthread_mutex_init(&d->lock, NULL);
    d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (d->efd < 0) {
        free(d);
        return -errno;
    }
    int rc = start_driver(d);
    if (rc < 0) {
        close(d->efd);
        free(d);
        return rc;
    }
    pthread_mutex_lock(&registry_lock);
    d->next = registry;
    registry = d;
    pthread_mutex_unlock(&registry_lock);
    return d->efd;
}

static int drain_ring(struct driver *d)
{
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(&d->ring, &cqe) == 0) {
        d->wait_in_flight = false;
        io_uring_cqe_seen(&d->ring, cqe);
    }
    /* Re-arm from the current value: changes before this were covered by the caller's retry. */
    return d->wait_in_flight ? 0 : arm_ring(d);
}

int orbit_readiness_drain(int readiness_fd)
{
    pthread_mutex_lock(&registry_lock);
    struct driver *d = find_locked(readiness_fd);
    /* A parent's descriptor is refused before its lock: a parent's thread may hold it. */
    int rc = d ? orb_enter(&d->fork_generation, __func__, "readiness descriptor") : 0;
    if (d && rc == 0)
        pthread_mutex_lock(&d->lock);
    pthread_mutex_unlock(&registry_lock);
    if (!d) {
        orb_error_clear();
        return orb_fail(-ORBIT_EMALFORMED, "%s: fd %d is not a readiness descriptor of this process",
                        __func__, readiness_fd);
    }
    if (rc < 0)
        return rc;
    eventfd_t value;
    eventfd_read(d->efd, &value);   /* EAGAIN when nothing was signalled: fine */
    rc = d->use_ring ? drain_ring(d) : 0;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void orb_readiness_close(int fd)
{
    pthread_mutex_lock(&registry_lock);
    struct driver **pp = &registry, *d = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->efd == fd) {
            d = *pp;
            *pp = d->next;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    if (!d)
        return;
    bool ours = orb_handle_ours(d->fork_generation);
    if (ours)   /* in a fork child the lock may be a parent's thread's, copied taken */
        pthread_mutex_lock(&d->lock);
    if (d->use_ring) {
        /* Cancels the pending FUTEX_WAIT; in a fork child it only drops the child's references. */
        io_uring_queue_exit(&d->ring);
    } else if (ours) {   /* a fork child has no thread to stop */
        atomic_store(&d->stop, true);
        /* A spurious doorbell change gets the thread out of futex(2); harmless to others. */
        orb_wait_signal(d->doorbell, NULL);
        pthread_join(d->thread, NULL);
    }
    if (ours) {
        pthread_mutex_unlock(&d->lock);
        pthread_mutex_destroy(&d->lock);
    }
    close(d->efd);
    free(d);
}
