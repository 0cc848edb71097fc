/* SPDX-License-Identifier: MIT */
/* Check suite for the admission ledger: outcomes, refusals, fees, overflow, poison, shutdown. */
#include <pthread.h>
#include <orbit/admission.h>
#include <orbit/uring.h>
#include "testutil.h"
#include "admission/adm_layout.h"

/* ---- fixture ------------------------------------------------------------- */

struct fx { struct orbit_fleet *f; struct orbit_admission *a; };

static struct orbit_fleet *join_private(void)
{
    struct orbit_fleet_opts o = ORBIT_FLEET_OPTS_DEFAULT;
    o.capacity = 8;
    struct orbit_fleet *f = NULL;
    int rc = orbit_fleet_join(NULL, &o, &f);
    ck_assert_msg(rc == 0, "private join: %s", orbit_strerror(rc));
    return f;
}

static struct fx fx_open(uint32_t max_domains, uint32_t max_claims, uint64_t retained_max)
{
    struct fx x;
    x.f = join_private();
    struct orbit_admission_spec spec = ORBIT_ADMISSION_SPEC_DEFAULT;
    spec.max_domains = max_domains;
    spec.max_claims = max_claims;
    spec.retained_max_bytes = retained_max;
    ck_assert_int_eq(orbit_admission_open(x.f, &spec, &x.a), 0);
    return x;
}

static void fx_close(struct fx *x)
{
    orbit_admission_close(x->a);
    orbit_fleet_leave(x->f);
}

/* Domains 10 (cap 100), 20 (cap 50), 30 (cap 10). */
static struct fx fx_std(uint64_t retained_max)
{
    struct fx x = fx_open(4, 16, retained_max);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 10, 100), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 20, 50), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 30, 10), 0);
    return x;
}

static int claim(struct orbit_admission *a, const struct orbit_units *c, size_t nc,
                 const struct orbit_units *fit, size_t nf, uint64_t fee, struct orbit_admit_result *r)
{
    struct orbit_demand d = { .claim = c, .n_claim = nc, .fit = fit, .n_fit = nf, .retained_bytes = fee };
    return orbit_admission_try_claim(a, &d, r);
}

/* One-domain claim that must come back CLAIMED. */
static struct orbit_claim must_claim(struct orbit_admission *a, uint32_t dom, uint64_t units, uint64_t fee)
{
    struct orbit_units u = { dom, units };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(a, &u, 1, NULL, 0, fee, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    return r.claim;
}

static struct orbit_domain_info dom_info(struct orbit_admission *a, uint32_t dom)
{
    struct orbit_domain_info d[16];
    ssize_t n = orbit_admission_domains(a, d, 16);
    ck_assert_int_ge(n, 0);
    for (ssize_t i = 0; i < n && i < 16; i++)
        if (d[i].domain == dom)
            return d[i];
    ck_abort_msg("domain %u not listed", dom);
    return d[0];
}

static uint64_t used(struct orbit_admission *a, uint32_t dom) { return dom_info(a, dom).used; }

static struct orbit_admission_info info(struct orbit_admission *a)
{
    struct orbit_admission_info in;
    ck_assert_int_eq(orbit_admission_info(a, &in), 0);
    return in;
}

/* ---- open and spec ------------------------------------------------------- */

START_TEST(test_open_spec)
{
    struct orbit_fleet *f = join_private();
    struct orbit_admission *a = NULL;
    struct orbit_admission_spec bad[] = {
        { .kind = ORBIT_ADMISSION_KIND, .max_domains = 0, .max_claims = 16, .retained_max_bytes = 0 },
        { .kind = ORBIT_ADMISSION_KIND, .max_domains = 1025, .max_claims = 16, .retained_max_bytes = 0 },
        { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4, .max_claims = 0, .retained_max_bytes = 0 },
        { .kind = ORBIT_ADMISSION_KIND, .max_domains = 4, .max_claims = (1u << 20) + 1, .retained_max_bytes = 0 },
        { .kind = ORBIT_ADMISSION_KIND, .max_domains = 1024, .max_claims = 1u << 20 },   /* table above 1 GiB */
        { .kind = 255, .max_domains = 4, .max_claims = 16, .retained_max_bytes = 0 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(orbit_admission_open(f, &bad[i], &a), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_open(NULL, NULL, &a), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_open(f, NULL, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_open(f, NULL, &a), 0);
    struct orbit_admission_info in = info(a);
    ck_assert_uint_eq(in.spec.kind, ORBIT_ADMISSION_KIND);
    ck_assert_uint_eq(in.spec.max_domains, 16);
    ck_assert_uint_eq(in.spec.max_claims, 4096);
    ck_assert_uint_eq(in.spec.retained_max_bytes, 0);
    ck_assert_uint_eq(in.n_domains, 0);
    ck_assert(in.next_serial >= 1 && in.next_serial <= (1ull << 62) + 1);   /* random start */
    ck_assert(!in.poisoned && !in.shutdown);
    ck_assert_str_eq(in.poison_reason, "");
    ck_assert_int_eq(orbit_admission_domains(a, NULL, 0), 0);
    ck_assert_int_eq(orbit_admission_claims(a, NULL, 0), 0);
    /* A second handle on the same PRIVATE fleet sees the same ledger. */
    struct orbit_admission *b;
    ck_assert_int_eq(orbit_admission_open(f, NULL, &b), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 5, 9), 0);
    ck_assert_int_eq(orbit_admission_domains(b, NULL, 0), 1);
    struct orbit_admission_spec other = ORBIT_ADMISSION_SPEC_DEFAULT;
    other.max_claims = 8;
    struct orbit_admission *c;
    ck_assert_int_eq(orbit_admission_open(f, &other, &c), -ORBIT_EGEOMETRY);
    orbit_admission_close(b);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
}
END_TEST

START_TEST(test_named_geometry_and_existing)
{
    const char *name = tu_fleet_name("adm-geo");
    struct orbit_fleet *f = tu_join(name, 8, -1, 0, tu_backing());
    struct orbit_admission *a, *b;
    struct orbit_admission_spec spec = { .kind = ORBIT_ADMISSION_KIND, .max_domains = 8, .max_claims = 64, .retained_max_bytes = 1000 };
    ck_assert_int_eq(orbit_admission_open(f, &spec, &a), 0);
    struct orbit_admission_spec other = spec;
    other.retained_max_bytes = 999;
    ck_assert_int_eq(orbit_admission_open(f, &other, &b), -ORBIT_EGEOMETRY);
    other = spec;
    other.max_domains = 9;
    ck_assert_int_eq(orbit_admission_open(f, &other, &b), -ORBIT_EGEOMETRY);
    /* open_existing takes the spec from the segment. */
    ck_assert_int_eq(orbit_admission_open_existing(f, ORBIT_ADMISSION_KIND, &b), 0);
    struct orbit_admission_info in = info(b);
    ck_assert_uint_eq(in.spec.max_domains, 8);
    ck_assert_uint_eq(in.spec.max_claims, 64);
    ck_assert_uint_eq(in.spec.retained_max_bytes, 1000);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 10), 0);
    struct orbit_claim c = must_claim(a, 1, 4, 4);
    ck_assert_uint_eq(used(b, 1), 4);
    ck_assert_uint_eq(orbit_admission_retained_bytes(b), 4);
    ck_assert_int_eq(orbit_admission_release(b, &c), 0);   /* any handle of the fleet may release */
    ck_assert_uint_eq(used(a, 1), 0);
    orbit_admission_close(b);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

START_TEST(test_observer)
{
    const char *name = tu_fleet_name("adm-obs");
    struct orbit_fleet *f = tu_join(name, 8, 3, 777, tu_backing());
    struct orbit_admission *a, *o;
    ck_assert_int_eq(orbit_admission_open(f, NULL, &a), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 10), 0);
    struct orbit_claim c = must_claim(a, 1, 3, 0);
    ck_assert_uint_eq(c.node, 3);
    ck_assert_uint_eq(c.incarnation, 777);
    struct orbit_fleet *obs;
    ck_assert_int_eq(orbit_fleet_observe(name, &obs), 0);
    ck_assert_int_eq(orbit_admission_open_existing(obs, ORBIT_ADMISSION_KIND, &o), 0);
    struct orbit_units u = { 1, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(o, &u, 1, NULL, 0, 0, &r), -ORBIT_ENOTOWNER);
    ck_assert_int_eq(orbit_admission_set_capacity(o, 1, 12), 0);   /* operators may resize */
    orbit_admission_node_dead(o, 3, 777);                            /* and report deaths */
    ck_assert_uint_eq(used(a, 1), 0);
    ck_assert_int_eq(orbit_admission_release(a, &c), -ORBIT_ENOTRESERVED);
    orbit_admission_close(o);
    orbit_fleet_leave(obs);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
}
END_TEST

/* ---- domains ------------------------------------------------------------- */

START_TEST(test_set_capacity)
{
    struct fx x = fx_open(3, 8, 0);
    ck_assert_int_eq(orbit_admission_set_capacity(NULL, 1, 1), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, UINT32_MAX, 5), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 0, 0), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 77, 40), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 78, 40), -ORBIT_EKEYFULL);
    struct orbit_domain_info d[2];
    ck_assert_int_eq(orbit_admission_domains(x.a, d, 2), 3);   /* count beyond max */
    ck_assert_uint_eq(d[0].domain, UINT32_MAX);
    ck_assert_uint_eq(d[0].capacity, 5);
    ck_assert_uint_eq(d[1].domain, 0);
    ck_assert_uint_eq(d[1].capacity, 0);
    uint64_t e0 = orbit_admission_epoch(x.a);
    /* Growth advances the domain's availability epoch and the change epoch. */
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 77, 60), 0);
    ck_assert_uint_eq(dom_info(x.a, 77).availability_epoch, 1);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e0 + 1);
    /* Shrinking (to no less than used) advances nothing. */
    struct orbit_claim c = must_claim(x.a, 77, 30, 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 77, 30), 0);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e0 + 1);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 77, 29), -ORBIT_EBUSY);
    ck_assert_uint_eq(dom_info(x.a, 77).capacity, 30);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 77, 30), 0);   /* same: no change */
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e0 + 1);
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    /* Capacity 0: every claim on it is REJECTED. */
    struct orbit_units u = { 0, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_REJECTED);
    fx_close(&x);
}
END_TEST

