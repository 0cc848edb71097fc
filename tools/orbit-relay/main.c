/* SPDX-License-Identifier: MIT */
/* orbit-relay: the demo fleet's one binary and its modes. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "relay.h"

static const char usage[] =
"usage:\n"
"  orbit-relay --fleet NAME --listen [HOST:]PORT --upstream [HOST:]PORT [--workers N] [--upstreams U]\n"
"              [--self-reap] [--no-restart]\n"
"      run a relay fleet: N io_uring workers (default one per core, at least 2) accept on\n"
"      SO_REUSEPORT listeners (held by the supervisor, so a replacement worker takes over\n"
"      a dead one's accept queue) and share at most U upstream connections to the backend\n"
"      (default N + 2) through the orbit pool, relaying remote leases through orbit streams.\n"
"      --self-reap: the supervisor reclaims a dead worker itself (when no orbit-reaper runs).\n"
"  orbit-relay --backend [HOST:]PORT\n"
"      a keep-alive HTTP/1.1 origin whose bodies are a function of the path\n"
"      (/size/N: N bytes; any other path 32..2048 bytes).\n"
"  orbit-relay --load URL [--connections C] [--requests N] [--duration S] [--json]\n"
"      closed-loop load; every body is verified; prints p50/p99 latency and errors.\n"
"  orbit-relay --stats FLEET [--json]\n"
"      the fleet's relay counters and its live pool and stream tables.\n"
"  orbit-relay --demo [--help]\n"
"      backend + reaper + fleet + load, one worker killed midway, and a checked summary.\n";

enum mode { M_NONE, M_RELAY, M_BACKEND, M_LOAD, M_STATS };

/* "http://host:port/..." or "host:port" or "port". */
static int parse_url(const char *url, struct load_opts *lo)
{
    char buf[128];
    const char *p = strncmp(url, "http://", 7) == 0 ? url + 7 : url;
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, p, n);
    buf[n] = 0;
    if (relay_parse_addr(buf, &lo->addr) < 0)
        return -1;
    snprintf(lo->host, sizeof lo->host, "%.63s", buf);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--demo") == 0)
            return demo_main(argc, argv);
    static const struct option longs[] = {
        { "fleet", required_argument, 0, 'f' }, { "listen", required_argument, 0, 'l' },
        { "upstream", required_argument, 0, 'U' }, { "workers", required_argument, 0, 'w' },
        { "upstreams", required_argument, 0, 'u' }, { "self-reap", no_argument, 0, 'S' },
        { "no-restart", no_argument, 0, 'R' }, { "backend", required_argument, 0, 'b' },
        { "load", required_argument, 0, 'L' }, { "connections", required_argument, 0, 'c' },
        { "requests", required_argument, 0, 'n' }, { "duration", required_argument, 0, 'd' },
        { "stats", required_argument, 0, 's' }, { "json", no_argument, 0, 'j' },
        { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    struct relay_opts ro = { .workers = 0, .restart = true };
    struct load_opts lo = { .connections = 16 };
    struct sockaddr_in backend;
    const char *stats_fleet = NULL;
    bool have_listen = false, have_up = false;
    enum mode mode = M_NONE;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (ch) {
        case 'f': ro.fleet = optarg; mode = M_RELAY; break;
        case 'l': have_listen = relay_parse_addr(optarg, &ro.listen) == 0; break;
        case 'U': have_up = relay_parse_addr(optarg, &ro.upstream) == 0; break;
        case 'w': ro.workers = atoi(optarg); break;
        case 'u': ro.upstreams = atoi(optarg); break;
        case 'S': ro.self_reap = true; break;
        case 'R': ro.restart = false; break;
        case 'b':
            if (relay_parse_addr(optarg, &backend) < 0)
                goto bad;
            mode = M_BACKEND;
            break;
        case 'L':
            if (parse_url(optarg, &lo) < 0)
                goto bad;
            mode = M_LOAD;
            break;
        case 'c': lo.connections = atoi(optarg); break;
        case 'n': lo.requests = strtoull(optarg, NULL, 10); break;
        case 'd': lo.duration_s = atof(optarg); break;
        case 's': stats_fleet = optarg; mode = M_STATS; break;
        case 'j': lo.json = true; break;
        case 'q': ro.quiet = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: goto bad;
        }
    }
    switch (mode) {
    case M_BACKEND:
        return backend_main(&backend, -1, ro.quiet);
    case M_LOAD: {
        if (lo.connections < 1 || lo.connections > 4096 || (lo.requests == 0 && lo.duration_s <= 0))
            goto bad;
        struct load_result r;
        if (load_run(&lo, &r) < 0)
            return 1;
        load_print(&lo, &r, stdout);
        return r.bad_status + r.bad_body + r.timeouts + r.lost ? 1 : 0;
    }
    case M_STATS:
        return stats_main(stats_fleet, lo.json);
    case M_RELAY:
        if (!have_listen || !have_up)
            goto bad;
        if (ro.workers <= 0) {
            int n = relay_cpu_count();
            ro.workers = n < 2 ? 2 : n;
        }
        if (ro.workers > RELAY_STATS_SLOTS / 2)
            goto bad;
        if (ro.upstreams <= 0)
            ro.upstreams = ro.workers + 2;
        return relay_run(&ro);
    default:
        break;
    }
bad:
    fputs(usage, stderr);
    return 2;
}
