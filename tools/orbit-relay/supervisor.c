/* SPDX-License-Identifier: MIT */
/*
 * orbit-relay supervisor: forks the workers, replaces one that dies, and, when
 * no reaper daemon watches the fleet, reclaims a dead worker's share itself
 * (orbit_fleet_reap) as soon as it sees the child exit.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "relay.h"
#include "notify.h"
#include "supervisor.h"
#include "worker.h"
#include "syscalls.h"

static int free_slot(struct relay_stats *st)
{
    for (int i = 0; i < RELAY_STATS_SLOTS; i++)
        if (STAT_GET(&st->w[i], state) == SLOT_FREE)
            return i;
    /* Full: recycle the oldest ended life. */
    for (int i = 0; i < RELAY_STATS_SLOTS; i++) {
        uint32_t s = STAT_GET(&st->w[i], state);
        if (s == SLOT_EXITED || s == SLOT_KILLED)
            return i;
    }
    return -1;
}

/* A forked child starts with the default signal setup. */
void sup_child_signals(void)
{
    sigset_t none;
    sigemptyset(&none);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * Worker i runs on the i-th CPU the supervisor may use (modulo their number).
 * Left to the scheduler, the two workers of a 2-CPU host shared one CPU for
 * milliseconds at a time while the load generator and the backend took the
 * other (a wakee goes to its waker's CPU): every request of both waited
 * behind the other's turns, and that was the relay's p99 at 100 B and 64
 * connections (3-4 ms, against 1 ms pinned). A replacement takes its
 * predecessor's CPU. ORBIT_RELAY_NO_PIN=1, or one CPU only: not pinned.
 */
static void pin_plan(struct sup_fleet *rf)
{
    rf->n_cpus = 0;
    cpu_set_t set;
    if (relay_env_on("ORBIT_RELAY_NO_PIN") || rf->opts.workers < 2 ||
        sched_getaffinity(0, sizeof set, &set) < 0 || CPU_COUNT(&set) < 2)
        return;
    for (int c = 0; c < CPU_SETSIZE && rf->n_cpus < RELAY_STATS_SLOTS; c++)
        if (CPU_ISSET(c, &set))
            rf->cpus[rf->n_cpus++] = c;
}

int sup_spawn(struct sup_fleet *rf, int index)
{
    int slot = free_slot(rf->st);
    if (slot < 0)
        return -ORBIT_EFULL;
    struct relay_worker_stats *w = &rf->st->w[slot];
    memset((void *)w, 0, sizeof *w);
    atomic_store(&w->state, SLOT_STARTING);
    rf->opts.listen_fd = rf->lfds[index];   /* the child's copy of the options carries it */
    pid_t pid = fork();
    if (pid < 0) {
        atomic_store(&w->state, SLOT_FREE);
        return -errno;
    }
    if (pid == 0) {
        sup_child_signals();
        close(rf->ready_rd);
        if (rf->n_cpus > 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(rf->cpus[index % rf->n_cpus], &one);
            rf->opts.pinned = sched_setaffinity(0, sizeof one, &one) == 0;
        }
        _exit(worker_main(&rf->opts, rf->st, slot, rf->ready_wr));
    }
    atomic_store(&w->pid, pid);
    rf->pids[index] = pid;
    rf->slot_of[index] = slot;
    atomic_fetch_add(&rf->st->spawned, 1);
    return 0;
}

/* A worker still starting that has exited (not reaped: its status stays for sup_on_sigchld), or -1. */
static int exited_while_starting(struct sup_fleet *rf)
{
    for (int i = 0; i < rf->opts.workers; i++) {
        siginfo_t si = { 0 };
        if (rf->pids[i] > 0 && STAT_GET(&rf->st->w[rf->slot_of[i]], state) == SLOT_STARTING &&
            waitid(P_PID, (id_t)rf->pids[i], &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == rf->pids[i])
            return i;
    }
    return -1;
}

/*
 * Waits until n workers said they are ready (or timeout_ms passed). With
 * watch_exits, a worker that exits before it is ready ends the wait at
 * once (-ECHILD; it said why on stderr): a first start that cannot succeed
 * fails in a moment, not after the timeout.
 */
static int wait_ready(struct sup_fleet *rf, int n, int timeout_ms, bool watch_exits)
{
    int64_t end = relay_now_ns() + (int64_t)timeout_ms * 1000000;
    while (n > 0) {
        int64_t left = (end - relay_now_ns()) / 1000000;
        if (left <= 0)
            return -ORBIT_ETIMEDOUT;
        if (watch_exits && exited_while_starting(rf) >= 0)
            return -ECHILD;
        struct pollfd pfd = { .fd = rf->ready_rd, .events = POLLIN };
        int r = poll(&pfd, 1, watch_exits && left > 50 ? 50 : (int)left);
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r > 0) {
            char buf[64];
            ssize_t got = read(rf->ready_rd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf);
            if (got <= 0)
                return -EIO;
            n -= (int)got;
        }
    }
    return 0;
}

static void mark_running(struct sup_fleet *rf)
{
    for (int i = 0; i < rf->opts.workers; i++) {
        struct relay_worker_stats *w = &rf->st->w[rf->slot_of[i]];
        if (STAT_GET(w, state) == SLOT_STARTING && rf->pids[i] > 0)
            atomic_store(&w->state, SLOT_RUNNING);
    }
}

/*
 * A SO_REUSEPORT listener per worker, held here: a dead worker's accept
 * queue waits for its replacement instead of being reset. In an upgrade the
 * workers take the running relay's listeners, the very sockets (handover.c
 * says why): more workers than those get new ones on the same port; fewer
 * would leave a queue nobody accepts from, so there are as many as listeners.
 */
static int fleet_listeners(struct sup_fleet *rf, struct handover_take *take)
{
    int n = 0;
    if (take) {
        const struct sockaddr_in *want = &rf->opts.listen;
        if (want->sin_port && (want->sin_port != take->listen.sin_port ||
                               want->sin_addr.s_addr != take->listen.sin_addr.s_addr)) {
            char a[64], b[64];
            relay_format_addr(want, a, sizeof a);
            relay_format_addr(&take->listen, b, sizeof b);
            fprintf(stderr, "orbit-relay: --upgrade: --listen %s, but the running relay listens on %s\n", a, b);
            return -EINVAL;
        }
        rf->opts.listen = take->listen;
        for (; n < take->n && n < RELAY_STATS_SLOTS / 2; n++)
            rf->lfds[n] = take->fds[n];
        take->n = 0;   /* they are the fleet's now */
        if (rf->opts.workers < n) {
            fprintf(stderr, "orbit-relay: --upgrade: %d workers, one for each of the running relay's listeners\n", n);
            rf->opts.workers = n;
        }
    }
    for (int i = n; i < rf->opts.workers; i++) {
        rf->lfds[i] = relay_listen_socket(&rf->opts.listen, true);
        if (rf->lfds[i] < 0) {
            fprintf(stderr, "orbit-relay: listen: %s\n", strerror(-rf->lfds[i]));
            return rf->lfds[i];
        }
        socklen_t len = sizeof rf->opts.listen;   /* port 0: the others join the first one's port */
        getsockname(rf->lfds[i], (struct sockaddr *)&rf->opts.listen, &len);
    }
    return 0;
}

int sup_start(struct sup_fleet *rf, const struct relay_opts *o, struct handover_take *take)
{
    memset(rf, 0, sizeof *rf);
    rf->opts = *o;
    rf->ready_rd = rf->ready_wr = -1;
    for (int i = 0; i < RELAY_STATS_SLOTS; i++)
        rf->lfds[i] = -1;
    int rc = fleet_listeners(rf, take);
    if (rc < 0)
        return rc;
    rc = relay_stats_create(o->fleet, take != NULL, &rf->st);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay: counters: %s\n", strerror(-rc));
        return rc;
    }
    rf->st->supervisor_pid = getpid();
    rf->st->workers = (uint16_t)rf->opts.workers;
    rf->st->upstreams = (uint32_t)o->upstreams;
    relay_format_addr(&o->upstream, rf->st->backend, sizeof rf->st->backend);
    rf->st->listen_port = ntohs(rf->opts.listen.sin_port);
    pin_plan(rf);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    rf->ready_rd = p[0];
    rf->ready_wr = p[1];
    /* A fleet left over by a crashed run: reclaim its dead before anyone joins. In an
     * upgrade the running relay's workers live in it: ours join it at its capacity. */
    struct orbit_fleet *old;
    if (orbit_fleet_observe(o->fleet, &old) == 0) {
        orbit_fleet_reap(old);
        if (take)
            rf->opts.fleet_capacity = orbit_fleet_capacity(old);
        orbit_fleet_leave(old);
    }
    for (int i = 0; i < rf->opts.workers; i++) {
        rc = sup_spawn(rf, i);
        if (rc < 0)
            return rc;
    }
    rc = wait_ready(rf, rf->opts.workers, 15000, true);
    if (rc < 0) {
        fprintf(stderr, "orbit-relay: workers did not start: %s\n",
                rc == -ECHILD ? "a worker exited before it was ready" : orbit_strerror(rc));
        return rc;
    }
    mark_running(rf);
    rc = orbit_fleet_observe(o->fleet, &rf->observer);
    if (rc < 0)
        fprintf(stderr, "orbit-relay: observe %s: %s\n", o->fleet, orbit_strerror(rc));
    return rc;
}

static int worker_index(struct sup_fleet *rf, pid_t pid)
{
    for (int i = 0; i < rf->opts.workers; i++)
        if (rf->pids[i] == pid)
            return i;
    return -1;
}

/*
 * A worker of ours is gone (we reaped it): report its node dead, so its
 * upstreams, leases and streams are reclaimed now whatever else runs. The
 * worker wrote its node and incarnation into its stats slot when it joined;
 * the report only takes the node if it still carries that incarnation, so a
 * reaper daemon reporting the same death is harmless.
 */
static void report_dead_worker(struct sup_fleet *rf, const struct relay_worker_stats *w)
{
    uint64_t inc = STAT_GET(w, incarnation);
    uint32_t node = STAT_GET(w, node);
    if (inc == 0 || node > UINT16_MAX)
        return;   /* it died before joining: nothing of it is in the fleet */
    if (!rf->observer && orbit_fleet_observe(rf->opts.fleet, &rf->observer) < 0)
        return;
    if (orbit_fleet_node_dead(rf->observer, (uint16_t)node, inc) == 0) {
        atomic_fetch_add(&rf->st->death_reports, 1);
        if (rf->opts.self_reap)   /* no reaper daemon: this report is the reclaim */
            atomic_fetch_add(&rf->st->supervisor_reaps, 1);
    }
}

int sup_on_sigchld(struct sup_fleet *rf, pid_t *other, int n_other, int *other_status)
{
    int deaths = 0, status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int i = worker_index(rf, pid);
        if (i < 0) {
            for (int k = 0; k < n_other; k++)
                if (other[k] == pid) {
                    other_status[k] = status;
                    other[k] = -other[k];   /* negative: this child has ended */
                }
            continue;
        }
        struct relay_worker_stats *w = &rf->st->w[rf->slot_of[i]];
        atomic_store(&w->state, WIFSIGNALED(status) ? SLOT_KILLED : SLOT_EXITED);
        rf->pids[i] = 0;
        deaths++;
        atomic_fetch_add(&rf->st->deaths, 1);
        if (rf->opts.report_deaths)
            report_dead_worker(rf, w);
        if (rf->opts.self_reap && rf->observer) {
            int n = orbit_fleet_reap(rf->observer);
            if (n > 0)
                atomic_fetch_add(&rf->st->supervisor_reaps, (uint64_t)n);
        }
        if (!rf->opts.restart && rf->lfds[i] >= 0) {
            close(rf->lfds[i]);   /* nobody will take its queue: new connections go elsewhere */
            rf->lfds[i] = -1;
        }
        if (rf->opts.restart && sup_spawn(rf, i) == 0) {
            atomic_fetch_add(&rf->st->restarts, 1);
            if (wait_ready(rf, 1, 15000, false) == 0)
                mark_running(rf);
        }
    }
    return deaths;
}