/* ---- outcomes ------------------------------------------------------------ */

START_TEST(test_claimed)
{
    struct fx x = fx_std(0);
    struct orbit_units u[] = { { 10, 40 }, { 30, 10 } };
    struct orbit_admit_result r;
    uint64_t e0 = orbit_admission_epoch(x.a), s0 = info(x.a).next_serial;
    ck_assert_int_eq(claim(x.a, u, 2, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_uint_eq(r.claim.serial, s0);
    ck_assert_uint_eq(info(x.a).next_serial, s0 + 1);
    ck_assert_uint_eq(r.claim.node, orbit_fleet_node(x.f));
    ck_assert_uint_eq(r.claim.incarnation, orbit_fleet_incarnation(x.f));
    ck_assert_uint_eq(r.claim.retained_bytes, 0);
    ck_assert(!r.claim.released);
    ck_assert_int_eq(r.skip, ORBIT_SKIP_NONE);
    ck_assert_uint_eq(r.release_epoch, e0);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e0);   /* claiming does not advance it */
    ck_assert_uint_eq(used(x.a, 10), 40);
    ck_assert_uint_eq(used(x.a, 20), 0);
    ck_assert_uint_eq(used(x.a, 30), 10);                /* exactly full is a fit */
    struct orbit_claim_info ci[2];
    ck_assert_int_eq(orbit_admission_claims(x.a, ci, 2), 1);
    ck_assert_uint_eq(ci[0].claim.serial, r.claim.serial);
    ck_assert_uint_eq(ci[0].claim.slot, r.claim.slot);
    ck_assert_uint_eq(ci[0].n_units, 2);
    struct orbit_units back[4];
    ck_assert_int_eq(orbit_admission_claim_units(x.a, &r.claim, back, 4), 2);
    ck_assert_uint_eq(back[0].domain, 10);
    ck_assert_uint_eq(back[0].units, 40);
    ck_assert_uint_eq(back[1].domain, 30);
    ck_assert_uint_eq(back[1].units, 10);
    ck_assert_int_eq(orbit_admission_release(x.a, &r.claim), 0);
    ck_assert_int_eq(orbit_admission_claim_units(x.a, &r.claim, back, 4), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_admission_claims(x.a, ci, 2), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_serials_never_reused)
{
    struct fx x = fx_std(0);
    uint64_t last = 0;
    struct orbit_claim held[3];
    for (int i = 0; i < 60; i++) {
        struct orbit_claim c = must_claim(x.a, 10, 1, 0);
        ck_assert_uint_gt(c.serial, last);   /* strictly increasing, so never reused */
        last = c.serial;
        if (i % 20 < 3)
            held[i % 20] = c;               /* some stay live while others churn slots */
        else
            ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(orbit_admission_release(x.a, &held[i]), 0);
    ck_assert_uint_eq(info(x.a).next_serial, last + 1);
    fx_close(&x);
}
END_TEST

START_TEST(test_rejected)
{
    struct fx x = fx_std(0);
    struct orbit_claim hold = must_claim(x.a, 20, 45, 0);
    struct orbit_admit_result r;
    /* A claim entry above capacity: REJECTED even while other entries would defer. */
    struct orbit_units u[] = { { 20, 10 }, { 30, 11 } };
    ck_assert_int_eq(claim(x.a, u, 2, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_REJECTED);
    ck_assert_uint_eq(r.blocker_domain, 30);
    ck_assert_uint_eq(r.blocker_maximum, 10);
    ck_assert_uint_eq(r.blocker_free, 10);
    ck_assert_uint_eq(r.claim.serial, 0);
    /* A fit entry above capacity also rejects; the claim itself would fit. */
    struct orbit_units c1 = { 10, 1 }, fit[] = { { 10, 100 }, { 20, 51 } };
    ck_assert_int_eq(claim(x.a, &c1, 1, fit, 2, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_REJECTED);
    ck_assert_uint_eq(r.blocker_domain, 20);
    ck_assert_uint_eq(r.blocker_maximum, 50);
    ck_assert_uint_eq(r.blocker_free, 5);
    ck_assert_uint_eq(used(x.a, 10), 0);
    ck_assert_uint_eq(used(x.a, 30), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &hold), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_fit_only_rejects)
{
    struct fx x = fx_std(0);
    struct orbit_claim hold = must_claim(x.a, 10, 90, 0);
    /* The fit vector asks the whole capacity while 90 are used: only the REJECTED check reads it. */
    struct orbit_units c1 = { 20, 5 }, fit = { 10, 100 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &c1, 1, &fit, 1, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_uint_eq(used(x.a, 10), 90);   /* fit charges nothing */
    ck_assert_uint_eq(used(x.a, 20), 5);
    ck_assert_int_eq(orbit_admission_release(x.a, &r.claim), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &hold), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_deferred_all_or_nothing)
{
    struct fx x = fx_std(0);
    struct orbit_claim hold = must_claim(x.a, 20, 45, 0);
    uint64_t e = orbit_admission_epoch(x.a);
    struct orbit_units u[] = { { 10, 60 }, { 20, 6 }, { 30, 1 } };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, u, 3, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_DEFERRED);
    ck_assert_uint_eq(r.blocker_domain, 20);
    ck_assert_uint_eq(r.blocker_free, 5);
    ck_assert_uint_eq(r.blocker_maximum, 50);
    ck_assert_uint_eq(r.release_epoch, e);
    ck_assert_uint_eq(r.claim.serial, 0);
    /* Nothing charged in the domains that had room. */
    ck_assert_uint_eq(used(x.a, 10), 0);
    ck_assert_uint_eq(used(x.a, 30), 0);
    ck_assert_uint_eq(info(x.a).live_claims, 1);
    /* After the release the same demand is claimed, and the wait for it returns at once. */
    ck_assert_int_eq(orbit_admission_release(x.a, &hold), 0);
    uint64_t now = 0;
    ck_assert_int_eq(orbit_admission_wait(x.a, r.release_epoch, 0, &now), 0);
    ck_assert_uint_eq(now, e + 1);
    ck_assert_int_eq(claim(x.a, u, 3, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_uint_eq(used(x.a, 10), 60);
    ck_assert_uint_eq(used(x.a, 20), 6);
    ck_assert_uint_eq(used(x.a, 30), 1);
    ck_assert_int_eq(orbit_admission_release(x.a, &r.claim), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_skipped_disabled)
{
    struct fx x = fx_std(0);
    struct orbit_claim hold = must_claim(x.a, 30, 10, 0);
    uint64_t e = orbit_admission_epoch(x.a);
    struct orbit_admit_result r;
    /* Retention disabled: SKIPPED, never DEFERRED, even though domain 30 is full ... */
    struct orbit_units u = { 30, 5 };
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 5, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_SKIPPED);
    ck_assert_int_eq(r.skip, ORBIT_SKIP_DISABLED);
    ck_assert_uint_eq(r.retained_max, 0);
    /* ... and before the REJECTED check and the domain lookup (the documented order). */
    struct orbit_units big = { 30, 11 }, unknown = { 99, 3 };
    ck_assert_int_eq(claim(x.a, &big, 1, NULL, 0, 11, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_SKIPPED);
    ck_assert_int_eq(claim(x.a, &unknown, 1, NULL, 0, 3, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_SKIPPED);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 0);
    ck_assert_uint_eq(used(x.a, 30), 10);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e);
    ck_assert_int_eq(orbit_admission_release(x.a, &hold), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_skipped_capacity)
{
    struct fx x = fx_std(100);
    struct orbit_units u[] = { { 10, 40 }, { 20, 20 } };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, u, 2, NULL, 0, 60, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_uint_eq(r.claim.retained_bytes, 60);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 60);
    struct orbit_claim first = r.claim;
    /* 41 more would make 101 > 100: SKIPPED with the totals; nothing charged. */
    struct orbit_units v[] = { { 10, 31 }, { 30, 10 } };
    ck_assert_int_eq(claim(x.a, v, 2, NULL, 0, 41, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_SKIPPED);
    ck_assert_int_eq(r.skip, ORBIT_SKIP_CAPACITY);
    ck_assert_uint_eq(r.retained_now, 60);
    ck_assert_uint_eq(r.retained_max, 100);
    ck_assert_uint_eq(used(x.a, 10), 40);
    ck_assert_uint_eq(used(x.a, 30), 0);
    /* Exactly at the cap fits; ordinary claims do not count against it. */
    struct orbit_units w = { 10, 40 };
    ck_assert_int_eq(claim(x.a, &w, 1, NULL, 0, 40, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 100);
    struct orbit_claim second = r.claim;
    struct orbit_claim plain = must_claim(x.a, 20, 5, 0);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 100);
    ck_assert_int_eq(orbit_admission_release(x.a, &first), 0);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 40);
    ck_assert_int_eq(claim(x.a, v, 2, NULL, 0, 41, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_int_eq(orbit_admission_release(x.a, &r.claim), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &second), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &plain), 0);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_deferred_before_retained_skip)
{
    struct fx x = fx_std(10);
    struct orbit_claim hold = must_claim(x.a, 30, 8, 8);
    struct orbit_units u = { 30, 5 };
    struct orbit_admit_result r;
    /* Both the domain (2 free) and the cap (2 left) refuse: DEFERRED comes first. */
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 5, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_DEFERRED);
    ck_assert_uint_eq(r.blocker_domain, 30);
    /* And REJECTED comes before both. */
    struct orbit_units big = { 30, 11 };
    ck_assert_int_eq(claim(x.a, &big, 1, NULL, 0, 11, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_REJECTED);
    /* Room in the domain but not under the cap: SKIPPED, not DEFERRED. */
    struct orbit_units other = { 10, 5 };
    ck_assert_int_eq(claim(x.a, &other, 1, NULL, 0, 5, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_SKIPPED);
    ck_assert_int_eq(r.skip, ORBIT_SKIP_CAPACITY);
    ck_assert_uint_eq(r.retained_now, 8);
    ck_assert_int_eq(orbit_admission_release(x.a, &hold), 0);
    fx_close(&x);
}
END_TEST

/* ---- refusals ------------------------------------------------------------ */

static void assert_unchanged(struct orbit_admission *a, uint64_t epoch)
{
    ck_assert_uint_eq(orbit_admission_epoch(a), epoch);
    ck_assert_uint_eq(used(a, 10), 0);
    ck_assert_uint_eq(used(a, 20), 0);
    ck_assert_uint_eq(info(a).live_claims, 0);
    ck_assert(!orbit_admission_poisoned(a));
}

START_TEST(test_malformed)
{
    struct fx x = fx_std(1000);
    uint64_t e = orbit_admission_epoch(x.a);
    struct orbit_admit_result r;
    struct orbit_units ok = { 10, 1 }, zero = { 10, 0 }, dup[] = { { 10, 1 }, { 10, 2 } };
    struct orbit_units unknown = { 11, 1 }, five[] = { { 10, 1 }, { 20, 1 }, { 30, 1 }, { 40, 1 }, { 50, 1 } };
    struct orbit_units huge[] = { { 10, UINT64_MAX }, { 20, 2 } };
    ck_assert_int_eq(claim(x.a, NULL, 0, NULL, 0, 0, &r), -ORBIT_EMALFORMED);     /* empty */
    ck_assert_int_eq(claim(x.a, &ok, 0, NULL, 0, 0, &r), -ORBIT_EMALFORMED);      /* empty */
    ck_assert_int_eq(claim(x.a, NULL, 1, NULL, 0, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, &ok, 1, NULL, 1, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, &zero, 1, NULL, 0, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, &ok, 1, &zero, 1, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, dup, 2, NULL, 0, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, &ok, 1, dup, 2, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, five, 5, NULL, 0, 0, &r), -ORBIT_EMALFORMED);    /* > max_domains */
    ck_assert_int_eq(claim(x.a, &unknown, 1, NULL, 0, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, &ok, 1, &unknown, 1, 0, &r), -ORBIT_EMALFORMED);
    /* The fee must be the claim's complete sum: not less, not more, not an overflowed sum. */
    ck_assert_int_eq(claim(x.a, dup, 1, NULL, 0, 2, &r), -ORBIT_EMALFORMED);
    struct orbit_units two[] = { { 10, 3 }, { 20, 4 } };
    ck_assert_int_eq(claim(x.a, two, 2, NULL, 0, 6, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, two, 2, NULL, 0, 8, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, two, 2, NULL, 0, 3, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, huge, 2, NULL, 0, 1, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, huge, 2, NULL, 0, UINT64_MAX, &r), -ORBIT_EMALFORMED);
    struct orbit_demand d = { .claim = &ok, .n_claim = 1 };
    ck_assert_int_eq(orbit_admission_try_claim(NULL, &d, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_try_claim(x.a, NULL, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_try_claim(x.a, &d, NULL), -ORBIT_EMALFORMED);
    assert_unchanged(x.a, e);
    /* A huge ordinary claim is not malformed: it is REJECTED by capacity. */
    ck_assert_int_eq(claim(x.a, huge, 2, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_REJECTED);
    ck_assert_int_eq(claim(x.a, two, 2, NULL, 0, 7, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    ck_assert_int_eq(orbit_admission_release(x.a, &r.claim), 0);
    fx_close(&x);
}
END_TEST

START_TEST(test_check_order)
{
    struct fx x = fx_std(0);
    struct orbit_admit_result r;
    struct orbit_units ok = { 10, 1 };
    /* Shut down: closed comes after the argument checks, before every outcome. */
    ck_assert_int_eq(orbit_admission_shutdown(x.a), 0);
    ck_assert_int_eq(claim(x.a, &ok, 1, NULL, 0, 0, &r), -ORBIT_ECLOSEDADM);
    ck_assert_int_eq(claim(x.a, &ok, 1, NULL, 0, 1, &r), -ORBIT_ECLOSEDADM);   /* before SKIPPED */
    ck_assert_int_eq(claim(x.a, &ok, 1, NULL, 0, 2, &r), -ORBIT_EMALFORMED);   /* fee first */
    /* Poisoned: after the argument checks, before closed. */
    adm_lock(x.a, false);
    adm_poison(x.a, ADM_POISON_USAGE);
    adm_unlock(x.a);
    ck_assert_int_eq(claim(x.a, &ok, 1, NULL, 0, 0, &r), -ORBIT_EPOISONED);
    ck_assert_int_eq(claim(x.a, NULL, 0, NULL, 0, 0, &r), -ORBIT_EMALFORMED);
    ck_assert_int_eq(claim(x.a, &ok, 1, NULL, 0, 5, &r), -ORBIT_EMALFORMED);
    fx_close(&x);
}
END_TEST

START_TEST(test_table_full)
{
    struct fx x = fx_open(2, 3, 0);
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 1, 100), 0);
    struct orbit_claim c[3];
    for (int i = 0; i < 3; i++)
        c[i] = must_claim(x.a, 1, 1, 0);
    struct orbit_units u = { 1, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), -ORBIT_EFULL);
    ck_assert_uint_eq(used(x.a, 1), 3);
    ck_assert_int_eq(orbit_admission_release(x.a, &c[1]), 0);
    struct orbit_claim again = must_claim(x.a, 1, 1, 0);
    ck_assert_uint_eq(again.slot, c[1].slot);            /* the freed record is reused ... */
    ck_assert_uint_gt(again.serial, c[2].serial);        /* ... under a new serial */
    ck_assert_int_eq(orbit_admission_release(x.a, &c[1]), -ORBIT_ENOTRESERVED);
    c[1] = again;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(orbit_admission_release(x.a, &c[i]), 0);
    fx_close(&x);
}
END_TEST

/* ---- release ------------------------------------------------------------- */

START_TEST(test_release_exactly_once)
{
    struct fx x = fx_std(0);
    struct orbit_units u[] = { { 10, 7 }, { 20, 3 } };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, u, 2, NULL, 0, 0, &r), 0);
    struct orbit_claim c = r.claim, copy = r.claim;
    uint64_t e = orbit_admission_epoch(x.a);
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    ck_assert(c.released);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e + 1);
    ck_assert_uint_eq(dom_info(x.a, 10).availability_epoch, 1);
    ck_assert_uint_eq(dom_info(x.a, 20).availability_epoch, 1);
    ck_assert_uint_eq(dom_info(x.a, 30).availability_epoch, 0);   /* not in the claim */
    /* Again, through the marked claim or an unmarked copy: refused, nothing moves. */
    ck_assert_int_eq(orbit_admission_release(x.a, &c), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_admission_release(x.a, &copy), -ORBIT_ENOTRESERVED);
    ck_assert(!copy.released);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e + 1);
    ck_assert_uint_eq(dom_info(x.a, 10).availability_epoch, 1);
    /* The copy's slot now holds another claim: the stale copy still cannot touch it. */
    struct orbit_claim next = must_claim(x.a, 10, 5, 0);
    ck_assert_uint_eq(next.slot, copy.slot);
    ck_assert_int_eq(orbit_admission_release(x.a, &copy), -ORBIT_ENOTRESERVED);
    ck_assert_uint_eq(used(x.a, 10), 5);
    /* Forged claims: unknown serial, slot out of range, serial 0. */
    struct orbit_claim forged = next;
    forged.serial += 1000;
    ck_assert_int_eq(orbit_admission_release(x.a, &forged), -ORBIT_ENOTRESERVED);
    forged = next;
    forged.slot = 1u << 30;
    ck_assert_int_eq(orbit_admission_release(x.a, &forged), -ORBIT_ENOTRESERVED);
    struct orbit_claim zeroed = { 0 };
    ck_assert_int_eq(orbit_admission_release(x.a, &zeroed), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_admission_release(x.a, NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_release(NULL, &next), -ORBIT_EMALFORMED);
    ck_assert_uint_eq(used(x.a, 10), 5);
    ck_assert(!orbit_admission_poisoned(x.a));
    ck_assert_int_eq(orbit_admission_release(x.a, &next), 0);
    ck_assert_uint_eq(used(x.a, 10), 0);
    fx_close(&x);
}
END_TEST

/* A claim of another ledger, or of an earlier ledger of the same name, is not this one's. */
START_TEST(test_foreign_claim)
{
    struct fx x = fx_std(0), y = fx_std(0);
    struct orbit_claim cx = must_claim(x.a, 10, 3, 0), cy = must_claim(y.a, 10, 4, 0);
    ck_assert_uint_eq(cx.slot, cy.slot);
    ck_assert_uint_ne(cx.serial, cy.serial);   /* random starting points */
    struct orbit_claim alien = cx;               /* even with y's holder fields */
    alien.node = cy.node;
    alien.incarnation = cy.incarnation;
    ck_assert_int_eq(orbit_admission_release(y.a, &alien), -ORBIT_ENOTRESERVED);
    ck_assert_uint_eq(used(y.a, 10), 4);
    ck_assert(!orbit_admission_poisoned(y.a));
    ck_assert_int_eq(orbit_admission_release(y.a, &cy), 0);
    fx_close(&y);
    const char *name = tu_fleet_name("adm-again");
    struct orbit_fleet *f = tu_join(name, 8, -1, 0, tu_backing());
    struct orbit_admission *a;
    ck_assert_int_eq(orbit_admission_open(f, NULL, &a), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 10), 0);
    struct orbit_claim old = must_claim(a, 1, 2, 0);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    f = tu_join(name, 8, -1, 0, tu_backing());
    ck_assert_int_eq(orbit_admission_open(f, NULL, &a), 0);
    ck_assert_int_eq(orbit_admission_set_capacity(a, 1, 10), 0);
    struct orbit_claim now = must_claim(a, 1, 2, 0);
    ck_assert_uint_eq(now.slot, old.slot);
    ck_assert_int_eq(orbit_admission_release(a, &old), -ORBIT_ENOTRESERVED);
    ck_assert_uint_eq(used(a, 1), 2);
    ck_assert_int_eq(orbit_admission_release(a, &now), 0);
    orbit_admission_close(a);
    orbit_fleet_leave(f);
    ck_assert_int_eq(orbit_fleet_unlink(name), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &cx), 0);
    fx_close(&x);
}
END_TEST

/* Every mutating call of a poisoned ledger is -ORBIT_EPOISONED; inspection still works. */
static void assert_fail_closed(struct fx *x, struct orbit_claim *live)
{
    ck_assert(orbit_admission_poisoned(x->a));
    struct orbit_units u = { 10, 1 };
    struct orbit_admit_result r;
    uint64_t e = orbit_admission_epoch(x->a), now;
    ck_assert_int_eq(claim(x->a, &u, 1, NULL, 0, 0, &r), -ORBIT_EPOISONED);
    if (live) {
        ck_assert_int_eq(orbit_admission_release(x->a, live), -ORBIT_EPOISONED);
        ck_assert(!live->released);
    }
    ck_assert_int_eq(orbit_admission_set_capacity(x->a, 10, 1000), -ORBIT_EPOISONED);
    ck_assert_int_eq(orbit_admission_set_capacity(x->a, 12345, 1), -ORBIT_EPOISONED);
    ck_assert_int_eq(orbit_admission_shutdown(x->a), -ORBIT_EPOISONED);
    ck_assert_int_eq(orbit_admission_wait(x->a, 0, 0, &now), -ORBIT_EPOISONED);
    ck_assert_int_eq(orbit_admission_wait(x->a, e, 1000, &now), -ORBIT_EPOISONED);
    orbit_admission_node_dead(x->a, orbit_fleet_node(x->f), orbit_fleet_incarnation(x->f));
    ck_assert_uint_eq(orbit_admission_epoch(x->a), e);
    struct orbit_admission_info in = info(x->a);
    ck_assert(in.poisoned);
    ck_assert_str_ne(in.poison_reason, "");
    ck_assert_int_ge(orbit_admission_domains(x->a, NULL, 0), 1);
}

START_TEST(test_release_disagreeing_poisons)
{
    const char *field = _i == 0 ? "retained" : _i == 1 ? "node" : "incarnation";
    struct fx x = fx_std(100);
    struct orbit_claim c = must_claim(x.a, 10, 5, 5), other = must_claim(x.a, 20, 2, 0);
    struct orbit_claim bad = c;
    if (_i == 0) bad.retained_bytes = 4;
    if (_i == 1) bad.node ^= 1;
    if (_i == 2) bad.incarnation ^= 1;
    ck_assert_msg(orbit_admission_release(x.a, &bad) == -ORBIT_EPOISONED, "%s", field);
    ck_assert(!bad.released);
    ck_assert_uint_eq(used(x.a, 10), 5);   /* fail-closed: nothing given back */
    assert_fail_closed(&x, &other);
    fx_close(&x);
}
END_TEST

/* ---- overflow rules ------------------------------------------------------ */

START_TEST(test_poison_serial_exhausted)
{
    struct fx x = fx_std(0);
    x.a->ledger->next_serial = UINT64_MAX - 1;
    struct orbit_claim last = must_claim(x.a, 10, 1, 0);      /* the last serial there is */
    ck_assert_uint_eq(last.serial, UINT64_MAX - 1);
    struct orbit_units u = { 10, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), -ORBIT_EPOISONED);
    ck_assert_uint_eq(used(x.a, 10), 1);
    ck_assert_str_eq(info(x.a).poison_reason, "serial counter exhausted");
    assert_fail_closed(&x, &last);
    fx_close(&x);
}
END_TEST

START_TEST(test_poison_epoch_exhausted)
{
    struct fx x = fx_std(0);
    /* With the epoch at MAX-1 one claim still fits: its release can still advance it. */
    atomic_store(&x.a->ledger->change_epoch, UINT64_MAX - 1);
    struct orbit_claim c = must_claim(x.a, 10, 1, 0);
    struct orbit_units u = { 10, 1 };
    struct orbit_admit_result r;
    /* A second one could not be released with an epoch step: refused fail-closed. */
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), -ORBIT_EPOISONED);
    ck_assert_str_eq(info(x.a).poison_reason, "epoch exhausted");
    assert_fail_closed(&x, &c);
    fx_close(&x);
}
END_TEST

START_TEST(test_epoch_boundary_release)
{
    struct fx x = fx_std(0);
    atomic_store(&x.a->ledger->change_epoch, UINT64_MAX - 1);
    struct orbit_claim c = must_claim(x.a, 10, 1, 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);      /* MAX-1 -> MAX is allowed */
    ck_assert_uint_eq(orbit_admission_epoch(x.a), UINT64_MAX);
    ck_assert(!orbit_admission_poisoned(x.a));
    struct orbit_units u = { 10, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), -ORBIT_EPOISONED);   /* no step left */
    fx_close(&x);
}
END_TEST

START_TEST(test_poison_availability_epoch)
{
    struct fx x = fx_std(0);
    x.a->domains[1].availability_epoch = UINT64_MAX;   /* domain 20 */
    struct orbit_claim c = must_claim(x.a, 10, 1, 0);  /* other domains are unaffected */
    struct orbit_units u[] = { { 10, 1 }, { 20, 1 } };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, u, 2, NULL, 0, 0, &r), -ORBIT_EPOISONED);
    ck_assert_uint_eq(used(x.a, 10), 1);
    assert_fail_closed(&x, &c);
    fx_close(&x);
}
END_TEST

