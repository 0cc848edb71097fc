/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay: the fleet's counters in /dev/shm/orbit-relay.<fleet>, one slot
 * per worker life, written by each worker, read by the supervisor and
 * `orbit-relay --stats` (stats_show.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "relay.h"

/* The counters' file; staged: where a successor's wait until it takes over (relay_stats_publish). */
static void stats_path(const char *fleet, bool staged, char *buf, size_t len)
{
    snprintf(buf, len, "/dev/shm/orbit-relay.%s%s", fleet, staged ? ".next" : "");
}

static int stats_map(const char *fleet, bool staged, int flags, struct relay_stats **out)
{
    char path[128];
    stats_path(fleet, staged, path, sizeof path);
    int fd = open(path, flags | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if ((flags & O_CREAT) && ftruncate(fd, sizeof **out) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (fstat(fd, &sb) < 0 || (size_t)sb.st_size < sizeof **out) {
        close(fd);
        return -ORBIT_ECORRUPT;
    }
    void *p = mmap(NULL, sizeof **out, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -errno;
    *out = p;
    return 0;
}

int relay_stats_create(const char *fleet, bool staged, struct relay_stats **out)
{
    relay_stats_unlink(fleet, staged);
    int rc = stats_map(fleet, staged, O_CREAT | O_EXCL, out);
    if (rc < 0)
        return rc;
    struct relay_stats *s = *out;
    memset(s, 0, sizeof *s);
    s->version = RELAY_STATS_VERSION;
    s->slots = RELAY_STATS_SLOTS;
    snprintf(s->fleet, sizeof s->fleet, "%s", fleet);
    /* The magic goes last: an opener that sees it sees a whole header. */
    atomic_thread_fence(memory_order_release);
    s->magic = RELAY_STATS_MAGIC;
    return 0;
}

int relay_stats_open(const char *fleet, struct relay_stats **out)
{
    int rc = stats_map(fleet, false, 0, out);
    if (rc == 0 && ((*out)->magic != RELAY_STATS_MAGIC || (*out)->version != RELAY_STATS_VERSION ||
                    (*out)->slots != RELAY_STATS_SLOTS)) {
        relay_stats_unmap(*out);
        return -ORBIT_EGEOMETRY;
    }
    return rc;
}

void relay_stats_unmap(struct relay_stats *s)
{
    if (s)
        munmap(s, sizeof *s);
}

void relay_stats_unlink(const char *fleet, bool staged)
{
    char path[128];
    stats_path(fleet, staged, path, sizeof path);
    unlink(path);
}

/* The staged counters take the fleet's path: --stats shows the successor from now on (the
 * relay it took over from keeps writing into its own, unlinked). */
int relay_stats_publish(const char *fleet)
{
    char from[128], to[128];
    stats_path(fleet, true, from, sizeof from);
    stats_path(fleet, false, to, sizeof to);
    return rename(from, to) < 0 ? -errno : 0;
}

void relay_stats_total(const struct relay_stats *s, struct relay_worker_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        const struct relay_worker_stats *w = &s->w[i];
        uint32_t state = STAT_GET(w, state);
        if (state == SLOT_FREE)
            continue;
#define SUM(f) atomic_store_explicit(&out->f, STAT_GET(out, f) + STAT_GET(w, f), memory_order_relaxed);
        RELAY_STATS_COUNTERS(SUM)
        if (state == SLOT_RUNNING || state == SLOT_STARTING) {
            RELAY_STATS_GAUGES(SUM)
        }
#undef SUM
    }
}

