// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * exit.bpf.c - report the end of watched thread groups to liborbit-reaper.
 *
 * sched_process_exit fires once per exiting thread. Only the exit that
 * ends the whole group counts: on kernels >= 6.16 the tracepoint says so
 * in its group_dead argument; older kernels lack it, and there the program
 * reads signal->live (already decremented when the tracepoint fires).
 * A tid == tgid test would be wrong: a leader that calls pthread_exit
 * leaves while its other threads run on. User space keeps the loaded
 * variant's autoload on and the other off.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "exit.h"

#define SIGNAL_GROUP_EXIT 0x00000004   /* include/linux/sched/signal.h */
#define WATCHED_MAX       65536

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* tgids of watched fleet members; the value is unused (presence is the filter). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, WATCHED_MAX);
    __type(key, __u32);
    __type(value, __u8);
} watched SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Events lost to a full ring: user space sweeps its members when this moves. */
__u64 drops = 0;

/* The reaper's pid namespace (nsfs dev and inode, set before load): tgids are
 * reported as the reaper sees them. 0: the task's own tgid (initial namespace). */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;

/* The exiting task's tgid in the reaper's pid namespace; 0 if it is not visible there. */
static __always_inline __u32 visible_tgid(struct task_struct *p)
{
    if (!pidns_ino)
        return BPF_CORE_READ(p, tgid);
    struct bpf_pidns_info ns = {};
    /* At this tracepoint the exiting task is current. */
    if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)))
        return 0;
    return ns.tgid;
}

/* The status waitpid(2) will report (kernel/exit.c wait_task_zombie). */
static __always_inline int group_status(struct task_struct *p)
{
    struct signal_struct *sig = BPF_CORE_READ(p, signal);
    if (BPF_CORE_READ(sig, flags) & SIGNAL_GROUP_EXIT)
        return BPF_CORE_READ(sig, group_exit_code);
    return BPF_CORE_READ(p, group_leader, exit_code);
}

static __always_inline int report_group_end(struct task_struct *p)
{
    __u32 tgid = visible_tgid(p);
    if (!tgid || !bpf_map_lookup_elem(&watched, &tgid))
        return 0;
    struct orb_exit_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        __sync_fetch_and_add(&drops, 1);
        return 0;
    }
    e->tgid = tgid;
    e->status = group_status(p);
    /* The leader's start time: a later thread's own start time is not field 22. */
    e->start_ticks = BPF_CORE_READ(p, group_leader, start_boottime) / ORB_NSEC_PER_TICK;
    e->exit_ns = bpf_ktime_get_ns();
    bpf_ringbuf_submit(e, 0);
    return 0;
}

/* Kernels >= 6.16: TP_PROTO(struct task_struct *p, bool group_dead). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(orbit_exit_group_dead, struct task_struct *p, bool group_dead)
{
    if (!group_dead)
        return 0;
    return report_group_end(p);
}

/* Older kernels: the group is over once signal->live has dropped to zero. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(orbit_exit_signal_live, struct task_struct *p)
{
    if (BPF_CORE_READ(p, signal, live.counter) != 0)
        return 0;
    return report_group_end(p);
}
