/* SPDX-License-Identifier: MIT */
/*
 * Generations of one fleet name: which one a joiner takes, what each records,
 * and a member of other layouts (upgrade_member_bumped, linked with the test
 * build of another release) beside this library's members: it starts the next
 * generation, each side refuses the other's with both versions named, and an
 * empty one is collected by the side that cannot read it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <orbit/orbit.h>
#include "testutil.h"

#define CAPACITY 16   /* upgrade_member's */

static struct orbit_fleet *join_gen(const char *name, uint32_t generation)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.generation = generation;
    o.backing = tu_backing();
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(name, &o, &f);
    ck_assert_msg(rc == 0, "join %s generation %u: %s (%s)", name, generation, orbit_strerror(rc),
                  orbit_last_error());
    return f;
}

static int try_join(const char *name, uint32_t generation, struct orbit_fleet **f)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CAPACITY;
    o.generation = generation;
    o.backing = tu_backing();
    *f = NULL;
    return orbit_fleet_join(name, &o, f);
}

static void ck_last_error_has(const char *a, const char *b)
{
    const char *e = orbit_last_error();
    ck_assert_msg(strstr(e, a) && (!b || strstr(e, b)), "last error '%s' lacks '%s' / '%s'", e, a, b ? b : "");
}

static char *qualified(const char *base, uint32_t gen)
{
    static _Thread_local char buf[2][ORBIT_FLEET_NAME_MAX + 1];
    char *b = buf[gen & 1];
    ck_assert_int_gt(orbit_fleet_generation_name(base, gen, b, sizeof buf[0]), 0);
    return b;
}

/* ---- a member process: upgrade_member join, this build or the bumped one ---- */

struct member { pid_t pid; int in, out; char line[512]; };

