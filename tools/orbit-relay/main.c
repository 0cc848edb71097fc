/* SPDX-License-Identifier: MIT */
/* orbit-relay: the demo fleet's one binary and its modes. */
#include <errno.h>
#include <getopt.h>
#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "load.h"
#include "modes.h"
#include "relay.h"
#include "supervisor.h"

static const char usage[] =
"usage:\n"
"  orbit-relay --fleet NAME --listen [HOST:]PORT --upstream [HOST:]PORT [--workers N] [--upstreams U]\n"
"              [--self-reap] [--no-restart] [--max-head BYTES] [--max-body BYTES]\n"
"              [--header-timeout MS] [--idle-timeout MS] [--connect-timeout MS] [--response-timeout MS]\n"
"              [--drain-timeout MS] [--control PATH] [--upgrade]\n"
"      run a relay fleet: an HTTP/1.1 reverse proxy of N io_uring workers (default one per core,\n"
"      at least 2; each pinned to a CPU in turn, ORBIT_RELAY_NO_PIN=1 not) accepting on\n"
"      SO_REUSEPORT listeners (held by the supervisor, so a replacement worker takes over a dead\n"
"      one's accept queue) and sharing at most U upstream connections to the backend (default 32\n"
"      per worker) through the orbit pool, relaying remote leases through orbit streams. The\n"
"      supervisor reports each dead worker to the fleet itself.\n"
"      --self-reap: the supervisor also sweeps the fleet for other dead members.\n"
"      Bodies: up to 64 KiB are held and sent whole (a chunked one with its length); longer ones\n"
"      stream through to the worker's own upstream, a chunked one re-chunked (its trailers\n"
"      dropped), with no size limit by default. Limits: a head over --max-head (default 16384)\n"
"      gets 431, a body over --max-body (default: none) 413: from its Content-Length before it\n"
"      is read, or once a chunked body passes it. Timeouts in ms: header 10000 (408; also a\n"
"      stalled body), idle keep-alive 60000 (also a client not reading its response: cut),\n"
"      upstream connect 5000 and response 60000 (504; also between bytes of a response body:\n"
"      then the client's connection is cut).\n"
"      Interim responses: 100-continue is answered by the relay; 102, 103... go on to HTTP/1.1\n"
"      clients as they come (never to HTTP/1.0 ones).\n"
"      SIGTERM stops it gracefully: requests in flight are served, each connection is closed after\n"
"      its next response (Connection: close) or once idle 1 s, within --drain-timeout (5000 ms).\n"
"      Upgrade without a failed request: start the new binary with the same arguments and\n"
"      --upgrade. It takes the running relay's listening sockets from its control socket\n"
"      (--control, default /dev/shm/orbit-relay.NAME.ctl), starts its workers on them, and the\n"
"      running relay then stops gracefully and exits; if the new one fails to start, the running\n"
"      one carries on.\n"
"  orbit-relay --backend [HOST:]PORT\n"
"      a keep-alive HTTP/1.1 origin whose bodies are a function of the path\n"
"      (/size/N: N bytes, at most 1 MiB (1048576); any other path 32..2048 bytes).\n"
"  orbit-relay --load URL [--connections C] [--requests N] [--duration S] [--json]\n"
"      closed-loop load; every body is verified; prints p50/p99 latency and errors.\n"
"      It requests its own paths (/item/C/N, bodies of 32..2048 bytes): a URL with a path is refused.\n"
"  orbit-relay --stats FLEET [--json]\n"
"      the fleet's relay counters, each worker's io_uring features (on, off, env: turned off\n"
"      by ORBIT_RELAY_NO_{DEFER_TASKRUN,MULTISHOT,BUNDLE,DIRECT,ZC,BATCH,LINK,WAIT_PAST_SENDS,\n"
"      QUIET_WAIT,PIN,SPLICE,YIELD}=1,\n"
"      opt-in: on with ORBIT_RELAY_ZC=1, ORBIT_RELAY_BATCH=1 or ORBIT_RELAY_YIELD=1;\n"
"      ORBIT_RELAY_BATCH_{NR,US} and ORBIT_RELAY_YIELD_NICE tune them), and its live pool\n"
"      and stream tables. BATCH and YIELD together: about 0.1 system calls a request.\n"
"  orbit-relay --demo [--help]\n"
"      backend + reaper + fleet + load, one worker killed midway, and a checked summary.\n"
"  orbit-relay --help | --version\n"
"Every mode but --stats runs on io_uring: where it is refused (a seccomp filter, as Docker's default\n"
"profile has, or kernel.io_uring_disabled) orbit-relay exits 1 at start with one line saying which\n"
"and what lifts it.\n";

