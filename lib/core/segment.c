/* SPDX-License-Identifier: MIT */
/* Named shared-memory segments on hugetlbfs or /dev/shm, and anonymous ones. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include "error_internal.h"
#include "guard_sigbus.h"
#include <orbit/version.h>
#include "segment.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

#define SHM_DIR ORB_SHM_DIR
#define READY_WAIT_MS 10000   /* an opener gives up on a live but stuck creator after this */

/* Is the /proc/self/mounts line a hugetlbfs mount? Its mount point into dir then. */
static bool hugetlb_line(const char *line, char *dir, size_t len)
{
    const char *f[3];
    size_t n[3];
    for (int i = 0; i < 3; i++) {   /* source, mount point, type: space-separated, spaces in them octal */
        while (*line == ' ')
            line++;
        f[i] = line;
        while (*line && *line != ' ')
            line++;
        n[i] = (size_t)(line - f[i]);
    }
    if (n[2] != 9 || memcmp(f[2], "hugetlbfs", 9) != 0 || n[1] == 0 || n[1] >= len)
        return false;
    memcpy(dir, f[1], n[1]);
    dir[n[1]] = '\0';
    return true;
}

/*
 * The first hugetlbfs mount point, into dir. Read with read(2) into a buffer on the
 * stack, not stdio: no allocation, as the segment listings that call it (a reaper
 * thread's, while its host process may fork) must not take an allocator lock.
 */
static bool hugetlb_mount(char *dir, size_t len)
{
    int fd = open("/proc/self/mounts", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[2048];
    size_t have = 0;
    bool found = false, skipping = false;   /* skipping: the rest of a line longer than buf */
    for (ssize_t n; !found && (n = read(fd, buf + have, sizeof buf - 1 - have)) > 0;) {
        char *line = buf, *end = buf + have + (size_t)n, *nl;
        while (!found && (nl = memchr(line, '\n', (size_t)(end - line))) != NULL) {
            *nl = '\0';
            found = !skipping && hugetlb_line(line, dir, len);
            skipping = false;
            line = nl + 1;
        }
        have = (size_t)(end - line);
        if (have == sizeof buf - 1) {
            have = 0;   /* no line end in a full buffer: no mount point fits our 256 bytes anyway */
            skipping = true;
        }
        memmove(buf, line, have);
    }
    close(fd);
    return found;
}

const char *orb_hugetlb_dir(void)
{
    static _Thread_local char dir[256];
    const char *env = getenv("ORBIT_HUGETLB_DIR");
    if (env) {
        struct statfs sf;
        if (!*env || statfs(env, &sf) != 0 || sf.f_type != HUGETLBFS_MAGIC)
            return NULL;
        snprintf(dir, sizeof dir, "%s", env);
        return dir;
    }
    return hugetlb_mount(dir, sizeof dir) ? dir : NULL;
}

int orb_segment_path(enum orbit_backing backing, const char *fleet, uint8_t kind, char *buf, size_t len)
{
    const char *dir = backing == ORBIT_BACKING_HUGETLB ? orb_hugetlb_dir() : SHM_DIR;
    if (!dir)
        return -ENOENT;
    int n = snprintf(buf, len, "%s/orbit.%s.%u", dir, fleet, (unsigned)kind);
    return n < 0 || (size_t)n >= len ? -ORBIT_ETOOLARGE : 0;
}

uint64_t orb_seg_header_check(const struct orb_seg_header *h)
{
    const unsigned char *p = (const unsigned char *)h;
    uint64_t x = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < offsetof(struct orb_seg_header, check); i++)
        x = (x ^ p[i]) * 0x100000001b3ull;
    return x;
}

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

static int populate(void *base, size_t mapped, size_t page, size_t off, size_t len)
{
    if (len == 0)
        return 0;
    size_t start = off / page * page, end = round_up(off + len, page);
    if (end > mapped)
        end = mapped;
    if (start >= end)
        return 0;
    /* On hugetlbfs exhaustion this fails with EFAULT instead of a later SIGBUS. */
    if (madvise((char *)base + start, end - start, MADV_POPULATE_WRITE) != 0)
        return errno == EINVAL ? -ORBIT_ENOTSUP : -ENOMEM;
    return 0;
}

int orb_segment_populate(struct orb_segment *seg, size_t off, size_t len)
{
    if (!seg || !seg->base || off > seg->mapped || len > seg->mapped - off)
        return -ORBIT_EMALFORMED;
    int rc = populate(seg->base, seg->mapped, seg->page, off, len);
    if (rc < 0)
        orb_seg_no_room(rc, seg->path, seg->fd, len);
    return rc;
}

