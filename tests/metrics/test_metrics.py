#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""orbitctl metrics and orbit-reaper --metrics against a real member's known work.

    test_metrics.py MODE --orbitctl BIN --reaper BIN --member BIN --hostile BIN

counts    orbitctl metrics reports exactly the member's counts, per node while it
          lives and in the totals after kill -9 and orbitctl reap; every name is
          one the format takes, counters end in _total; bad arguments are refused
promtool  promtool check metrics passes on that output (77: promtool absent)
http      the reaper's GET /metrics: the same counts, before and after a death it
          reports itself; 404, 405, HEAD, a slow client; bad HOST:PORT exits 2
scrape    a real Prometheus scrapes the reaper; PromQL over its HTTP API returns
          the counts (77: prometheus absent)
slowloris the reaper's /metrics answers a scrape in under 100 ms (median of five;
          none past 1 s) while four clients send their requests a byte at a time,
          and while a fleet it serves is half-created (its creator holds it, never
          publishes: hostile_fleet plant); 40 silent clients do not lock a scrape out

Every wait is bounded (30 s at most); every process started here is stopped by
its pid.
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROUNDS = 37
WAIT_S = 30
NAME_RE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
started = []          # processes to stop at exit, by pid
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print('FAIL:', what, flush=True)
    return ok


def fatal(what):
    print('FATAL:', what, flush=True)
    stop_all()
    sys.exit(1)


def stop(proc, sig=signal.SIGTERM, wait_s=15):
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(wait_s)
    return proc.returncode


def stop_all():
    for p in reversed(started):
        stop(p, signal.SIGKILL, 10)


# ---- the exposition ------------------------------------------------------------------------

def unescape(v):
    return re.sub(r'\\(.)', lambda m: '\n' if m.group(1) == 'n' else m.group(1), v)


def parse(text):
    """{(name, frozenset(labels)): value}, {family: type}; lints as it goes."""
    samples, types, order, seen_done = {}, {}, [], set()
    current = None
    for line in text.splitlines():
        if line.startswith('# HELP ') or line.startswith('# TYPE '):
            parts = line.split(' ', 3)
            fam = parts[2]
            check(NAME_RE.match(fam) is not None, f'metric name {fam!r} matches {NAME_RE.pattern}')
            if line.startswith('# TYPE '):
                check(fam not in types, f'one TYPE line for {fam}')
                types[fam] = parts[3]
                if parts[3] == 'counter':
                    check(fam.endswith('_total'), f'counter {fam} ends in _total')
                else:
                    check(not fam.endswith('_total'), f'{parts[3]} {fam} does not end in _total')
            if current != fam:
                check(fam not in seen_done, f'family {fam} is in one piece')
                if current:
                    seen_done.add(current)
                current = fam
            continue
        if not line or line.startswith('#'):
            continue
        m = SAMPLE_RE.match(line)
        if not check(m is not None, f'sample line parses: {line!r}'):
            continue
        name, lab, value = m.group(1), m.group(2) or '', m.group(3)
        fam = name
        if types.get(current) == 'histogram':
            for suffix in ('_bucket', '_sum', '_count'):
                if name == current + suffix:
                    fam = current
        check(fam == current, f'sample {name} follows its own TYPE line (under {current})')
        labels = {k: unescape(v) for k, v, _ in LABEL_RE.findall(lab[1:-1])} if lab else {}
        key = (name, frozenset(labels.items()))
        check(key not in samples, f'one sample per series: {line}')
        samples[key] = float(value)
    return samples, types


def value(samples, name, **labels):
    """The sample with exactly these labels; a fleet's series are of its generation 1 unless said."""
    if 'fleet' in labels:
        labels.setdefault('generation', '1')
    return samples.get((name, frozenset(labels.items())))


def series(samples, name, **subset):
    return [(dict(k[1]), v) for k, v in samples.items()
            if k[0] == name and set(subset.items()) <= set(k[1])]


# ---- what the member did (metrics_member.c) -------------------------------------------------

KINDS = {'pool': '247', 'streams': '246', 'admission': '245', 'arena': '244'}


