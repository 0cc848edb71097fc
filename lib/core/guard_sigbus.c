/* SPDX-License-Identifier: MIT */
/* The SIGBUS guard of named segments: registry, handler, chaining (guard_sigbus.h). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "guard_sigbus.h"

#define CHUNK_SLOTS 256u
#define CHUNKS_MAX  256u           /* 65536 mappings a process may hold at once */

/* A slot's word: state, broken, handlers inside, tenancy (a new claim moves it). */
#define ST_MASK     3ull
#define ST_FREE     0ull
#define ST_FILLING  1ull           /* claimed, its fields being written */
#define ST_ACTIVE   2ull
#define ST_DYING    3ull           /* being forgotten: no new handler enters */
#define W_BROKEN    4ull
#define USER_ONE    (1ull << 8)    /* a handler inside the slot (24 bits) */
#define USER_MASK   (0xffffffull << 8)
#define TENANCY_ONE (1ull << 32)

struct guard_slot {
    _Atomic uint64_t word;
    _Atomic uintptr_t base;
    _Atomic size_t len;
    _Atomic(uint32_t *) generation;
    char path[256];                /* read outside the handler only */
};

static _Atomic(struct guard_slot *) chunks[CHUNKS_MAX];
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t broken_count;
static struct sigaction previous;  /* written once, before our handler is installed */
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_error;

static struct guard_slot *slot_at(int slot)
{
    if (slot < 0 || (unsigned)slot >= CHUNKS_MAX * CHUNK_SLOTS)
        return NULL;
    struct guard_slot *chunk = atomic_load_explicit(&chunks[(unsigned)slot / CHUNK_SLOTS], memory_order_acquire);
    return chunk ? &chunk[(unsigned)slot % CHUNK_SLOTS] : NULL;
}

/* ---- the handler (async-signal-safe: atomics, mmap, sigaction, raise) ---- */

/* Holding a user count on s (its fields stay put): break it once; false if it cannot be answered. */
static bool break_slot(struct guard_slot *s)
{
    uint64_t w = atomic_load(&s->word);
    while (!(w & W_BROKEN))
        if (atomic_compare_exchange_weak(&s->word, &w, w | W_BROKEN)) {
            void *base = (void *)atomic_load(&s->base);
            size_t len = atomic_load(&s->len);
            /* The whole mapping at once: the process stops sharing anything through this file. */
            if (mmap(base, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                     -1, 0) == MAP_FAILED)
                return false;
            atomic_fetch_add(&broken_count, 1);
            /* seq_cst after the BROKEN store: orb_guard_bind stores its word, then loads ours. */
            uint32_t *gen = atomic_load(&s->generation);
            if (gen)
                __atomic_fetch_or(gen, ORB_GEN_BROKEN, __ATOMIC_SEQ_CST);
            return true;
        }
    return true;   /* broken by another thread: its mmap lands, and the access is tried again */
}

/* Is addr in a registered mapping, and answered? false: not ours, or the mmap over it failed. */
static bool answer(uintptr_t addr)
{
    for (unsigned c = 0; c < CHUNKS_MAX; c++) {
        struct guard_slot *chunk = atomic_load_explicit(&chunks[c], memory_order_acquire);
        if (!chunk)
            break;
        for (unsigned i = 0; i < CHUNK_SLOTS; i++) {
            struct guard_slot *s = &chunk[i];
            uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
            while ((w & ST_MASK) == ST_ACTIVE && addr - atomic_load(&s->base) < atomic_load(&s->len)) {
                /* Enter only the tenancy whose fields we read: a reused slot moved the word. */
                if (!atomic_compare_exchange_weak(&s->word, &w, w + USER_ONE))
                    continue;
                bool answered = break_slot(s);
                atomic_fetch_sub(&s->word, USER_ONE);
                return answered;
            }
        }
    }
    return false;
}

/* Not ours: the handler installed before ours, or what SIGBUS would have done without us. */
static void pass_on(int sig, siginfo_t *si, void *uc)
{
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    bool sent = si->si_code <= 0;   /* kill(2), tgkill, sigqueue: not a fault */
    if (sent && !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN)
        return;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (sent)
        raise(sig);   /* blocked in here: delivered, with the default action, as we return */
    /* A fault: the access runs again as we return and faults into the default action. */
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    /* Only a fault the kernel raised for a page past the file's end (or a lost object). */
    if ((si->si_code == BUS_ADRERR || si->si_code == BUS_OBJERR) && answer((uintptr_t)si->si_addr)) {
        errno = saved;
        return;
    }
    pass_on(sig, si, uc);
    errno = saved;
}

static void install(void)
{
    /* Read the handler before ours goes in, so a fault right after finds it. */
    if (sigaction(SIGBUS, NULL, &previous) != 0) {
        install_error = -errno;
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL) != 0)
        install_error = -errno;
}

/* ---- the registry (outside signal handlers) ---- */

