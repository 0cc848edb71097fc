/* SPDX-License-Identifier: MIT */
/* What orbit_last_error says: one sentence per failed call, kept per thread. */
#ifndef ORB_CORE_ERROR_INTERNAL_H
#define ORB_CORE_ERROR_INTERNAL_H

#include <orbit/error.h>

/* Records "call: what was wrong" for orbit_last_error and returns rc (a negated code). */
int  orb_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A public call begins: the last error is the previous call's no longer. */
void orb_error_clear(void);

#endif
