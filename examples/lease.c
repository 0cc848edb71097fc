/* SPDX-License-Identifier: MIT */
/*
 * lease.c — one resource leased across two processes through the fleet's pool.
 *
 * The parent owns a resource (think: an upstream connection it opened) and
 * registers it in the pool under a key, with capacity 1. A forked child, a
 * member of the same fleet, finds it, reserves its unit (one compare-and-swap)
 * and hands the lease to the owner over a pipe. The owner accepts the lease
 * (exactly once), does the work and completes it: the unit comes back and the
 * key's waiters wake. The child, parked on the key, sees the unit free again.
 * The pool's own counts (reserved, active) are checked at every step.
 *
 *   cc -std=c11 $(pkg-config --cflags orbit) lease.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];
static pid_t parent_pid, child_pid;
#define TIMEOUT_MS 10000     /* no wait here is unbounded */
/* The key: the caller's own 128-bit digest of what the resource is good for. */
static const orbit_key key = { .lo = 0x6c65617365, .hi = 1 };

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "lease[%d]: %s: %s\n", (int)getpid(), what, why);
    exit(1);
}
/* orbit calls return 0 (or a count) or a negated ORBIT_E* code. */
static int must(int rc, const char *what) { if (rc < 0) die(what, orbit_strerror(rc)); return rc; }
static void expect(bool ok, const char *what) { if (!ok) die("expected", what); }

/* At exit the parent stops a child still running and removes the fleet's segments. */
static void cleanup(void)
{
    if (getpid() != parent_pid)
        return;
    if (child_pid > 0 && kill(child_pid, SIGKILL) == 0)
        waitpid(child_pid, NULL, 0);
    orbit_fleet_unlink(fleet_name);
}

/* The resource's counts as every member sees them (a snapshot). */
static struct orbit_candidate look(struct orbit_pool *pool)
{
    struct orbit_candidate c;
    expect(must((int)orbit_pool_candidates(pool, key, &c, 1), "candidates") == 1, "one candidate");
    return c;
}

/* The user: reserve the unit, hand the lease to its owner, wait for the unit to return. */
static void user(int to_owner)
{
    struct orbit_fleet *fleet;
    struct orbit_pool *pool;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");   /* its own node */
    must(orbit_pool_open(fleet, NULL, &pool), "pool open");

    struct orbit_candidate c = look(pool);
    expect(!c.local && c.reserved == 0 && c.active == 0, "a free remote resource");
    uint32_t version;
    must(orbit_pool_version(pool, key, &version), "version");    /* before the reserve */
    struct orbit_lease lease;
    must(orbit_pool_reserve(pool, c.id, &lease), "reserve");
    expect(look(pool).reserved == 1, "reserved 1 after reserve");
    struct orbit_lease second;
    expect(orbit_pool_reserve(pool, c.id, &second) == -ORBIT_EBUSY, "capacity 1: EBUSY");

    /* A lease is plain data: any channel carries it to the owner. */
    expect(write(to_owner, &lease, sizeof lease) == (ssize_t)sizeof lease, "lease sent");

    /* Park on the key until the owner completes; a change may be spurious: re-check. */
    for (c = look(pool); c.reserved + c.active != 0; c = look(pool))
        must(orbit_pool_wait_capacity(pool, key, version, TIMEOUT_MS, &version), "wait capacity");
    printf("user: unit back (reserved 0, active 0)\n");

    orbit_pool_close(pool);
    orbit_fleet_leave(fleet);
    exit(0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* parent and child lines in order */
    parent_pid = getpid();
    snprintf(fleet_name, sizeof fleet_name, "ex-lease-%d", (int)parent_pid);
    orbit_fleet_unlink(fleet_name);     /* a leftover of a killed run that had our pid */
    atexit(cleanup);

    /* The owner joins the fleet and registers its resource under the key. */
    struct orbit_fleet *fleet;
    struct orbit_pool *pool;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_pool_open(fleet, NULL, &pool), "pool open");
    orbit_id id;
    must(orbit_pool_register(pool, key, 1, &id), "register");

    int pipefd[2];
    expect(pipe(pipefd) == 0, "a pipe");
    child_pid = fork();
    expect(child_pid >= 0, "fork to succeed");
    if (child_pid == 0) {       /* the child never touches the parent's handles */
        close(pipefd[0]);
        user(pipefd[1]);
    }
    close(pipefd[1]);

    struct orbit_lease lease;
    expect(read(pipefd[0], &lease, sizeof lease) == (ssize_t)sizeof lease, "a lease from the user");
    expect(lease.id == id, "the lease names our resource");

    struct orbit_execution exec;
    must(orbit_pool_accept(pool, &lease, &exec), "accept");
    struct orbit_candidate c = look(pool);
    expect(c.reserved == 0 && c.active == 1, "reserved 0, active 1 after accept");
    struct orbit_execution again;
    expect(orbit_pool_accept(pool, &lease, &again) == -ORBIT_ENOTRESERVED, "accept once only");
    printf("owner: accepted lease fence %llu from node %u\n",
           (unsigned long long)lease.fence, (unsigned)lease.holder);

    /* ... the work the lease was for happens here ... */
    orbit_execution_complete(&exec);          /* the unit returns; the key's waiters wake */
    c = look(pool);
    expect(c.reserved == 0 && c.active == 0, "reserved 0, active 0 after complete");

    int status;
    expect(waitpid(child_pid, &status, 0) == child_pid, "the user to exit");
    child_pid = 0;
    expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the user to succeed");

    /* A real owner also reconciles on a timer (every few seconds): a reservation whose
     * holder lives on and never brings it is aged out after grace_ms. One that dies or
     * leaves gives its reservations back by itself. active: executions still running. */
    must(orbit_pool_reconcile(pool, id, 0, 5000), "reconcile");
    must(orbit_pool_unregister(pool, id), "unregister");
    orbit_pool_close(pool);
    orbit_fleet_leave(fleet);
    printf("lease: ok\n");
    return 0;   /* cleanup() unlinks the fleet */
}