START_TEST(test_poison_growth_epoch)
{
    struct fx x = fx_std(0);
    x.a->domains[0].availability_epoch = UINT64_MAX;
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 10, 100), 0);   /* no growth: fine */
    ck_assert_int_eq(orbit_admission_set_capacity(x.a, 10, 101), -ORBIT_EPOISONED);
    ck_assert_uint_eq(dom_info(x.a, 10).capacity, 100);
    assert_fail_closed(&x, NULL);
    fx_close(&x);
}
END_TEST

START_TEST(test_poison_used_over_capacity)
{
    struct fx x = fx_std(0);
    x.a->domains[2].used = 11;   /* domain 30, capacity 10: a broken invariant */
    struct orbit_units u = { 30, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), -ORBIT_EPOISONED);
    ck_assert_str_eq(info(x.a).poison_reason, "domain usage above capacity or overflowed");
    assert_fail_closed(&x, NULL);
    fx_close(&x);
}
END_TEST

START_TEST(test_poison_retained_over_cap)
{
    struct fx x = fx_std(50);
    x.a->ledger->retained_bytes = 51;
    struct orbit_units u = { 10, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 1, &r), -ORBIT_EPOISONED);
    assert_fail_closed(&x, NULL);
    fx_close(&x);
}
END_TEST

