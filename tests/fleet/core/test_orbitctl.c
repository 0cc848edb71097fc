/* SPDX-License-Identifier: MIT */
/*
 * The table seam from outside: orbitctl reset, against the real binary
 * (ORBITCTL_BIN), resets every table kind of a fleet (pool, streams,
 * admission, arena) and refuses a fleet with a live member unless --force is
 * given; orbitctl unlink refuses a fleet with live members unless --force,
 * and then names whom it orphaned; orbit_fleet_account follows a table that
 * was replaced.
 */
#include <sys/wait.h>
#include <orbit/orbit.h>
#include "testutil.h"

#define CAPACITY 4
#define DOMAIN 1
#define N_TABLES 4

static const orbit_key KEY = { 0x63746cull, 0x7265736574ull };
static const struct orbit_pool_spec POOL_SPEC = { .kind = ORBIT_POOL_KIND, .key_capacity = 16,
                                                  .lane_capacity = 8, .generation_limit = 0 };
static const struct orbit_stream_spec STREAM_SPEC = { .kind = ORBIT_STREAM_KIND, .lane_capacity = 8,
                                                      .buffer_bytes = 4096, .generation_limit = 0 };
static const struct orbit_admission_spec ADM_SPEC = { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4,
                                                      .max_claims = 64, .retained_max_bytes = 0 };
static const struct orbit_arena_spec ARENA_SPEC = { .kind = ORBIT_ARENA_KIND, .slot_bytes = 1024,
                                                    .slots_per_lane = 64 };

struct held { struct orbit_fleet *f; struct orbit_pool *pool; struct orbit_streams *streams;
              struct orbit_admission *adm; struct orbit_arena *arena; struct orbit_endpoint *ep; };

/* Join and take a share of every table: a lease, a stream, an admission claim, an arena chunk. */
static int take_everything(const char *name, struct held *h)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.backing = tu_backing();
    orbit_id id;
    struct orbit_lease lease;
    struct orbit_ticket t;
    struct orbit_reservation r;
    struct orbit_chunk_desc d;
    const struct orbit_units u[] = { { DOMAIN, 3 } };
    struct orbit_demand demand = { .claim = u, .n_claim = 1 };
    struct orbit_admit_result res;
    if (orbit_fleet_join(name, &o, &h->f) != 0 || orbit_pool_open(h->f, &POOL_SPEC, &h->pool) != 0 ||
        orbit_streams_open(h->f, &STREAM_SPEC, &h->streams) != 0 ||
        orbit_admission_open(h->f, &ADM_SPEC, &h->adm) != 0 || orbit_arena_open(h->f, &ARENA_SPEC, &h->arena) != 0)
        return 1;
    if (orbit_pool_register(h->pool, KEY, 4, &id) != 0 || orbit_pool_reserve(h->pool, id, &lease) != 0)
        return 2;
    if (orbit_streams_create(h->streams, &h->ep, &t) != 0)
        return 3;
    if (orbit_admission_set_capacity(h->adm, DOMAIN, 10) != 0 ||
        orbit_admission_try_claim(h->adm, &demand, &res) != 0 || res.outcome != ORBIT_ADMIT_CLAIMED)
        return 4;
    if (orbit_arena_try_reserve(h->arena, 100, &r) != 0 || orbit_arena_commit(&r, 100, &d) != 0)
        return 5;
    return 0;
}

/* What the tables hold: live pool keys + streams + admission claims + arena chunks, each 0 or 1. */
static void held_counts(struct orbit_fleet *f, ssize_t out[N_TABLES])
{
    struct orbit_pool *p;
    struct orbit_streams *s;
    struct orbit_admission *adm;
    struct orbit_arena *ar;
    ck_assert_int_eq(orbit_pool_open_existing(f, POOL_SPEC.kind, &p), 0);
    ck_assert_int_eq(orbit_streams_open_existing(f, STREAM_SPEC.kind, &s), 0);
    ck_assert_int_eq(orbit_admission_open_existing(f, ADM_SPEC.kind, &adm), 0);
    ck_assert_int_eq(orbit_arena_open_existing(f, ARENA_SPEC.kind, &ar), 0);
    out[0] = orbit_pool_keys(p, NULL, 0);
    out[1] = orbit_streams_list(s, NULL, 0);
    out[2] = orbit_admission_claims(adm, NULL, 0);
    out[3] = orbit_arena_chunks(ar, NULL, 0);
    orbit_arena_close(ar);
    orbit_admission_close(adm);
    orbit_streams_close(s);
    orbit_pool_close(p);
}

static void assert_held(struct orbit_fleet *f, ssize_t want)
{
    ssize_t n[N_TABLES];
    held_counts(f, n);
    for (int i = 0; i < N_TABLES; i++)
        ck_assert_msg(n[i] == want, "table %d holds %zd, want %zd", i, n[i], want);
}

