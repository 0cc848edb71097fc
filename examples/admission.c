/* SPDX-License-Identifier: MIT */
/*
 * admission.c — all-or-nothing capacity claims shared by two processes.
 *
 * The fleet's admission ledger holds capacity domains (here: 4 MiB of cache
 * bytes and 2 worker slots). A claim takes units from several domains at
 * once, or nothing. The parent claims 3 MiB and a slot. A forked child asks
 * for 2 MiB and a slot: the slot is free but the bytes are not, so the claim
 * is DEFERRED and nothing is charged; the child parks on the ledger until a
 * release and claims again. A claim is plain data that any member may
 * release: the child hands its claim to the parent, which releases it.
 *
 *   cc -std=c11 $(pkg-config --cflags orbit) admission.c $(pkg-config --libs orbit)
 */
#define _POSIX_C_SOURCE 200809L
#include <orbit/orbit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIMEOUT_MS 10000          /* no wait here is unbounded */
enum { CACHE_BYTES = 1, SLOTS = 2 };   /* domain ids: any uint32 the fleet agrees on */
#define MiB (1024u * 1024u)

static char fleet_name[ORBIT_FLEET_NAME_MAX + 1];
static pid_t parent_pid, child_pid;

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "admission[%d]: %s: %s\n", (int)getpid(), what, why);
    exit(1);
}
/* orbit calls return 0 (or a count) or a negated ORBIT_E* code. */
static int must(int rc, const char *what) { if (rc < 0) die(what, orbit_strerror(rc)); return rc; }
static void expect(bool ok, const char *what) { if (!ok) die("expected", what); }

/* At exit the parent stops a child still running and removes the fleet's segments. */
static void cleanup(void)
{
    if (getpid() != parent_pid)
        return;
    if (child_pid > 0 && kill(child_pid, SIGKILL) == 0)
        waitpid(child_pid, NULL, 0);
    orbit_fleet_unlink(fleet_name);
}

/* Units in use in a domain, as every member sees them. */
static uint64_t used(struct orbit_admission *adm, uint32_t domain)
{
    struct orbit_domain_info d[4];
    ssize_t n = orbit_admission_domains(adm, d, 4);
    for (ssize_t i = 0; i < n && i < 4; i++)
        if (d[i].domain == domain)
            return d[i].used;
    die("used", "no such domain");
}

/* The child: claim 2 MiB + a slot, waiting for a release while it does not fit. Its claim
 * stays its own: it hands it to the parent and stays until the parent released it, since a
 * leave (as a death) releases what the leaving life still holds. */
static void child(int to_parent, int from_parent)
{
    struct orbit_fleet *fleet;
    struct orbit_admission *adm;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_admission_open(fleet, NULL, &adm), "open");

    const struct orbit_units huge[] = { { .domain = CACHE_BYTES, .units = 8 * MiB } };
    struct orbit_demand never = { .claim = huge, .n_claim = 1 };
    struct orbit_admit_result r;
    must(orbit_admission_try_claim(adm, &never, &r), "try claim");
    expect(r.outcome == ORBIT_ADMIT_REJECTED, "8 MiB of a 4 MiB domain: REJECTED");

    const struct orbit_units want[] = { { .domain = CACHE_BYTES, .units = 2 * MiB },
                                        { .domain = SLOTS, .units = 1 } };
    struct orbit_demand demand = { .claim = want, .n_claim = 2 };
    must(orbit_admission_try_claim(adm, &demand, &r), "try claim");
    expect(r.outcome == ORBIT_ADMIT_DEFERRED && r.blocker_domain == CACHE_BYTES &&
           r.blocker_free == 1 * MiB, "DEFERRED on the bytes (1 MiB free)");
    expect(used(adm, SLOTS) == 1, "nothing charged by a deferred claim");
    printf("child: deferred, %llu bytes free\n", (unsigned long long)r.blocker_free);
    expect(write(to_parent, "d", 1) == 1, "to tell the parent");

    while (r.outcome == ORBIT_ADMIT_DEFERRED) {   /* park until a release, then try again */
        must(orbit_admission_wait(adm, r.release_epoch, TIMEOUT_MS, NULL), "wait");
        must(orbit_admission_try_claim(adm, &demand, &r), "try claim");
    }
    expect(r.outcome == ORBIT_ADMIT_CLAIMED, "CLAIMED after the release");
    printf("child: claimed, serial %llu\n", (unsigned long long)r.claim.serial);
    expect(write(to_parent, &r.claim, sizeof r.claim) == (ssize_t)sizeof r.claim, "claim sent");
    char done;
    expect(read(from_parent, &done, 1) == 1, "the parent to be done with the claim");
    orbit_admission_close(adm);
    orbit_fleet_leave(fleet);
    exit(0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* parent and child lines in order */
    parent_pid = getpid();
    snprintf(fleet_name, sizeof fleet_name, "ex-admission-%d", (int)parent_pid);
    orbit_fleet_unlink(fleet_name);     /* a leftover of a killed run that had our pid */
    atexit(cleanup);

    struct orbit_fleet *fleet;
    struct orbit_admission *adm;
    must(orbit_fleet_join(fleet_name, NULL, &fleet), "join");
    must(orbit_admission_open(fleet, NULL, &adm), "open");
    must(orbit_admission_set_capacity(adm, CACHE_BYTES, 4 * MiB), "capacity");
    must(orbit_admission_set_capacity(adm, SLOTS, 2), "capacity");

    const struct orbit_units mine[] = { { .domain = CACHE_BYTES, .units = 3 * MiB },
                                        { .domain = SLOTS, .units = 1 } };
    struct orbit_demand demand = { .claim = mine, .n_claim = 2 };
    struct orbit_admit_result r;
    must(orbit_admission_try_claim(adm, &demand, &r), "try claim");
    expect(r.outcome == ORBIT_ADMIT_CLAIMED, "3 MiB + 1 slot CLAIMED");

    int pipefd[2], backfd[2];
    expect(pipe(pipefd) == 0 && pipe(backfd) == 0 && (child_pid = fork()) >= 0, "pipes, fork");
    if (child_pid == 0) {               /* joins as its own node; never touches our handles */
        close(pipefd[0]);
        close(backfd[1]);
        child(pipefd[1], backfd[0]);
    }
    close(pipefd[1]);
    close(backfd[0]);

    char note;
    expect(read(pipefd[0], &note, 1) == 1, "the child to be deferred");
    must(orbit_admission_release(adm, &r.claim), "release");   /* wakes the child */
    struct orbit_claim theirs;
    expect(read(pipefd[0], &theirs, sizeof theirs) == (ssize_t)sizeof theirs, "the child's claim");
    expect(used(adm, CACHE_BYTES) == 2 * MiB && used(adm, SLOTS) == 1, "the child's units charged");
    must(orbit_admission_release(adm, &theirs), "release the child's claim");
    expect(orbit_admission_release(adm, &theirs) == -ORBIT_ENOTRESERVED, "a claim released once only");
    expect(used(adm, CACHE_BYTES) == 0 && used(adm, SLOTS) == 0, "nothing in use");
    expect(write(backfd[1], "k", 1) == 1, "to let the child leave");

    int status;
    expect(waitpid(child_pid, &status, 0) == child_pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0, "the child to succeed");
    child_pid = 0;
    orbit_admission_close(adm);
    orbit_fleet_leave(fleet);
    printf("admission: ok\n");
    return 0;   /* cleanup() unlinks the fleet */
}
