/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay worker: the loop's ring. Which io_uring features it runs with (each
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
#include "loop.h"

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

const char *loop_feature_name(unsigned i, unsigned *bit)
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
static int ring_init(struct loop *l, unsigned want)
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
        rc = io_uring_queue_init_params(2048, &l->ring, &p);
        if (rc == -EINVAL) {   /* before SUBMIT_ALL (5.18) */
            p = (struct io_uring_params){ .flags = IORING_SETUP_CQSIZE | tries[i], .cq_entries = 16384 };
            rc = io_uring_queue_init_params(2048, &l->ring, &p);
        }
        if (rc == 0) {
            if (tries[i] & IORING_SETUP_SINGLE_ISSUER)
                l->features |= WF_SINGLE_ISSUER;
            if (tries[i] & IORING_SETUP_DEFER_TASKRUN)
                l->features |= WF_DEFER_TASKRUN;
            if ((p.features & IORING_FEAT_CQE_SKIP) && (p.features & IORING_FEAT_REG_REG_RING) &&
                (want & WF_LINK))
                l->features |= WF_LINK;
            if ((p.features & IORING_FEAT_RECVSEND_BUNDLE) && (want & WF_BUNDLE))
                l->features |= WF_BUNDLE;
            if ((p.features & IORING_FEAT_MIN_TIMEOUT) && (p.features & IORING_FEAT_EXT_ARG))
                l->features |= want & (WF_BATCH | WF_SEND_WAIT);
        }
    }
    return rc;
}

/* The provided buffers the clients' multishot receives take from. */
static int bufring_init(struct loop *l)
{
    size_t ring_bytes = LOOP_BR_ENTRIES * sizeof(struct io_uring_buf);
    void *r = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return -errno;
    l->br = r;
    l->br_bufs = malloc((size_t)LOOP_BR_ENTRIES * LOOP_BR_SIZE);
    l->br_bid_at = malloc(65536 * sizeof *l->br_bid_at);   /* by the 16-bit ring position */
    l->br_pos_of = malloc(LOOP_BR_ENTRIES * sizeof *l->br_pos_of);
    if (!l->br_bufs || !l->br_bid_at || !l->br_pos_of)
        return -ENOMEM;
    io_uring_buf_ring_init(l->br);
    struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)r, .ring_entries = LOOP_BR_ENTRIES,
                                    .bgid = LOOP_BGID };
    int rc = io_uring_register_buf_ring(&l->ring, &reg, 0);
    if (rc < 0)
        return rc;
    l->br_registered = true;
    for (unsigned b = 0; b < LOOP_BR_ENTRIES; b++)
        loop_buf_put(l, (uint16_t)b);
    return 0;
}

static void bufring_free(struct loop *l)
{
    if (l->br_registered)
        io_uring_unregister_buf_ring(&l->ring, LOOP_BGID);
    if (l->br)
        munmap(l->br, LOOP_BR_ENTRIES * sizeof(struct io_uring_buf));
    free(l->br_bufs);
    free(l->br_bid_at);
    free(l->br_pos_of);
    l->br = NULL;
    l->br_bufs = NULL;
    l->br_bid_at = l->br_pos_of = NULL;
    l->br_registered = false;
}

/* A table for the clients' sockets as direct descriptors, as large as the
 * descriptor limit: a full table pauses accepts as EMFILE does. */
static int direct_init(struct loop *l)
{
    struct rlimit rl;
    unsigned n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur < 64 ? 64 : (unsigned)rl.rlim_cur;
    return io_uring_register_files_sparse(&l->ring, n);
}

static bool op_supported(struct io_uring *ring, int op)
{
    struct io_uring_probe *p = io_uring_get_probe_ring(ring);
    bool ok = p && io_uring_opcode_supported(p, op);
    io_uring_free_probe(p);
    return ok;
}

