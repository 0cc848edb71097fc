/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: a segment file with arbitrary bytes (a header and a node table
 * written by a hostile or broken peer) is refused or read without any access
 * outside the mapping.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <orbit/fleet.h>
#include "core/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char name[64], path[128];
    if (!name[0]) {
        snprintf(name, sizeof name, "fuzz-seg-%d", (int)getpid());
        snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", name);
        setenv("ORBIT_HUGETLB_DIR", "", 1);
    }
    /* Most inputs get a well-formed header prefix so the fuzzer reaches the deeper checks. */
    uint8_t buf[8192];
    size_t len = size < sizeof buf ? size : sizeof buf;
    memset(buf, 0, sizeof buf);
    memcpy(buf, data, len);
    size_t file_len = len;
    if (len > 0 && (data[0] & 1)) {
        /* A header that passes the magic, version and check: the table fields are the fuzzer's. */
        struct orb_seg_header *h = (struct orb_seg_header *)buf;
        h->magic = ORB_SEG_MAGIC;
        h->version = ORB_SEG_VERSION;
        h->header_bytes = ORB_SEG_HEADER_BYTES;
        h->kind = ORB_FLEET_KIND;
        h->table_type = ORB_TABLE_FLEET;
        h->mapped_bytes = sizeof buf;
        if (data[0] & 2)
            h->table_bytes = sizeof buf;
        h->check = orb_seg_header_check(h);
        atomic_store(&h->ready.changes, 1);
        file_len = sizeof buf;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 0;
    if (write(fd, buf, file_len) != (ssize_t)file_len) {
        close(fd);
        return 0;
    }
    close(fd);
    struct orbit_fleet *f;
    if (orbit_fleet_observe(name, &f) == 0) {
        struct orbit_node_info nodes[8];
        orbit_fleet_nodes(f, nodes, 8);
        orbit_fleet_leave(f);
    }
    unlink(path);
    return 0;
}
