/* SPDX-License-Identifier: MIT */
/* The fleet's files: listing segments and fleets, unlinking. Below the fleet: it opens none. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fleet_internal.h"
#include "life.h"
#include "error_internal.h"

/* ---- listing and unlinking --------------------------------------------- */

/* The backing directories: hugetlbfs (NULL when there is none) and /dev/shm. */
static void segment_dirs(const char *dirs[2], char hdir[256])
{
    dirs[0] = orb_hugetlb_dir();
    dirs[1] = "/dev/shm";
    if (dirs[0]) {
        snprintf(hdir, 256, "%s", dirs[0]);
        dirs[0] = hdir;
    }
}

/*
 * Calls fn for each entry of the directory at path (. and .. too) until it returns
 * false. getdents64 into a buffer on the stack, not opendir: no allocation, so a
 * reaper thread listing segments while its host process forks never leaves the
 * child an allocator lock nobody holds.
 */
static void dir_each(const char *path, bool (*fn)(void *ctx, const char *entry), void *ctx)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    _Alignas(struct dirent64) char buf[2048];
    bool more = true;
    for (ssize_t n; more && (n = getdents64(fd, buf, sizeof buf)) > 0;)
        for (ssize_t off = 0; more && off < n;) {
            const struct dirent64 *e = (const struct dirent64 *)(const void *)(buf + off);
            off += e->d_reclen;   /* the kernel's record lengths: they tile what it returned */
            more = fn(ctx, e->d_name);
        }
    close(fd);
}

struct seg_scan {
    orb_segment_fn *fn;
    void *ctx;
    const char *dir;
    enum orbit_backing backing;
};

/* One directory entry: fn's if it is "orbit.<fleet>.<kind>". */
static bool scan_entry(void *ctx, const char *n)
{
    const struct seg_scan *s = ctx;
    const char *dot = strrchr(n, '.');
    if (strncmp(n, "orbit.", 6) != 0 || !dot || dot <= n + 6 || strstr(n, ".tmp."))
        return true;
    char *end;
    unsigned long kind = strtoul(dot + 1, &end, 10);
    if (*end || end == dot + 1 || kind > 255)
        return true;
    char fleet[ORBIT_FLEET_NAME_MAX + 1];
    size_t len = (size_t)(dot - (n + 6));
    if (len > ORBIT_FLEET_NAME_MAX)
        return true;
    memcpy(fleet, n + 6, len);
    fleet[len] = '\0';
    s->fn(s->ctx, s->dir, fleet, (unsigned)kind, s->backing);
    return true;
}

/* Calls fn for each "orbit.<fleet>.<kind>" file in the backing directories. */
static void scan_segments(orb_segment_fn *fn, void *ctx)
{
    const char *dirs[2];
    char hdir[256];
    segment_dirs(dirs, hdir);
    for (int d = 0; d < 2; d++) {
        struct seg_scan s = { fn, ctx, dirs[d], d == 0 ? ORBIT_BACKING_HUGETLB : ORBIT_BACKING_SHM };
        if (dirs[d])
            dir_each(dirs[d], scan_entry, &s);
    }
}

void orb_fleet_scan_segments(orb_segment_fn *fn, void *ctx)
{
    scan_segments(fn, ctx);
}

struct seg_collect { const char *fleet; struct orbit_segment_info *out; size_t max, n; };

static void collect_segment(void *ctx, const char *dir, const char *fleet, unsigned kind,
                            enum orbit_backing b)
{
    struct seg_collect *c = ctx;
    if (strcmp(fleet, c->fleet) != 0)
        return;
    struct orb_seg_header h;
    uint64_t size = 0;
    int peeked = orb_segment_peek(fleet, (uint8_t)kind, &h, &size, NULL);
    if (peeked == -EACCES) {
        orb_error_forget();
        return;   /* another user's file under the fleet's name: not one of its segments */
    }
    if (c->n < c->max) {
        struct orbit_segment_info *si = &c->out[c->n];
        memset(si, 0, sizeof *si);
        si->kind = (uint8_t)kind;
        si->backing = b;
        snprintf(si->path, sizeof si->path, "%s/orbit.%s.%u", dir, fleet, kind);
        if (peeked == 0) {
            si->size = size;
            si->epoch = h.epoch;
        } else {
            orb_error_forget();   /* listed all the same, with what the file system says */
        }
        struct stat st;
        if (lstat(si->path, &st) == 0)
            si->resident = (uint64_t)st.st_blocks * 512u;   /* tmpfs and hugetlbfs count pages held */
    }
    c->n++;
}

ssize_t orbit_fleet_segments(const char *name, struct orbit_segment_info *out, size_t max)
{
    orb_error_clear();
    if (!orb_fleet_name_valid(name) || (max && !out))
        return orb_fail(-ORBIT_EMALFORMED, "%s", max && !out ? "out is NULL with max > 0" : ORB_NAME_RULE);
    struct seg_collect c = { name, out, max, 0 };
    scan_segments(collect_segment, &c);
    return (ssize_t)c.n;
}

struct kind_collect { const char *fleet; uint64_t *present; };