static void member_start(struct member *m, bool bumped, const char *fleet, uint32_t generation)
{
    const char *bin = getenv(bumped ? "UPGRADE_MEMBER_BUMPED" : "UPGRADE_MEMBER");
    ck_assert_msg(bin, "UPGRADE_MEMBER(_BUMPED) unset: run under meson test");
    int to[2], from[2];
    ck_assert_int_eq(pipe2(to, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(from, O_CLOEXEC), 0);
    char gen[16];
    snprintf(gen, sizeof gen, "%u", generation);
    fflush(NULL);
    m->pid = fork();
    ck_assert_int_ge(m->pid, 0);
    if (m->pid == 0) {
        dup2(to[0], STDIN_FILENO);
        dup2(from[1], STDOUT_FILENO);
        execl(bin, bin, "join", fleet, gen, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    m->in = to[1];
    m->out = from[0];
    /* Its one line: "joined NAME GEN NODE INC" or "refused CODE SENTENCE". */
    size_t n = 0;
    while (n < sizeof m->line - 1) {
        struct pollfd p = { .fd = m->out, .events = POLLIN };
        ck_assert_msg(poll(&p, 1, 10000) == 1, "member %d said nothing in 10 s", (int)m->pid);
        ssize_t r = read(m->out, m->line + n, 1);
        if (r <= 0 || m->line[n] == '\n')
            break;
        n++;
    }
    m->line[n] = '\0';
}

/* Ends it: a clean leave (stdin closed) or a kill -9. Its exit status. */
static int member_end(struct member *m, bool kill9)
{
    if (kill9)
        kill(m->pid, SIGKILL);
    close(m->in);
    close(m->out);
    return tu_wait_child(m->pid, 10000);
}

static void ck_joined(const struct member *m, const char *name, uint32_t generation)
{
    char want[160];
    snprintf(want, sizeof want, "joined %s %u ", name, generation);
    ck_assert_msg(strncmp(m->line, want, strlen(want)) == 0, "member said '%s', not '%s...'", m->line, want);
}

/* ---- this library's generations ---- */

START_TEST(auto_joins_the_newest_generation_of_this_librarys_layouts)
{
    char base[ORBIT_FLEET_NAME_MAX + 1];
    snprintf(base, sizeof base, "%s", tu_fleet_name("gen"));
    struct orbit_fleet *g1 = join_gen(base, ORBIT_GENERATION_AUTO);
    ck_assert_uint_eq(orbit_fleet_generation(g1), 1);
    ck_assert_str_eq(orbit_fleet_name(g1), base);
    /* NEW starts one beside, with a node space of its own; AUTO then joins it, the newest. */
    struct orbit_fleet *g2 = join_gen(base, ORBIT_GENERATION_NEW);
    ck_assert_uint_eq(orbit_fleet_generation(g2), 2);
    ck_assert_str_eq(orbit_fleet_name(g2), qualified(base, 2));
    ck_assert_uint_eq(orbit_fleet_node(g2), 0);
    struct orbit_fleet *a = join_gen(base, ORBIT_GENERATION_AUTO);
    ck_assert_uint_eq(orbit_fleet_generation(a), 2);
    ck_assert_uint_eq(orbit_fleet_node(a), 1);
    struct orbit_fleet *p = join_gen(base, 1);               /* pinned */
    ck_assert_uint_eq(orbit_fleet_generation(p), 1);
    ck_assert_uint_eq(orbit_fleet_node(p), 1);
    struct orbit_fleet *q = join_gen(qualified(base, 2), 0); /* the qualified name pins too */
    ck_assert_uint_eq(orbit_fleet_generation(q), 2);
    struct orbit_fleet *x;
    ck_assert_int_eq(try_join(qualified(base, 2), 3, &x), -ORBIT_EMALFORMED);
    ck_last_error_has("names generation 2", "opts.generation 3");

    struct orbit_generation_info gi[4];
    ck_assert_int_eq(orbit_fleet_generations(base, gi, 4), 2);
    ck_assert_int_eq(orbit_fleet_generations(qualified(base, 2), NULL, 0), 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(gi[i].generation, (uint32_t)i + 1);
        ck_assert_str_eq(gi[i].name, i == 0 ? base : qualified(base, 2));
        ck_assert(gi[i].readable);
        ck_assert_uint_eq(gi[i].capacity, CAPACITY);
        ck_assert_uint_eq(gi[i].library_version, orbit_version());
        for (unsigned l = 0; l < ORBIT_LAYOUTS_MAX; l++)
            ck_assert_uint_eq(gi[i].layouts[l], orbit_layout_version(l));
    }
    ck_assert_int_eq(gi[0].live_members, 2);
    ck_assert_int_eq(gi[1].live_members, 3);
    ck_assert_int_eq(orbit_fleet_live_members(base), 2);
    ck_assert_int_eq(orbit_fleet_live_members(qualified(base, 2)), 3);

    /* Observers and listings take the qualified name; the bare one is generation 1. */
    struct orbit_fleet *o1, *o2;
    ck_assert_int_eq(orbit_fleet_observe(base, &o1), 0);
    ck_assert_int_eq(orbit_fleet_observe(qualified(base, 2), &o2), 0);
    ck_assert_uint_eq(orbit_fleet_generation(o1), 1);
    ck_assert_uint_eq(orbit_fleet_generation(o2), 2);
    ck_assert_str_eq(orbit_fleet_name(o2), qualified(base, 2));
    struct orbit_node_info ni[CAPACITY];
    ck_assert_int_eq(orbit_fleet_nodes(o2, ni, CAPACITY), 3);
    orbit_fleet_leave(o1);
    orbit_fleet_leave(o2);
    char names[512][ORBIT_FLEET_NAME_MAX + 1];
    ssize_t n = orbit_fleet_list(names, 512);
    int seen = 0;
    for (ssize_t i = 0; i < n && i < 512; i++)
        seen += strcmp(names[i], base) == 0 || strcmp(names[i], qualified(base, 2)) == 0;
    ck_assert_int_eq(seen, 2);

    orbit_fleet_leave(q);
    orbit_fleet_leave(p);
    orbit_fleet_leave(a);
    orbit_fleet_leave(g2);
    ck_assert_int_eq(orbit_fleet_collect(qualified(base, 2)), 0);   /* one generation, not the other */
    ck_assert_int_eq(orbit_fleet_generations(base, gi, 4), 1);
    ck_assert_uint_eq(gi[0].generation, 1);
    orbit_fleet_leave(g1);
    ck_assert_int_eq(orbit_fleet_collect(base), 0);
    ck_assert_int_eq(orbit_fleet_generations(base, gi, 4), 0);
}
END_TEST

/* ---- another release beside this one ---- */

START_TEST(a_member_of_other_layouts_starts_the_next_generation_and_each_side_refuses_the_other)
{
    char base[ORBIT_FLEET_NAME_MAX + 1], v[16];
    snprintf(base, sizeof base, "%s", tu_fleet_name("other"));
    snprintf(v, sizeof v, "orbit %s", orbit_version_string());
    struct orbit_fleet *ours = join_gen(base, ORBIT_GENERATION_AUTO);
    struct member other;
    member_start(&other, true, base, ORBIT_GENERATION_AUTO);
    ck_joined(&other, qualified(base, 2), 2);
    /* This library's AUTO stays in generation 1: the newest of its layouts. */
    struct orbit_fleet *again = join_gen(base, ORBIT_GENERATION_AUTO);
    ck_assert_uint_eq(orbit_fleet_generation(again), 1);
    orbit_fleet_leave(again);

    /* Pinned across: refused, both versions named, from either side. */
    struct orbit_fleet *x;
    ck_assert_int_eq(try_join(base, 2, &x), -ORBIT_EGEOMETRY);
    ck_assert_ptr_null(x);
    ck_last_error_has("orbit_fleet_join: fleet '", "' generation 2 (orbit ");
    ck_last_error_has("is at streams layout 103; this library", "writes streams layout 3");
    ck_last_error_has(v, NULL);
    ck_assert_int_eq(orbit_fleet_observe(qualified(base, 2), &x), -ORBIT_EGEOMETRY);
    ck_last_error_has("orbit_fleet_observe: fleet '", "is at streams layout 103");
    struct member refused;
    member_start(&refused, true, base, 1);
    ck_assert_msg(strstr(refused.line, "refused -71 orbit_fleet_join: fleet '") &&
                  strstr(refused.line, "generation 1 (orbit ") &&
                  strstr(refused.line, "is at streams layout 3; this library") &&
                  strstr(refused.line, "writes streams layout 103"), "the bumped member said '%s'", refused.line);
    ck_assert_int_eq(member_end(&refused, false), 3);

    /* What this library reads of the other generation: its header and its locks. */
    struct orbit_generation_info gi[4];
    ck_assert_int_eq(orbit_fleet_generations(base, gi, 4), 2);
    ck_assert(gi[0].readable);
    ck_assert(!gi[1].readable);
    ck_assert_uint_eq(gi[1].layouts[ORBIT_LAYOUT_STREAMS], orbit_layout_version(ORBIT_LAYOUT_STREAMS) + 100);
    ck_assert_uint_eq(gi[1].layouts[ORBIT_LAYOUT_FLEET], orbit_layout_version(ORBIT_LAYOUT_FLEET));
    ck_assert_uint_eq(gi[1].library_version, orbit_version());
    ck_assert_int_eq(gi[1].live_members, 1);
    ck_assert_int_eq(orbit_fleet_live_members(qualified(base, 2)), 1);
    ck_assert_int_eq(orbit_fleet_collect(qualified(base, 2)), -ORBIT_EBUSY);

    /* Its member killed: the generation is empty, and this library collects it. */
    ck_assert_int_eq(member_end(&other, true), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_live_members(qualified(base, 2)), 0);
    ck_assert_int_eq(orbit_fleet_collect(qualified(base, 2)), 0);
    ck_assert_int_eq(orbit_fleet_segments(qualified(base, 2), NULL, 0), 0);
    ck_assert_int_eq(orbit_fleet_generations(base, gi, 4), 1);
    ck_assert_int_eq(orbit_fleet_live_members(base), 1);   /* ours untouched */

    /* The number is free again: the next member of other layouts starts generation 2 anew. */
    member_start(&other, true, base, ORBIT_GENERATION_AUTO);
    ck_joined(&other, qualified(base, 2), 2);
    ck_assert_int_eq(member_end(&other, false), 0);
    ck_assert_int_eq(orbit_fleet_collect(qualified(base, 2)), 0);
    orbit_fleet_leave(ours);
    ck_assert_int_eq(orbit_fleet_collect(base), 0);
}
END_TEST

START_TEST(a_fleet_file_nobody_could_have_made_is_refused_not_stepped_over)
{
    char base[ORBIT_FLEET_NAME_MAX + 1], path[256];
    snprintf(base, sizeof base, "%s", tu_fleet_name("plant"));
    snprintf(path, sizeof path, "/dev/shm/orbit.%s.255", base);
    /* Garbage under the name (no header at all): its open says so; no generation 2 appears. */
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    char junk[8192];
    memset(junk, 0x5a, sizeof junk);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    struct orbit_fleet *x;
    ck_assert_int_eq(try_join(base, ORBIT_GENERATION_AUTO, &x), -ORBIT_ECORRUPT);
    /* Readable by others: planted, refused as before. */
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(try_join(base, ORBIT_GENERATION_AUTO, &x), -EACCES);
    ck_assert_int_eq(orbit_fleet_generations(base, NULL, 0), 1);
    unlink(path);
}
END_TEST

/* ---- what an operator sees ---- */

/* orbitctl ARGS... with stdout and stderr into out, after a '\n' (every line begins after one); its exit status. */
static int ctl(char *out, size_t len, const char *const *args)
{
    const char *argv[16] = { getenv("ORBITCTL_BIN") };
    ck_assert_msg(argv[0], "ORBITCTL_BIN unset: run under meson test");
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t n = 1;
    ssize_t r;
    out[0] = '\n';
    while (n + 1 < len && (r = read(p[0], out + n, len - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    return tu_wait_child(pid, 20000);
}

static void ck_has(const char *out, const char *fmt, const char *a, const char *b)
{
    char want[512];
    snprintf(want, sizeof want, fmt, a, b);
    ck_assert_msg(strstr(out, want), "no '%s' in:\n%.3000s", want, out);
}

START_TEST(an_operator_sees_each_generation_and_its_version)
{
    static char out[1 << 18];
    char base[ORBIT_FLEET_NAME_MAX + 1], gen2[ORBIT_FLEET_NAME_MAX + 1];
    const char *v = orbit_version_string();
    snprintf(base, sizeof base, "%s", tu_fleet_name("ops"));
    snprintf(gen2, sizeof gen2, "%s", qualified(base, 2));
    struct orbit_fleet *ours = join_gen(base, ORBIT_GENERATION_AUTO);
    struct member other;
    member_start(&other, true, base, ORBIT_GENERATION_AUTO);
    ck_joined(&other, gen2, 2);

    ck_assert_int_eq(ctl(out, sizeof out, (const char *[]){ "ls", NULL }), 0);
    ck_has(out, "\n%s  generation 1, orbit %s  (1 live member, ", base, v);
    ck_has(out, "\n%s  generation 2, orbit %s, streams layout 103: another release's layouts  (1 live member, ",
           gen2, v);
    ck_assert_int_eq(ctl(out, sizeof out, (const char *[]){ "show", base, NULL }), 0);
    ck_has(out, "fleet %s: capacity 16, backing %s", base, "");
    ck_has(out, "generation 1, orbit %s\ngenerations of this fleet (2):\n", v, "");
    ck_has(out, "\n     2  %s  %s", gen2, "");
    ck_has(out, "  1  orbit %s, streams layout 103: another release's layouts\n%s", v, "");
    ck_assert_int_eq(ctl(out, sizeof out, (const char *[]){ "show", gen2, NULL }), 1);
    ck_has(out, "orbitctl: %s: segment exists with another geometry or version (orbit_fleet_observe_opts: fleet '%s' "
           "generation 2", gen2, gen2);
    ck_has(out, "is at streams layout 103; this library (orbit %s) writes streams layout 3%s", v, "");
    ck_assert_int_eq(ctl(out, sizeof out, (const char *[]){ "top", base, "--count", "1", "--interval", "0.1", NULL }),
                     0);
    ck_has(out, "\nGEN  NAME%s%s", "", "");
    ck_has(out, "\n  1* %-18.18s     1  orbit %s", base, v);
    ck_has(out, "\n  2  %-18.18s     1  orbit %s (another release's layouts)", gen2, v);
    ck_assert_int_eq(ctl(out, sizeof out, (const char *[]){ "metrics", base, NULL }), 0);
    ck_has(out, "\norbit_fleet_up{fleet=\"%s\",generation=\"1\"} 1\n%s", base, "");
    ck_has(out, "\norbit_fleet_up{fleet=\"%s\",generation=\"2\"} 0\n%s", base, "");
    ck_has(out, "\norbit_fleet_live_members{fleet=\"%s\",generation=\"2\"} 1\n%s", base, "");
    ck_has(out, "\norbit_fleet_generation_info{fleet=\"%s\",generation=\"2\",version=\"%s\",readable=\"false\"} 1",
           base, v);

    /* The other release's member gone, gc on the fleet's name takes its empty generation only. */
    ck_assert_int_eq(member_end(&other, true), 128 + SIGKILL);
    ck_assert_int_eq(ctl(out, sizeof out, (const char *[]){ "gc", base, NULL }), 0);
    ck_has(out, "%-24s kept: 1 live member%s", base, "");
    ck_has(out, "%-24s removed%s", gen2, "");
    ck_assert_int_eq(orbit_fleet_generations(base, NULL, 0), 1);
    orbit_fleet_leave(ours);
    ck_assert_int_eq(orbit_fleet_collect(base), 0);
}
END_TEST

/* ---- names, numbers and versions ---- */

START_TEST(generation_names_and_numbers)
{
    char buf[ORBIT_FLEET_NAME_MAX + 1];
    ck_assert_int_eq(orbit_fleet_generation_name("web", 1, buf, sizeof buf), 3);
    ck_assert_str_eq(buf, "web");
    ck_assert_int_eq(orbit_fleet_generation_name("web", 12, buf, sizeof buf), 6);
    ck_assert_str_eq(buf, "web@12");
    ck_assert_int_eq(orbit_fleet_generation_name("web@2", 3, buf, sizeof buf), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_generation_name("web", 0, buf, sizeof buf), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_fleet_generation_name("web", 2, buf, 5), -ORBIT_ETOOLARGE);
    char long_name[ORBIT_FLEET_NAME_MAX + 1];
    memset(long_name, 'n', ORBIT_FLEET_NAME_MAX - 1);
    long_name[ORBIT_FLEET_NAME_MAX - 1] = '\0';
    ck_assert_int_eq(orbit_fleet_generation_name(long_name, 2, buf, sizeof buf), -ORBIT_ETOOLARGE);
    ck_last_error_has("orbit_fleet_generation_name", "at most 64");

    struct orbit_fleet *x;
    const char *bad[] = { "web@1", "web@02", "web@0", "web@", "@2", "web@2x", "web@1000000000" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(try_join(bad[i], 0, &x) == -ORBIT_EMALFORMED, "%s", bad[i]);
        ck_assert_msg(orbit_fleet_observe(bad[i], &x) == -ORBIT_EMALFORMED, "%s", bad[i]);
        ck_assert_msg(orbit_fleet_generations(bad[i], NULL, 0) == -ORBIT_EMALFORMED, "%s", bad[i]);
    }
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.generation = ORBIT_GENERATION_MAX + 1;
    ck_assert_int_eq(orbit_fleet_join("web", &o, &x), -ORBIT_EMALFORMED);
    ck_last_error_has("orbit_fleet_join: generation", "ORBIT_GENERATION_NEW");
    /* A PRIVATE fleet is generation 1, and only that. */
    o.generation = 1;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &x), 0);
    ck_assert_uint_eq(orbit_fleet_generation(x), 1);
    orbit_fleet_leave(x);
    o.generation = ORBIT_GENERATION_NEW;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &x), -ORBIT_EMALFORMED);
    ck_last_error_has("PRIVATE fleet", "generation 1");

    /* A name with no room for "@2" has its first generation only; a second is refused, said why. */
    char room[ORBIT_FLEET_NAME_MAX + 1];
    snprintf(room, sizeof room, "%s", tu_fleet_name("room"));
    size_t len = strlen(room);
    memset(room + len, 'r', ORBIT_FLEET_NAME_MAX - 1 - len);
    room[ORBIT_FLEET_NAME_MAX - 1] = '\0';
    struct orbit_fleet *f = join_gen(room, ORBIT_GENERATION_AUTO);
    ck_assert_int_eq(try_join(room, ORBIT_GENERATION_NEW, &x), -ORBIT_EGEOMETRY);
    ck_last_error_has("needs a generation 2", "would pass 64 bytes");
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_collect(room), 0);
}
END_TEST

START_TEST(versions_are_said_plainly)
{
    ck_assert_uint_eq(orbit_version(), ORBIT_VERSION_NUMBER);
    char v[32];
    snprintf(v, sizeof v, "%u.%u.%u", orbit_version() >> 16, (orbit_version() >> 8) & 0xff, orbit_version() & 0xff);
    ck_assert_str_eq(v, orbit_version_string());
    ck_assert_uint_eq(orbit_layout_version(ORBIT_LAYOUT_SEGMENT), 1);
    ck_assert_uint_eq(orbit_layout_version(ORBIT_LAYOUT_FLEET), 4);
    for (unsigned l = ORBIT_LAYOUT_POOL; l <= ORBIT_LAYOUT_ADMISSION; l++)
        ck_assert_uint_gt(orbit_layout_version(l), 0);
    ck_assert_uint_eq(orbit_layout_version(ORBIT_LAYOUTS_MAX), 0);
    ck_assert_uint_eq(orbit_layout_version(1000), 0);
    ck_assert_str_eq(orbit_layout_name(ORBIT_LAYOUT_STREAMS), "streams");
    ck_assert_str_eq(orbit_layout_name(ORBIT_LAYOUT_SEGMENT), "segment");
    ck_assert_str_eq(orbit_layout_name(77), "unknown");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("generations");
    TCase *tc = tcase_create("generations");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, auto_joins_the_newest_generation_of_this_librarys_layouts);
    tcase_add_test(tc, a_member_of_other_layouts_starts_the_next_generation_and_each_side_refuses_the_other);
    tcase_add_test(tc, a_fleet_file_nobody_could_have_made_is_refused_not_stepped_over);
    tcase_add_test(tc, an_operator_sees_each_generation_and_its_version);
    tcase_add_test(tc, generation_names_and_numbers);
    tcase_add_test(tc, versions_are_said_plainly);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
