/* SPDX-License-Identifier: MIT */
/*
 * A hostile neighbour cannot stop, stall or exhaust the root reaper (issue
 * 34). A real `orbit-reaper --all` (and --gc), run as the shipped unit runs
 * it (root, --backend auto; and pidfd) under `prlimit --nofile=1024`, while another
 * user (`setpriv --reuid 65534 --regid 65534 --clear-groups`) forges 4,000
 * live nodes in a fleet of its own, kept "alive" by one OFD lock over their
 * life bytes, and plants segments that stay half-created (not ready, the
 * creator-lock byte held): a fleet segment, and a pool table in another of
 * its fleets; and, once the reaper has it mapped, truncates a fleet of its
 * own (its fleet segment and pool table, to 4 KiB) under it. Meanwhile a
 * victim fleet's members are killed -9 one after the other: the reaper must
 * report every death, within 100 ms as a rule (90 % of them; each within
 * 1 s), stay up (the truncation's SIGBUS is liborbit's guard's to answer:
 * -ORBIT_ECORRUPT, a fault quarantine, never a signal), and log the hostile
 * fleets' quarantines; then the forger dies, and its 4,000 forged lives are
 * reclaimed too while the victim's deaths keep their time.
 *
 * Everything runs in a private mount namespace with its own /dev/shm and
 * hugetlbfs, so --all sees this test's fleets only. Root only (77 otherwise).
 */
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include "death_util.h"
#include "ns.h"

#define NOBODY       "65534"
#define FORGED       4000
#define VICTIMS      10           /* members killed per round */
#define BOUND_MS     100          /* a victim's kill -9 reported within this, as a rule */
#define LATE_MS      1000         /* and every one within this */
#define LINE_MAX_LEN 8192

/* ---- processes ------------------------------------------------------------ */

struct proc { pid_t pid; int in, out; char buf[65536]; size_t len; char seen[8192]; };

/* Run argv with a pipe on its stdin (closed: it ends) and one on its stdout. */
static struct proc spawn(const char *const *argv)
{
    int in[2], out[2];
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    return (struct proc){ .pid = pid, .in = in[1], .out = out[0] };
}

/* The next line of p's output containing want, within ms (NULL on timeout or EOF). */
static const char *line_with(struct proc *p, const char *want, int ms, char *line, size_t cap)
{
    int64_t end = tu_now_ns() + (int64_t)ms * 1000000;
    for (;;) {
        char *nl;
        while ((nl = memchr(p->buf, '\n', p->len))) {
            size_t n = (size_t)(nl - p->buf);
            snprintf(line, cap, "%.*s", (int)(n < cap ? n : cap - 1), p->buf);
            memmove(p->buf, nl + 1, p->len - n - 1);
            p->len -= n + 1;
            if (strstr(line, "\"event\":\"quarantine") && strlen(p->seen) + strlen(line) + 2 < sizeof p->seen)
                strcat(strcat(p->seen, line), "\n");   /* kept: they come in any order */
            if (strstr(line, want))
                return line;
        }
        int left = (int)((end - tu_now_ns()) / 1000000);
        struct pollfd pfd = { .fd = p->out, .events = POLLIN };
        if (left <= 0 || poll(&pfd, 1, left) != 1)
            return NULL;
        ssize_t got = read(p->out, p->buf + p->len, sizeof p->buf - p->len);
        if (got <= 0)
            return NULL;
        p->len += (size_t)got;
    }
}

static struct proc attacker(const char *hostile, const char *verb, const char *fleet, const char *arg)
{
    const char *argv[] = { "setpriv", "--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", hostile, verb,
                           fleet, arg, NULL };
    struct proc p = spawn(argv);
    char line[256];
    ck_assert_msg(line_with(&p, "ready", 20000, line, sizeof line), "hostile_fleet %s %s did not get ready",
                  verb, fleet);
    return p;
}

static void end_proc(struct proc *p, int sig)
{
    kill(p->pid, sig);
    tu_wait_child(p->pid, 10000);
    close(p->in);
    close(p->out);
}

/* A quarantine line seen so far (or within ms) naming want. */
static const char *quarantined(struct proc *p, const char *want, int ms)
{
    char line[LINE_MAX_LEN];
    const char *at = strstr(p->seen, want);
    int64_t end = tu_now_ns() + (int64_t)ms * 1000000;
    while (!at && tu_now_ns() < end && line_with(p, "\"event\":\"quarantine", (int)((end - tu_now_ns()) / 1000000),
                                                  line, sizeof line))
        at = strstr(p->seen, want);
    return at;
}

