/* SPDX-License-Identifier: MIT */
/*
 * A chaos member: random operations on every table through the public API,
 * each bounded by a timeout, until the supervisor kills it. Payloads carry a
 * pattern the receiver checks byte by byte (stream frames, exchange chunks).
 * Outside the hostile phase a member also runs orbit_fleet_reap now and then
 * and checks its own node still carries its life (a live member reaped is a
 * false death). A member asked to (fork_at) forks a child mid-run: the child
 * checks the parent's fleet and table handles are refused (-ORBIT_EFORKED,
 * the parent's own resources and claims among them), that the parent's node
 * is -ORBIT_ECLAIMED and untouched, then joins as its own node and works like any
 * member until it is killed -9 or exits after kid_ops operations. The parent
 * never waits for it: a child's pid stays pinned until the supervisor (the
 * subreaper of orphans) reaps it.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <orbit/inspect.h>
#include <orbit/uring.h>
#include "chaos.h"

static const orbit_key chaos_keys[CHAOS_KEYS] = {
    { 1, 11 }, { 2, 22 }, { 3, 33 }, { 4, 44 }, { 5, 55 }, { 6, 66 }, { 7, 77 }, { 8, 88 },
};

struct member {
    struct chaos_shared *sh;
    struct chaos_slot *slot;
    const char *fleet;
    int index;                       /* the slot's index in sh->slot (a child's: in sh->kid) */
    bool kid;                        /* a forked child */
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

static int member_open(struct member *m, int32_t node)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CHAOS_FLEET_CAPACITY;
    o.node = node;
    struct orbit_pool_spec ps = chaos_pool_spec();
    struct orbit_stream_spec ss = chaos_stream_spec();
    struct orbit_exchange_spec es = chaos_exchange_spec();
    int rc = m->f ? 0 : orbit_fleet_join(m->fleet, &o, &m->f);
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

static const char *who(const struct member *m)
{
    return m->kid ? "forked child" : "member";
}

/* Does our node still carry our life? (Unknown counts as yes: only a record proves a false death.) */
static bool self_intact(struct member *m)
{
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    ssize_t got = orbit_fleet_nodes(m->f, n, CHAOS_FLEET_CAPACITY);
    uint16_t me = orbit_fleet_node(m->f);
    if (got < 0)
        return true;
    for (ssize_t k = 0; k < got && k < CHAOS_FLEET_CAPACITY; k++)
        if (n[k].node == me)
            return n[k].state == ORBIT_NODE_LIVE && n[k].incarnation == orbit_fleet_incarnation(m->f);
    return false;
}

static void false_death(struct member *m)
{
    atomic_fetch_add(&m->sh->false_deaths, 1);
    fprintf(stderr, "chaos: FALSE DEATH: %s %d (pid %d here, node %u, incarnation %llx) found its node "
            "no longer carrying its life while it lived\n", who(m), m->index, (int)getpid(),
            (unsigned)orbit_fleet_node(m->f), (unsigned long long)orbit_fleet_incarnation(m->f));
    _exit(CHAOS_EXIT_FALSE_DEATH);
}

/* Between operations, outside the hostile phase: a reap of our own now and then, and the self-check. */
static void housekeeping(struct member *m, uint64_t beats)
{
    if (atomic_load_explicit(&m->sh->hostile, memory_order_relaxed))
        return;
    if (chaos_below(&m->rng, 48) == 0) {
        int rc = orbit_fleet_reap(m->f);
        atomic_fetch_add_explicit(&m->sh->member_reaps, 1, memory_order_relaxed);
        if (rc > 0)
            atomic_fetch_add_explicit(&m->sh->member_reaped, (uint64_t)rc, memory_order_relaxed);
    }
    if (beats % 16 == 0 && !self_intact(m))
        false_death(m);
}

static _Noreturn void member_loop(struct member *m);

/* A parent's fleet call in a forked child must be refused, and change nothing. */
static void expect_forked(struct member *kid, const char *call, int rc)
{
    atomic_fetch_add(&kid->sh->fork_checks, 1);
    if (rc == -ORBIT_EFORKED)
        return;
    atomic_fetch_add(&kid->sh->fork_violations, 1);
    fprintf(stderr, "chaos: FORK: %s on the parent's handle in forked child %d answered %d (%s), "
            "not -ORBIT_EFORKED\n", call, kid->index, rc, rc < 0 ? orbit_strerror(rc) : "no error");
}