def expected_counters(r):
    return {
        ('pool', 'reservations'): r + 4, ('pool', 'accepts'): r + 1, ('pool', 'completions'): r,
        ('pool', 'busy_refusals'): 2, ('pool', 'stale_refusals'): 0, ('pool', 'creation_claims'): 1,
        ('streams', 'written_bytes'): 100 * r + 1000 + 4096, ('streams', 'read_bytes'): 100 * r,
        ('streams', 'frames_written'): r, ('streams', 'frames_read'): r, ('streams', 'resets'): 0,
        ('streams', 'created'): 1, ('streams', 'opened'): 1,
        ('admission', 'claims'): r + 1, ('admission', 'releases'): r, ('admission', 'deferred_refusals'): 1,
        ('admission', 'rejected_refusals'): 1, ('admission', 'skipped_refusals'): 0,
        ('arena', 'chunks_reserved'): r + 2, ('arena', 'chunks_committed'): r + 2,
        ('arena', 'chunks_consumed'): r, ('arena', 'chunks_released'): r,
        ('arena', 'committed_bytes'): 100 * r + 3000, ('arena', 'consumed_bytes'): 100 * r,
        ('arena', 'full_refusals'): 0,
    }


def check_counters(samples, fleet, node, where):
    """Totals always; with node, the per-node family too (the same counts: one member did it all)."""
    for (table, counter), want in expected_counters(ROUNDS).items():
        labels = dict(fleet=fleet, table=table, kind=KINDS[table])
        got = value(samples, f'orbit_{table}_{counter}_total', **labels)
        check(got == want, f'{where}: orbit_{table}_{counter}_total = {got}, want {want}')
        if node is not None:
            got = value(samples, f'orbit_{table}_node_{counter}_total', node=node, **labels)
            check(got == want, f'{where}: orbit_{table}_node_{counter}_total{{node={node}}} = {got}, want {want}')


def check_held(samples, fleet, node, where):
    """The gauges of what the living member holds."""
    t = lambda table: dict(fleet=fleet, table=table, kind=KINDS[table])
    want = [
        ('orbit_fleet_up', dict(fleet=fleet), 1), ('orbit_fleet_live_members', dict(fleet=fleet), 1),
        ('orbit_fleet_nodes', dict(fleet=fleet, state='live'), 1),
        ('orbit_fleet_nodes', dict(fleet=fleet, state='dead'), 0),
        ('orbit_fleet_node_up', dict(fleet=fleet, node=node), 1),
        ('orbit_fleet_deaths_reported_total', dict(fleet=fleet), 0),
        ('orbit_pool_capacity_units', t('pool'), 4), ('orbit_pool_reserved_units', t('pool'), 3),
        ('orbit_pool_active_units', t('pool'), 1), ('orbit_pool_resources', t('pool'), 1),
        ('orbit_streams_live', t('streams'), 1), ('orbit_streams_queued_bytes', t('streams'), 5096),
        ('orbit_streams_full_rings', t('streams'), 1), ('orbit_streams_ring_fill_max_ratio', t('streams'), 1),
        ('orbit_streams_ring_capacity_bytes', t('streams'), 4096),
        ('orbit_admission_live_claims', t('admission'), 1),
        ('orbit_admission_domain_used_units', dict(t('admission'), domain='7'), 3),
        ('orbit_admission_domain_free_units', dict(t('admission'), domain='7'), 7),
        ('orbit_admission_domain_capacity_units', dict(t('admission'), domain='7'), 10),
        ('orbit_arena_lane_slots', dict(t('arena'), node=node, state='live'), 4),
        ('orbit_arena_lane_slots', dict(t('arena'), node=node, state='free'), 60),
        ('orbit_arena_lane_chunks', dict(t('arena'), node=node), 2),
    ]
    for name, labels, w in want:
        got = value(samples, name, **labels)
        check(got == w, f'{where}: {name}{labels} = {got}, want {w}')


def check_reported(samples, fleet, where):
    """After the member's death was reported: totals kept, its node's series gone, one death."""
    check_counters(samples, fleet, None, where)
    node_series = [k for k in samples if '_node_' in k[0] and k[0].endswith('_total')
                   and ('fleet', fleet) in k[1]]
    check(node_series == [], f'{where}: no per-node counter series once the node is reported: {node_series[:3]}')
    for name, labels, w in [
            ('orbit_fleet_deaths_reported_total', dict(fleet=fleet), 1),
            ('orbit_fleet_reclaim_seconds_count', dict(fleet=fleet), 1),
            ('orbit_fleet_reclaim_seconds_bucket', dict(fleet=fleet, le='+Inf'), 1),
            ('orbit_fleet_nodes', dict(fleet=fleet, state='live'), 0),
            ('orbit_fleet_nodes', dict(fleet=fleet, state='dead'), 0),
            ('orbit_pool_reserved_units', dict(fleet=fleet, table='pool', kind='247'), 0),
            ('orbit_admission_domain_used_units', dict(fleet=fleet, table='admission', kind='245', domain='7'), 0),
            ('orbit_streams_live', dict(fleet=fleet, table='streams', kind='246'), 0)]:
        got = value(samples, name, **labels)
        check(got == w, f'{where}: {name}{labels} = {got}, want {w}')


