/* SPDX-License-Identifier: MIT */
/*
 * stream.c — a byte stream between two processes of a fleet.
 *
 * The parent joins the fleet and forks a child. The child creates a stream
 * (it holds side A and gets a ticket for side B) and offers it to the
 * parent's node; the parent takes the offer and opens the ticket. The child
 * sends a body four times the ring's size (so writes wait for room) and
 * finishes (FIN); the parent reads until the clean end, checks every byte and
 * answers on the other direction, which the child checks in turn.
 *
 *   cc -std=c11 $(pkg-config --cflags orbit) stream.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BODY_BYTES (4 * 65536)   /* four rings' worth (ORBIT_STREAM_SPEC_DEFAULT) */
#define TIMEOUT_MS 10000         /* no wait here is unbounded */

static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];
static pid_t parent_pid, child_pid;
static unsigned char body[BODY_BYTES];

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "stream[%d]: %s: %s\n", (int)getpid(), what, why);
    exit(1);
}
/* orbit calls return 0 (or a count) or a negated ORBIT_E* code. */
static long must(long rc, const char *what) { if (rc < 0) die(what, orbit_strerror((int)rc)); return rc; }
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

/* Reads until FIN (read returns 0); returns the byte count. */
static size_t read_to_end(struct orbit_endpoint *e, unsigned char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        long n = must(orbit_endpoint_read(e, buf + got, cap - got, TIMEOUT_MS), "read");
        if (n == 0)
            return got;
        got += (size_t)n;
        expect(got < cap, "no more than the buffer holds");
    }
}

/* The child: side A. Creates the stream, offers it to peer_node, sends, reads the answer. */
static void side_a(uint16_t peer_node)
{
    /* README: begin */
    struct orbit_fleet *fleet;                                  /* join (or create) the fleet */
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    struct orbit_streams *streams;
    must(orbit_streams_open(fleet, NULL, &streams), "open");
    struct orbit_endpoint *a; struct orbit_ticket ticket;
    must(orbit_streams_create(streams, &a, &ticket), "create");         /* side A; ticket for B */
    must(orbit_streams_offer(streams, &ticket, peer_node), "offer");    /* peer: wait_offer, open_ticket */
    must(orbit_endpoint_write_all(a, "hello", 5, TIMEOUT_MS), "write"); /* waits while the ring is full */
    /* README: end */

    must(orbit_endpoint_write_all(a, body, sizeof body, TIMEOUT_MS), "write body");
    must(orbit_endpoint_finish(a), "finish");       /* FIN: the reader drains, then reads 0 */

    char answer[64], want[64];
    size_t n = read_to_end(a, (unsigned char *)answer, sizeof answer - 1);
    answer[n] = '\0';
    snprintf(want, sizeof want, "got %zu bytes", 5 + sizeof body);
    expect(strcmp(answer, want) == 0, "the parent's answer");
    printf("child: parent answered \"%s\"\n", answer);

    orbit_endpoint_close(a);
    orbit_streams_close(streams);
    orbit_fleet_leave(fleet);
    exit(0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* parent and child lines in order */
    parent_pid = getpid();
    snprintf(fleet_name, sizeof fleet_name, "ex-stream-%d", (int)parent_pid);
    orbit_fleet_unlink(fleet_name);     /* a leftover of a killed run that had our pid */
    atexit(cleanup);
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (unsigned char)(i * 131 + (i >> 8));   /* a pattern a lost byte would break */

    struct orbit_fleet *fleet;
    struct orbit_streams *streams;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_streams_open(fleet, NULL, &streams), "open");
    uint16_t my_node = orbit_fleet_node(fleet);

    child_pid = fork();
    expect(child_pid >= 0, "fork to succeed");
    if (child_pid == 0)
        side_a(my_node);        /* joins as its own node; never touches our handles */

    /* Side B: take the offer made to this node and hold the side its ticket names. */
    struct orbit_ticket ticket;
    must(orbit_streams_wait_offer(streams, TIMEOUT_MS, &ticket), "wait offer");
    struct orbit_endpoint *b;
    must(orbit_streams_open_ticket(streams, &ticket, &b), "open ticket");

    static unsigned char got[5 + BODY_BYTES + 1];
    size_t n = read_to_end(b, got, sizeof got);
    expect(n == 5 + sizeof body, "every byte");
    expect(memcmp(got, "hello", 5) == 0 && memcmp(got + 5, body, sizeof body) == 0,
           "the bytes in order");
    printf("parent: read %zu bytes and FIN\n", n);

    char answer[64];
    int len = snprintf(answer, sizeof answer, "got %zu bytes", n);
    must(orbit_endpoint_write_all(b, answer, (size_t)len, TIMEOUT_MS), "answer");
    must(orbit_endpoint_finish(b), "finish");

    int status;
    expect(waitpid(child_pid, &status, 0) == child_pid, "the child to exit");
    child_pid = 0;
    expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child to succeed");

    orbit_endpoint_close(b);
    orbit_streams_close(streams);
    orbit_fleet_leave(fleet);
    printf("stream: ok\n");
    return 0;   /* cleanup() unlinks the fleet */
}