/* ---- the victim ------------------------------------------------------------- */

/* A member of the victim fleet: joins, says so, waits to be killed. */
static pid_t victim(const char *fleet)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
        o.capacity = 64;
        struct orbit_fleet *f;
        char ok = orbit_fleet_join(fleet, &o, &f) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    ck_assert_int_eq(read(p[0], &ok, 1), 1);
    ck_assert_msg(ok == 'y', "a victim member could not join %s", fleet);
    close(p[0]);
    return pid;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * A round: VICTIMS members join (and are watched: the reaper re-reads every
 * 100 ms), then each is killed -9 in turn and its death line awaited.
 * Latencies (kill to the line) go to lat.
 */
static void victim_round(struct proc *reaper, const char *fleet, int64_t *lat)
{
    pid_t pid[VICTIMS];
    for (int i = 0; i < VICTIMS; i++)
        pid[i] = victim(fleet);
    usleep(400 * 1000);
    for (int i = 0; i < VICTIMS; i++) {
        char want[64], line[LINE_MAX_LEN];
        snprintf(want, sizeof want, "\"pid\":%d,", (int)pid[i]);
        int64_t t0 = tu_now_ns();
        kill(pid[i], SIGKILL);
        bool got = false;
        while (!got && line_with(reaper, "\"event\":\"death\"", LATE_MS * 5, line, sizeof line))
            got = strstr(line, want) && strstr(line, fleet);
        lat[i] = tu_now_ns() - t0;
        ck_assert_msg(got, "the reaper did not report victim pid %d (%s)", (int)pid[i], fleet);
        tu_wait_child(pid[i], 10000);
        usleep(20 * 1000);
    }
}

static void check_latency(const char *what, int64_t *lat, int n)
{
    qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
    int within = 0;
    for (int i = 0; i < n; i++)
        within += lat[i] < (int64_t)BOUND_MS * 1000000;
    printf("hostile %s: kill -9 -> death line p50 %.1f ms, p90 %.1f ms, max %.1f ms; %d of %d within %d ms\n",
           what, (double)lat[n / 2] / 1e6, (double)lat[n * 9 / 10] / 1e6, (double)lat[n - 1] / 1e6, within, n,
           BOUND_MS);
    ck_assert_msg(within * 10 >= n * 9, "%s: only %d of %d victim deaths within %d ms", what, within, n, BOUND_MS);
    ck_assert_msg(lat[n - 1] < (int64_t)LATE_MS * 1000000, "%s: a victim death took %lld ms", what,
                  (long long)(lat[n - 1] / 1000000));
}

/* Claimed nodes of a fleet, as the kernel's locks and the records say. */
static ssize_t claimed(const char *fleet)
{
    struct orbit_fleet *f;
    if (orbit_fleet_observe(fleet, &f) != 0)
        return -1;
    ssize_t n = orbit_fleet_nodes(f, NULL, 0);
    orbit_fleet_leave(f);
    return n;
}

