/* SPDX-License-Identifier: MIT */
/*
 * A fleet member for the upgrade tests, built three ways: against this
 * library, against the test build of "another release" (liborbit-bumped: one
 * layout reads 100 higher) and, by test_roll at run time, against the previous
 * release of the library (a commit that knows no generations). So it uses
 * only what that release has; what only this one has is under
 * ORBIT_GENERATION_AUTO.
 *
 *   upgrade_member join FLEET GENERATION   join, say so, hold the node until stdin ends
 *   upgrade_member serve FLEET [self|reaper]  a pool + streams + admission workload until
 *                                          SIGTERM; self (the default): it reaps its
 *                                          generation's dead as it goes, as a server's
 *                                          supervisor would; reaper: it leaves that to one
 *   upgrade_member check FLEET NODE INC    wait until that life is reported and nothing of
 *                                          it is left in any table
 *
 * It prints one line when it has joined: "joined NAME GENERATION NODE INCARNATION",
 * or "refused CODE SENTENCE"; serve prints "done OPS FAILED REAPED" when it stops.
 * Exit status 0 when every operation succeeded.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <orbit/orbit.h>

#define CAPACITY     16        /* nodes: old and new members both fit, in their own generations */
#define UNITS        4         /* the admission domain's capacity: members contend for it */
#define DOMAIN       1
#define WAIT_MS      5000      /* the longest any one operation may wait */
#define REAP_EVERY   16        /* iterations between two liveness sweeps */

static volatile sig_atomic_t stopping;
static unsigned long failures;
static bool self_reap = true;   /* serve: this member reports its generation's dead */

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

/* An operation that did not succeed: said on stderr (the first few), counted. */
static void failed(const char *what, int rc)
{
    if (failures++ < 8)
        fprintf(stderr, "upgrade_member %d: %s: %s (%s)\n", (int)getpid(), what, orbit_strerror(rc),
                orbit_last_error());
}

static uint32_t generation_of(struct orbit_fleet *f)
{
#ifdef ORBIT_GENERATION_AUTO
    return orbit_fleet_generation(f);
#else
    (void)f;
    return 1;   /* a release before generations has its fleet's one */
#endif
}

static int join(const char *name, unsigned long generation, struct orbit_fleet **f)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
#ifdef ORBIT_GENERATION_AUTO
    o.generation = (uint32_t)generation;
#else
    if (generation != 0) {
        printf("refused %d this release has no generations\n", -EINVAL);
        return -EINVAL;
    }
#endif
    int rc = orbit_fleet_join(name, &o, f);
    if (rc < 0)
        printf("refused %d %s\n", rc, orbit_last_error());
    else
        printf("joined %s %u %u %llu\n", orbit_fleet_name(*f), generation_of(*f), orbit_fleet_node(*f),
               (unsigned long long)orbit_fleet_incarnation(*f));
    fflush(stdout);
    return rc;
}

static int cmd_join(const char *name, unsigned long generation)
{
    struct orbit_fleet *f;
    if (join(name, generation, &f) < 0)
        return 3;
    char c;
    while (read(STDIN_FILENO, &c, 1) > 0)
        ;
    orbit_fleet_leave(f);
    return 0;
}

/* ---- serve: the workload ---------------------------------------------------------- */

struct member {
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    struct orbit_admission *adm;
    orbit_id resource;
    unsigned long ops, reaped;
};

static const orbit_key KEY = { 0x7570677261646521ull, 0x6d656d6265722121ull };

/* Reserve a unit of our resource, accept the lease as its owner, complete it. */
static void pool_round(struct member *m)
{
    struct orbit_lease lease;
    struct orbit_execution ex;
    int rc = orbit_pool_reserve(m->pool, m->resource, &lease);
    if (rc == 0 && (rc = orbit_pool_accept(m->pool, &lease, &ex)) == 0)
        orbit_execution_complete(&ex);
    if (rc < 0)
        failed("pool reserve/accept", rc);
    else
        m->ops++;
}

/* A stream offered to our own node, taken, and a frame each way through the generation's ring. */
static void stream_round(struct member *m)
{
    struct orbit_endpoint *a = NULL, *b = NULL;
    struct orbit_ticket ticket, taken;
    char out[64], in[64];
    memset(out, (int)(m->ops & 0xff), sizeof out);
    int rc = orbit_streams_create(m->streams, &a, &ticket);
    if (rc == 0)
        rc = orbit_streams_offer(m->streams, &ticket, orbit_fleet_node(m->f));
    if (rc == 0)
        rc = orbit_streams_take_offer(m->streams, &taken);
    if (rc == 0)
        rc = orbit_streams_open_ticket(m->streams, &taken, &b);
    if (rc == 0)
        rc = orbit_endpoint_write_all(a, out, sizeof out, WAIT_MS);
    if (rc == 0)
        rc = orbit_endpoint_read_exact(b, in, sizeof in, WAIT_MS);
    if (rc == 0 && memcmp(in, out, sizeof in) != 0)
        rc = -EBADMSG;
    if (rc == 0)
        rc = orbit_endpoint_write_all(b, in, sizeof in, WAIT_MS);
    if (rc == 0)
        rc = orbit_endpoint_read_exact(a, out, sizeof out, WAIT_MS);
    if (rc == 0)
        rc = orbit_endpoint_finish(a);
    if (rc == 0)
        rc = orbit_endpoint_finish(b);
    if (a)
        orbit_endpoint_close(a);
    if (b)
        orbit_endpoint_close(b);
    if (rc < 0)
        failed("stream round trip", rc);
    else
        m->ops++;
}

