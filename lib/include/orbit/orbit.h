/* SPDX-License-Identifier: MIT */
/* orbit/orbit.h — the umbrella header: every table of liborbit and its io_uring calls. */
#ifndef ORBIT_ORBIT_H
#define ORBIT_ORBIT_H

#include <orbit/version.h>
#include <orbit/error.h>
#include <orbit/fleet.h>
#include <orbit/pool.h>
#include <orbit/stream.h>
#include <orbit/admission.h>
#include <orbit/exchange.h>
#include <orbit/inspect.h>
/*
 * And the io_uring calls: <orbit/uring.h> includes <liburing.h>, which needs
 * POSIX (sigset_t, AT_FDCWD). So it comes with every program that has POSIX
 * 2008 (gnu11, C++, or any feature macro such as _POSIX_C_SOURCE=200809L or
 * _DEFAULT_SOURCE), and not with one that asked for ISO C alone (-std=c11
 * and no feature macro): that one still builds, and includes <orbit/uring.h>
 * itself, first, if it wants the io_uring calls.
 */
#if !defined(__STRICT_ANSI__) || (defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200809L)
#include <orbit/uring.h>
#endif

#endif
