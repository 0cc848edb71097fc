/* SPDX-License-Identifier: MIT */
/*
 * exchange.c — a zero-copy exchange between two processes of a fleet.
 *
 * An exchange pairs a control stream of small events (START, DATA, FIN,
 * RESET) with a payload arena in shared memory. The sender reserves a run of
 * slots in its own lane of the arena, writes the bytes there in place and
 * commits the run as a chunk; only a descriptor travels in the DATA event.
 * The receiver validates the descriptor, reads the bytes where they lie and
 * releases the chunk, which gives the sender its credit back.
 *
 * Here a forked child (side A) sends a request: START with metadata, then
 * CHUNKS chunks built in place, then FIN. The parent (side B) checks every
 * byte and answers on the other flow with the copy forms (send_start,
 * send_data), which the child checks in turn.
 *
 *   cc -std=c11 $(pkg-config --cflags orbit) exchange.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNKS      8
#define CHUNK_BYTES (48 * 1024)   /* 12 slots of 4 KiB */
#define LANE_SLOTS  64            /* a 256 KiB lane: the 384 KiB body needs released credit */
#define TIMEOUT_MS  10000         /* no wait here is unbounded */

static struct orbit_exchange_spec spec = ORBIT_EXCHANGE_SPEC_DEFAULT;   /* both sides: the same */
static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];
static pid_t parent_pid, child_pid;

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "exchange[%d]: %s: %s\n", (int)getpid(), what, why);
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

static unsigned char pattern(size_t chunk, size_t i) { return (unsigned char)(chunk * 7 + i * 13 + (i >> 9)); }

/* Receives one flow to its FIN: START's metadata into meta, DATA into a running check. */
static size_t receive(struct orbit_exchange *x, char *meta, size_t meta_cap, bool check_pattern)
{
    size_t bytes = 0;
    for (;;) {
        struct orbit_exchange_event ev;
        must(orbit_exchange_next(x, &ev, TIMEOUT_MS), "next event");
        if (ev.type == ORBIT_EXCHANGE_FIN)
            return bytes;
        expect(ev.type != ORBIT_EXCHANGE_RESET, "no RESET");
        const unsigned char *p = ev.chunk.data;   /* in the arena: read in place */
        if (ev.type == ORBIT_EXCHANGE_START) {
            expect(ev.chunk.len < meta_cap, "metadata that fits");
            memcpy(meta, p, ev.chunk.len);
            meta[ev.chunk.len] = '\0';
        } else {
            for (size_t i = 0; check_pattern && i < ev.chunk.len; i++)
                expect(p[i] == pattern(ev.chunk_id - 2, i), "every byte of every chunk");
            bytes += ev.chunk.len;
        }
        orbit_chunk_release(&ev.chunk);           /* the producer's credit returns */
    }
}

/* The child: side A. Sends the request in place, then reads the answer. */
static void side_a(uint16_t peer_node)
{
    struct orbit_fleet *fleet;
    struct orbit_exchanges *xs;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_exchanges_open(fleet, &spec, &xs), "exchanges open");
    struct orbit_exchange *a;
    struct orbit_ticket ticket;
    must(orbit_exchange_create(xs, &a, &ticket), "create");
    must(orbit_exchanges_offer(xs, &ticket, peer_node), "offer");

    const char meta[] = "PUT /blob";
    struct orbit_reservation res;
    must(orbit_exchange_reserve(a, sizeof meta, TIMEOUT_MS, &res), "reserve metadata");
    memcpy(res.data, meta, sizeof meta - 1);
    must(orbit_exchange_start(a, &res, sizeof meta - 1, TIMEOUT_MS), "start");  /* chunk id 1 */
    for (size_t c = 0; c < CHUNKS; c++) {
        /* Waits for credit while the receiver has not released enough yet. */
        must(orbit_exchange_reserve(a, CHUNK_BYTES, TIMEOUT_MS, &res), "reserve");
        unsigned char *p = res.data;              /* the bytes are built where they will be read */
        for (size_t i = 0; i < CHUNK_BYTES; i++)
            p[i] = pattern(c, i);
        must(orbit_exchange_data(a, &res, CHUNK_BYTES, TIMEOUT_MS), "data");    /* ids 2.. */
    }
    must(orbit_exchange_finish(a, TIMEOUT_MS), "finish");

    char answer[64];
    size_t n = receive(a, answer, sizeof answer, false);
    expect(strcmp(answer, "201 Created") == 0 && n == 2, "the parent's answer");
    struct orbit_arena_stats st;
    orbit_arena_stats(orbit_exchanges_arena(xs, ORBIT_FLOW_A_TO_B), &st);
    printf("child: %d KiB sent through a %d KiB lane (%llu credit waits); answer \"%s\" + %zu bytes\n",
           CHUNKS * CHUNK_BYTES / 1024, LANE_SLOTS * 4, (unsigned long long)st.parks, answer, n);
    orbit_exchange_close(a);
    orbit_exchanges_close(xs);
    orbit_fleet_leave(fleet);
    exit(0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* parent and child lines in order */
    parent_pid = getpid();
    snprintf(fleet_name, sizeof fleet_name, "ex-exchange-%d", (int)parent_pid);
    orbit_fleet_unlink(fleet_name);     /* a leftover of a killed run that had our pid */
    atexit(cleanup);
    spec.a_to_b.slots_per_lane = LANE_SLOTS;   /* set before the fork: the child shares it */

    struct orbit_fleet *fleet;
    struct orbit_exchanges *xs;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_exchanges_open(fleet, &spec, &xs), "exchanges open");
    uint16_t my_node = orbit_fleet_node(fleet);

    child_pid = fork();
    expect(child_pid >= 0, "fork to succeed");
    if (child_pid == 0)
        side_a(my_node);        /* joins as its own node; never touches our handles */

    struct orbit_ticket ticket;
    must(orbit_exchanges_wait_offer(xs, TIMEOUT_MS, &ticket), "wait offer");
    struct orbit_exchange *b;
    must(orbit_exchange_open(xs, &ticket, &b), "open");

    char meta[64];
    size_t n = receive(b, meta, sizeof meta, true);
    expect(strcmp(meta, "PUT /blob") == 0, "the request's metadata");
    expect(n == (size_t)CHUNKS * CHUNK_BYTES, "every chunk");
    struct orbit_arena_stats st;
    orbit_arena_stats(orbit_exchanges_arena(xs, ORBIT_FLOW_A_TO_B), &st);
    expect(st.consumed == CHUNKS + 1, "metadata and every chunk taken from the arena");
    printf("parent: \"%s\" + %zu bytes in %llu chunks, read in place\n", meta, n,
           (unsigned long long)st.consumed);

    /* The answer, with the copy forms: reserve + memcpy + commit in one call each. */
    must(orbit_exchange_send_start(b, "201 Created", 11, TIMEOUT_MS), "send start");
    must(orbit_exchange_send_data(b, "ok", 2, TIMEOUT_MS), "send data");
    must(orbit_exchange_finish(b, TIMEOUT_MS), "finish");

    int status;
    expect(waitpid(child_pid, &status, 0) == child_pid, "the child to exit");
    child_pid = 0;
    expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child to succeed");

    orbit_exchange_close(b);
    orbit_exchanges_close(xs);
    orbit_fleet_leave(fleet);
    printf("exchange: ok\n");
    return 0;   /* cleanup() unlinks the fleet */
}
