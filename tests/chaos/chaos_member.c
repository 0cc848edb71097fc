/* SPDX-License-Identifier: MIT */
/*
 * A chaos member: random operations on every table through the public API,
 * each bounded by a timeout, until the supervisor kills it. Payloads carry a
 * pattern the receiver checks byte by byte (stream frames, exchange chunks).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <orbit/uring.h>
#include "chaos.h"

static const orbit_key chaos_keys[CHAOS_KEYS] = {
    { 1, 11 }, { 2, 22 }, { 3, 33 }, { 4, 44 }, { 5, 55 }, { 6, 66 }, { 7, 77 }, { 8, 88 },
};

struct member {
    struct chaos_shared *sh;
    struct chaos_slot *slot;
    uint64_t rng;
    struct orbit_fleet *f;
    struct orbit_pool *pool;
    struct orbit_streams *st;
    struct orbit_exchanges *ex;
    struct orbit_admission *adm;
    orbit_id res[4];
    int n_res;
    struct orbit_execution exe[4];
    int n_exe;
    struct orbit_claim claims[3];
    int n_claims;
};

static void count(struct member *m, enum chaos_table t, int rc)
{
    atomic_fetch_add_explicit(&m->sh->ops[t], 1, memory_order_relaxed);
    if (rc < 0)
        atomic_fetch_add_explicit(&m->sh->errors[t], 1, memory_order_relaxed);
}

/* Bytes checked, and the ones that differ from the pattern (counted by whether a scribbler runs). */
static void check_bytes(struct member *m, const uint8_t *p, size_t len, uint64_t id, uint64_t seq, uint64_t from)
{
    uint64_t wrong = 0;
    for (size_t i = 0; i < len; i++)
        wrong += p[i] != chaos_pattern(id, seq, from + i);
    atomic_fetch_add_explicit(&m->sh->bytes_checked, len, memory_order_relaxed);
    if (wrong)
        atomic_fetch_add(atomic_load(&m->sh->hostile) ? &m->sh->scribbled_bytes : &m->sh->wrong_bytes, wrong);
}

/* A live node other than the supervisor's (node 0) to offer to; ours if none. */
static uint16_t pick_node(struct member *m)
{
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    ssize_t got = orbit_fleet_nodes(m->f, n, CHAOS_FLEET_CAPACITY);
    uint16_t live[CHAOS_FLEET_CAPACITY];
    int k = 0;
    for (ssize_t i = 0; i < got && i < CHAOS_FLEET_CAPACITY; i++)
        if (n[i].state == ORBIT_NODE_LIVE && n[i].node != 0)
            live[k++] = n[i].node;
    return k ? live[chaos_below(&m->rng, (uint32_t)k)] : orbit_fleet_node(m->f);
}

/* ---- pool ---------------------------------------------------------------- */

static int pool_register(struct member *m)
{
    if (m->n_res == 4)
        return 0;
    orbit_key key = chaos_keys[chaos_below(&m->rng, CHAOS_KEYS)];
    int rc = orbit_pool_register(m->pool, key, 1 + chaos_below(&m->rng, 3), &m->res[m->n_res]);
    m->n_res += rc == 0;
    return rc;
}

static void keep_execution(struct member *m, struct orbit_execution *e)
{
    if (m->n_exe < 4)
        m->exe[m->n_exe++] = *e;
    else
        orbit_execution_complete(e);
}

static int pool_acquire(struct member *m)
{
    orbit_key key = chaos_keys[chaos_below(&m->rng, CHAOS_KEYS)];
    struct orbit_limits lim = { .max_live = 2, .attempts = 2 };
    struct orbit_plan plan;
    int rc = orbit_pool_acquire(m->pool, key, &lim, &orbit_policy_local_first, &plan);
    if (rc < 0)
        return rc;
    struct orbit_execution e;
    orbit_id id;
    switch (plan.kind) {
    case ORBIT_PLAN_LOCAL_REUSE:
        if ((rc = orbit_pool_accept(m->pool, &plan.lease, &e)) == 0)
            keep_execution(m, &e);
        return rc;
    case ORBIT_PLAN_REMOTE_REUSE:
        return 0;   /* never brought to its owner: the owner's reconcile ages it out */
    case ORBIT_PLAN_CREATE:
        if (m->n_res < 4 && (rc = orbit_pool_register(m->pool, key, 2, &id)) == 0)
            m->res[m->n_res++] = id;
        orbit_permit_finish(&plan.permit);
        return rc;
    case ORBIT_PLAN_WAIT: {
        uint32_t now;
        rc = orbit_pool_wait_capacity(m->pool, key, plan.version, 10, &now);
        return rc == -ORBIT_ETIMEDOUT ? 0 : rc;
    }
    default:
        return 0;
    }
}

