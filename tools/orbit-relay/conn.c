/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: a client's socket. A multishot receive fills provided
 * buffers as bytes come; they are copied where the reader asked (rd_dst) or
 * kept in the stash until it asks. A stash past CONN_STASH_MAX cancels the
 * receive: the client waits in its socket buffer, as it would between
 * single receives. A piece in a pipe (the upstream's splice) goes to the
 * socket by splice: the kernel moves its pages, nothing is copied through
 * user space.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include "conn.h"

void conn_init(struct conn *c, int fd, bool direct)
{
    c->fd = fd;
    c->direct = direct;
    c->pipe_rd = -1;
}

void conn_free(struct conn *c)
{
    free(c->stash);
    c->stash = NULL;
}

/* The socket an SQE works on: a direct descriptor is an index in the ring's table. */
static void conn_sqe_fd(const struct conn *c, struct io_uring_sqe *sqe)
{
    if (c->direct)
        sqe->flags |= IOSQE_FIXED_FILE;
}

static bool conn_ms(const struct conn_set *s, const struct conn *c)
{
    return (s->l->features & WF_MULTISHOT_RECV) && !c->ms_off;
}

size_t conn_stash_avail(const struct conn *c)
{
    return c->stash_len - c->stash_off;
}

static void ms_arm(struct conn_set *s, struct conn *c)
{
    if (c->ms_armed || c->ms_eof || c->ms_err || c->closing || conn_stash_avail(c) > CONN_STASH_MAX)
        return;
    struct io_uring_sqe *sqe = loop_obj_sqe(s->l, &c->o, CONN_OP_MRECV);
    io_uring_prep_recv(sqe, c->fd, NULL, 0, 0);
    sqe->ioprio |= IORING_RECV_MULTISHOT;
    if (s->l->features & WF_BUNDLE)
        sqe->ioprio |= LOOP_RECVSEND_BUNDLE;
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = LOOP_BGID;
    conn_sqe_fd(c, sqe);
    c->ms_armed = true;
    c->ms_paused = false;
}

static void ready_push(struct conn_set *s, struct conn *c)
{
    if (c->on_ready)
        return;
    c->on_ready = true;
    c->ready_next = s->ready;
    s->ready = c;
}

void conn_read(struct conn_set *s, struct conn *c, char *dst, size_t n)
{
    c->recv_armed = true;
    if (!conn_ms(s, c)) {
        struct io_uring_sqe *sqe = loop_obj_sqe(s->l, &c->o, CONN_OP_RECV);
        io_uring_prep_recv(sqe, c->fd, dst, n, 0);
        conn_sqe_fd(c, sqe);
        return;
    }
    c->rd_dst = dst;
    c->rd_n = n;
    if (conn_stash_avail(c) || c->ms_eof || c->ms_err)
        ready_push(s, c);
    else
        ms_arm(s, c);
}

static int stash_put(struct conn *c, const char *p, size_t n)
{
    if (c->stash_off == c->stash_len)
        c->stash_off = c->stash_len = 0;
    if (c->stash_cap - c->stash_len < n && c->stash_off) {
        memmove(c->stash, c->stash + c->stash_off, conn_stash_avail(c));
        c->stash_len -= c->stash_off;
        c->stash_off = 0;
    }
    if (c->stash_cap - c->stash_len < n) {
        size_t cap = c->stash_cap ? c->stash_cap : LOOP_BR_SIZE;
        while (cap - c->stash_len < n)
            cap *= 2;
        char *ns = realloc(c->stash, cap);
        if (!ns)
            return -1;
        c->stash = ns;
        c->stash_cap = cap;
    }
    memcpy(c->stash + c->stash_len, p, n);
    c->stash_len += n;
    return 0;
}

/* The read in progress is answered with res: the reader hears of it unless the conn closes. */
static enum conn_event read_done(struct conn *c, int res, int *out)
{
    c->recv_armed = false;
    if (c->closing)
        return CONN_NOTHING;
    *out = res;
    return CONN_READ;
}

/* The stash's next bytes go where the reader asked; an end or error once it is empty. */
static enum conn_event stash_deliver(struct conn_set *s, struct conn *c, int *out)
{
    if (c->closing || !c->recv_armed)
        return CONN_NOTHING;
    size_t k = conn_stash_avail(c) < c->rd_n ? conn_stash_avail(c) : c->rd_n;
    if (k == 0 && conn_stash_avail(c))
        return read_done(c, -ENOBUFS, out);   /* asked for nothing: cannot happen */
    if (k) {
        memcpy(c->rd_dst, c->stash + c->stash_off, k);
        c->stash_off += k;
        if (c->ms_paused && !c->ms_armed && conn_stash_avail(c) <= CONN_STASH_MAX / 2)
            ms_arm(s, c);
        return read_done(c, (int)k, out);
    }
    if (c->ms_eof || c->ms_err)
        return read_done(c, c->ms_eof ? 0 : c->ms_err, out);
    return CONN_NOTHING;
}

struct conn *conn_ready_take(struct conn_set *s, enum conn_event *ev, int *res)
{
    while (s->ready) {
        struct conn *c = s->ready;
        s->ready = c->ready_next;
        c->on_ready = false;
        if (!c->o.dead && (*ev = stash_deliver(s, c, res)) != CONN_NOTHING)
            return c;
    }
    return NULL;
}

/* A completion's res bytes in its buffers: to rd_dst while the reader asks, the rest to
 * the stash; every buffer goes back to the ring. Returns the bytes given to rd_dst. */
static size_t ms_take(struct conn_set *s, struct conn *c, uint32_t flags, size_t res, bool *bad)
{
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT), bids[LOOP_BR_ENTRIES];
    unsigned n = (unsigned)((res + LOOP_BR_SIZE - 1) / LOOP_BR_SIZE);
    if (n > LOOP_BR_ENTRIES)
        n = LOOP_BR_ENTRIES;
    for (unsigned k = 0; k < n; k++)
        bids[k] = loop_buf_nth(s->l, bid, k);
    size_t got = 0, left = res;
    for (unsigned k = 0; k < n; k++) {
        const char *p = loop_buf_addr(s->l, bids[k]);
        size_t len = left < LOOP_BR_SIZE ? left : LOOP_BR_SIZE, direct = 0;
        if (c->recv_armed && !conn_stash_avail(c) && c->rd_n > got) {
            direct = c->rd_n - got < len ? c->rd_n - got : len;
            memcpy(c->rd_dst + got, p, direct);
            got += direct;
        }
        if (len > direct && stash_put(c, p + direct, len - direct) < 0)
            *bad = true;
        left -= len;
    }
    for (unsigned k = 0; k < n; k++)
        loop_buf_put(s->l, bids[k]);
    return got;
}

