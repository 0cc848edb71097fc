/* SPDX-License-Identifier: MIT */
/* Kernel-held lives: OFD locks on the fleet file, fork rules, and death watchers (life.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "error_internal.h"
#include "guard.h"
#include "guard_sigbus.h"
#include "life.h"
#include "lock.h"

#define LIFE_BASE  (1ll << 40)
#define OWNER_BASE (2ll << 40)
#define GATE_OFF   (3ll << 40)
#define GATE_WAIT_MS 2000          /* a collector holds the gate for one check and unlink */
#define WATCHERS_MAX 4096          /* death watcher threads one process may run */
#define WATCHER_STACK (256u * 1024u)


/* ---- OFD locks ---- */

static int ofd(int fd, int cmd, short type, long long off, long long len)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = (off_t)len };
    for (;;) {
        if (fcntl(fd, cmd, &fl) == 0)
            return cmd == F_OFD_GETLK ? fl.l_type != F_UNLCK : 0;
        if (errno != EINTR)
            return errno == EACCES ? -EAGAIN : -errno;   /* POSIX lets a conflict say EACCES */
    }
}

static long long life_byte(uint16_t node, uint64_t joins)
{
    return LIFE_BASE + (long long)node * ORB_LIFE_SLOTS + (long long)(joins % ORB_LIFE_SLOTS);
}

int orb_life_hold(struct orbit_fleet *f, uint16_t node, uint64_t joins)
{
    return ofd(f->life_fd, F_OFD_SETLK, F_WRLCK, life_byte(node, joins), 1);
}

void orb_life_drop(struct orbit_fleet *f, uint16_t node, uint64_t joins)
{
    if (f->life_fd >= 0)
        (void)ofd(f->life_fd, F_OFD_SETLK, F_UNLCK, life_byte(node, joins), 1);
}

int orb_life_probe(struct orbit_fleet *f, uint16_t node)
{
    return orb_life_probe_fd(f->life_fd, node);
}

int orb_life_probe_fd(int fd, uint16_t node)
{
    /* A read lock conflicts only with a member's write lock: watchers' read locks pass. */
    return ofd(fd, F_OFD_GETLK, F_RDLCK, LIFE_BASE + (long long)node * ORB_LIFE_SLOTS, ORB_LIFE_SLOTS);
}

int orb_life_probe_all(int fd, uint32_t capacity)
{
    return ofd(fd, F_OFD_GETLK, F_RDLCK, LIFE_BASE, (long long)capacity * ORB_LIFE_SLOTS);
}

bool orb_owner_take(struct orbit_fleet *f, uint16_t node)
{
    _Atomic uint64_t *word = &f->owner_busy[node / 64];
    uint64_t bit = 1ull << (node % 64);
    /* Threads of one handle share its descriptor, so the kernel cannot tell them apart. */
    if (atomic_fetch_or(word, bit) & bit)
        return false;
    /* The kernel's lock orders: a gone mover's stores are visible to whoever takes the byte next. */
    if (f->is_private || ofd(f->life_fd, F_OFD_SETLK, F_WRLCK, OWNER_BASE + node, 1) == 0)
        return true;   /* a PRIVATE fleet has no file: its threads are all there is */
    atomic_fetch_and(word, ~bit);
    return false;
}

void orb_owner_drop(struct orbit_fleet *f, uint16_t node)
{
    if (!f->is_private)
        (void)ofd(f->life_fd, F_OFD_SETLK, F_UNLCK, OWNER_BASE + node, 1);
    atomic_fetch_and(&f->owner_busy[node / 64], ~(1ull << (node % 64)));
}

