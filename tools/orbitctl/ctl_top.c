/* SPDX-License-Identifier: MIT */
/*
 * orbitctl top FLEET: samples the fleet every interval and shows the rates
 * between the last two samples. On a terminal: the alternate screen, redrawn
 * in place, keys read without echo (q quits, s changes the key order), the
 * size followed on SIGWINCH; the terminal is put back on q, Ctrl-C, SIGTERM,
 * SIGHUP and around Ctrl-Z. Elsewhere: plain text blocks, one per refresh.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include "cli.h"
#include "ctl_generations.h"
#include "ctl_top.h"
#include "observe.h"

#define TOOL "orbitctl"
#define PLAIN_COLS 80

static const char top_usage[] =
"usage: orbitctl top FLEET [--interval SECONDS] [--count N] [--sort units|recent]\n"
"\n"
"A live view of FLEET: per second, per table and per node (from two reads of the\n"
"fleet's counters an interval apart); the busiest pool keys, streams by ring fill,\n"
"admission domains by use, members waiting in the kernel, dead nodes with what they\n"
"hold, and recent deaths and reclaims. On a terminal it redraws in place: q quits,\n"
"s sorts keys by units (reserved + active) or by their latest reservation (the\n"
"keys that churn). Otherwise it prints one plain block per refresh, 80 columns wide.\n"
"\n"
"  -i, --interval SECONDS  time between refreshes, 0.1..3600 (default 1)\n"
"  -n, --count N           stop after N refreshes (default: until q or a signal)\n"
"  -s, --sort units|recent the order of the pool keys (default units)\n"
"  -h, --help              this text\n"
"\n"
"Exit status: 0 on q, Ctrl-C or the last refresh; 1 when the fleet cannot be read;\n"
"2 on a bad argument; 128+N after signal N (SIGTERM, SIGHUP).\n";

struct top_opts { const char *fleet; double interval; uint64_t count; enum top_sort sort; };

static void parse(int argc, char **argv, bool json, struct top_opts *o)
{
    static const struct option opts[] = { { "interval", required_argument, 0, 'i' },
                                          { "count", required_argument, 0, 'n' },
                                          { "sort", required_argument, 0, 's' },
                                          { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    *o = (struct top_opts){ .interval = 1.0 };
    int c;
    optind = 0;   /* a fresh scan of top's own arguments (argv[0] is "top") */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:n:s:h", opts, NULL)) != -1) {
        if (c == 'i') o->interval = cli_double(TOOL, "--interval", optarg, 0.1, 3600);
        else if (c == 'n') o->count = cli_u64(TOOL, "--count", optarg, 1, UINT32_MAX);
        else if (c == 's' && strcmp(optarg, "units") == 0) o->sort = TOP_SORT_UNITS;
        else if (c == 's' && strcmp(optarg, "recent") == 0) o->sort = TOP_SORT_RECENT;
        else if (c == 's') cli_bad(TOOL, "--sort", optarg, "not units or recent");
        else if (c == 'h') { fputs(top_usage, stdout); exit(0); }
        else cli_getopt_error(TOOL, c, optopt, argv[optind - 1]);
    }
    if (json)
        cli_usage_error(TOOL, "top has no --json (orbitctl --json show FLEET is the snapshot)");
    if (argc - optind != 1)
        cli_usage_error(TOOL, "top takes FLEET");
    o->fleet = cli_fleet_name(TOOL, "FLEET", argv[optind]);
}

/* ---- signals: handlers only set flags; the loop acts on them ---- */

static volatile sig_atomic_t got_quit, got_winch, got_tstp;

static void on_signal(int sig)
{
    if (sig == SIGWINCH) got_winch = 1;
    else if (sig == SIGTSTP) got_tstp = 1;
    else got_quit = sig;
}

static void catch_signals(bool tty)
{
    struct sigaction sa = { .sa_handler = on_signal };   /* no SA_RESTART: poll and nanosleep return */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (tty) {
        sigaction(SIGWINCH, &sa, NULL);
        sigaction(SIGTSTP, &sa, NULL);
    }
}

/* ---- the terminal ---- */

struct term { bool keys; struct termios saved; size_t cols, rows; };