static enum conn_event on_mrecv(struct conn_set *s, struct conn *c, int res, uint32_t flags, int *out)
{
    bool more = flags & IORING_CQE_F_MORE, bad = false;
    size_t got = 0;
    if (!more)
        c->ms_armed = false;
    if (res > 0 && (flags & IORING_CQE_F_BUFFER) && !c->closing)
        got = ms_take(s, c, flags, (size_t)res, &bad);
    else
        loop_buf_drop(s->l, flags, res);
    if (c->closing)
        return CONN_NOTHING;
    if (bad)
        c->ms_err = -ENOMEM;
    else if (res == 0)
        c->ms_eof = true;
    else if (res < 0 && res != -ENOBUFS && res != -ECANCELED)
        c->ms_err = res;   /* ENOBUFS: the ring ran dry; ECANCELED: paused */
    if (more && conn_stash_avail(c) > CONN_STASH_MAX) {
        loop_cancel(s->l, &c->o, CONN_OP_MRECV);   /* the client outran its reader: pause */
        c->ms_paused = true;
    }
    if (!more && !c->ms_paused)
        ms_arm(s, c);
    if (got)
        return read_done(c, (int)got, out);
    if (c->recv_armed && (conn_stash_avail(c) || c->ms_eof || c->ms_err))
        ready_push(s, c);
    return CONN_NOTHING;
}

/* A send of n bytes at p: zero-copy when long enough (its buffer stays ours until
 * the kernel's notification, which conn_on_cqe waits for). */
static void send_prep(struct loop *l, struct conn *c, const char *p, size_t n)
{
    struct io_uring_sqe *sqe = loop_obj_sqe(l, &c->o, CONN_OP_SEND);
    if ((l->features & WF_ZC) && n >= CONN_ZC_MIN)
        io_uring_prep_send_zc(sqe, c->fd, p, n, MSG_NOSIGNAL, 0);
    else
        io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
    conn_sqe_fd(c, sqe);
    c->send_armed = true;
    l->sends_queued++;
}

