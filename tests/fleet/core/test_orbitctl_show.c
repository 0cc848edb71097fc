/* SPDX-License-Identifier: MIT */
/*
 * orbitctl show, reap and node-dead for people and for programs, against the
 * real binary (ORBITCTL_BIN) and real processes: an owner (node 0) with a
 * resource, a lease it accepted, a stream and an arena; a worker (node 1)
 * holding two reservations on the owner's resource, the stream's other side,
 * an admission claim and an arena chunk, killed -9; a waiter (node 2) parked
 * on the key and reading a stream nobody writes. The text must name holders,
 * ages and state words; the JSON must pass docs/orbitctl-show.schema.json
 * (python3-jsonschema, ORBIT_JSON_CHECK) and show exactly that workload; reap
 * and node-dead must say what came back, per table.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <orbit/orbit.h>
#include "testutil.h"

#define CAPACITY 4
#define DOMAIN 1
#define RING 4096
#define TO_WORKER 300   /* bytes the owner writes to the worker, never read */
#define TO_OWNER 100    /* bytes the worker writes to the owner, never read */

static const orbit_key KEY = { 0x73686f77ull, 0x6374ull };
static const struct orbit_pool_spec POOL_SPEC = { .kind = ORBIT_POOL_KIND, .key_capacity = 16,
                                                  .lane_capacity = 8, .generation_limit = 0 };
static const struct orbit_stream_spec STREAM_SPEC = { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8,
                                                      .buffer_bytes = RING, .generation_limit = 0 };
static const struct orbit_admission_spec ADM_SPEC = { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4,
                                                      .max_claims = 64, .retained_max_bytes = 0 };
static const struct orbit_arena_spec ARENA_SPEC = { .kind = ORBIT_ARENA_KIND, .slot_bytes = 1024,
                                                    .slots_per_lane = 64 };

/* What a member tells the test once its share is taken. */
struct report { int rc; orbit_id resource; struct orbit_ticket ticket; uint64_t incarnation; };

struct member { pid_t pid; int to[2], from[2]; struct report r; };

struct tables { struct orbit_fleet *f; struct orbit_pool *pool; struct orbit_streams *streams;
                struct orbit_admission *adm; struct orbit_arena *arena; };

static int open_all(const char *name, int node, struct tables *t)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.node = node;
    o.backing = tu_backing();
    if (orbit_fleet_join(name, &o, &t->f) != 0 || orbit_pool_open(t->f, &POOL_SPEC, &t->pool) != 0 ||
        orbit_streams_open(t->f, &STREAM_SPEC, &t->streams) != 0 ||
        orbit_admission_open(t->f, &ADM_SPEC, &t->adm) != 0 || orbit_arena_open(t->f, &ARENA_SPEC, &t->arena) != 0)
        return 1;
    return 0;
}

static void put(int fd, const void *p, size_t n) { if (write(fd, p, n) != (ssize_t)n) _exit(90); }
static bool get(int fd, void *p, size_t n) { return read(fd, p, n) == (ssize_t)n; }

/* Node 0: a resource of 4 units with one accepted lease of its own, a stream, admission room. */
static void owner(struct member *m, const char *name)
{
    struct tables t;
    struct orbit_endpoint *a;
    struct orbit_lease lease;
    struct orbit_execution ex;
    struct report r = { .rc = open_all(name, 0, &t) };
    if (r.rc == 0 && (orbit_pool_register(t.pool, KEY, 4, &r.resource) != 0 ||
                      orbit_pool_reserve(t.pool, r.resource, &lease) != 0 ||
                      orbit_pool_accept(t.pool, &lease, &ex) != 0))
        r.rc = 2;
    if (r.rc == 0 && (orbit_streams_create(t.streams, &a, &r.ticket) != 0 ||
                      orbit_admission_set_capacity(t.adm, DOMAIN, 10) != 0))
        r.rc = 3;
    r.incarnation = r.rc == 0 ? orbit_fleet_incarnation(t.f) : 0;
    put(m->from[1], &r, sizeof r);
    char go;
    if (r.rc != 0 || !get(m->to[0], &go, 1))
        _exit(1);
    static char bytes[TO_WORKER];
    int rc = orbit_endpoint_write_all(a, bytes, sizeof bytes, 5000);
    put(m->from[1], &rc, sizeof rc);
    for (;;)
        pause();
}