/* One unit of the shared domain: claimed at once, or after the releases of others (or of the dead). */
static void admission_round(struct member *m)
{
    struct orbit_units u = { DOMAIN, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = orbit_admission_try_claim(m->adm, &d, &r);
        if (rc < 0) {
            failed("admission claim", rc);
            return;
        }
        if (r.outcome == ORBIT_ADMIT_CLAIMED)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (r.outcome != ORBIT_ADMIT_DEFERRED || waited > WAIT_MS) {
            failed("admission claim (not granted)", -ETIMEDOUT);
            return;
        }
        rc = orbit_admission_wait(m->adm, r.release_epoch, 50, NULL);
        if (rc < 0 && rc != -ORBIT_ETIMEDOUT) {
            failed("admission wait", rc);
            return;
        }
        if (rc == -ORBIT_ETIMEDOUT && self_reap) {
            int n = orbit_fleet_reap(m->f);   /* a holder may have died: its units come back */
            m->reaped += n > 0 ? (unsigned long)n : 0;
        }
    }
    int rc = orbit_admission_release(m->adm, &r.claim);
    if (rc < 0)
        failed("admission release", rc);
    else
        m->ops++;
}

static int serve_open(struct member *m, const char *name)
{
    int rc;
    if (join(name, 0, &m->f) < 0)
        return -1;
    if ((rc = orbit_pool_open(m->f, NULL, &m->pool)) < 0 ||
        (rc = orbit_pool_register(m->pool, KEY, UNITS, &m->resource)) < 0 ||
        (rc = orbit_streams_open(m->f, NULL, &m->streams)) < 0 ||
        (rc = orbit_admission_open(m->f, NULL, &m->adm)) < 0 ||
        (rc = orbit_admission_set_capacity(m->adm, DOMAIN, UNITS)) < 0) {
        failed("open", rc);
        return -1;
    }
    return 0;
}

static int cmd_serve(const char *name)
{
    struct member m = { 0 };
    struct sigaction sa = { .sa_handler = on_term };
    sigaction(SIGTERM, &sa, NULL);
    if (serve_open(&m, name) < 0)
        return 3;
    for (unsigned long i = 0; !stopping; i++) {
        pool_round(&m);
        stream_round(&m);
        admission_round(&m);
        if (self_reap && i % REAP_EVERY == 0) {
            int n = orbit_fleet_reap(m.f);   /* this generation's supervisor, as a server's would be */
            if (n < 0)
                failed("reap", n);
            m.reaped += n > 0 ? (unsigned long)n : 0;
        }
        struct timespec pause = { 0, 2000000 };   /* a paced workload: the host has two CPUs for everyone */
        nanosleep(&pause, NULL);
    }
    int rc = orbit_pool_unregister(m.pool, m.resource);
    if (rc < 0)
        failed("pool unregister", rc);
    orbit_admission_close(m.adm);
    orbit_streams_close(m.streams);
    orbit_pool_close(m.pool);
    orbit_fleet_leave(m.f);
    printf("done %lu %lu %lu\n", m.ops, failures, m.reaped);
    fflush(stdout);
    return failures ? 1 : 0;
}

/* ---- check: a death given back --------------------------------------------------- */

static bool life_claimed(struct orbit_fleet *f, uint16_t node, uint64_t inc)
{
    struct orbit_node_info ni[CAPACITY];
    ssize_t n = orbit_fleet_nodes(f, ni, CAPACITY);
    for (ssize_t i = 0; i < n && i < CAPACITY; i++)
        if (ni[i].node == node && ni[i].incarnation == inc)
            return true;
    return false;
}

static int cmd_check(const char *name, unsigned long node, unsigned long long inc)
{
    struct orbit_fleet *f;
    int rc = orbit_fleet_observe(name, &f);
    if (rc < 0) {
        fprintf(stderr, "upgrade_member check: observe %s: %s (%s)\n", name, orbit_strerror(rc), orbit_last_error());
        return 1;
    }
    bool claimed = true;
    for (int tries = 0; tries < 500 && (claimed = life_claimed(f, (uint16_t)node, inc)); tries++) {
        struct timespec pause = { 0, 10000000 };
        nanosleep(&pause, NULL);
    }
    struct orbit_reclaim held;
    rc = orbit_fleet_account(f, (uint16_t)node, inc, &held);
    bool empty = rc == 0 && held.tables > 0 && !held.pool_resources && !held.pool_leases && !held.pool_creating &&
                 !held.pool_reserved && !held.stream_sides && !held.admission_claims && !held.arena_chunks;
    printf("%s %s node %lu: %s; %u tables, %u resources, %u sides, %u claims\n", empty && !claimed ? "reclaimed"
           : "held", name, node, claimed ? "still claimed" : "reported", held.tables, held.pool_resources,
           held.stream_sides, held.admission_claims);
    orbit_fleet_leave(f);
    return empty && !claimed ? 0 : 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "join") == 0)
        return cmd_join(argv[2], strtoul(argv[3], NULL, 0));
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "serve") == 0) {
        self_reap = argc == 3 || strcmp(argv[3], "reaper") != 0;
        return cmd_serve(argv[2]);
    }
    if (argc == 5 && strcmp(argv[1], "check") == 0)
        return cmd_check(argv[2], strtoul(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    fprintf(stderr, "usage: upgrade_member join FLEET GENERATION | serve FLEET [self|reaper] | check FLEET NODE INC\n");
    return 2;
}