/* A piece of n bytes at p, or in the pipe pipe_rd, becomes the send in progress. */
static void piece_begin(struct loop *l, struct conn *c, const char *p, int pipe_rd, size_t n)
{
    c->out = p;
    c->pipe_rd = pipe_rd;
    c->out_len = n;
    c->out_off = 0;
    c->t_send = l->now;
}

void conn_send(struct loop *l, struct conn *c, const char *p, size_t n)
{
    piece_begin(l, c, p, -1, n);
    send_prep(l, c, p, n);
}

/* A send's completion: the rest of the piece goes, or the piece is done. */
static enum conn_event on_send(struct conn_set *s, struct conn *c, int res, int *out)
{
    c->send_armed = false;
    if (c->closing)
        return CONN_NOTHING;
    if (res > 0) {
        c->out_off += (size_t)res;
        c->t_send = s->l->now;
        if (c->out_off < c->out_len) {
            send_prep(s->l, c, c->out + c->out_off, c->out_len - c->out_off);
            return CONN_NOTHING;
        }
    }
    *out = res;
    return CONN_SENT;
}

/* The rest of the piece from the pipe: 1 all went, 0 the socket is full (a poll
 * for room is armed: CONN_OP_POLL goes on), or a negative errno. */
static int pipe_step(struct loop *l, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t k = splice(c->pipe_rd, NULL, c->fd, NULL, c->out_len - c->out_off, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (k > 0) {
            c->out_off += (size_t)k;
            c->t_send = l->now;
            continue;
        }
        if (k < 0 && errno == EAGAIN) {
            struct io_uring_sqe *sqe = loop_obj_sqe(l, &c->o, CONN_OP_POLL);
            io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
            c->send_armed = true;
            return 0;
        }
        return k < 0 ? -errno : -EPIPE;
    }
    c->pipe_rd = -1;
    return 1;
}

int conn_send_now(struct loop *l, struct conn *c, const char *p, size_t n)
{
    piece_begin(l, c, p, -1, n);
    ssize_t k = send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k == (ssize_t)n)
        return 1;
    if (k < 0 && errno != EAGAIN)
        return -errno;
    c->out_off = k > 0 ? (size_t)k : 0;
    send_prep(l, c, p + c->out_off, n - c->out_off);
    return 0;
}

int conn_send_pipe(struct loop *l, struct conn *c, int pipe_rd, size_t n)
{
    piece_begin(l, c, NULL, pipe_rd, n);
    return pipe_step(l, c);
}

/* Room in the socket (or its end): the rest of the piece in the pipe goes on. */
static enum conn_event on_poll(struct conn_set *s, struct conn *c, int res, int *out)
{
    c->send_armed = false;
    if (c->closing)
        return CONN_NOTHING;
    int r = res < 0 ? res : pipe_step(s->l, c);
    if (r == 0)
        return CONN_NOTHING;
    *out = r;
    return CONN_SENT;
}

enum conn_event conn_on_cqe(struct conn_set *s, struct conn *c, unsigned op, int res, uint32_t flags, int *out)
{
    switch (op) {
    case CONN_OP_RECV:
        return read_done(c, res, out);
    case CONN_OP_MRECV:
        return on_mrecv(s, c, res, flags, out);
    case CONN_OP_SEND:
        /* A zero-copy send completes twice: its result (F_MORE), then the notification
         * that the kernel let go of the buffer; only then is the send done. */
        if (flags & IORING_CQE_F_NOTIF)
            return on_send(s, c, c->zc_res, out);
        if (flags & IORING_CQE_F_MORE) {
            c->zc_res = res;
            return CONN_NOTHING;
        }
        return on_send(s, c, res, out);
    case CONN_OP_POLL:
        return on_poll(s, c, res, out);
    default:
        return CONN_NOTHING;
    }
}

void conn_shutdown(struct loop *l, struct conn *c, bool close_too)
{
    if (!c->direct) {
        shutdown(c->fd, SHUT_RDWR);
        if (close_too)
            close(c->fd);
        return;
    }
    struct io_uring_sqe *sqe = loop_sqe(l);
    io_uring_prep_shutdown(sqe, c->fd, SHUT_RDWR);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS | (close_too ? IOSQE_IO_HARDLINK : 0);
    io_uring_sqe_set_data64(sqe, 0);
    if (!close_too)
        return;
    /* Hard-linked: the slot is freed after the shutdown, even one that failed. */
    sqe = loop_sqe(l);
    io_uring_prep_close_direct(sqe, (unsigned)c->fd);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, 0);
}