# ---- processes -----------------------------------------------------------------------------

def readline(proc, what):
    """A line of proc's stdout within WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    buf = b''
    while not buf.endswith(b'\n'):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            fatal(f'no line from {what} within {WAIT_S} s (got {buf!r})')
        c = os.read(proc.stdout.fileno(), 1)
        if not c:
            fatal(f'{what} closed its output (exit {proc.poll()}): {buf!r}')
        buf += c
    return buf.decode()


def start_member(args, fleet):
    p = subprocess.Popen([args.member, fleet, str(ROUNDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(p)
    line = readline(p, 'metrics_member')
    m = re.match(r'ready node=(\d+) pid=(\d+)', line)
    if not m:
        fatal(f'metrics_member: {line!r}')
    return p, m.group(1)


def kill9(proc):
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(WAIT_S)


def orbitctl(args, *argv, want_rc=0):
    r = subprocess.run([args.orbitctl, *argv], capture_output=True, text=True, timeout=WAIT_S)
    if want_rc is not None:
        check(r.returncode == want_rc, f'orbitctl {" ".join(argv)}: exit {r.returncode}, want {want_rc}: '
                                       f'{r.stderr.strip()}')
    return r


def metrics(args, fleet, where):
    r = orbitctl(args, 'metrics', fleet)
    samples, _ = parse(r.stdout)
    return samples


def fleet_name(tag):
    return f't-{tag}-{os.getpid()}-{int.from_bytes(os.urandom(3), "big"):06x}'


def counters_only(samples, fleet):
    return {k: v for k, v in samples.items() if k[0].endswith('_total') and ('fleet', fleet) in k[1]}


# ---- modes ---------------------------------------------------------------------------------

def mode_counts(args):
    fleet = fleet_name('metrics')
    member, node = start_member(args, fleet)
    live = metrics(args, fleet, 'live')
    check_counters(live, fleet, node, 'live')
    check_held(live, fleet, node, 'live')
    check(value(live, 'orbit_fleet_node_pid', fleet=fleet, node=node) == member.pid, 'node pid is the member')
    info = series(live, 'orbit_fleet_generation_info', fleet=fleet)
    check(len(info) == 1 and info[0][1] == 1 and info[0][0]['generation'] == '1' and
          info[0][0]['readable'] == 'true' and re.fullmatch(r'\d+\.\d+\.\d+', info[0][0]['version']),
          f'one generation, of this library, said so: {info}')
    again = metrics(args, fleet, 'again')
    check(counters_only(again, fleet) == counters_only(live, fleet), 'reading the counters changes none of them')

    kill9(member)
    dead = metrics(args, fleet, 'dead, not reported')
    check_counters(dead, fleet, node, 'dead, not reported')
    check(value(dead, 'orbit_fleet_nodes', fleet=fleet, state='dead') == 1, 'a dead node not reported shows')
    check(value(dead, 'orbit_fleet_node_up', fleet=fleet, node=node) == 0, 'its node_up is 0')
    r = orbitctl(args, 'reap', fleet)
    check('1 dead node' in r.stdout, f'orbitctl reap reported one death: {r.stdout!r}')
    check_reported(metrics(args, fleet, 'reported'), fleet, 'reported')

    # The command line: a missing fleet, a bad name, --json.
    gone = fleet_name('absent')
    r = orbitctl(args, 'metrics', fleet, gone, want_rc=1)
    s, _ = parse(r.stdout)
    check(value(s, 'orbit_fleet_up', fleet=gone) == 0 and value(s, 'orbit_fleet_up', fleet=fleet) == 1,
          'a missing fleet is up 0 beside one that is up 1')
    check(r.stderr.strip() == f'orbitctl: {gone}: no such fleet', f'missing fleet named on stderr: {r.stderr!r}')
    r = orbitctl(args, 'metrics', 'bad/name', want_rc=2)
    check(r.stdout == '' and len(r.stderr.splitlines()) == 1, f'a bad name: one line: {r.stderr!r}')
    orbitctl(args, '--json', 'metrics', fleet, want_rc=2)
    r = orbitctl(args, 'metrics')   # every fleet on the host: ours is among them
    check(value(parse(r.stdout)[0], 'orbit_fleet_up', fleet=fleet) == 1, 'metrics with no FLEET lists ours')
    orbitctl(args, 'unlink', fleet)


def promtool_check(text, where):
    r = subprocess.run(['promtool', 'check', 'metrics'], input=text, capture_output=True, text=True,
                       timeout=WAIT_S)
    check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
          f'promtool check metrics ({where}): exit {r.returncode}: {r.stdout}{r.stderr}')


def check_docs(args, types):
    """docs/operations.md: every family served is in its table (and none it lists is missing);
    its scrape configuration and alert rules pass promtool."""
    with open(args.docs) as f:
        doc = f.read()
    section = doc[doc.index('## Monitoring'):doc.index('## Recovering a fleet')]
    rows = [line.split('|')[1] for line in section.splitlines() if line.startswith('| `orbit_')]
    listed = {name for row in rows for name in re.findall(r'`(orbit_[a-z_]+)`', row)}
    served = {t for t in types if not re.match(r'orbit_[a-z]+_node_.*_total$', t)}   # each has its _node_ twin
    check(served - listed == set(), f'families served but not in docs/operations.md: {sorted(served - listed)}')
    check(listed - served == set(), f'families in docs/operations.md not served: {sorted(listed - served)}')
    blocks = re.findall(r'```yaml\n(.*?)```', section, re.S)
    check(len(blocks) == 2, f'docs/operations.md: a scrape configuration and a rule file ({len(blocks)} blocks)')
    with tempfile.TemporaryDirectory(prefix='orbit-docs-') as tmp:
        rules, config = os.path.join(tmp, 'rules.yml'), os.path.join(tmp, 'prometheus.yml')
        with open(rules, 'w') as f:
            f.write(blocks[-1])
        with open(config, 'w') as f:
            f.write(f'rule_files: ["{rules}"]\n' + blocks[0])
        for cmd in (['promtool', 'check', 'rules', rules], ['promtool', 'check', 'config', config]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=WAIT_S)
            check(r.returncode == 0, f'{" ".join(cmd[:3])} on the docs: {r.stdout}{r.stderr}')


def plant(args, fleet):
    """A fleet left half-created by a live creator (hostile_fleet plant): never published."""
    p = subprocess.Popen([args.hostile, 'plant', fleet], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(p)
    line = readline(p, 'hostile_fleet plant')
    if not line.startswith('ready planted'):
        fatal(f'hostile_fleet: {line!r}')
    return p


def wait_quarantine(reaper, fleet):
    """The reaper's quarantine line for fleet (it is still being created after 1 s: a fault)."""
    while True:
        line = json.loads(readline(reaper, 'orbit-reaper'))
        if line.get('event') == 'quarantine' and line.get('fleet') == fleet:
            check(line.get('reason') == 'fault' and line.get('error') == 'would block',
                  f'the half-created fleet is quarantined as a fault that would block: {line}')
            return line


