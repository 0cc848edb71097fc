/* SPDX-License-Identifier: MIT */
/*
 * What an exchange side sent and finished outlives it, between real processes.
 * A server answers (START, DATA chunks, FIN) and then leaves, exits without a
 * word, or is killed -9: its client, which had read nothing yet, reads every
 * byte and the FIN. A client finishes its request and leaves before the server
 * has even opened the exchange: the server takes the offer and reads it whole.
 * What is not finished, or has nobody left to read it, comes back: a server
 * killed mid-answer, a client that closes or is killed unread, a linger that
 * ends (met by an opener, or by the node's next life creating in its lane).
 * Each case ends with every slot of every lane free (orbit_arena_lanes).
 */
#include <signal.h>
#include <orbit/inspect.h>
#include "xfleet.h"

#define CTL_KIND   233
#define ARENA_KIND 234
#define SLOT_BYTES 4096u
#define SLOTS      64u
#define CHUNKS     8u
#define WORDS      1024u                            /* a chunk: 8 KiB, two slots */
#define HELD       (1u + CHUNKS * 2u)               /* slots of one answer: START's one, the chunks' */

static struct orbit_exchange_spec spec_of(void)
{
    struct orbit_exchange_spec s = ORBIT_EXCHANGE_SPEC_DEFAULT;
    s.control = (struct orbit_stream_spec){ .kind = CTL_KIND, .lane_capacity = 8, .buffer_bytes = 16384 };
    s.a_to_b = (struct orbit_arena_spec){ .kind = ARENA_KIND, .slot_bytes = SLOT_BYTES, .slots_per_lane = SLOTS };
    return s;
}

enum ending { LEAVES, EXITS, KILLED };
static const char *const ENDING[] = { "leaves", "exits without leaving", "is killed -9" };

/* A child's end of an exchange, one process of its own: joined as node at life inc. */
struct side { struct orbit_fleet *f; struct orbit_exchanges *ex; struct orbit_exchange *x; };

static struct side side_join(const char *name, int node, uint64_t inc)
{
    struct orbit_exchange_spec spec = spec_of();
    struct side s = { .f = xf_join(name, node, inc) };
    s.ex = xf_exchanges(s.f, &spec);
    return s;
}

/* START (a 3-byte metadata chunk), CHUNKS chunks of the pattern seeded by seed, FIN. */
static void send_answer(struct orbit_exchange *x, uint64_t seed)
{
    XF_OK(orbit_exchange_send_start(x, "200", 3, 5000));
    uint64_t w[WORDS];
    for (uint64_t k = 0; k < CHUNKS; k++) {
        xf_gen(seed * CHUNKS + k, w, WORDS);
        XF_OK(orbit_exchange_send_data(x, w, sizeof w, 5000));
    }
    XF_OK(orbit_exchange_finish(x, 5000));
}

/* The parent's read of an answer: every event, every byte, then FIN; each chunk released. */
static void read_answer(struct orbit_exchange *x, uint64_t seed)
{
    struct orbit_exchange_event ev;
    int rc = orbit_exchange_next(x, &ev, 5000);
    ck_assert_msg(rc == 0, "START: %s (%s)", orbit_strerror(rc), orbit_last_error());
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_START);
    ck_assert_uint_eq(ev.chunk.len, 3);
    ck_assert_mem_eq(ev.chunk.data, "200", 3);
    orbit_chunk_release(&ev.chunk);
    uint64_t w[WORDS];
    for (uint64_t k = 0; k < CHUNKS; k++) {
        rc = orbit_exchange_next(x, &ev, 5000);
        ck_assert_msg(rc == 0, "chunk %llu: %s (%s)", (unsigned long long)k, orbit_strerror(rc),
                      orbit_last_error());
        ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_DATA);
        ck_assert_uint_eq(ev.chunk.len, sizeof w);
        xf_gen(seed * CHUNKS + k, w, WORDS);
        ck_assert_msg(memcmp(ev.chunk.data, w, sizeof w) == 0, "chunk %llu differs", (unsigned long long)k);
        orbit_chunk_release(&ev.chunk);
    }
    ck_assert_int_eq(orbit_exchange_next(x, &ev, 5000), 0);
    ck_assert_int_eq(ev.type, ORBIT_EXCHANGE_FIN);
}

