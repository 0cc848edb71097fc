/* SPDX-License-Identifier: MIT */
/*
 * c_peer.c — a C member of a fleet for the Python tests, built against the
 * installed library (pkg-config) by the tests themselves.
 *
 *   c_peer FLEET echo        join, print "node N", take one offer, echo every byte back, FIN
 *   c_peer FLEET offer NODE  join, create a stream, offer it to NODE, print "ticket T", send
 *                            "from C\n" 1000 times, FIN, read the answer to its end, print it
 *
 * Exit 0 on success; a message on stderr and exit 1 on any failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 10000

static int must(long rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "c_peer: %s: %s (%s)\n", what, orbit_strerror((int)rc), orbit_last_error());
        exit(1);
    }
    return (int)rc;
}

static void echo(struct orbit_streams *s)
{
    struct orbit_ticket t;
    must(orbit_streams_wait_offer(s, TIMEOUT_MS, &t), "wait_offer");
    struct orbit_endpoint *ep;
    must(orbit_streams_open_ticket(s, &t, &ep), "open_ticket");
    char buf[65536];
    long total = 0;
    for (;;) {
        ssize_t n = orbit_endpoint_read(ep, buf, sizeof buf, TIMEOUT_MS);
        must(n, "read");
        if (n == 0)
            break;
        must(orbit_endpoint_write_all(ep, buf, (size_t)n, TIMEOUT_MS), "write_all");
        total += n;
    }
    must(orbit_endpoint_finish(ep), "finish");
    /* The peer reads to the end before it closes: wait for that, so no byte is dropped. */
    must(orbit_endpoint_wait_peer_closed(ep, TIMEOUT_MS), "wait_peer_closed");
    printf("echoed %ld\n", total);
    orbit_endpoint_close(ep);
}

static void offer(struct orbit_streams *s, long node)
{
    struct orbit_endpoint *ep;
    struct orbit_ticket t;
    char text[64];
    must(orbit_streams_create(s, &ep, &t), "create");
    must(orbit_ticket_format(&t, text, sizeof text), "ticket_format");
    printf("ticket %s\n", text);
    fflush(stdout);
    must(orbit_streams_offer(s, &t, (uint16_t)node), "offer");
    static const char line[] = "from C\n";
    for (int i = 0; i < 1000; i++)
        must(orbit_endpoint_write_all(ep, line, sizeof line - 1, TIMEOUT_MS), "write_all");
    must(orbit_endpoint_finish(ep), "finish");
    char buf[4096];
    ssize_t n;
    printf("answer ");
    while ((n = orbit_endpoint_read(ep, buf, sizeof buf, TIMEOUT_MS)) > 0)
        fwrite(buf, 1, (size_t)n, stdout);
    must(n, "read");
    printf("\n");
    orbit_endpoint_close(ep);
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "offer") == 0 && argc < 4)) {
        fprintf(stderr, "usage: c_peer FLEET echo | c_peer FLEET offer NODE\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct orbit_fleet *f;
    struct orbit_fleet_opts opts = ORBIT_FLEET_OPTS_DEFAULT;
    opts.capacity = 16;
    must(orbit_fleet_join(argv[1], &opts, &f), "join");
    struct orbit_streams *s;
    must(orbit_streams_open(f, NULL, &s), "streams_open");
    printf("node %u\n", orbit_fleet_node(f));
    if (strcmp(argv[2], "echo") == 0)
        echo(s);
    else
        offer(s, strtol(argv[3], NULL, 10));
    orbit_streams_close(s);
    orbit_fleet_leave(f);
    return 0;
}