/* Waits for pid to exit, up to the deadline, on its pidfd; then SIGKILL. Returns the wait status. */
static int reap_child(pid_t pid, int64_t deadline_ns)
{
    int status = 0;
    int pfd = orb_sys_pidfd_open(pid, 0);
    if (pfd >= 0) {
        int64_t left = (deadline_ns - relay_now_ns()) / 1000000;
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            kill(pid, SIGKILL);
        close(pfd);
    } else if (errno != ESRCH) {
        kill(pid, SIGKILL);
    }
    waitpid(pid, &status, 0);
    return status;
}

void sup_stop(struct sup_fleet *rf, int timeout_ms)
{
    rf->opts.restart = false;
    for (int i = 0; i < rf->opts.workers; i++)
        if (rf->pids[i] > 0)
            kill(rf->pids[i], SIGTERM);
    int64_t end = relay_now_ns() + (int64_t)timeout_ms * 1000000;
    for (int i = 0; i < rf->opts.workers; i++) {
        if (rf->pids[i] <= 0)
            continue;
        int status = reap_child(rf->pids[i], end);
        atomic_store(&rf->st->w[rf->slot_of[i]].state, WIFSIGNALED(status) ? SLOT_KILLED : SLOT_EXITED);
        rf->pids[i] = 0;
    }
    if (rf->observer) {
        orbit_fleet_reap(rf->observer);
        orbit_fleet_leave(rf->observer);
        rf->observer = NULL;
    }
    if (rf->ready_rd >= 0)
        close(rf->ready_rd);
    if (rf->ready_wr >= 0)
        close(rf->ready_wr);
    rf->ready_rd = rf->ready_wr = -1;
    for (int i = 0; i < rf->opts.workers; i++)
        if (rf->lfds[i] >= 0)
            close(rf->lfds[i]);
}