def mode_promtool(args):
    if not shutil.which('promtool'):
        print('SKIP: promtool is not installed (Debian package prometheus)')
        sys.exit(77)
    fleet = fleet_name('promtool')
    member, _ = start_member(args, fleet)
    planted = fleet_name('planted')
    planter = plant(args, planted)
    reaper, host, port = start_reaper(args, '--fleet', fleet, '--fleet', planted, '--backend', 'pidfd',
                                      '--metrics', '127.0.0.1:0')
    wait_quarantine(reaper, planted)   # every family served, orbit_reaper_quarantined too
    _, headers, body = http(host, port, b'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n')
    samples = parse(body.decode())[0]
    check(value(samples, 'orbit_reaper_quarantined', fleet=planted, reason='fault') == 1 and
          value(samples, 'orbit_fleet_up', fleet=planted) == 0, 'the quarantined fleet is served as down')
    stop(planter)
    orbitctl(args, 'unlink', planted, want_rc=None)
    promtool_check(body.decode(), 'the reaper\'s /metrics')
    check_docs(args, parse(body.decode())[1])
    stop(reaper)
    promtool_check(orbitctl(args, 'metrics', fleet).stdout, 'a live member')
    kill9(member)
    promtool_check(orbitctl(args, 'metrics', fleet).stdout, 'dead, not reported')
    orbitctl(args, 'reap', fleet)
    promtool_check(orbitctl(args, 'metrics', fleet).stdout, 'reported')
    promtool_check(orbitctl(args, 'metrics', want_rc=None).stdout, 'every fleet on the host')
    orbitctl(args, 'unlink', fleet)


