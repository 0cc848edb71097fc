/* SPDX-License-Identifier: MIT */
/*
 * orbit-reaper - the death-report daemon: watches fleets, reclaims the share
 * of every member that dies, and logs each death as one JSON line.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <orbit/reaper.h>
#ifdef ORB_REAPER_HAVE_BPF
#include <bpf/libbpf.h>
#endif
#include "cli.h"
#include "gc.h"
#include "metrics_http.h"

#define TOOL "orbit-reaper"

static const char usage[] =
"usage: orbit-reaper (--fleet NAME... | --all) [options]\n"
"\n"
"Watches the members of orbit fleets. When one dies (kill -9 included), its\n"
"share of every table of its fleet is reclaimed: pool resources, reservations\n"
"and creation claims, stream sides (a parked peer wakes with an error) and\n"
"admission claims; then its node is freed. Each death is logged to stdout as\n"
"one JSON line; a start and a stop line frame the run. Each fleet is handled\n"
"on its own: a report that must wait for a table lock a live member holds is\n"
"logged as deferred and retried, and delays no other fleet. SIGTERM or SIGINT\n"
"stop it cleanly.\n"
"\n"
"Members are judged alive by the lock the kernel holds for each member's life,\n"
"so the reaper may run in the host's pid namespace or in any member's: the\n"
"backend watches the members it can see (its own pid namespace, shown by its\n"
"/proc), and every other one is watched through that lock.\n"
"\n"
"Each fleet has a thread of its own and a share of the reaper's budgets\n"
"(descriptors from RLIMIT_NOFILE, threads, bytes mapped): a fleet that would\n"
"break a bound, or cannot be read, is quarantined (one JSON line) and tested on\n"
"each re-read, so no fleet can stop or stall the reaper or another fleet.\n"
"\n"
"  -f, --fleet NAME       watch this fleet (repeatable; it may appear later): every\n"
"                         generation of it this reaper's library reads (NAME@N:\n"
"                         that generation only)\n"
"  -a, --all              watch every fleet on this host, as they come and go\n"
"  -b, --backend KIND     auto (default: BPF when it loads, else pidfd), bpf, pidfd\n"
"  -i, --interval MS      membership re-read period (default 100)\n"
"  -n, --no-account       do not count what each death gave back (faster)\n"
"  -g, --gc SECONDS       remove a watched fleet once no member has lived in it\n"
"                         for SECONDS (orbit_fleet_collect; logged as collected)\n"
"  -m, --metrics HOST:PORT\n"
"                         serve the watched fleets' counters and gauges, and the\n"
"                         reaper's own, at http://HOST:PORT/metrics (Prometheus text\n"
"                         format 0.0.4); :PORT listens on every IPv4 interface,\n"
"                         [::1]:PORT on IPv6, PORT 0 on a free port (the start line\n"
"                         says which)\n"
"  -v, --verbose          forward libbpf's log to stderr (why a BPF load failed)\n"
"  -h, --help             this text\n"
"  -V, --version          print the version\n"
"\n"
"Examples:\n"
"  orbit-reaper --all                       every fleet on this host (the systemd unit)\n"
"  orbit-reaper -f web -f batch -b pidfd    two fleets, without BPF\n"
"  orbit-reaper --all --gc 600              and remove fleets empty for 10 minutes\n"
"  orbit-reaper --all -m 127.0.0.1:9464     and let Prometheus scrape them\n"
"\n"
"Exit status: 0 after a clean stop, 1 on an error, 2 on a bad argument.\n";

struct opts {
    const char **fleets;
    int n_fleets;
    bool all, account;
    enum orbit_reaper_backend backend;
    int interval_ms;
    int gc_seconds;              /* 0: no --gc */
    bool verbose;
    const char *metrics;         /* --metrics HOST:PORT as given; NULL: none */
    struct metrics_addr metrics_addr;
};

