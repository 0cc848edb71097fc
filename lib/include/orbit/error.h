/* SPDX-License-Identifier: MIT */
/*
 * orbit/error.h — error codes of liborbit.
 *
 * Every call that can fail returns a negated ORBIT_E* code (liburing style):
 *
 *     int ret = orbit_pool_reserve(pool, id, &lease);
 *     if (ret < 0)
 *         fprintf(stderr, "reserve: %s\n", orbit_strerror(ret));
 *
 * The codes are errno values so that they compose with the negative errno
 * returns of io_uring and the kernel. Some share a value (ORBIT_EDRAINING and
 * ORBIT_ECLOSED are both ESHUTDOWN); the call that returned it says which.
 */
#ifndef ORBIT_ERROR_H
#define ORBIT_ERROR_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORBIT_ESTALE       ESTALE          /* id or ticket names an ended slot, generation or epoch */
#define ORBIT_EBUSY        EBUSY           /* no capacity left on that resource */
#define ORBIT_EDRAINING    ESHUTDOWN       /* resource is draining: no new leases */
#define ORBIT_ENOTOWNER    EPERM           /* only the owner may do this */
#define ORBIT_ENOTRESERVED ENOENT          /* lease is not an unaccepted reservation */
#define ORBIT_EBUDGET      EDQUOT          /* creation budget spent */
#define ORBIT_EKEYFULL     ENOSPC          /* every key slot taken */
#define ORBIT_EFULL        EMFILE          /* this node's lane is full */
#define ORBIT_EPAYLOADFULL ENOBUFS         /* payload arena has no run that large */
#define ORBIT_ETOOLARGE    EMSGSIZE        /* frame/chunk larger than the ring/arena lane */
#define ORBIT_EMALFORMED   EINVAL          /* not an id/ticket/spec; bad argument (a timeout_ms below -1 included) */
#define ORBIT_ECLAIMED     EALREADY        /* that side of the stream is already held */
#define ORBIT_ECLOSED      ESHUTDOWN       /* this write half was finished or reset */
#define ORBIT_ERESET       ECONNRESET      /* the peer reset the direction */
#define ORBIT_EPEERGONE    EPIPE           /* the peer's reader is gone */
#define ORBIT_EAGAIN       EAGAIN          /* would block */
#define ORBIT_ETIMEDOUT    ETIMEDOUT       /* a timed call found nothing by its deadline */
#define ORBIT_EGEOMETRY    EPROTO          /* segment exists with another geometry or version */
#define ORBIT_ECORRUPT     EBADMSG         /* a shared value failed a bounds check */
#define ORBIT_EPOISONED    ENOTRECOVERABLE /* admission ledger is fail-closed */
#define ORBIT_ECLOSEDADM   ECANCELED       /* admission is closed to new claims */
#define ORBIT_ENOTSUP      EOPNOTSUPP      /* kernel/build lacks the feature */
#define ORBIT_EFORKED      ECHILD          /* a handle of the parent process used in a forked child */

/*
 * orbit_strerror - a short English description of an orbit error.
 * Accepts err or -err. Codes orbit does not define fall back to strerror(3)'s
 * text. The string is static; never NULL. Thread-safe.
 */
const char *orbit_strerror(int err);

/*
 * orbit_last_error - after a call on this thread failed: one sentence naming
 * the call and what was wrong ("orbit_fleet_join: name 'my fleet': only
 * letters, digits, '_', '.' and '-'"); "" when the last call succeeded or
 * said nothing more than its code. Thread-local; valid until this thread's
 * next orbit call. Never NULL.
 */
const char *orbit_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
