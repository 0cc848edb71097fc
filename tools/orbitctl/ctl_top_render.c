/* SPDX-License-Identifier: MIT */
/*
 * orbitctl top: two samples as lines of text. Each section is a header and
 * rows; when the height is limited, sections get their header and one row in
 * order of importance, then the rows left over go the same way, and a cut
 * section of more than one row ends with "... N more". Every line is cut to
 * the width.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl_top.h"

#define PLAIN_ROWS 32   /* rows per section without a height limit */

struct ctx {
    const struct top_view *v;
    const struct top_sample *a, *b;   /* a: the earlier sample, or NULL */
    double dt;                        /* seconds between them */
};

void top_lines_free(struct top_lines *L)
{
    free(L->l);
    *L = (struct top_lines){ 0 };
}

static int add(struct top_lines *L, size_t cols, const char *fmt, ...)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 32;
        void *p = realloc(L->l, cap * sizeof *L->l);
        if (!p)
            return -ENOMEM;
        L->l = p;
        L->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->l[L->n], sizeof L->l[0], fmt, ap);
    va_end(ap);
    L->l[L->n][cols < TOP_COLS ? cols : TOP_COLS] = '\0';
    L->n++;
    return 0;
}

void top_human(double v, char *buf, size_t len)
{
    static const char units[] = "kMGTPE";
    int u = -1;
    if (!(v >= 0)) {
        snprintf(buf, len, "-");
        return;
    }
    if (v < 10 && v != (double)(uint64_t)v) {
        snprintf(buf, len, "%.1f", v);
        return;
    }
    while (v >= 9999.5 && u < 5) {
        v /= 1000;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, v < 9.95 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

/* The rate of a counter that only grows; negative (shown "-") when it went back. */
static double rate(const struct ctx *c, uint64_t before, uint64_t now)
{
    return now >= before && c->dt > 0 ? (double)(now - before) / c->dt : -1;
}

static const struct top_table *table_before(const struct ctx *c, const struct top_table *t)
{
    for (size_t i = 0; c->a && i < c->a->n_tables; i++)
        if (c->a->t[i].kind == t->kind && c->a->t[i].type == t->type && c->a->t[i].rc == 0)
            return &c->a->t[i];
    return NULL;
}

/* ---- tables: the fleet's counters per second ---- */

/* "reservations 100  accepts 100": counters that moved, packed into rows under the table's name. */
static int table_rows(const struct ctx *c, const struct top_table *t, struct top_lines *L)
{
    const size_t indent = 16, cols = c->v->cols;
    char row[TOP_COLS + 1], item[96], n[16];
    const struct top_table *was = table_before(c, t);
    int w = snprintf(row, sizeof row, "%-10.10s %4u ", t->name, t->kind);
    size_t at = (size_t)w, items = 0;
    const char *why = !t->built ? "(not built in)" : t->rc ? orbit_strerror(t->rc)
                      : !was ? "(rates after the first refresh)" : NULL;
    for (unsigned i = 0; !why && i < ORBIT_COUNTERS_MAX && orbit_counter_name(t->type, i); i++) {
        double r = rate(c, was->total.value[i], t->total.value[i]);
        if (r == 0)
            continue;
        top_human(r, n, sizeof n);
        int iw = snprintf(item, sizeof item, " %s %s", orbit_counter_name(t->type, i), n);
        if (items && at + (size_t)iw > cols) {
            if (add(L, cols, "%s", row) < 0)
                return -ENOMEM;
            at = (size_t)snprintf(row, sizeof row, "%*s", (int)indent, "");
        }
        at += (size_t)snprintf(row + at, sizeof row - at, "%s", item);
        if (at >= sizeof row)
            at = sizeof row - 1;
        items++;
    }
    if (why || !items)
        snprintf(row + at, sizeof row - at, " %s", why ? why : "idle");
    return add(L, cols, "%s", row);
}

static int section_tables(const struct ctx *c, char *head, struct top_lines *L)
{
    snprintf(head, TOP_COLS + 1, "TABLE      KIND  per second");
    for (size_t i = 0; i < c->b->n_tables; i++)
        if (table_rows(c, &c->b->t[i], L) < 0)
            return -ENOMEM;
    return 0;
}

/* ---- nodes: each member's headline counter per table, and its parks ---- */

static const char *headline_label(const char *table)
{
    return strcmp(table, "pool") == 0 ? "rsv/s" : strcmp(table, "streams") == 0 ? "wrB/s"
           : strcmp(table, "admission") == 0 ? "claim/s" : strcmp(table, "arena") == 0 ? "chunk/s" : "?/s";
}

static const struct top_node *node_before(const struct ctx *c, const struct top_node *n)
{
    for (size_t i = 0; c->a && i < c->a->n_nodes; i++)
        if (c->a->nodes[i].info.node == n->info.node && c->a->nodes[i].info.incarnation == n->info.incarnation)
            return &c->a->nodes[i];
    return NULL;
}

/* Table index i of b as it was in a (the same kind), or -1. */
static int table_index_before(const struct ctx *c, size_t i)
{
    for (size_t j = 0; c->a && j < c->a->n_tables; j++)
        if (c->a->t[j].kind == c->b->t[i].kind && c->a->t[j].type == c->b->t[i].type)
            return (int)j;
    return -1;
}

static double node_rate(const struct ctx *c, const struct top_node *was, const struct top_node *n, size_t i,
                        unsigned idx)
{
    int j = was ? table_index_before(c, i) : -1;
    if (j < 0 || !n->have[i] || !was->have[j] || idx >= ORBIT_COUNTERS_MAX)
        return -1;
    return rate(c, was->v[j][idx], n->v[i][idx]);
}

static const char *node_state(const struct orbit_node_info *ni)
{
    return ni->state != ORBIT_NODE_LIVE ? "joining" : ni->alive ? "live" : "DEAD";
}

static int node_row(const struct ctx *c, const struct top_node *n, struct top_lines *L)
{
    char row[TOP_COLS + 1], num[16];
    const struct top_node *was = node_before(c, n);
    size_t at = (size_t)snprintf(row, sizeof row, "%4u  %-8d %-7s", n->info.node, n->info.pid,
                                 node_state(&n->info));
    double parks = 0;
    for (size_t i = 0; i < c->b->n_tables && at < sizeof row; i++) {
        double p = node_rate(c, was, n, i, 0);   /* index 0: parks, in every table */
        parks = p < 0 || parks < 0 ? -1 : parks + p;
        if (c->b->t[i].headline == TOP_NO_IDX)
            continue;
        top_human(node_rate(c, was, n, i, c->b->t[i].headline), num, sizeof num);
        at += (size_t)snprintf(row + at, sizeof row - at, " %8s", num);
    }
    top_human(parks, num, sizeof num);
    if (at < sizeof row)
        snprintf(row + at, sizeof row - at, " %8s", num);
    return add(L, c->v->cols, "%s", row);
}

static int section_nodes(const struct ctx *c, char *head, struct top_lines *L)
{
    size_t at = (size_t)snprintf(head, TOP_COLS + 1, "NODE  PID      STATE  ");
    for (size_t i = 0; i < c->b->n_tables && at < TOP_COLS; i++)
        if (c->b->t[i].headline != TOP_NO_IDX)
            at += (size_t)snprintf(head + at, TOP_COLS + 1 - at, " %8.8s", headline_label(c->b->t[i].name));
    if (at < TOP_COLS)
        snprintf(head + at, TOP_COLS + 1 - at, "  parks/s");
    for (size_t i = 0; i < c->b->n_nodes; i++)
        if (node_row(c, &c->b->nodes[i], L) < 0)
            return -ENOMEM;
    if (c->b->claimed > c->b->n_nodes)
        return add(L, c->v->cols, "  (%zu more nodes claimed; the first %d are read)", c->b->claimed - c->b->n_nodes,
                   TOP_NODES);
    return 0;
}

/* ---- keys: the busiest pool keys ---- */

/* "12ms", "3.4s", "5m", "2h", "never": how long ago the key's latest reservation was. */
static void age_text(uint64_t now_ms, uint64_t then_ms, char *buf, size_t len)
{
    uint64_t ms = then_ms == 0 ? 0 : now_ms > then_ms ? now_ms - then_ms : 0;
    if (then_ms == 0)
        snprintf(buf, len, "never");
    else if (ms < 1000)
        snprintf(buf, len, "%" PRIu64 "ms", ms);
    else if (ms < 60000)
        snprintf(buf, len, "%.1fs", (double)ms / 1000);
    else if (ms < 3600000)
        snprintf(buf, len, "%" PRIu64 "m", ms / 60000);
    else
        snprintf(buf, len, "%" PRIu64 "h", ms / 3600000 < 99999 ? ms / 3600000 : 99999);
}

static enum top_sort sort_by;

static int key_cmp(const void *x, const void *y)
{
    const struct top_key *p = *(const struct top_key *const *)x, *q = *(const struct top_key *const *)y;
    uint64_t up = (uint64_t)p->reserved + p->active, uq = (uint64_t)q->reserved + q->active;
    if (sort_by == TOP_SORT_RECENT && p->last_reserve_ms != q->last_reserve_ms)
        return p->last_reserve_ms < q->last_reserve_ms ? 1 : -1;
    if (up != uq)
        return up < uq ? 1 : -1;
    return p->last_reserve_ms < q->last_reserve_ms ? 1 : p->last_reserve_ms > q->last_reserve_ms ? -1 : 0;
}

static int section_keys(const struct ctx *c, char *head, struct top_lines *L)
{
    static const struct top_key *rows[TOP_ROWS];
    size_t n = c->b->n_keys;
    snprintf(head, TOP_COLS + 1, "KEY                       RES   ACT   CAP  CAND    LAST  WAIT  by %s%s",
             c->v->sort == TOP_SORT_RECENT ? "LAST" : "units", c->v->tty ? " (s)" : "");
    for (size_t i = 0; i < n; i++)
        rows[i] = &c->b->keys[i];
    sort_by = c->v->sort;
    qsort(rows, n, sizeof rows[0], key_cmp);
    for (size_t i = 0; i < n; i++) {
        char text[ORBIT_KEY_TEXT_MAX], last[16];
        const struct top_key *k = rows[i];
        orbit_key_format(k->key, text, sizeof text);   /* "key:" + 32 hex digits */
        age_text(c->b->wall_ms, k->last_reserve_ms, last, sizeof last);
        if (add(L, c->v->cols, "key:%.8s..%.8s %5" PRIu32 " %5" PRIu32 " %5" PRIu32 " %5" PRIu32 " %7s %5" PRIu32,
                text + 4, text + 4 + 24, k->reserved, k->active, k->capacity, k->candidates, last,
                k->watchers) < 0)
            return -ENOMEM;
    }
    if (c->b->keys_total > n)
        return add(L, c->v->cols, "  (%zu keys; the first %zu are read)", c->b->keys_total, n);
    return 0;
}

/* ---- streams: ring fill per direction ---- */

static double fill(const struct top_stream *s, unsigned d)
{
    return s->ring ? (double)s->info.dir[d].queued * 100.0 / s->ring : 0;
}

static int stream_cmp(const void *x, const void *y)
{
    const struct top_stream *p = *(const struct top_stream *const *)x, *q = *(const struct top_stream *const *)y;
    double fp = fill(p, 0) > fill(p, 1) ? fill(p, 0) : fill(p, 1);
    double fq = fill(q, 0) > fill(q, 1) ? fill(q, 0) : fill(q, 1);
    return fp < fq ? 1 : fp > fq ? -1 : 0;
}

static void side_text(const struct top_stream *s, unsigned k, char *buf, size_t len)
{
    enum orbit_side_state st = s->info.side[k].state;
    if (st == ORBIT_SIDE_FREE)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "n%u%s", (unsigned)s->info.side[k].node,
                 st == ORBIT_SIDE_DEAD ? "!" : st == ORBIT_SIDE_RELEASED ? "~" : "");
}

static void flags_text(uint32_t f, char *buf)
{
    static const char letters[] = "FRGW";   /* FIN, RESET, READER_GONE, CLOSE_WATCH */
    size_t n = 0;
    for (unsigned i = 0; i < 4; i++)
        if (f & (1u << i))
            buf[n++] = letters[i];
    if (!n)
        buf[n++] = '-';
    buf[n] = '\0';
}

static int stream_row(const struct ctx *c, const struct top_stream *s, struct top_lines *L)
{
    char id[ORBIT_ID_TEXT_MAX], a[16], b[16], q0[16], q1[16], f0[8], f1[8];
    orbit_id_format(s->info.id, id, sizeof id);
    side_text(s, 0, a, sizeof a);
    side_text(s, 1, b, sizeof b);
    top_human((double)s->info.dir[0].queued, q0, sizeof q0);
    top_human((double)s->info.dir[1].queued, q1, sizeof q1);
    flags_text(s->info.dir[0].flags, f0);
    flags_text(s->info.dir[1].flags, f1);
    return add(L, c->v->cols, "%-20.20s %-6s %-6s %6s %4.0f%% %6s %4.0f%%  %s/%s", id, a, b, q0, fill(s, 0), q1,
               fill(s, 1), f0, f1);
}

static int section_streams(const struct ctx *c, char *head, struct top_lines *L)
{
    static const struct top_stream *rows[TOP_ROWS];
    size_t n = c->b->n_streams;
    snprintf(head, TOP_COLS + 1, "STREAM               A      B        A->B  FILL   B->A  FILL  FLAGS");
    for (size_t i = 0; i < n; i++)
        rows[i] = &c->b->streams[i];
    qsort(rows, n, sizeof rows[0], stream_cmp);
    for (size_t i = 0; i < n; i++)
        if (stream_row(c, rows[i], L) < 0)
            return -ENOMEM;
    if (c->b->streams_total > n)
        return add(L, c->v->cols, "  (%zu streams; the first %zu are read)", c->b->streams_total, n);
    return 0;
}

/* ---- admission domains: use ---- */

static double use_of(const struct top_domain *d)
{
    return d->capacity ? (double)d->used * 100.0 / (double)d->capacity : d->used ? 100.0 : 0;
}

static int domain_cmp(const void *x, const void *y)
{
    double p = use_of(*(const struct top_domain *const *)x), q = use_of(*(const struct top_domain *const *)y);
    return p < q ? 1 : p > q ? -1 : 0;
}

static int section_domains(const struct ctx *c, char *head, struct top_lines *L)
{
    static const struct top_domain *rows[TOP_ROWS];
    size_t n = c->b->n_domains;
    snprintf(head, TOP_COLS + 1, "DOMAIN         USED  CAPACITY   USE");
    for (size_t i = 0; i < n; i++)
        rows[i] = &c->b->domains[i];
    qsort(rows, n, sizeof rows[0], domain_cmp);
    for (size_t i = 0; i < n; i++) {
        char used[16], cap[16], bar[21];
        double u = use_of(rows[i]);
        size_t fillc = u >= 100 ? 20 : (size_t)(u / 5);
        memset(bar, '#', fillc);
        memset(bar + fillc, '.', 20 - fillc);
        bar[20] = '\0';
        top_human((double)rows[i]->used, used, sizeof used);
        top_human((double)rows[i]->capacity, cap, sizeof cap);
        if (add(L, c->v->cols, "%-10" PRIu32 " %9s %9s %4.0f%%  [%s]", rows[i]->domain, used, cap, u, bar) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- waiting members: who slept in the kernel, and on which table ---- */

static int waiting_row(const struct ctx *c, const struct top_node *n, struct top_lines *L)
{
    char row[TOP_COLS + 1], num[16];
    const struct top_node *was = node_before(c, n);
    size_t at = (size_t)snprintf(row, sizeof row, "node %u pid %d parks/s:", n->info.node, n->info.pid);
    bool any = false;
    for (size_t i = 0; i < c->b->n_tables && at < sizeof row; i++) {
        double p = node_rate(c, was, n, i, 0);
        if (p <= 0)
            continue;
        top_human(p, num, sizeof num);
        at += (size_t)snprintf(row + at, sizeof row - at, " %s %s", c->b->t[i].name, num);
        any = true;
    }
    return any ? add(L, c->v->cols, "%s", row) : 0;
}

static int section_waiting(const struct ctx *c, char *head, struct top_lines *L)
{
    snprintf(head, TOP_COLS + 1, "WAITING      members that slept in the kernel; pool key watchers");
    for (size_t i = 0; i < c->b->n_nodes; i++)
        if (waiting_row(c, &c->b->nodes[i], L) < 0)
            return -ENOMEM;
    for (size_t i = 0; i < c->b->n_keys; i++) {
        const struct top_key *k = &c->b->keys[i];
        char text[ORBIT_KEY_TEXT_MAX];
        if (!k->watchers)
            continue;
        orbit_key_format(k->key, text, sizeof text);
        if (add(L, c->v->cols, "key:%.8s..%.8s %" PRIu32 " watcher%s", text + 4, text + 28, k->watchers,
                k->watchers == 1 ? "" : "s") < 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- deaths: dead nodes, what they hold, recent reports ---- */

static int section_deaths(const struct ctx *c, char *head, struct top_lines *L, const struct top_history *h)
{
    const struct orbit_death_counters *d = &c->b->deaths;
    if (c->b->deaths_rc)
        snprintf(head, TOP_COLS + 1, "DEATHS       (%s)", orbit_strerror(c->b->deaths_rc));
    else
        snprintf(head, TOP_COLS + 1, "DEATHS       %" PRIu64 " reported, %" PRIu64 " left; reclaim %.3f ms on average",
                 d->deaths_reported, d->leaves,
                 d->deaths_reported ? (double)d->reclaim_ns_sum / (double)d->deaths_reported / 1e6 : 0.0);
    for (size_t i = 0; i < c->b->n_nodes; i++) {
        const struct top_node *n = &c->b->nodes[i];
        char holds[160];
        if (n->info.state != ORBIT_NODE_LIVE || n->info.alive)
            continue;
        if (n->have_holds)
            top_holds_text(&n->holds, holds, sizeof holds);
        if (add(L, c->v->cols, "node %u pid %d DEAD, not reported yet (orbitctl reap %s)", n->info.node,
                n->info.pid, c->v->fleet) < 0 ||
            add(L, c->v->cols, "  holds %s", n->have_holds ? holds : "(unknown)") < 0)
            return -ENOMEM;
    }
    for (size_t i = 0; i < h->n && i < TOP_EVENTS; i++) {
        char at[16];
        struct tm tm;
        strftime(at, sizeof at, "%H:%M:%S", localtime_r(&h->ev[i].at, &tm));
        if (add(L, c->v->cols, "%s %s", at, h->ev[i].text) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- layout ---- */

enum { S_GENERATIONS, S_TABLES, S_NODES, S_KEYS, S_STREAMS, S_DOMAINS, S_WAITING, S_DEATHS, S_COUNT };
/* Who gets the lines first when the height is short. */
static const int priority[S_COUNT] = { S_TABLES, S_NODES, S_DEATHS, S_GENERATIONS, S_KEYS, S_STREAMS, S_DOMAINS,
                                       S_WAITING };

struct section { char head[TOP_COLS + 1]; struct top_lines rows; size_t give; bool always; };

static void fit(struct section *s, size_t avail)
{
    for (int p = 0; p < S_COUNT; p++) {   /* first a header and a row each, most important first */
        struct section *x = &s[priority[p]];
        size_t need = 1 + (x->rows.n ? 1 : 0);
        x->give = (x->rows.n || x->always) && need <= avail ? need : 0;
        avail -= x->give;
    }
    for (int p = 0; p < S_COUNT; p++) {   /* then the rest of their rows, in the same order */
        struct section *x = &s[priority[p]];
        size_t more = x->give > 1 ? x->rows.n - (x->give - 1) : 0;
        more = more < avail ? more : avail;
        x->give += more;
        avail -= more;
    }
}

static int emit(const struct ctx *c, struct section *s, struct top_lines *out)
{
    for (int i = 0; i < S_COUNT; i++) {
        size_t shown = s[i].give ? s[i].give - 1 : 0;
        if (!s[i].give)
            continue;
        if (add(out, c->v->cols, "%s", s[i].head) < 0)
            return -ENOMEM;
        bool cut = shown < s[i].rows.n && shown > 1;   /* one row: better a row than a count */
        for (size_t r = 0; r < shown; r++) {
            int rc = cut && r + 1 == shown ? add(out, c->v->cols, "  ... %zu more", s[i].rows.n - r)
                                           : add(out, c->v->cols, "%s", s[i].rows.l[r]);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/*
 * GENERATION: the fleet's generations when it has more than one (a rolling
 * upgrade): which one this view reads (*), and per generation its live members
 * and the version that started it; one of other layouts is counted by its locks.
 */
static int section_generations(const struct ctx *c, char *head, struct top_lines *L)
{
    const struct top_sample *b = c->b;
    snprintf(head, TOP_COLS + 1, "GEN  NAME                LIVE  VERSION");
    if (b->n_generations < 2)
        return 0;
    for (size_t i = 0; i < b->n_generations; i++) {
        const struct orbit_generation_info *g = &b->generations[i];
        char v[32] = "?", live[16] = "?";
        if (g->library_version)
            snprintf(v, sizeof v, "%u.%u.%u", g->library_version >> 16, (g->library_version >> 8) & 0xff,
                     g->library_version & 0xff);
        if (g->live_members >= 0)
            snprintf(live, sizeof live, "%d", g->live_members);
        bool read = strcmp(g->name, c->v->fleet) == 0;
        if (add(L, c->v->cols, "%3u%s %-18.18s %5s  %s%s%s", g->generation, read ? "*" : " ", g->name, live,
                g->library_version ? "orbit " : "", g->library_version ? v : "not recorded",
                g->readable ? "" : " (another release's layouts)") < 0)
            return -ENOMEM;
    }
    return 0;
}

static int title(const struct ctx *c, struct top_lines *out)
{
    char at[16];
    struct tm tm;
    const struct top_sample *b = c->b;
    strftime(at, sizeof at, "%H:%M:%S", localtime_r(&b->wall, &tm));
    int rc = add(out, c->v->cols, "orbit top %s  %s  %gs  nodes %zu/%u: %zu live, %zu dead, %zu joining%s",
                 c->v->fleet, at, c->v->interval_s, b->claimed, b->capacity, b->live, b->dead, b->joining,
                 c->v->tty ? "  q quit" : "");
    if (rc == 0 && c->v->note)
        rc = add(out, c->v->cols, "%s", c->v->note);
    return rc;
}

int top_render(const struct top_view *v, const struct top_sample *prev, const struct top_sample *cur,
               const struct top_history *h, struct top_lines *out)
{
    struct ctx c = { v, prev, cur, prev && cur->mono_ns > prev->mono_ns ? (double)(cur->mono_ns - prev->mono_ns) / 1e9 : 0 };
    struct section s[S_COUNT] = { 0 };
    out->n = 0;
    int rc = title(&c, out);
    if (rc == 0) rc = section_generations(&c, s[S_GENERATIONS].head, &s[S_GENERATIONS].rows);
    if (rc == 0) rc = section_tables(&c, s[S_TABLES].head, &s[S_TABLES].rows);
    if (rc == 0) rc = section_nodes(&c, s[S_NODES].head, &s[S_NODES].rows);
    if (rc == 0) rc = section_keys(&c, s[S_KEYS].head, &s[S_KEYS].rows);
    if (rc == 0) rc = section_streams(&c, s[S_STREAMS].head, &s[S_STREAMS].rows);
    if (rc == 0) rc = section_domains(&c, s[S_DOMAINS].head, &s[S_DOMAINS].rows);
    if (rc == 0) rc = section_waiting(&c, s[S_WAITING].head, &s[S_WAITING].rows);
    if (rc == 0) rc = section_deaths(&c, s[S_DEATHS].head, &s[S_DEATHS].rows, h);
    s[S_TABLES].always = s[S_NODES].always = s[S_DEATHS].always = true;
    if (rc == 0) {
        size_t plain = 0;
        for (int i = 0; i < S_COUNT; i++)
            plain += 1 + (s[i].rows.n < PLAIN_ROWS ? s[i].rows.n : PLAIN_ROWS);
        fit(s, v->rows ? (v->rows > out->n ? v->rows - out->n : 0) : plain);
        if (!v->rows)   /* no height limit: each section up to PLAIN_ROWS rows */
            for (int i = 0; i < S_COUNT; i++)
                s[i].give = s[i].give > PLAIN_ROWS + 1 ? PLAIN_ROWS + 1 : s[i].give;
        rc = emit(&c, s, out);
    }
    for (int i = 0; i < S_COUNT; i++)
        top_lines_free(&s[i].rows);
    return rc;
}