static int pool_retire(struct member *m)
{
    if (m->n_exe && chaos_below(&m->rng, 2)) {
        int i = (int)chaos_below(&m->rng, (uint32_t)m->n_exe);
        orbit_execution_complete(&m->exe[i]);
        m->exe[i] = m->exe[--m->n_exe];
        return 0;
    }
    if (!m->n_res)
        return 0;
    int i = (int)chaos_below(&m->rng, (uint32_t)m->n_res);
    if (chaos_below(&m->rng, 2))
        return orbit_pool_reconcile(m->pool, m->res[i], 0, 50);
    int rc = orbit_pool_unregister(m->pool, m->res[i]);
    m->res[i] = m->res[--m->n_res];
    return rc;
}

/* A watch on a key: delivered by the next change, or by this member's death report. */
static int pool_watch(struct member *m)
{
    orbit_key key = chaos_keys[chaos_below(&m->rng, CHAOS_KEYS)];
    uint32_t since;
    int rc = orbit_pool_version(m->pool, key, &since);
    return rc < 0 ? rc : orbit_pool_watch_since(m->pool, key, since);
}

static int op_pool(struct member *m)
{
    switch (chaos_below(&m->rng, 4)) {
    case 0:  return pool_register(m);
    case 1:  return pool_acquire(m);
    case 2:  return pool_watch(m);
    default: return pool_retire(m);
    }
}

/* ---- streams ------------------------------------------------------------- */

static void frame_fill(uint8_t *fr, uint64_t id, uint32_t seq)
{
    for (size_t i = 0; i < CHAOS_FRAME; i++)
        fr[i] = chaos_pattern(id, seq, i);
}

/* Create a stream, offer side B to a live node, write 1..16 frames, finish, close. */
static int stream_send(struct member *m)
{
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    int rc = orbit_streams_create(m->st, &a, &t);
    if (rc < 0)
        return rc;
    rc = orbit_streams_offer(m->st, &t, pick_node(m));
    uint32_t frames = 1 + chaos_below(&m->rng, 16);
    for (uint32_t s = 0; rc == 0 && s < frames; s++) {
        uint8_t fr[CHAOS_FRAME];
        frame_fill(fr, t.id, s);
        rc = orbit_endpoint_write_exact(a, fr, sizeof fr, 50);
    }
    if (rc == 0)
        rc = orbit_endpoint_finish(a);
    orbit_endpoint_close(a);
    return rc;
}

/* Read frames from an offered stream until its end, checking every byte. */
static int stream_receive(struct member *m)
{
    struct orbit_ticket t;
    int rc = orbit_streams_wait_offer(m->st, 5, &t);
    if (rc < 0)
        return rc == -ORBIT_ETIMEDOUT ? 0 : rc;
    struct orbit_endpoint *b;
    if ((rc = orbit_streams_open_ticket(m->st, &t, &b)) < 0)
        return rc;
    uint8_t fr[CHAOS_FRAME];
    for (uint32_t seq = 0; seq < 64; seq++) {
        rc = orbit_endpoint_read_exact(b, fr, sizeof fr, 100);
        if (rc < 0)
            break;
        check_bytes(m, fr, sizeof fr, t.id, seq, 0);
    }
    orbit_endpoint_close(b);
    return rc == -ORBIT_EPEERGONE || rc == 0 ? 0 : rc;
}

static int op_streams(struct member *m)
{
    return chaos_below(&m->rng, 2) ? stream_send(m) : stream_receive(m);
}

/* ---- exchange and arena ----------------------------------------------------- */

static int exchange_send(struct member *m)
{
    struct orbit_exchange *a;
    struct orbit_ticket t;
    int rc = orbit_exchange_create(m->ex, &a, &t);
    if (rc < 0)
        return rc;
    uint8_t buf[CHAOS_CHUNK_MAX];
    uint32_t chunks = 1 + chaos_below(&m->rng, 6);
    for (uint32_t i = 0; i < 16; i++)
        buf[i] = chaos_pattern(t.id, 0, i);
    rc = orbit_exchange_send_start(a, buf, 16, 50);
    if (rc == 0)
        rc = orbit_exchanges_offer(m->ex, &t, pick_node(m));
    for (uint32_t c = 1; rc == 0 && c <= chunks; c++) {
        size_t len = 1 + chaos_below(&m->rng, CHAOS_CHUNK_MAX);
        for (size_t i = 0; i < len; i++)
            buf[i] = chaos_pattern(t.id, c, i);
        rc = orbit_exchange_send_data(a, buf, len, 50);
    }
    if (rc == 0)
        rc = orbit_exchange_finish(a, 50);
    /* Wait for the receiver's end so the body is delivered before side A goes. */
    struct orbit_exchange_event ev;
    if (rc == 0 && orbit_exchange_next(a, &ev, 50) == 0 && !ev.chunk.released)
        orbit_chunk_release(&ev.chunk);
    orbit_exchange_close(a);
    return rc;
}

