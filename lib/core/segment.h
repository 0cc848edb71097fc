/* SPDX-License-Identifier: MIT */
/*
 * Segments: one shared mapping per table, named "orbit.<fleet>.<kind>".
 *
 * Layout: a 4 KiB header (struct orb_seg_header) then the table's bytes.
 * Creation is race-free: the creator builds the file under a private name,
 * sizes it, maps it, pre-faults the shared part, writes the header with
 * ready = 0 and link(2)s it into place (fails with EEXIST if someone won);
 * it initialises the table and publishes ready = 1 last. Openers park on the
 * ready word (futex) and give up with -ORBIT_ECORRUPT only if the creator
 * died before publishing.
 */
#ifndef ORB_CORE_SEGMENT_H
#define ORB_CORE_SEGMENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <orbit/fleet.h>
#include "fleet_name.h"
#include "wait.h"

#define ORB_SEG_MAGIC        0x4745535449425234ull /* "4RBITSEG" little-endian-ish tag */
#define ORB_SEG_VERSION      1u
#define ORB_SEG_HEADER_BYTES 4096u
#define ORB_GEOMETRY_MAX     64u
#define ORB_FLEET_KIND       255
#define ORB_SHM_DIR          "/dev/shm"
/* A byte far past the end of every segment file: write-locked (OFD) by its creator until ready. */
#define ORB_SEG_CREATOR_LOCK_OFF (1ll << 42)

/*
 * What a segment holds (its header's table_type), so tools and the reaper can
 * find every table. The fleet segment is type 1; each table module numbers
 * its own type in its layout header and registers it (table_ops.h).
 */
#define ORB_TABLE_FLEET 1

struct orb_seg_header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;        /* ORB_SEG_HEADER_BYTES */
    uint8_t  kind;
    uint8_t  table_type;          /* ORB_TABLE_FLEET or a module's type */
    uint16_t fleet_capacity;
    uint32_t geometry_len;
    uint64_t table_bytes;         /* header + table, as the table asked */
    uint64_t mapped_bytes;        /* file size (rounded to the page size) */
    int32_t  creator_pid;
    uint32_t creator_version;     /* orbit_version() of the library that made it; 0: made before it was recorded */
    uint8_t  geometry[ORB_GEOMETRY_MAX];
    uint64_t check;               /* FNV-1a over the fields above */
    _Atomic uint64_t epoch;       /* the table's epoch (reset_all) */
    struct orb_waitword ready;    /* changes: 0 initialising, 1 ready */
};

struct orb_segment {
    void    *base;                /* header at base, table at base + 4096 */
    size_t   mapped;              /* bytes mapped */
    size_t   page;                /* page size of the backing (2 MiB on hugetlbfs) */
    int      fd;                  /* -1 for PRIVATE */
    enum orbit_backing backing;   /* HUGETLB, SHM or PRIVATE: what was obtained */
    bool     created;             /* this process created it */
    int      guard;               /* its slot in the SIGBUS guard (guard_sigbus.h), -1: none */
    bool     read_only;           /* a private view of a file this process may only read */
    uint8_t  kind;
    uint8_t  table_type;
    char     path[256];
};

/* What a table asks for. */
struct orb_seg_request {
    const char *fleet;            /* NULL: PRIVATE (anonymous) */
    uint8_t  kind;
    uint8_t  table_type;          /* ORB_TABLE_FLEET or a module's type */
    uint16_t fleet_capacity;
    const void *geometry;         /* compared byte for byte with an existing header */
    uint32_t geometry_len;        /* <= ORB_GEOMETRY_MAX */
    const char *const *geometry_names;   /* a name per 32-bit word, for the sentence of a mismatch; may be NULL */
    size_t   table_bytes;         /* total bytes including the 4 KiB header */
    size_t   populate_bytes;      /* the creator pre-faults [0, populate_bytes) */
    enum orbit_backing backing;
    uint32_t mode;                /* 0: 0600 */
    int64_t  gid;                 /* -1: none */
    /* The creator's initialiser, run before ready is published. May be NULL. */
    int (*init)(struct orb_segment *seg, void *ctx);
    void *ctx;
};

static inline struct orb_seg_header *orb_seg_hdr(const struct orb_segment *s)
{
    return (struct orb_seg_header *)s->base;
}
static inline void *orb_seg_table(const struct orb_segment *s)
{
    return (char *)s->base + ORB_SEG_HEADER_BYTES;
}