/* How a child that finished ends: close and leave, _exit with everything held, or wait for -9. */
static int child_end(struct side *s, enum ending how, int done)
{
    char c = 'd';
    if (how == LEAVES) {
        orbit_exchange_close(s->x);
        orbit_exchanges_close(s->ex);
        orbit_fleet_leave(s->f);
    }
    TP_CHECK(write(done, &c, 1) == 1, "done");
    if (how == KILLED)
        for (;;)
            pause();
    return 0;
}

/* The parent sees the child's life end as told, and that life reported. */
static void await_end(struct orbit_fleet *f, pid_t pid, enum ending how, int done)
{
    char c;
    ck_assert_int_eq(read(done, &c, 1), 1);
    if (how == KILLED)
        tp_kill(pid);
    else
        ck_assert_int_eq(tu_wait_child(pid, 10000), 0);
    if (how != LEAVES)
        ck_assert_int_eq(orbit_fleet_reap(f), 1);   /* its life lock is gone: reported dead */
}

static struct orbit_arena *arena_of(struct orbit_exchanges *ex) { return orbit_exchanges_arena(ex, ORBIT_FLOW_A_TO_B); }

/* No lane holds a slot. */
static void all_back(struct orbit_exchanges *ex, const char *when)
{
    ssize_t n = orbit_arena_lanes(arena_of(ex), NULL, 0);
    ck_assert_msg(n == 0, "%s: %zd lanes still hold slots", when, n);
}

/* This process as node 0 of fleet name (life inc), with an exchanges handle: the host of offers. */
static struct orbit_exchanges *host_open(const char *name, uint64_t inc, struct orbit_fleet **f)
{
    struct orbit_exchange_spec spec = spec_of();
    struct orbit_exchanges *ex;
    *f = tu_join(name, XF_CAPACITY, 0, inc, tu_backing());
    ck_assert_int_eq(orbit_exchanges_open(*f, &spec, &ex), 0);
    return ex;
}

static void host_close(struct orbit_fleet *f, struct orbit_exchanges *ex, const char *name)
{
    orbit_exchanges_close(ex);
    tp_fleet_end(f, name);
}

/* ---- a server answers, finishes, and goes ---------------------------------------------- */

struct server { const char *name; enum ending how; struct tp_pipe ticket, done; };

/* A fleet named for tag, this process its node 0 (life inc) holding side A of a new exchange;
 * fn spawned as the server (node 1), given the ticket. */
static struct xf_end start_server(const char *tag, uint64_t inc, enum ending how, int (*fn)(void *),
                                  struct server *v, pid_t *pid)
{
    struct orbit_exchange_spec spec = spec_of();
    struct orbit_ticket t;
    const char *name = tu_fleet_name(tag);
    struct xf_end e = xf_create(name, inc, &spec, &t);
    *v = (struct server){ name, how, tp_pipe(), tp_pipe() };
    *pid = tp_spawn(fn, v);
    tp_send_ticket(v->ticket.wr, &t);
    return e;
}

/* Side A's request: START and FIN. */
static void send_request(struct orbit_exchange *x)
{
    ck_assert_int_eq(orbit_exchange_send_start(x, "GET", 3, 5000), 0);
    ck_assert_int_eq(orbit_exchange_finish(x, 5000), 0);
}

/* Node 1: takes the client's exchange, reads its request whole, answers, finishes, ends. */
static int server(void *p)
{
    struct server *v = p;
    struct side s = side_join(v->name, 1, 0x7101);
    struct orbit_ticket t = tp_recv_ticket(v->ticket.rd);
    XF_OK(orbit_exchange_open(s.ex, &t, &s.x));
    struct orbit_exchange_event ev;
    XF_OK(orbit_exchange_next(s.x, &ev, 5000));
    TP_CHECK(ev.type == ORBIT_EXCHANGE_START && ev.chunk.len == 3, "request START");
    orbit_chunk_release(&ev.chunk);
    XF_OK(orbit_exchange_next(s.x, &ev, 5000));
    TP_CHECK(ev.type == ORBIT_EXCHANGE_FIN, "request FIN");
    send_answer(s.x, 0x71);
    return child_end(&s, v->how, v->done.wr);
}