/* One received event: chunk bytes checked against (exchange id, DATA number; START is 0). */
static void exchange_check(struct member *m, orbit_id id, const struct orbit_exchange_event *ev, uint64_t *data_seen)
{
    uint64_t seq = ev->type == ORBIT_EXCHANGE_DATA ? ++*data_seen : 0;
    if (!ev->chunk.released)
        check_bytes(m, ev->chunk.data, ev->chunk.len, id, seq, 0);
}

static int exchange_receive(struct member *m)
{
    struct orbit_ticket t;
    int rc = orbit_exchanges_wait_offer(m->ex, 5, &t);
    if (rc < 0)
        return rc == -ORBIT_ETIMEDOUT ? 0 : rc;
    struct orbit_exchange *b;
    if ((rc = orbit_exchange_open(m->ex, &t, &b)) < 0)
        return rc;
    uint64_t data_seen = 0;
    for (int n = 0; n < 16; n++) {
        struct orbit_exchange_event ev;
        if ((rc = orbit_exchange_next(b, &ev, 100)) < 0)
            break;
        exchange_check(m, t.id, &ev, &data_seen);
        if (!ev.chunk.released)
            orbit_chunk_release(&ev.chunk);
        if (ev.type == ORBIT_EXCHANGE_FIN || ev.type == ORBIT_EXCHANGE_RESET)
            break;
    }
    orbit_exchange_close(b);
    return rc;
}

static int op_exchange(struct member *m)
{
    return chaos_below(&m->rng, 2) ? exchange_send(m) : exchange_receive(m);
}

/* ---- admission ------------------------------------------------------------ */

static int admission_claim(struct member *m)
{
    struct orbit_units u[2];
    size_t n = 1 + chaos_below(&m->rng, 2);
    uint32_t first = chaos_below(&m->rng, CHAOS_DOMAINS);
    for (size_t i = 0; i < n; i++)
        u[i] = (struct orbit_units){ 1 + (first + (uint32_t)i) % CHAOS_DOMAINS, 1 + chaos_below(&m->rng, 4) };
    struct orbit_demand d = { .claim = u, .n_claim = n };
    struct orbit_admit_result r;
    int rc = orbit_admission_try_claim(m->adm, &d, &r);
    if (rc == 0 && r.outcome == ORBIT_ADMIT_CLAIMED)
        m->claims[m->n_claims++] = r.claim;
    else if (rc == 0 && r.outcome == ORBIT_ADMIT_DEFERRED)
        rc = orbit_admission_wait(m->adm, r.release_epoch, 5, NULL);
    return rc == -ORBIT_ETIMEDOUT ? 0 : rc;
}

static int admission_release(struct member *m)
{
    int i = (int)chaos_below(&m->rng, (uint32_t)m->n_claims);
    int rc = orbit_admission_release(m->adm, &m->claims[i]);
    m->claims[i] = m->claims[--m->n_claims];
    return rc;
}

static int op_admission(struct member *m)
{
    if (m->n_claims < 3 && (m->n_claims == 0 || chaos_below(&m->rng, 2)))
        return admission_claim(m);
    return admission_release(m);
}

/* ---- io_uring: batched wakes, and waits ------------------------------------- */

/* Wakes of a release or completion queued in a ring and submitted later (or never: killed). */
static int uring_batched_wakes(struct member *m, struct io_uring *ring)
{
    int rc = orbit_uring_attach_wakes(ring);
    if (rc < 0)
        return rc;
    if (m->n_claims)
        rc = admission_release(m);
    else if (m->n_exe) {
        orbit_execution_complete(&m->exe[--m->n_exe]);
    } else
        rc = admission_claim(m);
    io_uring_submit(ring);
    orbit_uring_detach_wakes();
    return rc;
}

/* A FUTEX_WAIT SQE on a shared word, waited for briefly; the ring's exit cancels it. */
static int uring_wait(struct member *m, struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    uint32_t now;
    int rc;
    switch (chaos_below(&m->rng, 3)) {
    case 0:  rc = orbit_admission_prep_wait(m->adm, orbit_admission_epoch(m->adm), sqe); break;
    case 1:  rc = orbit_streams_prep_wait_offer(m->st, sqe); break;
    default: {
        orbit_key key = chaos_keys[chaos_below(&m->rng, CHAOS_KEYS)];
        rc = orbit_pool_version(m->pool, key, &now);
        if (rc == 0)
            rc = orbit_pool_prep_wait_capacity(m->pool, key, now, sqe);
    }
    }
    if (rc != 0)
        return rc == 1 || rc == -ORBIT_ENOTSUP ? 0 : rc;
    io_uring_submit(ring);
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = { 0, 5000000 };
    if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) == 0)
        io_uring_cqe_seen(ring, cqe);
    return 0;
}