int orb_gate_enter(struct orbit_fleet *f)
{
    struct orb_deadline d = orb_deadline_in(GATE_WAIT_MS);
    for (;;) {
        int rc = ofd(f->life_fd, F_OFD_SETLK, F_RDLCK, GATE_OFF, 1);
        if (rc != -EAGAIN || orb_deadline_passed(&d))
            return rc == -EAGAIN ? -ORBIT_ETIMEDOUT : rc;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

int orb_gate_take_alone(struct orbit_fleet *f)
{
    return orb_gate_take_alone_fd(f->life_fd);
}

int orb_gate_take_alone_fd(int fd)
{
    return ofd(fd, F_OFD_SETLK, F_WRLCK, GATE_OFF, 1);
}

void orb_gate_leave(struct orbit_fleet *f)
{
    (void)ofd(f->life_fd, F_OFD_SETLK, F_UNLCK, GATE_OFF, 1);
}

bool orb_node_alive(struct orbit_fleet *f, uint16_t node)
{
    if (f->is_private || (!f->observer && node == f->node))
        return true;   /* this process's own lives */
    /* The kernel holds the member's lock until its last descriptor goes; an error proves no death. */
    return orb_life_probe(f, node) != 0;
}

/* ---- this process life's incarnation ---- */

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_hooks(void);

static _Atomic uint64_t life_incarnation;   /* 0 until the first join; forgotten in a fork child */

/*
 * A pid and its start tick name a life only inside one pid namespace (two
 * containers' pid 1 started in the same tick share both), so the number is
 * random: 63 bits, the top one set. Every join of this process life shares it.
 */
uint64_t orb_life_incarnation(void)
{
    pthread_once(&fork_once, fork_hooks);   /* a fork child forgets it */
    uint64_t r = atomic_load(&life_incarnation);
    if (r)
        return r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)orb_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
    r |= 0x8000000000000000ull;
    uint64_t none = 0;
    return atomic_compare_exchange_strong(&life_incarnation, &none, r) ? r : none;   /* one per life */
}

/* ---- the process's handles, and fork ---- */

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static struct orbit_fleet *handles;

static void forget_watchers(void);
static void fork_prepare(void) { pthread_mutex_lock(&registry); }
static void fork_parent(void) { pthread_mutex_unlock(&registry); }

/*
 * The child shares the parent's open file descriptions, so holding them would
 * keep the parent's lives alive after the parent died: close the child's
 * references to the one that holds the locks (it is never mapped, so no
 * inherited mapping pins it either; the locks stay the parent's). Its handles
 * are refused from now on.
 */
static void fork_child(void)
{
    atomic_fetch_add(&orb_fork_generation, 1);
    atomic_store(&life_incarnation, 0);   /* a new process life */
    for (struct orbit_fleet *f = handles; f; f = f->next_live)
        if (f->life_fd >= 0) {
            close(f->life_fd);
            f->life_fd = -1;
        }
    handles = NULL;
    forget_watchers();   /* their threads stayed in the parent */
    pthread_mutex_unlock(&registry);
}

/*
 * The bounded lock's last word on a holder whose pid-namespace tag equals
 * ours: a live member record of one of this process's fleets that names the
 * holder with another namespace behind the same tag means its pid is not
 * ours to judge.
 */
static bool holder_in_other_namespace(uint64_t identity)
{
    uint64_t mine = orb_pidns_self();
    bool foreign = false;
    pthread_mutex_lock(&registry);
    for (struct orbit_fleet *h = handles; h && !foreign; h = h->next_live)
        for (uint32_t i = 0; !h->is_private && i < h->capacity && !foreign; i++) {
            struct orb_node_record *rec = &h->nodes[i];
            uint64_t ns = atomic_load(&rec->pidns);
            foreign = ns && ns != mine && atomic_load(&rec->state) == ORBIT_NODE_LIVE &&
                      orb_lock_identity((uint32_t)atomic_load(&rec->pid), atomic_load(&rec->start_time), ns) ==
                          identity;
        }
    pthread_mutex_unlock(&registry);
    return foreign;
}

static void fork_hooks(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    orb_lock_set_foreign_check(holder_in_other_namespace);
}

/* registry held: list f once. */
static void link_handle(struct orbit_fleet *f)
{
    for (struct orbit_fleet *h = handles; h; h = h->next_live)
        if (h == f)
            return;
    f->fork_generation = atomic_load(&orb_fork_generation);
    f->next_live = handles;
    handles = f;
}

/* registry held. */
static void unlink_handle(struct orbit_fleet *f)
{
    for (struct orbit_fleet **p = &handles; *p; p = &(*p)->next_live)
        if (*p == f) {
            *p = f->next_live;
            break;
        }
}

void orb_life_register(struct orbit_fleet *f)
{
    pthread_once(&fork_once, fork_hooks);
    pthread_mutex_lock(&registry);
    link_handle(f);
    pthread_mutex_unlock(&registry);
}

void orb_life_unregister(struct orbit_fleet *f)
{
    pthread_mutex_lock(&registry);
    unlink_handle(f);
    pthread_mutex_unlock(&registry);
}

/*
 * The descriptor comes to exist and is listed under the registry, which a
 * fork takes first (fork_prepare): no fork child, whichever thread forks,
 * ever holds a copy the child handler does not close. A copy left open would
 * keep every lock taken through it later, and so the life, after our death.
 */
int orb_life_open(struct orbit_fleet *f)
{
    pthread_once(&fork_once, fork_hooks);
    pthread_mutex_lock(&registry);
    int fd = orb_life_reopen(f);
    if (fd >= 0) {
        f->life_fd = fd;
        link_handle(f);
    }
    pthread_mutex_unlock(&registry);
    return fd < 0 ? fd : 0;
}

/* Under the registry too: a fork meanwhile would copy a descriptor no longer listed. */
void orb_life_close(struct orbit_fleet *f)
{
    pthread_mutex_lock(&registry);
    unlink_handle(f);
    if (f->life_fd >= 0)
        close(f->life_fd);   /* every lock of this handle goes with it */
    f->life_fd = -1;
    pthread_mutex_unlock(&registry);
}

static bool same_file(int a, int b)
{
    struct stat sa, sb;
    return a >= 0 && b >= 0 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

bool orb_life_held_here(const struct orbit_fleet *f, uint16_t node)
{
    bool held = false;
    pthread_mutex_lock(&registry);
    for (struct orbit_fleet *h = handles; h && !held; h = h->next_live)
        held = h != f && !h->observer && h->node == node && same_file(h->seg.fd, f->seg.fd);
    pthread_mutex_unlock(&registry);
    return held;
}

int orb_fleet_usable(const struct orbit_fleet *f, const char *call)
{
    if (__atomic_load_n(&f->fork_generation, __ATOMIC_RELAXED) ==
        atomic_load_explicit(&orb_fork_generation, memory_order_relaxed))
        return 0;   /* the SIGBUS guard poisons the word when the fleet file shrinks (guard_sigbus.h) */
    return orb_enter_refused(&f->fork_generation, call, "fleet handle");
}

/* ---- death watchers ---- */

struct watcher {
    struct watcher *next;
    dev_t dev;
    ino_t ino;
    uint16_t node;
    uint64_t joins;                /* the life watched: it holds byte joins % 64 */
    int fd;                        /* the watcher's own open file description */
    void *map;                     /* its own mapping of the records: valid after the handle left */
    size_t map_len;
    int guard;                     /* the mapping's SIGBUS guard slot (guard_sigbus.h), -1: none */
    struct orb_node_record *rec;
};

static struct watcher *watchers;   /* under registry */
static unsigned n_watchers;

static void watcher_free(struct watcher *w)
{
    orb_guard_unmap(w->guard);
    if (w->map)
        munmap(w->map, w->map_len);
    if (w->fd >= 0)
        close(w->fd);
    free(w);
}

/* Fork child, registry held: the parent's watchers are not ours; their descriptors go too. */
static void forget_watchers(void)
{
    while (watchers) {
        struct watcher *w = watchers;
        watchers = w->next;
        watcher_free(w);
    }
    n_watchers = 0;
}

static void *watch_life(void *arg)
{
    struct watcher *w = arg;
    long long byte = life_byte(w->node, w->joins);
    /* A read lock is granted only once no write lock holds the byte: the member is gone. */
    int rc = atomic_load(&w->rec->joins) == w->joins ? ofd(w->fd, F_OFD_SETLKW, F_RDLCK, byte, 1) : 0;
    (void)ofd(w->fd, F_OFD_SETLK, F_UNLCK, byte, 1);
    if (rc < 0) {
        struct timespec pause = { 0, 50 * 1000000 };   /* no lock service: waiters poll, slowly */
        nanosleep(&pause, NULL);
    }
    pthread_mutex_lock(&registry);
    for (struct watcher **p = &watchers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            n_watchers--;
            break;
        }
    pthread_mutex_unlock(&registry);
    /* Every waiter of every process sleeps on life_end; each re-checks the life itself. */
    orb_wait_kick(&w->rec->life_end);
    watcher_free(w);
    return NULL;
}

int orb_life_reopen(struct orbit_fleet *f)
{
    int mode = f->seg.read_only ? O_RDONLY : O_RDWR;   /* a read-only observer only tests locks */
    int fd = open(f->seg.path, mode | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && same_file(fd, f->seg.fd))
        return fd;
    if (fd >= 0)
        close(fd);
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", f->seg.fd);
    fd = open(self, mode | O_CLOEXEC);   /* the name was unlinked or replaced: the inode itself */
    return fd >= 0 ? fd : -errno;
}

static int watcher_start(struct orbit_fleet *f, struct watcher *w)
{
    w->fd = orb_life_reopen(f);
    if (w->fd < 0)
        return w->fd;
    w->map_len = f->seg.mapped;
    w->map = mmap(NULL, w->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, w->fd, 0);
    if (w->map == MAP_FAILED) {
        w->map = NULL;
        return -errno;
    }
    if ((w->guard = orb_guard_map(w->map, w->map_len, f->seg.path)) < 0)
        return w->guard;   /* the file may shrink under the watcher too */
    w->rec = (struct orb_node_record *)((char *)w->map + ORB_SEG_HEADER_BYTES) + w->node;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, WATCHER_STACK);
    pthread_t t;
    int rc = pthread_create(&t, &attr, watch_life, w);
    pthread_attr_destroy(&attr);
    return -rc;
}

int orb_life_watch(struct orbit_fleet *f, uint16_t node, uint64_t joins)
{
    struct stat st;
    if (fstat(f->seg.fd, &st) != 0)
        return -errno;
    pthread_mutex_lock(&registry);
    for (struct watcher *w = watchers; w; w = w->next)
        if (w->dev == st.st_dev && w->ino == st.st_ino && w->node == node && w->joins == joins) {
            pthread_mutex_unlock(&registry);
            return 0;   /* this process watches that life already */
        }
    int rc = n_watchers < WATCHERS_MAX ? 0 : -ORBIT_EFULL;
    struct watcher *w = rc == 0 ? calloc(1, sizeof *w) : NULL;
    if (rc == 0 && !w)
        rc = -ENOMEM;
    if (w) {
        *w = (struct watcher){ .dev = st.st_dev, .ino = st.st_ino, .node = node, .joins = joins, .fd = -1,
                              .guard = -1 };
        rc = watcher_start(f, w);
        if (rc == 0) {
            w->next = watchers;
            watchers = w;
            n_watchers++;
        } else {
            watcher_free(w);
        }
    }
    pthread_mutex_unlock(&registry);
    return rc;
}

/* ---- is a life over, and waiting for it ---- */

int orb_life_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    struct orb_node_record *rec = &f->nodes[node];
    /* Acquire: the incarnation read next is the one published with LIVE. */
    if (atomic_load_explicit(&rec->state, memory_order_acquire) != ORBIT_NODE_LIVE ||
        atomic_load(&rec->incarnation) != incarnation)
        return 1;
    return orb_node_alive(f, node) ? 0 : 1;
}

