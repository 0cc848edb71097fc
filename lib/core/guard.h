/* SPDX-License-Identifier: MIT */
/*
 * The one entry check of every public call on a table handle (pools, streams,
 * endpoints, admission, arenas, exchanges, readiness descriptors, and the
 * executions, permits, reservations and chunks made from them):
 *
 *     int rc = pool_enter(p, __func__);   (a table's wrapper of orb_enter)
 *     if (rc < 0)
 *         return rc;
 *
 * It forgets the thread's last error, refuses a NULL handle with
 * -ORBIT_EMALFORMED, a parent's handle in a fork child with -ORBIT_EFORKED and
 * a handle whose segment file shrank under it with -ORBIT_ECORRUPT (the SIGBUS
 * guard poisoned its generation, guard_sigbus.h: the same compare, no extra
 * load), each with its sentence for orbit_last_error. A handle copies the fork
 * generation of its fleet handle when it is opened, so the check is a load of
 * the handle's own line, one of the process-global generation (read-mostly:
 * only a fork child writes it) and a compare.
 *
 * Closes use orb_handle_ours: in a fork child they free the child's memory and
 * unmap, and touch nothing shared (no holds, sides, claims or chunks given
 * back, no wakes).
 */
#ifndef ORB_CORE_GUARD_H
#define ORB_CORE_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "error_internal.h"
#include "fastpath.h"
#include "life.h"

/* The generation a handle opened now carries. */
static inline uint32_t orb_generation_now(void)
{
    return atomic_load_explicit(&orb_fork_generation, memory_order_relaxed);
}

/* Was a handle of generation gen made by this process (not by the parent of a fork child)? */
static inline bool orb_handle_ours(uint32_t gen)
{
    return orb_likely(gen == orb_generation_now());
}

/* orb_enter's refusals, out of line: "call: the <what> is NULL", or the fork sentence. */
int orb_enter_refused(const uint32_t *gen, const char *call, const char *what)
    ORB_COLD;

/* gen: the handle's copied generation, NULL for a NULL handle; what names the handle. */
static inline int orb_enter(const uint32_t *gen, const char *call, const char *what)
{
    orb_error_enter(call);
    /* Relaxed atomic: the SIGBUS guard poisons the word from another thread (guard_sigbus.h). */
    if (orb_likely(gen && orb_handle_ours(__atomic_load_n(gen, __ATOMIC_RELAXED))))
        return 0;
    return orb_enter_refused(gen, call, what);
}

/* The entry of a call that opens a table on fleet handle f (life.h's check of f). */
static inline int orb_enter_fleet(const struct orbit_fleet *f, const char *call)
{
    orb_error_enter(call);
    if (!f)
        return orb_fail(-ORBIT_EMALFORMED, "%s: the fleet handle is NULL", call);
    return orb_fleet_usable(f, call);
}

/*
 * A struct's reserved tail (resv[n], "zero; a later release may give it
 * meaning"): all zero, else -ORBIT_EMALFORMED naming the field, as libbpf's
 * OPTS_VALID refuses unknown bytes, so a caller's garbage there never starts
 * to mean something in a later release.
 */
int  orb_check_resv(const uint64_t *resv, size_t n, const char *call, const char *dflt);

/* A timeout argument: -1 (forever), 0 or more; else -ORBIT_EMALFORMED with the reason. */
static inline int orb_check_timeout(int timeout_ms, const char *call)
{
    if (orb_likely(timeout_ms >= -1))
        return 0;
    return orb_fail(-ORBIT_EMALFORMED, "%s: timeout %d ms: -1 (forever), 0 or more", call, timeout_ms);
}

#endif