/* Node 1: two reservations on the owner's resource, side b, a claim of 3, one arena chunk. */
static void worker(struct member *m, const char *name, const struct report *own)
{
    struct tables t;
    struct orbit_endpoint *b;
    struct orbit_lease l1, l2;
    struct orbit_reservation res;
    struct orbit_chunk_desc d;
    const struct orbit_units u[] = { { DOMAIN, 3 } };
    struct orbit_demand demand = { .claim = u, .n_claim = 1 };
    struct orbit_admit_result ar;
    static char bytes[TO_OWNER];
    struct report r = { .rc = open_all(name, 1, &t) };
    if (r.rc == 0 && (orbit_pool_reserve(t.pool, own->resource, &l1) != 0 ||
                      orbit_pool_reserve(t.pool, own->resource, &l2) != 0))
        r.rc = 2;
    if (r.rc == 0 && (orbit_streams_open_ticket(t.streams, &own->ticket, &b) != 0 ||
                      orbit_endpoint_write_all(b, bytes, sizeof bytes, 5000) != 0))
        r.rc = 3;
    if (r.rc == 0 && (orbit_admission_try_claim(t.adm, &demand, &ar) != 0 || ar.outcome != ORBIT_ADMIT_CLAIMED))
        r.rc = 4;
    if (r.rc == 0 && (orbit_arena_try_reserve(t.arena, 100, &res) != 0 || orbit_arena_commit(&res, 100, &d) != 0))
        r.rc = 5;
    r.incarnation = r.rc == 0 ? orbit_fleet_incarnation(t.f) : 0;
    put(m->from[1], &r, sizeof r);
    for (;;)
        pause();
}

static void *read_forever(void *ep)
{
    char buf[16];
    orbit_endpoint_read(ep, buf, sizeof buf, -1);
    return NULL;
}

/* A claim of 8 that does not fit beside the worker's 3 (of 10): deferred, then a wait for releases. */
static void *claim_deferred(void *adm)
{
    const struct orbit_units u[] = { { DOMAIN, 8 } };
    struct orbit_demand demand = { .claim = u, .n_claim = 1 };
    struct orbit_admit_result ar;
    if (orbit_admission_try_claim(adm, &demand, &ar) != 0 || ar.outcome != ORBIT_ADMIT_DEFERRED)
        _exit(7);
    for (uint64_t epoch = ar.release_epoch;;)
        orbit_admission_wait(adm, epoch, -1, &epoch);   /* never claims: the counts stay the worker's */
    return NULL;
}

/* Node 2: parked on the key's capacity, reading a stream of its own that nobody writes, and
 * waiting for an admission release. */
static void waiter(struct member *m, const char *name)
{
    struct tables t;
    struct orbit_endpoint *a;
    struct orbit_ticket tk;
    pthread_t th, th2;
    uint32_t v;
    struct report r = { .rc = open_all(name, 2, &t) };
    if (r.rc == 0 && (orbit_streams_create(t.streams, &a, &tk) != 0 || orbit_pool_version(t.pool, KEY, &v) != 0 ||
                      pthread_create(&th, NULL, read_forever, a) != 0 ||
                      pthread_create(&th2, NULL, claim_deferred, t.adm) != 0))
        r.rc = 2;
    r.incarnation = r.rc == 0 ? orbit_fleet_incarnation(t.f) : 0;
    put(m->from[1], &r, sizeof r);
    for (;;)
        orbit_pool_wait_capacity(t.pool, KEY, v, -1, &v);
}

static void start(struct member *m, void (*body)(struct member *, const char *), const char *name)
{
    ck_assert_int_eq(pipe(m->to), 0);
    ck_assert_int_eq(pipe(m->from), 0);
    fflush(NULL);
    m->pid = fork();
    ck_assert_int_ge(m->pid, 0);
    if (m->pid == 0) {
        body(m, name);
        _exit(0);
    }
    ck_assert(get(m->from[0], &m->r, sizeof m->r));
    ck_assert_int_eq(m->r.rc, 0);
}

static void kill9(struct member *m)
{
    kill(m->pid, SIGKILL);
    ck_assert_int_eq(tu_wait_child(m->pid, 10000), 128 + SIGKILL);
}