static int op_uring(struct member *m)
{
    struct io_uring ring;
    if (io_uring_queue_init(8, &ring, 0) < 0)
        return -ORBIT_ENOTSUP;
    int rc = chaos_below(&m->rng, 2) ? uring_batched_wakes(m, &ring) : uring_wait(m, &ring);
    io_uring_queue_exit(&ring);
    return rc;
}

/* ---- the member ------------------------------------------------------------ */

static int member_open(struct member *m, const char *fleet)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CHAOS_FLEET_CAPACITY;
    struct orbit_pool_spec ps = chaos_pool_spec();
    struct orbit_stream_spec ss = chaos_stream_spec();
    struct orbit_exchange_spec es = chaos_exchange_spec();
    int rc = orbit_fleet_join(fleet, &o, &m->f);
    if (rc == 0)
        rc = orbit_pool_open(m->f, &ps, &m->pool);
    if (rc == 0)
        rc = orbit_streams_open(m->f, &ss, &m->st);
    if (rc == 0)
        rc = orbit_exchanges_open(m->f, &es, &m->ex);
    if (rc == 0)
        rc = orbit_admission_open(m->f, NULL, &m->adm);
    return rc;
}

void chaos_member(const char *fleet, struct chaos_shared *sh, int slot, uint64_t seed)
{
    struct member m = { .sh = sh, .slot = &sh->slot[slot], .rng = seed | 1 };
    int rc = member_open(&m, fleet);
    if (rc < 0) {
        /* A scribbled fleet may refuse us (corrupt, or every node record garbled): a clean exit. */
        bool refused = rc == -ORBIT_ECORRUPT || rc == -ORBIT_EGEOMETRY || rc == -ORBIT_EFULL;
        if (!refused)
            fprintf(stderr, "chaos member: open: %s\n", orbit_strerror(rc));
        _exit(refused ? 42 : 41);
    }
    atomic_store(&m.slot->node, orbit_fleet_node(m.f));
    atomic_store(&m.slot->incarnation, orbit_fleet_incarnation(m.f));
    atomic_store(&m.slot->ready, 1);
    static int (*const ops[T_COUNT])(struct member *) = { op_pool, op_streams, op_exchange, op_admission, op_uring };
    for (;;) {
        uint32_t focus = atomic_load_explicit(&m.slot->focus, memory_order_relaxed) % T_COUNT;
        enum chaos_table t = (enum chaos_table)(chaos_below(&m.rng, 4) ? focus : chaos_below(&m.rng, T_COUNT));
        atomic_store_explicit(&m.slot->table, t, memory_order_relaxed);
        count(&m, t, ops[t](&m));
        atomic_fetch_add_explicit(&m.slot->beats, 1, memory_order_relaxed);
        atomic_store_explicit(&m.slot->last_beat_ns, chaos_now_ns(), memory_order_release);
    }
}

/* ---- the scribbler ---------------------------------------------------------- */

static void scribble_one(const struct orbit_segment_info *si, struct chaos_shared *sh, uint64_t *rng)
{
    int fd = open(si->path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    uint32_t n = 1 + chaos_below(rng, 32);
    /* Past the 4 KiB segment header (checksummed: one garbled byte makes every later open
     * -ORBIT_ECORRUPT, and the fuzzers cover it). Most writes land in the table's first
     * pages (locks, counters, node records, ring heads), the rest anywhere. */
    for (uint32_t i = 0; size > 4096 && i < n; i++) {
        size_t table = size - 4096, span = chaos_below(rng, 4) ? (table < 65536 ? table : 65536) : table;
        p[4096 + chaos_rand(rng) % span] = (uint8_t)chaos_rand(rng);
    }
    munmap(p, size);
    atomic_fetch_add(&sh->hostile_bytes, n);
}

void chaos_scribbler(const char *fleet, struct chaos_shared *sh, uint64_t rounds, uint64_t seed)
{
    uint64_t rng = seed | 1;
    for (uint64_t r = 0; r < rounds; r++) {
        struct orbit_segment_info si[16];
        ssize_t n = orbit_fleet_segments(fleet, si, 16);
        if (n > 16)
            n = 16;
        if (n > 0)
            scribble_one(&si[chaos_below(&rng, (uint32_t)n)], sh, &rng);
        atomic_fetch_add(&sh->hostile_rounds, 1);
        struct timespec ts = { 0, (long)(5 + chaos_below(&rng, 20)) * 1000000L };
        nanosleep(&ts, NULL);
    }
    _exit(0);
}
