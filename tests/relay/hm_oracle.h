/* SPDX-License-Identifier: MIT */
/*
 * The reference reader for the relay's HTTP (hm_oracle.c): the same calls
 * as httpmsg.h's, on a message of its own.
 */
#ifndef ORBIT_TESTS_HM_ORACLE_H
#define ORBIT_TESTS_HM_ORACLE_H

#include "httpmsg.h"

struct oracle_msg {
    http_parser p;
    struct hm_head h;
    bool complete;
    bool skip_body;
    bool dechunk;
    char *wp;
    uint64_t payload;
};

int oracle_head_parse(struct oracle_msg *m, enum hm_kind kind, const char *buf, size_t len, size_t max_head,
                      bool head_request);
bool oracle_head_bad_prefix(const char *buf, size_t len);
ssize_t oracle_body(struct oracle_msg *m, char *buf, size_t len, size_t *out);
int oracle_eof(struct oracle_msg *m);
ssize_t oracle_head_rewrite(const char *in, size_t head_len, const struct hm_rewrite *rw, char *out, size_t cap);

#endif
