/* SPDX-License-Identifier: MIT */
/* The part every table handle shares: lifecycle, opening by header, lane, readiness (table_base.h). */
#include <stdlib.h>
#include <string.h>
#include <orbit/inspect.h>
#include "error_internal.h"
#include "fleet_internal.h"
#include "guard.h"
#include "guard_sigbus.h"
#include "table_base.h"
#include "readiness.h"

void *orb_table_alloc(size_t bytes, struct orbit_fleet *f)
{
    struct orb_table_base *b = aligned_alloc(64, orb_align_up(bytes, 64));
    if (!b)
        return NULL;
    memset(b, 0, bytes);
    b->fleet = f;
    b->fork_generation = f->fork_generation;
    b->observer = f->observer || f->node == ORBIT_NODE_NONE;
    b->node = b->observer ? ORBIT_NODE_NONE : f->node;
    b->incarnation = b->observer ? 0 : f->incarnation;
    b->readiness_fd = -1;
    b->seg.guard = -1;
    pthread_mutex_init(&b->lock, NULL);
    orb_tally_init(&b->tally);
    return b;
}

/* The segment is mapped and checked: the handle's kind and counters follow it. */
static void table_bound(struct orb_table_base *b)
{
    b->kind = b->seg.kind;
    orb_ctr_ref_open(&b->ctr, b->fleet, b->kind);
    b->stats.ctr = &b->ctr;
    /* A fault in the segment poisons the generation: every later call fails its entry check. */
    orb_guard_bind(b->seg.guard, &b->fork_generation);
}

/* In a fork child the readiness fd goes without its driver and nothing shared is touched. */
void orb_table_free(struct orb_table_base *b)
{
    if (!b)
        return;
    if (b->readiness_fd >= 0)
        orb_readiness_close(b->readiness_fd);
    orb_ctr_ref_close(&b->ctr);
    if (b->seg.base)
        orb_fleet_table_close(b->fleet, &b->seg);
    pthread_mutex_destroy(&b->lock);
    orb_tally_destroy(&b->tally);
    free(b);
}

void orb_table_close(const struct orb_table_kind *k, struct orb_table_base *b)
{
    if (!b)
        return;
    if (k->release)
        k->release(b);
    orb_table_free(b);
}

static struct orb_table_base *table_new(const struct orb_table_kind *k, struct orbit_fleet *f)
{
    struct orb_table_base *b = orb_table_alloc(k->handle_bytes, f);
    if (!b) {
        orb_fail(-ENOMEM, "out of memory for a table handle (%zu bytes)", k->handle_bytes);
        return NULL;
    }
    if (k->prepare)
        k->prepare(b);
    return b;
}

/* The segment is mapped: check its geometry, bind, ready. Frees the handle on failure. */
static int table_finish(const struct orb_table_kind *k, struct orb_table_base *b, const void *geometry,
                        void **out)
{
    uint64_t layout[ORB_TABLE_LAYOUT_MAX / 8];
    int rc = k->check(&b->seg, geometry, layout);
    if (rc == 0) {
        k->bind(b, geometry, layout);
        table_bound(b);
        if (k->ready)
            rc = k->ready(b);
    }
    if (rc < 0) {
        orb_table_close(k, b);
        return rc;
    }
    *out = b;
    return 0;
}

/* A handle of k's type over the existing segment of kind, its geometry copied out. */
static int table_open_existing(const struct orb_table_kind *k, struct orbit_fleet *f, uint8_t kind,
                               void *geometry, void **out)
{
    struct orb_table_base *b = table_new(k, f);
    if (!b)
        return -ENOMEM;
    int rc = orb_fleet_table_open_existing(f, kind, &b->seg);
    if (rc < 0) {
        orb_table_close(k, b);
        return rc;
    }
    const struct orb_seg_header *h = orb_seg_hdr(&b->seg);
    if (h->table_type != k->type || h->geometry_len != k->geometry_len || k->geometry_len > ORB_GEOMETRY_MAX) {
        rc = orb_fail(-ORBIT_EGEOMETRY, "table kind %u of fleet '%s' is a %s table (this call opens a %s one)",
                      kind, f->name, orbit_table_type_name(h->table_type), orbit_table_type_name(k->type));
        orb_table_close(k, b);   /* after the sentence: it reads the header */
        return rc;
    }
    memcpy(geometry, h->geometry, k->geometry_len);
    return table_finish(k, b, geometry, out);
}

