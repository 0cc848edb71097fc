/* SPDX-License-Identifier: MIT */
/*
 * Room on a mount: what a sentence about memory that ran out says (the bytes
 * asked, the bytes free and in all on the mount, which mount and what kind),
 * so an -ENOMEM names its cause, and orbitctl can show what is left.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include "error_internal.h"
#include "segment.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

/* The directory of path ("/dev/shm/orbit.web.246" -> "/dev/shm"). */
static void dir_of(const char *path, char *dir, size_t len)
{
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
}

int orb_room_of(const char *dir, struct orb_room *out)
{
    struct statfs sf;
    if (statfs(dir, &sf) != 0)
        return -errno;
    *out = (struct orb_room){ .free = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize,
                              .total = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize,
                              .page = (uint64_t)sf.f_bsize, .hugetlbfs = sf.f_type == HUGETLBFS_MAGIC };
    snprintf(out->dir, sizeof out->dir, "%s", dir);
    return 0;
}

int orb_room_fail(int rc, const char *path_or_dir, bool is_dir, uint64_t asked, const char *what)
{
    char dir[256];
    struct orb_room room;
    if (is_dir)
        snprintf(dir, sizeof dir, "%s", path_or_dir);
    else
        dir_of(path_or_dir, dir, sizeof dir);
    if (orb_room_of(dir, &room) < 0)
        return orb_fail(rc, "%s needs %llu bytes on %s, which could not be had", what,
                        (unsigned long long)asked, dir);
    return orb_fail(rc, "%s needs %llu bytes on %s (%s), which has %llu of %llu free: give it more room "
                    "(%s) or use a smaller spec", what, (unsigned long long)asked, room.dir,
                    room.hugetlbfs ? "hugetlbfs" : "tmpfs", (unsigned long long)room.free,
                    (unsigned long long)room.total, room.hugetlbfs ? "huge pages" : "--shm-size");
}

int orb_room_fail_create(int rc, const struct orb_seg_request *req)
{
    const char *dir = req->backing == ORBIT_BACKING_HUGETLB ? orb_hugetlb_dir() : ORB_SHM_DIR;
    char what[128];
    snprintf(what, sizeof what, "creating orbit.%s.%u", req->fleet ? req->fleet : "(private)",
             (unsigned)req->kind);
    if (!dir)
        return orb_fail(rc, "%s needs huge pages, and no hugetlbfs is mounted", what);
    struct orb_room room;
    uint64_t asked = req->populate_bytes, page = orb_room_of(dir, &room) == 0 && room.page ? room.page : 4096;
    return orb_room_fail(rc, dir, true, (asked + page - 1) / page * page, what);
}