static struct metrics_http *metrics;   /* --metrics: its server thread */
static char metrics_bound[96];         /* the address it listens on */

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* "time":"2025-01-31T12:00:00.123Z" */
static void json_time(void)
{
    struct timespec ts;
    struct tm tm;
    char buf[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    printf("\"time\":\"%s.%03ldZ\"", buf, ts.tv_nsec / 1000000);
}

/* One JSON line, written whole: --gc logs from a thread of its own. {"time":...,"event":"EVENT" */
static void line_begin(const char *event)
{
    flockfile(stdout);
    putchar('{');
    json_time();
    printf(",\"event\":\"%s\"", event);
}

static void line_end(void)
{
    printf("}\n");
    fflush(stdout);
    funlockfile(stdout);
}

/* Why a death has no exit status: only a parent (or a kernel that reaped it, 6.15+) knows it. */
static const char *status_unknown(const struct orbit_reaper_death *d)
{
    if (d->source == ORBIT_REAPER_FOUND_DEAD)
        return "found dead on a re-read: no exit event";
    if (!d->exit_ns)
        return "watched through its life lock (another pid namespace or hidden): no exit event";
    return "not our child: its parent has not reaped it yet";
}

static void json_status(const struct orbit_reaper_death *d)
{
    int status = d->status;
    if (status < 0) {
        printf(",\"status\":null,\"exit_code\":null,\"signal\":null,\"exit_code_unknown\":");
        json_str(status_unknown(d));
    }
    else if (WIFSIGNALED(status))
        printf(",\"status\":%d,\"exit_code\":null,\"signal\":%d", status, WTERMSIG(status));
    else
        printf(",\"status\":%d,\"exit_code\":%d,\"signal\":null", status, WEXITSTATUS(status));
}

static void json_reclaimed(const struct orbit_reaper_reclaim *c)
{
    printf(",\"reclaimed\":{\"tables\":%u,\"pool\":{\"resources\":%u,\"units\":" CLI_JSON_U64
           ",\"leases\":" CLI_JSON_U64 ",\"creating\":" CLI_JSON_U64 "},\"streams\":{\"sides\":%u"
           ",\"unread_bytes\":" CLI_JSON_U64 "},\"admission\":{\"claims\":%u,\"units\":" CLI_JSON_U64 "}"
           ",\"arena\":{\"chunks\":%u,\"bytes\":" CLI_JSON_U64 "}}",
           c->tables, c->pool_resources, c->pool_units, c->pool_leases, c->pool_creating,
           c->stream_sides, c->stream_unread, c->admission_claims, c->admission_units, c->arena_chunks,
           c->arena_bytes);
}

static void log_death(void *ctx, const struct orbit_reaper_death *d)
{
    (void)ctx;
    line_begin("death");
    printf(",\"fleet\":");
    json_str(d->fleet);
    printf(",\"node\":%u,\"pid\":%d,\"start_time\":" CLI_JSON_U64 ",\"incarnation\":" CLI_JSON_U64,
           d->node, d->pid, d->start_time, d->incarnation);
    json_status(d);
    printf(",\"backend\":\"%s\",\"source\":\"%s\"", orbit_reaper_backend_name(d->backend),
           d->source == ORBIT_REAPER_EXIT_EVENT ? "exit" : "found-dead");
    if (d->exit_ns && d->reclaimed_ns >= d->exit_ns)
        printf(",\"exit_to_reclaim_us\":" CLI_JSON_U64, (d->reclaimed_ns - d->exit_ns) / 1000);
    else
        printf(",\"exit_to_reclaim_us\":null");
    printf(",\"detect_to_reclaim_us\":" CLI_JSON_U64 ",\"attempts\":%u",
           (d->reclaimed_ns - d->detected_ns) / 1000, d->attempts);
    if (d->accounted)
        json_reclaimed(&d->reclaimed);
    line_end();
}

/* A report that could not finish yet (a table lock held past its bound): it is tried again. */
static void log_deferral(void *ctx, const struct orbit_reaper_deferral *d)
{
    (void)ctx;
    line_begin("deferred");
    printf(",\"fleet\":");
    json_str(d->fleet);
    printf(",\"node\":%u,\"pid\":%d,\"start_time\":" CLI_JSON_U64 ",\"incarnation\":" CLI_JSON_U64
           ",\"death\":%s,\"error\":", d->node, d->pid, d->start_time, d->incarnation,
           d->death ? "true" : "false");
    json_str(orbit_strerror(d->error));
    printf(",\"attempts\":%u,\"will_retry\":true,\"retry_in_ms\":%u,\"detect_to_now_us\":" CLI_JSON_U64,
           d->attempts, d->retry_ms, (d->deferred_ns - d->detected_ns) / 1000);
    line_end();
}

static void log_start(struct orbit_reaper *r, const struct opts *o)
{
    line_begin("start");
    printf(",\"pid\":%d,\"backend\":\"%s\",\"note\":", (int)getpid(),
           orbit_reaper_backend_name(orbit_reaper_backend(r)));
    json_str(orbit_reaper_note(r));
    printf(",\"all\":%s,\"fleets\":[", o->all ? "true" : "false");
    for (int i = 0; i < o->n_fleets; i++) {
        if (i)
            putchar(',');
        json_str(o->fleets[i]);
    }
    struct orbit_reaper_stats st;
    orbit_reaper_stats(r, &st);
    printf("],\"gc_seconds\":%d,\"descriptor_budget\":%u,\"metrics\":", o->gc_seconds, st.descriptor_budget);
    if (metrics)
        json_str(metrics_bound);
    else
        printf("null");
    line_end();
}

static void log_stop(struct orbit_reaper *r, const char *why)
{
    struct orbit_reaper_stats s;
    orbit_reaper_stats(r, &s);
    line_begin("stop");
    printf(",\"reason\":\"%s\",\"deaths\":" CLI_JSON_U64 ",\"events\":" CLI_JSON_U64
           ",\"ignored\":" CLI_JSON_U64 ",\"drops\":" CLI_JSON_U64 ",\"fleets\":%u,\"watched\":%u"
           ",\"quarantines\":" CLI_JSON_U64 ",\"quarantined\":%u,\"descriptors\":%u,\"descriptor_budget\":%u",
           why, s.deaths, s.events, s.ignored, s.drops, s.fleets, s.watched, s.quarantines, s.quarantined,
           s.descriptors, s.descriptor_budget);
    line_end();
}

/* A fleet put in quarantine (it broke a bound, or cannot be read) or released from it. */
static void log_quarantine(void *ctx, const struct orbit_reaper_quarantine *q)
{
    (void)ctx;
    line_begin(q->released ? "quarantine-released" : "quarantine");
    printf(",\"fleet\":");
    json_str(q->fleet);
    printf(",\"reason\":\"%s\",\"owner\":", orbit_reaper_quarantine_reason_name(q->reason));
    if (q->owner >= 0)
        printf("%lld", (long long)q->owner);
    else
        printf("null");
    printf(",\"wanted\":" CLI_JSON_U64 ",\"bound\":" CLI_JSON_U64 ",\"error\":", q->wanted, q->bound);
    if (q->error)
        json_str(orbit_strerror(q->error));
    else
        printf("null");
    printf(",\"detail\":");
    json_str(q->detail);
    line_end();
    if (metrics)
        metrics_http_quarantine(metrics, q->fleet, q->released ? NULL :
                                orbit_reaper_quarantine_reason_name(q->reason));
}

/* --gc: a fleet removed (rc 0), or one whose removal was refused (someone joined meanwhile). */
static void log_collected(const char *fleet, uint64_t empty_ms, int rc)
{
    line_begin(rc == 0 ? "collected" : "collect-refused");
    printf(",\"fleet\":");
    json_str(fleet);
    printf(",\"empty_ms\":" CLI_JSON_U64 ",\"error\":", empty_ms);
    if (rc == 0)
        printf("null");
    else
        json_str(orbit_strerror(rc));
    line_end();
}

static enum orbit_reaper_backend parse_backend(const char *s)
{
    if (strcmp(s, "auto") == 0) return ORBIT_REAPER_AUTO;
    if (strcmp(s, "bpf") == 0) return ORBIT_REAPER_BPF;
    if (strcmp(s, "pidfd") == 0) return ORBIT_REAPER_PIDFD;
    cli_bad(TOOL, "--backend", s, "not one of auto, bpf, pidfd");
}

/* Returns 0 to run, 1 after --help or --version; a bad argument exits 2 (cli.h). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        { "fleet", required_argument, 0, 'f' }, { "all", no_argument, 0, 'a' },
        { "backend", required_argument, 0, 'b' }, { "interval", required_argument, 0, 'i' },
        { "no-account", no_argument, 0, 'n' }, { "verbose", no_argument, 0, 'v' },
        { "gc", required_argument, 0, 'g' }, { "metrics", required_argument, 0, 'm' },
        { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
    };
    o->fleets = calloc((size_t)argc, sizeof *o->fleets);
    if (!o->fleets)
        return 2;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:ab:i:g:m:nvhV", longs, NULL)) != -1) {
        switch (c) {
        case 'f': o->fleets[o->n_fleets++] = cli_fleet_name(TOOL, "--fleet", optarg); break;
        case 'a': o->all = true; break;
        case 'n': o->account = false; break;
        case 'v': o->verbose = true; break;
        case 'h': fputs(usage, stdout); return 1;
        case 'V': cli_version(TOOL); return 1;
        case 'b': o->backend = parse_backend(optarg); break;
        case 'i': o->interval_ms = cli_int(TOOL, "--interval", optarg, 1, 60000); break;
        case 'g': o->gc_seconds = cli_int(TOOL, "--gc", optarg, 1, 31536000); break;
        case 'm': {
            const char *why;
            if (metrics_addr_parse(optarg, &o->metrics_addr, &why) < 0)
                cli_bad(TOOL, "--metrics", optarg, why);
            o->metrics = optarg;
            break;
        }
        default: cli_getopt_error(TOOL, c, optopt, argv[optind - 1]);
        }
    }
    if (optind < argc)
        cli_bad(TOOL, "argument", argv[optind], "orbit-reaper takes options only");
    if ((o->n_fleets == 0) == !o->all)
        cli_usage_error(TOOL, "give --fleet NAME (one or more) or --all");
    return 0;
}

#ifdef ORB_REAPER_HAVE_BPF
/* -v: every libbpf message, debug level included, on stderr. */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    return vfprintf(stderr, fmt, ap);
}
#endif

