/* SPDX-License-Identifier: MIT */
/*
 * One contract, every table: each case below runs once per table of tables.c
 * (pool, streams, arena, admission, exchanges), through the public API and
 * with real processes where the contract speaks of them: the lifecycle of a
 * handle and its segment, bad input refused with a sentence and nothing left
 * behind, an observer that creates nothing, a member killed -9 whose share the
 * death report gives back (and the accounting that saw it first), a reset, a
 * fork child refused, the readiness descriptor.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include "proc.h"
#include "tables.h"

#define PARENT_INC 0xc0de0
#define CHILD_INC  0xc0de1

static const struct ct_table *table_at(int i) { return &ct_tables[i]; }

static ssize_t segments_of(const char *name) { return orbit_fleet_segments(name, NULL, 0); }

/* The table's epoch as the fleet lists it; its own epoch call, where it has one, agrees. */
static uint64_t epoch_of(const struct ct_table *t, struct orbit_fleet *f, void *h)
{
    struct orbit_table_info info[4];
    ssize_t n = orbit_fleet_tables(f, info, 4);
    uint64_t e = 0;
    for (ssize_t i = 0; i < n && i < 4; i++)
        if (info[i].kind == t->kind)
            e = info[i].epoch;
    if (t->epoch)
        ck_assert_uint_eq(t->epoch(h), e);
    return e;
}

/* orbit_last_error names what it should. */
#define CK_SAID(what) \
    ck_assert_msg(strstr(orbit_last_error(), (what)) != NULL, "error '%s' lacks '%s'", orbit_last_error(), (what))

static void *opened(const struct ct_table *t, struct orbit_fleet *f)
{
    void *h = NULL;
    int rc = t->open(f, CT_SPEC, &h);
    ck_assert_msg(rc == 0, "%s: %s (%s)", t->open_call, orbit_strerror(rc), orbit_last_error());
    return h;
}

/* One case: the table under test (the loop's index) and a fleet of the case's own, node 0. */
struct ct_case {
    const struct ct_table *t;
    const char *name;
    struct orbit_fleet *f;
};

static struct ct_case case_begin(int i, const char *tag)
{
    struct ct_case c = { .t = table_at(i), .name = tu_fleet_name(tag) };
    c.f = tu_join(c.name, CT_CAPACITY, 0, PARENT_INC, tu_backing());
    return c;
}

/* The case's end: what it held let go, the handle (if any) closed, the fleet left and removed. */
static void case_end(struct ct_case *c, void *h)
{
    c->t->drop();
    c->t->close(h);
    orbit_fleet_leave(c->f);
    ck_assert_int_eq(orbit_fleet_unlink(c->name), 0);
    ck_assert_int_eq(segments_of(c->name), 0);
}

/* ---- lifecycle --------------------------------------------------------------------- */

START_TEST(a_handle_opens_shares_and_outlives_nothing_but_its_segment)
{
    struct ct_case c = case_begin(_i, "ct-life");
    void *a = opened(c.t, c.f), *b = opened(c.t, c.f);   /* the same spec: the same table */
    uint64_t epoch = epoch_of(c.t, c.f, a);
    ck_assert_uint_ne(epoch, 0);   /* a table starts at its first epoch */
    ck_assert_uint_eq(epoch_of(c.t, c.f, b), epoch);
    ck_assert_int_eq(segments_of(c.name), 1 + (ssize_t)c.t->segments);
    struct orbit_table_info info[4];
    ssize_t n = orbit_fleet_tables(c.f, info, 4);
    ck_assert_int_eq(n, (ssize_t)c.t->segments);
    bool listed = false;
    for (ssize_t i = 0; i < n; i++)
        if (info[i].kind == c.t->kind) {
            listed = true;
            ck_assert(info[i].built);
            ck_assert_str_eq(info[i].name, c.t->name);
        }
    ck_assert(listed);
    /* What one handle takes, another sees. */
    ck_assert_int_eq(c.t->hold(a), 0);
    ck_assert_int_ge(c.t->held(b, 0), 1);
    c.t->drop();
    c.t->close(b);
    c.t->close(a);
    /* The segment outlives its handles: it goes with the fleet. */
    if (c.t->open_existing) {
        void *existing;
        ck_assert_int_eq(c.t->open_existing(c.f, c.t->kind, &existing), 0);
        ck_assert_uint_eq(epoch_of(c.t, c.f, existing), epoch);
        c.t->close(existing);
    }
    ck_assert_int_eq(segments_of(c.name), 1 + (ssize_t)c.t->segments);
    c.t->close(NULL);   /* a NULL handle closes nothing */
    case_end(&c, NULL);
}
END_TEST

