/* SPDX-License-Identifier: MIT */
/*
 * uring_loop.c — one io_uring ring for a socket and orbit, the servers' pattern.
 * The parent's ring waits at once on a socket read (a socketpair a forked
 * child writes to) and on orbit: for a stream offered to this node, then for
 * bytes on it, which the parent echoes. The wakes orbit owes the child ride
 * the same ring (orbit_uring_attach_wakes): one io_uring_enter per turn.
 * futex path (Linux 6.7+): a prep fills a FUTEX_WAIT SQE and returns 0, or,
 *   ready already, fills a NOP (completes at once, res 0) and returns 1.
 *   Submit it either way; a completion means "retry the non-blocking call".
 * readiness path (no io_uring futex ops, or ORBIT_DISABLE_URING_FUTEX=1): poll
 *   the readiness eventfd in the ring; drain it, then retry. stderr says which.
 * Where io_uring itself is refused (a seccomp profile such as Docker's default,
 *   kernel.io_uring_disabled) it says so and why (orbit_uring_futex_status), and exits 1.
 *   cc -std=c11 $(pkg-config --cflags orbit) uring_loop.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/uring.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIMEOUT_MS 10000
enum { TAG_SOCKET = 1, TAG_ORBIT = 2 };   /* user_data of our SQEs */
static const char socket_text[] = "bytes over the socket", stream_text[] = "first second third";
static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];
static pid_t parent_pid, child_pid;

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "uring_loop[%d]: %s: %s\n", (int)getpid(), what, why);
    exit(1);
}
/* orbit and liburing calls return a negated ORBIT_E* or errno code on failure. */
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

/* The child: writes the socket, offers a stream, sends on it in parts, each echoed. */
static void child(int sock, uint16_t parent_node)
{
    struct orbit_fleet *fleet; struct orbit_streams *streams;
    struct orbit_endpoint *a; struct orbit_ticket ticket; char echo[64] = "";
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_streams_open(fleet, NULL, &streams), "open");
    must(orbit_streams_create(streams, &a, &ticket), "create");
    must(orbit_streams_offer(streams, &ticket, parent_node), "offer");
    expect(write(sock, socket_text, strlen(socket_text)) == (ssize_t)strlen(socket_text), "socket write");
    close(sock);                                    /* the parent's recv then sees EOF */
    for (size_t off = 0, len = strlen(stream_text), n; off < len; off += n) {
        n = len - off < 6 ? len - off : 6;          /* 6 bytes at a time; park until echoed */
        must(orbit_endpoint_write_all(a, stream_text + off, n, TIMEOUT_MS), "write");
        must(orbit_endpoint_read_exact(a, echo + off, n, TIMEOUT_MS), "read echo");
    }
    must(orbit_endpoint_finish(a), "finish");
    expect(must((int)orbit_endpoint_read(a, echo, 1, TIMEOUT_MS), "read") == 0, "the echo's FIN");
    expect(strcmp(echo, stream_text) == 0, "the echo to match what was sent");
    orbit_endpoint_close(a);
    orbit_streams_close(streams);
    orbit_fleet_leave(fleet);
    exit(0);
}

struct loop {                       /* the parent's loop state */
    struct io_uring ring;
    struct orbit_streams *streams;
    struct orbit_endpoint *b;       /* NULL until the offer is taken */
    int readiness, sock;            /* readiness: the eventfd on the readiness path, else -1 */
    char sock_in[64], stream_in[64]; size_t sock_len, stream_len;
    bool sock_done, stream_done; unsigned turns, ready_now;
};

static void arm_socket(struct loop *l)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);    /* 16 entries: never short here */
    io_uring_prep_recv(sqe, l->sock, l->sock_in + l->sock_len, sizeof l->sock_in - 1 - l->sock_len, 0);
    io_uring_sqe_set_data64(sqe, TAG_SOCKET);
}

/* One orbit wait: for an offer until we hold side B, then for its bytes. */
static void arm_orbit(struct loop *l)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
    if (l->readiness >= 0)
        io_uring_prep_poll_add(sqe, l->readiness, POLLIN);
    else if (must(l->b ? orbit_endpoint_prep_wait_readable(l->b, sqe)
                       : orbit_streams_prep_wait_offer(l->streams, sqe), "prep wait") == 1)
        l->ready_now++;             /* a NOP: completes at once, we retry then */
    io_uring_sqe_set_data64(sqe, TAG_ORBIT);   /* after the prep, as with any liburing prep */
}