int orb_life_arm(struct orbit_fleet *f, uint16_t node, uint64_t incarnation)
{
    if (orb_life_over(f, node, incarnation))
        return 1;
    uint64_t joins = atomic_load(&f->nodes[node].joins);
    /* Still that life after reading joins: the byte named is the one it holds. */
    if (orb_life_over(f, node, incarnation))
        return 1;
    return f->is_private ? 0 : orb_life_watch(f, node, joins);
}

int orb_life_over_pred(void *arg)
{
    struct orb_life_ctx *c = arg;
    return orb_life_over(c->f, c->node, c->incarnation);
}

int orb_life_check_wait(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, const char *call)
{
    int rc = orb_enter_fleet(f, call);
    if (rc == 0)
        rc = orb_fleet_writable(f, call);   /* its watcher kicks every waiter through the file */
    if (rc == 0 && !orb_fleet_record(f, node))
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: node %u: the fleet has %u nodes", call, (unsigned)node,
                      (unsigned)f->capacity);
    if (rc == 0 && !f->observer && node == f->node && incarnation == f->incarnation)
        rc = orb_fail(-ORBIT_EMALFORMED, "%s: node %u is this handle's own life", call, (unsigned)node);
    return rc;
}

int orb_life_wait_over(struct orbit_fleet *f, uint16_t node, uint64_t incarnation, int timeout_ms)
{
    if (timeout_ms == 0)   /* a look: no watcher is started for a wait that will not happen */
        return orb_life_over(f, node, incarnation) ? 0 : -ETIMEDOUT;
    int rc = orb_life_arm(f, node, incarnation);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    struct orb_life_ctx c = { f, node, incarnation };
    struct orb_deadline d = orb_deadline_in(timeout_ms);
    /* No spin: the predicate is a system call, and a death takes milliseconds to matter. */
    rc = orb_wait_park_until(&f->nodes[node].life_end, orb_life_over_pred, &c, &d, NULL, NULL);
    return rc > 0 ? 0 : rc;
}