START_TEST(an_answer_outlives_a_server_that_finished)
{
    for (enum ending how = LEAVES; how <= KILLED; how++) {
        struct server v;
        pid_t pid;
        struct xf_end e = start_server("xoutsrv", 0x7100, how, server, &v, &pid);
        send_request(e.x);
        await_end(e.f, pid, how, v.done.rd);
        /* Gone before we read a byte: its answer is still in its lane. */
        ck_assert_msg(xf_lane_free(arena_of(e.ex), 1) == SLOTS - HELD, "server %s: lane 1 has %u free",
                      ENDING[how], xf_lane_free(arena_of(e.ex), 1));
        read_answer(e.x, 0x71);
        all_back(e.ex, ENDING[how]);
        xf_end_close(&e);
        orbit_fleet_unlink(v.name);
    }
}
END_TEST

/* Sends START and three chunks, reserves a fourth run, then waits for -9: nothing finished. */
static int server_cut_short(void *p)
{
    struct server *v = p;
    struct side s = side_join(v->name, 1, 0x7201);
    struct orbit_ticket t = tp_recv_ticket(v->ticket.rd);
    XF_OK(orbit_exchange_open(s.ex, &t, &s.x));
    XF_OK(orbit_exchange_send_start(s.x, "200", 3, 5000));
    uint64_t w[WORDS] = { 0 };
    for (int k = 0; k < 3; k++)
        XF_OK(orbit_exchange_send_data(s.x, w, sizeof w, 5000));
    struct orbit_reservation r;
    XF_OK(orbit_exchange_reserve(s.x, 3 * SLOT_BYTES, 5000, &r));
    return child_end(&s, KILLED, v->done.wr);
}

START_TEST(a_server_killed_mid_answer_gives_everything_back)
{
    struct server v;
    pid_t pid;
    struct xf_end e = start_server("xoutcut", 0x7200, KILLED, server_cut_short, &v, &pid);
    char c;
    ck_assert_int_eq(read(v.done.rd, &c, 1), 1);
    ck_assert_uint_eq(xf_lane_free(arena_of(e.ex), 1), SLOTS - 1 - 3 * 2 - 3);
    tp_kill(pid);
    ck_assert_int_eq(orbit_fleet_reap(e.f), 1);
    struct orbit_exchange_event ev;
    ck_assert_int_eq(orbit_exchange_next(e.x, &ev, 1000), -ORBIT_ERESET);   /* the flow ended unfinished */
    all_back(e.ex, "killed mid-answer");
    xf_end_close(&e);
    orbit_fleet_unlink(v.name);
}
END_TEST

/* ---- what outlived its server goes back with its client --------------------------------- */

struct client { const char *name; struct tp_pipe ticket, done; };

/* Node 2: creates the exchange, hands the ticket to the server, sends its request; reads
 * nothing of the answer, then waits for -9. */
static int client_killed_unread(void *p)
{
    struct client *v = p;
    struct side s = side_join(v->name, 2, 0x7302);
    struct orbit_ticket t;
    XF_OK(orbit_exchange_create(s.ex, &s.x, &t));
    tp_send_ticket(v->ticket.wr, &t);
    XF_OK(orbit_exchange_send_start(s.x, "GET", 3, 5000));
    XF_OK(orbit_exchange_finish(s.x, 5000));
    return child_end(&s, KILLED, v->done.wr);
}