static void under_attack(const char *backend)
{
    const char *hostile = getenv("ORBIT_HOSTILE_BIN"), *bin = getenv("ORBIT_REAPER_BIN");
    ck_assert_ptr_nonnull(hostile);
    ck_assert_ptr_nonnull(bin);
    char forged[64], half[64], table[64], cut[64], victim_fleet[64];
    snprintf(forged, sizeof forged, "%s", tu_fleet_name("atk"));
    snprintf(cut, sizeof cut, "%s", tu_fleet_name("atkcut"));
    snprintf(half, sizeof half, "%s", tu_fleet_name("atkhalf"));
    snprintf(table, sizeof table, "%s", tu_fleet_name("atktable"));
    snprintf(victim_fleet, sizeof victim_fleet, "%s", tu_fleet_name("victim"));
    char nodes[16];
    snprintf(nodes, sizeof nodes, "%d", FORGED);
    struct proc forger = attacker(hostile, "forge", forged, nodes);
    struct proc planter = attacker(hostile, "plant", half, "255");
    struct proc tabler = attacker(hostile, "plant", table, "247");
    struct proc cutter = attacker(hostile, "truncate", cut, "4096");

    /* --gc too: its passes look at every fleet, the half-created one included, off the event loop. */
    const char *argv[] = { "prlimit", "--nofile=1024", bin, "--all", "--backend", backend, "--gc", "3600", NULL };
    struct proc reaper = spawn(argv);
    char line[LINE_MAX_LEN], want[160];
    ck_assert_msg(line_with(&reaper, "\"event\":\"start\"", 20000, line, sizeof line), "orbit-reaper did not start");
    ck_assert_msg(strstr(line, "\"descriptor_budget\":928"), "the budget is RLIMIT_NOFILE 1024 less 96: %s", line);
    snprintf(want, sizeof want, "\"fleet\":\"%s\",\"reason\":\"members\",\"owner\":65534,\"wanted\":\"4000\"",
             forged);
    ck_assert_msg(quarantined(&reaper, want, 10000), "no quarantine of the forged fleet: %s", reaper.seen);

    int64_t lat[3 * VICTIMS];
    victim_round(&reaper, victim_fleet, lat);
    snprintf(want, sizeof want, "\"fleet\":\"%s\",\"reason\":\"fault\",\"owner\":null", half);
    ck_assert_msg(quarantined(&reaper, want, 10000), "no quarantine of the half-created fleet: %s", reaper.seen);
    /* The reaper has read the cutter's fleet for a second now: its files shrink under its mappings. */
    ck_assert_int_eq(write(cutter.in, "cut\n", 4), 4);
    ck_assert_msg(line_with(&cutter, "cut ", 10000, line, sizeof line), "hostile_fleet truncate did not cut %s "
                  "(or its own handles did not read it as corrupt)", cut);
    victim_round(&reaper, victim_fleet, lat + VICTIMS);
    snprintf(want, sizeof want, "\"fleet\":\"%s\",\"reason\":\"fault\"", cut);
    const char *q = quarantined(&reaper, want, 10000);
    ck_assert_msg(q, "no fault quarantine of the truncated fleet: %s", reaper.seen);
    const char *q_end = strchr(q, '\n'), *corrupt = strstr(q, "\"error\":\"corrupt");
    ck_assert_msg(corrupt && corrupt < q_end, "the truncated fleet's quarantine names no corruption: %.*s",
                  (int)(q_end - q), q);

    /* The forger dies: 4,000 forged lives end at once, and are reported like any death (quarantine
     * is not abandon), while the victim's deaths keep their time. */
    end_proc(&forger, SIGKILL);
    int64_t t0 = tu_now_ns();
    victim_round(&reaper, victim_fleet, lat + 2 * VICTIMS);
    /* Each report of that fleet wakes its 4,096 doorbells: they take a while, on its threads alone. */
    ssize_t left = claimed(forged);
    while (left > FORGED - 100 && tu_now_ns() - t0 < 20000000000LL) {
        usleep(100 * 1000);
        left = claimed(forged);
    }
    ck_assert_msg(left >= 0 && left <= FORGED - 100, "the forged fleet's dead lives are not being reclaimed "
                  "(%zd of %d still claimed)", left, FORGED + 1);
    printf("hostile %s: %zd of the %d forged lives reclaimed %.1f s after the forger died\n", backend,
           (ssize_t)FORGED + 1 - left, FORGED, (double)(tu_now_ns() - t0) / 1e9);
    for (int r = 0; r < 3; r++) {
        int64_t v[VICTIMS];
        memcpy(v, lat + r * VICTIMS, sizeof v);
        qsort(v, VICTIMS, sizeof *v, cmp_i64);
        printf("hostile %s: round %d: p50 %.1f ms, max %.1f ms\n", backend, r, (double)v[VICTIMS / 2] / 1e6,
               (double)v[VICTIMS - 1] / 1e6);
    }
    check_latency(backend, lat, 3 * VICTIMS);

    int status;
    ck_assert_msg(waitpid(reaper.pid, &status, WNOHANG) == 0, "orbit-reaper exited under attack");
    kill(reaper.pid, SIGTERM);
    ck_assert_msg(line_with(&reaper, "\"event\":\"stop\"", 20000, line, sizeof line), "no stop line");
    ck_assert_msg(strstr(line, "\"reason\":\"SIGTERM\""), "%s", line);
    printf("hostile %s: %s\n", backend, line);
    ck_assert_int_eq(tu_wait_child(reaper.pid, 20000), 0);
    close(reaper.in);
    close(reaper.out);
    end_proc(&planter, SIGKILL);
    end_proc(&tabler, SIGKILL);
    end_proc(&cutter, SIGKILL);
    const char *fleets[] = { forged, half, table, cut, victim_fleet };
    for (size_t i = 0; i < sizeof fleets / sizeof fleets[0]; i++)
        orbit_fleet_unlink(fleets[i]);
}

