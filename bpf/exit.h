/* SPDX-License-Identifier: MIT */
/* exit.h - the record exit.bpf.c sends and its loader exit.c reads (shared by both sides). */
#ifndef ORB_EXIT_H
#define ORB_EXIT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* USER_HZ is 100 on every Linux ABI: /proc/<pid>/stat field 22 counts 10 ms ticks. */
#define ORB_NSEC_PER_TICK 10000000ull

struct orb_exit_event {
    __u32 tgid;          /* the thread group that ended, in the reaper's pid namespace */
    __s32 status;        /* what waitpid(2) would report for it */
    __u64 start_ticks;   /* leader's start_boottime in ticks: /proc/<pid>/stat field 22 */
    __u64 exit_ns;       /* bpf_ktime_get_ns() at the exit: CLOCK_MONOTONIC */
};

#endif
