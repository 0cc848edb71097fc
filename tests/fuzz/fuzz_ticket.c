/* SPDX-License-Identifier: MIT */
/* libFuzzer: orbit_ticket_parse is strict, never reads past the text, and round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <orbit/stream.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct orbit_ticket t;
    memset(&t, 0, sizeof t);
    if (orbit_ticket_parse(text, &t) == 0) {
        char buf[128];
        int n = orbit_ticket_format(&t, buf, sizeof buf);
        struct orbit_ticket back;
        memset(&back, 0xff, sizeof back);
        if (n <= 0 || orbit_ticket_parse(buf, &back) != 0 || back.id != t.id || back.side != t.side ||
            back.epoch != t.epoch)
            abort();
    }
    free(text);
    return 0;
}
