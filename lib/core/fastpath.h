/* SPDX-License-Identifier: MIT */
/*
 * How the library spells its fast paths (design.md §11, "Fast paths"): one
 * word each, so a reader and a tool see what a function is for.
 *
 *     static ORB_HOT bool lane_ready(...)      inlined into every caller, always
 *     static ORB_COLD int reserve_refused(...) a refusal's sentence: out of line, cold
 *     static ORB_NOINLINE int reserve_take(..) the general path, out of line: the
 *                                              fast path keeps a small frame
 *     if (orb_unlikely(rc < 0)) ...            the branch the fast path does not take
 *
 * No macro hides `static` or `extern`: linkage is written where it is decided.
 */
#ifndef ORB_CORE_FASTPATH_H
#define ORB_CORE_FASTPATH_H

#define ORB_HOT      inline __attribute__((always_inline))
#define ORB_COLD     __attribute__((cold, noinline))
#define ORB_NOINLINE __attribute__((noinline))

#define orb_likely(x)   __builtin_expect(!!(x), 1)
#define orb_unlikely(x) __builtin_expect(!!(x), 0)

#endif