int loop_open(struct loop *l)
{
    unsigned not_asked = 0;
    l->features_off = env_off(&not_asked);
    unsigned want = ~(l->features_off | not_asked);
    l->features = 0;
    unsigned nice;
    int rc = env_uint("ORBIT_RELAY_BATCH_NR", W_BATCH_NR, 1, 4096, &l->batch_nr);
    if (rc == 0)
        rc = env_uint("ORBIT_RELAY_BATCH_US", W_BATCH_US, 1, 1000000, &l->batch_us);
    if (rc == 0)
        rc = env_uint("ORBIT_RELAY_YIELD_NICE", W_YIELD_NICE, 1, 19, &nice);
    if (rc == 0)
        rc = ring_init(l, want);
    if (rc < 0)
        return rc;
    /* A lower priority for the worker's loop (nice is per thread; the library's watcher keeps its own):
     * on a host it shares with its backend and clients, a completion no longer wakes it
     * ahead of the process about to make the next one, so more gather for each wait. */
    if ((want & WF_YIELD) && setpriority(PRIO_PROCESS, 0, (int)nice) == 0)
        l->features |= WF_YIELD;
    if (io_uring_register_ring_fd(&l->ring) == 1)
        l->features |= WF_REG_RING;
    if (want & WF_MULTISHOT_ACCEPT)
        l->features |= WF_MULTISHOT_ACCEPT;   /* an accept the kernel refuses turns it off */
    if ((want & WF_MULTISHOT_RECV) && bufring_init(l) == 0)
        l->features |= WF_MULTISHOT_RECV;
    else
        bufring_free(l);
    if (!(l->features & WF_MULTISHOT_RECV))
        l->features &= ~WF_BUNDLE;
    /* A splice needs the client's socket as a descriptor of the process, which
     * a direct one is not: with splice on, clients are accepted as plain ones. */
    if (want & WF_SPLICE)
        l->features |= WF_SPLICE;   /* a kernel that refuses it turns it off at the first (up_splice) */
    if ((want & WF_DIRECT) && !(l->features & WF_SPLICE) && direct_init(l) == 0)
        l->features |= WF_DIRECT;
    if ((want & WF_ZC) && op_supported(&l->ring, IORING_OP_SEND_ZC))
        l->features |= WF_ZC;
    l->features |= want & WF_QUIET_WAIT;   /* the worker's own: no kernel to ask */
    if (l->o->pinned)
        l->features |= WF_PIN;             /* by the supervisor, before the fork returned */
    return 0;
}

void loop_ring_exit(struct loop *l)
{
    bufring_free(l);
    io_uring_queue_exit(&l->ring);
}

struct io_uring_sqe *loop_sqe(struct loop *l)
{
    return relay_sqe(&l->ring);
}

/* ---- provided buffers ---------------------------------------------------- */

/* Buffer bid goes back at the ring's tail; where it sits is kept, for bundles,
 * by the 16-bit position: an entry is overwritten only 65536 returns later,
 * long after the completions that took it were read (even read out of order). */
void loop_buf_put(struct loop *l, uint16_t bid)
{
    uint16_t pos = l->br->tail;
    io_uring_buf_ring_add(l->br, l->br_bufs + (size_t)bid * LOOP_BR_SIZE, LOOP_BR_SIZE, bid,
                          io_uring_buf_ring_mask(LOOP_BR_ENTRIES), 0);
    l->br_bid_at[pos] = bid;
    l->br_pos_of[bid] = pos;
    /* The store-release of the tail publishes the entry written above. */
    io_uring_buf_ring_advance(l->br, 1);
}

/* The k-th buffer of a completion whose first buffer is bid: a bundle takes
 * buffers in ring order from the first. */
uint16_t loop_buf_nth(struct loop *l, uint16_t bid, unsigned k)
{
    if (bid >= LOOP_BR_ENTRIES)
        return 0;
    if (k == 0)
        return bid;
    return l->br_bid_at[(uint16_t)(l->br_pos_of[bid] + k)] % LOOP_BR_ENTRIES;
}

char *loop_buf_addr(struct loop *l, uint16_t bid)
{
    return l->br_bufs + (size_t)(bid % LOOP_BR_ENTRIES) * LOOP_BR_SIZE;
}

