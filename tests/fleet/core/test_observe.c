/* SPDX-License-Identifier: MIT */
/*
 * orbit_fleet_observe_opts: an observer told how long to wait for a segment
 * whose creator is still at work. A real creator process is stopped between
 * linking its segment and publishing it (its initialiser waits on a pipe), so
 * the segment is exactly what a half-made or planted one looks like: not
 * ready, its creation lock held by a live process.
 */
#include <errno.h>
#include <poll.h>
#include "testutil.h"
#include "core/fleet_internal.h"
#include "core/segment.h"
#include <orbit/inspect.h>
#include <orbit/pool.h>

/*
 * A creator held inside its initialiser until the test writes a byte to (or
 * closes) its pipe. Kind 9: a bare segment, orb_segment_open stopped in its
 * initialiser. Kind 255 (the fleet) or 247 (a pool): made for real, then put
 * back mid-creation as its creator sees it (ready 0, the creation lock held),
 * and published again on the byte.
 */
struct creator { pid_t pid; int go; };

static int wait_for_go(struct orb_segment *seg, void *ctx)
{
    (void)seg;
    char c;
    int rd = *(int *)ctx;
    return read(rd, &c, 1) >= 0 ? 0 : -EIO;
}

static int creator_lock(int fd, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = ORB_SEG_CREATOR_LOCK_OFF, .l_len = 1 };
    return fcntl(fd, F_OFD_SETLK, &fl);
}

static int hold_mid_creation(const char *name, uint8_t kind, int go)
{
    struct orbit_fleet *f;
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.backing = ORBIT_BACKING_SHM;
    struct orbit_pool *pool;
    if (orbit_fleet_join(name, &o, &f) != 0 || (kind == 247 && orbit_pool_open(f, NULL, &pool) != 0))
        return 2;
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.%u", name, (unsigned)kind);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct orb_seg_header *h = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED || creator_lock(fd, F_WRLCK) != 0)
        return 3;
    atomic_store(&h->ready.changes, 0);
    char c;
    if (read(go, &c, 1) < 0)
        return 4;
    atomic_store(&h->ready.changes, 1);   /* published, then the lock goes: as finish_create does */
    orb_futex_wake_all(&h->ready.changes);
    creator_lock(fd, F_UNLCK);
    return 0;
}

/* Fork the creator; returns once its segment is there, not ready. */
static struct creator creator_start(const char *name, uint8_t kind)
{
    int go[2], ready[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(go[1]);
        close(ready[0]);
        if (kind != 9) {
            int rc = hold_mid_creation(name, kind, go[0]);
            _exit(rc);
        }
        uint32_t geom = 1;
        struct orb_seg_request req = { .fleet = name, .kind = kind, .table_type = 7, .fleet_capacity = 64,
                                       .geometry = &geom, .geometry_len = sizeof geom, .table_bytes = 8192,
                                       .backing = ORBIT_BACKING_SHM, .gid = -1, .init = wait_for_go,
                                       .ctx = &go[0] };
        struct orb_segment seg;
        _exit(orb_segment_open(&req, &seg) == 0 ? 0 : 4);
    }
    close(go[0]);
    close(ready[1]);
    close(ready[0]);
    /* Linked and not ready: what every opener finds while a creator is at work. */
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.%u", name, (unsigned)kind);
    int64_t end = tu_now_ns() + 5000000000LL;
    bool busy = false;
    while (!busy && tu_now_ns() < end) {
        struct orb_seg_header h;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        busy = fd >= 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && h.magic == ORB_SEG_MAGIC &&
               atomic_load(&h.ready.changes) == 0;
        if (fd >= 0)
            close(fd);
        if (!busy)
            usleep(1000);
    }
    ck_assert_msg(busy, "%s did not show up half-created", path);
    return (struct creator){ pid, go[1] };
}

static void creator_finish(struct creator *c)
{
    ck_assert_int_eq(write(c->go, "g", 1), 1);
    close(c->go);
    ck_assert_int_eq(tu_wait_child(c->pid, 5000), 0);
}

static int observe_within(const char *name, int ms, struct orbit_fleet **f)
{
    struct orbit_observe_opts o = ORBIT_OBSERVE_OPTS_DEFAULT;
    o.ready_wait_ms = ms;
    return orbit_fleet_observe_opts(name, &o, f);
}

START_TEST(a_fleet_still_being_created_is_eagain_at_once_naming_its_file)
{
    const char *name = tu_fleet_name("obsbusy");
    struct creator c = creator_start(name, ORB_FLEET_KIND);
    struct orbit_fleet *f = NULL;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(observe_within(name, 0, &f), -ORBIT_EAGAIN);
    int64_t took = tu_now_ns() - t0;
    ck_assert_msg(took < 100000000LL, "a 0 ms observe took %lld us", (long long)(took / 1000));
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", name);
    ck_assert_msg(strstr(orbit_last_error(), path) && strstr(orbit_last_error(), "orbit_fleet_observe_opts"),
                  "orbit_last_error: %s", orbit_last_error());
    /* A bound is a bound: 300 ms, then -ORBIT_EAGAIN (a live creator is not taken for a dead one). */
    t0 = tu_now_ns();
    ck_assert_int_eq(observe_within(name, 300, &f), -ORBIT_EAGAIN);
    took = tu_now_ns() - t0;
    ck_assert_msg(took >= 290000000LL && took < 3000000000LL, "a 300 ms observe took %lld ms",
                  (long long)(took / 1000000));
    creator_finish(&c);
    orbit_fleet_unlink(name);
}
END_TEST