START_TEST(test_poison_release_underflow)
{
    struct fx x = fx_std(100);
    struct orbit_claim c = must_claim(x.a, 10, 5, 5);
    if (_i == 0)
        x.a->domains[0].used = 4;             /* the domain no longer covers the claim */
    else
        x.a->ledger->retained_bytes = 4;      /* the retained total no longer covers it */
    ck_assert_int_eq(orbit_admission_release(x.a, &c), -ORBIT_EPOISONED);
    ck_assert(!c.released);
    assert_fail_closed(&x, NULL);
    fx_close(&x);
}
END_TEST

/* ---- shutdown ------------------------------------------------------------ */

START_TEST(test_shutdown)
{
    struct fx x = fx_std(100);
    struct orbit_claim a1 = must_claim(x.a, 10, 30, 0), a2 = must_claim(x.a, 20, 10, 10);
    uint64_t e = orbit_admission_epoch(x.a);
    ck_assert_int_eq(orbit_admission_shutdown(NULL), -ORBIT_EMALFORMED);
    ck_assert_int_eq(orbit_admission_shutdown(x.a), 0);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e + 1);   /* deferred claimers wake */
    ck_assert_int_eq(orbit_admission_shutdown(x.a), 0);     /* idempotent */
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e + 1);
    ck_assert(info(x.a).shutdown);
    struct orbit_units u = { 10, 1 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), -ORBIT_ECLOSEDADM);
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 1, &r), -ORBIT_ECLOSEDADM);
    /* Outstanding claims stay valid and releasable, exactly once. */
    ck_assert_uint_eq(used(x.a, 10), 30);
    ck_assert_int_eq(orbit_admission_release(x.a, &a1), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &a1), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_admission_release(x.a, &a2), 0);
    ck_assert_uint_eq(used(x.a, 10), 0);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 0);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e + 3);
    ck_assert(!orbit_admission_poisoned(x.a));
    fx_close(&x);
}
END_TEST

