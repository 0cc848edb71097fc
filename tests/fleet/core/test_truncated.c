/* SPDX-License-Identifier: MIT */
/*
 * Segment files shrunk under the processes that map them (`truncate -s 4096`,
 * run by another process): a member, orbitctl (show, metrics, ls, and top
 * running across the cut) and orbit-reaper as a daemon. Each gets
 * -ORBIT_ECORRUPT (a member: naming the file) or reports the fleet
 * unreadable; nobody dies of a signal; the member's own SIGBUS handler still
 * gets its own fault, and the reaper keeps reclaiming in another fleet.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include "testutil.h"
#include <orbit/orbit.h>

static const char *orbitctl_bin(void) { return getenv("ORBITCTL_BIN"); }
static const char *reaper_bin(void) { return getenv("ORBIT_REAPER_BIN"); }

static sigjmp_buf escape;
static _Atomic int app_faults;

static void app_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig; (void)si; (void)uc;
    app_faults++;
    siglongjmp(escape, 1);
}

/* A file of the member's own, mapped and cut: its fault is the application's. */
static int own_fault(void)
{
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/t-own-%d", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 3 * 4096) != 0)
        return -1;
    volatile unsigned char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unlink(path);
    if (m == MAP_FAILED || ftruncate(fd, 4096) != 0)
        return -1;
    if (sigsetjmp(escape, 1) == 0)
        (void)m[2 * 4096];
    return app_faults;
}

/* Up to four calls until one says ECORRUPT and names the fleet's file: 1, else 0. */
#define SEES_CORRUPT(call, name)                                                                   \
    ({                                                                                             \
        int seen_ = 0;                                                                             \
        for (int try_ = 0; try_ < 4 && !seen_; try_++) {                                           \
            long rc_ = (long)(call);                                                               \
            seen_ = rc_ == -ORBIT_ECORRUPT && strstr(orbit_last_error(), name) != NULL;            \
        }                                                                                          \
        seen_;                                                                                     \
    })

/* The member: tables in use, then the files are cut under it (go), then every handle answers. */
static int member(const char *name, struct tu_gate *ready, struct tu_gate *go)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = app_handler;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGBUS, &sa, NULL) != 0)   /* the application's, before orbit maps anything */
        return 10;
    struct orbit_fleet *f = tu_join(name, 4, 0, 0, ORBIT_BACKING_SHM);
    struct orbit_pool *pool;
    struct orbit_streams *streams;
    struct orbit_admission *adm;
    struct orbit_endpoint *a, *b;
    struct orbit_ticket t;
    orbit_id id;
    orbit_key key = { .lo = 1, .hi = 2 };
    if (orbit_pool_open(f, NULL, &pool) || orbit_pool_register(pool, key, 4, &id) ||
        orbit_streams_open(f, NULL, &streams) || orbit_streams_create(streams, &a, &t) ||
        orbit_streams_open_ticket(streams, &t, &b) || orbit_admission_open(f, NULL, &adm) ||
        orbit_admission_set_capacity(adm, 1, 10))
        return 11;
    tu_gate_open(ready, 1);
    tu_gate_pass(go);
    char file[128];
    snprintf(file, sizeof file, "/orbit.%s.", name);
    struct orbit_lease lease;
    struct orbit_node_info nodes[4];
    char byte[1];
    int pool_ok = SEES_CORRUPT(orbit_pool_reserve(pool, id, &lease), file);
    int stream_ok = SEES_CORRUPT(orbit_endpoint_try_write(a, "x", 1), file);
    int read_ok = SEES_CORRUPT(orbit_endpoint_try_read(b, byte, 1), file);
    int adm_ok = SEES_CORRUPT(orbit_admission_set_capacity(adm, 1, 20), file);
    int fleet_ok = SEES_CORRUPT(orbit_fleet_nodes(f, nodes, 4), file);
    int before = app_faults;   /* orbit's faults never reached the application */
    int own = own_fault();
    orbit_endpoint_close(a);
    orbit_endpoint_close(b);
    orbit_streams_close(streams);
    orbit_pool_close(pool);
    orbit_admission_close(adm);
    orbit_fleet_leave(f);
    if (!pool_ok) return 20;
    if (!stream_ok) return 21;
    if (!read_ok) return 22;
    if (!adm_ok) return 23;
    if (!fleet_ok) return 24;
    if (before != 0) return 25;
    if (own != 1) return 26;
    return 0;
}

