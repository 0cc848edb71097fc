/* SPDX-License-Identifier: MIT */
/* orbitctl ls: the room left on each mount that holds (or may hold) segments. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include "orbitctl.h"
#include "tool.h"

#define HUGETLBFS_MAGIC_ 0x958458f6
#define MOUNTS_MAX 8

void ctl_room_note(struct ctl_room *r, const char *segment_path)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", segment_path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        ctl_room_add(r, dir);
    }
}

void ctl_room_add(struct ctl_room *r, const char *dir)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->dir[i], dir) == 0)
            return;
    if (r->n < CTL_ROOM_MAX)
        snprintf(r->dir[r->n++], sizeof r->dir[0], "%s", dir);
}

/* One line per mount ("room: /dev/shm (tmpfs): 37.9 MiB free of 64.0 MiB"), or a JSON array. */
void ctl_room_print(const struct ctl_room *r, bool json)
{
    if (json)
        printf(",\"room\":[");
    for (int i = 0, shown = 0; i < r->n; i++) {
        struct statfs sf;
        if (statfs(r->dir[i], &sf) != 0)
            continue;
        bool huge = sf.f_type == HUGETLBFS_MAGIC_;
        uint64_t page = (uint64_t)sf.f_bsize, free_b = (uint64_t)sf.f_bavail * page,
                 total = (uint64_t)sf.f_blocks * page;
        if (json) {
            printf("%s{\"dir\":", shown ? "," : "");
            tool_json_str(stdout, r->dir[i]);
            printf(",\"type\":\"%s\",\"free\":\"%" PRIu64 "\",\"total\":\"%" PRIu64 "\",\"page\":\"%" PRIu64 "\"}",
                   huge ? "hugetlbfs" : "tmpfs", free_b, total, page);
        } else if (huge) {
            printf("room: %s (hugetlbfs): %" PRIu64 " of %" PRIu64 " huge pages of %" PRIu64 " KiB free\n",
                   r->dir[i], free_b / page, total / page, page / 1024);
        } else {
            printf("room: %s (tmpfs): %.1f MiB free of %.1f MiB\n", r->dir[i], (double)free_b / 1048576.0,
                   (double)total / 1048576.0);
        }
        shown++;
    }
    if (json)
        printf("]");
}
