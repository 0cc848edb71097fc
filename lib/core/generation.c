/* SPDX-License-Identifier: MIT */
/* Generations of a fleet name: the pick of a joiner, the versions each records (generation.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/version.h>
#include "error_internal.h"
#include "generation.h"
#include "life.h"

#define GEN_LIST_MAX   256   /* generations of one name looked at: the newest by number */
#define PICK_ATTEMPTS  8     /* picks in a row that another version's creator beat */

/* ---- what a generation's fleet segment says ------------------------------------- */

void orb_gen_geometry(struct orb_fleet_geometry *g, uint32_t generation)
{
    g->generation = generation;
    orb_layouts(g->layouts);
}

struct gen_seen {
    uint32_t generation;
    char name[ORBIT_FLEET_NAME_MAX + 1];
    int error;                          /* the header's read: 0, -ORBIT_EGEOMETRY (another header), ... */
    struct orb_seg_header h;            /* as read (also when the header is of another version) */
    enum orbit_backing backing;
    uint16_t layouts[ORBIT_LAYOUTS_MAX];   /* what it records; 0: not recorded */
    bool readable;                      /* this library's layouts, and the generation its name says */
};

/* Layouts and readability from a header read (error 0 or -ORBIT_EGEOMETRY). */
static void decode(struct gen_seen *s)
{
    uint16_t ours[ORBIT_LAYOUTS_MAX];
    struct orb_fleet_geometry g;
    memset(s->layouts, 0, sizeof s->layouts);
    s->readable = false;
    if (s->error != 0 && s->error != -ORBIT_EGEOMETRY)
        return;
    s->layouts[ORBIT_LAYOUT_SEGMENT] = (uint16_t)(s->h.version > 0xffff ? 0xffff : s->h.version);
    if (s->error != 0 || s->h.table_type != ORB_TABLE_FLEET || s->h.geometry_len < 12)
        return;
    memset(&g, 0, sizeof g);
    memcpy(&g, s->h.geometry, s->h.geometry_len < sizeof g ? s->h.geometry_len : sizeof g);
    s->layouts[ORBIT_LAYOUT_FLEET] = (uint16_t)(g.layout_version > 0xffff ? 0xffff : g.layout_version);
    /* From fleet layout 4 on, a geometry begins with these fields, whatever follows them. */
    if (g.layout_version < 4 || s->h.geometry_len < sizeof g)
        return;
    for (unsigned i = ORBIT_LAYOUT_POOL; i < ORBIT_LAYOUTS_MAX; i++)
        s->layouts[i] = g.layouts[i];
    orb_layouts(ours);
    s->readable = s->h.geometry_len == sizeof g && g.generation == s->generation &&
                  memcmp(g.layouts, ours, sizeof ours) == 0 && memcmp(s->layouts, ours, sizeof ours) == 0;
}

/* Read generation gen of base from its fleet segment header (no mapping). */
static void see(const char *base, uint32_t gen, struct gen_seen *s)
{
    memset(s, 0, sizeof *s);
    s->generation = gen;
    if (orb_fleet_name_of(base, gen, s->name, sizeof s->name) < 0) {
        s->error = -ENOENT;   /* no such name can exist */
        return;
    }
    uint64_t size;
    s->error = orb_segment_peek(s->name, ORB_FLEET_KIND, &s->h, &size, &s->backing);
    decode(s);
}

static void version_text(uint32_t v, char *buf, size_t len)
{
    snprintf(buf, len, "%u.%u.%u", (v >> 16) & 0xffff, (v >> 8) & 0xff, v & 0xff);
}

/*
 * -ORBIT_EGEOMETRY with the sentence naming the first layout that differs on
 * both sides ("fleet 'web' generation 1 is at fleet layout 3; this library
 * (orbit 0.1.0) writes fleet layout 4"), or -ORBIT_ECORRUPT for a segment whose
 * layouts agree but whose geometry names another generation than its name.
 */
static int refuse(const char *call, const struct gen_seen *s)
{
    uint16_t ours[ORBIT_LAYOUTS_MAX];
    orb_layouts(ours);
    unsigned i = 0;
    while (i < ORBIT_LAYOUTS_MAX && s->layouts[i] == ours[i])
        i++;
    if (i == ORBIT_LAYOUTS_MAX)
        return orb_fail(-ORBIT_ECORRUPT, "%s: fleet '%s': its fleet segment names another generation or "
                        "geometry than its name", call, s->name);
    char theirs[40] = "", v[16];
    if (s->h.creator_version) {
        version_text(s->h.creator_version, v, sizeof v);
        snprintf(theirs, sizeof theirs, " (orbit %s)", v);
    }
    return orb_fail(-ORBIT_EGEOMETRY, "%s: fleet '%s' generation %u%s is at %s layout %u; this library "
                    "(orbit %s) writes %s layout %u", call, s->name, s->generation, theirs,
                    orbit_layout_name(i), s->layouts[i], orbit_version_string(), orbit_layout_name(i), ours[i]);
}

