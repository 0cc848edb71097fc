/* SPDX-License-Identifier: MIT */
/* exit.c - the BPF backend: load exit.bpf.c, keep its tgid filter, read its ring buffer. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "reaper_internal.h"

#ifdef ORB_REAPER_HAVE_BPF
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "exit.h"
#include "exit.skel.h"

struct rp_bpf {
    struct orbit_exit *skel;
    struct ring_buffer *rb;
    uint64_t drops_seen;
};

/* libbpf's messages only when asked for: AUTO probing must not spam stderr. */
static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    return getenv("ORBIT_REAPER_DEBUG") ? vfprintf(stderr, fmt, ap) : 0;
}

/* Does this kernel's sched_process_exit pass group_dead (6.16+)? */
static bool has_group_dead(void)
{
    struct btf *btf = btf__load_vmlinux_btf();
    if (!btf || libbpf_get_error(btf))
        return true;   /* no BTF: tp_btf cannot load either; the error comes from load */
    int id = btf__find_by_name_kind(btf, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
    const struct btf_type *t = id > 0 ? btf__type_by_id(btf, (__u32)id) : NULL;
    if (t)
        t = btf__type_by_id(btf, t->type);              /* typedef -> pointer */
    if (t && btf_is_ptr(t))
        t = btf__type_by_id(btf, t->type);              /* pointer -> prototype */
    /* (void *__data, struct task_struct *p, bool group_dead) */
    bool yes = t && btf_is_func_proto(t) && btf_vlen(t) >= 3;
    btf__free(btf);
    return yes;
}

static int on_event(void *ctx, void *data, size_t len)
{
    struct orbit_reaper *r = ctx;
    const struct orb_exit_event *ev = data;
    if (len < sizeof *ev)
        return 0;
    struct rp_exit e = { .kind = RP_EXIT_TGID, .tgid = ev->tgid, .start_ticks = ev->start_ticks,
                         .status = ev->status, .exit_ns = ev->exit_ns, .detected_ns = rp_now_ns() };
    atomic_fetch_add(&r->counts.events, 1);
    rp_queue_push(r, &e);
    return 0;
}

static int load(struct orbit_reaper *r, struct rp_bpf *b, char *why, size_t why_len)
{
    b->skel = orbit_exit__open();
    if (!b->skel) {
        snprintf(why, why_len, "cannot open the BPF object: %s", strerror(errno));
        return -errno;
    }
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0) {
        /* The kernel's dev_t encoding (MKDEV), which the helper compares against. */
        b->skel->rodata->pidns_dev = ((__u64)major(st.st_dev) << 20) | minor(st.st_dev);
        b->skel->rodata->pidns_ino = st.st_ino;
    }
    bool gd = has_group_dead();
    bpf_program__set_autoload(b->skel->progs.orbit_exit_group_dead, gd);
    bpf_program__set_autoload(b->skel->progs.orbit_exit_signal_live, !gd);
    int rc = orbit_exit__load(b->skel);
    if (rc < 0) {
        snprintf(why, why_len, "cannot load exit.bpf.o: %s", strerror(-rc));
        return rc;
    }
    if ((rc = orbit_exit__attach(b->skel)) < 0) {
        snprintf(why, why_len, "cannot attach to sched_process_exit: %s", strerror(-rc));
        return rc;
    }
    b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.events), on_event, r, NULL);
    if (!b->rb) {
        snprintf(why, why_len, "cannot map the ring buffer: %s", strerror(errno));
        return -errno;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = RP_TAG_RING };
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(b->rb), &ev) != 0) {
        snprintf(why, why_len, "epoll: %s", strerror(errno));
        return -errno;
    }
    return 0;
}

int rp_bpf_open(struct orbit_reaper *r, char *why, size_t why_len)
{
    struct rp_bpf *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    libbpf_print_fn_t old = libbpf_set_print(quiet_print);
    int rc = load(r, b, why, why_len);
    libbpf_set_print(old);
    r->bpf = b;
    if (rc < 0)
        rp_bpf_close(r);
    return rc;
}

void rp_bpf_close(struct orbit_reaper *r)
{
    struct rp_bpf *b = r->bpf;
    if (!b)
        return;
    ring_buffer__free(b->rb);
    orbit_exit__destroy(b->skel);
    free(b);
    r->bpf = NULL;
}

int rp_bpf_watch(struct orbit_reaper *r, int32_t tgid)
{
    __u32 key = (__u32)tgid;
    __u8 one = 1;
    int rc = bpf_map__update_elem(r->bpf->skel->maps.watched, &key, sizeof key, &one, sizeof one, BPF_ANY);
    return rc < 0 ? rc : 0;
}

int rp_bpf_unwatch(struct orbit_reaper *r, int32_t tgid)
{
    __u32 key = (__u32)tgid;
    int rc = bpf_map__delete_elem(r->bpf->skel->maps.watched, &key, sizeof key, 0);
    return rc < 0 && rc != -ENOENT ? rc : 0;
}

bool rp_bpf_consume(struct orbit_reaper *r)
{
    struct rp_bpf *b = r->bpf;
    ring_buffer__consume(b->rb);
    /* drops is written by the program on any CPU: a relaxed read is enough to see it move. */
    uint64_t drops = __atomic_load_n(&b->skel->bss->drops, __ATOMIC_RELAXED);
    bool lost = drops != b->drops_seen;
    atomic_fetch_add(&r->counts.drops, drops - b->drops_seen);
    b->drops_seen = drops;
    return lost;
}

#else /* built without BPF */

int rp_bpf_open(struct orbit_reaper *r, char *why, size_t why_len)
{
    (void)r;
    snprintf(why, why_len, "built without BPF: clang, bpftool, libbpf or kernel BTF were missing");
    return -ORBIT_ENOTSUP;
}
void rp_bpf_close(struct orbit_reaper *r) { (void)r; }
int  rp_bpf_watch(struct orbit_reaper *r, int32_t tgid) { (void)r; (void)tgid; return -ORBIT_ENOTSUP; }
int  rp_bpf_unwatch(struct orbit_reaper *r, int32_t tgid) { (void)r; (void)tgid; return 0; }
bool rp_bpf_consume(struct orbit_reaper *r) { (void)r; return false; }

#endif
