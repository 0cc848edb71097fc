/* SPDX-License-Identifier: MIT */
/*
 * Command-line helpers shared by the orbit tools: range-checked numbers, one-line
 * errors for bad arguments (exit status 2) and --version.
 *
 * A bad argument prints exactly one line on stderr,
 *     TOOL: bad OPT 'ARG': REASON
 * and exits with CLI_EXIT_USAGE, before the tool has created or opened anything.
 */
#ifndef ORBIT_TOOL_CLI_H
#define ORBIT_TOOL_CLI_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#define CLI_EXIT_USAGE 2

/*
 * cli_parse_u64 - s as an unsigned integer in [min, max]: decimal, or 0x and hex.
 * No sign, no spaces, no suffix. Returns 0, or -1 with *why set to a static reason
 * ("empty", "not a number", "out of range").
 */
int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out, const char **why);

/* Print "TOOL: bad OPT 'ARG': REASON" and exit 2. */
_Noreturn void cli_bad(const char *tool, const char *opt, const char *arg, const char *reason);

/* Print "TOOL: REASON (see --help)" and exit 2: usage errors that name no argument. */
_Noreturn void cli_usage_error(const char *tool, const char *reason);

/* cli_parse_u64, or cli_bad naming the range. */
uint64_t cli_u64(const char *tool, const char *opt, const char *s, uint64_t min, uint64_t max);
int cli_int(const char *tool, const char *opt, const char *s, int min, int max);   /* 0 <= min <= max */

/*
 * cli_size - a byte count: digits with an optional K, M or G suffix (binary: x1024,
 * x1024^2, x1024^3), in [min, max] after scaling; else cli_bad naming the range.
 */
uint64_t cli_size(const char *tool, const char *opt, const char *s, uint64_t min, uint64_t max);

/* A finite decimal number (strtod syntax, no leading space, no suffix) in [min, max], or cli_bad. */
double cli_double(const char *tool, const char *opt, const char *s, double min, double max);

/*
 * cli_parse_inet - "[HOST:]PORT" into an IPv4 socket address: HOST a dotted quad or
 * localhost (none: 127.0.0.1), PORT 0..65535. Returns 0, or -1 with *why (if why is
 * not NULL) set to a static reason.
 */
struct sockaddr_in;
int cli_parse_inet(const char *s, struct sockaddr_in *out, const char **why);

/* A fleet name as liborbit takes it (1..64 bytes of [A-Za-z0-9_.-]), or cli_bad. */
const char *cli_fleet_name(const char *tool, const char *opt, const char *s);

/*
 * cli_getopt_error - getopt_long returned c ('?' unknown option, ':' missing value;
 * the optstring must start with ':'): one line naming the option, exit 2. optopt_char
 * is getopt's optopt, elem the argv element it stopped at (argv[optind - 1]).
 */
_Noreturn void cli_getopt_error(const char *tool, int c, int optopt_char, const char *elem);

/*
 * A 64-bit integer in a tool's JSON output is a string ("bytes":"4194304"): jq and
 * JavaScript keep only 53 bits of a number. Pieces of a printf format, e.g.
 *     printf("{\"bytes\":" CLI_JSON_U64 "}", bytes);
 * 32-bit integers, booleans and floating-point figures stay JSON numbers.
 */
#define CLI_JSON_U64 "\"%" PRIu64 "\""
#define CLI_JSON_I64 "\"%" PRId64 "\""
#define CLI_JSON_SIZE "\"%zu\""   /* size_t */
#define CLI_JSON_SSIZE "\"%zd\""  /* ssize_t */

/* "TOOL VERSION" on stdout (the project version, as pkg-config reports it). */
void cli_version(const char *tool);

#endif