static void put(const char *s) { fputs(s, stdout); }

static void term_size(struct term *t)
{
    struct winsize ws;
    bool ok = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row;
    t->cols = ok ? ws.ws_col : 80;
    t->rows = ok ? ws.ws_row : 24;
    t->cols = t->cols < TOP_COLS ? t->cols : TOP_COLS;
}

/* Alternate screen, cursor hidden; keys one at a time, no echo (signals still come from Ctrl-C). */
static void term_enter(struct term *t)
{
    struct termios raw;
    t->keys = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0;
    if (t->keys) {
        raw = t->saved;
        raw.c_lflag &= (tcflag_t)~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        t->keys = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    put("\033[?1049h\033[?25l\033[H\033[2J");
    fflush(stdout);
    term_size(t);
}

static void term_leave(struct term *t)
{
    put("\033[?25h\033[?1049l");
    fflush(stdout);
    if (t->keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Ctrl-Z: the terminal as it was while stopped, ours again on SIGCONT. */
static void term_suspend(struct term *t)
{
    term_leave(t);
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);
    catch_signals(true);
    term_enter(t);
}

static void draw(const struct term *t, const struct top_lines *L)
{
    put("\033[H");
    for (size_t i = 0; i < L->n && i < t->rows; i++) {
        if (i)
            put("\r\n");
        put(i == 0 ? "\033[7m" : "");   /* the title in reverse video */
        put(L->l[i]);
        put(i == 0 ? "\033[0m\033[K" : "\033[K");
    }
    put("\033[J");
    fflush(stdout);
}

/* ---- the loop ---- */

struct top_run {
    struct top_opts o;
    char reading[ORBIT_FLEET_NAME_MAX + 1];   /* the generation of o.fleet read (ctl_generation_to_read) */
    struct orbit_fleet *f;
    struct top_sample *s[2];          /* s[0] the earlier, s[1] the latest */
    bool valid;                       /* s[1] holds a good sample */
    struct top_history h;
    struct top_lines lines;
    char note[TOP_COLS + 1];
};

/* The fleet may have been unlinked or made again, or its generation collected: follow the name. */
static int follow(struct top_run *r)
{
    if (r->f && orbit_fleet_replaced(r->f) != 1)
        return 0;
    if (r->f)
        orbit_fleet_leave(r->f);
    r->f = NULL;
    r->valid = false;
    /* A fleet (or table) still being created is not waited for: said so, looked at next refresh. */
    int rc = tool_observe(ctl_generation_to_read(r->o.fleet, r->reading), 0, &r->f);
    if (rc < 0) {
        r->f = NULL;
        snprintf(r->note, sizeof r->note, "(fleet %s: %s; trying again)", r->reading, tool_open_error(rc));
    }
    return rc;
}

/* Read a new sample into s[1], the last into s[0]. */
static void refresh(struct top_run *r)
{
    struct top_sample *t = r->s[0];
    r->s[0] = r->s[1];
    r->s[1] = t;
    follow(r);
    int rc = r->f ? top_sample_take(r->f, r->s[1]) : -ENOENT;
    if (rc < 0) {
        if (r->f)
            snprintf(r->note, sizeof r->note, "(fleet %s: %s)", r->reading, tool_open_error(rc));
        r->valid = false;
        return;
    }
    if (r->valid)
        top_history_note(&r->h, r->s[0], r->s[1]);
    else
        r->note[0] = '\0';
    r->valid = true;
}

static bool render(struct top_run *r, bool tty, size_t cols, size_t rows, bool rates)
{
    struct top_view v = { r->reading, r->o.interval, r->o.sort, tty, cols, rows, r->note[0] ? r->note : NULL };
    if (!r->valid)
        return false;
    return top_render(&v, rates ? r->s[0] : NULL, r->s[1], &r->h, &r->lines) == 0;
}

static int nap_ms(double s) { return (int)(s * 1000 + 0.5); }

/* Plain output: after each interval, one block with the rates over it. */
static int run_plain(struct top_run *r)
{
    for (uint64_t n = 0; !got_quit && (!r->o.count || n < r->o.count); n++) {
        bool rates = r->valid;
        poll(NULL, 0, nap_ms(r->o.interval));
        if (got_quit)
            break;
        refresh(r);
        if (!render(r, false, PLAIN_COLS, 0, rates && r->valid)) {
            printf("%s%s\n", n ? "\n" : "", r->note[0] ? r->note : "(no sample)");
        } else {
            for (size_t i = 0; i < r->lines.n; i++)
                printf("%s%s\n", i == 0 && n ? "\n" : "", r->lines.l[i]);
        }
        if (fflush(stdout) != 0)
            return 1;
    }
    return 0;
}

/* One key, if one came; 0 when none. */
static int read_key(const struct term *t)
{
    unsigned char k;
    return t->keys && read(STDIN_FILENO, &k, 1) == 1 ? k : 0;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for the next refresh; handle keys, resizes and Ctrl-Z meanwhile. false: quit. */
static bool wait_tick(struct top_run *r, struct term *t, uint64_t due, bool *rates)
{
    for (;;) {
        uint64_t now = now_ms();
        if (got_quit)
            return false;
        if (now >= due)
            return true;
        struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
        int ready = poll(&p, t->keys ? 1 : 0, (int)(due - now));
        bool redraw = false;
        if (ready > 0 && (p.revents & POLLIN)) {
            int k = read_key(t);
            if (k == 'q' || k == 'Q')
                return false;
            if (k == 's' || k == 'S') {
                r->o.sort = r->o.sort == TOP_SORT_UNITS ? TOP_SORT_RECENT : TOP_SORT_UNITS;
                redraw = true;
            }
        }
        if (got_tstp) {
            got_tstp = 0;
            term_suspend(t);
            redraw = true;
        }
        if (got_winch) {
            got_winch = 0;
            put("\033[2J");
            term_size(t);
            redraw = true;
        }
        if (redraw && render(r, true, t->cols, t->rows, *rates))
            draw(t, &r->lines);
    }
}

static int run_tty(struct top_run *r)
{
    struct term t;
    term_enter(&t);
    bool rates = false;
    if (render(r, true, t.cols, t.rows, false))   /* the first frame at once: totals, no rates yet */
        draw(&t, &r->lines);
    uint64_t due = now_ms() + (uint64_t)nap_ms(r->o.interval);
    for (uint64_t n = 0; !r->o.count || n < r->o.count; n++) {
        if (!wait_tick(r, &t, due, &rates))
            break;
        due += (uint64_t)nap_ms(r->o.interval);
        if (due < now_ms())
            due = now_ms() + (uint64_t)nap_ms(r->o.interval);   /* fell behind: no burst of catch-ups */
        bool had = r->valid;
        refresh(r);
        rates = had && r->valid;
        term_size(&t);
        if (render(r, true, t.cols, t.rows, rates))
            draw(&t, &r->lines);
        else
            draw(&t, &(struct top_lines){ 1, 1, &r->note });
    }
    term_leave(&t);
    return 0;
}

int ctl_top(int argc, char **argv, bool json)
{
    struct top_run r = { 0 };
    parse(argc, argv, json, &r.o);
    int rc = follow(&r);
    if (rc < 0) {
        const char *why = *orbit_last_error() ? orbit_last_error() : NULL;
        fprintf(stderr, "orbitctl: %s: %s%s%s%s\n", r.reading, tool_open_error(rc), why ? " (" : "", why ? why : "",
                why ? ")" : "");
        return 1;
    }
    r.s[0] = calloc(1, sizeof *r.s[0]);
    r.s[1] = calloc(1, sizeof *r.s[1]);
    if (!r.s[0] || !r.s[1]) {
        fprintf(stderr, "orbitctl: top: out of memory\n");
        return 1;
    }
    refresh(&r);
    if (!r.valid) {
        fprintf(stderr, "orbitctl: %s\n", r.note);
        return 1;
    }
    bool tty = isatty(STDOUT_FILENO);
    catch_signals(tty);
    rc = tty ? run_tty(&r) : run_plain(&r);
    top_lines_free(&r.lines);
    if (r.f)
        orbit_fleet_leave(r.f);
    free(r.s[0]);
    free(r.s[1]);
    int sig = got_quit;
    return rc ? rc : sig && sig != SIGINT ? 128 + sig : 0;
}