/* ---- node_dead ----------------------------------------------------------- */

START_TEST(test_node_dead)
{
    struct fx x = fx_std(100);
    uint16_t node = orbit_fleet_node(x.f);
    uint64_t inc = orbit_fleet_incarnation(x.f);
    struct orbit_claim c[3] = { must_claim(x.a, 10, 10, 10), must_claim(x.a, 20, 5, 0),
                                must_claim(x.a, 10, 1, 0) };
    /* A record of another life of this node, and one of another node (written as a peer would). */
    struct adm_record *r2 = adm_record(x.a, c[2].slot);
    r2->incarnation = inc + 1;
    c[2].incarnation = inc + 1;
    uint64_t e = orbit_admission_epoch(x.a);
    orbit_admission_node_dead(x.a, (uint16_t)(node + 1), inc);
    orbit_admission_node_dead(x.a, node, inc + 2);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e);
    ck_assert_uint_eq(info(x.a).live_claims, 3);
    orbit_admission_node_dead(x.a, node, inc);
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e + 2);   /* one step per released claim */
    ck_assert_uint_eq(used(x.a, 10), 1);
    ck_assert_uint_eq(used(x.a, 20), 0);
    ck_assert_uint_eq(orbit_admission_retained_bytes(x.a), 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &c[0]), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_admission_release(x.a, &c[1]), -ORBIT_ENOTRESERVED);
    ck_assert_int_eq(orbit_admission_release(x.a, &c[2]), 0);
    ck_assert(!orbit_admission_poisoned(x.a));
    orbit_admission_node_dead(NULL, 0, 0);   /* harmless */
    fx_close(&x);
}
END_TEST

