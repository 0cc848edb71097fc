/* SPDX-License-Identifier: MIT */
/*
 * hostile_fleet - what another local user can do to a reaper or a scrape with
 * a fleet of its own, for the tests that show nothing of it reaches anyone else.
 * It only ever writes files it made itself, as the user it runs as.
 *
 *   hostile_fleet forge NAME [NODES [one|each [visible]]]
 *       Join NAME (capacity 4096, shared 0660 with our own group so root's
 *       reaper may open it; every fleet here is) and forge NODES LIVE node records (default 4000)
 *       that name another pid namespace, kept "alive" by OFD locks over their
 *       life bytes: one lock over them all (one, the default) or one per node
 *       (each: the kernel's lock list grows with them).
 *       With "visible", the forged nodes name this very process instead (its
 *       pid, start time and pid namespace): a reaper of this pid namespace
 *       sees them alive and watches each by its backend (a pidfd each).
 *   hostile_fleet grow NAME BYTES
 *       Join NAME (64 nodes) and make its fleet segment BYTES long (sparse),
 *       its header saying so: a well-formed segment far larger than its
 *       capacity needs, mapped whole by whoever opens it.
 *   hostile_fleet plant NAME [KIND]
 *       Make NAME's segment (a fleet of 64 nodes) of that kind (default 255:
 *       the fleet itself; or 247, the pool table) look half-created: its header says not ready and
 *       the creator-lock byte is held, as if the creator were still at work.
 *   hostile_fleet truncate NAME [BYTES]
 *       Join NAME (64 nodes) with a pool table and say "ready made NAME";
 *       then, for each line "cut" on stdin, shrink its fleet segment and its
 *       pool table to BYTES (default 4096) under whoever maps them (a reaper
 *       reading its records, a scrape), check through the library that its
 *       own member handle and a new observer get -ORBIT_ECORRUPT, never a
 *       signal (liborbit's SIGBUS guard), and say "cut NAME".
 *
 * Each prints "ready <what>" on stdout once done, then stays (holding its
 * locks) until stdin closes or it is killed; it dies with its parent. The
 * forgery is checked through the library before "ready": a layout that moved
 * on makes it fail loudly (exit 1), never pass for an attack that did not
 * happen.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include <orbit/orbit.h>
#include <orbit/inspect.h>
#include "core/fleet_internal.h"
#include "core/segment.h"

#define CAPACITY   4096
#define LIFE_BASE  (1ll << 40)        /* a member's life byte: 2^40 + node * 64 + joins % 64 (design.md §1) */
#define FORGED_NS  12345u             /* no pid namespace has this inode */

static void die(const char *what, int rc)
{
    fprintf(stderr, "hostile_fleet: %s: %s\n", what, rc < 0 ? orbit_strerror(rc) : strerror(errno));
    exit(1);
}

static int ofd_wrlock(int fd, long long off, long long len)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = off, .l_len = len };
    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* Our own fleet (of capacity nodes), and its segment of that kind mapped read-write: the file is ours. */
static struct orbit_fleet *own_fleet(const char *name, uint16_t capacity)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = capacity;
    o.node = 0;
    o.backing = ORBIT_BACKING_SHM;
    o.gid = getgid();
    struct orbit_fleet *f;
    int rc = orbit_fleet_join(name, &o, &f);
    if (rc < 0)
        die("join", rc);
    return f;
}

static void *map_segment(const char *name, unsigned kind, int *fd_out)
{
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.%u", name, kind);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die(path, 0);
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        die("mmap", 0);
    *fd_out = fd;
    return p;
}

