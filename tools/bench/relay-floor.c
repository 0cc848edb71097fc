/* SPDX-License-Identifier: MIT */
/*
 * relay-floor: the floor under any reverse proxy on this host. It moves bytes
 * between each client connection and a backend connection of its own, both
 * ways, and does nothing else: no HTTP, no pool, no timeouts. Workers are
 * forked and pinned as orbit-relay's are, each with one io_uring
 * (SINGLE_ISSUER | DEFER_TASKRUN), a multishot accept on its own SO_REUSEPORT
 * listener, and a plain receive and a send per piece. What a proxy costs past
 * these socket operations is what relay-bench.sh --floor shows beside it.
 * Not a proxy: a client's bytes go to the backend whatever they are.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <liburing.h>
#include "cli.h"

#define TOOL "relay-floor"
#define FLOOR_BUF (256u << 10)   /* a piece: a 64 KiB response and its head in one receive */
#define FLOOR_MAX_CONNS 65536

enum floor_op { OP_ACCEPT, OP_CLIENT_RECV, OP_BACKEND_SEND, OP_BACKEND_RECV, OP_CLIENT_SEND };

/* A client connection and its own backend connection, in the slot of the
 * client's descriptor; gen tells its completions from those of the slot's
 * earlier connections. */
struct floor_conn {
    int client, backend;
    uint32_t gen;
    char *to_backend, *to_client;
};

struct floor_worker {
    struct io_uring ring;
    struct sockaddr_in backend;
    struct floor_conn *conns;
};

static const char usage_text[] =
    "usage: relay-floor --listen [HOST:]PORT --upstream [HOST:]PORT [--workers N]\n"
    "       relay-floor --help | --version\n"
    "  A byte mover, not a proxy: each client connection gets a backend connection of\n"
    "  its own and every byte goes across as it comes, both ways, through N forked\n"
    "  io_uring workers (default 2) pinned one to a CPU in turn, on SO_REUSEPORT\n"
    "  listeners. The floor under what any reverse proxy costs on this host\n"
    "  (tools/bench/relay-bench.sh --floor). Runs until killed; its workers end with it.\n";

static uint64_t user_data(enum floor_op op, const struct floor_worker *w, unsigned idx)
{
    return (uint64_t)op << 56 | (uint64_t)(w->conns[idx].gen & 0xffffffu) << 32 | idx;
}

static struct io_uring_sqe *floor_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) {
        io_uring_submit(ring);   /* full: what is queued goes first */
        sqe = io_uring_get_sqe(ring);
    }
    return sqe;
}

static void floor_recv(struct floor_worker *w, enum floor_op op, int fd, char *buf, unsigned idx)
{
    struct io_uring_sqe *sqe = floor_sqe(&w->ring);
    io_uring_prep_recv(sqe, fd, buf, FLOOR_BUF, 0);
    io_uring_sqe_set_data64(sqe, user_data(op, w, idx));
}

/* MSG_WAITALL: the kernel carries on after a short send, so one completion ends a piece. */
static void floor_send(struct floor_worker *w, enum floor_op op, int fd, const char *buf, size_t n, unsigned idx)
{
    struct io_uring_sqe *sqe = floor_sqe(&w->ring);
    io_uring_prep_send(sqe, fd, buf, n, MSG_WAITALL | MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, user_data(op, w, idx));
}

static void floor_accept(struct floor_worker *w, int lfd)
{
    struct io_uring_sqe *sqe = floor_sqe(&w->ring);
    io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, (uint64_t)OP_ACCEPT << 56);
}

/* Both sockets go; a receive or send still pending on them completes with an error. */
static void floor_close(struct floor_conn *c)
{
    if (c->client >= 0) {
        shutdown(c->client, SHUT_RDWR);
        close(c->client);
    }
    if (c->backend >= 0) {
        shutdown(c->backend, SHUT_RDWR);
        close(c->backend);
    }
    c->client = c->backend = -1;
    c->gen++;   /* completions still to come for these sockets find no connection */
}

/* A new client (its descriptor is its slot): a backend connection of its own, then both receives. */
static void floor_on_accept(struct floor_worker *w, int fd)
{
    if (fd < 0 || fd >= FLOOR_MAX_CONNS) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct floor_conn *c = &w->conns[fd];
    int one = 1;
    c->client = fd;
    c->backend = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->backend < 0 || connect(c->backend, (const struct sockaddr *)&w->backend, sizeof w->backend) < 0) {
        fprintf(stderr, "%s: backend: %s\n", TOOL, strerror(errno));
        floor_close(c);
        return;
    }
    setsockopt(c->backend, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!c->to_backend) {
        c->to_backend = malloc(FLOOR_BUF);
        c->to_client = malloc(FLOOR_BUF);
        if (!c->to_backend || !c->to_client) {
            floor_close(c);
            return;
        }
    }
    floor_recv(w, OP_CLIENT_RECV, c->client, c->to_backend, (unsigned)fd);
    floor_recv(w, OP_BACKEND_RECV, c->backend, c->to_client, (unsigned)fd);
}

