/* SPDX-License-Identifier: MIT */
/* Reading one value out of a flat JSON line a tool printed (Check suites only). */
#ifndef ORBIT_TEST_JSONFLAT_H
#define ORBIT_TEST_JSONFLAT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>

/* An integer after "key": in a flat JSON text; fails the test if absent, or if a 64-bit
 * value (wide) is not a JSON string of digits or a narrower one not a bare number. */
static inline long long jint(const char *json, const char *key, bool wide)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    ck_assert_msg(p, "no %s in %s", key, json);
    p += strlen(pat);
    char *end;
    long long v = strtoll(p + wide, &end, 10);
    ck_assert_msg(end > p + wide && (*p == '"') == wide && (!wide || *end == '"'),
                  "%s is not a %s: %s", key, wide ? "JSON string of digits" : "JSON number", json);
    return v;
}
#define jnum(json, key) jint(json, key, false)   /* 32-bit and narrower: a number */
#define ju64(json, key) jint(json, key, true)    /* 64-bit: a string */

#endif
