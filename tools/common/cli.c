/* SPDX-License-Identifier: MIT */
/* Command-line helpers shared by the orbit tools. */
#include <arpa/inet.h>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

#ifndef ORBIT_TOOL_VERSION
#error "ORBIT_TOOL_VERSION (the project version) must be defined by the build"
#endif

static int digit_value(char c, unsigned base)
{
    int v = c >= '0' && c <= '9' ? c - '0'
          : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99;
    return v < (int)base ? v : -1;
}

static bool digits_only(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out, const char **why)
{
    unsigned base = 10;
    if (!s || !*s) {
        *why = "empty";
        return -1;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (!*s) {
        *why = "not a number";
        return -1;
    }
    uint64_t v = 0;
    bool overflow = false;
    for (; *s; s++) {
        int d = digit_value(*s, base);
        if (d < 0) {
            *why = "not a number";
            return -1;
        }
        if (v > (UINT64_MAX - (uint64_t)d) / base)
            overflow = true;
        else
            v = v * base + (uint64_t)d;
    }
    if (overflow || v < min || v > max) {
        *why = "out of range";
        return -1;
    }
    *out = v;
    return 0;
}

void cli_bad(const char *tool, const char *opt, const char *arg, const char *reason)
{
    fprintf(stderr, "%s: bad %s '%s': %s\n", tool, opt, arg ? arg : "", reason);
    exit(CLI_EXIT_USAGE);
}

void cli_usage_error(const char *tool, const char *reason)
{
    fprintf(stderr, "%s: %s (see --help)\n", tool, reason);
    exit(CLI_EXIT_USAGE);
}

static _Noreturn void bad_range_u64(const char *tool, const char *opt, const char *s, uint64_t min,
                                    uint64_t max)
{
    char reason[96];
    snprintf(reason, sizeof reason, "out of range %llu..%llu", (unsigned long long)min,
             (unsigned long long)max);
    cli_bad(tool, opt, s, reason);
}

uint64_t cli_u64(const char *tool, const char *opt, const char *s, uint64_t min, uint64_t max)
{
    uint64_t v;
    const char *why;
    if (cli_parse_u64(s, min, max, &v, &why) == 0)
        return v;
    if (strcmp(why, "out of range") == 0)
        bad_range_u64(tool, opt, s, min, max);
    cli_bad(tool, opt, s, why);
}

int cli_int(const char *tool, const char *opt, const char *s, int min, int max)
{
    return (int)cli_u64(tool, opt, s, min < 0 ? 0 : (uint64_t)min, max < 0 ? 0 : (uint64_t)max);
}

uint64_t cli_size(const char *tool, const char *opt, const char *s, uint64_t min, uint64_t max)
{
    static const char suffixes[] = "KMG";
    char digits[32];
    size_t n = strlen(s);
    unsigned shift = 0;
    const char *suffix = n ? strchr(suffixes, s[n - 1] & ~0x20) : NULL;   /* k, m, g too */
    if (suffix && *suffix) {
        shift = 10u * (unsigned)(suffix - suffixes + 1);
        n--;
    }
    if (n == 0 || n >= sizeof digits || digits_only(s, n) == false)
        cli_bad(tool, opt, s, "not a size (N, NK, NM or NG)");
    memcpy(digits, s, n);
    digits[n] = '\0';
    uint64_t v;
    const char *why;
    if (cli_parse_u64(digits, 0, UINT64_MAX >> shift, &v, &why) != 0 || (v << shift) < min ||
        (v << shift) > max)
        bad_range_u64(tool, opt, s, min, max);
    return v << shift;
}

double cli_double(const char *tool, const char *opt, const char *s, double min, double max)
{
    char *end = NULL;
    if (!*s || (*s != '.' && *s != '-' && *s != '+' && (*s < '0' || *s > '9')))
        cli_bad(tool, opt, s, "not a number");
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        cli_bad(tool, opt, s, "not a number");
    if (v < min || v > max) {
        char reason[96];
        snprintf(reason, sizeof reason, "out of range %g..%g", min, max);
        cli_bad(tool, opt, s, reason);
    }
    return v;
}

const char *cli_fleet_name(const char *tool, const char *opt, const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        cli_bad(tool, opt, s, "a fleet name is 1..64 bytes");
    /* A fleet's name, or one generation's: NAME@N (the library checks N). */
    size_t at = strcspn(s, "@");
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  (i < at && (c == '_' || c == '.' || c == '-')) || (i == at && i > 0 && i + 1 < n);
        if (!ok || (i > at && (c < '0' || c > '9')))
            cli_bad(tool, opt, s, "a fleet name has only letters, digits, '_', '.' and '-' (one "
                    "generation's: NAME@N)");
    }
    return s;
}

void cli_getopt_error(const char *tool, int c, int optopt_char, const char *elem)
{
    char opt[64];
    if (!elem)
        elem = "?";
    if (strncmp(elem, "--", 2) != 0 && optopt_char > 0 && optopt_char < 128)   /* short, maybe clustered */
        snprintf(opt, sizeof opt, "-%c", optopt_char);
    else
        snprintf(opt, sizeof opt, "%.*s", (int)strcspn(elem, "="), elem);
    if (c == ':')
        fprintf(stderr, "%s: %s needs a value (see --help)\n", tool, opt);
    else
        fprintf(stderr, "%s: unknown option '%s' (see --help)\n", tool, opt);
    exit(CLI_EXIT_USAGE);
}

void cli_version(const char *tool)
{
    printf("%s %s\n", tool, ORBIT_TOOL_VERSION);
}

/* The reason s is not "[HOST:]PORT", or NULL with out filled in. */
static const char *inet_fault(const char *s, struct sockaddr_in *out)
{
    const char *colon = strrchr(s, ':'), *port = colon ? colon + 1 : s;
    char host[64] = "127.0.0.1";
    if (colon && colon == s)
        return "no host before ':'";
    if (colon && (size_t)(colon - s) >= sizeof host)
        return "the host is too long";
    if (*port == 0 || strspn(port, "0123456789") != strlen(port))
        return "not a port";
    uint64_t p;
    const char *why;
    if (cli_parse_u64(port, 0, 65535, &p, &why) < 0)
        return "port out of range 0..65535";
    if (colon)
        snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
    *out = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
    if (strcmp(host, "localhost") == 0)
        out->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
        return "not an IPv4 address";
    return NULL;
}

int cli_parse_inet(const char *s, struct sockaddr_in *out, const char **why)
{
    const char *reason = inet_fault(s, out);
    if (why)
        *why = reason;
    return reason ? -1 : 0;
}
