/* SPDX-License-Identifier: MIT */
/* Helpers for the death suite: forked members, a death collector, backends, percentiles. */
#ifndef ORBIT_DEATH_UTIL_H
#define ORBIT_DEATH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <orbit/reaper.h>
#include "testutil.h"

#ifndef DEATH_HAVE_BPF
#define DEATH_HAVE_BPF 0
#endif

/* Check loop index -> backend under test. */
static const enum orbit_reaper_backend death_backends[] = { ORBIT_REAPER_BPF, ORBIT_REAPER_PIDFD };

/* A backend loop test: the pidfd run in tcase plain, the BPF run (which skips without
 * root or a BPF build) in tcase bpf, an optional one (see tu_skip). */
#define DEATH_ADD_BACKENDS(plain, bpf, fn) do {   \
        tcase_add_loop_test(bpf, fn, 0, 1);       \
        tcase_add_loop_test(plain, fn, 1, 2);     \
    } while (0)

/*
 * Open the backend under test. BPF must load in a BPF build run as root; in
 * a build without it the open must say -ORBIT_ENOTSUP. Returns NULL (the
 * caller returns: skipped) only in those no-BPF cases.
 */
static inline struct orbit_reaper *death_open(int idx)
{
    enum orbit_reaper_backend b = death_backends[idx];
    struct orbit_reaper *r = NULL;
    int rc = orbit_reaper_open(b, &r);
    if (b == ORBIT_REAPER_BPF && !DEATH_HAVE_BPF) {
        ck_assert_int_eq(rc, -ORBIT_ENOTSUP);
        tu_skip("bpf backend: built without BPF");
        return NULL;
    }
    if (b == ORBIT_REAPER_BPF && geteuid() != 0) {
        ck_assert_int_lt(rc, 0);
        tu_skip("bpf backend: not root");
        return NULL;
    }
    ck_assert_msg(rc == 0, "open %s: %s", orbit_reaper_backend_name(b), orbit_strerror(rc));
    ck_assert_int_eq(orbit_reaper_backend(r), b);
    ck_assert_int_eq(orbit_reaper_set_interval(r, 10), 0);
    return r;
}

/* ---- collecting deaths ----------------------------------------------------- */

#define DEATHS_MAX 256
struct deaths {
    int n;
    struct orbit_reaper_death d[DEATHS_MAX];
    char fleet[DEATHS_MAX][ORBIT_FLEET_NAME_MAX + 1];
};

static inline void deaths_collect(void *ctx, const struct orbit_reaper_death *d)
{
    struct deaths *c = ctx;
    if (c->n >= DEATHS_MAX)
        return;
    c->d[c->n] = *d;
    snprintf(c->fleet[c->n], sizeof c->fleet[c->n], "%s", d->fleet);
    c->d[c->n].fleet = c->fleet[c->n];
    c->n++;
}

/* Process until the collector holds want deaths (or timeout_ms passes). */
static inline void deaths_wait(struct orbit_reaper *r, struct deaths *c, int want, int timeout_ms)
{
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    while (c->n < want) {
        int64_t left = (end - tu_now_ns()) / 1000000;
        ck_assert_msg(left > 0, "waited %d ms for %d deaths, have %d", timeout_ms, want, c->n);
        int rc = orbit_reaper_process(r, (int)left);
        ck_assert_msg(rc >= 0, "process: %s", orbit_strerror(rc));
    }
}

/* ---- forked members ------------------------------------------------------- */

/*
 * A member runs fn in a forked child. fn reports readiness with
 * member_ready(ready_fd) (a 64-bit word the parent receives) and takes
 * commands from cmd_fd. The parent side: pid, and the two pipe ends.
 */
struct member { pid_t pid; int ready_rd, cmd_wr; };
typedef void (*member_fn)(const char *fleet, int ready_fd, int cmd_fd, void *arg);

static inline void member_ready(int ready_fd, uint64_t word)
{
    if (write(ready_fd, &word, sizeof word) != (ssize_t)sizeof word)
        _exit(97);
}

static inline char member_command(int cmd_fd)
{
    char c;
    return read(cmd_fd, &c, 1) == 1 ? c : 0;
}

static inline struct member member_fork(const char *fleet, member_fn fn, void *arg)
{
    int rp[2], cp[2];
    ck_assert_int_eq(pipe2(rp, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(cp, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(rp[0]);
        close(cp[1]);
        fn(fleet, rp[1], cp[0], arg);
        _exit(0);
    }
    close(rp[1]);
    close(cp[0]);
    return (struct member){ pid, rp[0], cp[1] };
}

/* The member's next readiness word; fails the test if it died first. */
static inline uint64_t member_wait_ready(struct member *m)
{
    uint64_t word;
    ck_assert_msg(read(m->ready_rd, &word, sizeof word) == (ssize_t)sizeof word,
                  "member %d died before it was ready", (int)m->pid);
    return word;
}

static inline void member_send(struct member *m, char c)
{
    ck_assert_int_eq(write(m->cmd_wr, &c, 1), 1);
}

/* Reap the member (it must end within 10 s); returns tu_wait_child's code. */
static inline int member_reap(struct member *m)
{
    int code = tu_wait_child(m->pid, 10000);
    close(m->ready_rd);
    close(m->cmd_wr);
    return code;
}

/* Join, report ready (word 0), then on 'L' leave and exit 0, on EOF just exit. */
static inline void member_join_only(const char *fleet, int ready_fd, int cmd_fd, void *arg)
{
    (void)arg;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    o.backing = tu_backing();
    struct orbit_fleet *f;
    if (orbit_fleet_join(fleet, &o, &f) != 0)
        _exit(98);
    member_ready(ready_fd, orbit_fleet_node(f));
    char c = member_command(cmd_fd);
    if (c == 'L')
        orbit_fleet_leave(f);
    _exit(0);
}

/* The node record of a node, or state FREE when it is not claimed. */
static inline struct orbit_node_info node_info(struct orbit_fleet *f, uint16_t node)
{
    struct orbit_node_info all[64];
    struct orbit_node_info none = { .node = node, .state = ORBIT_NODE_FREE };
    ssize_t n = orbit_fleet_nodes(f, all, 64);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n && i < 64; i++)
        if (all[i].node == node)
            return all[i];
    return none;
}

/* ---- percentiles ---------------------------------------------------------- */

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline uint64_t percentile(uint64_t *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

#endif