/* -v: libbpf's log on stderr, also while liborbit-reaper loads its program (the
 * library keeps libbpf quiet then unless ORBIT_REAPER_DEBUG is set). */
static void verbose_libbpf(void)
{
    setenv("ORBIT_REAPER_DEBUG", "1", 1);
#ifdef ORB_REAPER_HAVE_BPF
    libbpf_set_print(libbpf_log);
#else
    fprintf(stderr, "orbit-reaper: built without BPF: no libbpf log to show\n");
#endif
}

/*
 * The soft RLIMIT_NOFILE raised to the hard one (systemd's default is 1024 soft,
 * 524288 hard): liborbit-reaper sizes its descriptor budget from the soft
 * limit when the reaper is opened, so this comes first.
 */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int setup(struct orbit_reaper **out, const struct opts *o)
{
    struct orbit_reaper *r;
    raise_nofile();
    int rc = orbit_reaper_open(o->backend, &r);
    if (rc < 0) {
        fprintf(stderr, "orbit-reaper: cannot open the %s backend: %s\n",
                orbit_reaper_backend_name(o->backend), orbit_strerror(rc));
        return rc;
    }
    if ((rc = orbit_reaper_set_interval(r, o->interval_ms)) == 0)
        rc = orbit_reaper_on_death(r, log_death, NULL, o->account ? ORBIT_REAPER_ACCOUNT : 0);
    if (rc == 0)
        rc = orbit_reaper_on_deferral(r, log_deferral, NULL);
    if (rc == 0)
        rc = orbit_reaper_on_quarantine(r, log_quarantine, NULL);
    for (int i = 0; rc == 0 && i < o->n_fleets; i++)
        if ((rc = orbit_reaper_watch(r, o->fleets[i])) < 0)
            fprintf(stderr, "orbit-reaper: cannot watch %s: %s\n", o->fleets[i], orbit_strerror(rc));
    if (rc == 0 && o->all)
        rc = orbit_reaper_watch_all(r);
    if (rc < 0) {
        orbit_reaper_close(r);
        return rc;
    }
    if (*orbit_reaper_note(r))
        fprintf(stderr, "orbit-reaper: %s\n", orbit_reaper_note(r));
    *out = r;
    return 0;
}

