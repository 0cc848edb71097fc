/* SPDX-License-Identifier: MIT */
/*
 * Differential check of the relay's HTTP reader (httpmsg.h) against the one
 * it replaced (hm_oracle.h): the same bytes through both, every result
 * compared. Shared by the Check suite and the fuzz target.
 */
#ifndef ORBIT_TESTS_HM_DIFF_H
#define ORBIT_TESTS_HM_DIFF_H

#include "httpmsg.h"

/* How one input is read. */
struct hm_diff_case {
    enum hm_kind kind;
    bool head_request;          /* hm_head_parse's head_request */
    bool dechunk;               /* set on both messages before the body */
    size_t max_head;
    size_t step;                /* the body is fed in pieces of this many bytes (> 0) */
};

/* The flag byte the fuzz target and the corpus files begin with, as a case. */
struct hm_diff_case hm_diff_flags(unsigned char flags);

/*
 * Reads bytes[0..len) both ways: head (return, every hm_head field, complete,
 * skip_body), rewrites (several hm_rewrite sets, by hm_head_rewrite and
 * hm_msg_rewrite, with room and one byte short), then the body feed by feed
 * (return, *out, complete, payload, the buffer) and the EOF. Returns NULL
 * when both agree, else what differed (a static buffer).
 */
const char *hm_diff(const char *bytes, size_t len, const struct hm_diff_case *c);

#endif