/* A bad argument: one line naming it, exit 2. */
static int bad_arg(const char *what, const char *value)
{
    if (value)
        fprintf(stderr, "orbit-relay: bad %s '%s' (see --help)\n", what, value);
    else
        fprintf(stderr, "orbit-relay: %s (see --help)\n", what);
    return 2;
}

/* A whole number in [min, max], by the tools' shared parser (tools/common/cli.c). */
static bool parse_num(const char *text, long long min, long long max, long long *out)
{
    uint64_t v;
    const char *why;
    if (cli_parse_u64(text, (uint64_t)min, (uint64_t)max, &v, &why) < 0)
        return false;
    *out = (long long)v;
    return true;
}

enum mode { M_NONE, M_RELAY, M_BACKEND, M_LOAD, M_STATS };

/* "http://host:port/" or "host:port" or "port": the load picks its own paths
 * (/item/C/N, whose bodies it can verify), so a URL naming another path is refused
 * rather than silently not requested. */
static int parse_url(const char *url, struct load_opts *lo)
{
    char buf[128];
    const char *p = strncmp(url, "http://", 7) == 0 ? url + 7 : url;
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= sizeof buf || (p[n] == '/' && p[n + 1] != 0))
        return -1;
    memcpy(buf, p, n);
    buf[n] = 0;
    if (cli_parse_inet(buf, &lo->addr, NULL) < 0)
        return -1;
    snprintf(lo->host, sizeof lo->host, "%.63s", buf);
    return 0;
}

struct args {
    struct relay_opts ro;
    struct load_opts lo;
    struct sockaddr_in backend;
    const char *stats_fleet;
    bool have_listen, have_up;
    enum mode mode;
};