/*
 * Create or open. Errors: -ORBIT_EGEOMETRY (other kind/capacity/geometry/
 * version/size), -ORBIT_ECORRUPT (truncated, foreign, garbled, creator died
 * before ready), -ENOMEM (huge pages exhausted: HUGETLB; AUTO falls back),
 * -EACCES, -ORBIT_EMALFORMED.
 */
int  orb_segment_open(const struct orb_seg_request *req, struct orb_segment *out);

/*
 * Open an existing named segment, taking its geometry from the header.
 * geometry/geometry_len receive it (buffer of ORB_GEOMETRY_MAX). -ENOENT if
 * it does not exist.
 */
int  orb_segment_open_existing(const char *fleet, uint8_t kind, struct orb_segment *out);
/* The same for a caller with read access only: opened O_RDONLY and mapped copy-on-write. */
int  orb_segment_open_existing_read_only(const char *fleet, uint8_t kind, struct orb_segment *out);
/*
 * Either, waiting ready_wait_ms for a creator that has not published it yet
 * (-1: the default bound, then -ORBIT_ECORRUPT; 0 or more: that long, then
 * -ORBIT_EAGAIN naming the file while the creator lives).
 */
int  orb_segment_open_existing_within(const char *fleet, uint8_t kind, int ready_wait_ms, bool read_only,
                                      struct orb_segment *out);

/* -ORBIT_EGEOMETRY with the sentence naming what differs between h and req (both values). */
int  orb_seg_geometry_refused(const struct orb_seg_header *h, const struct orb_seg_request *req, const char *path);
/* The sentence of an -ENOMEM while pre-faulting want bytes of path: asked, free and total. */
void orb_seg_no_room(int rc, const char *path, int fd, size_t want);

/* FNV-1a over the header fields before check (what validation compares). */
uint64_t orb_seg_header_check(const struct orb_seg_header *h);

/*
 * Read and validate an existing segment's header without mapping it (for
 * listings and death dispatch). -ENOENT, -ORBIT_ECORRUPT, -ORBIT_EGEOMETRY.
 */
int  orb_segment_peek(const char *fleet, uint8_t kind, struct orb_seg_header *out, uint64_t *file_size,
                      enum orbit_backing *backing);

/* Pre-fault [off, off+len) for writing: -ENOMEM on huge-page exhaustion. */
int  orb_segment_populate(struct orb_segment *seg, size_t off, size_t len);
void orb_segment_close(struct orb_segment *seg);

/* Room on a mount (room.c): bytes free (to this user) and in all, its page size, its type. */
struct orb_room { uint64_t free, total, page; bool hugetlbfs; char dir[256]; };
int  orb_room_of(const char *dir, struct orb_room *out);
/*
 * rc (an -ENOMEM), with the sentence "what needs asked bytes on <mount>
 * (tmpfs|hugetlbfs), which has F of T bytes free: ..." for orbit_last_error.
 * path_or_dir: a segment's path (its directory is the mount's) or, is_dir, the directory.
 */
int  orb_room_fail(int rc, const char *path_or_dir, bool is_dir, uint64_t asked, const char *what);
/* The same for a segment req could not be created: the mount its backing tried last. */
int  orb_room_fail_create(int rc, const struct orb_seg_request *req);

/* Build "<dir>/orbit.<fleet>.<kind>" for a backing; -ORBIT_ETOOLARGE, -ENOENT (no such dir). */
int  orb_segment_path(enum orbit_backing backing, const char *fleet, uint8_t kind, char *buf, size_t len);
/*
 * A half-built segment ("orbit.<fleet>.<kind>.tmp.<pid>.<ns>"): is its creator
 * alive? It holds the file's creator lock from its first instant to its link:
 * 1 held, 0 not, or a negative code. The kernel's word, in any pid namespace.
 */
int  orb_segment_creator_alive(const char *path);
/* Is this process building a segment under that temporary name right now? */
bool orb_segment_creating_here(const char *name);
/* The file in /dev/shm whose flock serialises creating that segment name. */
int  orb_segment_lock_path(const char *fleet, uint8_t kind, char *buf, size_t len);
const char *orb_hugetlb_dir(void);        /* ORBIT_HUGETLB_DIR or the first hugetlbfs mount, or NULL */

/* orbit_process_start_time (proc.c), 0 when pid is gone or exited (or /proc cannot tell). */
uint64_t orb_proc_start_time(int pid);
/* This process's pid namespace (its inode), 0 when /proc cannot tell (proc.c). */
uint64_t orb_pidns_self(void);

#endif
