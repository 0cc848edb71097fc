/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: its ring. Which io_uring features it runs with (each
 * with a fallback where the kernel refuses it, each forced off by an
 * ORBIT_RELAY_NO_* variable), the provided-buffer ring the clients' multishot
 * receives fill, and the one call that submits and waits for a batch.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "worker.h"

/* Debian 12's liburing 2.3 predates these (Linux 6.10 and 6.12). */
#ifndef IORING_FEAT_RECVSEND_BUNDLE
#define IORING_FEAT_RECVSEND_BUNDLE (1U << 14)
#endif
#ifndef IORING_FEAT_REG_REG_RING   /* Linux 6.3: after MSG_WAITALL sends (5.19) */
#define IORING_FEAT_REG_REG_RING (1U << 13)
#endif
#ifndef IORING_FEAT_MIN_TIMEOUT
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)
#endif

#define W_BATCH_NR 64     /* a batched wait's depth grows to this at most ... */
#define W_BATCH_US 150    /* ... and it returns this long after it began, with one or more */
#define W_SEND_WAIT_US 50 /* a wait past this turn's sends returns this long after it began at most */
#define W_YIELD_NICE 5    /* a yielding worker's nice value (ORBIT_RELAY_YIELD_NICE) */

/* Zero-copy sends and batched waits are off unless asked for (ORBIT_RELAY_ZC=1,
 * ORBIT_RELAY_BATCH=1): measured on loopback, where a zero-copy send copies all
 * the same, the first costs more completions (so more waits) than it saves; the
 * second halves system calls but holds completions back from the processes
 * that wait for them, and costs requests/s (a median 5-7 % in paired runs at
 * 64 connections, whatever its min-wait from 50 to 150 us). A yielding worker
 * (ORBIT_RELAY_YIELD=1) takes a smaller share of a busy host's CPUs. */
static const struct { unsigned bit; const char *on_env; } w_opt_in[] = {
    { WF_ZC, "ORBIT_RELAY_ZC" },
    { WF_BATCH, "ORBIT_RELAY_BATCH" },
    { WF_YIELD, "ORBIT_RELAY_YIELD" },
};

static const struct { unsigned bit; const char *name, *env; } w_features[] = {
    { WF_SINGLE_ISSUER, "single_issuer", NULL },
    { WF_DEFER_TASKRUN, "defer_taskrun", "ORBIT_RELAY_NO_DEFER_TASKRUN" },
    { WF_REG_RING, "registered_ring", NULL },
    { WF_MULTISHOT_ACCEPT, "multishot_accept", "ORBIT_RELAY_NO_MULTISHOT" },
    { WF_MULTISHOT_RECV, "multishot_recv", "ORBIT_RELAY_NO_MULTISHOT" },
    { WF_BUNDLE, "recv_bundle", "ORBIT_RELAY_NO_BUNDLE" },
    { WF_DIRECT, "direct_descriptors", "ORBIT_RELAY_NO_DIRECT" },
    { WF_ZC, "zerocopy_send", "ORBIT_RELAY_NO_ZC" },
    { WF_BATCH, "batched_wait", "ORBIT_RELAY_NO_BATCH" },
    { WF_FUTEX, "futex_wait", NULL },
    { WF_LINK, "linked_upstream", "ORBIT_RELAY_NO_LINK" },
    { WF_SEND_WAIT, "wait_past_sends", "ORBIT_RELAY_NO_WAIT_PAST_SENDS" },
    { WF_QUIET_WAIT, "quiet_own_wait", "ORBIT_RELAY_NO_QUIET_WAIT" },
    { WF_PIN, "pinned_cpu", "ORBIT_RELAY_NO_PIN" },
    { WF_SPLICE, "splice_body", "ORBIT_RELAY_NO_SPLICE" },
    { WF_YIELD, "yields_cpu", "ORBIT_RELAY_NO_YIELD" },
};
#define N_FEATURES (sizeof w_features / sizeof w_features[0])

const char *ring_feature_name(unsigned i, unsigned *bit)
{
    if (i >= N_FEATURES)
        return NULL;
    *bit = w_features[i].bit;
    return w_features[i].name;
}

/* The features an ORBIT_RELAY_NO_* variable (set, not "0") turns off. */
static unsigned env_off(unsigned *not_asked)
{
    unsigned off = 0;
    for (unsigned i = 0; i < N_FEATURES; i++) {
        if (w_features[i].env && relay_env_on(w_features[i].env))
            off |= w_features[i].bit;
    }
    for (unsigned i = 0; i < sizeof w_opt_in / sizeof w_opt_in[0]; i++) {
        if (!relay_env_on(w_opt_in[i].on_env))
            *not_asked |= w_opt_in[i].bit;
    }
    if (off & WF_MULTISHOT_RECV)
        off |= WF_BUNDLE;   /* a bundle is a multishot receive's */
    return off;
}