static void fork_violation(struct member *kid, const char *what)
{
    atomic_fetch_add(&kid->sh->fork_violations, 1);
    fprintf(stderr, "chaos: FORK: forked child %d: %s\n", kid->index, what);
}

/* The parent's node record, as the child's own handle sees it: its life, alive, unless the parent is going. */
static void check_parent_untouched(struct member *kid, pid_t parent, uint16_t node, uint64_t inc)
{
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    ssize_t got = orbit_fleet_nodes(kid->f, n, CHAOS_FLEET_CAPACITY);
    bool intact = false;
    for (ssize_t k = 0; k < got && k < CHAOS_FLEET_CAPACITY; k++)
        intact |= n[k].node == node && n[k].incarnation == inc && n[k].alive;
    atomic_fetch_add(&kid->sh->fork_checks, 1);
    if (!intact && got >= 0 && orbit_process_exiting(parent) == 0)
        fork_violation(kid, "the running parent's node no longer carries its live life");
}

/* Table calls on the parent's handles, the parent's own objects among them: each refused. */
static void parent_tables_refused(struct member *kid, struct member *parent)
{
    orbit_key key = chaos_keys[chaos_below(&kid->rng, CHAOS_KEYS)];
    uint32_t version;
    orbit_id id;
    struct orbit_endpoint *a;
    struct orbit_ticket t;
    struct orbit_units u = { 1, 1 };
    struct orbit_demand d = { .claim = &u, .n_claim = 1 };
    struct orbit_admit_result r;
    expect_forked(kid, "orbit_pool_version", orbit_pool_version(parent->pool, key, &version));
    expect_forked(kid, "orbit_pool_register", orbit_pool_register(parent->pool, key, 1, &id));
    expect_forked(kid, "orbit_streams_create", orbit_streams_create(parent->st, &a, &t));
    expect_forked(kid, "orbit_exchanges_wait_offer", orbit_exchanges_wait_offer(parent->ex, 0, &t));
    expect_forked(kid, "orbit_admission_try_claim", orbit_admission_try_claim(parent->adm, &d, &r));
    if (parent->n_res)
        expect_forked(kid, "orbit_pool_unregister (the parent's resource)",
                      orbit_pool_unregister(parent->pool, parent->res[0]));
    if (parent->n_claims)
        expect_forked(kid, "orbit_admission_release (the parent's claim)",
                      orbit_admission_release(parent->adm, &parent->claims[0]));
}

/* The forked child: the parent's handle refused, then a node of its own and ordinary work. */
static _Noreturn void kid_main(struct member *parent)
{
    struct chaos_slot *ks = &parent->sh->kid[parent->index];
    atomic_store(&ks->pid, (int32_t)getpid());
    atomic_store(&ks->last_beat_ns, chaos_now_ns());
    struct member kid = { .sh = parent->sh, .slot = ks, .fleet = parent->fleet, .index = parent->index,
                          .kid = true, .rng = chaos_rand(&parent->rng) | 1 };
    struct orbit_fleet *pf = parent->f;
    uint16_t pnode = orbit_fleet_node(pf);
    uint64_t pinc = orbit_fleet_incarnation(pf);
    struct orbit_node_info n[CHAOS_FLEET_CAPACITY];
    expect_forked(&kid, "orbit_fleet_nodes", (int)orbit_fleet_nodes(pf, n, CHAOS_FLEET_CAPACITY));
    expect_forked(&kid, "orbit_fleet_reap", orbit_fleet_reap(pf));
    expect_forked(&kid, "orbit_fleet_wait_node_death", orbit_fleet_wait_node_death(pf, pnode, pinc, 0));
    expect_forked(&kid, "orbit_fleet_node_dead", orbit_fleet_node_dead(pf, pnode, pinc));
    parent_tables_refused(&kid, parent);
    /* The parent's node: held by a live process (ours no longer), unless the parent is gone. */
    pid_t parent_pid = getppid();
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = CHAOS_FLEET_CAPACITY;
    o.node = pnode;
    int rc = orbit_fleet_join(kid.fleet, &o, &kid.f);
    atomic_fetch_add(&kid.sh->fork_checks, 1);
    if (rc == 0 && orbit_process_exiting(atomic_load(&ks->ppid)) == 0)
        fork_violation(&kid, "joined the node of its running parent");
    if (rc < 0 && rc != -ORBIT_ECLAIMED)
        fork_violation(&kid, "joining the parent's node failed other than -ORBIT_ECLAIMED");
    if (rc < 0)
        kid.f = NULL;   /* then any node: member_open joins */
    rc = member_open(&kid, -1);
    if (rc < 0) {
        fprintf(stderr, "chaos: forked child: open: %s\n", orbit_strerror(rc));
        _exit(41);
    }
    if (parent_pid == atomic_load(&ks->ppid))
        check_parent_untouched(&kid, parent_pid, pnode, pinc);
    member_loop(&kid);
}