static const struct option longs[] = {
    { "fleet", required_argument, 0, 'f' }, { "listen", required_argument, 0, 'l' },
    { "upstream", required_argument, 0, 'U' }, { "workers", required_argument, 0, 'w' },
    { "upstreams", required_argument, 0, 'u' }, { "self-reap", no_argument, 0, 'S' },
    { "no-restart", no_argument, 0, 'R' }, { "backend", required_argument, 0, 'b' },
    { "load", required_argument, 0, 'L' }, { "connections", required_argument, 0, 'c' },
    { "requests", required_argument, 0, 'n' }, { "duration", required_argument, 0, 'd' },
    { "stats", required_argument, 0, 's' }, { "json", no_argument, 0, 'j' },
    { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
    { "max-head", required_argument, 0, 1 }, { "max-body", required_argument, 0, 2 },
    { "header-timeout", required_argument, 0, 3 }, { "idle-timeout", required_argument, 0, 4 },
    { "connect-timeout", required_argument, 0, 5 }, { "response-timeout", required_argument, 0, 6 },
    { "drain-timeout", required_argument, 0, 7 }, { "control", required_argument, 0, 8 },
    { "upgrade", no_argument, 0, 9 }, { 0, 0, 0, 0 } };

/* The option's long name, for messages. */
static const char *opt_name(int ch)
{
    static char buf[40];
    for (const struct option *o = longs; o->name; o++)
        if (o->val == ch) {
            snprintf(buf, sizeof buf, "--%s", o->name);
            return buf;
        }
    return "option";
}

/* One option: 0, 1 to exit 0 (help, version), or 2 for a bad argument. */
static int take_option(struct args *a, int ch, const char *arg)
{
    long long v = 0;
    static const long long max_ms = 24LL * 3600 * 1000;
    struct { int ch; long long min, max; } nums[] = {
        { 'w', 1, RELAY_STATS_SLOTS / 2 }, { 'u', 1, 200 * (RELAY_STATS_SLOTS / 2) }, { 'c', 1, 4096 },
        { 'n', 1, INT64_MAX }, { 1, 256, 1 << 20 }, { 2, 0, 1LL << 30 }, { 3, 1, max_ms }, { 4, 1, max_ms },
        { 5, 1, max_ms }, { 6, 1, max_ms }, { 7, 1, max_ms } };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (nums[i].ch == ch && !parse_num(arg, nums[i].min, nums[i].max, &v))
            return bad_arg(opt_name(ch), arg);
    switch (ch) {
    case 'f': a->ro.fleet = arg; a->mode = M_RELAY; break;
    case 'l': if (cli_parse_inet(arg, &a->ro.listen, NULL) < 0) return bad_arg("--listen", arg); a->have_listen = true; break;
    case 'U': if (cli_parse_inet(arg, &a->ro.upstream, NULL) < 0) return bad_arg("--upstream", arg); a->have_up = true; break;
    case 'w': a->ro.workers = (int)v; break;
    case 'u': a->ro.upstreams = (int)v; break;
    case 'S': a->ro.self_reap = true; break;
    case 'R': a->ro.restart = false; break;
    case 'b': if (cli_parse_inet(arg, &a->backend, NULL) < 0) return bad_arg("--backend", arg); a->mode = M_BACKEND; break;
    case 'L':
        if (parse_url(arg, &a->lo) < 0)
            return bad_arg("--load URL (http://HOST:PORT/: it picks its own paths)", arg);
        a->mode = M_LOAD;
        break;
    case 'c': a->lo.connections = (int)v; break;
    case 'n': a->lo.requests = (uint64_t)v; break;
    case 'd': {
        char *end;
        a->lo.duration_s = strtod(arg, &end);
        if (end == arg || *end || !(a->lo.duration_s > 0))
            return bad_arg("--duration", arg);
        break;
    }
    case 's': a->stats_fleet = arg; a->mode = M_STATS; break;
    case 'j': a->lo.json = true; break;
    case 'q': a->ro.quiet = true; break;
    case 'h': fputs(usage, stdout); return 1;
    case 'V': printf("orbit-relay %s (libhttp-parser %lu.%lu.%lu)\n", ORBIT_TOOL_VERSION, http_parser_version() >> 16,
                     (http_parser_version() >> 8) & 255, http_parser_version() & 255); return 1;
    case 1: a->ro.max_head = (size_t)v; break;
    case 2: a->ro.max_body = (size_t)v; break;
    case 3: a->ro.header_timeout_ms = (int)v; break;
    case 4: a->ro.idle_timeout_ms = (int)v; break;
    case 5: a->ro.connect_timeout_ms = (int)v; break;
    case 6: a->ro.response_timeout_ms = (int)v; break;
    case 7: a->ro.drain_timeout_ms = (int)v; break;
    case 8:
        if (!*arg || strlen(arg) >= sizeof ((struct handover_server *)0)->path - 8)
            return bad_arg("--control (a path of at most 99 bytes)", arg);
        a->ro.control = arg;
        break;
    case 9: a->ro.upgrade = true; break;
    default: return 2;
    }
    return 0;
}

static int run_relay(struct args *a)
{
    if (!a->have_listen || !a->have_up)
        return bad_arg(!a->have_listen ? "--fleet needs --listen" : "--fleet needs --upstream", NULL);
    struct relay_opts *ro = &a->ro;
    if (ro->workers <= 0) {
        int n = relay_cpu_count();
        ro->workers = n < 2 ? 2 : n > RELAY_STATS_SLOTS / 2 ? RELAY_STATS_SLOTS / 2 : n;
    }
    if (ro->upstreams <= 0)
        ro->upstreams = 32 * ro->workers;
    static char control[128];
    if (!ro->control) {
        handover_default_path(ro->fleet, control, sizeof control);
        ro->control = control;
    }
    return sup_run(ro);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--demo") == 0)
            return demo_main(argc, argv);
    struct args a = { .lo = { .connections = 16 } };
    relay_opts_defaults(&a.ro);
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":hV", longs, NULL)) != -1) {
        if (ch == '?' || ch == ':') {
            const char *arg = argv[optind - 1];
            return bad_arg(ch == ':' ? "option without its value" : "option", arg);
        }
        int r = take_option(&a, ch, optarg);
        if (r)
            return r == 1 ? 0 : r;
    }
    if (optind < argc)
        return bad_arg("argument", argv[optind]);
    if (a.mode != M_STATS && a.mode != M_NONE && uring_check() < 0)
        return 1;   /* every other mode runs on io_uring: refused, it says why and starts nothing */
    switch (a.mode) {
    case M_BACKEND:
        return backend_main(&a.backend, -1, a.ro.quiet);
    case M_LOAD: {
        if (a.lo.requests == 0 && a.lo.duration_s <= 0)
            return bad_arg("--load needs --requests or --duration", NULL);
        struct load_result r;
        if (load_run(&a.lo, &r) < 0)
            return 1;
        load_print(&a.lo, &r, stdout);
        return r.bad_status + r.bad_body + r.timeouts + r.lost ? 1 : 0;
    }
    case M_STATS:
        return stats_main(a.stats_fleet, a.lo.json);
    case M_RELAY:
        return run_relay(&a);
    default:
        return bad_arg("no mode: --fleet, --backend, --load, --stats or --demo", NULL);
    }
}