int orb_gen_check_observed(const struct orb_seg_header *h, const char *name, uint32_t *generation,
                           const char *call)
{
    struct gen_seen s;
    memset(&s, 0, sizeof s);
    char base[ORBIT_FLEET_NAME_MAX + 1];
    if (orb_fleet_name_split(name, base, &s.generation) < 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: name '%.80s' is not a fleet's", call, name);
    if (s.generation == 0)
        s.generation = 1;
    snprintf(s.name, sizeof s.name, "%s", name);
    s.h = *h;
    decode(&s);
    if (!s.readable)
        return refuse(call, &s);
    *generation = s.generation;
    return 0;
}

/* ---- the generations of a name ---------------------------------------------------- */

struct gen_list {
    const char *base;
    uint32_t gen[GEN_LIST_MAX];   /* ascending once listed */
    size_t n;
    uint32_t newest;              /* the highest number met, listed or not */
};

static void list_one(void *ctx, const char *dir, const char *name, unsigned kind, enum orbit_backing b)
{
    (void)dir; (void)b;
    struct gen_list *l = ctx;
    char base[ORBIT_FLEET_NAME_MAX + 1];
    uint32_t gen;
    if (kind != ORB_FLEET_KIND || orb_fleet_name_split(name, base, &gen) < 0 || strcmp(base, l->base) != 0)
        return;
    gen = gen ? gen : 1;
    if (gen > l->newest)
        l->newest = gen;
    size_t lowest = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->gen[i] == gen)
            return;   /* a name in both backing directories counts once */
        if (l->gen[i] < l->gen[lowest])
            lowest = i;
    }
    if (l->n < GEN_LIST_MAX)
        l->gen[l->n++] = gen;
    else if (l->gen[lowest] < gen)
        l->gen[lowest] = gen;   /* the newest are the ones a joiner picks from */
}

static int gen_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void list_generations(const char *base, struct gen_list *l)
{
    memset(l, 0, sizeof *l);
    l->base = base;
    orb_fleet_scan_segments(list_one, l);
    qsort(l->gen, l->n, sizeof l->gen[0], gen_cmp);
}

/* ---- the pick of a joiner --------------------------------------------------------- */

/*
 * ORBIT_GENERATION_AUTO: the newest generation of our layouts; else, when a
 * generation could not be read at all (a planted or garbled file), that one, so
 * its open says what is wrong as it did before generations; else one past the
 * newest (1 for a new fleet).
 */
static uint32_t pick_auto(const struct gen_list *l)
{
    uint32_t unread = 0;
    for (size_t i = l->n; i-- > 0;) {
        struct gen_seen s;
        see(l->base, l->gen[i], &s);
        if (s.readable)
            return s.generation;
        if (s.error != 0 && s.error != -ORBIT_EGEOMETRY && s.error != -ENOENT && !unread)
            unread = s.generation;
    }
    return unread ? unread : l->newest + 1;
}

/* The generation to open, or a refusal: a pinned one of other layouts, no number left. */
static int pick(const struct gen_list *l, uint32_t want, uint32_t *gen)
{
    const char *call = "orbit_fleet_join";
    if (want == ORBIT_GENERATION_AUTO)
        *gen = pick_auto(l);
    else if (want == ORBIT_GENERATION_NEW)
        *gen = l->newest + 1;
    else
        *gen = want;
    if (*gen > ORBIT_GENERATION_MAX)
        return orb_fail(-ORBIT_EGEOMETRY, "%s: fleet '%s': generation %u is the last there is", call, l->base,
                        ORBIT_GENERATION_MAX);
    if (want == ORBIT_GENERATION_AUTO || want == ORBIT_GENERATION_NEW)
        return 0;
    struct gen_seen s;
    see(l->base, want, &s);
    /* Absent: created. Of our layouts: joined. Unreadable: its open says why. Else refused. */
    return s.error == -ORBIT_EGEOMETRY || (s.error == 0 && !s.readable) ? refuse(call, &s) : 0;
}

