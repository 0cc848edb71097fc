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
#include "segment.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

#define SHM_DIR "/dev/shm"
#define READY_WAIT_MS 10000   /* an opener gives up on a live but stuck creator after this */

bool orb_fleet_name_valid(const char *name)
{
    size_t n = 0;
    if (!name || !*name)
        return false;
    for (; name[n]; n++) {
        char c = name[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || (c == '.' && n > 0);
        if (!ok || n >= ORBIT_FLEET_NAME_MAX)
            return false;
    }
    return true;
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
    FILE *m = fopen("/proc/self/mounts", "re");
    if (!m)
        return NULL;
    char line[1024];
    const char *found = NULL;
    while (fgets(line, sizeof line, m)) {
        char src[256], mnt[256], type[64];
        if (sscanf(line, "%255s %255s %63s", src, mnt, type) == 3 && strcmp(type, "hugetlbfs") == 0) {
            snprintf(dir, sizeof dir, "%s", mnt);
            found = dir;
            break;
        }
    }
    fclose(m);
    return found;
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
    return populate(seg->base, seg->mapped, seg->page, off, len);
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
    *out = (struct orb_segment){ .base = base, .mapped = size, .page = 4096, .fd = -1,
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

/* Create under a private name, map, pre-fault, write the header, link into place. */
/* The file mode of a segment and of its creation lock: group-shared, the caller's, or 0600. */
static mode_t segment_mode(const struct orb_seg_request *req)
{
    return req->gid >= 0 ? 0660 : (req->mode ? (mode_t)req->mode : 0600);
}

static int create_named(const struct orb_seg_request *req, enum orbit_backing backing,
                        const char *path, struct orb_segment *out)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%ld", path, (int)getpid(), (long)orb_now_ns());
    mode_t mode = segment_mode(req);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    int rc = creator_lock(fd, F_WRLCK);   /* before the link: nobody can see the file unlocked */
    void *base = MAP_FAILED;
    size_t page = backing_page(fd), size = round_up(req->table_bytes, page);
    if (rc < 0)
        goto fail;
    if (fchmod(fd, mode) != 0 || (req->gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)req->gid) != 0) ||
        ftruncate(fd, (off_t)size) != 0) {
        rc = -errno;
        goto fail;
    }
    /* NORESERVE: pages are taken by the populate below, where exhaustion is an error code. */
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (base == MAP_FAILED) {
        rc = -errno;
        goto fail;
    }
    size_t want = req->populate_bytes > ORB_SEG_HEADER_BYTES ? req->populate_bytes : ORB_SEG_HEADER_BYTES;
    if ((rc = populate(base, size, page, 0, want)) < 0)
        goto fail;
    if (page == 4096)
        madvise(base, size, MADV_HUGEPAGE);
    *out = (struct orb_segment){ .base = base, .mapped = size, .page = page, .fd = fd,
                                 .backing = backing, .created = true, .kind = req->kind,
                                 .table_type = req->table_type };
    snprintf(out->path, sizeof out->path, "%s", path);
    fill_header(orb_seg_hdr(out), req, size);
    /* link(2) is atomic and refuses an existing name: exactly one creator wins. */
    if (link(tmp, path) != 0) {
        rc = -errno;
        goto fail;
    }
    unlink(tmp);
    if ((rc = finish_create(out, req)) < 0) {
        unlink(path);
        munmap(base, size);
        close(fd);
        out->base = NULL;
    }
    return rc;
fail:
    if (base != MAP_FAILED)
        munmap(base, size);
    close(fd);
    unlink(tmp);
    out->base = NULL;
    return rc;
}

