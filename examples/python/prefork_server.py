#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A gunicorn-style pre-fork server whose workers share one upstream budget through orbit.

The master opens the listening socket and forks the workers, as gunicorn
does; every worker accepts on that socket and answers each request line
"GET <n>" with the upstream's "pong <n>". The workers share, with no
server in between:

- one upstream-connection budget, the fleet's admission ledger: at most
  BUDGET upstream calls in flight fleet-wide (a claim per call);
- one pool of upstream connections: at most POOL_MAX connections open
  fleet-wide (the pool's creation budget). A worker uses its own
  connection when one is free, else borrows another worker's: it reserves
  the connection's unit and sends the lease and the request over an orbit
  stream to the owner, who accepts the lease, makes the call on its
  connection and answers on the stream.

Mid-run the master kills one worker with -9 while it holds claims and
connections, learns of the death with no reaper (Fleet.wait_node_death),
reports it (Fleet.reap): the dead worker's claims and its registered
connections come back, so the others may claim and dial again, and the
master forks a replacement. The upstream checks both limits on every call;
the clients retry a request whose connection died with the worker.

    python3 examples/python/prefork_server.py [--workers 4] [--requests 400]

Exit 0 when every request was answered, the upstream never saw more than
BUDGET calls or POOL_MAX connections at once, and the fleet's ledger and
pool are empty at the end. Runs in a few seconds; every wait is bounded.
"""

import argparse
import asyncio
import hashlib
import json
import os
import signal
import socket
import sys
import time

import orbit
import orbit.aio

UPSTREAM = 1                      # the admission domain: upstream calls in flight
BUDGET = 2                        # ... fleet-wide
POOL_MAX = 3                      # upstream connections open fleet-wide
# What the pool's connections are good for: any 16-byte digest of it (Key.from_string, where the
# library has orbit_key_from_string, is the one every language derives alike).
KEY = orbit.Key.from_digest(hashlib.blake2b(b"upstream 127.0.0.1", digest_size=16).digest())
WAIT_S = 10


def log(*words):
    print("[%s %d]" % (ROLE, os.getpid()), *words, flush=True)


ROLE = "master"


# ---- the upstream: answers "GET n" with "pong n", and checks the limits ----

def upstream_main(report):
    stats = {"connections": 0, "max_connections": 0, "in_flight": 0, "max_in_flight": 0, "calls": 0}

    async def serve(reader, writer):
        stats["connections"] += 1
        stats["max_connections"] = max(stats["max_connections"], stats["connections"])
        try:
            while line := await reader.readline():
                stats["in_flight"] += 1
                stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
                await asyncio.sleep(0.004)              # the upstream's work
                stats["in_flight"] -= 1
                stats["calls"] += 1
                writer.write(b"pong " + line.split(b" ", 1)[1])
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            stats["connections"] -= 1
            writer.close()

    async def main():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        os.write(report, b"%d\n" % server.sockets[0].getsockname()[1])
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        os.write(report, json.dumps(stats).encode() + b"\n")
    asyncio.run(main())


# ---- a worker ----

class Upstream:
    """One connection to the upstream: one call at a time (its pool capacity is 1)."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    async def call(self, payload):
        self.writer.write(payload + b"\n")
        await self.writer.drain()
        return (await self.reader.readline()).rstrip(b"\n")


class Worker:
    def __init__(self, fleet, port):
        self.fleet, self.port = fleet, port
        self.adm = fleet.admission()
        self.pool = fleet.pool()
        self.streams = fleet.streams()
        self.conns = {}                              # our registered connections by pool Id
        self.calls = {"own": 0, "peer": 0}           # calls on our connections, on a peer's

    async def upstream_call(self, payload):
        """One call within the fleet's budget, on a pooled connection (ours or a peer's)."""
        with await self.adm.claim_async({UPSTREAM: 1}, timeout=WAIT_S):
            while True:
                plan = self.pool.acquire(KEY, max_live=POOL_MAX)
                if plan.kind == "local_reuse":
                    self.calls["own"] += 1
                    with self.pool.accept(plan.lease):
                        return await self.conns[plan.lease.id].call(payload)
                if plan.kind == "remote_reuse":
                    try:
                        answer = await self.remote_call(plan.lease, payload)
                        self.calls["peer"] += 1
                        return answer
                    except (orbit.ResetError, orbit.PeerGoneError, orbit.StaleError):
                        continue                     # the owner died or dropped it: choose again
                if plan.kind == "create":
                    with plan.permit:                # one unit of the fleet's creation budget
                        conn = Upstream(*await asyncio.open_connection("127.0.0.1", self.port))
                        self.conns[self.pool.register(KEY, 1)] = conn
                    continue
                self.pool.watch(KEY, since=plan.version)          # "wait": a unit comes back
                await orbit.aio.readiness(self.pool, timeout=WAIT_S)

    async def remote_call(self, lease, payload):
        """The lease and the request to the connection's owner over a stream; its answer back."""
        ep, ticket = self.streams.create()
        with ep:
            self.streams.offer(ticket, lease.id.node)
            await ep.write_async(bytes(lease) + payload, timeout=WAIT_S)
            ep.finish()
            return await read_to_end(ep)

    async def serve_peers(self):
        """Calls other workers bring us for our connections."""
        while True:
            ticket = await self.streams.wait_offer_async()
            asyncio.get_running_loop().create_task(self.serve_peer(ticket))

    async def serve_peer(self, ticket):
        with self.streams.open(ticket) as ep:
            data = await read_to_end(ep)
            try:
                lease = orbit.Lease.from_bytes(data[:orbit.Lease.SIZE])
                with self.pool.accept(lease):        # exactly once per reservation
                    answer = await self.conns[lease.id].call(data[orbit.Lease.SIZE:])
            except (orbit.Error, KeyError):
                ep.reset()                           # the caller chooses again
                return
            await ep.write_async(answer, timeout=WAIT_S)
            ep.finish()
            await ep.wait_peer_closed_async(timeout=WAIT_S)   # it read everything

    async def serve_client(self, reader, writer):
        try:
            while line := await reader.readline():
                writer.write(await self.upstream_call(line.rstrip(b"\n")) + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def run(self, lsock):
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        server = await asyncio.start_server(self.serve_client, sock=lsock)
        peers = asyncio.get_running_loop().create_task(self.serve_peers())
        await stop.wait()
        server.close()
        peers.cancel()
        for rid, conn in self.conns.items():
            self.pool.unregister(rid)                # leases on it become stale
            conn.writer.close()


async def read_to_end(ep):
    parts = []
    while chunk := await ep.read_async(65536, timeout=WAIT_S):
        parts.append(chunk)
    return b"".join(parts)


def worker_main(fleet_name, lsock, port, report):
    global ROLE
    ROLE = "worker"
    with orbit.Fleet.join(fleet_name, capacity=16) as fleet:   # after fork: a node of its own
        os.write(report, b"%d %d\n" % (fleet.node, fleet.incarnation))
        worker = Worker(fleet, port)
        asyncio.run(worker.run(lsock))
    os.write(report, json.dumps(worker.calls).encode() + b"\n")


# ---- clients ----

def clients_main(addr, requests, report):
    """requests "GET n" over 16 connections; a request whose worker died is sent again."""
    todo = list(range(requests))
    retries = 0

    async def client():
        nonlocal retries
        reader = writer = None
        while todo:
            n = todo.pop()
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(*addr)
                writer.write(b"GET %d\n" % n)
                await writer.drain()
                answer = await asyncio.wait_for(reader.readline(), WAIT_S)
                if not answer:
                    raise ConnectionResetError
                assert answer == b"pong %d\n" % n, answer
                os.write(report, b"ok\n")
            except ConnectionError:
                todo.append(n)
                retries += 1
                reader = writer = None
        if writer is not None:
            writer.close()

    async def main():
        await asyncio.gather(*(client() for _ in range(16)))
    asyncio.run(main())
    os.write(report, b"done %d\n" % retries)


# ---- the master ----

def fork(target, *args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 1
        try:
            target(*args, w)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, os.fdopen(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--requests", type=int, default=400)
    opts = ap.parse_args()
    name = "ex-prefork-%d" % os.getpid()
    fleet = orbit.Fleet.join(name, capacity=16)      # the master is a member: it sets the budget, reaps
    children = []
    try:
        adm, pool = fleet.admission(), fleet.pool()
        adm.set_capacity(UPSTREAM, BUDGET)
        up_pid, up_pipe = fork(upstream_main)
        children.append(up_pid)
        port = int(up_pipe.readline())
        lsock = socket.create_server(("127.0.0.1", 0), backlog=128)
        workers, pipes = {}, {}
        for _ in range(opts.workers):
            pid, pipes[pid] = fork(worker_main, name, lsock, port)
            children.append(pid)
            workers[pid] = tuple(map(int, pipes[pid].readline().split()))   # (node, incarnation)
        log("%d workers, budget %d calls, %d connections, upstream :%d" %
            (opts.workers, BUDGET, POOL_MAX, port))
        cl_pid, cl_pipe = fork(clients_main, lsock.getsockname(), opts.requests)
        children.append(cl_pid)
        for _ in range(opts.requests // 3):
            cl_pipe.readline()

        # Kill -9 the worker holding the most, mid-run.
        deadline = time.monotonic() + WAIT_S
        while True:
            held = {pid: fleet.account(*ni) for pid, ni in workers.items()}
            victim = max(held, key=lambda p: (held[p].admission_claims, held[p].pool_resources))
            if held[victim].admission_claims and held[victim].pool_resources or time.monotonic() > deadline:
                break
            time.sleep(0.001)
        node, inc = workers.pop(victim)
        os.kill(victim, signal.SIGKILL)
        os.waitpid(victim, 0)
        children.remove(victim)
        fleet.wait_node_death(node, inc, timeout=WAIT_S)     # the kernel's lock: no reaper needed
        before = fleet.account(node, inc)                    # what it holds, dead and unreported
        fleet.reap()
        after = fleet.account(node, inc)
        log("killed worker node %d mid-run; its death reported, it gave back %d claim(s) and %d connection(s) "
            "(now %d and %d)" % (node, before.admission_claims, before.pool_resources, after.admission_claims,
                                after.pool_resources))
        pid, pipes[pid] = fork(worker_main, name, lsock, port)   # gunicorn restarts it
        children.append(pid)
        workers[pid] = tuple(map(int, pipes[pid].readline().split()))

        while not (line := cl_pipe.readline()).startswith("done"):
            pass
        retries = int(line.split()[1])
        os.waitpid(cl_pid, 0)
        children.remove(cl_pid)
        for pid in workers:
            os.kill(pid, signal.SIGTERM)
        calls = {"own": 0, "peer": 0}
        for pid in workers:
            for k, v in json.loads(pipes[pid].readline()).items():
                calls[k] += v
            os.waitpid(pid, 0)
            children.remove(pid)
        os.kill(up_pid, signal.SIGTERM)
        stats = json.loads(up_pipe.readline())
        os.waitpid(up_pid, 0)
        children.remove(up_pid)
        left = (adm.domains()[0].used, len(pool.candidates(KEY)), adm.info().live_claims)
        log("%d requests answered (%d sent again after the kill): %d on the worker's own connection, %d on a "
            "peer's through a stream (the living workers' counts)" % (opts.requests, retries, calls["own"],
                                                                     calls["peer"]))
        log("the upstream saw at most %d calls (budget %d) and %d connections (pool %d) at once; left in the "
            "fleet: %d units, %d connections, %d claims" % (stats["max_in_flight"], BUDGET,
                                                            stats["max_connections"], POOL_MAX, *left))
        ok = stats["max_in_flight"] <= BUDGET and stats["max_connections"] <= POOL_MAX and left == (0, 0, 0) \
            and stats["calls"] >= opts.requests
        print("prefork_server: ok" if ok else "prefork_server: FAILED", flush=True)
        return 0 if ok else 1
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        fleet.close()
        orbit.unlink(name)


if __name__ == "__main__":
    sys.exit(main())