/* One completion: a piece received goes out the other side; a piece sent re-arms its receive. */
static void floor_on_cqe(struct floor_worker *w, int lfd, uint64_t ud, int res, uint32_t flags)
{
    enum floor_op op = (enum floor_op)(ud >> 56);
    unsigned idx = (unsigned)ud;
    if (op == OP_ACCEPT) {
        floor_on_accept(w, res);
        if (!(flags & IORING_CQE_F_MORE))
            floor_accept(w, lfd);
        return;
    }
    if (idx >= FLOOR_MAX_CONNS)
        return;
    struct floor_conn *c = &w->conns[idx];
    if (c->client < 0 || (c->gen & 0xffffffu) != ((ud >> 32) & 0xffffffu))
        return;   /* closed already: a completion of its last operations */
    if (res <= 0) {
        floor_close(c);
        return;
    }
    switch (op) {
    case OP_CLIENT_RECV: floor_send(w, OP_BACKEND_SEND, c->backend, c->to_backend, (size_t)res, idx); break;
    case OP_BACKEND_SEND: floor_recv(w, OP_CLIENT_RECV, c->client, c->to_backend, idx); break;
    case OP_BACKEND_RECV: floor_send(w, OP_CLIENT_SEND, c->client, c->to_client, (size_t)res, idx); break;
    case OP_CLIENT_SEND: floor_recv(w, OP_BACKEND_RECV, c->backend, c->to_client, idx); break;
    default: break;
    }
}

static int listen_on(const struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    /* TCP_NODELAY on the listener: accepted sockets take it. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)a, sizeof *a) < 0 || listen(fd, 4096) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static _Noreturn void worker_run(int lfd, const struct sockaddr_in *backend, int cpu)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* the bench kills the parent: the workers go with it */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    struct floor_worker w = { .backend = *backend };
    struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                                          IORING_SETUP_CQSIZE, .cq_entries = 16384 };
    int rc = io_uring_queue_init_params(2048, &w.ring, &p);
    w.conns = calloc(FLOOR_MAX_CONNS, sizeof *w.conns);
    if (rc < 0 || !w.conns) {
        fprintf(stderr, "%s: io_uring: %s\n", TOOL, strerror(rc < 0 ? -rc : ENOMEM));
        _exit(1);
    }
    for (unsigned i = 0; i < FLOOR_MAX_CONNS; i++)
        w.conns[i].client = w.conns[i].backend = -1;
    floor_accept(&w, lfd);
    for (;;) {
        rc = io_uring_submit_and_wait(&w.ring, 1);
        if (rc < 0 && rc != -EINTR) {
            fprintf(stderr, "%s: io_uring_enter: %s\n", TOOL, strerror(-rc));
            _exit(1);
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&w.ring, head, cqe) {
            seen++;
            floor_on_cqe(&w, lfd, cqe->user_data, cqe->res, cqe->flags);
        }
        io_uring_cq_advance(&w.ring, seen);
    }
}

/* "[HOST:]PORT" into a (tools/common), and a port to dial or listen on: not 0. */
static void parse_addr(const char *opt, const char *s, struct sockaddr_in *a)
{
    const char *why;
    if (cli_parse_inet(s, a, &why) < 0)
        cli_bad(TOOL, opt, s, why);
    if (a->sin_port == 0)
        cli_bad(TOOL, opt, s, "port 0: name one");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        { "listen", required_argument, NULL, 'l' }, { "upstream", required_argument, NULL, 'u' },
        { "workers", required_argument, NULL, 'w' }, { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' }, { 0, 0, 0, 0 },
    };
    struct sockaddr_in listen_at = { 0 }, backend = { 0 };
    int workers = 2, c;
    bool have_listen = false, have_backend = false;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
        switch (c) {
        case 'l': parse_addr("--listen", optarg, &listen_at); have_listen = true; break;
        case 'u': parse_addr("--upstream", optarg, &backend); have_backend = true; break;
        case 'w': workers = cli_int(TOOL, "--workers", optarg, 1, 64); break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': cli_version(TOOL); return 0;
        default: cli_getopt_error(TOOL, c, optopt, argv[optind - 1]);
        }
    }
    if (optind < argc)
        cli_usage_error(TOOL, "unexpected argument");
    if (!have_listen || !have_backend)
        cli_usage_error(TOOL, "--listen and --upstream are needed");
    signal(SIGPIPE, SIG_IGN);
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < workers; i++) {
        int lfd = listen_on(&listen_at);
        if (lfd < 0) {
            fprintf(stderr, "%s: listen: %s\n", TOOL, strerror(errno));
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "%s: fork: %s\n", TOOL, strerror(errno));
            return 1;
        }
        if (pid == 0)
            worker_run(lfd, &backend, i % (cpus > 0 ? cpus : 1));
        close(lfd);
    }
    while (wait(NULL) > 0)
        ;
    return 1;   /* every worker ended: none should */
}