/* Waits on the reaper's fd and a signalfd (--gc passes run on a thread of their own); returns the stop reason. */
static const char *run(struct orbit_reaper *r, int sigfd, const struct opts *o)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return "error";
    struct gc g = { .after_ns = (uint64_t)o->gc_seconds * 1000000000ull };
    if (g.after_ns && gc_start(&g, o->all ? NULL : o->fleets, o->all ? 0 : (size_t)o->n_fleets, log_collected) < 0) {
        close(ep);
        return "error";
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
    epoll_ctl(ep, EPOLL_CTL_ADD, orbit_reaper_fd(r), &ev);
    ev.data.u32 = 1;
    epoll_ctl(ep, EPOLL_CTL_ADD, sigfd, &ev);
    const char *why = NULL;
    while (!why) {
        struct epoll_event got[2];
        int n = epoll_wait(ep, got, 2, -1);
        if (n < 0 && errno != EINTR)
            why = "error";
        for (int i = 0; i < n && !why; i++) {
            if (got[i].data.u32 == 1) {
                struct signalfd_siginfo si;
                why = read(sigfd, &si, sizeof si) == (ssize_t)sizeof si && si.ssi_signo == SIGINT
                          ? "SIGINT" : "SIGTERM";
            } else {
                int rc = orbit_reaper_process(r, 0);
                if (metrics) {
                    struct orbit_reaper_stats st;
                    orbit_reaper_stats(r, &st);
                    metrics_http_stats(metrics, &st);
                }
                if (rc < 0 && rc != -EINTR) {
                    fprintf(stderr, "orbit-reaper: %s\n", orbit_strerror(rc));
                    why = "error";
                }
            }
        }
    }
    close(ep);
    gc_stop(&g);
    return why;
}