static int validate_header(const struct orb_seg_header *h, size_t file_size)
{
    if (h->magic != ORB_SEG_MAGIC || h->header_bytes != ORB_SEG_HEADER_BYTES)
        return -ORBIT_ECORRUPT;
    if (h->version != ORB_SEG_VERSION)
        return -ORBIT_EGEOMETRY;
    if (h->check != orb_seg_header_check(h) || h->geometry_len > ORB_GEOMETRY_MAX ||
        h->mapped_bytes != file_size || h->table_bytes > h->mapped_bytes ||
        h->table_bytes < ORB_SEG_HEADER_BYTES)
        return -ORBIT_ECORRUPT;
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
            return -ORBIT_ECORRUPT;
        bool gone = creator_gone(fd);
        if (gone || orb_now_ns() >= give_up) {
            /* Look once more: a creator may publish and exit between our load and its check. */
            ready = atomic_load_explicit(&h->ready.changes, memory_order_acquire);
            if (ready == 1)
                return 0;
            if (gone || wait_ms < 0)
                return -ORBIT_ECORRUPT;   /* it died before publishing (or stayed stuck past the bound) */
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
 * group the caller joins with (any group for tools: req NULL). -EACCES
 * otherwise: another local user planted it.
 */
static int segment_trusted(const struct stat *st, const struct orb_seg_request *req)
{
    if (!S_ISREG(st->st_mode) || (st->st_mode & 0007))
        return -EACCES;
    if (st->st_uid == geteuid() || st->st_uid == 0)
        return 0;
    if ((st->st_mode & 0060) != 0060)
        return -EACCES;
    return !req || (req->gid >= 0 && st->st_gid == (gid_t)req->gid) ? 0 : -EACCES;
}

/* Open a segment's name without following a symlink or blocking on a FIFO planted there. */
static int open_segment_fd(const char *path, int flags, const struct orb_seg_request *req, struct stat *st)
{
    int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ELOOP ? -EACCES : -errno;
    int rc = fstat(fd, st) != 0 ? -errno : segment_trusted(st, req);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static int open_path(const char *path, enum orbit_backing backing, const struct orb_seg_request *req,
                     int wait_ms, struct orb_segment *out)
{
    struct stat st;
    int fd = open_segment_fd(path, O_RDWR, req, &st);
    if (fd < 0)
        return fd;
    if ((size_t)st.st_size < ORB_SEG_HEADER_BYTES) {
        close(fd);
        return -ORBIT_ECORRUPT;
    }
    size_t size = (size_t)st.st_size;
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        return e == EINVAL ? -ORBIT_ECORRUPT : -e;
    }
    struct orb_seg_header *h = base;
    int rc = validate_header(h, size);
    if (rc == 0)
        rc = wait_ready(h, fd, wait_ms, path);
    if (rc == 0 && req &&
        (h->kind != req->kind || h->table_type != req->table_type ||
         h->fleet_capacity != req->fleet_capacity || h->geometry_len != req->geometry_len ||
         memcmp(h->geometry, req->geometry, req->geometry_len) != 0 ||
         h->table_bytes != req->table_bytes))
        rc = -ORBIT_EGEOMETRY;
    if (rc < 0) {
        munmap(base, size);
        close(fd);
        return rc;
    }
    *out = (struct orb_segment){ .base = base, .mapped = size, .page = backing_page(fd), .fd = fd,
                                 .backing = backing, .created = false, .kind = h->kind,
                                 .table_type = h->table_type };
    snprintf(out->path, sizeof out->path, "%s", path);
    return 0;
}

/* An existing segment of that name in either directory. -ENOENT when none. */
static int open_found(const char *fleet, uint8_t kind, const struct orb_seg_request *req, int wait_ms,
                      struct orb_segment *out)
{
    static const enum orbit_backing order[] = { ORBIT_BACKING_HUGETLB, ORBIT_BACKING_SHM };
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        if (orb_segment_path(order[i], fleet, kind, path, sizeof path) != 0)
            continue;
        int rc = open_path(path, order[i], req, wait_ms, out);
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
        int rc = validate_header(out, (size_t)st.st_size);
        if (rc == 0 && file_size)
            *file_size = (uint64_t)st.st_size;
        if (rc == 0 && backing)
            *backing = order[i];
        return rc;
    }
    return -ENOENT;
}

int orb_segment_open_existing_within(const char *fleet, uint8_t kind, int ready_wait_ms, struct orb_segment *out)
{
    if (!orb_fleet_name_valid(fleet) || !out)
        return -ORBIT_EMALFORMED;
    return open_found(fleet, kind, NULL, ready_wait_ms, out);
}

int orb_segment_open_existing(const char *fleet, uint8_t kind, struct orb_segment *out)
{
    return orb_segment_open_existing_within(fleet, kind, -1, out);
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

/* A lock file we may wait on: a regular file of ours or root's (never one another user planted). */
static bool lock_trusted(const struct stat *st)
{
    return S_ISREG(st->st_mode) && (st->st_uid == geteuid() || st->st_uid == 0);
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
        /* NONBLOCK: a FIFO planted under the name must not block the open. */
        int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
        if (fd < 0)
            return lock_unusable(errno) ? 0 : -errno;
        struct stat held, named;
        if (fstat(fd, &held) != 0 || !lock_trusted(&held)) {
            close(fd);
            return 0;
        }
        if (req->gid >= 0 && held.st_uid == geteuid())   /* best effort */
            (void)(fchown(fd, (uid_t)-1, (gid_t)req->gid) == 0 && fchmod(fd, mode) == 0);
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
        req->backing == ORBIT_BACKING_AUTO)
        rc = create_with_backing(req, ORBIT_BACKING_SHM, out);
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
        int rc = open_found(req->fleet, req->kind, req, -1, out);
        if (rc != -ENOENT)
            return rc;
        int lock;
        char lock_path[300];
        if ((rc = creation_lock(req, lock_path, sizeof lock_path, &lock)) < 0)
            return rc;
        /* Under the lock, look again: the creator that held it before us may have made it. */
        rc = open_found(req->fleet, req->kind, req, -1, out);
        if (rc == -ENOENT)
            rc = create_segment(req, out);
        creation_unlock(lock_path, lock);
        if (rc != -EEXIST)
            return rc;   /* -EEXIST: a creator outside the lock linked first; open theirs */
    }
    return -ORBIT_ECORRUPT;
}

int orb_segment_populate_once(struct orb_segment *seg, pthread_mutex_t *lock, _Atomic bool *done,
                              size_t off, size_t len)
{
    if (atomic_load_explicit(done, memory_order_acquire))
        return 0;
    int rc = 0;
    pthread_mutex_lock(lock);
    if (!atomic_load(done) && seg->backing != ORBIT_BACKING_PRIVATE)
        rc = orb_segment_populate(seg, off, len);
    if (rc == 0)   /* release: the pages exist before the flag says so */
        atomic_store_explicit(done, true, memory_order_release);
    pthread_mutex_unlock(lock);
    return rc;
}

void orb_segment_close(struct orb_segment *seg)
{
    if (!seg || !seg->base)
        return;
    munmap(seg->base, seg->mapped);
    if (seg->fd >= 0)
        close(seg->fd);
    seg->base = NULL;
    seg->fd = -1;
}
