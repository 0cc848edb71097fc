/* SPDX-License-Identifier: MIT */
/* The reaper's own threads: started with the process's signals blocked, on a small stack. */
#include <signal.h>
#include "reaper_thread.h"

int rp_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    static const int faults[] = { SIGBUS, SIGSEGV, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
    sigset_t mask, old;
    sigfillset(&mask);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&mask, faults[i]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RP_THREAD_STACK);
    /* The new thread inherits the mask in force at pthread_create: set for it, then ours again. */
    pthread_sigmask(SIG_SETMASK, &mask, &old);
    int rc = pthread_create(thread, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return -rc;
}