static void fill_header(struct orb_seg_header *h, const struct orb_seg_request *req, size_t mapped)
{
    memset(h, 0, sizeof *h);
    h->magic = ORB_SEG_MAGIC;
    h->version = ORB_SEG_VERSION;
    h->header_bytes = ORB_SEG_HEADER_BYTES;
    h->kind = req->kind;
    h->table_type = req->table_type;
    h->fleet_capacity = req->fleet_capacity;
    h->geometry_len = req->geometry_len;
    h->table_bytes = req->table_bytes;
    h->mapped_bytes = mapped;
    h->creator_pid = (int32_t)getpid();
    h->creator_version = ORBIT_VERSION_NUMBER;
    if (req->geometry_len)
        memcpy(h->geometry, req->geometry, req->geometry_len);
    h->check = orb_seg_header_check(h);
}

/*
 * The creator holds a kernel lock on a byte of its file until ready is
 * published: an opener parked on ready learns of a creator that died first
 * from the kernel, in any pid namespace, never from its pid.
 */
static int creator_lock(int fd, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = ORB_SEG_CREATOR_LOCK_OFF, .l_len = 1 };
    return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

static bool creator_gone(int fd)
{
    struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = ORB_SEG_CREATOR_LOCK_OFF, .l_len = 1 };
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

/* Run the table's initialiser, then publish ready: openers parked on it wake. */
static int finish_create(struct orb_segment *seg, const struct orb_seg_request *req)
{
    struct orb_seg_header *h = orb_seg_hdr(seg);
    int rc = req->init ? req->init(seg, req->ctx) : 0;
    if (rc < 0)
        return rc;
    /* Release: the table's initial contents are visible before ready reads 1. */
    atomic_store_explicit(&h->ready.changes, 1, memory_order_release);
    orb_futex_wake_all(&h->ready.changes);
    if (seg->fd >= 0)
        (void)creator_lock(seg->fd, F_UNLCK);   /* after ready: a prober sees one or the other */
    return 0;
}

static int open_private(const struct orb_seg_request *req, struct orb_segment *out)
{
    size_t size = round_up(req->table_bytes, 4096);
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return -ENOMEM;
    madvise(base, size, MADV_HUGEPAGE);
    *out = (struct orb_segment){ .base = base, .mapped = size, .page = 4096, .fd = -1, .guard = -1,
                                 .backing = ORBIT_BACKING_PRIVATE, .created = true,
                                 .kind = req->kind, .table_type = req->table_type };
    fill_header(orb_seg_hdr(out), req, size);
    int rc = finish_create(out, req);
    if (rc < 0) {
        munmap(base, size);
        out->base = NULL;
    }
    return rc;
}

static size_t backing_page(int fd)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) == 0 && sf.f_type == HUGETLBFS_MAGIC)
        return (size_t)sf.f_bsize;
    return 4096;
}

/* The file mode of a segment and of its creation lock: group-shared, the caller's, or 0600. */
static mode_t segment_mode(const struct orb_seg_request *req)
{
    if (req->mode)
        return (mode_t)req->mode;   /* honoured with a group too: 0640 + gid lets the group read only */
    return req->gid >= 0 ? 0660 : 0600;
}

/*
 * The temporary names this process is building segments under, as hashes
 * (async-signal-safe to read: a signal handler's orbit_fleet_unlink removes
 * its own half-built file, whose creator lock its own creator holds).
 */
#define CREATING_MAX 32
static _Atomic uint64_t creating[CREATING_MAX];

static uint64_t name_hash(const char *s)
{
    const char *base = strrchr(s, '/');
    uint64_t x = 0xcbf29ce484222325ull;
    for (const char *p = base ? base + 1 : s; *p; p++)
        x = (x ^ (unsigned char)*p) * 0x100000001b3ull;
    return x | 1;   /* never 0, a free slot */
}

static int creating_add(const char *tmp)
{
    uint64_t h = name_hash(tmp);
    for (int i = 0; i < CREATING_MAX; i++) {
        uint64_t none = 0;
        if (atomic_compare_exchange_strong(&creating[i], &none, h))
            return i;
    }
    return -1;   /* more creators at once than slots: such a file is judged by its lock only */
}

static void creating_drop(int i)
{
    if (i >= 0)
        atomic_store(&creating[i], 0);
}

bool orb_segment_creating_here(const char *name)
{
    uint64_t h = name_hash(name);
    for (int i = 0; i < CREATING_MAX; i++)
        if (atomic_load(&creating[i]) == h)
            return true;
    return false;
}

int orb_segment_creator_alive(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? -errno : !S_ISREG(st.st_mode) ? -EACCES : !creator_gone(fd);
    close(fd);
    return rc;
}