/* A batched wait's depth or min-wait from the environment: def when unset. */
static int env_uint(const char *name, unsigned def, unsigned lo, unsigned hi, unsigned *out)
{
    const char *v = getenv(name);
    *out = def;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || v[0] == '-' || n < lo || n > hi) {
        fprintf(stderr, "orbit-relay worker: %s=%s: not a number from %u to %u\n", name, v, lo, hi);
        return -EINVAL;
    }
    *out = (unsigned)n;
    return 0;
}

/* The ring: one thread submits and reaps, and its completions' task work waits
 * for its next wait (DEFER_TASKRUN) rather than interrupting it. Older kernels
 * get less of that, then a plain ring. */
static int ring_init(struct worker *w, unsigned want)
{
    static const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
        0,
    };
    int rc = -EINVAL;
    for (unsigned i = 0; i < 3 && rc == -EINVAL; i++) {
        if ((tries[i] & IORING_SETUP_DEFER_TASKRUN) && !(want & WF_DEFER_TASKRUN))
            continue;
        struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | tries[i],
                                     .cq_entries = 16384 };
        rc = io_uring_queue_init_params(2048, &w->ring, &p);
        if (rc == -EINVAL) {   /* before SUBMIT_ALL (5.18) */
            p = (struct io_uring_params){ .flags = IORING_SETUP_CQSIZE | tries[i], .cq_entries = 16384 };
            rc = io_uring_queue_init_params(2048, &w->ring, &p);
        }
        if (rc == 0) {
            if (tries[i] & IORING_SETUP_SINGLE_ISSUER)
                w->features |= WF_SINGLE_ISSUER;
            if (tries[i] & IORING_SETUP_DEFER_TASKRUN)
                w->features |= WF_DEFER_TASKRUN;
            if ((p.features & IORING_FEAT_CQE_SKIP) && (p.features & IORING_FEAT_REG_REG_RING) &&
                (want & WF_LINK))
                w->features |= WF_LINK;
            if ((p.features & IORING_FEAT_RECVSEND_BUNDLE) && (want & WF_BUNDLE))
                w->features |= WF_BUNDLE;
            if ((p.features & IORING_FEAT_MIN_TIMEOUT) && (p.features & IORING_FEAT_EXT_ARG))
                w->features |= want & (WF_BATCH | WF_SEND_WAIT);
        }
    }
    return rc;
}

/* The provided buffers the clients' multishot receives take from. */
static int bufring_init(struct worker *w)
{
    size_t ring_bytes = W_BR_ENTRIES * sizeof(struct io_uring_buf);
    void *r = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return -errno;
    w->br = r;
    w->br_bufs = malloc((size_t)W_BR_ENTRIES * W_BR_SIZE);
    w->br_bid_at = malloc(65536 * sizeof *w->br_bid_at);   /* by the 16-bit ring position */
    w->br_pos_of = malloc(W_BR_ENTRIES * sizeof *w->br_pos_of);
    if (!w->br_bufs || !w->br_bid_at || !w->br_pos_of)
        return -ENOMEM;
    io_uring_buf_ring_init(w->br);
    struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)r, .ring_entries = W_BR_ENTRIES,
                                    .bgid = W_BGID };
    int rc = io_uring_register_buf_ring(&w->ring, &reg, 0);
    if (rc < 0)
        return rc;
    w->br_registered = true;
    for (unsigned b = 0; b < W_BR_ENTRIES; b++)
        ring_buf_put(w, (uint16_t)b);
    return 0;
}

static void bufring_free(struct worker *w)
{
    if (w->br_registered)
        io_uring_unregister_buf_ring(&w->ring, W_BGID);
    if (w->br)
        munmap(w->br, W_BR_ENTRIES * sizeof(struct io_uring_buf));
    free(w->br_bufs);
    free(w->br_bid_at);
    free(w->br_pos_of);
    w->br = NULL;
    w->br_bufs = NULL;
    w->br_bid_at = w->br_pos_of = NULL;
    w->br_registered = false;
}

/* A table for the clients' sockets as direct descriptors, as large as the
 * descriptor limit: a full table pauses accepts as EMFILE does. */
static int direct_init(struct worker *w)
{
    struct rlimit rl;
    unsigned n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur < 64 ? 64 : (unsigned)rl.rlim_cur;
    return io_uring_register_files_sparse(&w->ring, n);
}

static bool op_supported(struct io_uring *ring, int op)
{
    struct io_uring_probe *p = io_uring_get_probe_ring(ring);
    bool ok = p && io_uring_opcode_supported(p, op);
    io_uring_free_probe(p);
    return ok;
}

