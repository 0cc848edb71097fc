#!/usr/bin/env python3
"""The floors of the source tree (docs/design.md §11), checked on every quoted include.

    check-layers.py SOURCE_DIR              fail on an include that runs back up
    check-layers.py --self-test SOURCE_DIR  plant such includes in a copy: each must fail

Floors, from the ground: uring/ and lib/sys/ (0), lib/core/ (1), the tables
lib/pool/, lib/stream/, lib/admission/ (2), lib/exchange/ (3). A file may
include its own folder and the floors below it; tables do not include each
other (siblings meet only through the public headers). The public headers
(lib/include/orbit/) include only public headers. tools/ and bpf/ see the
public headers, lib/sys/, their own folder and tools/common/ only.
"""
import os
import re
import shutil
import sys
import tempfile

FLOORS = {'uring': 0, 'lib/sys': 0, 'lib/core': 1,
          'lib/pool': 2, 'lib/stream': 2, 'lib/admission': 2, 'lib/exchange': 3}
LIB_ROOTS = ['lib', 'uring', 'lib/sys']          # meson's lib_inc
TOOL_ROOTS = ['tools/common', 'lib/sys']         # tool_inc, sys_inc
GENERATED = re.compile(r'(\.skel\.h|^vmlinux\.h)$')  # made by bpftool at build time
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SCANNED = ('lib', 'uring', 'tools', 'bpf')


def folder_of(rel):
    """The floor folder a path lies in: the longest FLOORS key that contains it."""
    best = None
    for f in FLOORS:
        if rel == f or rel.startswith(f + '/'):
            if best is None or len(f) > len(best):
                best = f
    return best


def resolve(root, including, name, roots):
    """The tree-relative path a quoted include names, or None."""
    for base in [os.path.dirname(including)] + roots:
        cand = os.path.normpath(os.path.join(base, name))
        if not cand.startswith('..') and os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def sources(root):
    for top in SCANNED:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(('.c', '.h')):
                    yield os.path.relpath(os.path.join(d, f), root)


def check_file(root, rel):
    """The sentences of rel's includes that break the floors."""
    bad = []
    text = open(os.path.join(root, rel), encoding='utf-8', errors='replace').read()
    public = rel.startswith('lib/include/')
    tool = rel.startswith(('tools/', 'bpf/'))
    for name in INCLUDE.findall(text):
        roots = TOOL_ROOTS if tool else LIB_ROOTS
        target = resolve(root, rel, name, roots)
        if target is None:
            if not GENERATED.search(name):
                bad.append(f'{rel}: includes "{name}", which is no file the build can reach')
            continue
        if public:
            if not target.startswith('lib/include/'):
                bad.append(f'{rel}: a public header includes "{name}" ({target}): installed headers see only <orbit/...>')
            continue
        if tool:
            own = rel.split('/')[0] + '/' + rel.split('/')[1] if rel.startswith('tools/') else 'bpf'
            if not (target.startswith(own + '/') or target.startswith(('tools/common/', 'lib/sys/'))):
                bad.append(f'{rel}: includes "{name}" ({target}): tools and bpf see the public headers only')
            continue
        src, dst = folder_of(rel), folder_of(target)
        if src is None or dst is None or src == dst:
            continue
        if FLOORS[dst] > FLOORS[src]:
            bad.append(f'{rel}: includes "{name}" ({target}): {dst}/ is above {src}/ (an arrow running back up)')
        elif FLOORS[dst] == FLOORS[src]:
            bad.append(f'{rel}: includes "{name}" ({target}): {dst}/ is a sibling of {src}/ (tables meet only '
                       'through the public headers)')
    return bad


def check(root):
    bad = []
    n = 0
    for rel in sources(root):
        n += 1
        bad += check_file(root, rel)
    return n, bad


# Each plant: a file, the include added to it, and what the check must say.
PLANTS = [
    ('lib/core/clock.c', 'exchange/exch_layout.h', 'back up'),
    ('lib/pool/table.c', 'stream/stream_layout.h', 'sibling'),
    ('uring/uring.c', 'core/guard.h', 'back up'),
    ('lib/stream/ring.c', 'exchange/exch_layout.h', 'back up'),
    ('lib/include/orbit/fleet.h', 'core/guard.h', 'public header'),
    ('tools/orbitctl/orbitctl.c', '../../lib/core/guard.h', 'public headers only'),
    ('lib/exchange/frame.c', 'no/such/header.h', 'no file'),
]


def self_test(src):
    failed = 0
    with tempfile.TemporaryDirectory(prefix='orbit-layers-') as tmp:
        for top in SCANNED:
            shutil.copytree(os.path.join(src, top), os.path.join(tmp, top),
                            ignore=lambda d, names: [x for x in names if x == 'build'])
        n, bad = check(tmp)
        if bad or n == 0:
            print(f'self-test: the unplanted copy should pass ({n} files): {bad[:3]}')
            return 1
        for rel, inc, says in PLANTS:
            path = os.path.join(tmp, rel)
            clean = open(path).read()
            open(path, 'w').write(clean + f'\n#include "{inc}"\n')
            _, bad = check(tmp)
            open(path, 'w').write(clean)
            hit = [b for b in bad if b.startswith(rel + ':') and inc in b and says in b]
            print(f'{"caught" if hit else "MISSED"}: {rel} including "{inc}"' + (f' -- {hit[0]}' if hit else ''))
            failed += not hit
    print(f'{len(PLANTS) - failed} passed, {failed} failed')
    return 1 if failed else 0


def main(argv):
    if len(argv) == 3 and argv[1] == '--self-test':
        return self_test(argv[2])
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    n, bad = check(argv[1])
    for b in bad:
        print(b)
    print(f'{n} files, {len(bad)} includes against the floors')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