/* Create under a private name, map, pre-fault, write the header, link into place. */
static int create_named(const struct orb_seg_request *req, enum orbit_backing backing,
                        const char *path, struct orb_segment *out)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%ld", path, (int)getpid(), (long)orb_now_ns());
    mode_t mode = segment_mode(req);
    int mine = creating_add(tmp);
    /* O_EXCL never follows a link: the file is new, ours, with one name, before any fchmod/fchown. */
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        int e = errno;
        creating_drop(mine);
        return orb_fail(-e, "creating %s: %s", tmp, strerror(e));
    }
    int rc = creator_lock(fd, F_WRLCK);   /* before the link: nobody can see the file unlocked */
    void *base = MAP_FAILED;
    int guard = -1;
    size_t page = backing_page(fd), size = round_up(req->table_bytes, page);
    if (rc < 0)
        goto fail;
    if (fchmod(fd, mode) != 0 || (req->gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)req->gid) != 0) ||
        ftruncate(fd, (off_t)size) != 0) {
        rc = orb_fail(-errno, "%s: mode, group %lld or size %zu: %s", path, (long long)req->gid, size,
                      strerror(errno));
        goto fail;
    }
    /* NORESERVE: pages are taken by the populate below, where exhaustion is an error code. */
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (base == MAP_FAILED) {
        rc = orb_fail(-errno, "mapping %zu bytes of %s: %s", size, path, strerror(errno));
        goto fail;
    }
    /* Guarded before the first touch: the file may shrink under us from now on. */
    if ((guard = orb_guard_map(base, size, path)) < 0) {
        rc = guard;
        goto fail;
    }
    size_t want = req->populate_bytes > ORB_SEG_HEADER_BYTES ? req->populate_bytes : ORB_SEG_HEADER_BYTES;
    if ((rc = populate(base, size, page, 0, want)) < 0) {
        orb_seg_no_room(rc, path, fd, want);
        goto fail;
    }
    if (page == 4096)
        madvise(base, size, MADV_HUGEPAGE);
    *out = (struct orb_segment){ .base = base, .mapped = size, .page = page, .fd = fd, .guard = guard,
                                 .backing = backing, .created = true, .kind = req->kind,
                                 .table_type = req->table_type };
    snprintf(out->path, sizeof out->path, "%s", path);
    fill_header(orb_seg_hdr(out), req, size);
    /* link(2) is atomic and refuses an existing name: exactly one creator wins. */
    if (link(tmp, path) != 0) {
        /* ENOENT: a cleaner took our file in the instant before we locked it; try again. */
        rc = errno == ENOENT ? -EEXIST : -errno;
        goto fail;
    }
    unlink(tmp);
    creating_drop(mine);
    if ((rc = finish_create(out, req)) < 0) {
        unlink(path);
        orb_segment_close(out);
    }
    return rc;
fail:
    creating_drop(mine);
    orb_guard_unmap(guard);
    if (base != MAP_FAILED)
        munmap(base, size);
    close(fd);
    unlink(tmp);
    out->base = NULL;
    return rc;
}

static bool same_geometry(const struct orb_seg_header *h, const struct orb_seg_request *req)
{
    return h->kind == req->kind && h->table_type == req->table_type && h->fleet_capacity == req->fleet_capacity &&
           h->geometry_len == req->geometry_len && memcmp(h->geometry, req->geometry, req->geometry_len) == 0 &&
           h->table_bytes == req->table_bytes;
}

/* -ORBIT_EGEOMETRY, saying what differs: the existing segment's value, then the one asked for. */
int orb_seg_geometry_refused(const struct orb_seg_header *h, const struct orb_seg_request *req, const char *path)
{
    const char *name = req->fleet ? req->fleet : "(private)";
    if (h->table_type != req->table_type)
        return orb_fail(-ORBIT_EGEOMETRY, "%s holds another type of table (type %u, not %u)", path,
                        h->table_type, req->table_type);
    if (h->fleet_capacity != req->fleet_capacity)
        return orb_fail(-ORBIT_EGEOMETRY, "fleet '%s' exists with capacity %u vs %u asked: join with "
                        "capacity %u, or remove the fleet (orbitctl unlink %s)", name, h->fleet_capacity,
                        req->fleet_capacity, h->fleet_capacity, name);
    uint32_t have[ORB_GEOMETRY_MAX / 4] = { 0 }, want[ORB_GEOMETRY_MAX / 4] = { 0 };
    memcpy(have, h->geometry, h->geometry_len <= sizeof have ? h->geometry_len : sizeof have);
    memcpy(want, req->geometry, req->geometry_len);
    for (uint32_t i = 0; req->geometry_names && i < req->geometry_len / 4 && req->geometry_names[i]; i++)
        if (have[i] != want[i])
            return orb_fail(-ORBIT_EGEOMETRY, "fleet '%s' table kind %u exists with %s %u vs %u asked "
                            "(%s)", name, req->kind, req->geometry_names[i], have[i], want[i],
                            strcmp(req->geometry_names[i], "layout version") == 0
                                ? "made by another orbit version" : "open it with the spec it was made with");
    return orb_fail(-ORBIT_EGEOMETRY, "fleet '%s' table kind %u exists with another layout (%llu bytes vs %zu "
                    "asked)", name, req->kind, (unsigned long long)h->table_bytes, req->table_bytes);
}