/* Ends another child (backend, reaper, load): SIGTERM, then SIGKILL after timeout_ms. */
int sup_end_child(pid_t pid, int timeout_ms)
{
    if (pid <= 0)
        return 0;
    kill(pid, SIGTERM);
    return reap_child(pid, relay_now_ns() + (int64_t)timeout_ms * 1000000);
}

/* Blocks SIGCHLD, SIGTERM and SIGINT and returns a signalfd for them. */
int sup_signalfd(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* SIGTERM to every worker: a graceful stop (they finish what they hold), none replaced. */
static void fleet_drain(struct sup_fleet *rf)
{
    rf->opts.restart = false;
    for (int i = 0; i < rf->opts.workers; i++)
        if (rf->pids[i] > 0)
            kill(rf->pids[i], SIGTERM);
}

static bool fleet_empty(const struct sup_fleet *rf)
{
    for (int i = 0; i < rf->opts.workers; i++)
        if (rf->pids[i] > 0)
            return false;
    return true;
}

/* The line the relay's users (and tests) read: where it listens. */
static void say_started(const struct sup_fleet *rf, const struct handover_take *take)
{
    char up[64], lis[64], from[48] = "";
    relay_format_addr(&rf->opts.upstream, up, sizeof up);
    relay_format_addr(&rf->opts.listen, lis, sizeof lis);
    if (take)
        snprintf(from, sizeof from, ", took over from pid %d", (int)take->old_pid);
    printf("orbit-relay: fleet %s, %d workers on %s, backend %s (budget %d upstreams)%s%s\n", rf->opts.fleet,
           rf->opts.workers, lis, up, rf->opts.upstreams, rf->opts.self_reap ? ", supervisor reaps" : "", from);
    fflush(stdout);
}

/* Our workers run on the listeners we took: the counters take the fleet's path, and the
 * running relay is told to stop its own. */
static void upgrade_go(struct handover_take *take, const char *fleet)
{
    relay_stats_publish(fleet);
    if (handover_ready(take) < 0) {   /* it is gone already: we serve alone */
        fprintf(stderr, "orbit-relay: pid %d went away before the hand-over\n", (int)take->old_pid);
        close(take->conn);
        take->conn = -1;
    }
}

/* The relay we took over from said DONE (its workers are gone), or went away. */
static void predecessor_done(struct handover_take *take, bool quiet)
{
    pid_t pid = take->old_pid;
    int rc = handover_wait_done(take, 0);
    if (!quiet || rc < 0)
        fprintf(rc < 0 ? stderr : stdout, rc == 0 ? "orbit-relay: pid %d handed over and exited\n"
                                                  : "orbit-relay: pid %d went away during the hand-over\n", (int)pid);
    fflush(stdout);
}

/* Signals, a successor and a predecessor until SIGTERM, SIGINT, or our hand-over ends.
 * Returns whether a successor took over (then the fleet and the counters are its). */
static bool supervise(struct sup_fleet *rf, struct handover_server *hs, struct handover_take *take, int sfd)
{
    for (;;) {
        struct pollfd p[4] = { { .fd = sfd, .events = POLLIN } };
        int n = 1, at_take = -1;
        if (take->conn >= 0) {
            at_take = n;
            p[n++] = (struct pollfd){ .fd = take->conn, .events = POLLIN };
        }
        int at_hs = n;
        n += handover_fds(hs, p + n);
        if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
            return hs->draining;
        if (at_take >= 0 && p[at_take].revents)
            predecessor_done(take, rf->opts.quiet);
        struct handover_offer offer = { .fleet = rf->opts.fleet, .listen = &rf->opts.listen, .lfds = rf->lfds,
                                        .n_lfds = rf->opts.workers };
        if (handover_on_poll(hs, &offer, p + at_hs, n - at_hs) == HANDOVER_DRAIN) {
            notify_main_pid(hs->peer);   /* the successor is the service now (systemd) */
            fleet_drain(rf);
        }
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == sizeof si) {
            if (si.ssi_signo != SIGCHLD)
                return hs->draining;
            if (sup_on_sigchld(rf, NULL, 0, NULL) > 0 && !rf->opts.quiet && !hs->draining) {
                printf("orbit-relay: a worker died; %s\n", rf->opts.restart ? "replaced" : "not replaced");
                fflush(stdout);
            }
            if (hs->draining && fleet_empty(rf)) {
                handover_done(hs);
                return true;
            }
        }
    }
}

