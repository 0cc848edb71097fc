/* SPDX-License-Identifier: MIT */
/*
 * What orbit_last_error says: one sentence per failed call, kept per thread.
 *
 * A public call begins with orb_error_clear() (or orb_enter, which does it):
 * one store that names the running call and forgets the previous call's
 * sentence. A failure records its sentence with orb_fail (formatted) or
 * orb_fail_text (a constant: no formatting, for refusals a loop may meet
 * often, such as -ORBIT_EAGAIN); both are cold and out of line, so a call
 * that succeeds pays nothing but that first store. The sentence need not name
 * the call: orbit_last_error puts the running call's name in front of one
 * that does not begin with it. A failure the call recovers from (a fallback
 * taken, a retry that worked) is forgotten with orb_error_forget.
 */
#ifndef ORB_CORE_ERROR_INTERNAL_H
#define ORB_CORE_ERROR_INTERNAL_H

#include <stdbool.h>
#include <orbit/error.h>
#include "fastpath.h"

/* What a fleet name must be, for the sentences that refuse one. */
#define ORB_NAME_RULE "fleet name: 1-64 bytes of letters, digits, '_', '.' and '-'"

/* The running public call's name, or the thread's failure record once it failed (initial-exec TLS). */
extern _Thread_local const void *orb_error_now __attribute__((visibility("hidden"), tls_model("initial-exec")));

/* Records "call: what was wrong" for orbit_last_error and returns rc (a negated code). */
int  orb_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3))) ORB_COLD;
/* The same with a constant sentence (a string literal: it is kept, not copied). */
int  orb_fail_text(int rc, const char *text) ORB_COLD;
/* Has this call recorded a failure already (a sentence more precise than a caller's)? */
bool orb_error_in_call(void);
/* A failure of this call that it got past: orbit_last_error says nothing of it. */
void orb_error_forget(void);
/*
 * After a public call made from inside another (call): its failure is told as
 * "call: inner: why"; its success gives the running call its name back. Returns rc.
 */
int  orb_error_outer(int rc, const char *call);

/*
 * A public call made from inside another: ORB_NESTED(orbit_x(...)) evaluates it
 * and then lets the running call go on under its own name (success), or tells
 * the failure as "outer: orbit_x: why". Its value is the inner call's.
 */
void orb_error_resume(bool failed, const void *saved);
#define ORB_NESTED(expr) __extension__({                                  \
        const void *orb_saved_ = orb_error_now;                          \
        __typeof__(expr) orb_rc_ = (expr);                               \
        orb_error_resume(orb_rc_ < 0, orb_saved_);                       \
        orb_rc_; })

/* The same for an inner call whose failure is an answer, not the outer call's failure (a probe). */
#define ORB_QUIET(expr) __extension__({                                   \
        const void *orb_saved_ = orb_error_now;                          \
        __typeof__(expr) orb_rc_ = (expr);                               \
        orb_error_now = orb_saved_;                                      \
        orb_rc_; })

/* A public call (named call) begins: the last error is the previous call's no longer. */
static inline void orb_error_enter(const char *call)
{
    orb_error_now = call;
}
#define orb_error_clear() orb_error_enter(__func__)

#endif