/* ---- bad input: refused with a sentence, nothing left behind ---------------------------- */

START_TEST(bad_input_is_refused_with_a_sentence_and_leaves_nothing)
{
    struct ct_case c = case_begin(_i, "ct-bad");
    const struct ct_table *other = table_at((_i + 1) % (int)ct_table_count);
    void *h = NULL;
    ck_assert_int_eq(c.t->open(NULL, CT_SPEC, &h), -ORBIT_EMALFORMED);
    CK_SAID(c.t->open_call);
    ck_assert_int_eq(c.t->open(c.f, CT_SPEC, NULL), -ORBIT_EMALFORMED);
    CK_SAID("out");
    ck_assert_int_eq(c.t->open(c.f, CT_BAD, &h), -ORBIT_EMALFORMED);
    CK_SAID(c.t->open_call);
    ck_assert_int_eq(c.t->open(c.f, CT_RESV, &h), -ORBIT_EMALFORMED);
    CK_SAID("resv");
    ck_assert_int_eq(segments_of(c.name), 1);   /* no refused open made anything */
    void *good = opened(c.t, c.f);
    ck_assert_int_eq(c.t->open(c.f, CT_OTHER, &h), -ORBIT_EGEOMETRY);   /* the same kind, another geometry */
    ck_assert_str_ne(orbit_last_error(), "");
    ck_assert_int_eq(segments_of(c.name), 1 + (ssize_t)c.t->segments);
    if (c.t->open_existing) {
        ck_assert_int_eq(c.t->open_existing(c.f, 99, &h), -ENOENT);
        ck_assert_int_eq(c.t->open_existing(c.f, 255, &h), -ORBIT_EGEOMETRY);   /* the fleet's own */
        CK_SAID("fleet");
        ck_assert_int_eq(c.t->open_existing(NULL, c.t->kind, &h), -ORBIT_EMALFORMED);
        ck_assert_int_eq(c.t->open_existing(c.f, c.t->kind, NULL), -ORBIT_EMALFORMED);
        /* A kind that holds another type of table. */
        void *o = opened(other, c.f);
        uint8_t o_kind = other->kind;
        ck_assert_int_eq(c.t->open_existing(c.f, o_kind, &h), -ORBIT_EGEOMETRY);
        CK_SAID(other->name);
        other->drop();
        other->close(o);
    }
    /* The table's death and reset calls with no handle: a sentence, nothing touched. */
    c.t->node_dead(NULL, 0, 1);
    CK_SAID("NULL");
    c.t->reset_all(NULL);
    CK_SAID("NULL");
    ck_assert_int_eq(c.t->hold(good), 0);
    ck_assert_int_ge(c.t->held(good, 0), 1);
    case_end(&c, good);
}
END_TEST

/* ---- an observer creates nothing ------------------------------------------------------ */

