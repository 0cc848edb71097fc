/* SPDX-License-Identifier: MIT */
/* key_peer.c — prints orbit_key_from_string of each argument, for test_pool (a liborbit with it). */
#include <orbit/orbit.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char text[ORBIT_KEY_TEXT_MAX];
        if (orbit_key_format(orbit_key_from_string(argv[i]), text, sizeof text) < 0)
            return 1;
        puts(text);
    }
    return 0;
}