static struct guard_slot *chunk_of(unsigned c)
{
    struct guard_slot *chunk = atomic_load_explicit(&chunks[c], memory_order_acquire);
    if (chunk)
        return chunk;
    pthread_mutex_lock(&grow_lock);
    chunk = atomic_load_explicit(&chunks[c], memory_order_acquire);
    if (!chunk) {
        void *m = mmap(NULL, CHUNK_SLOTS * sizeof *chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        chunk = m == MAP_FAILED ? NULL : m;
        /* Release: the zeroed (FREE) slots are visible before the chunk is. */
        if (chunk)
            atomic_store_explicit(&chunks[c], chunk, memory_order_release);
    }
    pthread_mutex_unlock(&grow_lock);
    return chunk;
}

/* A FREE slot, claimed (FILLING, its tenancy moved): its index, or -ENOMEM. */
static int claim(uint64_t *word)
{
    for (unsigned c = 0; c < CHUNKS_MAX; c++) {
        struct guard_slot *chunk = chunk_of(c);
        if (!chunk)
            return -ENOMEM;
        for (unsigned i = 0; i < CHUNK_SLOTS; i++) {
            uint64_t w = atomic_load(&chunk[i].word);
            uint64_t mine = (w & ~(TENANCY_ONE - 1)) + TENANCY_ONE + ST_FILLING;
            if ((w & ST_MASK) == ST_FREE && atomic_compare_exchange_strong(&chunk[i].word, &w, mine)) {
                *word = mine;
                return (int)(c * CHUNK_SLOTS + i);
            }
        }
    }
    return -ENOMEM;
}

int orb_guard_map(void *base, size_t len, const char *path)
{
    pthread_once(&install_once, install);
    if (install_error)
        return install_error;
    uint64_t w;
    int slot = claim(&w);
    if (slot < 0)
        return slot;
    struct guard_slot *s = slot_at(slot);
    atomic_store(&s->base, (uintptr_t)base);
    atomic_store(&s->len, len);
    atomic_store(&s->generation, NULL);
    snprintf(s->path, sizeof s->path, "%s", path ? path : "");
    /* Release: a handler that sees ACTIVE sees the fields. */
    atomic_store_explicit(&s->word, (w & ~ST_MASK) | ST_ACTIVE, memory_order_release);
    return slot;
}

void orb_guard_unmap(int slot)
{
    struct guard_slot *s = slot_at(slot);
    if (!s)
        return;
    uint64_t w = atomic_load(&s->word);
    while (!atomic_compare_exchange_weak(&s->word, &w, (w & ~ST_MASK) | ST_DYING))
        ;
    /* A handler inside maps over this range: it must be out before the range is unmapped. */
    while (atomic_load(&s->word) & USER_MASK)
        sched_yield();
    atomic_store(&s->generation, NULL);
    atomic_store(&s->len, 0);
    atomic_store(&s->base, 0);
    atomic_store_explicit(&s->word, (w & ~(TENANCY_ONE - 1)) | ST_FREE, memory_order_release);
}

void orb_guard_bind(int slot, uint32_t *generation)
{
    struct guard_slot *s = slot_at(slot);
    if (!s)
        return;
    atomic_store(&s->generation, generation);
    /* seq_cst: a handler that broke the slot before our store saw no word; we see its BROKEN. */
    if (atomic_load(&s->word) & W_BROKEN)
        __atomic_fetch_or(generation, ORB_GEN_BROKEN, __ATOMIC_SEQ_CST);
}

bool orb_guard_broken(int slot)
{
    struct guard_slot *s = slot_at(slot);
    return s && (atomic_load(&s->word) & W_BROKEN);
}

uint64_t orb_guard_breaks(void)
{
    return atomic_load_explicit(&broken_count, memory_order_relaxed);
}

/* The slot that matches (ACTIVE or DYING, broken), or NULL. */
static struct guard_slot *find_broken(bool (*match)(struct guard_slot *s, const void *key), const void *key)
{
    if (orb_guard_breaks() == 0)
        return NULL;
    for (unsigned c = 0; c < CHUNKS_MAX; c++) {
        struct guard_slot *chunk = atomic_load_explicit(&chunks[c], memory_order_acquire);
        if (!chunk)
            break;
        for (unsigned i = 0; i < CHUNK_SLOTS; i++) {
            uint64_t w = atomic_load_explicit(&chunk[i].word, memory_order_acquire);
            if ((w & W_BROKEN) && (w & ST_MASK) >= ST_ACTIVE && match(&chunk[i], key))
                return &chunk[i];
        }
    }
    return NULL;
}

static bool holds_addr(struct guard_slot *s, const void *key)
{
    return (uintptr_t)key - atomic_load(&s->base) < atomic_load(&s->len);
}

static bool bound_to(struct guard_slot *s, const void *key)
{
    return atomic_load(&s->generation) == key;
}

bool orb_guard_broken_at(const void *addr)
{
    return find_broken(holds_addr, addr) != NULL;
}

bool orb_guard_path_of(const uint32_t *generation, char *buf, size_t len)
{
    struct guard_slot *s = find_broken(bound_to, generation);
    if (s && len)
        snprintf(buf, len, "%s", s->path);
    return s != NULL;
}