/* An orbit completion: take the offer, then read what is there and echo it. */
static void orbit_progress(struct loop *l)
{
    if (l->readiness >= 0)
        must(orbit_readiness_drain(l->readiness), "drain");   /* before the retries below */
    if (!l->b) {
        struct orbit_ticket ticket;
        int rc = orbit_streams_take_offer(l->streams, &ticket);
        if (rc == -ORBIT_EAGAIN)
            return;                 /* a spurious wake: wait again */
        must(rc, "take offer");
        must(orbit_streams_open_ticket(l->streams, &ticket, &l->b), "open ticket");
    }
    for (;;) {
        char *p = l->stream_in + l->stream_len;
        int n = (int)orbit_endpoint_try_read(l->b, p, sizeof l->stream_in - 1 - l->stream_len);
        if (n == -ORBIT_EAGAIN)
            return;
        if (must(n, "try read") == 0) {                   /* FIN: finish the echo too */
            l->stream_done = must(orbit_endpoint_finish(l->b), "finish echo") == 0;
            return;
        }
        /* The echo's wake to the child's reader is queued in our ring. */
        expect(orbit_endpoint_try_write(l->b, p, (size_t)n) == n, "the echo to fit the ring");
        l->stream_len += (size_t)n;
    }
}

static void run_loop(struct loop *l)
{
    arm_socket(l);
    arm_orbit(l);
    while (!(l->sock_done && l->stream_done)) {
        struct __kernel_timespec ts = { .tv_sec = TIMEOUT_MS / 1000 };
        struct io_uring_cqe *cqe = NULL;    /* one enter: our new SQEs and orbit's queued wakes */
        must(io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, &ts, NULL), "submit and wait");
        expect(cqe != NULL, "a completion in time");   /* liburing 2.3 may time out with rc >= 0 */
        do {                        /* every completion there is, then one enter again */
            if (cqe->user_data == TAG_SOCKET) {
                l->sock_len += (size_t)must(cqe->res, "recv");
                if (!(l->sock_done = cqe->res == 0))
                    arm_socket(l);
            } else if (cqe->user_data == TAG_ORBIT) {
                /* -EAGAIN: the futex word moved before the wait began; a wake too. */
                must(cqe->res == -EAGAIN ? 0 : cqe->res, "orbit wait");
                orbit_progress(l);
                if (!l->stream_done)
                    arm_orbit(l);
            } else {    /* ORBIT_URING_WAKE_USER_DATA: only a failed wake has a CQE */
                die("a batched wake failed", orbit_strerror(cqe->res));
            }
            io_uring_cqe_seen(&l->ring, cqe);
        } while (io_uring_peek_cqe(&l->ring, &cqe) == 0);
        l->turns++;
    }
    must(io_uring_submit(&l->ring), "flush the last wakes");   /* the FIN's wake is queued */
}

int main(void)
{
    parent_pid = getpid();
    snprintf(fleet_name, sizeof fleet_name, "ex-uring-%d", (int)parent_pid);
    orbit_fleet_unlink(fleet_name);     /* a leftover of a killed run that had our pid */
    atexit(cleanup);
    struct orbit_fleet *fleet; struct loop l = { .readiness = -1 };
    int rc = io_uring_queue_init(16, &l.ring, 0);
    if (rc < 0) {   /* orbit alone would fall back to futex(2); this example is about a ring */
        fprintf(stderr, "uring_loop: io_uring is refused here (%s), and this example needs it: %s\n",
                strerror(-rc), orbit_uring_futex_status());
        return 1;
    }
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_streams_open(fleet, NULL, &l.streams), "open");
    bool futex_path = orbit_uring_futex_supported();
    if (!futex_path)                    /* before the child can offer: no edge is missed */
        l.readiness = must(orbit_streams_readiness(l.streams), "readiness");
    uint16_t my_node = orbit_fleet_node(fleet);
    int sv[2], status;
    expect(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && (child_pid = fork()) >= 0, "socketpair, fork");
    if (child_pid == 0)                 /* joins as its own node; never touches our handles */
        child(sv[1], my_node);
    close(sv[1]);
    l.sock = sv[0];
    if (futex_path)
        must(orbit_uring_attach_wakes(&l.ring), "attach wakes");   /* this thread's wakes */
    fprintf(stderr, "uring_loop: %s\n", futex_path ? "futex path (FUTEX_WAIT SQEs, wakes in the ring)"
                                                    : "readiness path (no io_uring futex ops: eventfd polled)");
    run_loop(&l);
    orbit_uring_detach_wakes();
    expect(waitpid(child_pid, &status, 0) == child_pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0, "the child to succeed");
    child_pid = 0;
    expect(strcmp(l.sock_in, socket_text) == 0 && strcmp(l.stream_in, stream_text) == 0,
           "the socket's and the stream's bytes");
    io_uring_queue_exit(&l.ring);
    orbit_endpoint_close(l.b);
    orbit_streams_close(l.streams);
    orbit_fleet_leave(fleet);
    printf("uring_loop: ok: socket \"%s\", stream \"%s\" echoed, %u turns, %u ready-now waits\n",
           l.sock_in, l.stream_in, l.turns, l.ready_now);
    return 0;   /* cleanup() unlinks the fleet */
}
