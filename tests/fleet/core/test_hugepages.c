/* SPDX-License-Identifier: MIT */
/*
 * Huge-page exhaustion: with vm.nr_hugepages too small, a HUGETLB join fails
 * with -ENOMEM, an AUTO join falls back to /dev/shm, no process dies of
 * SIGBUS, and creators racing for the last page still make one fleet. Root
 * and a hugetlbfs mount are needed; it changes vm.nr_hugepages while it runs
 * and restores it (meson runs it alone).
 */
#include <fcntl.h>
#include "testutil.h"
#include "core/fleet_internal.h"

#define TEST_TABLE_TYPE 99   /* a table type no module registers */

static long read_long(const char *path)
{
    char buf[64] = { 0 };
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* No Check assertion here: main uses it too, outside any test, where Check would abort. */
static bool try_write_long(const char *path, long v)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%ld\n", v);
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return false;
    bool ok = write(fd, buf, (size_t)n) == n;
    close(fd);
    return ok;
}

static void write_long(const char *path, long v)
{
    ck_assert_msg(try_write_long(path, v), "cannot write %ld to %s: %s", v, path, strerror(errno));
}

static const char *nr = "/proc/sys/vm/nr_hugepages";

static bool can_run(void)
{
    if (geteuid() != 0 || !orb_hugetlb_dir() || read_long(nr) < 0) {
        tu_skip("needs root and a hugetlbfs mount");
        return false;
    }
    return true;
}

/* Can run (else a SKIP line): *saved is vm.nr_hugepages, *in_use the 2 MiB pages held now. */
static bool pool_in_use(long *saved, long *in_use)
{
    if (!can_run())
        return false;
    *saved = read_long(nr);
    long total = read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
    long free_pages = read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
    if (total < 0 || free_pages < 0) {
        tu_skip("no 2 MiB huge page pool");
        return false;
    }
    *in_use = total - free_pages;
    return true;
}

/* In a child, so a SIGBUS would show as its death rather than ours. */
static int exhausted_child(const char *name)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 64;
    o.backing = ORBIT_BACKING_HUGETLB;
    struct orbit_fleet *f;
    int rc = orbit_fleet_join(name, &o, &f);
    if (rc != -ENOMEM)
        return 10;
    o.backing = ORBIT_BACKING_AUTO;
    if (orbit_fleet_join(name, &o, &f) != 0 || orbit_fleet_backing(f) != ORBIT_BACKING_SHM)
        return 11;
    /* A table segment on this fleet goes to /dev/shm too, and is fully usable. */
    uint32_t geom = 1;
    struct orb_seg_request req = { .kind = 7, .table_type = TEST_TABLE_TYPE, .geometry = &geom,
                                   .geometry_len = sizeof geom, .table_bytes = 6u << 20 };
    struct orb_segment seg;
    if (orb_fleet_table_open(f, &req, &seg) != 0 || seg.backing != ORBIT_BACKING_SHM)
        return 12;
    memset(orb_seg_table(&seg), 0xab, (6u << 20) - ORB_SEG_HEADER_BYTES);
    orb_fleet_table_close(f, &seg);
    orbit_fleet_leave(f);
    return 0;
}

START_TEST(exhausted_huge_pages_are_enomem_or_a_fallback_never_sigbus)
{
    if (!can_run())
        return;
    long saved = read_long(nr);
    write_long(nr, 0);   /* shrinks to the pages in use: none free */
    const char *name = tu_fleet_name("huge0");
    pid_t kid = fork();
    if (kid == 0)
        _exit(exhausted_child(name));
    int st = tu_wait_child(kid, 30000);
    write_long(nr, saved);
    orbit_fleet_unlink(name);
    ck_assert_msg(st == 0, "child ended with %d (128+7 would be SIGBUS)", st);
}
END_TEST