/* --metrics: the server thread starts with SIGTERM and SIGINT blocked (they stay the signalfd's). */
static int start_metrics(struct orbit_reaper *r, const struct opts *o)
{
    int rc = metrics_http_start(&o->metrics_addr, o->all ? NULL : o->fleets, o->all ? 0 : (size_t)o->n_fleets,
                                orbit_reaper_backend_name(orbit_reaper_backend(r)), &metrics, metrics_bound,
                                sizeof metrics_bound);
    if (rc < 0) {
        fprintf(stderr, "orbit-reaper: --metrics %s: cannot listen: %s\n", o->metrics, strerror(-rc));
        return rc;
    }
    struct orbit_reaper_stats st;
    orbit_reaper_stats(r, &st);
    metrics_http_stats(metrics, &st);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = { .backend = ORBIT_REAPER_AUTO, .interval_ms = 100, .account = true };
    int prc = parse_args(argc, argv, &o);
    if (prc != 0) {
        free(o.fleets);
        return prc == 1 ? 0 : 2;
    }
    if (o.verbose)
        verbose_libbpf();
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);   /* delivered through the signalfd only */
    int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
    struct orbit_reaper *r = NULL;
    if (sigfd < 0 || setup(&r, &o) < 0) {
        free(o.fleets);
        return 1;
    }
    if (o.metrics && start_metrics(r, &o) < 0) {
        orbit_reaper_close(r);
        free(o.fleets);
        return 1;
    }
    log_start(r, &o);
    const char *why = run(r, sigfd, &o);
    metrics_http_stop(metrics);
    log_stop(r, why);
    orbit_reaper_close(r);   /* detaches the BPF program, closes every pidfd */
    close(sigfd);
    free(o.fleets);
    return strncmp(why, "SIG", 3) == 0 ? 0 : 1;
}
