#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
orbit-relay under systemd (Type=notify), with a fake NOTIFY_SOCKET: a relay
that starts says READY=1 and MAINPID=<its pid>; in an upgrade, the running
relay names the successor MAINPID= once the successor runs (what systemd hears
from the main process with NotifyAccess=main), the successor says READY=1 and
MAINPID=<its own pid> itself, and the relay taken over exits without a word
more: the service's main process is the successor, which serves on. An
abstract socket ('@' names) is written to as well.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

RELAY = os.environ['ORBIT_RELAY_BIN']


def fail(msg):
    print('FAIL: ' + msg, file=sys.stderr)
    sys.exit(1)


def start(args, out, env=None):
    return subprocess.Popen([RELAY] + args, stdout=out, stderr=subprocess.STDOUT, env=env)


def wait_for(path, pattern, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(path, encoding='utf-8', errors='replace') as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        time.sleep(0.05)
    with open(path, encoding='utf-8', errors='replace') as f:
        fail(f"no '{pattern}' in {path}: {f.read()}")


def datagrams(sock, want, timeout=10.0):
    """The datagrams that came, until one holds each line of want (or the timeout)."""
    got, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        sock.settimeout(max(0.05, end - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            break
        lines = set('\n'.join(got).split('\n'))
        if all(w in lines for w in want):
            return got
    fail(f'the notify socket got {got}, not {want}')


def main():
    tmp = tempfile.mkdtemp(prefix='relay-notify.')
    procs = []
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        path = os.path.join(tmp, 'notify')
        sock.bind(path)
        env = dict(os.environ, NOTIFY_SOCKET=path)
        backend_out = open(os.path.join(tmp, 'backend.out'), 'w')
        procs.append(start(['--backend', '127.0.0.1:0'], backend_out))
        backend = wait_for(backend_out.name, r'listening on ([0-9.:]+)').group(1)
        fleet = f't-relay-notify-{os.getpid()}'
        args = ['--fleet', fleet, '--listen', '127.0.0.1:0', '--upstream', backend, '--workers', '2',
                '--control', os.path.join(tmp, 'ctl')]

        a_out = open(os.path.join(tmp, 'a.out'), 'w')
        a = start(args, a_out, env)
        procs.append(a)
        wait_for(a_out.name, 'workers on')
        datagrams(sock, ['READY=1', f'MAINPID={a.pid}'])

        b_out = open(os.path.join(tmp, 'b.out'), 'w')
        b = start(args + ['--upgrade'], b_out, env)
        procs.append(b)
        wait_for(b_out.name, f'took over from pid {a.pid}')
        got = datagrams(sock, ['READY=1', f'MAINPID={b.pid}'])
        if a.wait(timeout=15) != 0:
            fail(f'the relay taken over exited {a.returncode}')
        # Two datagrams name b: a's (it was the main process) and b's own; none names a again.
        named = [g for g in got if f'MAINPID={b.pid}' in g]
        if len(named) < 2:
            try:
                named += [g for g in datagrams(sock, [f'MAINPID={b.pid}'], 5) if f'MAINPID={b.pid}' in g]
            except SystemExit:
                pass
        if len(named) < 2:
            fail(f'the relay taken over did not name its successor: {got}')
        if b.poll() is not None:
            fail(f'the successor exited {b.returncode}')

        # An abstract name ('@...'): a successor of b says the same there.
        sock2 = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        name = f'@orbit-relay-notify-{os.getpid()}'
        sock2.bind('\0' + name[1:])
        c_out = open(os.path.join(tmp, 'c.out'), 'w')
        c = start(args + ['--upgrade'], c_out, dict(os.environ, NOTIFY_SOCKET=name))
        procs.append(c)
        wait_for(c_out.name, f'took over from pid {b.pid}')
        datagrams(sock2, ['READY=1', f'MAINPID={c.pid}'])
        datagrams(sock, [f'MAINPID={c.pid}'])   # b, the main process until then, named c
        if b.wait(timeout=15) != 0:
            fail(f'the second relay taken over exited {b.returncode}')
        c.send_signal(signal.SIGTERM)
        if c.wait(timeout=15) != 0:
            fail(f'the last relay exited {c.returncode}')
        print('notify: ok')
        return 0
    finally:
        # SIGTERM first: a supervisor killed outright would leave its workers running.
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