int ring_open(struct worker *w)
{
    unsigned not_asked = 0;
    w->features_off = env_off(&not_asked);
    unsigned want = ~(w->features_off | not_asked);
    w->features = 0;
    unsigned nice;
    int rc = env_uint("ORBIT_RELAY_BATCH_NR", W_BATCH_NR, 1, 4096, &w->batch_nr);
    if (rc == 0)
        rc = env_uint("ORBIT_RELAY_BATCH_US", W_BATCH_US, 1, 1000000, &w->batch_us);
    if (rc == 0)
        rc = env_uint("ORBIT_RELAY_YIELD_NICE", W_YIELD_NICE, 1, 19, &nice);
    if (rc == 0)
        rc = ring_init(w, want);
    if (rc < 0)
        return rc;
    /* A lower priority for the worker's loop (nice is per thread; the library's watcher keeps its own):
     * on a host it shares with its backend and clients, a completion no longer wakes it
     * ahead of the process about to make the next one, so more gather for each wait. */
    if ((want & WF_YIELD) && setpriority(PRIO_PROCESS, 0, (int)nice) == 0)
        w->features |= WF_YIELD;
    if (io_uring_register_ring_fd(&w->ring) == 1)
        w->features |= WF_REG_RING;
    if (want & WF_MULTISHOT_ACCEPT)
        w->features |= WF_MULTISHOT_ACCEPT;   /* an accept the kernel refuses turns it off */
    if ((want & WF_MULTISHOT_RECV) && bufring_init(w) == 0)
        w->features |= WF_MULTISHOT_RECV;
    else
        bufring_free(w);
    if (!(w->features & WF_MULTISHOT_RECV))
        w->features &= ~WF_BUNDLE;
    /* A splice needs the client's socket as a descriptor of the process, which
     * a direct one is not: with splice on, clients are accepted as plain ones. */
    if (want & WF_SPLICE)
        w->features |= WF_SPLICE;   /* a kernel that refuses it turns it off at the first (up_splice) */
    if ((want & WF_DIRECT) && !(w->features & WF_SPLICE) && direct_init(w) == 0)
        w->features |= WF_DIRECT;
    if ((want & WF_ZC) && op_supported(&w->ring, IORING_OP_SEND_ZC))
        w->features |= WF_ZC;
    w->features |= want & WF_QUIET_WAIT;   /* the worker's own: no kernel to ask */
    if (w->o->pinned)
        w->features |= WF_PIN;             /* by the supervisor, before the fork returned */
    return 0;
}

void ring_close(struct worker *w)
{
    bufring_free(w);
}

/* ---- provided buffers ---------------------------------------------------- */

/* Buffer bid goes back at the ring's tail; where it sits is kept, for bundles,
 * by the 16-bit position: an entry is overwritten only 65536 returns later,
 * long after the completions that took it were read (even read out of order). */
void ring_buf_put(struct worker *w, uint16_t bid)
{
    uint16_t pos = w->br->tail;
    io_uring_buf_ring_add(w->br, w->br_bufs + (size_t)bid * W_BR_SIZE, W_BR_SIZE, bid,
                          io_uring_buf_ring_mask(W_BR_ENTRIES), 0);
    w->br_bid_at[pos] = bid;
    w->br_pos_of[bid] = pos;
    /* The store-release of the tail publishes the entry written above. */
    io_uring_buf_ring_advance(w->br, 1);
}

/* The k-th buffer of a completion whose first buffer is bid: a bundle takes
 * buffers in ring order from the first. */
uint16_t ring_buf_nth(struct worker *w, uint16_t bid, unsigned k)
{
    if (bid >= W_BR_ENTRIES)
        return 0;
    if (k == 0)
        return bid;
    return w->br_bid_at[(uint16_t)(w->br_pos_of[bid] + k)] % W_BR_ENTRIES;
}

char *ring_buf_addr(struct worker *w, uint16_t bid)
{
    return w->br_bufs + (size_t)(bid % W_BR_ENTRIES) * W_BR_SIZE;
}

/* Every buffer a completion of res bytes carries goes back (its owner is gone). */
void ring_buf_drop(struct worker *w, uint32_t flags, int res)
{
    if (!(flags & IORING_CQE_F_BUFFER) || !w->br)
        return;
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
    unsigned n = res > 0 ? ((unsigned)res + W_BR_SIZE - 1) / W_BR_SIZE : 1;
    uint16_t bids[W_BR_ENTRIES];
    for (unsigned k = 0; k < n && k < W_BR_ENTRIES; k++)
        bids[k] = ring_buf_nth(w, bid, k);
    for (unsigned k = 0; k < n && k < W_BR_ENTRIES; k++)
        ring_buf_put(w, bids[k]);
}

