/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay's single-pass HTTP reader against the reader it replaced
 * (tests/relay/hm_oracle.c) on arbitrary bytes: the first byte picks the
 * kind, HEAD, dechunking, the body's feed size and max_head (hm_diff_flags);
 * hm_diff compares the head, the rewrites and the body framing feed by
 * feed. Any difference aborts with what differed.
 */
#include <stdio.h>
#include <stdlib.h>
#include "hm_diff.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1)
        return 0;
    struct hm_diff_case c = hm_diff_flags(data[0]);
    const char *bad = hm_diff((const char *)data + 1, size - 1, &c);
    if (bad) {
        fprintf(stderr, "fuzz_http_diff: %s\n", bad);
        abort();
    }
    return 0;
}
