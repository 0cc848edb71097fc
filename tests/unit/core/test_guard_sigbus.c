/* SPDX-License-Identifier: MIT */
/*
 * The SIGBUS guard (lib/core/guard_sigbus.c): a fault in a registered mapping
 * of a file that shrank is answered (anonymous memory over the mapping, the
 * bound generation word poisoned); every other SIGBUS reaches the handler the
 * application installed before, or kills as it would without orbit. Each test
 * runs in a process of its own (Check forks), so handlers do not leak between
 * them.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"
#include "core/guard_sigbus.h"

#define PAGES 4

/* A file of PAGES pages mapped shared, then cut to one page: the pages past it fault. */
struct shrunk { char path[64]; int fd; unsigned char *map; size_t len; };

static void shrunk_open(struct shrunk *s)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    snprintf(s->path, sizeof s->path, "/dev/shm/orbit-guard-test.%d.%ld", (int)getpid(), random());
    s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(s->fd, 0);
    s->len = PAGES * page;
    ck_assert_int_eq(ftruncate(s->fd, (off_t)s->len), 0);
    s->map = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    ck_assert_ptr_ne(s->map, MAP_FAILED);
    memset(s->map, 0x5a, s->len);
    ck_assert_int_eq(ftruncate(s->fd, (off_t)page), 0);
}

static void shrunk_close(struct shrunk *s)
{
    munmap(s->map, s->len);
    close(s->fd);
    unlink(s->path);
}

static unsigned char touch(volatile unsigned char *p) { return *p; }

START_TEST(a_fault_in_a_guarded_mapping_is_answered_and_breaks_it)
{
    struct shrunk s;
    shrunk_open(&s);
    uint32_t generation = 7;
    int slot = orb_guard_map(s.map, s.len, s.path);
    ck_assert_int_ge(slot, 0);
    orb_guard_bind(slot, &generation);
    ck_assert(!orb_guard_broken(slot));
    ck_assert_uint_eq(orb_guard_breaks(), 0);
    /* Past the file's end: without the guard this access kills the process. */
    ck_assert_uint_eq(touch(s.map + s.len - 1), 0);   /* anonymous memory now, not the file */
    ck_assert(orb_guard_broken(slot));
    ck_assert_uint_eq(orb_guard_breaks(), 1);
    ck_assert_uint_eq(generation, 7u | ORB_GEN_BROKEN);
    ck_assert(orb_guard_broken_at(s.map));
    ck_assert(orb_guard_broken_at(s.map + s.len - 1));
    ck_assert(!orb_guard_broken_at(s.map + s.len));
    char path[256];
    ck_assert(orb_guard_path_of(&generation, path, sizeof path));
    ck_assert_str_eq(path, s.path);
    s.map[0] = 1;   /* writable, and ours alone */
    /* A word bound after the break is poisoned at once. */
    uint32_t late = 9;
    orb_guard_bind(slot, &late);
    ck_assert_uint_eq(late, 9u | ORB_GEN_BROKEN);
    orb_guard_unmap(slot);
    ck_assert(!orb_guard_broken_at(s.map));
    shrunk_close(&s);
}
END_TEST

/* Slots are reused after unmap; a fresh one is not broken. */
START_TEST(an_unmapped_slot_is_free_and_clean_again)
{
    struct shrunk s;
    shrunk_open(&s);
    int slots[600];
    for (int i = 0; i < 600; i++) {   /* more than one chunk of slots */
        slots[i] = orb_guard_map(s.map, s.len, s.path);
        ck_assert_int_ge(slots[i], 0);
    }
    for (int i = 0; i < 600; i++)
        orb_guard_unmap(slots[i]);
    int again = orb_guard_map(s.map, s.len, s.path);
    ck_assert_int_ge(again, 0);
    ck_assert_int_lt(again, 600);
    ck_assert(!orb_guard_broken(again));
    orb_guard_unmap(again);
    shrunk_close(&s);
}
END_TEST

static sigjmp_buf escape;
static _Atomic int app_faults, app_sent;

static void app_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig; (void)uc;
    if (si->si_code <= 0) {
        app_sent++;
        return;
    }
    app_faults++;
    siglongjmp(escape, 1);   /* the application's own recovery from its own fault */
}

