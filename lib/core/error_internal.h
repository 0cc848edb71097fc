/* SPDX-License-Identifier: MIT */
/* What orbit_last_error says: one sentence per failed call, kept per thread. */
#ifndef ORB_CORE_ERROR_INTERNAL_H
#define ORB_CORE_ERROR_INTERNAL_H

#include <stdbool.h>
#include <orbit/error.h>

/* Does this thread hold a reason (initial-exec: a public call clears it with one store)? */
extern _Thread_local bool orb_error_held __attribute__((visibility("hidden"), tls_model("initial-exec")));

/* Records "call: what was wrong" for orbit_last_error and returns rc (a negated code). */
int  orb_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A public call begins: the last error is the previous call's no longer. */
static inline void orb_error_clear(void)
{
    orb_error_held = false;
}

#endif
