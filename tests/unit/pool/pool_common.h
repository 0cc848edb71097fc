/* SPDX-License-Identifier: MIT */
/* Helpers shared by the pool unit suites. */
#ifndef POOL_TEST_COMMON_H
#define POOL_TEST_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <orbit/pool.h>
#include "testutil.h"

/* ck_assert reports every passing check through a write(2): hot loops check quietly. */
#define QUIET_CHECK(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static const orbit_key KEY = { 0xC0FFEE, 0 };

struct env {
    struct orbit_fleet *f;
    struct orbit_pool *p;
};

/* A PRIVATE fleet of two nodes: this process is node 0, incarnation 1. */
static inline struct env env_open(const struct orbit_pool_spec *spec)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 2;
    o.incarnation = 1;
    o.backing = ORBIT_BACKING_PRIVATE;
    struct env e;
    ck_assert_int_eq(orbit_fleet_join(NULL, &o, &e.f), 0);
    int rc = orbit_pool_open(e.f, spec, &e.p);
    ck_assert_msg(rc == 0, "pool open: %s", orbit_strerror(rc));
    return e;
}

static inline void env_close(struct env *e)
{
    orbit_pool_close(e->p);
    orbit_fleet_leave(e->f);
}

static inline uint32_t cand_free(const struct orbit_candidate *c)
{
    uint64_t used = (uint64_t)c->reserved + c->active;
    return used >= c->capacity ? 0 : (uint32_t)(c->capacity - used);
}

/* The only candidate of key. */
static inline struct orbit_candidate only_candidate(struct orbit_pool *p, orbit_key key)
{
    struct orbit_candidate c[4];
    ck_assert_int_eq(orbit_pool_candidates(p, key, c, 4), 1);
    return c[0];
}

static inline void assert_budget(struct orbit_pool *p, orbit_key key, uint32_t live, uint32_t creating)
{
    uint32_t l = 99, c = 99;
    orbit_pool_budget(p, key, &l, &c);
    ck_assert_uint_eq(l, live);
    ck_assert_uint_eq(c, creating);
}

static inline orbit_key key_n(uint64_t n)
{
    return (orbit_key){ n * 0x9e3779b97f4a7c15ull + 1, n };
}

static inline TCase *tcase(const char *name, int timeout_s)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    return tc;
}

#endif
