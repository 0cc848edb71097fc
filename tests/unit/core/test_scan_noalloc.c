/* SPDX-License-Identifier: MIT */
/*
 * Listing fleets and segments allocates nothing. The reaper's threads list a
 * fleet's segments while the process hosting the reaper may fork its members,
 * and a child forked while another thread holds an allocator lock finds that
 * lock taken for good. This program replaces malloc (glibc supports that: its
 * own fopen and opendir call ours) and counts the calls made by this thread
 * around orbit_fleet_list, orbit_fleet_segments and orbit_fleet_unlink, which
 * read the backing directories and /proc/self/mounts (the hugetlbfs mount).
 * Not built with a sanitizer, which replaces malloc itself.
 */
#include <stdlib.h>
#include <orbit/orbit.h>
#include "testutil.h"

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static _Thread_local bool counting;
static _Thread_local unsigned allocations;

void *malloc(size_t n)
{
    allocations += counting;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    allocations += counting;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    allocations += counting;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}

START_TEST(listing_allocates_nothing)
{
    const char *name = tu_fleet_name("noalloc");
    struct orbit_fleet *f = tu_join(name, 8, -1, 0, ORBIT_BACKING_SHM);
    unsetenv("ORBIT_HUGETLB_DIR");   /* the hugetlbfs mount found in /proc/self/mounts, as a reaper does */
    struct orbit_segment_info segs[8];
    ck_assert_int_ge(orbit_fleet_list(NULL, 0), 1);   /* once first: whatever is made once per process */

    counting = true;
    allocations = 0;
    ssize_t fleets = orbit_fleet_list(NULL, 0);
    ssize_t n = orbit_fleet_segments(name, segs, 8);
    counting = false;
    ck_assert_int_ge(fleets, 1);
    ck_assert_int_eq(n, 1);
    ck_assert_msg(allocations == 0, "listing fleets and segments: %u allocations", allocations);

    orbit_fleet_leave(f);
    counting = true;
    int rc = orbit_fleet_unlink(name);   /* scans for half-built files of the fleet as well */
    counting = false;
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(allocations == 0, "orbit_fleet_unlink: %u allocations", allocations);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scan_noalloc");
    TCase *tc = tcase_create("listing");
    tcase_add_test(tc, listing_allocates_nothing);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