/* Start a command line, its output in out_path (no shell: a signal that kills it shows). */
static pid_t spawn(char *const argv[], const char *out_path)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return kid;
}

/* Run it to its end: its wait status. */
static int run(char *const argv[], const char *out_path)
{
    int st;
    waitpid(spawn(argv, out_path), &st, 0);
    return st;
}


static void cut(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "truncate -s 4096 /dev/shm/orbit.%s.[0-9]*[0-9]", name);
    ck_assert_int_eq(system(cmd), 0);
}

#define NOT_SIGNALED(st, what) \
    ck_assert_msg(!WIFSIGNALED(st), "%s died of signal %d", what, WIFSIGNALED(st) ? WTERMSIG(st) : 0)

START_TEST(a_truncated_fleet_gives_ecorrupt_to_member_and_tools)
{
    setenv("ORBIT_HUGETLB_DIR", "", 1);   /* /dev/shm: truncate -s 4096 is refused on hugetlbfs */
    const char *name = tu_fleet_name("cut");
    struct tu_gate ready, go;
    tu_gate_init(&ready);
    tu_gate_init(&go);
    fflush(NULL);
    pid_t m = fork();
    if (m == 0)
        _exit(member(name, &ready, &go));
    tu_gate_pass(&ready);
    /* top maps the fleet before the cut and reads it across it. */
    char top_out[64], out[64];
    snprintf(top_out, sizeof top_out, "/tmp/t-cut-top-%d", (int)getpid());
    snprintf(out, sizeof out, "/tmp/t-cut-out-%d", (int)getpid());
    char *top_argv[] = { (char *)orbitctl_bin(), "top", (char *)name, "--interval", "0.1", "--count", "12", NULL };
    pid_t top = spawn(top_argv, top_out);
    tu_sleep_ms(350);
    cut(name);
    tu_gate_open(&go, 1);
    ck_assert_int_eq(tu_wait_child(m, 20000), 0);
    int st;
    ck_assert_int_eq(waitpid(top, &st, 0), top);
    NOT_SIGNALED(st, "orbitctl top");
    ck_assert_msg(tu_file_has(top_out, "orbit top"), "top never drew");

    /* Opened after the cut: the size check at open refuses it, naming the file. */
    char *show[] = { (char *)orbitctl_bin(), "show", (char *)name, NULL };
    st = run(show, out);
    NOT_SIGNALED(st, "orbitctl show");
    ck_assert_msg(WEXITSTATUS(st) != 0 && tu_file_has(out, "corrupt"), "orbitctl show of a truncated fleet");
    char *metrics[] = { (char *)orbitctl_bin(), "metrics", (char *)name, NULL };
    st = run(metrics, out);
    NOT_SIGNALED(st, "orbitctl metrics");
    char up0[160];
    snprintf(up0, sizeof up0, "orbit_fleet_up{fleet=\"%s\",generation=\"1\"} 0", name);
    ck_assert_msg(tu_file_has(out, up0), "metrics does not say %s", up0);
    char *ls[] = { (char *)orbitctl_bin(), "ls", NULL };
    st = run(ls, out);
    NOT_SIGNALED(st, "orbitctl ls");
    unlink(top_out);
    unlink(out);
    orbit_fleet_unlink(name);
    tu_gate_close(&ready);
    tu_gate_close(&go);
}
END_TEST