START_TEST(an_observer_creates_nothing_and_opens_only_the_spec_made)
{
    struct ct_case c = case_begin(_i, "ct-obs");
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(c.name, &obs), 0);
    void *h = NULL;
    ck_assert_int_eq(c.t->open(obs, CT_SPEC, &h), -ENOENT);   /* absent: not made by an observer */
    ck_assert_str_ne(orbit_last_error(), "");
    if (c.t->open_existing) {
        ck_assert_int_eq(c.t->open_existing(obs, c.t->kind, &h), -ENOENT);
        ck_assert_int_eq(c.t->open_existing(obs, 255, &h), -ORBIT_EGEOMETRY);   /* the fleet's own */
    }
    ck_assert_int_eq(segments_of(c.name), 1);
    void *member = opened(c.t, c.f);
    ck_assert_int_eq(c.t->hold(member), 0);
    void *seen = opened(c.t, obs);
    ck_assert_uint_eq(epoch_of(c.t, obs, seen), epoch_of(c.t, c.f, member));
    ck_assert_int_ge(c.t->held(seen, 0), 1);   /* it inspects */
    if (c.t->readiness) {
        ck_assert_int_eq(c.t->readiness(seen), -ORBIT_ENOTOWNER);   /* no node, no doorbell */
        CK_SAID("observer");
    }
    ck_assert_int_eq(c.t->open(obs, CT_OTHER, &h), -ORBIT_EGEOMETRY);
    CK_SAID("vs");   /* both sides' values */
    ck_assert_int_eq(segments_of(c.name), 1 + (ssize_t)c.t->segments);
    c.t->drop();
    c.t->close(seen);
    c.t->close(member);
    orbit_fleet_leave(obs);
    case_end(&c, NULL);
}
END_TEST

/* ---- a member killed -9: accounted, then given back by the death report -------------- */

struct victim { const struct ct_table *t; const char *name; struct tp_pipe ready; };

static int victim(void *p)
{
    struct victim *v = p;
    struct orbit_fleet *f = tp_join(v->name, CT_CAPACITY, 1, CHILD_INC);
    void *h = NULL;
    int rc = v->t->open(f, CT_SPEC, &h);
    TP_CHECK(rc == 0, "%s: %s", v->t->open_call, orbit_strerror(rc));
    rc = v->t->hold(h);
    TP_CHECK(rc == 0, "hold: %s", orbit_strerror(rc));
    tp_send_u64(v->ready.wr, 1);
    for (;;)
        pause();
    return 3;   /* never: it is killed */
}

START_TEST(a_killed_members_share_is_accounted_then_given_back)
{
    struct ct_case c = case_begin(_i, "ct-death");
    void *h = opened(c.t, c.f);
    ck_assert_int_eq(c.t->hold(h), 0);   /* a survivor's share, which the report must not touch */
    struct victim v = { c.t, c.name, tp_pipe() };
    pid_t pid = tp_spawn(victim, &v);
    ck_assert_uint_eq(tp_recv_u64(v.ready.rd), 1);
    ck_assert_int_ge(c.t->held(h, 1), 1);
    struct orbit_reclaim r;
    ck_assert_int_eq(orbit_fleet_account(c.f, 1, CHILD_INC, &r), 0);
    ck_assert_uint_ge(c.t->accounted(&r), 1);
    ck_assert_uint_eq(r.tables, c.t->segments);
    ck_assert_int_eq(orbit_fleet_account(c.f, 1, CHILD_INC + 1, &r), 0);   /* another life holds nothing */
    ck_assert_uint_eq(c.t->accounted(&r), 0);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(tu_wait_child(pid, 10000), 128 + SIGKILL);
    ck_assert_int_eq(orbit_fleet_node_dead(c.f, 1, CHILD_INC), 0);
    ck_assert_int_eq(c.t->held(h, 1), 0);
    ck_assert_int_eq(orbit_fleet_account(c.f, 1, CHILD_INC, &r), 0);
    ck_assert_uint_eq(c.t->accounted(&r), 0);
    /* Reported again, through the table's own call: nothing more to give back. */
    c.t->node_dead(h, 1, CHILD_INC);
    ck_assert_int_eq(c.t->held(h, 1), 0);
    ck_assert_int_ge(c.t->held(h, 0), 1);
    case_end(&c, h);
}
END_TEST

/* ---- reset: a new epoch, everything free ------------------------------------------- */