/* ---- waits --------------------------------------------------------------- */

START_TEST(test_wait_timeouts)
{
    struct fx x = fx_std(0);
    uint64_t e = orbit_admission_epoch(x.a), now = 12345;
    ck_assert_int_eq(orbit_admission_wait(x.a, e, 0, &now), -ORBIT_ETIMEDOUT);
    ck_assert_uint_eq(now, e);
    now = 12345;
    ck_assert_int_eq(orbit_admission_wait(x.a, e, 30, &now), -ORBIT_ETIMEDOUT);
    ck_assert_uint_eq(now, e);
    ck_assert_int_eq(orbit_admission_wait(x.a, e, 0, NULL), -ORBIT_ETIMEDOUT);
    struct orbit_claim c = must_claim(x.a, 10, 1, 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    ck_assert_int_eq(orbit_admission_wait(x.a, e, -1, &now), 0);   /* passed already */
    ck_assert_uint_eq(now, e + 1);
    ck_assert_int_eq(orbit_admission_wait(NULL, e, 0, &now), -ORBIT_EMALFORMED);
    fx_close(&x);
}
END_TEST

struct waiter { struct orbit_admission *a; uint64_t since; int timeout; int rc; uint64_t now; _Atomic pid_t tid; };

static void *wait_thread(void *p)
{
    struct waiter *w = p;
    atomic_store(&w->tid, gettid());
    w->rc = orbit_admission_wait(w->a, w->since, w->timeout, &w->now);
    return NULL;
}

/* The thread's scheduler state letter ('S' sleeping, 'R' running...). */
static char thread_state(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Bounded: until the waiter armed the parked flag and sleeps (the wait itself never polls). */
static void until_parked(struct orbit_admission *a, struct waiter *w)
{
    for (int i = 0; i < 10000; i++) {
        pid_t tid = atomic_load(&w->tid);
        if (tid && atomic_load(&a->ledger->change.parked) == 1 && thread_state(tid) == 'S')
            return;
        tu_sleep_ms(1);
    }
    ck_abort_msg("waiter never parked");
}

/* 0: a release wakes it; 1: capacity growth; 2: shutdown; 3: poison. */
START_TEST(test_wait_woken)
{
    struct fx x = fx_std(0);
    struct orbit_claim c = must_claim(x.a, 30, 10, 0);
    struct orbit_units u = { 30, 4 };
    struct orbit_admit_result r;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), 0);
    ck_assert_int_eq(r.outcome, ORBIT_ADMIT_DEFERRED);
    struct waiter w = { x.a, r.release_epoch, 10000, 1, 0, 0 };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    until_parked(x.a, &w);
    if (_i == 0) ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    if (_i == 1) ck_assert_int_eq(orbit_admission_set_capacity(x.a, 30, 14), 0);
    if (_i == 2) ck_assert_int_eq(orbit_admission_shutdown(x.a), 0);
    if (_i == 3) {
        adm_lock(x.a, false);
        adm_poison(x.a, ADM_POISON_RECORD);
        adm_unlock(x.a);
    }
    pthread_join(t, NULL);
    ck_assert_int_eq(w.rc, _i == 3 ? -ORBIT_EPOISONED : 0);
    if (_i < 3)
        ck_assert_uint_eq(w.now, r.release_epoch + 1);
    struct orbit_admission_stats st;
    orbit_admission_stats(x.a, &st);
    ck_assert_uint_ge(st.parks, 1);   /* it slept in the kernel, and was woken */
    ck_assert_uint_ge(st.wakes, 1);
    int want = _i == 2 ? -ORBIT_ECLOSEDADM : _i == 3 ? -ORBIT_EPOISONED : 0;
    ck_assert_int_eq(claim(x.a, &u, 1, NULL, 0, 0, &r), want);
    if (_i < 2)
        ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
    fx_close(&x);
}
END_TEST


