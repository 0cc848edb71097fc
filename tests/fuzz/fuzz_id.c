/* SPDX-License-Identifier: MIT */
/* libFuzzer: orbit_id_parse never reads past the text, and what it accepts round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/fleet.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    orbit_id id = 0;
    if (orbit_id_parse(text, &id) == 0) {
        char buf[ORBIT_ID_TEXT_MAX];
        int n = orbit_id_format(id, buf, sizeof buf);
        orbit_id back = ~id;
        if (n <= 0 || orbit_id_parse(buf, &back) != 0 || back != id)
            abort();
    }
    free(text);
    return 0;
}
