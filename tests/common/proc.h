/* SPDX-License-Identifier: MIT */
/* Multi-process test helpers: children that report by exit code, pipes, tickets as text. */
#ifndef ORBIT_TEST_PROC_H
#define ORBIT_TEST_PROC_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <orbit/stream.h>
#include "testutil.h"

/* In a child: report and exit non-zero (Check asserts belong to the parent). */
static inline void tp_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "child %d: ", (int)getpid());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    _exit(1);
}
#define TP_CHECK(cond, ...) do { if (!(cond)) tp_die(__VA_ARGS__); } while (0)

static inline pid_t tp_spawn(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

static inline void tp_send(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            tp_die("pipe write failed");
        c += w;
        n -= (size_t)w;
    }
}

/* Reads exactly n bytes; false at EOF (the other end exited). */
static inline bool tp_recv(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return false;
        c += r;
        n -= (size_t)r;
    }
    return true;
}

static inline void tp_send_u64(int fd, uint64_t v) { tp_send(fd, &v, sizeof v); }
static inline uint64_t tp_recv_u64(int fd)
{
    uint64_t v = UINT64_MAX;
    if (!tp_recv(fd, &v, sizeof v))
        return UINT64_MAX;
    return v;
}

/* Tickets cross the pipe in their text form, as they would cross any setup channel. */
static inline void tp_send_ticket(int fd, const struct orbit_ticket *t)
{
    char text[64] = { 0 };
    if (orbit_ticket_format(t, text, sizeof text) < 0)
        tp_die("ticket format");
    tp_send(fd, text, sizeof text);
}

static inline struct orbit_ticket tp_recv_ticket(int fd)
{
    char text[64];
    struct orbit_ticket t;
    if (!tp_recv(fd, text, sizeof text) || (text[63] = '\0', orbit_ticket_parse(text, &t)) != 0)
        tp_die("ticket receive/parse: '%s'", text);
    return t;
}

/* Join (in a child: die on failure). */
static inline struct orbit_fleet *tp_join(const char *name, uint16_t capacity, int node, uint64_t inc)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = capacity;
    o.node = node;
    o.incarnation = inc;
    o.backing = tu_backing();
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(name, &o, &f);
    if (rc != 0)
        tp_die("join %s node %d: %s", name, node, orbit_strerror(rc));
    return f;
}

/* Deterministic pseudo-random words (splitmix64). */
static inline uint64_t tp_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

struct tp_pipe { int rd, wr; };
static inline struct tp_pipe tp_pipe(void)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    return (struct tp_pipe){ fd[0], fd[1] };
}

/* ---- a test's own fleet, and the members it kills ---------------------------------- */

/* The test's end: its fleet handle left and the fleet removed (no segment left behind). */
static inline void tp_fleet_end(struct orbit_fleet *f, const char *name)
{
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}

/* kill -9 a child and see it die of it. */
static inline void tp_kill(pid_t pid)
{
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(tu_wait_child(pid, 10000), 128 + SIGKILL);
}

/* kill -9 a child member (node, incarnation) and report its death through every table. */
static inline void tp_kill_reported(struct orbit_fleet *f, pid_t pid, uint16_t node, uint64_t incarnation)
{
    tp_kill(pid);
    ck_assert_int_eq(orbit_fleet_node_dead(f, node, incarnation), 0);
}

/* A child that stopped itself (a test hook's SIGSTOP): seen stopped. */
static inline void tp_await_stopped(pid_t pid)
{
    int st;
    ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
    ck_assert(WIFSTOPPED(st));
}

#endif
