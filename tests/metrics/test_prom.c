/* SPDX-License-Identifier: MIT */
/*
 * The exposition writer (tools/common/prom.c) on its own: label values and
 * HELP escaped as the format says, a family's samples kept together whatever
 * order they came in, names outside the format refused, a family used with
 * two types refused. Prints the text it checked when a check fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "prom.h"

static int failures;

static char *render(struct prom *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out || prom_write(p, out) != 0 || fclose(out) != 0) {
        fprintf(stderr, "prom_write failed\n");
        exit(1);
    }
    return text;
}

static void expect(bool ok, const char *what, const char *text)
{
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n--- output:\n%s---\n", what, text);
        failures++;
    }
}

static void test_escaping(void)
{
    struct prom *p = prom_new();
    struct prom_labels l = prom_with(NULL, "fleet", "a\"b\\c\nd");
    prom_u64(p, "orbit_x_total", PROM_COUNTER, "Back\\slash and\nnewline \"quoted\".", "", &l, 7);
    char *t = render(p);
    expect(strstr(t, "# HELP orbit_x_total Back\\\\slash and\\nnewline \"quoted\".\n") != NULL,
           "HELP escapes backslash and line feed, not the double quote", t);
    expect(strstr(t, "# TYPE orbit_x_total counter\n") != NULL, "TYPE line", t);
    expect(strstr(t, "orbit_x_total{fleet=\"a\\\"b\\\\c\\nd\"} 7\n") != NULL,
           "label value escapes double quote, backslash, line feed", t);
    expect(prom_error(p) == NULL, "no error", t);
    free(t);
    prom_free(p);
}

static void test_grouping(void)
{
    struct prom *p = prom_new();
    struct prom_labels a = prom_with(NULL, "fleet", "a"), b = prom_with(NULL, "fleet", "b");
    prom_u64(p, "orbit_one", PROM_GAUGE, "One.", "", &a, 1);
    prom_u64(p, "orbit_two", PROM_GAUGE, "Two.", "", &a, 2);
    prom_u64(p, "orbit_one", PROM_GAUGE, "One.", "", &b, 3);
    prom_f64(p, "orbit_h_seconds", PROM_HISTOGRAM, "H.", "_sum", NULL, 0.25);
    prom_f64(p, "orbit_ratio", PROM_GAUGE, "R.", "", NULL, 1.507);
    char *t = render(p);
    const char *want = "# HELP orbit_one One.\n# TYPE orbit_one gauge\norbit_one{fleet=\"a\"} 1\n"
                       "orbit_one{fleet=\"b\"} 3\n# HELP orbit_two Two.\n# TYPE orbit_two gauge\n"
                       "orbit_two{fleet=\"a\"} 2\n# HELP orbit_h_seconds H.\n# TYPE orbit_h_seconds histogram\n"
                       "orbit_h_seconds_sum 0.25\n# HELP orbit_ratio R.\n# TYPE orbit_ratio gauge\n"
                       "orbit_ratio 1.507\n";
    expect(strcmp(t, want) == 0, "families in first-use order, each one's samples together", t);
    free(t);
    prom_free(p);
}

static void test_refusals(void)
{
    struct prom *p = prom_new();
    prom_u64(p, "9starts_with_digit", PROM_GAUGE, "x", "", NULL, 1);
    expect(prom_error(p) != NULL, "a name starting with a digit is refused", "");
    prom_free(p);
    p = prom_new();
    prom_u64(p, "orbit-dash", PROM_GAUGE, "x", "", NULL, 1);
    expect(prom_error(p) != NULL, "a name with '-' is refused", "");
    prom_free(p);
    p = prom_new();
    prom_u64(p, "orbit_t", PROM_GAUGE, "x", "", NULL, 1);
    prom_u64(p, "orbit_t", PROM_COUNTER, "x", "", NULL, 1);
    expect(prom_error(p) != NULL, "one family, two types: refused", "");
    struct prom_labels l = prom_with(NULL, "bad:label", "v");
    prom_free(p);
    p = prom_new();
    prom_u64(p, "orbit_u", PROM_GAUGE, "x", "", &l, 1);
    char *t = render(p);
    expect(prom_error(p) != NULL && strstr(t, "orbit_u{") == NULL, "a label name with ':' is refused", t);
    free(t);
    prom_free(p);
    expect(prom_name_ok("orbit_pool:rate5m") && prom_name_ok("_x") && !prom_name_ok("") && !prom_name_ok("a b"),
           "prom_name_ok follows [a-zA-Z_:][a-zA-Z0-9_:]*", "");
}

int main(void)
{
    test_escaping();
    test_grouping();
    test_refusals();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("test_prom: all checks passed\n");
    return failures ? 1 : 0;
}
