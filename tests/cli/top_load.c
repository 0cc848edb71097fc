/* SPDX-License-Identifier: MIT */
/*
 * A fleet member with a steady, known load, for the orbitctl top test:
 *     top_load FLEET RATE
 * joins FLEET and, RATE times a second, reserves, accepts and completes one
 * pool unit, writes 100 bytes on a stream and reads them back, and claims and
 * releases one admission unit. It also holds what the view should show: one
 * active and one pending pool unit, 1000 unread bytes on a stream's ring,
 * 3 units of admission domain 1 (of 10), and a thread that keeps waiting on
 * a silent stream (parks). Prints "ready NODE" when all is set up, then runs
 * until killed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <orbit/orbit.h>

static const orbit_key KEY = { 0x746f702d6c6f6164ull, 0x6b65792d30303031ull };

struct load {
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    struct orbit_admission *adm;
    orbit_id res;
    struct orbit_endpoint *busy[2], *full[2], *quiet[2];
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "top_load: %s: %s\n", what, orbit_strerror(rc));
    exit(1);
}

static void pair(struct orbit_streams *s, struct orbit_endpoint *ep[2])
{
    struct orbit_ticket t;
    int rc = orbit_streams_create(s, &ep[0], &t);
    if (rc == 0)
        rc = orbit_streams_open_ticket(s, &t, &ep[1]);
    if (rc < 0)
        die("stream", rc);
}

static void setup(const char *name, struct load *l)
{
    static const struct orbit_units held[] = { { 1, 3 } };
    const struct orbit_demand d = { .claim = held, .n_claim = 1 };
    struct orbit_admit_result r;
    struct orbit_lease lease, pending;
    static struct orbit_execution ex;
    int rc;
    if ((rc = orbit_fleet_join(name, NULL, &l->f)) < 0) die("join", rc);
    if ((rc = orbit_pool_open(l->f, NULL, &l->pool)) < 0) die("pool", rc);
    if ((rc = orbit_streams_open(l->f, NULL, &l->streams)) < 0) die("streams", rc);
    if ((rc = orbit_admission_open(l->f, NULL, &l->adm)) < 0) die("admission", rc);
    if ((rc = orbit_pool_register(l->pool, KEY, 8, &l->res)) < 0) die("register", rc);
    if ((rc = orbit_pool_reserve(l->pool, l->res, &lease)) < 0 || (rc = orbit_pool_accept(l->pool, &lease, &ex)) < 0)
        die("held lease", rc);
    if ((rc = orbit_pool_reserve(l->pool, l->res, &pending)) < 0) die("pending lease", rc);
    pair(l->streams, l->busy);
    pair(l->streams, l->full);
    pair(l->streams, l->quiet);
    char fill[1000];
    memset(fill, 'x', sizeof fill);
    if ((rc = orbit_endpoint_try_write_exact(l->full[0], fill, sizeof fill)) < 0) die("fill", rc);
    if ((rc = orbit_admission_set_capacity(l->adm, 1, 10)) < 0) die("capacity", rc);
    if ((rc = orbit_admission_try_claim(l->adm, &d, &r)) < 0 || r.outcome != ORBIT_ADMIT_CLAIMED)
        die("held claim", rc < 0 ? rc : -ORBIT_EBUSY);
}

/* Waits on a stream nobody writes to, 20 times a second: it parks each time. */
static void *waiter(void *arg)
{
    struct orbit_endpoint *ep = arg;
    char c;
    for (;;)
        (void)orbit_endpoint_read(ep, &c, 1, 50);
    return NULL;
}

static void tick(struct load *l)
{
    static const struct orbit_units one[] = { { 1, 1 } };
    const struct orbit_demand d = { .claim = one, .n_claim = 1 };
    struct orbit_lease lease;
    struct orbit_execution ex;
    struct orbit_admit_result r;
    char buf[100];
    int rc;
    if ((rc = orbit_pool_reserve(l->pool, l->res, &lease)) < 0 || (rc = orbit_pool_accept(l->pool, &lease, &ex)) < 0)
        die("reserve", rc);
    orbit_execution_complete(&ex);
    memset(buf, 'y', sizeof buf);
    if ((rc = orbit_endpoint_try_write_exact(l->busy[0], buf, sizeof buf)) < 0 ||
        (rc = orbit_endpoint_try_read_exact(l->busy[1], buf, sizeof buf)) < 0)
        die("stream bytes", rc);
    if ((rc = orbit_admission_try_claim(l->adm, &d, &r)) < 0 || r.outcome != ORBIT_ADMIT_CLAIMED)
        die("claim", rc < 0 ? rc : -ORBIT_EBUSY);
    if ((rc = orbit_admission_release(l->adm, &r.claim)) < 0)
        die("release", rc);
}

int main(int argc, char **argv)
{
    struct load l = { 0 };
    char *end;
    long rate = argc == 3 ? strtol(argv[2], &end, 10) : 0;
    if (argc != 3 || *end || rate < 1 || rate > 100000) {
        fprintf(stderr, "usage: top_load FLEET RATE (1..100000 per second)\n");
        return 2;
    }
    setup(argv[1], &l);
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, l.quiet[1]) != 0)
        die("thread", -EAGAIN);
    printf("ready %u\n", orbit_fleet_node(l.f));
    fflush(stdout);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long step = 1000000000L / rate;
    for (;;) {
        tick(&l);
        next.tv_nsec += step;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }
}
