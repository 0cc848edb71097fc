/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: a long response body by splice. The rest of a
 * Content-Length body goes from the backend's socket into the upstream's pipe
 * and from the pipe into the client's socket: the kernel moves page
 * references (a local TCP sender's pages are not copied again), where the copy
 * path copies every byte into user space and back out, which was a third of a
 * worker's time at 64 KiB. Each splice is a system call of the worker's own, so
 * it pays only for bodies of W_SPLICE_MIN and more; a response's first read is
 * kept short (W_SPLICE_FIRST) so that such a body is mostly still in the socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <sys/socket.h>
#include "worker.h"

static uint64_t up_body_left(const struct upstream *up)
{
    return up->msg.framing == HM_BY_LENGTH && !up->msg.complete ? up->msg.left : 0;
}

/* The rest of a body of this head, left bytes long, goes by splice: Content-Length
 * framed, unchanged on the way (not de-chunked), long enough, and for our own
 * client (a remote requester reads it from a stream, through a buffer). */
static bool up_splice_wanted(const struct worker *w, const struct upstream *up, uint64_t left)
{
    const struct hm_msg *m = &up->msg;
    return (w->loop.features & WF_SPLICE) && up->sink == SINK_CLIENT && up->head_done && !m->complete &&
           m->framing == HM_BY_LENGTH && !m->dechunk && left >= W_SPLICE_MIN;
}

size_t up_recv_room(const struct worker *w, const struct upstream *up)
{
    if ((w->loop.features & WF_SPLICE) && up->sink == SINK_CLIENT && !up->head_done && up->len < W_SPLICE_FIRST)
        return W_SPLICE_FIRST - up->len;
    return W_UPBUF - up->len;
}

/*
 * A first read cut short by up_recv_room, whose head is in now (the body's
 * bytes from start on): when the body's rest is not for splice, what of it is
 * in the socket already is read at once, so that the response goes on in one
 * piece, as it would have without the cut.
 */
void up_read_rest_now(struct worker *w, struct upstream *up, size_t start)
{
    if (!up->capped)
        return;
    up->capped = false;
    const struct hm_msg *m = &up->msg;
    uint64_t have = up->len - start;
    if (m->framing == HM_NO_BODY || (m->framing == HM_BY_LENGTH && m->left <= have))
        return;
    if (m->framing == HM_BY_LENGTH && up_splice_wanted(w, up, m->left - have))
        return;
    ssize_t k = recv(up->fd, up->buf + up->len, W_UPBUF - up->len, MSG_DONTWAIT);
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

void up_pipe_close(struct upstream *up)
{
    if (up->pipe_rd < 0)
        return;
    close(up->pipe_rd);   /* with whatever a cut splice left in it */
    close(up->pipe_wr);
    up->pipe_rd = up->pipe_wr = -1;
}

/* The body is all in the client's socket: the job ends as a copied one does. */
static void up_splice_done(struct worker *w, struct upstream *up)
{
    up->splicing = false;
    up->len = 0;
    STAT_ADD(w->st, spliced, 1);
    up_job_done(w, up);
}

/* Backend socket to pipe: > 0 bytes moved, 0 none yet (a poll is armed), -1 the
 * body cannot go on (end of stream or an error before its last byte), -2 the
 * kernel splices no socket: splice is off for good, nothing moved. */
static ssize_t up_splice_in(struct worker *w, struct upstream *up)
{
    uint64_t left = up_body_left(up);
    ssize_t k = splice(up->fd, NULL, up->pipe_wr, NULL, left < W_SPLICE_MAX ? (size_t)left : W_SPLICE_MAX,
                       SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (k > 0) {
        up->pipe_len = (size_t)k;
        hm_body_passed(&up->msg, (uint64_t)k);
        up->t_start = w->loop.now;   /* the response timeout bounds each wait for more */
        return k;
    }
    if (k < 0 && errno == EAGAIN) {
        struct io_uring_sqe *sqe = loop_obj_sqe(&w->loop, &up->o, OP_U_POLL);
        io_uring_prep_poll_add(sqe, up->fd, POLLIN);
        return 0;
    }
    if (k < 0 && (errno == EINVAL || errno == ENOSYS)) {
        w->loop.features &= ~WF_SPLICE;
        loop_publish(&w->loop);
        return -2;
    }
    return -1;
}

/*
 * Moves the body on until it is all out, the backend has sent no more yet (a
 * poll waits for it), or the client's socket is full (the client waits for
 * room, then up_drained goes on). A loop, not a chain of calls: a long body
 * takes many turns.
 */
static void up_splice(struct worker *w, struct upstream *up)
{
    while (up->sink == SINK_CLIENT) {
        if (up->pipe_len == 0) {
            if (up_body_left(up) == 0) {
                up_splice_done(w, up);
                return;
            }
            ssize_t k = up_splice_in(w, up);
            if (k == 0)
                return;
            if (k == -2) {
                up->splicing = false;
                up_recv(w, up);
                return;
            }
            if (k < 0) {
                up_fail(w, up);   /* cut mid-body: the client's connection goes with it */
                return;
            }
        }
        struct client *c = up->sink_obj;
        up->delivered += up->pipe_len;
        up->handing = true;
        int r = client_send_pipe(w, c, up->pipe_rd, up->pipe_len);
        if (r == 0)
            return;
        up->handing = false;
        up->pipe_len = 0;
        if (r < 0) {
            client_on_send(w, c, r);   /* the client is gone: it unsinks us, up_drained ends us */
            return;
        }
    }
    up_abort(w, up);   /* no reader for the rest of this body: the connection cannot be reused */
}

/* The client took what the pipe held (or left): the body goes on. */
void up_splice_drained(struct worker *w, struct upstream *up)
{
    up->pipe_len = 0;
    up_splice(w, up);
}

/*
 * The response's head is in and its body's rest is for splice: the head and
 * the body bytes read with it go out now, by a plain send, so that the splice
 * follows within this turn; a socket that takes only part of them gets the rest
 * as an io_uring send, and the splice goes on from up_drained. False: not for
 * splice (the caller hands the pieces on as usual).
 */
bool up_splice_begin(struct worker *w, struct upstream *up)
{
    struct client *c = up->sink_obj;
    if (!up_splice_wanted(w, up, up_body_left(up)) || c->conn.send_armed || up_pipe(up) < 0)
        return false;   /* (a send in flight, our 100 Continue: nothing may overtake it) */
    up->splicing = true;
    const char *p;
    size_t n;
    while (up_next_piece(up, &p, &n)) {
        up->handing = true;
        int r = client_send_now(w, c, p, n);
        if (r == 0)
            return true;
        up->handing = false;
        if (r < 0) {
            client_on_send(w, c, r);
            return true;
        }
    }
    up_splice(w, up);
    return true;
}

void up_on_poll(struct worker *w, struct upstream *up, int res)
{
    if (res < 0)
        up_fail(w, up);
    else
        up_splice(w, up);
}