/* -ENOMEM from pre-faulting want bytes of path: how much was asked, and how much room is left. */
void orb_seg_no_room(int rc, const char *path, int fd, size_t want)
{
    struct statfs sf;
    if (rc != -ENOMEM || fstatfs(fd, &sf) != 0)
        return;
    unsigned long long total = (unsigned long long)sf.f_blocks * (unsigned long long)sf.f_bsize,
                       avail = (unsigned long long)sf.f_bavail * (unsigned long long)sf.f_bsize;
    if (sf.f_type == HUGETLBFS_MAGIC)
        orb_fail(rc, "%s: %zu bytes of huge pages asked, %llu bytes free of %llu (vm.nr_hugepages, or "
                 "ORBIT_HUGETLB_DIR= for /dev/shm)", path, want, avail, total);
    else
        orb_fail(rc, "%s: %zu bytes asked, %llu bytes free of %llu on its file system (a bigger /dev/shm: "
                 "docker --shm-size, a Memory emptyDir)", path, want, avail, total);
}

static int validate_header(const struct orb_seg_header *h, size_t file_size, const char *path)
{
    if (h->magic != ORB_SEG_MAGIC || h->header_bytes != ORB_SEG_HEADER_BYTES)
        return orb_fail(-ORBIT_ECORRUPT, "%s is not an orbit segment (no segment header)", path);
    if (h->version != ORB_SEG_VERSION)
        return orb_fail(-ORBIT_EGEOMETRY, "%s has segment header version %u, this library reads %u "
                        "(made by another orbit version)", path, h->version, ORB_SEG_VERSION);
    if (h->check != orb_seg_header_check(h) || h->geometry_len > ORB_GEOMETRY_MAX ||
        h->mapped_bytes != file_size || h->table_bytes > h->mapped_bytes ||
        h->table_bytes < ORB_SEG_HEADER_BYTES)
        return orb_fail(-ORBIT_ECORRUPT, "%s: its header is garbled or its size (%zu bytes) is not the "
                        "header's (%llu)", path, file_size, (unsigned long long)h->mapped_bytes);
    return 0;
}

/*
 * Park on the ready word until the creator publishes, or it is known dead.
 * wait_ms < 0: up to READY_WAIT_MS, then -ORBIT_ECORRUPT. wait_ms >= 0 (an
 * observer that must not stall: the reaper, tools): a creator still alive
 * after that long (0: at once) is -ORBIT_EAGAIN, naming the file.
 */
static int wait_ready(struct orb_seg_header *h, int fd, int wait_ms, const char *path)
{
    int64_t give_up = orb_now_ns() + (int64_t)(wait_ms < 0 ? READY_WAIT_MS : wait_ms) * 1000000;
    for (;;) {
        uint32_t ready = atomic_load_explicit(&h->ready.changes, memory_order_acquire);
        if (ready == 1)
            return 0;
        if (ready != 0)
            return orb_fail(-ORBIT_ECORRUPT, "%s: its ready word holds %u", path, ready);
        bool gone = creator_gone(fd);
        if (gone || orb_now_ns() >= give_up) {
            /* Look once more: a creator may publish and exit between our load and its check. */
            ready = atomic_load_explicit(&h->ready.changes, memory_order_acquire);
            if (ready == 1)
                return 0;
            if (gone || wait_ms < 0)   /* it died before publishing (or stayed stuck past the bound) */
                return orb_fail(-ORBIT_ECORRUPT, "%s: its creator (pid %d) %s before it was ready", path,
                                (int)h->creator_pid, gone ? "died" : "has been at it for 10 s");
            return orb_fail(-ORBIT_EAGAIN, "%s is still being created: its creator holds the creation lock "
                            "and has not published it (waited %d ms)", path, wait_ms);
        }
        int64_t left_ms = (give_up - orb_now_ns()) / 1000000 + 1;
        struct orb_deadline slice = orb_deadline_in(left_ms < 50 ? (int)left_ms : 50);
        orb_futex_wait(&h->ready.changes, 0, &slice);
    }
}

