/* SPDX-License-Identifier: MIT */
/*
 * Files under a fleet's name that orbit did not make, as another local user
 * plants them; each test in a private mount namespace with its own /dev/shm
 * (root; CK_FORK gives each test its own process), so nothing another suite
 * runs sees them.
 *  - a table segment renamed into a root 0600 fleet by another uid, one of
 *    them half-created with its creator lock held: not listed, not opened,
 *    no death report waits on it (orbitctl show/reap/metrics, joins);
 *  - a 0640 fleet shared with a group: -rw-r-----, and a group member of
 *    another uid runs orbitctl show, metrics and top with read access alone;
 *  - a hard link planted at a creation lock's name is never chowned or
 *    chmodded; cleanup matches exact fleet names and keeps a live creator's
 *    file, judged by its kernel lock, even from another pid namespace.
 */
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include "testutil.h"
#include "ns.h"
#include <orbit/orbit.h>
#include "core/segment.h"

static const char *orbitctl_bin(void) { return getenv("ORBITCTL_BIN"); }

/* Our own /dev/shm in a mount namespace of this test's process; no huge pages. */
static bool private_shm(const char *test)
{
    if (geteuid() != 0) {
        tu_skip(test);
        return false;
    }
    ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
    ck_assert_int_eq(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    ck_assert_int_eq(mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"), 0);
    setenv("ORBIT_HUGETLB_DIR", "", 1);
    return true;
}

static int drop_to(uid_t uid, gid_t gid)
{
    return setgroups(1, &gid) == 0 && setresgid(gid, gid, gid) == 0 && setresuid(uid, uid, uid) == 0 ? 0 : -1;
}

/* Run argv with stdout and stderr in out (as uid/gid when uid is not 0); the wait status. */
static int run_as(uid_t uid, gid_t gid, char *const argv[], const char *out)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd < 0 || fchown(fd, uid, gid) != 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        if (uid && drop_to(uid, gid) != 0)
            _exit(125);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(kid, &st, 0);
    return st;
}


/*
 * The attacker (nobody): its own 0660 fleet's streams segment renamed to the
 * victim's kind 200, and its admission segment, marked not ready with its
 * creator lock held, to kind 201. It stays alive holding that lock.
 */
static void plant(const char *victim, struct tu_gate *planted, struct tu_gate *done)
{
    if (drop_to(65534, 65534) != 0)
        _exit(3);
    char mine[80], from[300], to[300];
    snprintf(mine, sizeof mine, "a-%s", victim);
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    o.backing = ORBIT_BACKING_SHM;
    o.mode = 0660;
    struct orbit_fleet *f;
    struct orbit_streams *s;
    struct orbit_admission *a;
    if (orbit_fleet_join(mine, &o, &f) || orbit_streams_open(f, NULL, &s) || orbit_admission_open(f, NULL, &a))
        _exit(4);
    snprintf(from, sizeof from, "/dev/shm/orbit.%s.246", mine);
    snprintf(to, sizeof to, "/dev/shm/orbit.%s.200", victim);
    if (rename(from, to) != 0)
        _exit(5);
    snprintf(from, sizeof from, "/dev/shm/orbit.%s.245", mine);
    snprintf(to, sizeof to, "/dev/shm/orbit.%s.201", victim);
    int fd = open(from, O_RDWR);
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = ORB_SEG_CREATOR_LOCK_OFF, .l_len = 1 };
    struct orb_seg_header *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd < 0 || h == MAP_FAILED || fcntl(fd, F_OFD_SETLK, &fl) != 0)
        _exit(6);
    atomic_store(&h->ready.changes, 0);   /* "still being created", its creator alive */
    if (rename(from, to) != 0)
        _exit(7);
    tu_gate_open(planted, 1);
    tu_gate_pass(done);
    _exit(0);
}