/* ---- entering ------------------------------------------------------------ */

/* The SQEs queued since the last call become visible to the kernel (what
 * liburing's submit does first); returns how many wait to be submitted. */
static unsigned flush_sq(struct io_uring *ring)
{
    struct io_uring_sq *sq = &ring->sq;
    unsigned tail = sq->sqe_tail;
    if (sq->sqe_head != tail) {
        sq->sqe_head = tail;
        /* Release: the SQE contents are written before the kernel sees the tail. */
        __atomic_store_n(sq->ktail, tail, __ATOMIC_RELEASE);
    }
    return tail - __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);
}

/*
 * A batched wait's depth follows what the last waits brought: while one
 * brings more completions than it waited for, it grows by a quarter (and one);
 * once one runs out of its min-wait first, it is what that one brought. So a
 * busy worker waits for about as many completions as come within the
 * min-wait, and a worker with one busy client among idle keep-alive
 * connections (whose completions do not come) waits for the first: one at a
 * time never brings more than asked.
 */
static unsigned batch_depth(const struct worker *w)
{
    return w->batch_depth < 1 ? 1 : w->batch_depth > w->batch_nr ? w->batch_nr : w->batch_depth;
}

void ring_waited(struct worker *w, unsigned seen)
{
    if (!(w->features & WF_BATCH))
        return;
    unsigned events = seen > w->wait_sends ? seen - w->wait_sends : 0;   /* the sends' own are no news */
    if (seen > w->wait_nr)
        w->batch_depth += 1 + w->batch_depth / 4;   /* more came than it waited for */
    else if (seen < w->wait_nr)
        w->batch_depth = events;                    /* the min-wait passed first */
    w->batch_depth = batch_depth(w);
}

/* The wait's depth and min-wait: a batched wait's (WF_BATCH), and past the
 * completions of this turn's sends (WF_SEND_WAIT). A send of a response
 * mostly completes within the enter that submits it, and a wait for one
 * completion then returns at once with nothing but it: a loop turn, and an
 * enter, only to read a send's result. Waiting for one more than the sends
 * makes the enter sleep until real work came; a send that did not complete
 * inline is one completion too many at worst, which the min-wait bounds. */
static unsigned wait_depth(struct worker *w, unsigned *min_us)
{
    unsigned nr = (w->features & WF_BATCH) ? batch_depth(w) : 1;
    *min_us = (w->features & WF_BATCH) ? w->batch_us : W_SEND_WAIT_US;
    w->wait_sends = 0;
    if (w->features & WF_SEND_WAIT)
        w->wait_sends = w->sends_queued < 4096 ? w->sends_queued : 4096;
    w->sends_queued = 0;
    w->wait_nr = nr + w->wait_sends;
    return w->wait_nr;
}

/* Submits what is queued and waits for wait_depth completions, returning
 * min-wait after the wait began if at least one is in, else at the first. */
int ring_submit_and_wait(struct worker *w)
{
    unsigned min_us;
    unsigned nr = wait_depth(w, &min_us);
    if (nr == 1)
        return io_uring_submit_and_wait(&w->ring, 1);
    struct __kernel_timespec ts = { .tv_sec = 1 };
    struct io_uring_getevents_arg arg = { .sigmask = 0, .sigmask_sz = _NSIG / 8, .pad = min_us,
                                          .ts = (uint64_t)(uintptr_t)&ts };
    unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG;
    int fd = w->ring.ring_fd;
    if (w->features & WF_REG_RING) {
        flags |= IORING_ENTER_REGISTERED_RING;
        fd = w->ring.enter_ring_fd;
    }
    unsigned n = flush_sq(&w->ring);
    int rc = io_uring_enter2((unsigned)fd, n, nr, flags, (sigset_t *)&arg, sizeof arg);
    if (rc == -ETIME)
        rc = 0;
    if (rc == -EINVAL && !w->batch_checked) {   /* a kernel that reads no min-wait: plain waits */
        w->features &= ~(WF_BATCH | WF_SEND_WAIT);
        ring_publish(w);
        rc = io_uring_submit_and_wait(&w->ring, 1);
    }
    w->batch_checked = true;
    return rc;
}

/* ---- --stats -------------------------------------------------------------- */

void ring_publish(struct worker *w)
{
    if (w->futex)
        w->features |= WF_FUTEX;
    else
        w->features &= ~WF_FUTEX;
    atomic_store_explicit(&w->st->features, w->features, memory_order_relaxed);
    atomic_store_explicit(&w->st->features_off, w->features_off, memory_order_relaxed);
}