/*
 * orbit-relay --fleet NAME ...: run the fleet until SIGTERM or SIGINT, or until
 * a successor (orbit-relay --upgrade) took over; with --upgrade, take over
 * from the relay running the fleet first.
 */
int sup_run(const struct relay_opts *o)
{
    signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not end the supervisor */
    int sfd = sup_signalfd();
    struct handover_take take = { .conn = -1 };
    if (o->upgrade && handover_take(o->control, o->fleet, &take) < 0) {
        close(sfd);
        return 1;
    }
    struct sup_fleet rf;
    if (sup_start(&rf, o, o->upgrade ? &take : NULL) < 0) {
        sup_stop(&rf, 2000);
        for (int i = 0; i < take.n; i++)
            close(take.fds[i]);
        if (o->upgrade)   /* the running relay carries on as it was */
            relay_stats_unlink(o->fleet, true);
        if (take.conn >= 0)
            close(take.conn);
        close(sfd);
        return 1;
    }
    if (o->upgrade)
        upgrade_go(&take, o->fleet);
    say_started(&rf, o->upgrade ? &take : NULL);
    notify_ready(getpid());   /* under systemd (Type=notify): running, and the main process */
    struct handover_server hs = { .lfd = -1, .conn = -1 };
    int rc = o->control ? handover_serve(&hs, o->control) : 0;
    if (rc < 0)
        fprintf(stderr, "orbit-relay: control socket %s: %s (no upgrade can take over from this relay)\n",
                o->control, strerror(-rc));
    bool handed_over = supervise(&rf, &hs, &take, sfd);
    sup_stop(&rf, o->drain_timeout_ms + 2000);
    handover_unserve(&hs);
    if (take.conn >= 0)
        close(take.conn);
    relay_stats_unmap(rf.st);
    if (!handed_over) {
        relay_stats_unlink(o->fleet, false);
        orbit_fleet_unlink(o->fleet);
    }
    close(sfd);
    return 0;
}
