/* SPDX-License-Identifier: MIT */
/*
 * Readiness descriptor for one table handle: an eventfd that becomes readable
 * when the doorbell word moves (kernel-signalled through a private ring with
 * a FUTEX_WAIT on it, or a driver thread where the opcode is missing).
 * orbit_readiness_drain(fd) re-arms it. Close with orb_readiness_close.
 */
#ifndef ORB_CORE_READINESS_H
#define ORB_CORE_READINESS_H

#include "wait.h"

int  orb_readiness_open(struct orb_waitword *doorbell);
void orb_readiness_close(int fd);

#endif