START_TEST(a_table_planted_by_another_user_is_not_the_fleets)
{
    if (!private_shm("a_table_planted_by_another_user_is_not_the_fleets: needs root"))
        return;
    const char *victim = tu_fleet_name("victim");
    struct orbit_fleet *f = tu_join(victim, 4, 0, 0, ORBIT_BACKING_SHM);   /* root, 0600 */
    struct orbit_pool *pool;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &pool), 0);
    struct tu_gate planted, done, joined;
    tu_gate_init(&planted);
    tu_gate_init(&done);
    tu_gate_init(&joined);
    fflush(NULL);
    pid_t attacker = fork();
    if (attacker == 0)
        plant(victim, &planted, &done);
    tu_gate_pass(&planted);
    pid_t doomed = fork();   /* a member of the victim fleet, killed: a death to report */
    if (doomed == 0) {
        struct orbit_fleet *g = tu_join(victim, 4, 1, 0, ORBIT_BACKING_SHM);
        struct orbit_pool *p;
        if (orbit_pool_open(g, NULL, &p) != 0)
            _exit(1);
        tu_gate_open(&joined, 1);
        pause();
        _exit(0);
    }
    tu_gate_pass(&joined);
    kill(doomed, SIGKILL);
    waitpid(doomed, NULL, 0);

    /* The library: a member's open and an observer's open of the planted kinds are refused, named. */
    struct orbit_stream_spec spec = ORBIT_STREAM_SPEC_DEFAULT;
    spec.kind = 200;
    struct orbit_streams *s = NULL;
    ck_assert_int_eq(orbit_streams_open(f, &spec, &s), -EACCES);
    char planted_path[300];
    snprintf(planted_path, sizeof planted_path, "/dev/shm/orbit.%s.200", victim);
    ck_assert_msg(strstr(orbit_last_error(), planted_path), "last error: %s", orbit_last_error());
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(victim, &obs), 0);
    ck_assert_int_eq(orbit_streams_open_existing(obs, 200, &s), -EACCES);
    struct orbit_table_info t[8];
    ssize_t n = orbit_fleet_tables(obs, t, 8);
    ck_assert_int_eq(n, 1);   /* the pool only */
    ck_assert_uint_eq(t[0].kind, 247);
    struct orbit_segment_info si[8];
    ck_assert_int_eq(orbit_fleet_segments(victim, si, 8), 2);   /* fleet and pool */
    orbit_fleet_leave(obs);

    /* The tools, as root sees the fleet. */
    char out[64];
    snprintf(out, sizeof out, "/tmp/t-trust-%d", (int)getpid());
    char *show[] = { (char *)orbitctl_bin(), "--json", "show", (char *)victim, NULL };
    int st = run_as(0, 0, show, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "show: %#x", st);
    ck_assert(!tu_file_has(out, "\"kind\":200") && !tu_file_has(out, "\"kind\":201"));
    ck_assert(tu_file_has(out, "\"kind\":247"));
    char *metrics[] = { (char *)orbitctl_bin(), "metrics", (char *)victim, NULL };
    st = run_as(0, 0, metrics, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "metrics: %#x", st);
    ck_assert(!tu_file_has(out, "kind=\"200\"") && !tu_file_has(out, "kind=\"201\""));
    /* The death report maps neither plant and waits on neither (its creator lock is held). */
    char *reap[] = { (char *)orbitctl_bin(), "reap", (char *)victim, NULL };
    int64_t t0 = tu_now_ns();
    st = run_as(0, 0, reap, out);
    int64_t took_ms = (tu_now_ns() - t0) / 1000000;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reap: %#x", st);
    ck_assert_msg(tu_file_has(out, "1 dead node"), "reap did not report the death");
    ck_assert_msg(took_ms < 3000, "reap took %lld ms", (long long)took_ms);
    /* A reset of every table leaves the plant as it was (its epoch is the attacker's). */
    uint64_t before, after;
    int pfd = open(planted_path, O_RDONLY);
    ck_assert_int_ge(pfd, 0);
    ck_assert_int_eq(pread(pfd, &before, 8, offsetof(struct orb_seg_header, epoch)), 8);
    char *reset[] = { (char *)orbitctl_bin(), "reset", (char *)victim, "--force", NULL };
    st = run_as(0, 0, reset, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reset: %#x", st);
    ck_assert_int_eq(pread(pfd, &after, 8, offsetof(struct orb_seg_header, epoch)), 8);
    ck_assert_uint_eq(before, after);
    close(pfd);

    tu_gate_open(&done, 1);
    ck_assert_int_eq(tu_wait_child(attacker, 5000), 0);
    orbit_pool_close(pool);
    orbit_fleet_leave(f);
    unlink(out);
}
END_TEST