static uint64_t own_pidns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static void forge(const char *name, int nodes, bool each, bool seen)
{
    if (nodes < 1 || nodes >= CAPACITY)
        die("NODES: 1..4095", -EINVAL);
    struct orbit_fleet *f = own_fleet(name, CAPACITY);
    int fd;
    struct orb_node_record *rec = (void *)((char *)map_segment(name, 255, &fd) + ORB_SEG_HEADER_BYTES);
    uint64_t start = 0, ns = seen ? own_pidns() : FORGED_NS;
    if (seen && orbit_process_start_time(getpid(), &start) != 0)
        die("start time", -ESRCH);
    for (int i = 1; i <= nodes; i++) {
        rec[i].pid = seen ? getpid() : 400000 + i;
        rec[i].start_time = seen ? start : 1000 + (uint64_t)i;
        rec[i].incarnation = 0x8000000000000000ull | ((uint64_t)getpid() << 16) | (uint64_t)i;
        rec[i].joins = 0;
        rec[i].pidns = ns;
        atomic_store(&rec[i].state, ORBIT_NODE_LIVE);
    }
    for (int i = each ? 1 : nodes; i <= nodes; i++) {
        long long from = LIFE_BASE + (each ? i : 1) * 64ll, len = each ? 1 : nodes * 64ll;
        int rc = ofd_wrlock(fd, from, len);
        if (rc < 0)
            die("lock", rc);
    }
    /* The forgery as any prober sees it: every forged node alive, in another pid namespace. */
    struct orbit_node_info *info = calloc(CAPACITY, sizeof *info);
    ssize_t n = info ? orbit_fleet_nodes(f, info, CAPACITY) : -ENOMEM;
    int alive = 0;
    for (ssize_t i = 0; i < n && i < CAPACITY; i++)
        alive += info[i].alive && info[i].node > 0 && info[i].pid_namespace == ns;
    if (alive != nodes) {
        fprintf(stderr, "hostile_fleet: the forgery did not take (%d of %d nodes alive): the record layout moved on\n",
                alive, nodes);
        exit(1);
    }
    free(info);
    printf("ready forged %d\n", nodes);
}

/* The header's check, as the library computes it: FNV-1a over the fields before it. */
static uint64_t header_check(const struct orb_seg_header *h)
{
    const unsigned char *p = (const unsigned char *)h;
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < offsetof(struct orb_seg_header, check); i++)
        x = (x ^ p[i]) * 0x100000001b3ull;
    return x;
}

static void grow(const char *name, long long bytes)
{
    struct orbit_fleet *f = own_fleet(name, 64);
    int fd;
    struct orb_seg_header *h = map_segment(name, 255, &fd);
    if (bytes < (long long)h->mapped_bytes || ftruncate(fd, (off_t)bytes) != 0)
        die("BYTES: at least the segment's size", -EINVAL);
    h->mapped_bytes = (uint64_t)bytes;
    h->check = header_check(h);
    /* Checked as any opener sees it: well formed, that large. */
    struct orbit_fleet *obs = NULL;
    struct orbit_segment_info si;
    int rc = orbit_fleet_observe(name, &obs);
    if (rc != 0 || orbit_fleet_segments(name, &si, 1) != 1 || (long long)si.size != bytes) {
        fprintf(stderr, "hostile_fleet: the grown segment does not open as %lld bytes (%s)\n", bytes,
                orbit_strerror(rc));
        exit(1);
    }
    orbit_fleet_leave(obs);
    (void)f;
    printf("ready grown %s %lld\n", name, bytes);
}

static void plant(const char *name, unsigned kind)
{
    struct orbit_fleet *f = own_fleet(name, 64);   /* a small fleet: planting costs the planter little */
    if (kind == 247) {
        struct orbit_pool *pool;
        int rc = orbit_pool_open(f, NULL, &pool);
        if (rc < 0)
            die("pool", rc);
    } else if (kind != 255) {
        die("KIND: 255 or 247", -EINVAL);
    }
    int fd;
    struct orb_seg_header *h = map_segment(name, kind, &fd);
    int rc = ofd_wrlock(fd, ORB_SEG_CREATOR_LOCK_OFF, 1);
    if (rc < 0)
        die("creator lock", rc);
    atomic_store(&h->ready.changes, 0);   /* as a creator leaves it until its table is initialised */
    /* Checked as an observer sees it: the segment is half-created, not waited for. */
    struct orbit_observe_opts o = ORBIT_OBSERVE_OPTS_DEFAULT;
    o.ready_wait_ms = 0;
    struct orbit_fleet *obs = NULL;
    struct orbit_pool *pool = NULL;
    rc = orbit_fleet_observe_opts(name, &o, &obs);
    if (rc == 0 && kind == 247)
        rc = orbit_pool_open_existing(obs, (uint8_t)kind, &pool);
    if (rc != -ORBIT_EAGAIN) {
        fprintf(stderr, "hostile_fleet: the planted segment does not read as half-created (%s)\n", orbit_strerror(rc));
        exit(1);
    }
    printf("ready planted %s %u\n", name, kind);
}

