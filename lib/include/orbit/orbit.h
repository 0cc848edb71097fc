/* SPDX-License-Identifier: MIT */
/* orbit/orbit.h — the umbrella header: every table of liborbit. */
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

#endif
