/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the Check suites and fleet tests. */
#ifndef ORBIT_TESTUTIL_H
#define ORBIT_TESTUTIL_H

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/fleet.h>

/*
 * A fleet name unique to this call ("t-<tag>-<pid>-<n>-<nonce>"). The nonce
 * matters: pids wrap (pid_max may be 32768), and a segment a killed run left
 * behind must never be mistaken for this test's fresh fleet.
 */
static inline const char *tu_fleet_name(const char *tag)
{
    static _Thread_local char buf[64];
    static _Atomic unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned nonce = (unsigned)(ts.tv_nsec ^ (ts.tv_sec << 20)) & 0xffffffu;
    snprintf(buf, sizeof buf, "t-%.20s-%d-%u-%06x", tag, (int)getpid(), counter++, nonce);
    return buf;
}

/* Join a named fleet with explicit node and incarnation (node -1: any). */
static inline struct orbit_fleet *tu_join(const char *name, uint16_t capacity, int32_t node,
                                          uint64_t incarnation, enum orbit_backing backing)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = capacity;
    o.node = node;
    o.incarnation = incarnation;
    o.backing = backing;
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(name, &o, &f);
    ck_assert_msg(rc == 0, "join %s node %d: %s", name, node, orbit_strerror(rc));
    return f;
}

/* Backing for named-fleet tests: ORBIT_TEST_BACKING=shm|hugetlb|auto (default auto). */
static inline enum orbit_backing tu_backing(void)
{
    const char *b = getenv("ORBIT_TEST_BACKING");
    if (b && strcmp(b, "shm") == 0) return ORBIT_BACKING_SHM;
    if (b && strcmp(b, "hugetlb") == 0) return ORBIT_BACKING_HUGETLB;
    return ORBIT_BACKING_AUTO;
}

static inline int64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void tu_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Wait for a child; returns its exit status (0..255), 128+sig if killed, -1 on timeout. */
static inline int tu_wait_child(pid_t pid, int timeout_ms)
{
    int64_t end = tu_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (tu_now_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        tu_sleep_ms(2);
    }
}

/* A tiny pipe-based barrier between a parent and its forked children. */
struct tu_gate { int fd[2]; };
static inline void tu_gate_init(struct tu_gate *g) { ck_assert_int_eq(pipe(g->fd), 0); }
static inline void tu_gate_open(struct tu_gate *g, int n)
{
    for (int i = 0; i < n; i++) { char c = 1; ck_assert_int_eq(write(g->fd[1], &c, 1), 1); }
}
static inline void tu_gate_pass(struct tu_gate *g)
{
    char c;
    if (read(g->fd[0], &c, 1) != 1) _exit(99);
}

static inline void tu_gate_close(struct tu_gate *g) { close(g->fd[0]); close(g->fd[1]); }

/* Does the file at path hold what (its first MiB)? For tools' output captured to a file. */
static inline bool tu_file_has(const char *path, const char *what)
{
    static char buf[1 << 20];
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    if (fp)
        fclose(fp);
    buf[n] = '\0';
    return strstr(buf, what) != NULL;
}

/*
 * Skips. A test that cannot run here (no root, no BPF build, no io_uring
 * futex ops...) calls tu_skip(reason) and returns; tu_run then exits 77, so
 * meson reports SKIP instead of counting it as passed. Such tests live in
 * tcases tagged TU_OPTIONAL, which meson runs as a test of their own
 * (CK_INCLUDE_TAGS=optional) apart from the rest (CK_EXCLUDE_TAGS=optional):
 * a skip never hides the tests that did run.
 */
#define TU_OPTIONAL "optional"

/* Shared with Check's forked test processes: mapped before the suite runs. */
static inline _Atomic unsigned *tu_skips(void)
{
    static _Atomic unsigned *count;
    if (!count) {
        void *p = mmap(NULL, sizeof *count, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) { perror("mmap"); _exit(99); }
        count = p;
    }
    return count;
}

static inline void tu_skip(const char *reason)
{
    fprintf(stderr, "SKIP: %s\n", reason);
    (*tu_skips())++;
}

static inline TCase *tu_optional_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_tags(tc, TU_OPTIONAL);
    return tc;
}

/* Run a Check suite; returns the process exit code: 1 on a failure (or no test
 * selected), 77 when a test skipped, else 0. */
/*
 * Hold a read lock, through a descriptor of the test's own, on the byte the
 * next life of node will lock (design.md §1: 2^40 + node * 64 + joins % 64,
 * joins the node's count before that join): its joiner then waits in JOINING
 * (up to 1 s) until tu_release_life_byte. Returns the descriptor.
 */
static inline int tu_hold_life_byte(const char *fleet, uint16_t node, uint64_t joins)
{
    struct orbit_segment_info si[16];
    ssize_t n = orbit_fleet_segments(fleet, si, 16);
    int fd = -1;
    for (ssize_t i = 0; i < n && i < 16 && fd < 0; i++)
        if (si[i].kind == 255)
            fd = open(si[i].path, O_RDWR | O_CLOEXEC);
    ck_assert_msg(fd >= 0, "fleet %s: no fleet segment to open", fleet);
    struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
                        .l_start = (off_t)((1ll << 40) + (long long)node * 64 + (long long)((joins + 1) % 64)),
                        .l_len = 1 };
    ck_assert_int_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
    return fd;
}

/* Unlocked first: a child forked since shares the description, and closing alone would not. */
static inline void tu_release_life_byte(int fd)
{
    struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 1ll << 40, .l_len = 1ll << 40 };
    ck_assert_int_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
    close(fd);
}

static inline int tu_run(Suite *s)
{
    tu_skips();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int ran = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    unsigned skipped = *tu_skips();
    if (failed)
        return 1;
    if (ran == 0) {
        fprintf(stderr, "no test selected (CK_INCLUDE_TAGS / CK_RUN_CASE?)\n");
        return 1;
    }
    if (skipped) {
        fprintf(stderr, "%u of %d tests skipped\n", skipped, ran);
        return 77;
    }
    return 0;
}

#endif