/*
 * A segment we may share memory through: a regular file under its own name
 * (opened O_NOFOLLOW), no access for others (no creation mode gives any),
 * owned by us or root, or by another user who shared it with the group: the
 * group the caller joins with (any group it may read for tools: req NULL).
 * -EACCES otherwise: another local user planted it.
 */
static int segment_trusted(const struct stat *st, const struct orb_seg_request *req)
{
    if (!S_ISREG(st->st_mode) || (st->st_mode & 0007))
        return -EACCES;
    if (st->st_uid == geteuid() || st->st_uid == 0)
        return 0;
    if (!req)   /* an observer: a group that may read it (0640 and 0660 fleets alike) */
        return (st->st_mode & 0040) ? 0 : -EACCES;
    if ((st->st_mode & 0060) != 0060)
        return -EACCES;
    return req->gid >= 0 && st->st_gid == (gid_t)req->gid ? 0 : -EACCES;
}

/*
 * The fleet segment of the fleet a table segment's path names ("<dir>/orbit.
 * <fleet>.<kind>", kind not 255), in either backing directory: 0 and its stat,
 * or -ENOENT (no such fleet, or the path is the fleet segment's own).
 */
static int fleet_anchor(const char *path, struct stat *anchor)
{
    const char *base = strrchr(path, '/'), *dot = strrchr(path, '.');
    base = base ? base + 1 : path;
    if (strncmp(base, "orbit.", 6) != 0 || !dot || dot <= base + 6 || strcmp(dot + 1, "255") == 0)
        return -ENOENT;
    char fleet[ORBIT_FLEET_NAME_MAX + 1];
    size_t n = (size_t)(dot - (base + 6));
    if (n > ORBIT_FLEET_NAME_MAX)
        return -ENOENT;
    memcpy(fleet, base + 6, n);
    fleet[n] = '\0';
    static const enum orbit_backing order[] = { ORBIT_BACKING_HUGETLB, ORBIT_BACKING_SHM };
    for (size_t i = 0; i < 2; i++) {
        char fpath[256];
        if (orb_segment_path(order[i], fleet, ORB_FLEET_KIND, fpath, sizeof fpath) != 0)
            continue;
        int fd = open(fpath, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        int rc = fstat(fd, anchor) == 0 && S_ISREG(anchor->st_mode) ? 0 : -ENOENT;
        close(fd);
        if (rc == 0)
            return 0;
    }
    return -ENOENT;
}

/*
 * A table segment belongs to its fleet only if a member could have made it:
 * owned by the fleet segment's owner or root, or, in a fleet shared with its
 * group, carrying that group and the fleet's mode. Anything else under the
 * fleet's name is another user's plant: -EACCES, named.
 */
static int table_trusted(const char *path, const struct stat *st, const struct stat *fleet)
{
    if (st->st_uid == fleet->st_uid || st->st_uid == 0)
        return 0;
    if ((fleet->st_mode & 0070) && st->st_gid == fleet->st_gid && (st->st_mode & 0777) == (fleet->st_mode & 0777))
        return 0;
    return orb_fail(-EACCES, "segment %s is not its fleet's: owned by uid %u (group %u, mode %#o), where "
                    "the fleet is uid %u's (group %u, mode %#o)", path, (unsigned)st->st_uid,
                    (unsigned)st->st_gid, (unsigned)(st->st_mode & 0777), (unsigned)fleet->st_uid,
                    (unsigned)fleet->st_gid, (unsigned)(fleet->st_mode & 0777));
}

/* Open a segment's name without following a symlink or blocking on a FIFO planted there. */
static int open_segment_fd(const char *path, int flags, const struct orb_seg_request *req, struct stat *st)
{
    int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return -ENOENT;   /* the callers decide: create it, look elsewhere, or say so */
    if (fd < 0)
        return orb_fail(errno == ELOOP ? -EACCES : -errno, "%s: %s", path,
                        errno == ELOOP ? "a symbolic link, not a segment" : strerror(errno));
    struct stat fleet;
    int rc = fstat(fd, st) != 0 ? orb_fail(-errno, "%s: %s", path, strerror(errno)) : 0;
    if (rc == 0 && (!S_ISREG(st->st_mode) || (st->st_mode & 0007)))
        rc = orb_fail(-EACCES, "segment %s is %s", path, S_ISREG(st->st_mode) ? "open to others (world "
                      "permission bits)" : "not a regular file");
    else if (rc == 0 && fleet_anchor(path, &fleet) == 0)
        rc = table_trusted(path, st, &fleet);   /* a table: judged by its fleet */
    else if (rc == 0 && segment_trusted(st, req) < 0)
        rc = orb_fail(-EACCES, "segment %s is uid %u's (group %u, mode %#o), not shared with this caller",
                      path, (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)(st->st_mode & 0777));
    if (rc < 0) {
        close(fd);
        return rc;   /* each refusal above said what it found */
    }
    return fd;
}

/*
 * The file is still the size its header says and no fault broke the mapping:
 * a file shrunk (or grown) under its name is not a segment to use. A fault
 * while reading the header already turned it into zeros, which no header
 * passes. 0, or -ORBIT_ECORRUPT naming the file.
 */
static int still_whole(int fd, int guard, const struct orb_seg_header *h, size_t mapped, const char *path)
{
    struct stat now;
    if (fstat(fd, &now) != 0)
        return -errno;
    if (orb_guard_broken(guard) || (uint64_t)now.st_size != h->mapped_bytes || h->mapped_bytes != mapped)
        return orb_fail(-ORBIT_ECORRUPT, "segment %s is %lld bytes where its header says %llu: it was "
                        "truncated, grown or replaced", path, (long long)now.st_size,
                        (unsigned long long)h->mapped_bytes);
    return 0;
}

/* read_only: a private, copy-on-write view of a file this caller may only read (an observer). */
static int open_path(const char *path, enum orbit_backing backing, const struct orb_seg_request *req,
                     bool read_only, int wait_ms, struct orb_segment *out)
{
    struct stat st;
    int fd = open_segment_fd(path, read_only ? O_RDONLY : O_RDWR, req, &st);
    if (fd < 0)
        return fd;
    if ((size_t)st.st_size < ORB_SEG_HEADER_BYTES) {
        close(fd);
        return orb_fail(-ORBIT_ECORRUPT, "segment %s is %lld bytes: shorter than a segment header", path,
                        (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    /* Read-only: what the observer might write (a lock it takes to read) stays its own. */
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, (read_only ? MAP_PRIVATE : MAP_SHARED) | MAP_NORESERVE,
                      fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        return orb_fail(e == EINVAL ? -ORBIT_ECORRUPT : -e, "mapping %s: %s", path, strerror(e));
    }
    /* Guarded before the header is read: the file may have shrunk since the fstat. */
    int guard = orb_guard_map(base, size, path), rc = guard < 0 ? guard : 0;
    struct orb_seg_header *h = base;
    if (rc == 0)
        rc = validate_header(h, size, path);
    if (rc == 0)
        rc = wait_ready(h, fd, wait_ms, path);
    if (rc == 0 && req && !same_geometry(h, req))
        rc = orb_seg_geometry_refused(h, req, path);
    if (rc == 0 || rc == -ORBIT_ECORRUPT) {
        int whole = still_whole(fd, guard, h, size, path);
        rc = whole < 0 ? whole : rc;
    }
    if (rc < 0) {
        orb_guard_unmap(guard);
        munmap(base, size);
        close(fd);
        return rc;
    }
    *out = (struct orb_segment){ .base = base, .mapped = size, .page = backing_page(fd), .fd = fd,
                                 .guard = guard, .backing = backing, .created = false, .read_only = read_only,
                                 .kind = h->kind, .table_type = h->table_type };
    snprintf(out->path, sizeof out->path, "%s", path);
    return 0;
}

/* An existing segment of that name in either directory. -ENOENT when none. */
static int open_found(const char *fleet, uint8_t kind, const struct orb_seg_request *req, bool read_only,
                      int wait_ms, struct orb_segment *out)
{
    static const enum orbit_backing order[] = { ORBIT_BACKING_HUGETLB, ORBIT_BACKING_SHM };
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        if (orb_segment_path(order[i], fleet, kind, path, sizeof path) != 0)
            continue;
        int rc = open_path(path, order[i], req, read_only, wait_ms, out);
        if (rc != -ENOENT)
            return rc;
    }
    return -ENOENT;
}

int orb_segment_peek(const char *fleet, uint8_t kind, struct orb_seg_header *out, uint64_t *file_size,
                     enum orbit_backing *backing)
{
    static const enum orbit_backing order[] = { ORBIT_BACKING_HUGETLB, ORBIT_BACKING_SHM };
    if (!orb_fleet_name_valid(fleet) || !out)
        return -ORBIT_EMALFORMED;
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        if (orb_segment_path(order[i], fleet, kind, path, sizeof path) != 0)
            continue;
        struct stat st;
        int fd = open_segment_fd(path, O_RDONLY, NULL, &st);
        if (fd == -ENOENT)
            continue;
        if (fd < 0)
            return fd;
        ssize_t n = pread(fd, out, sizeof *out, 0);
        close(fd);
        if (n != (ssize_t)sizeof *out)
            return -ORBIT_ECORRUPT;
        int rc = validate_header(out, (size_t)st.st_size, path);
        if (rc == 0 && file_size)
            *file_size = (uint64_t)st.st_size;
        if (rc == 0 && backing)
            *backing = order[i];
        return rc;
    }
    return -ENOENT;
}

int orb_segment_open_existing_within(const char *fleet, uint8_t kind, int ready_wait_ms, bool read_only,
                                     struct orb_segment *out)
{
    if (!orb_fleet_name_valid(fleet) || !out)
        return orb_fail(-ORBIT_EMALFORMED, "fleet name: 1-64 bytes of letters, digits, '_', '.' and '-'");
    int rc = open_found(fleet, kind, NULL, read_only, ready_wait_ms, out);
    if (rc == -ENOENT && kind == ORB_FLEET_KIND)
        return orb_fail(-ENOENT, "no fleet '%s' on this host (no orbit.%s.%u in %s or " SHM_DIR ")", fleet, fleet,
                        (unsigned)kind, orb_hugetlb_dir() ? orb_hugetlb_dir() : "a hugetlbfs mount");
    if (rc == -ENOENT)
        return orb_fail(-ENOENT, "fleet '%s' has no table of kind %u (no orbit.%s.%u)", fleet, (unsigned)kind,
                        fleet, (unsigned)kind);
    return rc;
}

int orb_segment_open_existing(const char *fleet, uint8_t kind, struct orb_segment *out)
{
    return orb_segment_open_existing_within(fleet, kind, -1, false, out);
}

int orb_segment_open_existing_read_only(const char *fleet, uint8_t kind, struct orb_segment *out)
{
    return orb_segment_open_existing_within(fleet, kind, -1, true, out);
}

static int create_with_backing(const struct orb_seg_request *req, enum orbit_backing backing,
                               struct orb_segment *out)
{
    char path[256];
    int rc = orb_segment_path(backing, req->fleet, req->kind, path, sizeof path);
    if (rc == -ENOENT)
        return -ENOMEM;      /* no hugetlbfs mounted: no huge pages to be had */
    if (rc < 0)
        return rc;
    return create_named(req, backing, path, out);
}

int orb_segment_lock_path(const char *fleet, uint8_t kind, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/orbit.%s.%u.lock", SHM_DIR, fleet, (unsigned)kind);
    return n < 0 || (size_t)n >= len ? -ORBIT_ETOOLARGE : 0;
}

/*
 * A lock file we may wait on: a regular file of ours or root's under one name
 * (never one another user planted, nor a hard link to some other file).
 */
static bool lock_trusted(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_nlink == 1 && (st->st_uid == geteuid() || st->st_uid == 0);
}

/*
 * The lock file under its name, never through a link: created here (O_EXCL:
 * a new inode of ours, given the fleet's group and mode through the
 * descriptor), or an existing one opened O_NOFOLLOW and used as it is (no
 * chown or chmod of a file we did not create). An fd, or -errno.
 */
static int open_lock_file(const char *path, const struct orb_seg_request *req, mode_t mode)
{
    /* NONBLOCK: a FIFO planted under the name must not block the open. */
    int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
    if (fd >= 0) {
        if (req->gid >= 0)   /* best effort: the lock works without it */
            (void)(fchown(fd, (uid_t)-1, (gid_t)req->gid) == 0 && fchmod(fd, mode) == 0);
        return fd;
    }
    if (errno != EEXIST)
        return -errno;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}

/* flock with a bound: a holder stopped mid-create must not stop us. */
static int flock_bounded(int fd)
{
    int64_t give_up = orb_now_ns() + (int64_t)READY_WAIT_MS * 1000000;
    for (long pause_us = 50;; pause_us = pause_us < 5000 ? pause_us * 2 : pause_us) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        if (orb_now_ns() > give_up)
            return -ORBIT_ETIMEDOUT;
        struct timespec ts = { 0, pause_us * 1000 };
        nanosleep(&ts, NULL);
    }
}