static int check_want(const char *name, const struct orbit_fleet_opts *o, uint32_t *want)
{
    const char *call = "orbit_fleet_join";
    *want = o->generation;
    if (o->resv32)
        return orb_fail(-ORBIT_EMALFORMED, "%s: resv32 is not zero: start from ORBIT_FLEET_OPTS_DEFAULT and "
                        "set fields", call);
    if (*want > ORBIT_GENERATION_MAX && *want != ORBIT_GENERATION_NEW)
        return orb_fail(-ORBIT_EMALFORMED, "%s: generation %u: ORBIT_GENERATION_AUTO (0), ORBIT_GENERATION_NEW "
                        "or 1..%u", call, *want, ORBIT_GENERATION_MAX);
    if (!name)
        return *want > 1 ? orb_fail(-ORBIT_EMALFORMED, "%s: a PRIVATE fleet (name NULL) is generation 1: "
                                    "generation %u", call, *want) : 0;
    uint32_t named;
    if (orb_fleet_name_split(name, NULL, &named) < 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: name '%.80s' is not a fleet's", call, name);
    if (named && *want != ORBIT_GENERATION_AUTO && *want != named)
        return orb_fail(-ORBIT_EMALFORMED, "%s: name '%s' names generation %u, opts.generation %u", call, name,
                        named, *want);
    if (named)
        *want = named;
    return 0;
}

/* The open of the generation picked said -ORBIT_EGEOMETRY: why, and whether to pick again. */
static int explain(const struct orbit_fleet *f, const char *base, uint32_t want, bool *again)
{
    struct gen_seen s;
    see(base, f->generation, &s);
    *again = false;
    if (s.error == 0 && s.readable)
        return orb_fail(-ORBIT_EGEOMETRY, "orbit_fleet_join: fleet '%s' exists with capacity %u, not %u",
                        f->name, (unsigned)s.h.fleet_capacity, (unsigned)f->capacity);
    bool pinned = want != ORBIT_GENERATION_AUTO && want != ORBIT_GENERATION_NEW;
    if (pinned && (s.error == 0 || s.error == -ORBIT_EGEOMETRY))
        return refuse("orbit_fleet_join", &s);
    /* Another version's creator linked the name first (one past it then), or it went meanwhile. */
    *again = true;
    return -ORBIT_EGEOMETRY;
}

int orb_gen_join_open(struct orbit_fleet *f, const char *name, const struct orbit_fleet_opts *o,
                      int (*open_fleet)(struct orbit_fleet *f))
{
    uint32_t want;
    int rc = check_want(name, o, &want);
    if (rc < 0)
        return rc;
    f->generation = 1;
    if (!name)
        return open_fleet(f);
    char base[ORBIT_FLEET_NAME_MAX + 1];
    orb_fleet_name_split(name, base, NULL);
    for (int attempt = 0; attempt < PICK_ATTEMPTS; attempt++) {
        struct gen_list l;
        list_generations(base, &l);
        if ((rc = pick(&l, want, &f->generation)) < 0)
            return rc;
        if (orb_fleet_name_of(base, f->generation, f->name, sizeof f->name) < 0)
            return orb_fail(-ORBIT_EGEOMETRY, "orbit_fleet_join: fleet '%s' needs a generation %u beside the "
                            "ones of other layouts, and '%s@%u' would pass %d bytes", base, f->generation,
                            base, f->generation, ORBIT_FLEET_NAME_MAX);
        if ((rc = open_fleet(f)) != -ORBIT_EGEOMETRY)
            return rc;
        bool again;
        if ((rc = explain(f, base, want, &again)) < 0 && !again)
            return rc;
    }
    return orb_fail(-ORBIT_EGEOMETRY, "orbit_fleet_join: fleet '%s': %d generations of other layouts were made "
                    "under the names picked, one after another", base, PICK_ATTEMPTS);
}

/* ---- a generation of other layouts, by its locks ------------------------------------ */

static ssize_t count_live(int fd, uint16_t capacity, const char *name)
{
    (void)name;
    ssize_t live = 0;
    for (uint32_t i = 0; i < capacity && live >= 0; i++) {
        int held = orb_life_probe_fd(fd, (uint16_t)i);
        live = held < 0 ? held : live + held;
    }
    return live;
}

static ssize_t collect_empty(int fd, uint16_t capacity, const char *name)
{
    /* The gate alone, as orbit_fleet_collect: no joiner of any version is between its open and its life. */
    int rc = orb_gate_take_alone_fd(fd);
    if (rc == -EAGAIN)
        return orb_fail(-ORBIT_EBUSY, "orbit_fleet_collect: '%s': a member is joining", name);
    if (rc < 0)
        return rc;
    int held = orb_life_probe_all(fd, capacity);
    return held > 0 ? orb_fail(-ORBIT_EBUSY, "orbit_fleet_collect: '%s' has a live member", name)
                    : held < 0 ? held : orbit_fleet_unlink(name);
}

/*
 * Map name's fleet file only to judge it by its locks (the header's capacity, bounded), then close it.
 * One still being created is not waited for (-ORBIT_EAGAIN): a listing of generations, a scrape, must
 * not stall on a fleet segment someone left half-made.
 */
static ssize_t by_locks(const char *name, ssize_t (*judge)(int fd, uint16_t capacity, const char *name),
                        const char *call)
{
    struct orb_segment seg;
    orb_error_clear();
    int rc = orb_segment_open_existing_within(name, ORB_FLEET_KIND, 0, false, &seg);
    if (rc == -ORBIT_EGEOMETRY)
        return orb_fail(rc, "%s: fleet '%s': its segment header is of another version: its locks cannot be "
                        "told", call, name);
    if (rc < 0)
        return rc;
    const struct orb_seg_header *h = orb_seg_hdr(&seg);
    uint16_t capacity = h->fleet_capacity;
    ssize_t r = h->table_type != ORB_TABLE_FLEET || capacity < 1 || capacity > ORBIT_FLEET_CAPACITY_MAX
                    ? -ORBIT_ECORRUPT : judge(seg.fd, capacity, name);
    orb_segment_close(&seg);   /* closing the descriptor gives the gate back */
    return r;
}

ssize_t orb_gen_live_by_locks(const char *name)
{
    return by_locks(name, count_live, "orbit_fleet_live_members");
}

int orb_gen_collect_by_locks(const char *name)
{
    return (int)by_locks(name, collect_empty, "orbit_fleet_collect");
}

/* ---- the public calls --------------------------------------------------------------- */

uint32_t orbit_fleet_generation(const struct orbit_fleet *f)
{
    return f ? f->generation : 0;
}

int orbit_fleet_generation_name(const char *name, uint32_t generation, char *buf, size_t len)
{
    orb_error_clear();
    int rc = orb_fleet_name_of(name, generation, buf, len);
    if (rc == -ORBIT_EMALFORMED)
        return orb_fail(rc, "orbit_fleet_generation_name: %s", !buf ? "buf is NULL" :
                        generation < 1 || generation > ORBIT_GENERATION_MAX ? "generation outside 1..ORBIT_GENERATION_MAX" :
                        "name is not a fleet's (a qualified name is one generation's already)");
    if (rc == -ORBIT_ETOOLARGE)
        return orb_fail(rc, "orbit_fleet_generation_name: '%s' generation %u does not fit %zu bytes (at most %d)",
                        name, generation, len, ORBIT_FLEET_NAME_MAX);
    return rc;
}

static void fill_info(const struct gen_seen *s, struct orbit_generation_info *gi)
{
    memset(gi, 0, sizeof *gi);
    gi->generation = s->generation;
    snprintf(gi->name, sizeof gi->name, "%s", s->name);
    gi->readable = s->readable;
    gi->backing = s->backing;
    for (unsigned i = 0; i < ORBIT_LAYOUTS_MAX; i++)
        gi->layouts[i] = s->layouts[i];
    if (s->error == 0 || s->error == -ORBIT_EGEOMETRY) {
        gi->capacity = s->h.fleet_capacity;
        gi->library_version = s->h.creator_version;
    }
    ssize_t live = s->error == 0 ? orb_gen_live_by_locks(s->name) : s->error;
    gi->live_members = live > INT32_MAX ? INT32_MAX : (int32_t)live;
}

ssize_t orbit_fleet_generations(const char *name, struct orbit_generation_info *out, size_t max)
{
    const char *call = "orbit_fleet_generations";
    char base[ORBIT_FLEET_NAME_MAX + 1];
    orb_error_clear();
    if (orb_fleet_name_split(name, base, NULL) < 0)
        return orb_fail(-ORBIT_EMALFORMED, "%s: name '%.80s' is not a fleet's", call, name ? name : "(null)");
    if (max && !out)
        return orb_fail(-ORBIT_EMALFORMED, "%s: out is NULL with max %zu", call, max);
    struct gen_list l;
    list_generations(base, &l);
    for (size_t i = 0; i < l.n && i < max; i++) {
        struct gen_seen s;
        see(base, l.gen[i], &s);
        fill_info(&s, &out[i]);
    }
    orb_error_clear();   /* the generations' own reads leave no reason behind */
    return (ssize_t)l.n;
}