#define OBSERVER_UID 4243   /* another uid, in the fleet's group (TN_SHARED_GID) only */

/* opts.mode with opts.gid: 0640 is -rw-r-----; the group reads with show, metrics and top. */
START_TEST(a_0640_group_observer_reads_with_read_access_alone)
{
    if (!private_shm("a_0640_group_observer_reads_with_read_access_alone: needs root"))
        return;
    const char *name = tu_fleet_name("ro");
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 4;
    o.backing = ORBIT_BACKING_SHM;
    o.mode = 0640;
    o.gid = TN_SHARED_GID;
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), 0);
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    ck_assert_int_eq(orbit_pool_open(f, NULL, &pool), 0);
    ck_assert_int_eq(orbit_streams_open(f, NULL, &streams), 0);
    orbit_id id;
    orbit_key key = { .lo = 7, .hi = 7 };
    ck_assert_int_eq(orbit_pool_register(pool, key, 2, &id), 0);
    const unsigned kinds[] = { 255, 247, 246 };
    for (int i = 0; i < 3; i++) {
        char path[300];
        struct stat st;
        snprintf(path, sizeof path, "/dev/shm/orbit.%s.%u", name, kinds[i]);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg((st.st_mode & 0777) == 0640 && st.st_gid == TN_SHARED_GID, "%s: mode %o gid %u", path,
                      st.st_mode & 0777, (unsigned)st.st_gid);
    }
    char out[64];
    snprintf(out, sizeof out, "/tmp/t-trust-ro-%d", (int)getpid());
    char *show[] = { (char *)orbitctl_bin(), "show", (char *)name, NULL };
    int st = run_as(OBSERVER_UID, TN_SHARED_GID, show, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && tu_file_has(out, "pool"), "show as the group: %#x", st);
    char *metrics[] = { (char *)orbitctl_bin(), "metrics", (char *)name, NULL };
    st = run_as(OBSERVER_UID, TN_SHARED_GID, metrics, out);
    char up[160];
    snprintf(up, sizeof up, "orbit_fleet_up{fleet=\"%s\",generation=\"1\"} 1", name);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && tu_file_has(out, up), "metrics as the group: %#x", st);
    char *top[] = { (char *)orbitctl_bin(), "top", (char *)name, "--interval", "0.1", "--count", "2", NULL };
    st = run_as(OBSERVER_UID, TN_SHARED_GID, top, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && tu_file_has(out, "orbit top"), "top as the group: %#x", st);
    /* What would change the fleet for others is refused to the reader, named. */
    char *reap[] = { (char *)orbitctl_bin(), "reap", (char *)name, NULL };
    st = run_as(OBSERVER_UID, TN_SHARED_GID, reap, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "reap as a reader: %#x", st);
    orbit_streams_close(streams);
    orbit_pool_close(pool);
    orbit_fleet_leave(f);
    unlink(out);
}
END_TEST

/*
 * A hard link to a file the fleet's creator owns, at a creation lock's name
 * (what another user could plant where fs.protected_hardlinks=0; root plants
 * it here, so the host's setting is left alone): the creator neither chowns
 * nor chmods it.
 */
START_TEST(a_hard_link_at_the_lock_name_is_never_chowned)
{
    if (!private_shm("a_hard_link_at_the_lock_name_is_never_chowned: needs root"))
        return;
    const char *name = tu_fleet_name("hlink");
    char secret[300], lock[300];
    snprintf(secret, sizeof secret, "/dev/shm/secret-%d", (int)getpid());
    snprintf(lock, sizeof lock, "/dev/shm/orbit.%s.255.lock", name);
    int fd = open(secret, O_RDWR | O_CREAT | O_EXCL, 0600);   /* root's, 0600 */
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(link(secret, lock), 0);   /* root may link anything; the check is the creator's */
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.backing = ORBIT_BACKING_SHM;
    o.gid = TN_SHARED_GID;
    struct orbit_fleet *f;
    ck_assert_int_eq(orbit_fleet_join(name, &o, &f), 0);
    struct stat st;
    ck_assert_int_eq(stat(secret, &st), 0);
    ck_assert_msg((st.st_mode & 0777) == 0600 && st.st_gid == 0, "the linked file became mode %o group %u",
                  st.st_mode & 0777, (unsigned)st.st_gid);
    orbit_fleet_leave(f);
    unlink(lock);
    unlink(secret);
}
END_TEST