/* One free page: a table needing three is refused cleanly on hugetlbfs. */
static int partial_child(const char *name)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    o.backing = ORBIT_BACKING_HUGETLB;
    struct orbit_fleet *f;
    if (orbit_fleet_join(name, &o, &f) != 0 || orbit_fleet_backing(f) != ORBIT_BACKING_HUGETLB)
        return 20;
    uint32_t geom = 1;
    struct orb_seg_request req = { .kind = 8, .table_type = TEST_TABLE_TYPE, .geometry = &geom,
                                   .geometry_len = sizeof geom, .table_bytes = 6u << 20,
                                   .populate_bytes = 6u << 20 };
    struct orb_segment seg;
    if (orb_fleet_table_open(f, &req, &seg) != -ENOMEM)
        return 21;
    orbit_fleet_leave(f);
    return 0;
}

START_TEST(a_table_larger_than_the_free_pages_is_enomem)
{
    long saved, in_use;
    if (!pool_in_use(&saved, &in_use))
        return;
    write_long(nr, in_use + 2);   /* two free: the fleet takes one */
    const char *name = tu_fleet_name("huge1");
    pid_t kid = fork();
    if (kid == 0)
        _exit(partial_child(name));
    int st = tu_wait_child(kid, 30000);
    write_long(nr, saved);
    orbit_fleet_unlink(name);
    ck_assert_msg(st == 0, "child ended with %d (128+7 would be SIGBUS)", st);
}
END_TEST

/* Racing AUTO creators with one free huge page: the first takes it, the others must open
 * that segment, not fall back to a second one of the same name in /dev/shm. */
static int racing_joiner(const char *name, struct tu_gate *gate, int report)
{
    tu_gate_pass(gate);
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    struct orbit_fleet *f;
    int rc = orbit_fleet_join(name, &o, &f);
    int said[2] = { rc == 0 ? orbit_fleet_node(f) : rc, rc == 0 ? (int)orbit_fleet_backing(f) : -1 };
    if (write(report, said, sizeof said) != (ssize_t)sizeof said)
        return 2;
    return rc == 0 ? 0 : 1;   /* exits holding the node: the parent counts distinct nodes */
}

START_TEST(racing_creators_out_of_huge_pages_make_one_fleet)
{
    long saved, in_use;
    if (!pool_in_use(&saved, &in_use))
        return;
    for (int round = 0; round < 20; round++) {
        write_long(nr, in_use + 1);   /* one free page: one creator gets it */
        const char *name = tu_fleet_name("hugerace");
        struct tu_gate gate;
        tu_gate_init(&gate);
        int report[2];
        ck_assert_int_eq(pipe(report), 0);
        pid_t kids[8];
        for (int i = 0; i < 8; i++)
            if ((kids[i] = fork()) == 0)
                _exit(racing_joiner(name, &gate, report[1]));
        tu_gate_open(&gate, 8);
        bool seen[8] = { false };
        int backing = -2;
        for (int i = 0; i < 8; i++) {
            int said[2];
            ck_assert_int_eq(read(report[0], said, sizeof said), (ssize_t)sizeof said);
            ck_assert_msg(said[0] >= 0 && said[0] < 8, "round %d: join failed: %s", round, orbit_strerror(said[0]));
            ck_assert_msg(!seen[said[0]], "round %d: node %d handed out twice", round, said[0]);
            ck_assert_msg(backing == -2 || backing == said[1], "round %d: two backings for one fleet", round);
            seen[said[0]] = true;
            backing = said[1];
        }
        for (int i = 0; i < 8; i++)
            ck_assert_int_eq(tu_wait_child(kids[i], 20000), 0);
        close(report[0]);
        close(report[1]);
        tu_gate_close(&gate);
        write_long(nr, saved);
        ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hugepages");
    TCase *tc = tcase_create("hugepages");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, exhausted_huge_pages_are_enomem_or_a_fallback_never_sigbus);
    tcase_add_test(tc, a_table_larger_than_the_free_pages_is_enomem);
    tcase_add_test(tc, racing_creators_out_of_huge_pages_make_one_fleet);
    suite_add_tcase(s, tc);
    long saved = geteuid() == 0 ? read_long(nr) : -1;
    int rc = tu_run(s);
    /* A failed test ends before it restores the pool. */
    if (saved >= 0 && read_long(nr) != saved && !try_write_long(nr, saved)) {
        fprintf(stderr, "cannot restore vm.nr_hugepages to %ld\n", saved);
        rc = 1;
    }
    return rc;
}