/* A creator that publishes while an observer waits: the observer gets the table, no error. */
START_TEST(a_creator_that_publishes_within_the_wait_is_waited_for)
{
    const char *name = tu_fleet_name("obswait");
    struct creator c = creator_start(name, 9);
    pid_t late = fork();
    if (late == 0) {
        usleep(100000);
        _exit(write(c.go, "g", 1) == 1 ? 0 : 1);
    }
    struct orb_segment seg;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orb_segment_open_existing_within(name, 9, 3000, false, &seg), 0);
    ck_assert(tu_now_ns() - t0 >= 50000000LL);
    orb_segment_close(&seg);
    ck_assert_int_eq(tu_wait_child(late, 5000), 0);
    close(c.go);
    ck_assert_int_eq(tu_wait_child(c.pid, 5000), 0);
    orbit_fleet_unlink(name);
}
END_TEST

/* The bound holds for every table opened through the handle: opens, death reports, accounting. */
START_TEST(tables_opened_through_the_handle_are_not_waited_for_either)
{
    const char *name = tu_fleet_name("obstable");
    struct creator c = creator_start(name, 247);
    struct orbit_fleet *f = NULL;
    ck_assert_int_eq(observe_within(name, 0, &f), 0);
    struct orbit_pool *pool = NULL;
    int64_t t0 = tu_now_ns();
    ck_assert_int_eq(orbit_pool_open_existing(f, 247, &pool), -ORBIT_EAGAIN);
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.247", name);
    ck_assert_msg(strstr(orbit_last_error(), path), "orbit_last_error: %s", orbit_last_error());
    struct orbit_reclaim rec;
    ck_assert_int_eq(orbit_fleet_account(f, 0, 1, &rec), 0);
    ck_assert_uint_eq(rec.tables, 0);   /* a table not made yet holds nothing of anyone */
    /* A death report skips it: no dead member can hold anything in a table nobody could use yet. */
    struct orbit_node_info n[64];
    ck_assert_int_eq(orbit_fleet_nodes(f, n, 64), 1);
    ck_assert_int_eq(orbit_fleet_node_dead(f, n[0].node, n[0].incarnation + 1), 0);
    int64_t took = tu_now_ns() - t0;
    ck_assert_msg(took < 1000000000LL, "opens, accounting and a report took %lld ms", (long long)(took / 1000000));
    creator_finish(&c);
    /* Published now: the next accounting (its cache rebuilt) and open see it. */
    ck_assert_int_eq(orbit_pool_open_existing(f, 247, &pool), 0);
    orbit_pool_close(pool);
    ck_assert_int_eq(orbit_fleet_account(f, 0, 1, &rec), 0);
    ck_assert_uint_eq(rec.tables, 1);
    orbit_fleet_leave(f);
    orbit_fleet_unlink(name);
}
END_TEST

START_TEST(bad_observe_options_are_malformed)
{
    struct orbit_fleet *f = NULL;
    struct orbit_observe_opts o = ORBIT_OBSERVE_OPTS_DEFAULT;
    o.ready_wait_ms = -2;
    ck_assert_int_eq(orbit_fleet_observe_opts("t-any", &o, &f), -ORBIT_EMALFORMED);
    ck_assert(strstr(orbit_last_error(), "ready_wait_ms -2"));
    o.ready_wait_ms = ORBIT_OBSERVE_WAIT_MAX_MS + 1;
    ck_assert_int_eq(orbit_fleet_observe_opts("t-any", &o, &f), -ORBIT_EMALFORMED);
    o.ready_wait_ms = 0;
    o.flags = 1;
    ck_assert_int_eq(orbit_fleet_observe_opts("t-any", &o, &f), -ORBIT_EMALFORMED);
    o.flags = 0;
    o.resv[3] = 1;
    ck_assert_int_eq(orbit_fleet_observe_opts("t-any", &o, &f), -ORBIT_EMALFORMED);
    ck_assert(strstr(orbit_last_error(), "resv[3]"));
    o.resv[3] = 0;
    ck_assert_int_eq(orbit_fleet_observe_opts("t-no-such-fleet-here", &o, &f), -ENOENT);
    ck_assert_int_eq(orbit_fleet_observe_opts("t-any", &o, NULL), -ORBIT_EMALFORMED);
    ck_assert_ptr_null(f);
}
END_TEST

/* The snapshot names the member's pid namespace, as orbit_fleet_nodes does, without a lock probe. */
START_TEST(a_snapshot_names_the_pid_namespace)
{
    const char *name = tu_fleet_name("obsns");
    struct orbit_fleet *m = tu_join(name, 4, -1, 0, ORBIT_BACKING_SHM);
    struct orbit_fleet *f = NULL;
    ck_assert_int_eq(observe_within(name, 0, &f), 0);
    struct orbit_node_info n[4];
    ck_assert_int_eq(orbit_fleet_nodes(f, n, 4), 1);
    struct orbit_node_snapshot s;
    ck_assert_int_eq(orbit_fleet_node_snapshot(f, n[0].node, &s), 0);
    ck_assert_uint_ne(s.pid_namespace, 0);
    ck_assert_uint_eq(s.pid_namespace, n[0].pid_namespace);
    ck_assert_uint_eq(s.resv[0] | s.resv[1] | s.resv[2], 0);
    orbit_fleet_leave(f);
    orbit_fleet_leave(m);
    orbit_fleet_unlink(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("observe");
    TCase *tc = tcase_create("observe");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, a_fleet_still_being_created_is_eagain_at_once_naming_its_file);
    tcase_add_test(tc, a_creator_that_publishes_within_the_wait_is_waited_for);
    tcase_add_test(tc, tables_opened_through_the_handle_are_not_waited_for_either);
    tcase_add_test(tc, bad_observe_options_are_malformed);
    tcase_add_test(tc, a_snapshot_names_the_pid_namespace);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
