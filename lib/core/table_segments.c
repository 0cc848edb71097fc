/* SPDX-License-Identifier: MIT */
/*
 * A table's segment as its fleet holds it: made or opened with the fleet's
 * capacity, mode, group and backing, or, in a private fleet, kept in the
 * fleet handle and counted by reference. Under the table base, over the
 * segment files: it knows no table and nothing of the fleet's life.
 */
#include <pthread.h>
#include <string.h>
#include "error_internal.h"
#include "fleet_internal.h"
#include "segment.h"

static int private_find(struct orbit_fleet *f, uint8_t kind)
{
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++)
        if (f->private_tables[i].refs > 0 && f->private_tables[i].seg.kind == kind)
            return i;
    return -1;
}

static int private_open(struct orbit_fleet *f, struct orb_seg_request *req, struct orb_segment *out)
{
    pthread_mutex_lock(&f->lock);
    int rc, i = private_find(f, req->kind);
    if (i >= 0) {
        struct orb_seg_header *h = orb_seg_hdr(&f->private_tables[i].seg);
        bool same = req->table_bytes == h->table_bytes && req->table_type == h->table_type &&
                    req->geometry_len == h->geometry_len &&
                    memcmp(req->geometry, h->geometry, req->geometry_len) == 0;
        rc = same ? 0 : orb_seg_geometry_refused(h, req, "a private table");
    } else {
        for (i = 0; i < ORB_PRIVATE_TABLES_MAX && f->private_tables[i].refs > 0; i++)
            ;
        rc = i < ORB_PRIVATE_TABLES_MAX ? orb_segment_open(req, &f->private_tables[i].seg)
                                        : orb_fail(-ORBIT_EFULL, "a private fleet holds at most %d tables",
                                                   ORB_PRIVATE_TABLES_MAX);
    }
    if (rc == 0) {
        f->private_tables[i].refs++;
        *out = f->private_tables[i].seg;
        out->created = f->private_tables[i].refs == 1;
    }
    pthread_mutex_unlock(&f->lock);
    return rc;
}

int orb_fleet_table_open(struct orbit_fleet *f, struct orb_seg_request *req, struct orb_segment *out)
{
    req->fleet_capacity = f->capacity;
    req->mode = f->mode;
    req->gid = f->gid;
    if (f->is_private) {
        req->fleet = NULL;
        req->backing = ORBIT_BACKING_PRIVATE;
        return private_open(f, req, out);
    }
    req->fleet = f->name;
    /* Tables follow the fleet: an AUTO fleet that landed on /dev/shm stays there. */
    req->backing = f->want_backing == ORBIT_BACKING_AUTO && f->seg.backing == ORBIT_BACKING_SHM
                       ? ORBIT_BACKING_SHM : f->want_backing;
    if (f->observer)
        req->backing = ORBIT_BACKING_AUTO;
    int rc = orb_segment_open(req, out);
    /* Only a creator pre-faults, and runs out: say how much it asked of which mount. */
    return rc == -ENOMEM ? orb_room_fail_create(rc, req) : rc;
}

int orb_fleet_table_open_existing(struct orbit_fleet *f, uint8_t kind, struct orb_segment *out)
{
    if (f->is_private) {
        pthread_mutex_lock(&f->lock);
        int i = private_find(f, kind);
        if (i >= 0) {
            f->private_tables[i].refs++;
            *out = f->private_tables[i].seg;
            out->created = false;
        }
        pthread_mutex_unlock(&f->lock);
        return i >= 0 ? 0 : orb_fail(-ENOENT, "this private fleet has no table of kind %u", (unsigned)kind);
    }
    /* An observer's tables are read as its fleet segment is: read-only, waiting as long for a creator. */
    int rc = orb_segment_open_existing_within(f->name, kind, f->ready_wait_ms, f->seg.read_only, out);
    if (rc == 0 && orb_seg_hdr(out)->fleet_capacity != f->capacity) {
        rc = orb_fail(-ORBIT_EGEOMETRY, "table kind %u of fleet '%s' was made for capacity %u vs %u of this "
                      "fleet", (unsigned)kind, f->name, orb_seg_hdr(out)->fleet_capacity, f->capacity);
        orb_segment_close(out);
    }
    return rc;
}

void orb_fleet_table_close(struct orbit_fleet *f, struct orb_segment *seg)
{
    if (!seg->base)
        return;
    if (!f->is_private) {
        orb_segment_close(seg);
        return;
    }
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < ORB_PRIVATE_TABLES_MAX; i++) {
        if (f->private_tables[i].refs > 0 && f->private_tables[i].seg.base == seg->base &&
            --f->private_tables[i].refs == 0)
            orb_segment_close(&f->private_tables[i].seg);
    }
    pthread_mutex_unlock(&f->lock);
    seg->base = NULL;
}