START_TEST(what_outlived_its_server_goes_back_with_its_client)
{
    /* The client closes without reading: its drain gives the answer back. */
    struct server v;
    pid_t pid;
    struct xf_end e = start_server("xoutcls", 0x7300, LEAVES, server, &v, &pid);
    send_request(e.x);
    await_end(e.f, pid, LEAVES, v.done.rd);
    ck_assert_uint_eq(xf_lane_free(arena_of(e.ex), 1), SLOTS - HELD);
    orbit_exchange_close(e.x);
    e.x = NULL;
    all_back(e.ex, "client closed unread");
    xf_end_close(&e);
    orbit_fleet_unlink(v.name);

    /* The client (node 2) is killed unread: its death report gives the answer back. */
    const char *name = tu_fleet_name("xoutkcl");
    struct orbit_fleet *f;
    struct orbit_exchanges *ex = host_open(name, 0x7300, &f);
    struct client cl = { name, tp_pipe(), tp_pipe() };
    struct server sv = { name, LEAVES, cl.ticket, tp_pipe() };
    pid_t cpid = tp_spawn(client_killed_unread, &cl), spid = tp_spawn(server, &sv);
    await_end(f, spid, LEAVES, sv.done.rd);
    char c;
    ck_assert_int_eq(read(cl.done.rd, &c, 1), 1);
    ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS - HELD);
    tp_kill(cpid);
    ck_assert_int_eq(orbit_fleet_reap(f), 1);
    all_back(ex, "client killed unread");
    host_close(f, ex, name);
}
END_TEST

/* ---- a client finishes its request before the server opens it --------------------------- */

struct early { const char *name; enum ending how; uint64_t inc; struct tp_pipe done, go; };

/* Node 1: a request created, offered to node 0, answered in full and finished; then the end. */
static int early_client(void *p)
{
    struct early *v = p;
    struct side s = side_join(v->name, 1, v->inc);
    struct orbit_ticket t;
    XF_OK(orbit_exchange_create(s.ex, &s.x, &t));
    send_answer(s.x, v->inc);
    XF_OK(orbit_exchanges_offer(s.ex, &t, 0));
    return child_end(&s, v->how, v->done.wr);
}

/* Take the next offer and read the request it names whole; then close that side. */
static void take_and_read(struct orbit_exchanges *ex, uint64_t seed)
{
    struct orbit_ticket t;
    struct orbit_exchange *b;
    int rc = orbit_exchanges_wait_offer(ex, 5000, &t);
    ck_assert_msg(rc == 0, "offer: %s (%s)", orbit_strerror(rc), orbit_last_error());
    rc = orbit_exchange_open(ex, &t, &b);
    ck_assert_msg(rc == 0, "open: %s (%s)", orbit_strerror(rc), orbit_last_error());
    read_answer(b, seed);
    orbit_exchange_close(b);
}

START_TEST(a_request_finished_before_its_server_opens_is_read_whole)
{
    for (enum ending how = LEAVES; how <= KILLED; how += KILLED - LEAVES) {
        const char *name = tu_fleet_name("xoutreq");
        struct orbit_fleet *f;
        struct orbit_exchanges *ex = host_open(name, 0x7400, &f);
        struct early v = { name, how, 0x7401, tp_pipe(), tp_pipe() };
        pid_t pid = tp_spawn(early_client, &v);
        await_end(f, pid, how, v.done.rd);
        ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS - HELD);
        take_and_read(ex, 0x7401);
        all_back(ex, ENDING[how]);
        host_close(f, ex, name);
    }
}
END_TEST

/* ---- the linger ends ------------------------------------------------------------------- */

/* Node 1's next life: its first create in the lane meets the over linger there. */
static int next_life_creates(void *p)
{
    struct early *v = p;
    struct side s = side_join(v->name, 1, v->inc);
    struct orbit_ticket t;
    XF_OK(orbit_exchange_create(s.ex, &s.x, &t));
    uint32_t free_slots = xf_lane_free(arena_of(s.ex), 1);
    TP_CHECK(free_slots == SLOTS, "lane 1 after the create: %u free", free_slots);
    return child_end(&s, LEAVES, v->done.wr);
}

