/* SPDX-License-Identifier: MIT */
/*
 * peer_death.c — learn of a peer's death in your own io_uring, with no reaper.
 * The parent takes a stream a forked child offers, and arms two waits in one
 * ring: the stream readable, and the child's death (orbit_fleet_prep_wait_node_death
 * on the node and incarnation orbit_endpoint_peer names). After the first
 * bytes it kills the child with -9: the death completes in the ring (the
 * kernel releases the child's lock; nothing polls), the loop reports it with
 * orbit_fleet_reap, and the stream then reads RESET.
 * Without io_uring futex ops (or ORBIT_DISABLE_URING_FUTEX=1) the same wait is
 * the blocking orbit_fleet_wait_node_death.
 *   cc -std=c11 $(pkg-config --cflags orbit) peer_death.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/uring.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 10000
enum { TAG_READABLE = 1, TAG_DEATH = 2 };
static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];

static _Noreturn void die(const char *what, int rc)
{
    fprintf(stderr, "peer_death: %s: %s (%s)\n", what, orbit_strerror(rc), orbit_last_error());
    _exit(1);
}
static int must(int rc, const char *what) { if (rc < 0) die(what, rc); return rc; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The child: its own node (a handle never crosses fork), one stream offered, bytes, then sleep. */
static _Noreturn void child(uint16_t parent_node)
{
    struct orbit_fleet *fleet; struct orbit_streams *streams;
    struct orbit_endpoint *a; struct orbit_ticket ticket;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "child join");
    must(orbit_streams_open(fleet, NULL, &streams), "child open");
    must(orbit_streams_create(streams, &a, &ticket), "create");
    must(orbit_streams_offer(streams, &ticket, parent_node), "offer");
    must(orbit_endpoint_write_all(a, "hello", 5, TIMEOUT_MS), "write");
    for (;;)
        pause();   /* until killed: it never finishes its stream */
}

int main(void)
{
    snprintf(fleet_name, sizeof fleet_name, "ex-death-%d", (int)getpid());
    struct orbit_fleet *fleet; struct orbit_streams *streams; struct orbit_endpoint *b;
    struct orbit_ticket ticket; struct orbit_owner peer; char buf[16];
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_streams_open(fleet, NULL, &streams), "open");
    pid_t pid = fork();
    if (pid == 0)
        child(orbit_fleet_node(fleet));
    must(orbit_streams_wait_offer(streams, TIMEOUT_MS, &ticket), "wait offer");
    must(orbit_streams_open_ticket(streams, &ticket, &b), "open ticket");
    must(orbit_endpoint_peer(b, &peer), "peer");
    ssize_t n = must((int)orbit_endpoint_read(b, buf, sizeof buf, TIMEOUT_MS), "read");
    printf("peer_death: got \"%.*s\" from node %u; killing it with -9\n", (int)n, buf, peer.node);

    double killed_at;
    if (orbit_uring_futex_supported()) {
        struct io_uring ring;
        must(io_uring_queue_init(8, &ring, 0), "io_uring_queue_init");
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        must(orbit_endpoint_prep_wait_readable(b, sqe), "prep readable");   /* 1: a NOP, ready now */
        io_uring_sqe_set_data64(sqe, TAG_READABLE);
        sqe = io_uring_get_sqe(&ring);
        must(orbit_fleet_prep_wait_node_death(fleet, peer.node, peer.incarnation, sqe), "prep death");
        io_uring_sqe_set_data64(sqe, TAG_DEATH);
        must(io_uring_submit(&ring), "submit");
        killed_at = now_ms();
        kill(pid, SIGKILL);
        for (;;) {    /* the readable wait may complete too (the reap resets the stream) */
            struct io_uring_cqe *cqe;
            must(io_uring_wait_cqe(&ring, &cqe), "wait cqe");
            bool death = cqe->user_data == TAG_DEATH;
            io_uring_cqe_seen(&ring, cqe);
            if (death)
                break;
        }
        io_uring_queue_exit(&ring);
    } else {
        killed_at = now_ms();
        kill(pid, SIGKILL);
        must(orbit_fleet_wait_node_death(fleet, peer.node, peer.incarnation, TIMEOUT_MS), "wait death");
    }
    printf("peer_death: learnt of the death %.2f ms after the kill, no reaper running\n",
           now_ms() - killed_at);
    int reaped = must(orbit_fleet_reap(fleet), "reap");
    n = orbit_endpoint_try_read(b, buf, sizeof buf);
    printf("peer_death: reaped %d node; the stream now reads: %s\n", reaped,
           n == -ORBIT_ERESET ? "reset" : orbit_strerror((int)n));
    waitpid(pid, NULL, 0);
    orbit_endpoint_close(b);
    orbit_streams_close(streams);
    orbit_fleet_leave(fleet);
    orbit_fleet_unlink(fleet_name);
    return reaped == 1 && n == -ORBIT_ERESET ? 0 : 1;
}
