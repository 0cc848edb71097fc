/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: a long response body by splice. The rest of a
 * Content-Length body goes from the backend's socket into the upstream's pipe
 * and from the pipe into the client's socket: the kernel moves page
 * references (a local TCP sender's pages are not copied again), where the copy
 * path copies every byte into user space and back out, which was a third of a
 * worker's time at 64 KiB. Each splice is a system call of the worker's own, so
 * it pays only for bodies of UP_SPLICE_MIN and more; a response's first read is
 * kept short (UP_SPLICE_FIRST) so that such a body is mostly still in the socket.
 * It moves bytes and says where it stopped; the upstream (upstream.c) decides
 * what follows.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <sys/socket.h>
#include "splice.h"

static uint64_t body_left(const struct upstream *up)
{
    return up->msg.framing == HM_BY_LENGTH && !up->msg.complete ? up->msg.left : 0;
}

/* The rest of a body of this head, left bytes long, goes by splice: Content-Length
 * framed, unchanged on the way (not de-chunked), long enough, and for a reader with a
 * socket (a remote requester reads it from a stream, through a buffer). */
static bool splice_wanted(const struct loop *l, const struct upstream *up, uint64_t left)
{
    const struct hm_msg *m = &up->msg;
    return (l->features & WF_SPLICE) && up->sink && up->sink->conn && up->head_done && !m->complete &&
           m->framing == HM_BY_LENGTH && !m->dechunk && left >= UP_SPLICE_MIN;
}

size_t splice_recv_room(const struct loop *l, const struct upstream *up)
{
    if ((l->features & WF_SPLICE) && up->sink && up->sink->conn && !up->head_done && up->len < UP_SPLICE_FIRST)
        return UP_SPLICE_FIRST - up->len;
    return UP_BUF - up->len;
}

void splice_read_rest_now(const struct loop *l, struct upstream *up, size_t start)
{
    if (!up->capped)
        return;
    up->capped = false;
    const struct hm_msg *m = &up->msg;
    uint64_t have = up->len - start;
    if (m->framing == HM_NO_BODY || (m->framing == HM_BY_LENGTH && m->left <= have))
        return;
    if (m->framing == HM_BY_LENGTH && splice_wanted(l, up, m->left - have))
        return;
    ssize_t k = recv(up->fd, up->buf + up->len, UP_BUF - up->len, MSG_DONTWAIT);
    if (k > 0)
        up->len += (size_t)k;   /* none there yet, or an error: the next receive learns it */
}

/* The upstream's pipe, made at its first splice; its socket stops blocking so
 * that a splice out of it never waits (its io_uring operations wait anyway). */
static int up_pipe(struct upstream *up)
{
    if (up->pipe_rd >= 0)
        return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    int fl = fcntl(up->fd, F_GETFL);
    if (fl < 0 || fcntl(up->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        close(p[0]);
        close(p[1]);
        return -errno;
    }
    up->pipe_rd = p[0];
    up->pipe_wr = p[1];
    return 0;
}

bool splice_ready(const struct loop *l, struct upstream *up)
{
    /* (a send in flight, our 100 Continue: nothing may overtake it) */
    return splice_wanted(l, up, body_left(up)) && !up->sink->conn->send_armed && up_pipe(up) == 0;
}

void splice_pipe_close(struct upstream *up)
{
    if (up->pipe_rd < 0)
        return;
    close(up->pipe_rd);   /* with whatever a cut splice left in it */
    close(up->pipe_wr);
    up->pipe_rd = up->pipe_wr = -1;
}

/* Backend socket to pipe: > 0 bytes moved, 0 none yet (a poll is armed), -1 the
 * body cannot go on (end of stream or an error before its last byte), -2 the
 * kernel splices no socket: splice is off for good, nothing moved. */
static ssize_t splice_in(struct loop *l, struct upstream *up)
{
    uint64_t left = body_left(up);
    ssize_t k = splice(up->fd, NULL, up->pipe_wr, NULL, left < UP_SPLICE_MAX ? (size_t)left : UP_SPLICE_MAX,
                       SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (k > 0) {
        up->pipe_len = (size_t)k;
        hm_body_passed(&up->msg, (uint64_t)k);
        up->t_start = l->now;   /* the response timeout bounds each wait for more */
        return k;
    }
    if (k < 0 && errno == EAGAIN) {
        struct io_uring_sqe *sqe = loop_obj_sqe(l, &up->o, UP_OP_POLL);
        io_uring_prep_poll_add(sqe, up->fd, POLLIN);
        return 0;
    }
    if (k < 0 && (errno == EINVAL || errno == ENOSYS)) {
        l->features &= ~WF_SPLICE;
        loop_publish(l);
        return -2;
    }
    return -1;
}

/*
 * Moves the body on until it is all out, the backend has sent no more yet (a
 * poll waits for it), or the client's socket is full (its conn waits for
 * room). A loop, not a chain of calls: a long body takes many turns.
 */
enum splice_stop splice_move(struct loop *l, struct upstream *up, int *err)
{
    while (up->sink && up->sink->conn) {
        if (up->pipe_len == 0) {
            if (body_left(up) == 0)
                return SPLICE_DONE;
            ssize_t k = splice_in(l, up);
            if (k == 0)
                return SPLICE_WAIT;
            if (k == -2)
                return SPLICE_OFF;
            if (k < 0)
                return SPLICE_CUT;
        }
        up->delivered += up->pipe_len;
        up->handing = true;
        int r = conn_send_pipe(l, up->sink->conn, up->pipe_rd, up->pipe_len);
        if (r == 0)
            return SPLICE_WAIT;
        up->handing = false;
        up->pipe_len = 0;
        if (r < 0) {
            *err = r;
            return SPLICE_BROKEN;
        }
    }
    return SPLICE_NO_READER;
}