/*
 * Each bound refuses what would break it, not the reaper: 1,100 forged nodes
 * naming a live process the reaper sees (a pidfd each under the pidfd
 * backend: more than RLIMIT_NOFILE 1024 allows) are quarantined for their
 * descriptors, and a 64-node fleet whose segment is 1 GiB (well formed, and
 * mapped whole by whoever opens it) for the bytes it maps; victims go on
 * being reported. On main the reaper runs out of descriptors and exits.
 */
START_TEST(each_bound_quarantines_the_fleet_that_breaks_it)
{
    const char *hostile = getenv("ORBIT_HOSTILE_BIN"), *bin = getenv("ORBIT_REAPER_BIN");
    ck_assert_ptr_nonnull(hostile);
    ck_assert_ptr_nonnull(bin);
    char seen[64], big[64], victim_fleet[64];
    snprintf(seen, sizeof seen, "%s", tu_fleet_name("atkseen"));
    snprintf(big, sizeof big, "%s", tu_fleet_name("atkbig"));
    snprintf(victim_fleet, sizeof victim_fleet, "%s", tu_fleet_name("victim"));
    const char *forge[] = { "setpriv", "--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", hostile, "forge", seen,
                            "1100", "one", "visible", NULL };
    struct proc forger = spawn(forge);
    char line[LINE_MAX_LEN], want[160];
    ck_assert_msg(line_with(&forger, "ready", 20000, line, sizeof line), "hostile_fleet forge visible: not ready");
    struct proc grower = attacker(hostile, "grow", big, "1073741824");

    const char *argv[] = { "prlimit", "--nofile=1024", bin, "--all", "--backend", "pidfd", NULL };
    struct proc reaper = spawn(argv);
    ck_assert_msg(line_with(&reaper, "\"event\":\"start\"", 20000, line, sizeof line), "orbit-reaper did not start");
    snprintf(want, sizeof want, "\"fleet\":\"%s\",\"reason\":\"descriptors\",\"owner\":65534", seen);
    ck_assert_msg(quarantined(&reaper, want, 10000), "no quarantine of the fleet of 1,100 seen nodes: %s", reaper.seen);
    snprintf(want, sizeof want, "\"fleet\":\"%s\",\"reason\":\"mapped\",\"owner\":65534", big);
    ck_assert_msg(quarantined(&reaper, want, 10000), "no quarantine of the 1 GiB fleet: %s", reaper.seen);
    int64_t lat[VICTIMS];
    victim_round(&reaper, victim_fleet, lat);
    check_latency("bounds (pidfd)", lat, VICTIMS);
    int status;
    ck_assert_msg(waitpid(reaper.pid, &status, WNOHANG) == 0, "orbit-reaper exited");
    kill(reaper.pid, SIGTERM);
    ck_assert_msg(line_with(&reaper, "\"event\":\"stop\"", 20000, line, sizeof line), "no stop line");
    ck_assert_msg(strstr(line, "\"reason\":\"SIGTERM\"") && strstr(line, "\"quarantined\":2"), "%s", line);
    printf("hostile bounds: %s\n", line);
    ck_assert_int_eq(tu_wait_child(reaper.pid, 20000), 0);
    close(reaper.in);
    close(reaper.out);
    end_proc(&forger, SIGKILL);
    end_proc(&grower, SIGKILL);
    const char *fleets[] = { seen, big, victim_fleet };
    for (size_t i = 0; i < sizeof fleets / sizeof fleets[0]; i++)
        orbit_fleet_unlink(fleets[i]);
}
END_TEST

START_TEST(the_root_reaper_keeps_reclaiming_beside_a_hostile_neighbour)
{
    under_attack(_i == 0 ? "auto" : "pidfd");
}
END_TEST

int main(void)
{
    const char *why = geteuid() != 0 ? "not root" : NULL;
    if (!why && (system("setpriv --help >/dev/null 2>&1") != 0 || system("prlimit --help >/dev/null 2>&1") != 0))
        why = "setpriv or prlimit missing (util-linux)";
    if (!why)
        why = tn_private_shm();   /* its own /dev/shm and hugetlbfs: --all sees this test's fleets only */
    if (why) {
        printf("skipped: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("reaper_hostile");
    TCase *tc = tcase_create("reaper_hostile");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, the_root_reaper_keeps_reclaiming_beside_a_hostile_neighbour, 0, 2);
    tcase_add_test(tc, each_bound_quarantines_the_fleet_that_breaks_it);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
