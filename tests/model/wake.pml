/*
 * The wake protocol (docs/design.md, section 4) as a Promela model (spin checks every
 * interleaving under sequential consistency, which the seq_cst operations
 * give us). Two waiters wait for `data`; one waker publishes it, another
 * publishes an unrelated change on the same word first or meanwhile. A lost
 * wakeup shows up as an invalid end state: a waiter asleep forever after the
 * wakers have finished. Broken variants spin must catch:
 *   -DBROKEN      a waker that wakes without moving `changes` (a wake racing
 *                 the waiter's futex call is lost);
 *   -DONE_BUMP    a waker that takes the parked flag without moving `changes`
 *                 again (the flag it took may be a waiter's whose since already
 *                 counted its first bump; a later waker then reads parked 0).
 */
#define WAITERS 2

byte changes = 0;
bit parked = 0;
bit data = 0;
bit other = 0;
bit asleep[WAITERS];
byte done = 0;

inline futex_wait(id, since) {
    /* the kernel compares and sleeps atomically */
    atomic { if :: changes == since -> asleep[id] = 1 :: else -> skip fi }
    (asleep[id] == 0)
}

inline futex_wake_all() {
    atomic { asleep[0] = 0; asleep[1] = 0 }
}

/* The waker's side after its publication: exchange(parked, 0) is one atomic step. */
inline signal() {
#ifndef BROKEN
    changes++;
#endif
    bit took;
    atomic { took = parked; parked = 0 }
    if
    :: took == 1 ->
#if !defined(BROKEN) && !defined(ONE_BUMP)
       changes++;
#endif
       futex_wake_all()
    :: else -> skip
    fi
}

proctype waiter(byte id) {
    byte since;
    do
    :: since = changes;
       if :: data -> break :: else -> skip fi;
       parked = 1;
       if :: data -> break :: else -> skip fi;
       futex_wait(id, since)
    od;
    done++
}

proctype waker() {
    data = 1;
    signal()
}

/* A change no waiter here waits for (another predicate on the same word). */
proctype other_waker() {
    other = 1;
    signal()
}

init {
    atomic { run waiter(0); run waiter(1); run other_waker(); run waker() }
    (done == WAITERS)
}
