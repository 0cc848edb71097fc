/* SPDX-License-Identifier: MIT */
/*
 * orbit/uring.h — waiting on orbit from an io_uring event loop.
 *
 * Every orbit wait is a u32 futex word in shared memory. An io_uring server
 * parks on it with an IORING_OP_FUTEX_WAIT SQE (Linux 6.7+) submitted in its
 * own ring, beside its socket reads, so one io_uring_enter covers sockets and
 * orbit alike; and the wakes orbit issues can ride the same ring as
 * IORING_OP_FUTEX_WAKE SQEs. Where the kernel lacks the futex opcodes (or
 * io_uring is disabled) the prep calls return -ORBIT_ENOTSUP and callers use
 * the blocking calls or the readiness eventfds instead.
 *
 * A completed wait means "something may have changed": re-try the
 * non-blocking call (try_read, take_offer, reserve...). A wait whose word
 * already moved completes with -EAGAIN; treat it as a wake. To bound a wait,
 * link an IORING_OP_LINK_TIMEOUT (use IOSQE_IO_HARDLINK: -EAGAIN breaks an
 * ordinary link).
 */
#ifndef ORBIT_URING_H
#define ORBIT_URING_H

#include <liburing.h>
#include <orbit/fleet.h>
#include <orbit/pool.h>
#include <orbit/stream.h>
#include <orbit/admission.h>
#include <orbit/exchange.h>

#ifdef __cplusplus
extern "C" {
#endif

/* user_data of the FUTEX_WAKE SQEs queued by orbit_uring_attach_wakes. They carry
 * IOSQE_CQE_SKIP_SUCCESS, so a CQE with this user_data appears only on failure. */
#define ORBIT_URING_WAKE_USER_DATA 0x0eb17a4e0eb17a4eull

bool orbit_uring_futex_supported(void);                       /* probed once */
/*
 * orbit_uring_futex_status - what that probe found, as one sentence for logs:
 * "io_uring futex waits in use", or "no io_uring futex waits (futex(2) and
 * driver threads instead): " and why: io_uring refused by this process's
 * seccomp filter (Docker's default profile, containerd's RuntimeDefault,
 * Android), kernel.io_uring_disabled and its value, a kernel before 6.7, or
 * ORBIT_DISABLE_URING_FUTEX. Probes first if nothing did yet. Static; never NULL.
 */
const char *orbit_uring_futex_status(void);
/*
 * orbit_uring_refusal - why io_uring refused this process: err is what
 * io_uring_setup, io_uring_enter or io_uring_register returned (a negated
 * errno). One sentence for an operator, written as snprintf writes (at most
 * len bytes, NUL-terminated when len > 0): the cause (the sysctl
 * kernel.io_uring_disabled and its value, kernel.io_uring_group, this
 * process's seccomp filter as Docker's default profile, containerd's
 * RuntimeDefault and Android have, or a kernel without io_uring) and what
 * lifts it. The sentence orbit_uring_futex_status gives after "no io_uring
 * futex waits ...: ". Returns the whole sentence's length (>= len: cut), or
 * -ORBIT_EMALFORMED for an err that is not negative or a NULL buf with len > 0.
 */
int orbit_uring_refusal(int err, char *buf, size_t len);
/*
 * The prep contract. Each table declares its own prep calls in its header,
 * beside the blocking wait they stand for (orbit_fleet_prep_wait_doorbell and
 * _node_death in fleet.h, orbit_pool_prep_wait_capacity in pool.h, the
 * endpoint and offer preps in stream.h, orbit_admission_prep_wait in
 * admission.h, the exchange and arena preps in exchange.h); this header
 * includes them all. Each prep always fills the SQE it is given, as a
 * liburing prep does, and returns
 *   0  the SQE holds a FUTEX_WAIT that completes on the next relevant change;
 *   1  the thing is ready now: the SQE is a plain IORING_OP_NOP (no link,
 *      drain or fixed-file flags) that completes with res 0;
 *  <0  a negated ORBIT_E* code: the SQE is the same harmless NOP.
 * So a loop that submits every SQE it took stays correct. user_data is the
 * caller's: set it after the prep, as with any liburing prep (a prep keeps
 * the value it found). Without the kernel's futex ops (Linux 6.7) every prep
 * but a ready exchange event returns -ORBIT_ENOTSUP.
 */
/* Wakes the library would issue with futex(2) are queued as FUTEX_WAKE SQEs in
 * this ring instead, until the batch is detached; they go out with the
 * caller's next io_uring_submit. */
int  orbit_uring_attach_wakes(struct io_uring *ring);        /* per thread */
void orbit_uring_detach_wakes(void);
int  orbit_readiness_drain(int readiness_fd);                 /* drain + re-arm */

#ifdef __cplusplus
}
#endif
#endif
