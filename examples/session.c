/* SPDX-License-Identifier: MIT */
/*
 * session.c — a pool lease carried to its owner in an exchange: a session.
 *
 * The parent owns a resource (say, an upstream connection) registered in the
 * pool. A forked child acquires it (the policy picks the parent's resource
 * and reserves its unit), then opens a session: an exchange whose START
 * carries the lease, offered to the owner's node. The owner waits for the
 * session, which accepts the lease exactly once before any byte of the
 * request is exposed, serves the request on the resource and answers. Ending
 * the session completes the lease: the unit is free again.
 *
 *   cc -std=c11 $(pkg-config --cflags orbit) session.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIMEOUT_MS 10000          /* no wait here is unbounded */
/* The key: the caller's own 128-bit digest of what the resource is good for. */
static const orbit_key key = { .lo = 0x7570737472, .hi = 2 };

static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];
static pid_t parent_pid, child_pid;

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "session[%d]: %s: %s\n", (int)getpid(), what, why);
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

/* One flow's bytes (START's metadata, then DATA) until FIN, as a string. */
static void read_body(struct orbit_exchange *x, char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        struct orbit_exchange_event ev;
        must(orbit_exchange_next(x, &ev, TIMEOUT_MS), "next");
        if (ev.type == ORBIT_EXCHANGE_FIN)
            break;
        expect(ev.type != ORBIT_EXCHANGE_RESET && ev.chunk.len < cap - len, "data that fits");
        memcpy(buf + len, ev.chunk.data, ev.chunk.len);   /* START's metadata, or DATA */
        len += ev.chunk.len;
        orbit_chunk_release(&ev.chunk);
    }
    buf[len] = '\0';
}

/* The child: acquire the resource, send a request in a session, read the answer. */
static void user(void)
{
    struct orbit_fleet *fleet; struct orbit_pool *pool; struct orbit_exchanges *xs;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_pool_open(fleet, NULL, &pool), "pool open");
    must(orbit_exchanges_open(fleet, NULL, &xs), "exchanges open");

    struct orbit_plan plan;     /* default policy: local first, else the least used remote */
    must(orbit_pool_acquire(pool, key, NULL, NULL, &plan), "acquire");
    expect(plan.kind == ORBIT_PLAN_REMOTE_REUSE, "a lease on the parent's resource");
    struct orbit_exchange *a;   /* START carries the lease; side B is offered to its owner */
    must(orbit_exchange_open_session(xs, &plan.lease, "GET /", 5, TIMEOUT_MS, &a), "open session");
    must(orbit_exchange_send_data(a, "request body", 12, TIMEOUT_MS), "send");
    must(orbit_exchange_finish(a, TIMEOUT_MS), "finish");

    char answer[64];
    read_body(a, answer, sizeof answer);
    expect(strcmp(answer, "200 OK served on the resource") == 0, "the owner's answer");
    printf("user: answer \"%s\"\n", answer);
    orbit_exchange_close(a);
    orbit_exchanges_close(xs);
    orbit_pool_close(pool);
    orbit_fleet_leave(fleet);
    exit(0);
}

/* The resource's reserved and active units, as every member sees them. */
static void counts(struct orbit_pool *pool, uint32_t reserved, uint32_t active, const char *what)
{
    struct orbit_candidate c;
    expect(orbit_pool_candidates(pool, key, &c, 1) == 1 && c.reserved == reserved &&
           c.active == active, what);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* parent and child lines in order */
    parent_pid = getpid();
    snprintf(fleet_name, sizeof fleet_name, "ex-session-%d", (int)parent_pid);
    orbit_fleet_unlink(fleet_name);     /* a leftover of a killed run that had our pid */
    atexit(cleanup);

    struct orbit_fleet *fleet; struct orbit_pool *pool; struct orbit_exchanges *xs;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_pool_open(fleet, NULL, &pool), "pool open");
    must(orbit_exchanges_open(fleet, NULL, &xs), "exchanges open");
    orbit_id id;
    must(orbit_pool_register(pool, key, 1, &id), "register");   /* one unit: exclusive */

    expect((child_pid = fork()) >= 0, "fork to succeed");
    if (child_pid == 0)         /* joins as its own node; never touches our handles */
        user();

    /* The offer, side B and the lease's accept in one call; then the metadata is ours. */
    struct orbit_session s;
    must(orbit_exchange_wait_session(xs, pool, TIMEOUT_MS, &s), "wait session");
    expect(s.execution.lease.id == id, "a lease on our resource");
    counts(pool, 0, 1, "reserved 0, active 1 once accepted");
    char request[64];
    read_body(s.exchange, request, sizeof request);
    expect(s.metadata.len == 5 && memcmp(s.metadata.data, "GET /", 5) == 0, "the metadata");
    expect(strcmp(request, "request body") == 0, "the request's body");
    printf("owner: session on lease fence %llu: GET / + \"%s\"\n",
           (unsigned long long)s.execution.lease.fence, request);

    must(orbit_exchange_send_start(s.exchange, "200 OK ", 7, TIMEOUT_MS), "answer");
    must(orbit_exchange_send_data(s.exchange, "served on the resource", 22, TIMEOUT_MS), "answer");
    must(orbit_exchange_finish(s.exchange, TIMEOUT_MS), "finish");
    int status;                 /* the user has read it all once it exits */
    expect(waitpid(child_pid, &status, 0) == child_pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0, "the user to succeed");
    child_pid = 0;
    orbit_session_end(&s);      /* metadata released, lease completed, exchange closed */
    counts(pool, 0, 0, "the unit free again after the session");

    must(orbit_pool_unregister(pool, id), "unregister");
    orbit_exchanges_close(xs);
    orbit_pool_close(pool);
    orbit_fleet_leave(fleet);
    printf("session: ok\n");
    return 0;   /* cleanup() unlinks the fleet */
}