/*
 * A claim and a release nobody waits for write nothing a waiter reads: the
 * wake word keeps its value and its parked flag, while the release epoch
 * moves. A waiter that registered for the next epoch (as one does before it
 * sleeps) makes the release that reaches it move the word and count a wake.
 */
START_TEST(test_release_without_waiters_leaves_the_wake_word)
{
    struct fx x = fx_std(0);
    struct adm_ledger *l = x.a->ledger;
    uint32_t changes = atomic_load(&l->change.changes), parked = atomic_load(&l->change.parked);
    uint64_t e0 = orbit_admission_epoch(x.a);
    for (int i = 0; i < 10; i++) {
        struct orbit_units u[] = { { 10, 3 }, { 20, 2 } };
        struct orbit_admit_result r;
        ck_assert_int_eq(claim(x.a, u, 2, NULL, 0, 0, &r), 0);
        ck_assert_int_eq(r.outcome, ORBIT_ADMIT_CLAIMED);
        ck_assert_int_eq(orbit_admission_release(x.a, &r.claim), 0);
    }
    ck_assert_uint_eq(orbit_admission_epoch(x.a), e0 + 10);
    ck_assert_uint_eq(atomic_load(&l->change.changes), changes);
    ck_assert_uint_eq(atomic_load(&l->change.parked), parked);
    struct orbit_admission_stats st;
    orbit_admission_stats(x.a, &st);
    ck_assert_uint_eq(st.wakes, 0);
    /* A waiter wants the next epoch: the release that makes it moves the word and wakes. */
    atomic_store(&l->epoch_wanted, e0 + 11);
    struct orbit_claim c = must_claim(x.a, 10, 1, 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    ck_assert_uint_ne(atomic_load(&l->change.changes), changes);
    orbit_admission_stats(x.a, &st);
    ck_assert_uint_eq(st.wakes, 1);
    /* Past the wanted epoch, releases are quiet again. */
    changes = atomic_load(&l->change.changes);
    c = must_claim(x.a, 10, 1, 0);
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    ck_assert_uint_eq(atomic_load(&l->change.changes), changes);
    fx_close(&x);
}
END_TEST

START_TEST(test_prep_wait)
{
    struct fx x = fx_std(0);
    struct io_uring_sqe dummy;
    uint64_t e = orbit_admission_epoch(x.a);
    if (!orbit_uring_futex_supported()) {
        ck_assert_int_eq(orbit_admission_prep_wait(x.a, e, &dummy), -ORBIT_ENOTSUP);
        fx_close(&x);
        return;
    }
    struct io_uring ring;
    ck_assert_int_eq(io_uring_queue_init(4, &ring, 0), 0);
    struct orbit_claim c = must_claim(x.a, 10, 1, 0);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    ck_assert_int_eq(orbit_admission_prep_wait(x.a, e, sqe), 0);
    io_uring_sqe_set_data64(sqe, 42);
    ck_assert_int_eq(io_uring_submit(&ring), 1);
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = { 0, 20 * 1000 * 1000 };
    ck_assert_int_eq(io_uring_wait_cqe_timeout(&ring, &cqe, &ts), -ETIME);   /* nothing yet */
    ck_assert_int_eq(orbit_admission_release(x.a, &c), 0);
    ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    ck_assert_uint_eq(io_uring_cqe_get_data64(cqe), 42);
    ck_assert_int_eq(cqe->res, 0);
    io_uring_cqe_seen(&ring, cqe);
    ck_assert_int_eq(orbit_admission_prep_wait(x.a, e, &dummy), 1);   /* passed: ready now */
    io_uring_queue_exit(&ring);
    /* Poisoned: the prep reports it instead of arming. */
    adm_lock(x.a, false);
    adm_poison(x.a, ADM_POISON_RECORD);
    adm_unlock(x.a);
    ck_assert_int_eq(orbit_admission_prep_wait(x.a, e + 1, &dummy), -ORBIT_EPOISONED);
    fx_close(&x);
}
END_TEST

static Suite *admission_suite(void)
{
    Suite *s = suite_create("admission");
    TCase *t = tcase_create("ledger");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, test_open_spec);
    tcase_add_test(t, test_named_geometry_and_existing);
    tcase_add_test(t, test_observer);
    tcase_add_test(t, test_set_capacity);
    tcase_add_test(t, test_claimed);
    tcase_add_test(t, test_serials_never_reused);
    tcase_add_test(t, test_rejected);
    tcase_add_test(t, test_fit_only_rejects);
    tcase_add_test(t, test_deferred_all_or_nothing);
    tcase_add_test(t, test_skipped_disabled);
    tcase_add_test(t, test_skipped_capacity);
    tcase_add_test(t, test_deferred_before_retained_skip);
    tcase_add_test(t, test_malformed);
    tcase_add_test(t, test_check_order);
    tcase_add_test(t, test_table_full);
    tcase_add_test(t, test_release_exactly_once);
    tcase_add_test(t, test_foreign_claim);
    tcase_add_loop_test(t, test_release_disagreeing_poisons, 0, 3);
    tcase_add_test(t, test_poison_serial_exhausted);
    tcase_add_test(t, test_poison_epoch_exhausted);
    tcase_add_test(t, test_epoch_boundary_release);
    tcase_add_test(t, test_poison_availability_epoch);
    tcase_add_test(t, test_poison_growth_epoch);
    tcase_add_test(t, test_poison_used_over_capacity);
    tcase_add_test(t, test_poison_retained_over_cap);
    tcase_add_loop_test(t, test_poison_release_underflow, 0, 2);
    tcase_add_test(t, test_shutdown);
    tcase_add_test(t, test_node_dead);
    tcase_add_test(t, test_wait_timeouts);
    tcase_add_loop_test(t, test_wait_woken, 0, 4);
    tcase_add_test(t, test_prep_wait);
    tcase_add_test(t, test_release_without_waiters_leaves_the_wake_word);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(admission_suite());
}
