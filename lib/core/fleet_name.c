/* SPDX-License-Identifier: MIT */
/* Fleet names and generation-qualified names (fleet_name.h): the grammar, nothing more. */
#include <stdio.h>
#include <string.h>
#include "fleet_name.h"

static bool name_char(char c, size_t at)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || (c == '.' && at > 0);
}

/* "N" after the '@': decimal, no leading zero, 2..ORBIT_GENERATION_MAX. */
static int parse_generation(const char *s, uint32_t *out)
{
    uint64_t v = 0;
    if (*s < '1' || *s > '9')
        return -ORBIT_EMALFORMED;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -ORBIT_EMALFORMED;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > ORBIT_GENERATION_MAX)
            return -ORBIT_EMALFORMED;
    }
    if (v < 2)
        return -ORBIT_EMALFORMED;   /* generation 1 is named by the fleet's name alone */
    *out = (uint32_t)v;
    return 0;
}

int orb_fleet_name_split(const char *name, char base[ORBIT_FLEET_NAME_MAX + 1], uint32_t *generation)
{
    size_t n = 0;
    if (!name || !*name)
        return -ORBIT_EMALFORMED;
    while (name[n] && name[n] != '@') {
        if (!name_char(name[n], n) || n >= ORBIT_FLEET_NAME_MAX)
            return -ORBIT_EMALFORMED;
        n++;
    }
    uint32_t gen = 0;
    if (n == 0)
        return -ORBIT_EMALFORMED;
    if (name[n] == '@' && (strlen(name) > ORBIT_FLEET_NAME_MAX || parse_generation(name + n + 1, &gen) < 0))
        return -ORBIT_EMALFORMED;
    if (base) {
        memcpy(base, name, n);
        base[n] = '\0';
    }
    if (generation)
        *generation = gen;
    return 0;
}

bool orb_fleet_name_valid(const char *name)
{
    return orb_fleet_name_split(name, NULL, NULL) == 0;
}

int orb_fleet_name_of(const char *base, uint32_t generation, char *buf, size_t len)
{
    uint32_t named;
    if (!buf || generation < 1 || generation > ORBIT_GENERATION_MAX ||
        orb_fleet_name_split(base, NULL, &named) < 0 || named != 0)
        return -ORBIT_EMALFORMED;
    int n = generation == 1 ? snprintf(buf, len, "%s", base) : snprintf(buf, len, "%s@%u", base, generation);
    if (n < 0 || (size_t)n >= len || (size_t)n > ORBIT_FLEET_NAME_MAX)
        return -ORBIT_ETOOLARGE;
    return n;
}