START_TEST(a_lingering_request_goes_back_when_its_linger_ends)
{
    setenv("ORBIT_STREAM_LINGER_MS", "300", 1);   /* before this process or its children read it */
    for (int met_by_create = 0; met_by_create < 2; met_by_create++) {
        const char *name = tu_fleet_name("xoutend");
        struct orbit_fleet *f;
        struct orbit_exchanges *ex = host_open(name, 0x7500, &f);
        struct early v = { name, LEAVES, 0x7501, tp_pipe(), tp_pipe() };
        await_end(f, tp_spawn(early_client, &v), LEAVES, v.done.rd);
        struct orbit_ticket t;
        ck_assert_int_eq(orbit_exchanges_take_offer(ex, &t), 0);   /* lingering */
        ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS - HELD);
        tu_sleep_ms(400);
        ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS - HELD);   /* over, but nobody met it yet */
        if (met_by_create) {
            struct early next = { name, LEAVES, 0x7502, tp_pipe(), tp_pipe() };
            await_end(f, tp_spawn(next_life_creates, &next), LEAVES, next.done.rd);
        } else {
            struct orbit_exchange *b;
            ck_assert_int_eq(orbit_exchange_open(ex, &t, &b), -ORBIT_ESTALE);
            ck_assert_msg(strstr(orbit_last_error(), "linger"), "last error: %s", orbit_last_error());
        }
        all_back(ex, met_by_create ? "linger met by the next life's create" : "linger met by the opener");
        host_close(f, ex, name);
    }
    unsetenv("ORBIT_STREAM_LINGER_MS");
}
END_TEST

/* Node 1's next life sends its own request while the last life's still lingers in the lane. */
static int next_life_sends(void *p)
{
    struct early *v = p;
    struct side s = side_join(v->name, 1, v->inc);
    struct orbit_ticket t;
    XF_OK(orbit_exchange_create(s.ex, &s.x, &t));
    send_answer(s.x, v->inc);
    XF_OK(orbit_exchanges_offer(s.ex, &t, 0));
    char c = 'r';
    TP_CHECK(write(v->done.wr, &c, 1) == 1, "ready");
    TP_CHECK(read(v->go.rd, &c, 1) == 1, "go");
    return child_end(&s, LEAVES, v->done.wr);
}

START_TEST(a_nodes_next_life_shares_its_lane_with_what_lingers)
{
    const char *name = tu_fleet_name("xoutnext");
    struct orbit_fleet *f;
    struct orbit_exchanges *ex = host_open(name, 0x7600, &f);
    struct early last = { name, LEAVES, 0x7601, tp_pipe(), tp_pipe() };
    await_end(f, tp_spawn(early_client, &last), LEAVES, last.done.rd);
    struct early next = { name, LEAVES, 0x7602, tp_pipe(), tp_pipe() };
    pid_t pid = tp_spawn(next_life_sends, &next);
    char c;
    ck_assert_int_eq(read(next.done.rd, &c, 1), 1);
    ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS - 2 * HELD);   /* both lives' runs */
    take_and_read(ex, 0x7601);   /* offers come lowest slot first: the last life's */
    ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS - HELD);
    take_and_read(ex, 0x7602);
    ck_assert_uint_eq(xf_lane_free(arena_of(ex), 1), SLOTS);
    ck_assert_int_eq(write(next.go.wr, &c, 1), 1);
    await_end(f, pid, LEAVES, next.done.rd);
    all_back(ex, "both lives read");
    host_close(f, ex, name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exchange_outlive");
    TCase *t = tcase_create("outlive");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, an_answer_outlives_a_server_that_finished);
    tcase_add_test(t, a_server_killed_mid_answer_gives_everything_back);
    tcase_add_test(t, what_outlived_its_server_goes_back_with_its_client);
    tcase_add_test(t, a_request_finished_before_its_server_opens_is_read_whole);
    tcase_add_test(t, a_lingering_request_goes_back_when_its_linger_ends);
    tcase_add_test(t, a_nodes_next_life_shares_its_lane_with_what_lingers);
    suite_add_tcase(s, t);
    return tu_run(s);
}