/* At the operation count the supervisor chose, fork a child (never waited for: the supervisor reaps it). */
static void maybe_fork(struct member *m, uint64_t beats)
{
    uint32_t at = atomic_load_explicit(&m->slot->fork_at, memory_order_relaxed);
    struct chaos_slot *ks = &m->sh->kid[m->index];
    int32_t free_slot = 0;
    if (m->kid || !at || beats != at || !atomic_compare_exchange_strong(&ks->pid, &free_slot, -1))
        return;
    atomic_store(&ks->ppid, (int32_t)getpid());
    atomic_store(&ks->kid_ops, atomic_load(&m->slot->kid_ops));
    /* The child's setup is timed from now: the supervisor follows the slot once we publish
     * its pid, which may be long before the child first runs (a loaded host). */
    atomic_store(&ks->last_beat_ns, chaos_now_ns());
    pid_t pid = fork();
    if (pid == 0) {
        /* As on a loaded host, one child in four first runs a while after fork returned. */
        if (chaos_below(&m->rng, 4) == 0) {
            struct timespec late = { 0, (long)(1 + chaos_below(&m->rng, 200)) * 1000000L };
            nanosleep(&late, NULL);
        }
        kid_main(m);
    }
    if (pid < 0) {
        atomic_store(&ks->pid, 0);
        return;
    }
    atomic_store(&ks->pid, (int32_t)pid);
    atomic_fetch_add(&m->sh->kids_forked, 1);
}

static _Noreturn void member_loop(struct member *m)
{
    atomic_store(&m->slot->node, orbit_fleet_node(m->f));
    atomic_store(&m->slot->incarnation, orbit_fleet_incarnation(m->f));
    atomic_store(&m->slot->ready, 1);
    static int (*const ops[T_COUNT])(struct member *) = { op_pool, op_streams, op_exchange, op_admission, op_uring };
    uint32_t kid_ops = m->kid ? atomic_load(&m->slot->kid_ops) : 0;
    for (uint64_t beats = 1;; beats++) {
        uint32_t focus = atomic_load_explicit(&m->slot->focus, memory_order_relaxed) % T_COUNT;
        enum chaos_table t = (enum chaos_table)(chaos_below(&m->rng, 4) ? focus : chaos_below(&m->rng, T_COUNT));
        atomic_store_explicit(&m->slot->table, t, memory_order_relaxed);
        count(m, t, ops[t](m));
        atomic_fetch_add_explicit(&m->slot->beats, 1, memory_order_relaxed);
        atomic_store_explicit(&m->slot->last_beat_ns, chaos_now_ns(), memory_order_release);
        housekeeping(m, beats);
        maybe_fork(m, beats);
        if (kid_ops && beats >= kid_ops) {
            atomic_store(&m->slot->exited, 1);   /* an exit, not a leave: reclaimed as a death */
            _exit(0);
        }
    }
}

void chaos_member(const char *fleet, struct chaos_shared *sh, int slot, uint64_t seed)
{
    struct member m = { .sh = sh, .slot = &sh->slot[slot], .fleet = fleet, .index = slot, .rng = seed | 1 };
    int rc = member_open(&m, -1);
    if (rc < 0) {
        /* A scribbled fleet may refuse us (corrupt, or every node record garbled): a clean exit. */
        bool refused = rc == -ORBIT_ECORRUPT || rc == -ORBIT_EGEOMETRY || rc == -ORBIT_EFULL;
        if (!refused)
            fprintf(stderr, "chaos member: open: %s\n", orbit_strerror(rc));
        _exit(refused ? 42 : 41);
    }
    member_loop(&m);
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