/* Open errors that mean "this name is not a lock file we can use": go on without it. */
static bool lock_unusable(int err)
{
    return err == EACCES || err == EPERM || err == ELOOP || err == EISDIR || err == ENXIO ||
           err == EWOULDBLOCK;
}

/*
 * Creating one segment name is serialised by an flock on a small file in
 * /dev/shm. Without it, a creator whose huge pages ran out falls back to
 * /dev/shm while another one's hugetlbfs segment appears: two segments of one
 * name, and two joiners handed the same node. The lock dies with its holder,
 * and the holder unlinks the file before unlocking (creation_unlock), so a
 * locker re-checks that its file is still the one under the name.
 * Returns 0 with *lock_fd the locked descriptor, or with *lock_fd -1 when
 * creation goes on unserialised (link(2) still refuses a second segment on
 * one backing): the file is another user's (planted or not, never waited on),
 * cannot be opened, or its holder kept it past READY_WAIT_MS. Or a negative code.
 */
static int creation_lock(const struct orb_seg_request *req, char *path, size_t len, int *lock_fd)
{
    *lock_fd = -1;
    int rc = orb_segment_lock_path(req->fleet, req->kind, path, len);
    if (rc < 0)
        return rc;
    mode_t mode = segment_mode(req);
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open_lock_file(path, req, mode);
        if (fd == -ENOENT)
            continue;   /* its holder unlinked it between our two opens: make ours */
        if (fd < 0)
            return lock_unusable(-fd) ? 0 : fd;
        struct stat held, named;
        if (fstat(fd, &held) != 0 || !lock_trusted(&held)) {
            close(fd);
            return 0;
        }
        rc = flock_bounded(fd);
        if (rc == 0 && stat(path, &named) == 0 && named.st_ino == held.st_ino && named.st_dev == held.st_dev) {
            *lock_fd = fd;
            return 0;
        }
        close(fd);
        if (rc == -ORBIT_ETIMEDOUT)
            return 0;
        if (rc < 0)
            return rc;
        /* Locked a file its holder had unlinked: take the one under the name now. */
    }
    return 0;
}

