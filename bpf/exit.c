/* SPDX-License-Identifier: MIT */
/* exit.c - the BPF backend: load exit.bpf.c, keep its tgid filter, read its ring buffer. */
#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "backend.h"

#ifdef ORB_REAPER_HAVE_BPF
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "exit.h"
#include "exit.skel.h"

/* Where on_event writes while next reads the ring: room for max events, n of them there. */
struct rp_fill {
    struct rp_event *out;
    size_t n, max;
};

struct rp_backend {
    struct orbit_exit *skel;
    struct ring_buffer *rb;
    uint64_t drops_seen;
    struct rp_fill fill;
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

#define RP_FILL_FULL (-ENOSPC)   /* out is full: the rest stays in the ring for the next call */

static int on_event(void *ctx, void *data, size_t len)
{
    struct rp_fill *fill = ctx;
    const struct orb_exit_event *ev = data;
    if (len < sizeof *ev)
        return 0;
    fill->out[fill->n++] = (struct rp_event){ .key = ev->tgid, .pid = (int32_t)ev->tgid,
                                              .start_time = ev->start_ticks, .status = ev->status,
                                              .exit_ns = ev->exit_ns };
    return fill->n == fill->max ? RP_FILL_FULL : 0;
}

static int load(struct rp_backend *b, char *why, size_t why_len)
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
    /* on_event writes where next points fill: the ring is read by next alone. */
    b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.events), on_event, &b->fill, NULL);
    if (!b->rb) {
        snprintf(why, why_len, "cannot map the ring buffer: %s", strerror(errno));
        return -errno;
    }
    return 0;
}

static void bpf_close(struct rp_backend *b)
{
    if (!b)
        return;
    ring_buffer__free(b->rb);
    orbit_exit__destroy(b->skel);
    free(b);
}

static int bpf_open(struct rp_backend **out, char *why, size_t why_len)
{
    struct rp_backend *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    libbpf_print_fn_t old = libbpf_set_print(quiet_print);
    int rc = load(b, why, why_len);
    libbpf_set_print(old);
    if (rc < 0) {
        bpf_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

static int bpf_fd(struct rp_backend *b)
{
    return ring_buffer__epoll_fd(b->rb);
}

static int bpf_watch(struct rp_backend *b, uint64_t key, int32_t pid, uint64_t start_time)
{
    (void)key;
    (void)start_time;   /* the filter is by tgid: the caller checks the start time an event names */
    __u32 tgid = (__u32)pid;
    __u8 one = 1;
    int rc = bpf_map__update_elem(b->skel->maps.watched, &tgid, sizeof tgid, &one, sizeof one, BPF_ANY);
    return rc < 0 ? rc : 0;
}

static int bpf_unwatch(struct rp_backend *b, uint64_t key)
{
    __u32 tgid = (__u32)key;
    int rc = bpf_map__delete_elem(b->skel->maps.watched, &tgid, sizeof tgid, 0);
    return rc < 0 && rc != -ENOENT ? rc : 0;
}

static int bpf_next(struct rp_backend *b, struct rp_event *out, size_t max, uint64_t *lost)
{
    b->fill = (struct rp_fill){ .out = out, .max = max };
    int rc = max ? ring_buffer__consume(b->rb) : 0;
    /* drops is written by the program on any CPU: a relaxed read is enough to see it move. */
    uint64_t drops = __atomic_load_n(&b->skel->bss->drops, __ATOMIC_RELAXED);
    *lost = drops - b->drops_seen;
    b->drops_seen = drops;
    return rc < 0 && rc != RP_FILL_FULL ? rc : (int)b->fill.n;
}

#else /* built without BPF */

static int bpf_open(struct rp_backend **out, char *why, size_t why_len)
{
    (void)out;
    snprintf(why, why_len, "built without BPF: clang, bpftool, libbpf or kernel BTF were missing");
    return -ORBIT_ENOTSUP;
}

/* Never called: open refuses. */
static int  bpf_fd(struct rp_backend *b) { (void)b; return -ORBIT_ENOTSUP; }
static int  bpf_watch(struct rp_backend *b, uint64_t key, int32_t pid, uint64_t start_time)
{
    (void)b; (void)key; (void)pid; (void)start_time;
    return -ORBIT_ENOTSUP;
}
static int  bpf_unwatch(struct rp_backend *b, uint64_t key) { (void)b; (void)key; return 0; }
static int  bpf_next(struct rp_backend *b, struct rp_event *out, size_t max, uint64_t *lost)
{
    (void)b; (void)out; (void)max;
    *lost = 0;
    return 0;
}
static void bpf_close(struct rp_backend *b) { (void)b; }

#endif

const struct rp_backend_ops rp_bpf_backend = {
    .kind = ORBIT_REAPER_BPF, .per_tgid = true,
    .open = bpf_open, .fd = bpf_fd, .watch = bpf_watch, .unwatch = bpf_unwatch, .next = bpf_next,
    .close = bpf_close,
};
