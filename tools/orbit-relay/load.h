/* SPDX-License-Identifier: MIT */
/* orbit-relay --load: a closed-loop keep-alive HTTP/1.1 load generator (load.c). */
#ifndef ORBIT_RELAY_LOAD_H
#define ORBIT_RELAY_LOAD_H

#include "relay.h"

struct load_opts {
    struct sockaddr_in addr;
    char host[64];
    int connections;
    uint64_t requests;      /* 0: no limit */
    double duration_s;      /* 0: no limit */
    bool json;
};
struct load_result {
    uint64_t sent, ok, lost, bad_status, bad_body, timeouts, connect_errors, reconnects;
    uint64_t bytes;
    double elapsed_s;
    struct relay_hist hist;
};
int load_run(const struct load_opts *o, struct load_result *r);
void load_print(const struct load_opts *o, const struct load_result *r, FILE *out);

#endif