/* Every buffer a completion of res bytes carries goes back (its owner is gone). */
void loop_buf_drop(struct loop *l, uint32_t flags, int res)
{
    if (!(flags & IORING_CQE_F_BUFFER) || !l->br)
        return;
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
    unsigned n = res > 0 ? ((unsigned)res + LOOP_BR_SIZE - 1) / LOOP_BR_SIZE : 1;
    uint16_t bids[LOOP_BR_ENTRIES];
    for (unsigned k = 0; k < n && k < LOOP_BR_ENTRIES; k++)
        bids[k] = loop_buf_nth(l, bid, k);
    for (unsigned k = 0; k < n && k < LOOP_BR_ENTRIES; k++)
        loop_buf_put(l, bids[k]);
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
static unsigned batch_depth(const struct loop *l)
{
    return l->batch_depth < 1 ? 1 : l->batch_depth > l->batch_nr ? l->batch_nr : l->batch_depth;
}

void loop_waited(struct loop *l, unsigned seen)
{
    if (!(l->features & WF_BATCH))
        return;
    unsigned events = seen > l->wait_sends ? seen - l->wait_sends : 0;   /* the sends' own are no news */
    if (seen > l->wait_nr)
        l->batch_depth += 1 + l->batch_depth / 4;   /* more came than it waited for */
    else if (seen < l->wait_nr)
        l->batch_depth = events;                    /* the min-wait passed first */
    l->batch_depth = batch_depth(l);
}

/* The wait's depth and min-wait: a batched wait's (WF_BATCH), and past the
 * completions of this turn's sends (WF_SEND_WAIT). A send of a response
 * mostly completes within the enter that submits it, and a wait for one
 * completion then returns at once with nothing but it: a loop turn, and an
 * enter, only to read a send's result. Waiting for one more than the sends
 * makes the enter sleep until real work came; a send that did not complete
 * inline is one completion too many at worst, which the min-wait bounds. */
static unsigned wait_depth(struct loop *l, unsigned *min_us)
{
    unsigned nr = (l->features & WF_BATCH) ? batch_depth(l) : 1;
    *min_us = (l->features & WF_BATCH) ? l->batch_us : W_SEND_WAIT_US;
    l->wait_sends = 0;
    if (l->features & WF_SEND_WAIT)
        l->wait_sends = l->sends_queued < 4096 ? l->sends_queued : 4096;
    l->sends_queued = 0;
    l->wait_nr = nr + l->wait_sends;
    return l->wait_nr;
}

/* Submits what is queued and waits for wait_depth completions, returning
 * min-wait after the wait began if at least one is in, else at the first. */
int loop_enter(struct loop *l)
{
    unsigned min_us;
    unsigned nr = wait_depth(l, &min_us);
    if (nr == 1)
        return io_uring_submit_and_wait(&l->ring, 1);
    struct __kernel_timespec ts = { .tv_sec = 1 };
    struct io_uring_getevents_arg arg = { .sigmask = 0, .sigmask_sz = _NSIG / 8, .pad = min_us,
                                          .ts = (uint64_t)(uintptr_t)&ts };
    unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG;
    int fd = l->ring.ring_fd;
    if (l->features & WF_REG_RING) {
        flags |= IORING_ENTER_REGISTERED_RING;
        fd = l->ring.enter_ring_fd;
    }
    unsigned n = flush_sq(&l->ring);
    int rc = io_uring_enter2((unsigned)fd, n, nr, flags, (sigset_t *)&arg, sizeof arg);
    if (rc == -ETIME)
        rc = 0;
    if (rc == -EINVAL && !l->batch_checked) {   /* a kernel that reads no min-wait: plain waits */
        l->features &= ~(WF_BATCH | WF_SEND_WAIT);
        loop_publish(l);
        rc = io_uring_submit_and_wait(&l->ring, 1);
    }
    l->batch_checked = true;
    return rc;
}

/* ---- --stats -------------------------------------------------------------- */

void loop_publish(struct loop *l)
{
    if (l->futex)
        l->features |= WF_FUTEX;
    else
        l->features &= ~WF_FUTEX;
    atomic_store_explicit(&l->st->features, l->features, memory_order_relaxed);
    atomic_store_explicit(&l->st->features_off, l->features_off, memory_order_relaxed);
}
