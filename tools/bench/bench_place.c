/* SPDX-License-Identifier: MIT */
/* Pinning the two sides of a latency bench, and where they ran. */
#include <sched.h>
#include <sys/mman.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "bench.h"
#include "bench_place.h"

void place_pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

void place_sample(struct place_log *l)
{
    if (l->n < PLACE_SAMPLES)
        l->cpu[l->n++] = (int16_t)sched_getcpu();
}

void place_begin(struct place_summary *s, const int pinned[2])
{
    memset(s, 0, sizeof *s);
    s->pinned[0] = pinned[0];
    s->pinned[1] = pinned[1];
}

static void side_add(struct place_summary *s, int side, const struct place_log *l)
{
    for (int i = 0; i < l->n; i++) {
        if (l->cpu[i] >= 0 && l->cpu[i] < 64)
            s->used[side] |= UINT64_C(1) << l->cpu[i];
        if (i && l->cpu[i] != l->cpu[i - 1])
            s->moves[side]++;
    }
}

void place_add(struct place_summary *s, const struct place_log *a, const struct place_log *b)
{
    side_add(s, 0, a);
    side_add(s, 1, b);
    int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        s->shared += a->cpu[i] == b->cpu[i];
    s->samples += n;
}

static const char *mask_text(uint64_t m, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < 64 && used < len; c++) {
        if (!(m >> c & 1))
            continue;
        int end = c;
        while (end + 1 < 64 && (m >> (end + 1) & 1))
            end++;
        int n = end > c ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, end)
                        : snprintf(buf + used, len - used, "%s%d", used ? "," : "", c);
        used += n > 0 ? (size_t)n : 0;
        c = end;
    }
    if (!used)
        snprintf(buf, len, "?");
    return buf;
}

const char *place_text(const struct place_summary *s, char *buf, size_t len)
{
    char a[32], b[32];
    int n = snprintf(buf, len, "A %s B %s, moved %ld|%ld", mask_text(s->used[0], a, sizeof a),
                     mask_text(s->used[1], b, sizeof b), s->moves[0], s->moves[1]);
    if (n > 0 && (size_t)n < len && s->samples && (s->pinned[0] < 0 || s->pinned[0] == s->pinned[1]))
        snprintf(buf + n, len - (size_t)n, ", same CPU %.0f%%", 100.0 * (double)s->shared / (double)s->samples);
    return buf;
}

void place_print_json(const struct place_summary *s, FILE *out)
{
    char a[32], b[32];
    fprintf(out, "{\"pinned\":[%d,%d],\"a_cpus\":\"%s\",\"b_cpus\":\"%s\",\"a_moves\":%ld,\"b_moves\":%ld,"
            "\"samples\":%ld,\"same_cpu_fraction\":%.4f}", s->pinned[0], s->pinned[1],
            mask_text(s->used[0], a, sizeof a), mask_text(s->used[1], b, sizeof b), s->moves[0], s->moves[1],
            s->samples, s->samples ? (double)s->shared / (double)s->samples : 0);
}

void bench_check_cpus(const char *opt, const int cpu[2])
{
    cpu_set_t set;
    if (cpu[0] < 0 || sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int i = 0; i < 2; i++)
        if (!CPU_ISSET(cpu[i], &set)) {
            char arg[32], reason[96];
            snprintf(arg, sizeof arg, "%d,%d", cpu[0], cpu[1]);
            snprintf(reason, sizeof reason, "CPU %d is not one this process may run on (%d of them)", cpu[i],
                     CPU_COUNT(&set));
            cli_bad(BENCH_TOOL, opt, arg, reason);
        }
}

struct place_log *place_logs_map(void)
{
    struct place_log *l = mmap(NULL, 2 * sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED)
        return NULL;
    l[0].n = l[1].n = 0;
    return l;
}

void place_logs_unmap(struct place_log *l)
{
    if (l)
        munmap(l, 2 * sizeof *l);
}