static void install_app_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = app_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGBUS, &sa, NULL), 0);
}

/* The application's handler, installed before orbit's, still gets its own faults and sent SIGBUS. */
START_TEST(a_fault_outside_orbit_reaches_the_applications_handler)
{
    install_app_handler();
    struct shrunk ours, theirs;
    shrunk_open(&ours);
    shrunk_open(&theirs);
    int slot = orb_guard_map(ours.map, ours.len, ours.path);   /* installs the guard, chaining */
    ck_assert_int_ge(slot, 0);
    struct sigaction now;
    ck_assert_int_eq(sigaction(SIGBUS, NULL, &now), 0);
    ck_assert_ptr_ne((void *)now.sa_sigaction, (void *)app_handler);   /* ours is in front */
    if (sigsetjmp(escape, 1) == 0)
        touch(theirs.map + theirs.len - 1);   /* not orbit's: the application's handler */
    ck_assert_int_eq(app_faults, 1);
    ck_assert(!orb_guard_broken(slot));
    touch(ours.map + ours.len - 1);            /* orbit's: answered, never the application's */
    ck_assert_int_eq(app_faults, 1);
    ck_assert(orb_guard_broken(slot));
    ck_assert_int_eq(kill(getpid(), SIGBUS), 0);   /* sent, not a fault: passed on as well */
    ck_assert_int_eq(app_sent, 1);
    orb_guard_unmap(slot);
    shrunk_close(&ours);
    shrunk_close(&theirs);
}
END_TEST

/* Run fn in a child; its wait status. */
static int in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        fn();
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(kid, &st, 0), kid);
    return st;
}

static void foreign_fault(void)
{
    struct shrunk ours, theirs;
    shrunk_open(&ours);
    shrunk_open(&theirs);
    unlink(ours.path);
    unlink(theirs.path);
    if (orb_guard_map(ours.map, ours.len, ours.path) < 0)
        _exit(3);
    touch(theirs.map + theirs.len - 1);   /* nobody handles it: the default action */
    _exit(4);
}

static void foreign_signal(void)
{
    struct shrunk ours;
    shrunk_open(&ours);
    unlink(ours.path);
    if (orb_guard_map(ours.map, ours.len, ours.path) < 0)
        _exit(3);
    kill(getpid(), SIGBUS);
    _exit(4);
}

/* Without an application handler a SIGBUS that is not orbit's kills as it would without orbit. */
START_TEST(a_foreign_sigbus_is_never_swallowed)
{
    int st = in_child(foreign_fault);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "a foreign fault: status %#x", st);
    st = in_child(foreign_signal);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "a sent SIGBUS: status %#x", st);
}
END_TEST

struct toucher { unsigned char *p; size_t len; };

static void *touch_all(void *arg)
{
    struct toucher *t = arg;
    unsigned sum = 0;
    for (size_t i = 0; i < t->len; i += 512)
        sum += touch(t->p + i);
    return (void *)(uintptr_t)sum;
}

/* Threads faulting in one mapping at once: each access completes, the mapping breaks once. */
START_TEST(threads_faulting_together_all_complete)
{
    struct shrunk s;
    shrunk_open(&s);
    int slot = orb_guard_map(s.map, s.len, s.path);
    ck_assert_int_ge(slot, 0);
    pthread_t t[4];
    struct toucher arg = { s.map, s.len };
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, touch_all, &arg), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert(orb_guard_broken(slot));
    ck_assert_uint_eq(orb_guard_breaks(), 1);
    orb_guard_unmap(slot);
    shrunk_close(&s);
}
END_TEST

int main(void)
{
    srandom((unsigned)tu_now_ns());
    Suite *s = suite_create("guard_sigbus");
    TCase *tc = tcase_create("guard");
    tcase_add_test(tc, a_fault_in_a_guarded_mapping_is_answered_and_breaks_it);
    tcase_add_test(tc, an_unmapped_slot_is_free_and_clean_again);
    tcase_add_test(tc, a_fault_outside_orbit_reaches_the_applications_handler);
    tcase_add_test(tc, a_foreign_sigbus_is_never_swallowed);
    tcase_add_test(tc, threads_faulting_together_all_complete);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