/* Run orbitctl with up to five arguments; stdout into out (stderr too). Returns its exit status. */
static int ctl5(char *out, size_t len, const char *a1, const char *a2, const char *a3, const char *a4,
                const char *a5)
{
    const char *bin = getenv("ORBITCTL_BIN");
    ck_assert_ptr_nonnull(bin);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(bin, "orbitctl", a1, a2, a3, a4, a5, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    char spill[4096];
    while ((r = read(p[0], n + 1 < len ? out + n : spill, n + 1 < len ? len - 1 - n : sizeof spill)) > 0)
        n += n + 1 < len ? (size_t)r : 0;
    out[n] = '\0';
    close(p[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define ctl(out, len, a1, a2, a3, a4) ctl5(out, len, a1, a2, a3, a4, NULL)

/* The JSON checker (schema, then the expectations): 0 when both pass. */
static int check_json(const char *what, const char *json, const char *expect)
{
    const char *checker = getenv("ORBIT_JSON_CHECK"), *schema = getenv("ORBIT_JSON_SCHEMA");
    ck_assert_ptr_nonnull(checker);
    ck_assert_ptr_nonnull(schema);
    char path[] = "/tmp/orbitctl-json-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", checker, schema, what, path, expect, (char *)NULL);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool has(const char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool has(const char *out, const char *fmt, ...)
{
    char want[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    return strstr(out, want) != NULL;
}

/* Until the waiter is seen parked on the key and its stream (its threads get there on their own time). */
static void await_waiter(const char *name)
{
    struct orbit_fleet *obs;
    struct orbit_pool *p;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_pool_open_existing(obs, POOL_SPEC.kind, &p), 0);
    bool seen = false;
    for (int i = 0; i < 1000 && !seen; i++) {
        struct orbit_pool_key_node kn[CAPACITY];
        ssize_t n = orbit_pool_key_nodes(p, KEY, kn, CAPACITY);
        for (ssize_t k = 0; k < n && k < CAPACITY; k++)
            seen |= kn[k].node == 2 && kn[k].waits == 1;
        if (!seen)
            tu_sleep_ms(10);
    }
    ck_assert_msg(seen, "the waiter never held the key");
    struct orbit_streams *s;
    ck_assert_int_eq(orbit_streams_open_existing(obs, STREAM_SPEC.kind, &s), 0);
    seen = false;
    for (int i = 0; i < 1000 && !seen; i++) {
        struct orbit_stream_info si[8];
        struct orbit_stream_ring r[2];
        ssize_t n = orbit_streams_list(s, si, 8);
        for (ssize_t k = 0; k < n && k < 8; k++)
            seen |= orbit_id_node(si[k].id) == 2 && orbit_streams_rings(s, si[k].id, r) == 0 && r[1].reader_waits;
        if (!seen)
            tu_sleep_ms(10);
    }
    ck_assert_msg(seen, "the waiter never parked on its stream");
    orbit_streams_close(s);
    struct orbit_admission *adm;
    ck_assert_int_eq(orbit_admission_open_existing(obs, ADM_SPEC.kind, &adm), 0);
    seen = false;
    for (int i = 0; i < 1000 && !seen; i++) {
        struct orbit_admission_waiting w;
        seen = orbit_admission_waiting(adm, &w) == 0 && w.parked && w.epoch_wanted > w.change_epoch;
        if (!seen)
            tu_sleep_ms(10);
    }
    ck_assert_msg(seen, "the waiter never parked on the admission ledger");
    orbit_admission_close(adm);
    orbit_pool_close(p);
    orbit_fleet_leave(obs);
}

static char out[1 << 20];

START_TEST(show_reap_and_node_dead_say_who_holds_what)
{
    char name[ORBIT_FLEET_NAME_MAX + 1], expect[1024], inc[32], node_s[8];
    snprintf(name, sizeof name, "%s", tu_fleet_name("ctlshow"));
    struct member own, wrk, wtr;
    start(&own, owner, name);
    fflush(NULL);
    ck_assert_int_eq(pipe(wrk.to), 0);
    ck_assert_int_eq(pipe(wrk.from), 0);
    wrk.pid = fork();
    if (wrk.pid == 0) {
        worker(&wrk, name, &own.r);
        _exit(0);
    }
    ck_assert(get(wrk.from[0], &wrk.r, sizeof wrk.r));
    ck_assert_int_eq(wrk.r.rc, 0);
    int wrote = -1;
    put(own.to[1], "g", 1);
    ck_assert(get(own.from[0], &wrote, sizeof wrote));
    ck_assert_int_eq(wrote, 0);
    start(&wtr, waiter, name);
    await_waiter(name);
    kill9(&wrk);

    /* Text: state words, holders with pids, ages, fill, who waits, what the dead node owes. */
    ck_assert_int_eq(ctl(out, sizeof out, "show", name, NULL, NULL), 0);
    ck_assert_msg(has(out, "node 1     dead     pid %-8d", (int)wrk.pid), "no dead node 1: %s", out);
    ck_assert_msg(has(out, "node 0     alive    pid %-8d", (int)own.pid), "no alive node 0: %s", out);
    ck_assert_msg(!strstr(out, "DEAD"), "a second state word: %s", out);
    ck_assert_msg(has(out, "owes back pool 0 resources (0 units, 0 leases on them), 2 reservations on others', "
                           "0 creation claims; streams 1 side, %d unread bytes; admission 1 claim (3 units); "
                           "arena 1 chunk (1024 bytes)", TO_WORKER), "no debt of node 1: %s", out);
    ck_assert_msg(has(out, "node 1 pid %d (dead)  pending", (int)wrk.pid), "no pending lease of node 1: %s", out);
    ck_assert_msg(has(out, "node 0 pid %d (alive)  reserved", (int)own.pid), "no active lease of node 0: %s", out);
    ck_assert_msg(strstr(out, " ms\n") || strstr(out, " s\n"), "no age: %s", out);
    ck_assert_msg(has(out, "capacity 4  reserved 2  active 1  free 1  last reserve"), "%s", out);
    ck_assert_msg(has(out, "a->b  %d of %d bytes queued (7%%)", TO_WORKER, RING), "no ring fill: %s", out);
    ck_assert_msg(has(out, "waiting: node 2 pid %d (alive) waits 1", (int)wtr.pid), "no key waiter: %s", out);
    ck_assert_msg(strstr(out, "reader (side a) waits for 1 bytes"), "no stream waiter: %s", out);
    ck_assert_msg(has(out, "held by node 1 pid %d (dead)", (int)wrk.pid), "no claim holder: %s", out);
    ck_assert_msg(strstr(out, "waiting: a claimer waits for a release"), "no admission waiter: %s", out);
    ck_assert_msg(strstr(out, "lane 1     1 of 64 slots used (1%)"), "no lane use: %s", out);
    const char *lr = strstr(out, "last reserve ");
    ck_assert_ptr_nonnull(lr);
    char *unit;
    unsigned long long age = strtoull(lr + strlen("last reserve "), &unit, 10);
    ck_assert_msg(age < 60000 && (strncmp(unit, " ms ago", 7) == 0 || strncmp(unit, ".", 1) == 0),
                  "not an age: %.40s", lr);

    /* JSON: the schema, and exactly this workload. */
    snprintf(expect, sizeof expect, "{\"dead\":[1],\"alive\":[0,2],\"pids\":{\"0\":%d,\"1\":%d,\"2\":%d},"
             "\"incarnations\":{\"0\":\"%" PRIu64 "\",\"1\":\"%" PRIu64 "\",\"2\":\"%" PRIu64 "\"},"
             "\"pending\":{\"1\":2},\"active\":{\"0\":1},\"queued\":[%d,%d],\"key_waiters\":[2],"
             "\"stream_readers_waiting\":1,\"admission_waits\":true,\"claims\":{\"1\":3},\"arena_chunks\":{\"1\":1},"
             "\"owes\":{\"1\":{\"pool_reserved\":\"2\",\"stream_sides\":1,\"stream_unread\":\"%d\","
             "\"admission_claims\":1,\"admission_units\":\"3\",\"arena_chunks\":1,\"arena_bytes\":\"1024\"}}}",
             (int)own.pid, (int)wrk.pid, (int)wtr.pid, own.r.incarnation, wrk.r.incarnation, wtr.r.incarnation,
             TO_WORKER, TO_OWNER, TO_WORKER);
    ck_assert_int_eq(ctl(out, sizeof out, "--json", "show", name, NULL), 0);
    ck_assert_msg(check_json("show", out, expect) == 0, "show --json failed its checks");
    ck_assert_int_eq(ctl(out, sizeof out, "--json", "ls", NULL, NULL), 0);
    ck_assert_msg(check_json("ls", out, "{}") == 0, "ls --json failed its checks");

    /* reap: node 1 and exactly what it held. */
    ck_assert_int_eq(ctl(out, sizeof out, "reap", name, "--json", NULL), 0);
    snprintf(expect, sizeof expect, "{\"reported\":1,\"nodes\":{\"1\":{\"pool_resources\":0,\"pool_units\":\"0\","
             "\"pool_leases\":\"0\",\"pool_reserved\":\"2\",\"pool_creating\":\"0\",\"stream_sides\":1,"
             "\"stream_unread\":\"%d\",\"admission_claims\":1,\"admission_units\":\"3\",\"arena_chunks\":1,"
             "\"arena_bytes\":\"1024\"}}}", TO_WORKER);
    ck_assert_msg(check_json("reap", out, expect) == 0, "reap --json failed its checks: %s", out);
    ck_assert_int_eq(ctl(out, sizeof out, "reap", name, NULL, NULL), 0);
    ck_assert_msg(strstr(out, "0 dead nodes reported"), "second reap: %s", out);

    /* After the report: node 1 is gone, its reservations with it; the owner's lease stays. */
    snprintf(expect, sizeof expect, "{\"dead\":[],\"alive\":[0,2],\"absent\":[1],\"pending\":{},\"active\":{\"0\":1},"
             "\"claims\":{},\"arena_chunks\":{}}");
    ck_assert_int_eq(ctl(out, sizeof out, "--json", "show", name, NULL), 0);
    ck_assert_msg(check_json("show", out, expect) == 0, "show --json after reap failed its checks");

    /* node-dead: the owner killed -9, its share given back and printed; a repeat is left alone. */
    kill9(&own);
    snprintf(inc, sizeof inc, "%" PRIu64, own.r.incarnation);
    snprintf(node_s, sizeof node_s, "0");
    ck_assert_int_eq(ctl(out, sizeof out, "node-dead", name, node_s, inc), 0);
    ck_assert_msg(has(out, "node 0 incarnation %s reported dead on every table of %s\n  gave back pool 1 resource "
                           "(4 units, 1 lease on them), 0 reservations on others', 0 creation claims; streams 1 "
                           "side, %d unread bytes;", inc, name, TO_OWNER), "node-dead: %s", out);
    ck_assert_int_eq(ctl(out, sizeof out, "--json", "node-dead", name, node_s), 2);   /* INCARNATION missing */
    ck_assert_int_eq(ctl(out, sizeof out, "node-dead", name, node_s, inc), 0);
    ck_assert_msg(strstr(out, "left alone"), "a second node-dead: %s", out);
    kill9(&wtr);
    ck_assert_int_eq(ctl(out, sizeof out, "--json", "gc", name, NULL), 0);
    ck_assert_msg(check_json("gc", out, "{\"dry_run\":false}") == 0, "gc --json failed its checks: %s", out);
    ck_assert_msg(strstr(out, "\"action\":\"removed\""), "gc: %s", out);
}
END_TEST

START_TEST(node_dead_json_counts_what_came_back)
{
    char name[ORBIT_FLEET_NAME_MAX + 1], expect[512], inc[32];
    snprintf(name, sizeof name, "%s", tu_fleet_name("ctlnd"));
    struct member own;
    start(&own, owner, name);
    kill9(&own);
    snprintf(inc, sizeof inc, "%" PRIu64, own.r.incarnation);
    snprintf(expect, sizeof expect, "{\"node\":0,\"incarnation\":\"%s\",\"reported\":true,\"reclaimed\":"
             "{\"pool_resources\":1,\"pool_units\":\"4\",\"pool_leases\":\"1\",\"pool_reserved\":\"0\","
             "\"stream_sides\":1,\"stream_unread\":\"0\",\"admission_claims\":0,\"arena_chunks\":0},"
             "\"still_held\":{\"pool_resources\":0,\"pool_leases\":\"0\",\"stream_sides\":0}}", inc);
    ck_assert_int_eq(ctl5(out, sizeof out, "--json", "node-dead", name, "0", inc), 0);
    ck_assert_msg(check_json("node-dead", out, expect) == 0, "node-dead --json failed its checks: %s", out);
    ck_assert_int_eq(ctl(out, sizeof out, "node-dead", name, "0", inc), 0);
    ck_assert_msg(strstr(out, "left alone") && strstr(out, "nothing held") == NULL, "again: %s", out);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("orbitctl_show");
    TCase *tc = tcase_create("show");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, show_reap_and_node_dead_say_who_holds_what);
    tcase_add_test(tc, node_dead_json_counts_what_came_back);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
