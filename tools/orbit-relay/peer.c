/* SPDX-License-Identifier: MIT */
/* orbit-relay worker: the frames on a relay stream, and the wait for an endpoint. */
#include <string.h>
#include <orbit/uring.h>
#include "peer.h"

void peer_frame_encode(char out[PEER_FRAME_LEN], const struct orbit_lease *l, uint32_t req_len, uint16_t flags)
{
    uint32_t magic = PEER_FRAME_MAGIC;
    uint16_t holder = l->holder, pad = 0;
    memset(out, 0, PEER_FRAME_LEN);
    memcpy(out, &magic, 4);
    memcpy(out + 4, &req_len, 4);
    memcpy(out + 8, &l->id, 8);
    memcpy(out + 16, &l->fence, 8);
    memcpy(out + 24, &l->holder_incarnation, 8);
    memcpy(out + 32, &l->epoch, 8);
    memcpy(out + 40, &holder, 2);
    memcpy(out + 42, &pad, 2);
    memcpy(out + 44, &flags, 2);
}

int peer_frame_decode(const char in[PEER_FRAME_LEN], struct orbit_lease *l, uint32_t *req_len, uint16_t *flags)
{
    uint32_t magic;
    memcpy(&magic, in, 4);
    if (magic != PEER_FRAME_MAGIC)
        return -1;
    memcpy(req_len, in + 4, 4);
    memcpy(&l->id, in + 8, 8);
    memcpy(&l->fence, in + 16, 8);
    memcpy(&l->holder_incarnation, in + 24, 8);
    memcpy(&l->epoch, in + 32, 8);
    memcpy(&l->holder, in + 40, 2);
    memcpy(flags, in + 44, 2);
    return 0;
}

void peer_status_encode(char out[PEER_STATUS_LEN], int32_t status, uint32_t flags)
{
    uint32_t magic = PEER_STATUS_MAGIC;
    memset(out, 0, PEER_STATUS_LEN);
    memcpy(out, &magic, 4);
    memcpy(out + 4, &status, 4);
    memcpy(out + 8, &flags, 4);
}

int peer_status_decode(const char in[PEER_STATUS_LEN], int32_t *status, uint32_t *flags)
{
    uint32_t magic;
    memcpy(&magic, in, 4);
    memcpy(status, in + 4, 4);
    memcpy(flags, in + 8, 4);
    return magic == PEER_STATUS_MAGIC ? 0 : -1;
}

int peer_wait(struct loop *l, struct loop_obj *o, struct orbit_endpoint *ep, bool write, size_t need, bool *armed)
{
    if (!l->futex)
        return 1;
    if (*armed)
        return 1;
    struct io_uring_sqe *sqe = loop_sqe(l);
    int r = write ? orbit_endpoint_prep_wait_writable_exact(ep, need, sqe)
                  : orbit_endpoint_prep_wait_readable_exact(ep, need, sqe);
    /* Not armed: the prep left a NOP, whose completion is ignored. */
    io_uring_sqe_set_data64(sqe, r == 0 ? loop_ud(o, PEER_OP_WAIT) : 0);
    if (r != 0)
        return r == 1 ? 0 : -1;
    o->pending++;
    *armed = true;
    STAT_ADD(l->st, futex_waits, 1);
    return 1;
}