/* Half-built files of fleet "N.x" are not fleet "N"'s: unlink N leaves them. */
START_TEST(cleanup_matches_the_exact_fleet_name)
{
    if (!private_shm("cleanup_matches_the_exact_fleet_name: needs root"))
        return;
    const char *name = tu_fleet_name("exact");
    char other[300], mine[300];
    snprintf(other, sizeof other, "/dev/shm/orbit.%s.x.3.tmp.999999.1", name);   /* fleet "<name>.x" */
    snprintf(mine, sizeof mine, "/dev/shm/orbit.%s.3.tmp.999999.1", name);
    for (int i = 0; i < 2; i++) {
        int fd = open(i ? mine : other, O_RDWR | O_CREAT | O_EXCL, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
    }
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    ck_assert_int_eq(access(mine, F_OK), -1);
    ck_assert_msg(access(other, F_OK) == 0, "fleet %s.x's half-built file went with fleet %s", name, name);
    unlink(other);
}
END_TEST

/*
 * A creator in another pid namespace, mid-creation (its file named with its
 * pid there, a pid nothing here has, its creator lock held): unlink keeps its
 * file. Judged by the kernel's lock, not by kill(pid, 0) here.
 */
START_TEST(a_creator_in_another_pid_namespace_keeps_its_file)
{
    if (!private_shm("a_creator_in_another_pid_namespace_keeps_its_file: needs root"))
        return;
    const char *name = tu_fleet_name("pidns");
    struct tu_gate made, done;
    tu_gate_init(&made);
    tu_gate_init(&done);
    char path[300];
    fflush(NULL);
    pid_t outer = fork();
    if (outer == 0) {
        if (unshare(CLONE_NEWPID) != 0)
            _exit(3);
        pid_t inner = fork();
        if (inner == 0) {
            /* Our pid in this namespace is 1; name a pid that no process of the host has. */
            pid_t shown = 1;
            for (pid_t p = 30000; p < 32767; p++)
                if (kill(p, 0) != 0 && errno == ESRCH) {
                    shown = p;
                    break;
                }
            snprintf(path, sizeof path, "/dev/shm/orbit.%s.3.tmp.%d.1", name, (int)shown);
            int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
            struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = ORB_SEG_CREATOR_LOCK_OFF,
                                .l_len = 1 };
            if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) != 0)
                _exit(4);
            if (write(made.fd[1], path, sizeof path) != (ssize_t)sizeof path)
                _exit(5);
            tu_gate_pass(&done);
            _exit(0);
        }
        int ist;
        waitpid(inner, &ist, 0);
        _exit(WIFEXITED(ist) ? WEXITSTATUS(ist) : 6);
    }
    ck_assert_int_eq(read(made.fd[0], path, sizeof path), (ssize_t)sizeof path);
    orbit_fleet_unlink(name);
    ck_assert_msg(access(path, F_OK) == 0, "a live creator's file was removed: %s", path);
    tu_gate_open(&done, 1);
    ck_assert_int_eq(tu_wait_child(outer, 5000), 0);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);   /* its creator gone (lock dropped): removed */
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trust");
    TCase *root = tcase_create("root");
    tcase_set_tags(root, TU_OPTIONAL);
    tcase_set_timeout(root, 60);
    tcase_add_test(root, a_table_planted_by_another_user_is_not_the_fleets);
    tcase_add_test(root, a_0640_group_observer_reads_with_read_access_alone);
    tcase_add_test(root, a_hard_link_at_the_lock_name_is_never_chowned);
    tcase_add_test(root, cleanup_matches_the_exact_fleet_name);
    tcase_add_test(root, a_creator_in_another_pid_namespace_keeps_its_file);
    suite_add_tcase(s, root);
    return tu_run(s);
}
