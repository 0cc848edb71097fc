/* SPDX-License-Identifier: MIT */
/*
 * stream_peer.c — the C side of tests/multiprocess.rs: a process that holds side
 * B of a stream a Rust process created.
 *
 *   stream_peer FLEET TICKET
 *
 * Joins FLEET, opens TICKET, reads until FIN while checking the pattern the
 * Rust side writes (byte i = i * 131 + (i >> 8)), then answers "got N bytes"
 * followed by N bytes of the same pattern, and finishes. Exit 0 on success.
 */
#define _GNU_SOURCE
#include <orbit/orbit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 20000

static long must(long rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "stream_peer: %s: %s (%s)\n", what, orbit_strerror((int)rc), orbit_last_error());
        exit(1);
    }
    return rc;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 8)); }

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stream_peer FLEET TICKET\n");
        return 2;
    }
    struct orbit_fleet *fleet;
    struct orbit_streams *streams;
    struct orbit_ticket ticket;
    struct orbit_endpoint *b;
    must(orbit_fleet_join(argv[1], NULL, &fleet), "join");
    must(orbit_streams_open(fleet, NULL, &streams), "open");
    must(orbit_ticket_parse(argv[2], &ticket), "parse ticket");
    must(orbit_streams_open_ticket(streams, &ticket, &b), "open ticket");

    static unsigned char buf[65536];
    size_t total = 0;
    for (;;) {
        long n = must(orbit_endpoint_read(b, buf, sizeof buf, TIMEOUT_MS), "read");
        if (n == 0)
            break;
        for (long i = 0; i < n; i++)
            if (buf[i] != pattern(total + (size_t)i)) {
                fprintf(stderr, "stream_peer: byte %zu differs\n", total + (size_t)i);
                return 1;
            }
        total += (size_t)n;
    }
    char head[64];
    int len = snprintf(head, sizeof head, "got %zu bytes\n", total);
    must(orbit_endpoint_write_all(b, head, (size_t)len, TIMEOUT_MS), "write head");
    for (size_t done = 0; done < total;) {
        size_t n = total - done < sizeof buf ? total - done : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(done + i);
        must(orbit_endpoint_write_all(b, buf, n, TIMEOUT_MS), "write body");
        done += n;
    }
    must(orbit_endpoint_finish(b), "finish");
    /* Wait until the Rust side has read everything and closed its side. */
    must(orbit_endpoint_wait_peer_closed(b, TIMEOUT_MS), "wait for the reader to close");
    orbit_endpoint_close(b);
    orbit_streams_close(streams);
    orbit_fleet_leave(fleet);
    return 0;
}