/* The four tables by kind order, with their names and epochs. */
static void tables_of(struct orbit_fleet *f, struct orbit_table_info t[N_TABLES])
{
    struct orbit_table_info all[8];
    ck_assert_int_eq(orbit_fleet_tables(f, all, 8), N_TABLES);
    const char *want[N_TABLES] = { "arena", "admission", "streams", "pool" };
    for (int i = 0; i < N_TABLES; i++) {
        t[i] = all[i];
        ck_assert(t[i].built);
        ck_assert_str_eq(t[i].name, orbit_table_type_name(t[i].type));
    }
    for (int i = 0; i < N_TABLES; i++) {
        bool found = false;
        for (int j = 0; j < N_TABLES; j++)
            found |= strcmp(t[j].name, want[i]) == 0;
        ck_assert_msg(found, "no %s table listed", want[i]);
    }
}

/* Run orbitctl; stdout and stderr into out. Returns its exit status. */
static int run_ctl(char *out, size_t len, const char *a1, const char *a2, const char *a3)
{
    const char *bin = getenv("ORBITCTL_BIN");
    ck_assert_ptr_nonnull(bin);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(bin, "orbitctl", a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    char spill[4096];
    while ((r = read(p[0], n + 1 < len ? out + n : spill, n + 1 < len ? len - 1 - n : sizeof spill)) > 0)
        n += n + 1 < len ? (size_t)r : 0;   /* read to the end: a tool writing to a shut pipe dies */
    out[n] = '\0';
    close(p[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A fleet whose one member was killed -9: its segments stay, nobody lives in it. */
static void leave_a_dead_fleet(const char *name)
{
    fflush(NULL);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        struct held h;
        if (take_everything(name, &h) != 0)
            _exit(1);
        raise(SIGKILL);
    }
    int st;
    ck_assert_int_eq(waitpid(kid, &st, 0), kid);
    ck_assert(WIFSIGNALED(st));
}

static int segments_of(const char *name)
{
    struct orbit_segment_info si[8];
    return (int)orbit_fleet_segments(name, si, 8);
}

START_TEST(gc_removes_the_fleets_nobody_lives_in_and_keeps_the_others)
{
    char dead[ORBIT_FLEET_NAME_MAX + 1], live[ORBIT_FLEET_NAME_MAX + 1];
    static char out[1 << 20];
    snprintf(dead, sizeof dead, "%s", tu_fleet_name("ctl-gc-dead"));
    snprintf(live, sizeof live, "%s", tu_fleet_name("ctl-gc-live"));
    leave_a_dead_fleet(dead);
    struct held h;
    ck_assert_int_eq(take_everything(live, &h), 0);
    ck_assert_int_eq(run_ctl(out, sizeof out, "ls", NULL, NULL), 0);
    ck_assert_msg(strstr(out, "(0 live members, ") && strstr(out, "(1 live member, "), "ls: %s", out);
    ck_assert_msg(strstr(out, "MiB resident)"), "ls shows no resident bytes: %s", out);
    ck_assert_msg(strstr(out, "room: /dev/shm (tmpfs): "), "ls shows no room left: %s", out);
    ck_assert_int_eq(run_ctl(out, sizeof out, "gc", dead, "--dry-run"), 0);
    ck_assert_msg(strstr(out, "would remove"), "gc --dry-run: %s", out);
    ck_assert_int_ge(segments_of(dead), 5);   /* the fleet and its four tables, still there */
    ck_assert_int_eq(run_ctl(out, sizeof out, "gc", dead, live), 0);
    ck_assert_msg(strstr(out, "removed") && strstr(out, "kept: 1 live member"), "gc: %s", out);
    ck_assert_int_eq(segments_of(dead), 0);
    ck_assert_int_ge(segments_of(live), 5);
    ck_assert_int_eq(run_ctl(out, sizeof out, "--json", "gc", live), 0);
    ck_assert_msg(strstr(out, "\"action\":\"kept\"") && strstr(out, "\"live_members\":1"), "gc --json: %s", out);
    assert_held(h.f, 1);   /* the live fleet lost nothing */
    orbit_endpoint_close(h.ep);
    orbit_arena_close(h.arena);
    orbit_admission_close(h.adm);
    orbit_streams_close(h.streams);
    orbit_pool_close(h.pool);
    orbit_fleet_leave(h.f);
    orbit_fleet_unlink(live);
}
END_TEST

START_TEST(reset_refuses_a_live_member_without_force)
{
    const char *name = tu_fleet_name("ctlreset");
    struct held h;
    char out[4096];
    struct orbit_table_info before[N_TABLES], after[N_TABLES];
    ck_assert_int_eq(take_everything(name, &h), 0);   /* this process is the live member */
    tables_of(h.f, before);
    assert_held(h.f, 1);

    ck_assert_int_eq(run_ctl(out, sizeof out, "reset", name, NULL), 1);
    ck_assert_msg(strstr(out, "live member") && strstr(out, "--force"), "output: %s", out);
    ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);   /* one line */
    tables_of(h.f, after);
    for (int i = 0; i < N_TABLES; i++)
        ck_assert_uint_eq(after[i].epoch, before[i].epoch);
    assert_held(h.f, 1);

    ck_assert_int_eq(run_ctl(out, sizeof out, "reset", name, "--force"), 0);
    for (int i = 0; i < N_TABLES; i++) {
        char line[64];
        snprintf(line, sizeof line, "%s kind %u: new epoch", before[i].name, before[i].kind);
        ck_assert_msg(strstr(out, line), "no '%s' in: %s", line, out);
    }
    tables_of(h.f, after);
    for (int i = 0; i < N_TABLES; i++)
        ck_assert_uint_gt(after[i].epoch, before[i].epoch);
    assert_held(h.f, 0);

    orbit_endpoint_close(h.ep);   /* stale since the reset: closing it changes nothing */
    orbit_arena_close(h.arena);
    orbit_admission_close(h.adm);
    orbit_streams_close(h.streams);
    orbit_pool_close(h.pool);
    orbit_fleet_leave(h.f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(reset_of_a_fleet_whose_members_died_resets_every_table)
{
    const char *name = tu_fleet_name("ctldead");
    char out[4096];
    pid_t kid = fork();
    if (kid == 0) {
        struct held h;
        _exit(take_everything(name, &h));   /* exits holding everything: its record stays LIVE */
    }
    ck_assert_int_eq(tu_wait_child(kid, 10000), 0);
    struct orbit_fleet *obs;
    struct orbit_table_info before[N_TABLES], after[N_TABLES];
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    tables_of(obs, before);
    assert_held(obs, 1);

    ck_assert_int_eq(run_ctl(out, sizeof out, "reset", name, NULL), 0);
    tables_of(obs, after);
    for (int i = 0; i < N_TABLES; i++)
        ck_assert_uint_gt(after[i].epoch, before[i].epoch);
    assert_held(obs, 0);
    orbit_fleet_leave(obs);

    ck_assert_int_eq(run_ctl(out, sizeof out, "reset", NULL, NULL), 2);   /* no fleet named */
    ck_assert_int_eq(run_ctl(out, sizeof out, "reset", "t-no-such-fleet-x", NULL), 1);
    ck_assert_int_eq(run_ctl(out, sizeof out, "--version", NULL, NULL), 0);
    char want[64];
    snprintf(want, sizeof want, "orbitctl %s\n", orbit_version_string());
    ck_assert_str_eq(out, want);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* A member in a child of its own: joins, says so on ready, lives until hold closes, then leaves. */
static pid_t member_until(const char *name, int ready, const int hold[2])
{
    fflush(NULL);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        alarm(60);
        close(hold[1]);
        struct held h;
        char c = (char)take_everything(name, &h);
        if (write(ready, &c, 1) != 1 || c != 0)
            _exit(1);
        while (read(hold[0], &c, 1) > 0) {}
        _exit(0);
    }
    return kid;
}

START_TEST(unlink_refuses_a_fleet_with_live_members_unless_forced)
{
    const char *tmp = tu_fleet_name("ctlunlink");
    char name[ORBIT_FLEET_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", tmp);
    static char out[1 << 16];
    int ready[2], hold[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t kid[2];
    for (int i = 0; i < 2; i++)
        kid[i] = member_until(name, ready[1], hold);
    close(hold[0]);
    for (int i = 0; i < 2; i++) {
        char c = 1;
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        ck_assert_int_eq(c, 0);
    }
    ck_assert_int_eq(run_ctl(out, sizeof out, "unlink", name, NULL), 1);
    char pid0[32], pid1[32];
    snprintf(pid0, sizeof pid0, "pid %d (alive)", (int)kid[0]);
    snprintf(pid1, sizeof pid1, "pid %d (alive)", (int)kid[1]);
    ck_assert_msg(strstr(out, "2 live or joining members") && strstr(out, pid0) && strstr(out, pid1) &&
                  strstr(out, "--force"), "unlink: %s", out);
    ck_assert_int_ge(segments_of(name), 5);
    /* Nothing split: a joiner finds the members' fleet, not a new one under the name. */
    struct orbit_fleet *me = tu_join(name, CAPACITY, -1, 0, tu_backing());
    ck_assert_int_eq(orbit_fleet_nodes(me, NULL, 0), 3);
    orbit_fleet_leave(me);
    ck_assert_int_eq(run_ctl(out, sizeof out, "--json", "unlink", name), 1);
    ck_assert_msg(strstr(out, "\"action\":\"refused\"") && strstr(out, "\"state\":\"alive\""), "json: %s", out);

    ck_assert_int_eq(run_ctl(out, sizeof out, "unlink", name, "--force"), 0);
    ck_assert_msg(strstr(out, "removed") && strstr(out, "orphaned 2 members") && strstr(out, pid0) &&
                  strstr(out, pid1), "unlink --force: %s", out);
    ck_assert_int_eq(segments_of(name), 0);
    close(hold[1]);   /* the members leave and exit */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(tu_wait_child(kid[i], 10000), 0);
    close(ready[0]);
    close(ready[1]);

    /* Nobody lives in it: removed without --force, nothing orphaned. */
    leave_a_dead_fleet(name);
    ck_assert_int_eq(run_ctl(out, sizeof out, "unlink", name, NULL), 0);
    ck_assert_msg(strstr(out, "removed") && !strstr(out, "orphaned"), "unlink: %s", out);
    ck_assert_int_eq(segments_of(name), 0);
    ck_assert_int_eq(run_ctl(out, sizeof out, "unlink", name, NULL), 1);
    ck_assert_msg(strstr(out, "no such fleet"), "unlink of nothing: %s", out);
}
END_TEST

/* The handles orbit_fleet_account keeps are dropped when a table's file is replaced. */
START_TEST(account_follows_a_replaced_table)
{
    const char *name = tu_fleet_name("acct");
    struct orbit_fleet *me = tu_join(name, CAPACITY, -1, 0, tu_backing()), *obs;
    struct orbit_pool *pool;
    struct orbit_arena *arena;
    struct orbit_reservation r;
    struct orbit_chunk_desc d;
    struct orbit_reclaim rc;
    orbit_id id;
    uint16_t node = orbit_fleet_node(me);
    uint64_t inc = orbit_fleet_incarnation(me);
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_pool_open(me, &POOL_SPEC, &pool), 0);
    ck_assert_int_eq(orbit_pool_register(pool, KEY, 4, &id), 0);
    ck_assert_int_eq(orbit_fleet_account(obs, node, inc, &rc), 0);
    ck_assert_uint_eq(rc.tables, 1);
    ck_assert_uint_eq(rc.pool_resources, 1);
    ck_assert_uint_eq(rc.pool_units, 4);

    ck_assert_int_eq(orbit_arena_open(me, &ARENA_SPEC, &arena), 0);   /* one more segment */
    ck_assert_int_eq(orbit_arena_try_reserve(arena, 2000, &r), 0);
    ck_assert_int_eq(orbit_arena_commit(&r, 2000, &d), 0);
    ck_assert_int_eq(orbit_fleet_account(obs, node, inc, &rc), 0);
    ck_assert_uint_eq(rc.tables, 2);
    ck_assert_uint_eq(rc.arena_chunks, 1);
    ck_assert_uint_eq(rc.arena_bytes, 2 * ARENA_SPEC.slot_bytes);
    ck_assert_int_eq(orbit_fleet_account(obs, node, inc + 1, &rc), 0);   /* another life holds nothing */
    ck_assert_uint_eq(rc.pool_resources + rc.arena_chunks, 0);

    struct orbit_segment_info segs[8];   /* the arena's file replaced: same count of names */
    ssize_t n = orbit_fleet_segments(name, segs, 8);
    for (ssize_t i = 0; i < n && i < 8; i++)
        if (segs[i].kind == ARENA_SPEC.kind)
            ck_assert_int_eq(unlink(segs[i].path), 0);
    orbit_arena_close(arena);
    ck_assert_int_eq(orbit_arena_open(me, &ARENA_SPEC, &arena), 0);
    ck_assert_int_eq(orbit_fleet_account(obs, node, inc, &rc), 0);
    ck_assert_uint_eq(rc.tables, 2);
    ck_assert_uint_eq(rc.arena_chunks, 0);   /* the new arena's, not the cached old one's */
    ck_assert_uint_eq(rc.pool_resources, 1);

    orbit_arena_close(arena);
    orbit_pool_close(pool);
    orbit_fleet_leave(obs);
    orbit_fleet_leave(me);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("orbitctl");
    TCase *tc = tcase_create("reset");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reset_refuses_a_live_member_without_force);
    tcase_add_test(tc, reset_of_a_fleet_whose_members_died_resets_every_table);
    tcase_add_test(tc, account_follows_a_replaced_table);
    tcase_add_test(tc, gc_removes_the_fleets_nobody_lives_in_and_keeps_the_others);
    tcase_add_test(tc, unlink_refuses_a_fleet_with_live_members_unless_forced);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
