/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "error_internal.h"
#include "guard.h"
#include "guard_sigbus.h"

const char *orbit_strerror(int err)
{
    if (err == INT_MIN)
        return "unknown error";   /* -INT_MIN does not exist */
    if (err < 0)
        err = -err;
    switch (err) {
    case 0:                return "success";
    case ORBIT_ESTALE:     return "stale: the id or ticket names an ended slot, generation or epoch";
    case ORBIT_EBUSY:      return "busy: no capacity left on that resource";
    case ORBIT_EDRAINING:  return "draining or closed: no new leases, or this write half was finished or reset";
    case ORBIT_ENOTOWNER:  return "not owner: only the owner may do this";
    /* ENOENT: also what opening a fleet or table that does not exist returns. */
    case ORBIT_ENOTRESERVED: return "not found: no such fleet or table, or not a live, unaccepted reservation or claim";
    case ORBIT_EBUDGET:    return "creation budget spent";
    case ORBIT_EKEYFULL:   return "every key slot is taken";
    case ORBIT_EFULL:      return "this node's lane (or the fleet) is full";
    case ORBIT_EPAYLOADFULL: return "payload arena has no free run that large";
    case ORBIT_ETOOLARGE:  return "too large for the ring, arena lane or buffer";
    case ORBIT_EMALFORMED: return "malformed: not an id, ticket or spec, or a bad argument";
    case ORBIT_ECLAIMED:   return "already claimed: that side or node is already held";
    case ORBIT_ERESET:     return "reset: the peer reset the direction";
    case ORBIT_EPEERGONE:  return "peer gone: the peer's reader is gone";
    case ORBIT_EAGAIN:     return "would block";
    case ORBIT_ETIMEDOUT:  return "timed out";
    case ORBIT_EGEOMETRY:  return "segment exists with another geometry or version";
    case ORBIT_ECORRUPT:   return "corrupt: a shared value failed a bounds check";
    case ORBIT_EPOISONED:  return "admission ledger is poisoned (fail-closed)";
    case ORBIT_ECLOSEDADM: return "admission is closed to new claims";
    case ORBIT_ENOTSUP:    return "not supported by this kernel or build";
    case ORBIT_EFORKED:    return "forked: this handle belongs to the parent process (join again in the child)";
    default:               return strerror(err);
    }
}

#define LAST_ERROR_MAX 256
struct last_error {
    const char *call;             /* the call that failed (NULL: it did not say) */
    const char *outer;            /* the public call that called it, when it was called from one */
    const char *text;             /* buf, or a constant sentence */
    char buf[LAST_ERROR_MAX];
    char said[LAST_ERROR_MAX + 128];
};
static _Thread_local struct last_error last;
_Thread_local const void *orb_error_now;

/* Does the sentence begin with a call's name ("orbit_x: ...")? */
static bool names_a_call(const char *text)
{
    if (strncmp(text, "orbit_", 6) != 0)
        return false;
    size_t n = strspn(text, "abcdefghijklmnopqrstuvwxyz0123456789_");
    return text[n] == ':';
}

const char *orbit_last_error(void)
{
    if (orb_error_now != &last)
        return "";
    const char *call = last.call && !names_a_call(last.text) ? last.call : NULL;
    if (!call && !last.outer)
        return last.text;
    snprintf(last.said, sizeof last.said, "%s%s%s%s%s", last.outer ? last.outer : "", last.outer ? ": " : "",
             call ? call : "", call ? ": " : "", last.text);
    return last.said;
}

static void record(const char *text)
{
    if (orb_error_now != &last) {   /* the first failure of this call: remember which call */
        last.call = orb_error_now;
        last.outer = NULL;
    }
    last.text = text;
    orb_error_now = &last;
}

int orb_fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last.buf, sizeof last.buf, fmt, ap);
    va_end(ap);
    record(last.buf);
    return rc;
}

int orb_fail_text(int rc, const char *text)
{
    record(text);
    return rc;
}

void orb_error_forget(void)
{
    if (orb_error_now == &last)
        orb_error_now = last.call;
}

void orb_error_resume(bool failed, const void *saved)
{
    if (!failed) {
        orb_error_now = saved;   /* the outer call's name, or its failure recorded before */
        return;
    }
    if (saved == &last || !saved)
        return;   /* the outer call had failed already, or did not say its name */
    if (orb_error_now != &last) {
        orb_error_now = saved;
        return;
    }
    if (last.call != saved)
        last.outer = saved;   /* the outermost call names the failure */
}

bool orb_error_in_call(void)
{
    return orb_error_now == &last;
}

int orb_error_outer(int rc, const char *call)
{
    if (rc >= 0) {
        orb_error_now = call;   /* the inner call named itself: this call runs on */
        return rc;
    }
    if (orb_error_now != &last)
        return orb_fail(rc, "%s: %s", call, orbit_strerror(rc));
    if (!last.outer && (!last.call || strcmp(last.call, call) != 0) &&
        !(names_a_call(last.text) && strncmp(last.text, call, strlen(call)) == 0 && last.text[strlen(call)] == ':'))
        last.outer = call;
    return rc;
}

int orb_check_resv(const uint64_t *resv, size_t n, const char *call, const char *dflt)
{
    for (size_t i = 0; i < n; i++)
        if (resv[i])
            return orb_fail(-ORBIT_EMALFORMED, "%s: resv[%zu] is not zero: start from %s and set fields",
                            call, i, dflt);
    return 0;
}

int orb_enter_refused(const uint32_t *gen, const char *call, const char *what)
{
    if (!gen)
        return orb_fail(-ORBIT_EMALFORMED, "%s: the %s is NULL", call, what);
    uint32_t g = __atomic_load_n(gen, __ATOMIC_RELAXED);
    if ((g & ORB_GEN_BROKEN) && orb_handle_ours(g & ~ORB_GEN_BROKEN)) {
        char path[256] = "its segment";
        orb_guard_path_of(gen, path, sizeof path);
        return orb_fail(-ORBIT_ECORRUPT, "%s: %s changed under this process (truncated or replaced): its "
                        "mapping was withdrawn; close this %s and open the fleet again", call, path, what);
    }
    return orb_fail(-ORBIT_EFORKED, "%s: this %s belongs to the parent process (made before fork): "
                    "join again in the child (orbit_fleet_join after fork)", call, what);
}