int orb_table_open_existing_as(const struct orb_table_kind *k, struct orbit_fleet *f, uint8_t kind,
                               void **out, const char *call)
{
    int rc = orb_enter_fleet(f, call);
    if (rc < 0)
        return rc;
    if (!out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL", call);
    return orb_table_open(k, f, kind, out);
}

int orb_table_open(const struct orb_table_kind *k, struct orbit_fleet *f, uint8_t kind, void **out)
{
    uint64_t geometry[(ORB_GEOMETRY_MAX + 7) / 8];   /* what a segment header can hold */
    return table_open_existing(k, f, kind, geometry, out);
}

/* An observer's open: the existing table, only with the geometry asked. */
static int table_observe(const struct orb_table_kind *k, struct orbit_fleet *f, struct orb_seg_request *req,
                         void **out)
{
    uint64_t geometry[(ORB_GEOMETRY_MAX + 7) / 8];
    struct orb_table_base *b = NULL;
    int rc = table_open_existing(k, f, req->kind, geometry, (void **)&b);
    if (rc < 0)
        return rc;
    if (memcmp(geometry, req->geometry, req->geometry_len) != 0) {
        req->fleet = f->name;
        req->fleet_capacity = f->capacity;
        rc = orb_seg_geometry_refused(orb_seg_hdr(&b->seg), req, b->seg.path);
        orb_table_close(k, b);
        return rc;
    }
    *out = b;
    return 0;
}

int orb_table_create(const struct orb_table_kind *k, struct orbit_fleet *f, struct orb_seg_request *req,
                     void **out)
{
    if (f->observer)
        return table_observe(k, f, req, out);
    struct orb_table_base *b = table_new(k, f);
    if (!b)
        return -ENOMEM;
    int rc = orb_fleet_table_open(f, req, &b->seg);
    if (rc < 0) {
        orb_table_close(k, b);
        return rc;
    }
    return table_finish(k, b, req->geometry, out);
}

int orb_table_init_epoch(struct orb_segment *seg, void *ctx)
{
    (void)ctx;
    /* A new file or anonymous mapping reads zero: the table's empty state; it gets a first epoch. */
    atomic_store_explicit(&orb_seg_hdr(seg)->epoch, orb_next_epoch(0), memory_order_release);
    return 0;
}

int orb_table_populate(struct orb_table_base *b, size_t off, size_t len, const char *what)
{
    if (b->seg.backing == ORBIT_BACKING_PRIVATE)
        return 0;   /* anonymous memory: no file that could run out under a mapping */
    int rc = orb_segment_populate(&b->seg, off, len);
    if (rc == -ENOMEM)
        return orb_room_fail(rc, b->seg.path, false, orb_align_up(len, b->seg.page), what);
    return rc == -ORBIT_ENOTSUP ? 0 : rc;   /* no MADV_POPULATE_WRITE (before 5.14): pages come on touch */
}

int orb_table_readiness(struct orb_table_base *b, const char *call)
{
    if (b->observer || b->fleet->node == ORBIT_NODE_NONE)
        return orb_fail(-ORBIT_ENOTOWNER, "%s: an observer has no doorbell (join as a member)", call);
    pthread_mutex_lock(&b->lock);
    int fd = -ORBIT_EBUSY;
    if (b->readiness_fd < 0) {
        fd = orb_readiness_open(&orb_fleet_record(b->fleet, b->fleet->node)->doorbell);
        if (fd >= 0)
            b->readiness_fd = fd;
    }
    pthread_mutex_unlock(&b->lock);
    if (fd == -ORBIT_EBUSY)
        return orb_fail(fd, "%s: the readiness descriptor was made already (one per handle)", call);
    return fd;
}
