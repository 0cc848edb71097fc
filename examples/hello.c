/* SPDX-License-Identifier: MIT */
/* hello.c — the README's quick start: one process offers a stream, its forked child reads it. */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void must(int rc, const char *what)
{
    if (rc < 0) { fprintf(stderr, "%s: %s\n", what, orbit_last_error()); exit(1); }
}

int main(void)
{
    struct orbit_fleet *fleet; struct orbit_streams *streams; struct orbit_ticket ticket; char name[32];
    snprintf(name, sizeof name, "hello-%d", (int)getpid());         /* a fleet is named: any process may join */
    must(orbit_fleet_join(name, NULL, &fleet), "join");             /* creates the fleet, or joins it */
    must(orbit_streams_open(fleet, NULL, &streams), "open");
    uint16_t peer_node = orbit_fleet_node(fleet);                   /* the parent's node: the child offers to it */
    if (fork() == 0) {                                              /* the writer: a process of its own */
        struct orbit_fleet *f; struct orbit_streams *s; struct orbit_endpoint *a;
        must(orbit_fleet_join(name, NULL, &f), "child join");    /* handles never cross fork: join again */
        must(orbit_streams_open(f, NULL, &s), "child open");
        must(orbit_streams_create(s, &a, &ticket), "create");       /* side A here; the ticket names side B */
        must(orbit_streams_offer(s, &ticket, peer_node), "offer");  /* to the reader's node */
        must(orbit_endpoint_write_all(a, "hello", 5, 5000), "write");
        must(orbit_endpoint_finish(a), "finish");                   /* FIN: the reader sees the end */
        orbit_endpoint_wait_peer_closed(a, 5000);                   /* the reader has it all: now go */
        return 0;
    }
    struct orbit_endpoint *b; char buf[16];
    must(orbit_streams_wait_offer(streams, 5000, &ticket), "wait offer");
    must(orbit_streams_open_ticket(streams, &ticket, &b), "open ticket");
    ssize_t n = orbit_endpoint_read(b, buf, sizeof buf, 5000);
    must((int)n, "read");
    printf("got \"%.*s\"\n", (int)n, buf);
    orbit_endpoint_close(b); orbit_streams_close(streams); orbit_fleet_leave(fleet);
    wait(NULL);
    return orbit_fleet_unlink(name) == 0 ? 0 : 1;
}