static struct orbit_fleet *cut_fleet;   /* truncate: the member handle of the fleet it cuts */

static void make_cuttable(const char *name)
{
    cut_fleet = own_fleet(name, 64);
    struct orbit_pool *pool;
    int rc = orbit_pool_open(cut_fleet, NULL, &pool);   /* a table a death report or a scrape maps too */
    if (rc < 0)
        die("pool", rc);
    printf("ready made %s\n", name);
}

/* Did call fail -ORBIT_ECORRUPT naming the fleet? (The first access may land on a page still there.) */
#define SAYS_CORRUPT(call, name) __extension__({                                                     \
        bool said_ = false;                                                                          \
        for (int try_ = 0; try_ < 4 && !said_; try_++)                                               \
            said_ = (call) == -ORBIT_ECORRUPT && strstr(orbit_last_error(), name) != NULL;           \
        said_; })

static void cut(const char *name, long long bytes)
{
    static const unsigned kinds[] = { 255, ORBIT_POOL_KIND };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/dev/shm/orbit.%s.%u", name, kinds[i]);
        if (truncate(path, (off_t)bytes) != 0)
            die(path, 0);
    }
    /* As a member and a tool see it now: the guard's -ORBIT_ECORRUPT, naming the fleet. */
    struct orbit_node_info nodes[64];
    struct orbit_fleet *obs = NULL;
    if (!SAYS_CORRUPT(orbit_fleet_nodes(cut_fleet, nodes, 64), name) ||
        !SAYS_CORRUPT(orbit_fleet_observe(name, &obs), name)) {
        fprintf(stderr, "hostile_fleet: the cut fleet does not read as corrupt (%s)\n", orbit_last_error());
        exit(1);
    }
    printf("cut %s\n", name);
}

/* Until stdin closes (or a kill); a line "cut" cuts the truncate verb's fleet. */
static void stay(const char *name, long long cut_bytes)
{
    char line[16];
    size_t n = 0;
    for (char c; read(0, &c, 1) > 0;) {
        if (c != '\n') {
            if (n < sizeof line - 1)
                line[n++] = c;
            continue;
        }
        line[n] = 0;
        n = 0;
        if (cut_fleet && strcmp(line, "cut") == 0)
            cut(name, cut_bytes);
    }
}

int main(int argc, char **argv)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* set here: a uid change (setpriv) clears the parent's */
    signal(SIGPIPE, SIG_IGN);   /* a parent that read "ready" only may close our stdout: not a death */
    if (getppid() == 1)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "forge") == 0)
        forge(argv[2], argc > 3 ? atoi(argv[3]) : 4000, argc > 4 && strcmp(argv[4], "each") == 0,
              argc > 5 && strcmp(argv[5], "visible") == 0);
    else if (argc == 4 && strcmp(argv[1], "grow") == 0)
        grow(argv[2], atoll(argv[3]));
    else if (argc >= 3 && strcmp(argv[1], "plant") == 0)
        plant(argv[2], argc > 3 ? (unsigned)atoi(argv[3]) : 255);
    else if (argc >= 3 && strcmp(argv[1], "truncate") == 0)
        make_cuttable(argv[2]);
    else {
        fprintf(stderr, "usage: hostile_fleet forge NAME [NODES [one|each [visible]]] | grow NAME BYTES | "
                "plant NAME [KIND] | truncate NAME [BYTES]\n");
        return 2;
    }
    stay(argv[2], argc > 3 && strcmp(argv[1], "truncate") == 0 ? atoll(argv[3]) : 4096);
    return 0;
}