/* The reaper as a daemon watches a fleet cut under it and another one: it lives and keeps reaping. */
START_TEST(the_reaper_survives_a_truncated_fleet_and_keeps_reaping)
{
    setenv("ORBIT_HUGETLB_DIR", "", 1);
    char victim[80], other[80];
    snprintf(victim, sizeof victim, "%s", tu_fleet_name("cutr"));
    snprintf(other, sizeof other, "%s", tu_fleet_name("cuto"));
    struct orbit_fleet *vf = tu_join(victim, 4, 0, 0, ORBIT_BACKING_SHM);
    struct orbit_fleet *of = tu_join(other, 4, 0, 0, ORBIT_BACKING_SHM);
    struct orbit_pool *vp;
    ck_assert_int_eq(orbit_pool_open(vf, NULL, &vp), 0);   /* a table for the reaper to account */
    struct tu_gate joined;
    tu_gate_init(&joined);
    fflush(NULL);
    pid_t doomed = fork();   /* a member of the other fleet, killed once the victim is cut */
    if (doomed == 0) {
        struct orbit_fleet *g = tu_join(other, 4, 1, 0, ORBIT_BACKING_SHM);
        (void)g;
        tu_gate_open(&joined, 1);
        pause();
        _exit(0);
    }
    tu_gate_pass(&joined);
    char log[64];
    snprintf(log, sizeof log, "/tmp/t-cut-reaper-%d", (int)getpid());
    char *reaper_argv[] = { (char *)reaper_bin(), "--fleet", victim, "--fleet", other, "--backend", "pidfd",
                            "--interval", "20", NULL };
    pid_t reaper = spawn(reaper_argv, log);
    for (int i = 0; i < 200 && !tu_file_has(log, "\"event\":\"start\""); i++)
        tu_sleep_ms(10);
    ck_assert(tu_file_has(log, "\"event\":\"start\""));
    tu_sleep_ms(100);   /* a few re-reads with the victim mapped */
    cut(victim);
    tu_sleep_ms(300);   /* re-reads across the cut */
    ck_assert_msg(kill(reaper, 0) == 0 && waitpid(reaper, NULL, WNOHANG) == 0, "the reaper is gone");
    kill(doomed, SIGKILL);
    waitpid(doomed, NULL, 0);
    char death[160];
    snprintf(death, sizeof death, "\"fleet\":\"%s\"", other);
    bool reaped = false;
    for (int i = 0; i < 300 && !reaped; i++) {
        reaped = tu_file_has(log, "\"event\":\"death\"") && tu_file_has(log, death);
        if (!reaped)
            tu_sleep_ms(10);
    }
    ck_assert_msg(reaped, "the reaper did not reclaim the other fleet's death");
    kill(reaper, SIGTERM);
    int st;
    ck_assert_int_eq(waitpid(reaper, &st, 0), reaper);
    NOT_SIGNALED(st, "orbit-reaper");
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    /* This process mapped the victim too: its handles answer, it does not die. */
    struct orbit_node_info nodes[4];
    ck_assert(SEES_CORRUPT(orbit_fleet_nodes(vf, nodes, 4), victim));
    /* A record read one at a time too (the reaper's way): the guard's zeros are no FREE record. */
    struct orbit_node_snapshot snap;
    ck_assert(SEES_CORRUPT(orbit_fleet_node_snapshot(vf, 1, &snap), victim));
    orbit_pool_close(vp);
    orbit_fleet_leave(vf);
    orbit_fleet_leave(of);
    orbit_fleet_unlink(victim);
    orbit_fleet_unlink(other);
    unlink(log);
    tu_gate_close(&joined);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("truncated");
    TCase *tc = tcase_create("truncated");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_truncated_fleet_gives_ecorrupt_to_member_and_tools);
    tcase_add_test(tc, the_reaper_survives_a_truncated_fleet_and_keeps_reaping);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