static void collect_kind(void *ctx, const char *dir, const char *fleet, unsigned kind,
                         enum orbit_backing b)
{
    (void)dir; (void)b;
    struct kind_collect *c = ctx;
    if (strcmp(fleet, c->fleet) == 0)
        c->present[kind / 64] |= 1ull << (kind % 64);
}

int orb_fleet_segment_kinds(const char *name, uint64_t present[4])
{
    if (!orb_fleet_name_valid(name) || !present)
        return -ORBIT_EMALFORMED;
    memset(present, 0, 4 * sizeof *present);
    struct kind_collect c = { name, present };
    scan_segments(collect_kind, &c);
    return 0;
}

struct name_collect { char (*names)[ORBIT_FLEET_NAME_MAX + 1]; size_t max, n; };

static void collect_name(void *ctx, const char *dir, const char *fleet, unsigned kind,
                         enum orbit_backing b)
{
    (void)dir; (void)b;
    struct name_collect *c = ctx;
    if (kind != ORB_FLEET_KIND)
        return;
    if (c->n < c->max)
        snprintf(c->names[c->n], ORBIT_FLEET_NAME_MAX + 1, "%s", fleet);
    c->n++;
}

ssize_t orbit_fleet_list(char (*names)[ORBIT_FLEET_NAME_MAX + 1], size_t max)
{
    orb_error_clear();
    if (max && !names)
        return orb_fail(-ORBIT_EMALFORMED, "names is NULL with max %zu", max);
    struct name_collect c = { names, max, 0 };
    scan_segments(collect_name, &c);
    return (ssize_t)c.n;
}

struct unlink_ctx { const char *fleet; int removed; int error; };

static void unlink_one(void *ctx, const char *dir, const char *fleet, unsigned kind, enum orbit_backing b)
{
    (void)b;
    struct unlink_ctx *u = ctx;
    char path[400];
    if (strcmp(fleet, u->fleet) != 0)
        return;
    snprintf(path, sizeof path, "%s/orbit.%s.%u", dir, fleet, kind);
    if (unlink(path) == 0)
        u->removed++;
    else if (errno != ENOENT)
        u->error = -errno;
}

/*
 * Is n "orbit.<name>.<kind>.tmp.<pid>.<ns>" for exactly this fleet name
 * ("orbit.web." also begins fleet "web.x"'s files: the kind must follow)?
 */
static bool half_built_of(const char *n, const char *name)
{
    size_t len = strlen(name);
    if (strncmp(n, "orbit.", 6) != 0 || strncmp(n + 6, name, len) != 0 || n[6 + len] != '.')
        return false;
    const char *kind = n + 6 + len + 1, *p = kind;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > kind && p - kind <= 3 && strncmp(p, ".tmp.", 5) == 0;
}

struct dead_creations { const char *dir, *name; int removed; };

/* One directory entry: removed if it is a half-built segment of the fleet whose creator is gone. */
static bool unlink_if_dead_creation(void *ctx, const char *n)
{
    struct dead_creations *c = ctx;
    if (!half_built_of(n, c->name))
        return true;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", c->dir, n);
    if (!orb_segment_creating_here(n) && orb_segment_creator_alive(path) != 0)
        return true;   /* its creator lives (or the file is not one we can judge): its own */
    c->removed += unlink(path) == 0;
    return true;
}

/*
 * A creator builds a segment as "orbit.<fleet>.<kind>.tmp.<pid>.<ns>" and links it into
 * place; one killed before that leaves the file. Removes those whose creator is gone:
 * a creator holds its file's creator lock from its first instant to its link, and the
 * kernel drops it with the creator, in any pid namespace (a pid in the name is another
 * namespace's as often as ours). This process's own, cut short (a bench's signal handler
 * unlinking its fleet mid-creation), goes too. Returns how many.
 */
static int unlink_dead_creations(const char *name)
{
    const char *dirs[2];
    char hdir[256];
    int removed = 0;
    segment_dirs(dirs, hdir);
    for (int d = 0; d < 2; d++) {
        struct dead_creations c = { dirs[d], name, 0 };
        if (dirs[d])
            dir_each(dirs[d], unlink_if_dead_creation, &c);
        removed += c.removed;
    }
    return removed;
}

int orbit_fleet_unlink(const char *name)
{
    orb_error_clear();
    if (!orb_fleet_name_valid(name))
        return orb_fail_text(-ORBIT_EMALFORMED, ORB_NAME_RULE);
    struct unlink_ctx u = { name, 0, 0 };
    scan_segments(unlink_one, &u);
    u.removed += unlink_dead_creations(name);
    /* Creation locks are not segments; one a killed creator left behind counts as removed. */
    for (unsigned kind = 0; kind < 256; kind++) {
        char path[300];
        if (orb_segment_lock_path(name, (uint8_t)kind, path, sizeof path) == 0 && unlink(path) == 0)
            u.removed++;
    }
    if (u.error)
        return orb_fail(u.error, "fleet '%s': a segment could not be removed: %s", name, strerror(-u.error));
    return u.removed ? 0 : orb_fail(-ENOENT, "no fleet '%s' on this host: no segment or lock file of it to "
                                    "remove", name);
}
