/*
 * The wake protocol (docs/design.md, section 4) as a Promela model (spin checks every
 * interleaving under sequential consistency, which the seq_cst operations
 * give us). Two waiters wait for `data`; one waker publishes it. A lost wakeup
 * shows up as an invalid end state: a waiter asleep forever after the waker
 * has finished. Compile with -DBROKEN for a waker that wakes without moving
 * `changes` (a wake racing the waiter's futex call is then lost): spin must
 * find that lost wakeup.
 */
#define WAITERS 2

byte changes = 0;
bit parked = 0;
bit data = 0;
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
#ifdef BROKEN
    if
    :: parked == 1 -> parked = 0; futex_wake_all()
    :: else -> skip
    fi
#else
    changes++;
    if
    :: parked == 1 -> parked = 0; futex_wake_all()
    :: else -> skip
    fi
#endif
}

init {
    atomic { run waiter(0); run waiter(1); run waker() }
    (done == WAITERS)
}
