/* SPDX-License-Identifier: MIT */
/*
 * Streams: the byte rings. head and tail are u64 byte counters; the ring index
 * is the counter masked by buffer_bytes - 1, so head - tail is what is queued.
 *
 * Wakes (the wake protocol of core/wait.h): a writer wakes its reader only when it publishes into a
 * ring the reader had drained (empty -> non-empty); a reader wakes its writer
 * only when a consume lifts the free space across the writer's stated need.
 * Bulk copies publish every quarter ring so both ends copy at the same time.
 */
#include <sched.h>
#include <string.h>
#include "ring.h"

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static size_t quarter(const struct orbit_streams *s)
{
    return s->buffer_bytes >= 4 ? s->buffer_bytes / 4 : s->buffer_bytes;
}

/* n bytes, 1 <= n <= 64, as two overlapping copies of the widest size that fits:
 * a few instructions whatever n is. */
static inline void copy_small(unsigned char *dst, const unsigned char *src, size_t n)
{
    if (n >= 32) {
        __builtin_memcpy(dst, src, 32);
        __builtin_memcpy(dst + n - 32, src + n - 32, 32);
    } else if (n >= 16) {
        __builtin_memcpy(dst, src, 16);
        __builtin_memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
        __builtin_memcpy(dst, src, 8);
        __builtin_memcpy(dst + n - 8, src + n - 8, 8);
    } else if (n >= 4) {
        __builtin_memcpy(dst, src, 4);
        __builtin_memcpy(dst + n - 4, src + n - 4, 4);
    } else {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

static inline void copy_bytes(unsigned char *dst, const unsigned char *src, size_t n)
{
    if (n == 0)
        return;
    if (n <= STREAM_SMALL_COPY)
        copy_small(dst, src, n);
    else
        memcpy(dst, src, n);
}

static void ring_put(unsigned char *ring, size_t cap, uint64_t pos, const unsigned char *src, size_t n)
{
    size_t start = (size_t)(pos & (cap - 1)), first = min_size(n, cap - start);
    copy_bytes(ring + start, src, first);
    if (first < n)
        memcpy(ring, src + first, n - first);
}

static void ring_get(const unsigned char *ring, size_t cap, uint64_t pos, unsigned char *dst, size_t n)
{
    size_t start = (size_t)(pos & (cap - 1)), first = min_size(n, cap - start);
    copy_bytes(dst, ring + start, first);
    if (first < n)
        memcpy(dst + first, ring, n - first);
}

/*
 * A wake found mid-copy. When the waiter last parked on the CPU we run on, it
 * cannot copy beside us: waking it now only has it preempt us for a quarter
 * ring and park again, so the wake waits for the end of the call (true). On
 * another CPU it goes out at once and both ends copy together.
 */
static bool wake_or_defer(struct orbit_streams *s, struct stream_slot *slot, unsigned dir, uint32_t mask)
{
    struct stream_dir *d = &slot->dir[dir];
    _Atomic uint32_t *hint = mask == WATCH_READER ? &d->reader_cpu : &d->writer_cpu;
    int cpu = sched_getcpu();
    if (cpu >= 0 && (uint32_t)cpu == atomic_load_explicit(hint, memory_order_relaxed))
        return true;
    stream_dir_wake(s, slot, dir, mask);
    return false;
}

void stream_note_cpu(_Atomic uint32_t *hint)
{
    int cpu = sched_getcpu();
    if (cpu >= 0 && atomic_load_explicit(hint, memory_order_relaxed) != (uint32_t)cpu)
        atomic_store_explicit(hint, (uint32_t)cpu, memory_order_relaxed);
}

/* One attempt: what fits now (exact: all of it or nothing). */
static ORB_NOINLINE ssize_t write_general(struct orbit_endpoint *ep, const unsigned char *buf,
                                                       size_t len, bool exact)
{
    struct orbit_streams *s = ep->s;
    size_t cap = s->buffer_bytes;
    int rc = stream_write_refusal(ep);
    if (rc < 0)
        return rc;
    if (exact && len > cap)
        return -ORBIT_ETOOLARGE;
    if (len == 0)
        return 0;
    uint64_t head = atomic_load_explicit(&ep->wr->head, memory_order_relaxed);
    /* The tail only grows: room seen at the last look is room still. Look again
     * (acquire: the reader's copies out of what it freed are done) only when that
     * is not enough for this write. */
    uint64_t used = head - ep->tail_seen;
    if (used > cap || cap - used < len) {
        ep->tail_seen = atomic_load_explicit(&ep->wr->tail, memory_order_acquire);
        used = head - ep->tail_seen;
    }
    if (used > cap)
        return -ORBIT_ECORRUPT;
    size_t room = cap - (size_t)used;
    if (room == 0 || (exact && room < len))
        return -ORBIT_EAGAIN;
    size_t n = min_size(len, room), step = exact ? n : quarter(s);
    unsigned dir = ep->side == ORBIT_SIDE_A ? 0 : 1;
    bool deferred = false;
    for (size_t done = 0; done < n;) {
        size_t k = min_size(step, n - done);
        ring_put(ep->wr_ring, cap, head + done, buf + done, k);
        if (publish_head(ep, head + done, head + done + k))
            deferred |= wake_or_defer(s, ep->slot, dir, WATCH_READER);
        done += k;
    }
    if (deferred)
        stream_dir_wake(s, ep->slot, dir, WATCH_READER);
    orb_tally_add(&s->tally, STREAM_TALLY_WRITTEN, n);
    orb_count(&s->ctr, STREAM_CTR_BYTES_WRITTEN, n);
    if (exact)
        orb_count(&s->ctr, STREAM_CTR_FRAMES_WRITTEN, 1);
    return (ssize_t)n;
}

/* One attempt: what is there now (exact: the whole frame or nothing). 0 = FIN. */
static ORB_NOINLINE ssize_t read_general(struct orbit_endpoint *ep, unsigned char *buf, size_t len,
                                                      bool exact)
{
    struct orbit_streams *s = ep->s;
    size_t cap = s->buffer_bytes;
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    /* Flags before head: FIN is raised after the last publish, so seeing FIN here
     * means the head loaded next is final. */
    uint32_t flags = atomic_load_explicit(&ep->rd->flags, memory_order_acquire);
    if (flags & DIR_RESET)
        return -ORBIT_ERESET;
    if (exact && len > cap)
        return -ORBIT_ETOOLARGE;
    if (len == 0)
        return 0;
    uint64_t tail = atomic_load_explicit(&ep->rd->tail, memory_order_relaxed);
    /* Acquire: the bytes up to head were copied in before the writer published it. */
    uint64_t avail = atomic_load_explicit(&ep->rd->head, memory_order_acquire) - tail;
    if (avail > cap)
        return -ORBIT_ECORRUPT;
    if (avail == 0 || (exact && avail < len)) {
        if (!(flags & DIR_FIN))
            return -ORBIT_EAGAIN;
        return avail == 0 && !exact ? 0 : -ORBIT_EMALFORMED;
    }
    size_t n = min_size(len, (size_t)avail), step = exact ? n : quarter(s);
    unsigned dir = ep->side == ORBIT_SIDE_A ? 1 : 0;
    bool deferred = false;
    for (size_t done = 0; done < n;) {
        size_t k = min_size(step, n - done);
        ring_get(ep->rd_ring, cap, tail + done, buf + done, k);
        if (publish_tail(ep, tail + done, tail + done + k))
            deferred |= wake_or_defer(s, ep->slot, dir, WATCH_WRITER);
        done += k;
    }
    if (deferred)
        stream_dir_wake(s, ep->slot, dir, WATCH_WRITER);
    orb_tally_add(&s->tally, STREAM_TALLY_READ, n);
    orb_count(&s->ctr, STREAM_CTR_BYTES_READ, n);
    if (exact)
        orb_count(&s->ctr, STREAM_CTR_FRAMES_READ, 1);
    return (ssize_t)n;
}

/*
 * The fast paths: a message of at most STREAM_SMALL_COPY bytes that fits
 * without wrapping, on a direction with no flag raised. The same checks and
 * the same publication as write_general and read_general, in a function small
 * enough to inline in the public calls; anything else returns 0 and takes the
 * general path, which decides it.
 */
#define STREAM_FLAGS_REFUSE_WRITE (DIR_RESET | DIR_FIN | DIR_READER_GONE)

/*
 * The line copy (stream_dir.copy_*), a seqlock the writer alone writes: copy_end
 * 0, then the bytes, then the new end; a reader that reads the same end, equal
 * to the head it loaded, before and after the bytes has the bytes of that write.
 */
static inline void line_copy_put(struct stream_dir *d, const unsigned char *buf, size_t len, uint64_t end)
{
    uint64_t w[2] = { 0, 0 };
    copy_small((unsigned char *)w, buf, len);
    atomic_store_explicit(&d->copy_end, 0, memory_order_relaxed);
    /* Release fence: a reader that reads a word stored below then reads this 0 or later. */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&d->copy_len, len, memory_order_relaxed);
    atomic_store_explicit(&d->copy_word[0], w[0], memory_order_relaxed);
    atomic_store_explicit(&d->copy_word[1], w[1], memory_order_relaxed);
    /* Release: a reader that reads this end reads these words or newer ones. */
    atomic_store_explicit(&d->copy_end, end, memory_order_release);
}

/* n of the avail bytes queued below head, from the line copy; false when it does not hold them. */
static inline bool line_copy_get(const struct stream_dir *d, uint64_t head, uint64_t avail, unsigned char *buf,
                                 size_t n)
{
    if (avail > STREAM_LINE_COPY || atomic_load_explicit(&d->copy_end, memory_order_acquire) != head)
        return false;
    uint64_t len = atomic_load_explicit(&d->copy_len, memory_order_relaxed);
    uint64_t w[2] = { atomic_load_explicit(&d->copy_word[0], memory_order_relaxed),
                      atomic_load_explicit(&d->copy_word[1], memory_order_relaxed) };
    /* Acquire fence: words from a later write come with copy_end moved, seen next. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&d->copy_end, memory_order_relaxed) != head || len < avail || len > STREAM_LINE_COPY)
        return false;   /* rewritten meanwhile, or a length that is not this write's */
    copy_small(buf, (const unsigned char *)w + (len - avail), n);
    return true;
}

static ORB_HOT size_t write_fast(struct orbit_endpoint *ep, const unsigned char *buf, size_t len, bool exact)
{
    struct stream_dir *d = ep->wr;
    size_t cap = ep->s->buffer_bytes;
    if (len - 1 >= STREAM_SMALL_COPY || len > cap || ep->write_shut || stream_ep_check(ep) < 0 ||
        (atomic_load_explicit(&d->flags, memory_order_acquire) & STREAM_FLAGS_REFUSE_WRITE))
        return 0;
    uint64_t head = atomic_load_explicit(&d->head, memory_order_relaxed);
    size_t start = (size_t)(head & (cap - 1));
    /* Room by the tail last seen (it only grows), and no wrap: else the general path looks again. */
    if (head - ep->tail_seen > cap - len || start > cap - len)
        return 0;
    copy_small(ep->wr_ring + start, buf, len);
    if (len <= STREAM_LINE_COPY)
        line_copy_put(d, buf, len, head + len);
    if (publish_head(ep, head, head + len))
        stream_dir_wake(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 0 : 1, WATCH_READER);
    orb_tally_add(&ep->s->tally, STREAM_TALLY_WRITTEN, len);
    orb_count(&ep->s->ctr, STREAM_CTR_BYTES_WRITTEN, len);
    if (exact)
        orb_count(&ep->s->ctr, STREAM_CTR_FRAMES_WRITTEN, 1);
    return len;
}

/* Also -ORBIT_EAGAIN for an empty ring that no flag ends: a waiting reader's first look. */
static ORB_HOT ssize_t read_fast(struct orbit_endpoint *ep, unsigned char *buf, size_t len, bool exact)
{
    struct stream_dir *d = ep->rd;
    size_t cap = ep->s->buffer_bytes;
    if (len == 0 || len > cap || stream_ep_check(ep) < 0)
        return 0;
    /* Flags before head, as in read_general: a FIN seen here means the head loaded next is final. */
    uint32_t flags = atomic_load_explicit(&d->flags, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
    /* Acquire: the bytes up to head were copied in before the writer published it. */
    uint64_t head = atomic_load_explicit(&d->head, memory_order_acquire), avail = head - tail;
    if ((flags & (DIR_RESET | DIR_FIN)) || avail > cap)
        return 0;   /* an ended direction or corruption: the general path reports it */
    if (avail < (exact ? len : 1))
        return -ORBIT_EAGAIN;
    size_t n = avail < len ? (size_t)avail : len;
    size_t start = (size_t)(tail & (cap - 1));
    if (n - 1 >= STREAM_SMALL_COPY || start > cap - n)
        return 0;   /* a large read or a wrap: the general path copies it */
    if (!line_copy_get(d, head, avail, buf, n))
        copy_small(buf, ep->rd_ring + start, n);
    if (publish_tail(ep, tail, tail + n))
        stream_dir_wake(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 1 : 0, WATCH_WRITER);
    orb_tally_add(&ep->s->tally, STREAM_TALLY_READ, n);
    orb_count(&ep->s->ctr, STREAM_CTR_BYTES_READ, n);
    if (exact)
        orb_count(&ep->s->ctr, STREAM_CTR_FRAMES_READ, 1);
    return (ssize_t)n;
}

/*
 * A read that found nothing polls the ring itself a few times before the
 * general wait. Each poll is the fast path's own attempt, so a small message
 * that comes within them (a ping-pong partner's answer) is copied out by the
 * poll that sees it: not seen by a wait predicate, then fetched again by a
 * second attempt after the wait's calls return. Polls only load (no need
 * stated, nothing armed), so the wait after a miss runs the wake protocol
 * unchanged. Not with timeout 0, not when the peer waits from our CPU (it runs
 * only once we stop), not when spinning is off or this CPU is contended.
 */
#define STREAM_READ_POLLS 16u

static ORB_HOT ssize_t read_poll(struct orbit_endpoint *ep, unsigned char *buf, size_t len, bool exact,
                                 int timeout_ms)
{
    ssize_t r = -ORBIT_EAGAIN;
    if (timeout_ms == 0 || atomic_load_explicit(&ep->peer_here, memory_order_relaxed) || !orb_wait_may_poll())
        return r;
    for (unsigned i = 0; i < STREAM_READ_POLLS && r == -ORBIT_EAGAIN; i++) {
        orb_cpu_relax();
        r = read_fast(ep, buf, len, exact);
    }
    return r;
}

/* One attempt, as write_general decides it; a small message takes the fast path. */
static inline ssize_t write_some(struct orbit_endpoint *ep, const unsigned char *buf, size_t len, bool exact)
{
    size_t quick = write_fast(ep, buf, len, exact);
    return quick ? (ssize_t)quick : write_general(ep, buf, len, exact);
}

static inline ssize_t read_some(struct orbit_endpoint *ep, unsigned char *buf, size_t len, bool exact)
{
    ssize_t quick = read_fast(ep, buf, len, exact);
    return quick ? quick : read_general(ep, buf, len, exact);
}

/* ---- predicates (also used by the io_uring preps) ------------------------- */

int stream_pred_readable(void *ctx)
{
    struct stream_room *want = ctx;
    struct orbit_endpoint *ep = want->ep;
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    if (atomic_load_explicit(&ep->rd->flags, memory_order_acquire) & (DIR_FIN | DIR_RESET))
        return 1;
    uint64_t queued = atomic_load_explicit(&ep->rd->head, memory_order_acquire) -
                      atomic_load_explicit(&ep->rd->tail, memory_order_relaxed);
    /* Past the ring is corruption: ready, and the read reports it. */
    return queued >= want->need || queued > ep->s->buffer_bytes;
}

int stream_pred_room(void *ctx)
{
    struct stream_room *room = ctx;
    struct orbit_endpoint *ep = room->ep;
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    if (ep->write_shut ||
        (atomic_load_explicit(&ep->wr->flags, memory_order_acquire) &
         (DIR_FIN | DIR_RESET | DIR_READER_GONE)))
        return 1;
    uint64_t used = atomic_load_explicit(&ep->wr->head, memory_order_relaxed) -
                    atomic_load_explicit(&ep->wr->tail, memory_order_acquire);
    /* A used count past the ring is corruption: ready, and the write reports it. */
    return used > ep->s->buffer_bytes || free_space(ep->s->buffer_bytes, used) >= room->need;
}

/* Only one end stores each need word; seq_cst pairs with the other end's load after
 * its publication. The stored value stays until the next wait states another. */
void stream_reader_need(struct orbit_endpoint *ep, uint32_t need)
{
    if (atomic_load_explicit(&ep->rd->reader_need, memory_order_relaxed) != need)
        atomic_store_explicit(&ep->rd->reader_need, need, memory_order_seq_cst);
}

void stream_writer_need(struct orbit_endpoint *ep, uint32_t need)
{
    if (atomic_load_explicit(&ep->wr->writer_need, memory_order_relaxed) != need)
        atomic_store_explicit(&ep->wr->writer_need, need, memory_order_seq_cst);
}

bool stream_peer_here(struct orbit_endpoint *ep)
{
    /* A plain count (no locked add): two threads of one endpoint only blur when it looks. */
    uint32_t n = atomic_load_explicit(&ep->waits, memory_order_relaxed);
    atomic_store_explicit(&ep->waits, n + 1, memory_order_relaxed);
    if (n % STREAM_PEER_LOOK != 0)
        return atomic_load_explicit(&ep->peer_here, memory_order_relaxed);
    int cpu = sched_getcpu();
    /* The peer waits as the reader of what we write, or as the writer of what we read. */
    bool here = cpu >= 0 && (atomic_load_explicit(&ep->wr->reader_cpu, memory_order_relaxed) == (uint32_t)cpu ||
                             atomic_load_explicit(&ep->rd->writer_cpu, memory_order_relaxed) == (uint32_t)cpu);
    atomic_store_explicit(&ep->peer_here, here, memory_order_relaxed);
    return here;
}

/*
 * The peer waits from our CPU: it runs only once we stop. A sched_yield hands
 * it the CPU at once, without the futex wake and park a pipe pays each way.
 * A yield that finds the peer not runnable returns at once, so after
 * STREAM_HANDOFF_YIELDS yields without an answer (each under a microsecond of
 * CPU) we park. Only the count bounds the loop: a yield that ran the peer for
 * long still ends in a check of pred.
 */
#define STREAM_HANDOFF_YIELDS 4u

static int hand_off(orb_wait_pred pred, void *ctx, const struct orb_deadline *deadline)
{
    if (orbit_spin_ns() == 0)
        return 0;   /* spinning is off: so is yielding in its place */
    for (unsigned i = 0; i < STREAM_HANDOFF_YIELDS; i++) {
        sched_yield();
        int r = pred(ctx);
        if (r != 0)
            return r;
        if (orb_deadline_passed(deadline))
            return 0;
    }
    return 0;
}

int stream_wait(struct orb_waitword *w, orb_wait_pred pred, void *ctx, const struct orb_deadline *deadline,
                struct orb_spin *spin, bool spin_here, _Atomic uint32_t *cpu_hint, struct orb_wait_stats *stats)
{
    int r = pred(ctx);
    if (r != 0)
        return r;
    if (orb_deadline_passed(deadline))
        return -ORBIT_ETIMEDOUT;
    if (spin_here) {
        r = orb_wait_spin(pred, ctx, spin, deadline);   /* no hint: a spin costs no sched_getcpu */
    } else {
        /* The hint first: a peer on our CPU that looks while we yield sees us here. */
        if (cpu_hint)
            stream_note_cpu(cpu_hint);
        r = hand_off(pred, ctx, deadline);
    }
    if (r != 0)
        return r;
    if (cpu_hint)
        stream_note_cpu(cpu_hint);   /* a waiter about to park says where from */
    return orb_wait_park_until(w, pred, ctx, deadline, spin, stats);
}

int stream_wait_data(struct orbit_endpoint *ep, uint32_t need, const struct orb_deadline *deadline)
{
    struct stream_room want = { ep, need ? need : 1 };
    stream_reader_need(ep, want.need);
    int r = stream_wait(&ep->rd->wait, stream_pred_readable, &want, deadline, &ep->read_spin,
                        !stream_peer_here(ep), &ep->rd->reader_cpu, &ep->s->stats);
    return r < 0 ? r : 0;
}

int stream_wait_room(struct orbit_endpoint *ep, uint32_t need, const struct orb_deadline *deadline)
{
    struct stream_room room = { ep, need ? need : 1 };
    stream_writer_need(ep, room.need);
    int r = stream_wait(&ep->wr->wait, stream_pred_room, &room, deadline, &ep->write_spin,
                        !stream_peer_here(ep), &ep->wr->writer_cpu, &ep->s->stats);
    return r < 0 ? r : 0;
}

/* After -ORBIT_EAGAIN from a try: ask for the doorbell, then look once more. */
void stream_watch(struct stream_dir *d, uint32_t bit)
{
    /* seq_cst RMW: a change published after it sees the bit; one before it the retry sees. */
    if (!(atomic_load_explicit(&d->watch, memory_order_relaxed) & bit))
        atomic_fetch_or(&d->watch, bit);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* ---- public calls --------------------------------------------------------- */

static ORB_COLD int buf_refused(const char *call, size_t len)
{
    return orb_fail(-ORBIT_EMALFORMED, "%s: buf is NULL with len %zu", call, len);
}

/* The entry of a call that moves bytes: the handle's check, the timeout (-1 for the try
 * forms, which take none), then a NULL buffer with bytes to move. */
static ORB_HOT int io_enter(const struct orbit_endpoint *ep, const void *buf,
                                                          size_t len, int timeout_ms, const char *call)
{
    int refused = endpoint_enter(ep, call);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, call) < 0)
        return -ORBIT_EMALFORMED;
    if (orb_unlikely(!buf && len))
        return buf_refused(call, len);
    return 0;
}

/* Why a read (or a wait for bytes) failed with rc, for orbit_last_error; returns rc. */
int stream_read_said(int rc, const struct orbit_endpoint *ep, size_t len, int timeout_ms)
{
    if (orb_error_in_call())
        return rc;
    switch (-rc) {
    case ORBIT_EAGAIN:     return orb_fail_text(rc, "nothing to read yet (would block)");
    case ORBIT_ETIMEDOUT:  return orb_fail(rc, "no bytes came within %d ms", timeout_ms);
    case ORBIT_ERESET:     return orb_fail_text(rc, "the peer reset the direction this side reads");
    case ORBIT_ETOOLARGE:  return orb_fail(rc, "a frame of %zu bytes is larger than the ring (%u bytes)", len,
                                           ep->s->buffer_bytes);
    case ORBIT_EMALFORMED: return orb_fail(rc, "the peer finished (FIN) before a whole %zu-byte frame came", len);
    case ORBIT_ECORRUPT:   return orb_fail_text(rc, "the ring's head and tail are out of bounds (garbled "
                                                    "shared memory)");
    default:               return stream_said(rc);
    }
}

/* Why a write (or a wait for room) failed with rc, for orbit_last_error; returns rc. */
int stream_write_said(int rc, const struct orbit_endpoint *ep, size_t len, int timeout_ms)
{
    if (orb_error_in_call())
        return rc;
    switch (-rc) {
    case ORBIT_EAGAIN:     return orb_fail_text(rc, "the ring is full (would block)");
    case ORBIT_ETIMEDOUT:  return orb_fail(rc, "no room for %zu bytes came within %d ms", len, timeout_ms);
    case ORBIT_ERESET:     return orb_fail_text(rc, "this direction was reset");
    case ORBIT_ECLOSED:    return orb_fail_text(rc, "this side's write half is finished (FIN) or reset");
    case ORBIT_EPEERGONE:  return orb_fail_text(rc, "the peer stopped reading (closed or stop_reading)");
    case ORBIT_ETOOLARGE:  return orb_fail(rc, "a frame of %zu bytes is larger than the ring (%u bytes)", len,
                                           ep->s->buffer_bytes);
    case ORBIT_ECORRUPT:   return orb_fail_text(rc, "the ring's head and tail are out of bounds (garbled "
                                                    "shared memory)");
    default:               return stream_said(rc);
    }
}

ssize_t orbit_endpoint_try_read(struct orbit_endpoint *ep, void *buf, size_t len)
{
    int refused = io_enter(ep, buf, len, -1, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = read_some(ep, buf, len, false);
    if (r == -ORBIT_EAGAIN) {
        stream_reader_need(ep, 1);
        stream_watch(ep->rd, WATCH_READER);
        r = read_some(ep, buf, len, false);
    }
    return r < 0 ? stream_read_said((int)r, ep, len, 0) : r;
}

int orbit_endpoint_try_read_exact(struct orbit_endpoint *ep, void *buf, size_t len)
{
    int refused = io_enter(ep, buf, len, -1, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = read_some(ep, buf, len, true);
    if (r == -ORBIT_EAGAIN) {
        stream_reader_need(ep, (uint32_t)len);   /* len <= buffer_bytes here */
        stream_watch(ep->rd, WATCH_READER);
        r = read_some(ep, buf, len, true);
    }
    return r < 0 ? stream_read_said((int)r, ep, len, 0) : 0;
}

/* orbit_endpoint_read after a first try that did not read: the general path, the waits. */
static ORB_NOINLINE ssize_t read_rest(struct orbit_endpoint *ep, unsigned char *buf, size_t len,
                                                   int timeout_ms, ssize_t r)
{
    if (r == -ORBIT_EAGAIN)
        r = read_poll(ep, buf, len, false, timeout_ms);
    if (r > 0)
        return r;
    if (r == 0)
        r = read_general(ep, buf, len, false);
    /* The deadline only once the first try found nothing: a read that need not wait reads no clock. */
    struct orb_deadline deadline = orb_deadline_in(r == -ORBIT_EAGAIN ? timeout_ms : -1);
    while (r == -ORBIT_EAGAIN) {
        int w = stream_wait_data(ep, 1, &deadline);
        if (w < 0)
            return stream_read_said(w, ep, len, timeout_ms);
        r = read_some(ep, buf, len, false);
    }
    return r < 0 ? stream_read_said((int)r, ep, len, timeout_ms) : r;
}

/* The entry checks and the fast path here; anything else out of line, so a small read's
 * frame stays small. */
ssize_t orbit_endpoint_read(struct orbit_endpoint *ep, void *buf, size_t len, int timeout_ms)
{
    int refused = io_enter(ep, buf, len, timeout_ms, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = read_fast(ep, buf, len, false);
    return orb_likely(r > 0) ? r : read_rest(ep, buf, len, timeout_ms, r);
}

int orbit_endpoint_read_exact(struct orbit_endpoint *ep, void *buf, size_t len, int timeout_ms)
{
    int refused = io_enter(ep, buf, len, timeout_ms, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = read_some(ep, buf, len, true);
    if (r == -ORBIT_EAGAIN) {
        r = read_poll(ep, buf, len, true, timeout_ms);
        if (r == 0)
            r = read_general(ep, buf, len, true);
    }
    struct orb_deadline deadline = orb_deadline_in(r == -ORBIT_EAGAIN ? timeout_ms : -1);
    while (r == -ORBIT_EAGAIN) {
        int w = stream_wait_data(ep, (uint32_t)len, &deadline);
        if (w < 0)
            return stream_read_said(w, ep, len, timeout_ms);
        r = read_some(ep, buf, len, true);
    }
    return r < 0 ? stream_read_said((int)r, ep, len, timeout_ms) : 0;
}

ssize_t orbit_endpoint_try_write(struct orbit_endpoint *ep, const void *buf, size_t len)
{
    int refused = io_enter(ep, buf, len, -1, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = write_some(ep, buf, len, false);
    if (r == -ORBIT_EAGAIN) {
        stream_writer_need(ep, 1);
        stream_watch(ep->wr, WATCH_WRITER);
        r = write_some(ep, buf, len, false);
    }
    return r < 0 ? stream_write_said((int)r, ep, len, 0) : r;
}

int orbit_endpoint_try_write_exact(struct orbit_endpoint *ep, const void *buf, size_t len)
{
    int refused = io_enter(ep, buf, len, -1, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = write_some(ep, buf, len, true);
    if (r == -ORBIT_EAGAIN) {
        stream_writer_need(ep, (uint32_t)len);   /* len <= buffer_bytes here */
        stream_watch(ep->wr, WATCH_WRITER);
        r = write_some(ep, buf, len, true);
    }
    return r < 0 ? stream_write_said((int)r, ep, len, 0) : 0;
}

/* orbit_endpoint_write after a first try that did not write: the general path, the waits. */
static ORB_NOINLINE ssize_t write_rest(struct orbit_endpoint *ep, const unsigned char *buf,
                                                    size_t len, int timeout_ms)
{
    ssize_t r = write_general(ep, buf, len, false);
    /* As in a read: the clock only for a write that has to wait. */
    struct orb_deadline deadline = orb_deadline_in(r == -ORBIT_EAGAIN ? timeout_ms : -1);
    while (r == -ORBIT_EAGAIN) {
        int w = stream_wait_room(ep, 1, &deadline);
        if (w < 0)
            return stream_write_said(w, ep, len, timeout_ms);
        r = write_some(ep, buf, len, false);
    }
    return r < 0 ? stream_write_said((int)r, ep, len, timeout_ms) : r;
}

/* The entry checks and the fast path here, as in orbit_endpoint_read. */
ssize_t orbit_endpoint_write(struct orbit_endpoint *ep, const void *buf, size_t len, int timeout_ms)
{
    int refused = io_enter(ep, buf, len, timeout_ms, __func__);
    if (refused < 0)
        return refused;
    size_t quick = write_fast(ep, buf, len, false);
    return orb_likely(quick != 0) ? (ssize_t)quick : write_rest(ep, buf, len, timeout_ms);
}

int orbit_endpoint_write_all(struct orbit_endpoint *ep, const void *buf, size_t len, int timeout_ms)
{
    int refused = io_enter(ep, buf, len, timeout_ms, __func__);
    if (refused < 0)
        return refused;
    const unsigned char *p = buf;
    struct orb_deadline deadline = { 0, true };
    bool waited = false;
    size_t done = 0;
    do {
        ssize_t r = write_some(ep, p + done, len - done, false);
        if (r >= 0) {
            done += (size_t)r;
            continue;
        }
        if (r != -ORBIT_EAGAIN)
            return stream_write_said((int)r, ep, len, timeout_ms);
        /* The deadline runs from the first wait: a call that never waits reads no clock. */
        if (!waited)
            deadline = orb_deadline_in(timeout_ms);
        waited = true;
        /* Wait for a quarter ring (or the rest): fewer, larger refills. The reader
         * frees it whenever it wants bytes past what the ring already holds. */
        int w = stream_wait_room(ep, (uint32_t)min_size(len - done, quarter(ep->s)), &deadline);
        if (w < 0)
            return stream_write_said(w, ep, len, timeout_ms);
    } while (done < len);
    return 0;
}

int orbit_endpoint_write_exact(struct orbit_endpoint *ep, const void *buf, size_t len, int timeout_ms)
{
    int refused = io_enter(ep, buf, len, timeout_ms, __func__);
    if (refused < 0)
        return refused;
    ssize_t r = write_some(ep, buf, len, true);
    struct orb_deadline deadline = orb_deadline_in(r == -ORBIT_EAGAIN ? timeout_ms : -1);
    while (r == -ORBIT_EAGAIN) {
        int w = stream_wait_room(ep, (uint32_t)len, &deadline);
        if (w < 0)
            return stream_write_said(w, ep, len, timeout_ms);
        r = write_some(ep, buf, len, true);
    }
    return r < 0 ? stream_write_said((int)r, ep, len, timeout_ms) : 0;
}

int orbit_endpoint_wait_readable(struct orbit_endpoint *ep, int timeout_ms)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return -ORBIT_EMALFORMED;
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    return stream_read_said(stream_wait_data(ep, 1, &deadline), ep, 1, timeout_ms);
}

int orbit_endpoint_wait_writable(struct orbit_endpoint *ep, int timeout_ms)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return -ORBIT_EMALFORMED;
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    return stream_write_said(stream_wait_room(ep, 1, &deadline), ep, 1, timeout_ms);
}

int orbit_endpoint_wait_writable_exact(struct orbit_endpoint *ep, size_t needed, int timeout_ms)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return -ORBIT_EMALFORMED;
    if (needed > ep->s->buffer_bytes)
        return stream_write_said(-ORBIT_ETOOLARGE, ep, needed, timeout_ms);
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    return stream_write_said(stream_wait_room(ep, (uint32_t)needed, &deadline), ep, needed, timeout_ms);
}

int orbit_endpoint_finish(struct orbit_endpoint *ep)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return stream_said(rc);
    if (ep->write_shut)
        return 0;
    ep->write_shut = true;
    stream_raise(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 0 : 1, DIR_FIN);
    return 0;
}

void orbit_endpoint_reset(struct orbit_endpoint *ep)
{
    if (endpoint_enter(ep, __func__) < 0)
        return;
    if (!ep || stream_ep_check(ep) < 0)
        return;
    ep->write_shut = true;
    stream_raise(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 0 : 1, DIR_RESET);
    orb_count(&ep->s->ctr, STREAM_CTR_RESETS, 1);
}

void orbit_endpoint_stop_reading(struct orbit_endpoint *ep)
{
    if (endpoint_enter(ep, __func__) < 0)
        return;
    if (!ep || stream_ep_check(ep) < 0)
        return;
    stream_raise(ep->s, ep->slot, ep->side == ORBIT_SIDE_A ? 1 : 0, DIR_READER_GONE);
}

static int pred_peer_closed(void *ctx)
{
    struct orbit_endpoint *ep = ctx;
    int rc = stream_ep_check(ep);
    if (rc < 0)
        return rc;
    return (atomic_load_explicit(&ep->wr->flags, memory_order_acquire) &
            (DIR_RESET | DIR_READER_GONE)) != 0;
}

int orbit_endpoint_peer_closed(struct orbit_endpoint *ep)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    int r = pred_peer_closed(ep);
    if (r == 0) {
        /* seq_cst RMW then a second look: a departure after it rings our doorbell. */
        atomic_fetch_or(&ep->wr->flags, DIR_CLOSE_WATCH);
        r = pred_peer_closed(ep);
    }
    return r < 0 ? stream_said(r) : r;
}

int orbit_endpoint_wait_peer_closed(struct orbit_endpoint *ep, int timeout_ms)
{
    int refused = endpoint_enter(ep, __func__);
    if (refused < 0)
        return refused;
    if (orb_check_timeout(timeout_ms, __func__) < 0)
        return -ORBIT_EMALFORMED;
    if (!ep)
        return -ORBIT_EMALFORMED;
    struct orb_deadline deadline = orb_deadline_in(timeout_ms);
    int r = stream_wait(&ep->wr->wait, pred_peer_closed, ep, &deadline, &ep->write_spin, true, NULL,
                        &ep->s->stats);
    if (r == -ORBIT_ETIMEDOUT)
        return orb_fail(r, "the peer neither closed nor reset within %d ms", timeout_ms);
    return r < 0 ? stream_said(r) : 0;
}
