#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
orbit-relay's floors, held against its code. Every file of tools/orbit-relay
stands on a floor below (FLOORS, the layering written down); a file (a .c
with the .h of the same name, or a header alone) may include, and call, only
files on lower floors. The includes are read from the sources, the calls from
the objects' symbols (nm): a name one object needs and another defines is a
call from the first to the second. Every name an object defines globally
starts with its file's prefix (PREFIX). A file not placed fails the check.

    layers.py SOURCE_DIR OBJECT_DIR      (meson passes both; exit 0, or 1 with the violations)
"""
import os
import re
import subprocess
import sys

# Bottom up; files on one floor neither include nor call each other.
FLOORS = [
    # what every floor uses: options, helpers, the counters; the sink a response goes to
    ['relay.h', 'hm_bytes.h', 'sink.h'],
    ['util.c', 'stats.c', 'loop.h', 'modes.h'],
    # the ring loop (loop.h: ring.c below the objects); beside it the HTTP layer
    ['ring.c', 'httpmsg.h', 'http.c'],
    ['loop_obj.c', 'chunked.c', 'hm_fields.h', 'share.c'],
    ['rewrite.c', 'framing.c'],
    ['parse.c'],
    # the proxy: a client's socket, an upstream's state, the streams' frames, ...
    ['conn.c', 'peer.c'],
    ['up_types.h'],
    ['splice.c'],
    ['upstream.c', 'rstream.c'],
    ['ostream.c', 'dispatch.c'],
    ['client.c'],
    # ... the worker on top of it; the other modes beside it
    ['worker.c', 'backend.c', 'load.c', 'stats_show.c', 'uring_check.c', 'handover.c', 'notify.c'],
    # the supervisor, then the binary's entry
    ['supervisor.c'],
    ['demo.c'],
    ['main.c'],
]

PREFIX = {
    'util.c': ('relay_',), 'stats.c': ('relay_stats_',), 'loop_obj.c': ('loop_',), 'ring.c': ('loop_',),
    'http.c': ('http_',), 'chunked.c': ('hm_',), 'rewrite.c': ('hm_',), 'framing.c': ('hm_',),
    'parse.c': ('hm_',), 'share.c': ('share_',), 'conn.c': ('conn_',), 'peer.c': ('peer_',),
    'splice.c': ('splice_',), 'upstream.c': ('up_',), 'rstream.c': ('rs_',), 'ostream.c': ('os_',),
    'dispatch.c': ('disp_',), 'client.c': ('client_',), 'worker.c': ('worker_',), 'backend.c': ('backend_',),
    'load.c': ('load_',), 'stats_show.c': ('stats_',), 'uring_check.c': ('uring_check',),
    'handover.c': ('handover_',), 'notify.c': ('notify_',), 'supervisor.c': ('sup_',), 'demo.c': ('demo_',), 'main.c': ('main',),
}


def room_of(name, files):
    """A .h with a .c of its stem is that .c's room; any other file is its own."""
    stem, ext = os.path.splitext(name)
    if ext == '.h' and stem + '.c' in files:
        return stem + '.c'
    return name


def main():
    src, objdir = sys.argv[1], sys.argv[2]
    files = sorted(f for f in os.listdir(src) if f.endswith(('.c', '.h')))
    floor = {}
    for i, names in enumerate(FLOORS):
        for n in names:
            floor[n] = i
    bad = []
    for f in files:
        if room_of(f, files) not in floor:
            bad.append(f'{f}: on no floor (place it in FLOORS)')
    if bad:
        print('\n'.join(bad))
        return 1

    def check(src_room, dst_room, what):
        if src_room == dst_room:
            return
        if floor[dst_room] >= floor[src_room]:
            bad.append(f'{src_room} (floor {floor[src_room]}) {what} {dst_room} (floor {floor[dst_room]})')

    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for f in files:
        with open(os.path.join(src, f), encoding='utf-8') as fh:
            for inc in include.findall(fh.read()):
                if inc in files:
                    check(room_of(f, files), room_of(inc, files), f'includes {inc} of')

    defined, needed = {}, {}
    objects = [f for f in os.listdir(objdir) if f.endswith('.c.o')]
    for o in objects:
        c = o[:-2]
        if c not in files:
            continue   # tools/common's, built into the same binary
        out = subprocess.run(['nm', '-g', os.path.join(objdir, o)], check=True, capture_output=True,
                             text=True).stdout
        needed[c] = set()
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[-1].startswith('__'):
                continue   # the compiler's and the sanitizers' own (__odr_asan.*, __asan_*)
            if len(parts) == 2 and parts[0] == 'U':
                needed[c].add(parts[1])
            elif len(parts) == 3 and parts[1] in 'TDBRVW':
                defined.setdefault(parts[2], c)
                if not parts[2].startswith(PREFIX.get(c, ('\0',))):
                    bad.append(f'{c}: the global name {parts[2]} lacks its prefix ({", ".join(PREFIX.get(c, ()))})')
    if len(needed) < sum(1 for f in files if f.endswith('.c')):
        missing = sorted(f for f in files if f.endswith('.c') and f not in needed)
        bad.append(f'no object in {objdir} for {", ".join(missing)}')
    for c, names in sorted(needed.items()):
        for n in sorted(names):
            if n in defined:
                check(c, defined[n], f'calls {n} of')

    if bad:
        print('\n'.join(sorted(set(bad))))
        return 1
    print(f'{len(files)} files on {len(FLOORS)} floors: every include and call runs down, '
          f'every global name has its prefix')
    return 0


if __name__ == '__main__':
    sys.exit(main())