/* Unlink first, then unlock: a waiter on this file sees it gone and retries; nothing is left behind. */
static void creation_unlock(const char *path, int lock_fd)
{
    if (lock_fd < 0)
        return;
    unlink(path);
    close(lock_fd);
}

static int create_segment(const struct orb_seg_request *req, struct orb_segment *out)
{
    if (req->backing == ORBIT_BACKING_SHM)
        return create_with_backing(req, ORBIT_BACKING_SHM, out);
    int rc = create_with_backing(req, ORBIT_BACKING_HUGETLB, out);
    /* AUTO: no huge pages, or a hugetlbfs this user may not write, means /dev/shm. */
    if ((rc == -ENOMEM || rc == -EACCES || rc == -EPERM || rc == -EROFS) &&
        req->backing == ORBIT_BACKING_AUTO) {
        orb_error_forget();   /* the fallback decides */
        rc = create_with_backing(req, ORBIT_BACKING_SHM, out);
    }
    if (rc == -ENOMEM && req->backing == ORBIT_BACKING_HUGETLB && !orb_hugetlb_dir())
        return orb_fail(rc, "HUGETLB backing, but no hugetlbfs is mounted (or ORBIT_HUGETLB_DIR names none)");
    return rc;
}

int orb_segment_open(const struct orb_seg_request *req, struct orb_segment *out)
{
    if (!req || !out || req->geometry_len > ORB_GEOMETRY_MAX ||
        req->table_bytes < ORB_SEG_HEADER_BYTES || (req->mode & 0007))
        return -ORBIT_EMALFORMED;
    if (!req->fleet || req->backing == ORBIT_BACKING_PRIVATE)
        return open_private(req, out);
    if (!orb_fleet_name_valid(req->fleet))
        return -ORBIT_EMALFORMED;
    for (int attempt = 0; attempt < 8; attempt++) {
        int rc = open_found(req->fleet, req->kind, req, false, -1, out);
        if (rc != -ENOENT)
            return rc;
        int lock;
        char lock_path[300];
        if ((rc = creation_lock(req, lock_path, sizeof lock_path, &lock)) < 0)
            return rc;
        /* Under the lock, look again: the creator that held it before us may have made it. */
        rc = open_found(req->fleet, req->kind, req, false, -1, out);
        if (rc == -ENOENT)
            rc = create_segment(req, out);
        creation_unlock(lock_path, lock);
        if (rc != -EEXIST)
            return rc;   /* -EEXIST: a creator outside the lock linked first; open theirs */
    }
    return -ORBIT_ECORRUPT;
}

void orb_segment_close(struct orb_segment *seg)
{
    if (!seg || !seg->base)
        return;
    orb_guard_unmap(seg->guard);   /* before the range goes: no handler maps over a reused one */
    seg->guard = -1;
    munmap(seg->base, seg->mapped);
    if (seg->fd >= 0)
        close(seg->fd);
    seg->base = NULL;
    seg->fd = -1;
}