def start_reaper(args, *argv):
    p = subprocess.Popen([args.reaper, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    started.append(p)
    start = json.loads(readline(p, 'orbit-reaper'))
    if start.get('event') != 'start' or not start.get('metrics'):
        fatal(f'orbit-reaper start line: {start}')
    host, port = start['metrics'].rsplit(':', 1)
    return p, host, int(port)


def http(host, port, raw, timeout=10):
    """Send raw bytes, read to EOF: (status line, headers dict, body bytes)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(raw)
        data = b''
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b'\r\n\r\n')
    lines = head.decode().split('\r\n')
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(':', 1) for l in lines[1:] if ':' in l)}
    return lines[0], headers, body


def get_metrics(host, port):
    status, headers, body = http(host, port, b'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n')
    check(status == 'HTTP/1.1 200 OK', f'GET /metrics: {status}')
    check(headers.get('content-type') == 'text/plain; version=0.0.4; charset=utf-8',
          f'Content-Type: {headers.get("content-type")}')
    check(headers.get('content-length') == str(len(body)), 'Content-Length matches the body')
    return parse(body.decode())[0]


def poll(what, fn):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    check(False, f'{what} within {WAIT_S} s')
    return None


def check_http_errors(args, host, port):
    status, headers, _ = http(host, port, b'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n')
    check(status.startswith('HTTP/1.1 405') and headers.get('allow') == 'GET, HEAD', f'POST: {status} {headers}')
    status, _, _ = http(host, port, b'GET /other HTTP/1.1\r\nHost: x\r\n\r\n')
    check(status.startswith('HTTP/1.1 404'), f'GET /other: {status}')
    status, _, _ = http(host, port, b'GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n')
    check(status.startswith('HTTP/1.1 404'), f'GET /metricsx: {status}')
    status, _, _ = http(host, port, b'nonsense\r\n\r\n')
    check(status.startswith('HTTP/1.1 400'), f'a garbled request: {status}')
    status, headers, body = http(host, port, b'HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n')
    check(status == 'HTTP/1.1 200 OK' and body == b'' and int(headers.get('content-length', 0)) > 0,
          f'HEAD: {status}, {len(body)} body bytes')
    status, _, _ = http(host, port, b'GET /metrics?x=1 HTTP/1.0\r\n\r\n')
    check(status == 'HTTP/1.1 200 OK', f'GET /metrics?query, HTTP/1.0: {status}')
    # A client that connects and sends nothing holds its own slot, no one else's: a scrape beside it
    # answers at once, and it is cut at its head deadline (3 s).
    slow = socket.create_connection((host, port), timeout=10)
    t0 = time.monotonic()
    get_metrics(host, port)
    took = time.monotonic() - t0
    check(took < 1, f'a scrape beside a silent client answered in {took:.1f} s (bound 1 s)')
    slow.settimeout(8)
    check(slow.recv(1) == b'', 'the silent client was disconnected')
    cut = time.monotonic() - t0
    check(2.5 < cut < 6, f'the silent client was cut after {cut:.1f} s (its head deadline is 3 s)')
    slow.close()


def mode_http(args):
    fleet = fleet_name('reaperm')
    member, node = start_member(args, fleet)
    reaper, host, port = start_reaper(args, '--fleet', fleet, '--backend', 'pidfd', '--interval', '10',
                                      '--metrics', '127.0.0.1:0')
    check(host == '127.0.0.1' and port > 0, f'the start line names the address: {host}:{port}')
    live = get_metrics(host, port)
    check_counters(live, fleet, node, 'reaper, live')
    check_held(live, fleet, node, 'reaper, live')
    ctl = metrics(args, fleet, 'orbitctl beside the reaper')
    check(counters_only(ctl, fleet) == counters_only(live, fleet), 'the reaper serves what orbitctl prints')
    check(value(live, 'orbit_reaper_info', backend='pidfd') == 1, 'orbit_reaper_info names the backend')
    check_http_errors(args, host, port)

    kill9(member)   # the reaper reports this death itself
    # The fleet's count moves inside the report, the reaper's own when the report returns: both, in time.
    reported = lambda s: (value(s, 'orbit_fleet_deaths_reported_total', fleet=fleet) == 1 and
                          value(s, 'orbit_reaper_deaths_total') == 1)
    after = poll('the reaper reported the death (fleet and reaper counts)',
                 lambda: (lambda s: s if reported(s) else None)(get_metrics(host, port)))
    if after:
        check_reported(after, fleet, 'reaper, reported')
    check(stop(reaper) == 0, 'orbit-reaper stops cleanly on SIGTERM with its server running')

    # --all: every fleet there is, ours included.
    reaper, host, port = start_reaper(args, '--all', '--backend', 'pidfd', '-m', '[::1]:0') \
        if socket.has_ipv6 and ipv6_loopback() else start_reaper(args, '--all', '--backend', 'pidfd', '-m', ':0')
    check(value(get_metrics(host.strip('[]'), port), 'orbit_fleet_up', fleet=fleet) == 1, '--all serves our fleet')
    # Another reaper on a port taken: exit 1, one line.
    r = subprocess.run([args.reaper, '--all', '--backend', 'pidfd', '-m', f'{host}:{port}'], capture_output=True,
                       text=True, timeout=WAIT_S)
    check(r.returncode == 1 and 'cannot listen' in r.stderr, f'a port in use: exit {r.returncode}: {r.stderr!r}')
    stop(reaper)
    for bad in ['9464', '127.0.0.1:', '127.0.0.1:65536', '127.0.0.1:http', '::1:9464', 'no.such.host.invalid:80',
                '[::1:80']:
        r = subprocess.run([args.reaper, '--all', '--metrics', bad], capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 2 and r.stderr.startswith(f"orbit-reaper: bad --metrics '{bad}': ")
              and len(r.stderr.splitlines()) == 1, f'--metrics {bad}: exit {r.returncode}: {r.stderr!r}')
    orbitctl(args, 'unlink', fleet)


def slowloris(host, port, n):
    """n clients that send a request head one byte at a time and never finish it."""
    socks = []
    for _ in range(n):
        c = socket.create_connection((host, port), timeout=10)
        c.sendall(b'G')
        socks.append(c)
    return socks


def drip(socks, rest=b'ET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: '):
    """One more byte from each slow client (the head never ends)."""
    for c in socks:
        try:
            c.sendall(rest[:1] if rest else b'a')
        except OSError:
            pass


def timed_scrape(host, port):
    t0 = time.monotonic()
    samples = get_metrics(host, port)
    return time.monotonic() - t0, samples


def mode_slowloris(args):
    fleet = fleet_name('loris')
    member, node = start_member(args, fleet)
    planted = fleet_name('lorisplant')
    planter = plant(args, planted)
    reaper, host, port = start_reaper(args, '--fleet', fleet, '--fleet', planted, '--backend', 'pidfd',
                                      '--metrics', '127.0.0.1:0')
    slow = slowloris(host, port, 4)
    took = []
    for i in range(5):
        drip(slow)
        t, samples = timed_scrape(host, port)
        took.append(t)
        if i == 0:
            check(value(samples, 'orbit_fleet_up', fleet=fleet) == 1, 'the live fleet is served')
            check(value(samples, 'orbit_fleet_up', fleet=planted) == 0,
                  'the half-created fleet is served as down, not waited for')
            check_counters(samples, fleet, node, 'beside four slow clients')
        time.sleep(0.05)
    took.sort()
    print(f'scrapes beside four slow clients and a half-created fleet: median {took[2] * 1000:.1f} ms, '
          f'max {took[-1] * 1000:.1f} ms')
    check(took[2] < 0.1, f'a scrape beside four slow clients answered in {took[2] * 1000:.1f} ms '
          '(median of five; the bound is 100 ms)')
    check(took[-1] < 1, f'no scrape past 1 s (slowest {took[-1] * 1000:.1f} ms)')
    # Every slot taken by clients that send nothing: the one waiting longest gives way to a scrape.
    silent = [socket.create_connection((host, port), timeout=10) for _ in range(40)]
    t, _ = timed_scrape(host, port)
    check(t < 1, f'a scrape beside 40 silent clients (32 slots) answered in {t * 1000:.1f} ms (bound 1 s)')
    for c in slow + silent:
        c.close()
    check(stop(reaper) == 0, 'orbit-reaper stops cleanly with slow clients connected')
    stop(planter)
    stop(member)
    orbitctl(args, 'unlink', planted, want_rc=None)
    orbitctl(args, 'unlink', fleet, want_rc=None)


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(('::1', 0))
        return True
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def promql(port, query):
    url = f'http://127.0.0.1:{port}/api/v1/query?' + urllib.parse.urlencode({'query': query})
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.load(r)
    except OSError:
        return None
    if doc.get('status') != 'success':
        return None
    return [(res['metric'], float(res['value'][1])) for res in doc['data']['result']]


def one_value(port, query):
    res = promql(port, query)
    return res[0][1] if res and len(res) == 1 else None


def mode_scrape(args):
    if not shutil.which('prometheus'):
        print('SKIP: prometheus is not installed (Debian package prometheus)')
        sys.exit(77)
    fleet = fleet_name('scrape')
    member, node = start_member(args, fleet)
    reaper, host, port = start_reaper(args, '--fleet', fleet, '--interval', '10', '--metrics', '127.0.0.1:0')
    with tempfile.TemporaryDirectory(prefix='orbit-prom-') as tmp:
        config = os.path.join(tmp, 'prometheus.yml')
        with open(config, 'w') as f:
            f.write('global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n'
                    f'  - job_name: orbit\n    static_configs:\n      - targets: ["{host}:{port}"]\n')
        pport = free_port()
        log = open(os.path.join(tmp, 'log'), 'w+')
        prom = subprocess.Popen(['prometheus', f'--config.file={config}', f'--storage.tsdb.path={tmp}/data',
                                 f'--web.listen-address=127.0.0.1:{pport}'], stdout=log, stderr=log)
        started.append(prom)
        try:
            scrape_checks(pport, fleet, node)
            kill9(member)
            reported = poll('Prometheus saw the death report',
                            lambda: one_value(pport, f'orbit_fleet_deaths_reported_total{{fleet="{fleet}"}}') == 1)
            if reported:
                got = one_value(pport, f'orbit_pool_reservations_total{{fleet="{fleet}"}}')
                check(got == ROUNDS + 4, f'after the death: reservations total {got}, want {ROUNDS + 4}')
                poll('the dead node\'s series went stale',
                     lambda: promql(pport, f'orbit_pool_node_reservations_total{{fleet="{fleet}"}}') == [])
        finally:
            check(stop(prom) == 0, 'prometheus stops on SIGTERM')
            if failures:
                log.seek(0)
                print(''.join(log.readlines()[-20:]))
            log.close()
    stop(reaper)
    orbitctl(args, 'unlink', fleet)


def scrape_checks(pport, fleet, node):
    want = ROUNDS + 4
    q = f'orbit_pool_reservations_total{{fleet="{fleet}",table="pool",kind="247"}}'
    poll(f'PromQL {q} == {want}', lambda: one_value(pport, q) == want)
    for query, w in [(f'orbit_pool_node_reservations_total{{fleet="{fleet}",node="{node}"}}', want),
                     (f'orbit_streams_written_bytes_total{{fleet="{fleet}"}}', 100 * ROUNDS + 5096),
                     (f'orbit_admission_claims_total{{fleet="{fleet}"}}', ROUNDS + 1),
                     (f'orbit_arena_chunks_committed_total{{fleet="{fleet}"}}', ROUNDS + 2),
                     (f'orbit_pool_reserved_units{{fleet="{fleet}"}}', 3),
                     ('up{job="orbit"}', 1)]:
        got = one_value(pport, query)
        check(got == w, f'PromQL {query} = {got}, want {w}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('mode', choices=['counts', 'promtool', 'http', 'scrape', 'slowloris'])
    ap.add_argument('--orbitctl', required=True)
    ap.add_argument('--reaper', required=True)
    ap.add_argument('--member', required=True)
    ap.add_argument('--docs', required=True, help='docs/operations.md')
    ap.add_argument('--hostile', required=True, help='hostile_fleet (tests/hostile)')
    args = ap.parse_args()
    try:
        globals()['mode_' + args.mode](args)
    finally:
        stop_all()
    if failures:
        print(f'{len(failures)} check(s) failed')
        sys.exit(1)
    print(f'test_metrics {args.mode}: all checks passed')


if __name__ == '__main__':
    main()