START_TEST(a_reset_starts_a_new_epoch_with_everything_free)
{
    struct ct_case c = case_begin(_i, "ct-reset");
    void *h = opened(c.t, c.f);
    ck_assert_int_eq(c.t->hold(h), 0);
    ck_assert_int_ge(c.t->held(h, 0), 1);
    uint64_t before = epoch_of(c.t, c.f, h);
    c.t->reset_all(h);
    ck_assert_uint_gt(epoch_of(c.t, c.f, h), before);
    ck_assert_int_eq(c.t->held(h, 0), 0);
    c.t->drop();   /* what it held reads stale: letting it go touches nothing of the new epoch */
    ck_assert_int_eq(c.t->held(h, 0), 0);
    ck_assert_int_eq(c.t->hold(h), 0);   /* the table is usable in its new epoch */
    before = epoch_of(c.t, c.f, h);
    /* The fleet's reset runs every table's: each counted once. */
    ck_assert_int_eq(orbit_fleet_reset_tables(c.f), (int)c.t->segments);
    ck_assert_uint_gt(epoch_of(c.t, c.f, h), before);
    ck_assert_int_eq(c.t->held(h, 0), 0);
    case_end(&c, h);
}
END_TEST

/* ---- a fork child's calls are refused; its close touches nothing shared -------------- */

struct forked { const struct ct_table *t; void *h; };

static int fork_child(void *p)
{
    struct forked *x = p;
    int rc = x->t->forked_call(x->h);
    TP_CHECK(rc == -ORBIT_EFORKED, "a fork child's call: %s", orbit_strerror(rc));
    TP_CHECK(strstr(orbit_last_error(), "fork") != NULL, "no fork sentence: %s", orbit_last_error());
    x->t->close(x->h);   /* only the child's memory goes */
    return 0;
}

START_TEST(a_fork_childs_calls_are_refused_and_its_close_is_harmless)
{
    struct ct_case c = case_begin(_i, "ct-fork");
    void *h = opened(c.t, c.f);
    struct forked x = { c.t, h };
    ck_assert_int_eq(tu_wait_child(tp_spawn(fork_child, &x), 10000), 0);
    ck_assert_int_eq(c.t->hold(h), 0);   /* the parent's handle is whole */
    ck_assert_int_ge(c.t->held(h, 0), 1);
    case_end(&c, h);
}
END_TEST

/* ---- the readiness descriptor: one per member handle --------------------------------- */

START_TEST(a_member_gets_one_readiness_descriptor_per_handle)
{
    if (!table_at(_i)->readiness)
        return;   /* the ledger has none: its waits are on its epoch word */
    struct ct_case c = case_begin(_i, "ct-ready");
    void *h = opened(c.t, c.f), *h2 = opened(c.t, c.f);
    int fd = c.t->readiness(h);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(c.t->readiness(h), -ORBIT_EBUSY);
    CK_SAID("one per handle");
    int fd2 = c.t->readiness(h2);   /* another handle: its own */
    ck_assert_int_ge(fd2, 0);
    ck_assert_int_ne(fd2, fd);
    c.t->close(h2);
    c.t->close(h);   /* closes its descriptor */
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    case_end(&c, NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("conformance");
    TCase *tc = tcase_create("every table");
    tcase_set_timeout(tc, 60);
    int n = (int)ct_table_count;
    tcase_add_loop_test(tc, a_handle_opens_shares_and_outlives_nothing_but_its_segment, 0, n);
    tcase_add_loop_test(tc, bad_input_is_refused_with_a_sentence_and_leaves_nothing, 0, n);
    tcase_add_loop_test(tc, an_observer_creates_nothing_and_opens_only_the_spec_made, 0, n);
    tcase_add_loop_test(tc, a_killed_members_share_is_accounted_then_given_back, 0, n);
    tcase_add_loop_test(tc, a_reset_starts_a_new_epoch_with_everything_free, 0, n);
    tcase_add_loop_test(tc, a_fork_childs_calls_are_refused_and_its_close_is_harmless, 0, n);
    tcase_add_loop_test(tc, a_member_gets_one_readiness_descriptor_per_handle, 0, n);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
