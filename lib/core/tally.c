/* SPDX-License-Identifier: MIT */
/* Per-thread cells of a handle's process-local counts (tally.h). */
#include <stdlib.h>
#include <string.h>
#include "tally.h"

__thread struct orb_tally_entry orb_tally_tls[ORB_TALLY_WAYS] __attribute__((tls_model("initial-exec")));
__thread char orb_tally_me __attribute__((tls_model("initial-exec")));

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;   /* live tallies, ids */
static struct orb_tally *live;
static uint64_t next_id = 1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;

/* A thread ends: its cells are free for the next thread, their counts kept. */
static void thread_gone(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&registry);
    for (struct orb_tally *t = live; t; t = t->next_live) {
        pthread_mutex_lock(&t->lock);
        for (struct orb_tally_cell *c = t->cells; c; c = c->next)
            if (c->owner == &orb_tally_me)
                c->owner = NULL;   /* the lock hands our last stores to the next owner */
        if (atomic_load_explicit(&t->fast_owner, memory_order_relaxed) == &orb_tally_me)
            atomic_store_explicit(&t->fast_owner, NULL, memory_order_relaxed);
        pthread_mutex_unlock(&t->lock);
    }
    pthread_mutex_unlock(&registry);
    memset(orb_tally_tls, 0, sizeof orb_tally_tls);
}

static void fork_prepare(void) { pthread_mutex_lock(&registry); }
static void fork_parent(void) { pthread_mutex_unlock(&registry); }
/* A fork child counts nothing through its parent's handles (they refuse it); it only frees them. */
static void fork_child(void) { pthread_mutex_unlock(&registry); }

static void setup(void)
{
    pthread_key_create(&thread_key, thread_gone);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void orb_tally_init(struct orb_tally *t)
{
    pthread_once(&once, setup);
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_lock(&registry);
    t->id = next_id++;
    t->next_live = live;
    live = t;
    pthread_mutex_unlock(&registry);
}

void orb_tally_destroy(struct orb_tally *t)
{
    if (!t->id)
        return;   /* never set up */
    pthread_mutex_lock(&registry);
    for (struct orb_tally **p = &live; *p; p = &(*p)->next_live)
        if (*p == t) {
            *p = t->next_live;
            break;
        }
    pthread_mutex_unlock(&registry);
    for (struct orb_tally_cell *c = t->cells, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof *t);
}

void orb_tally_read(struct orb_tally *t, uint64_t *out, unsigned n)
{
    n = n > ORB_TALLY_MAX ? ORB_TALLY_MAX : n;
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < n; i++)
        out[i] = atomic_load_explicit(&t->spare.v[i], memory_order_relaxed);
    for (const struct orb_tally_cell *c = t->cells; c; c = c->next)
        for (unsigned i = 0; i < n; i++)
            out[i] += atomic_load_explicit(&c->v[i], memory_order_relaxed);
    pthread_mutex_unlock(&t->lock);
}

static struct orb_tally_cell *cell_of(struct orb_tally *t)
{
    pthread_once(&once, setup);
    pthread_setspecific(thread_key, &orb_tally_me);   /* thread_gone runs when we end */
    pthread_mutex_lock(&t->lock);
    struct orb_tally_cell *mine = NULL, *free_cell = NULL;
    for (struct orb_tally_cell *c = t->cells; c && !mine; c = c->next) {
        if (c->owner == &orb_tally_me)
            mine = c;
        else if (!c->owner && !free_cell)
            free_cell = c;
    }
    if (!mine && (mine = free_cell ? free_cell : calloc(1, sizeof *mine)) != NULL && mine != free_cell) {
        mine->next = t->cells;
        t->cells = mine;
    }
    if (mine)
        mine->owner = &orb_tally_me;
    if (mine && !atomic_load_explicit(&t->fast_owner, memory_order_relaxed)) {
        t->fast_cell = mine;   /* before the owner: only the owner thread reads it */
        atomic_store_explicit(&t->fast_owner, &orb_tally_me, memory_order_relaxed);
    }
    pthread_mutex_unlock(&t->lock);
    if (!mine)
        return NULL;
    /* The first way, or the second when the first holds another live tally's entry. */
    struct orb_tally_entry *e = &orb_tally_tls[t->id % ORB_TALLY_WAYS];
    if (e->id && e->id != t->id)
        e = &orb_tally_tls[(t->id % ORB_TALLY_WAYS) ^ 1u];
    *e = (struct orb_tally_entry){ t->id, mine };
    return mine;
}

void orb_tally_add_slow(struct orb_tally *t, unsigned i, uint64_t n)
{
    struct orb_tally_cell *c = cell_of(t);
    if (c)
        orb_tally_cell_add(c, i, n);
    else   /* out of memory: the cell every such thread shares, by atomic adds */
        atomic_fetch_add_explicit(&t->spare.v[i], n, memory_order_relaxed);
}
