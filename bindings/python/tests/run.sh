#!/usr/bin/env bash
# The Python binding as a user gets it: pip installs bindings/python into a scratch
# virtual environment over Debian's /usr/bin/python3 (offline: Debian's setuptools), the
# package loads liborbit from an installed prefix, and the suite (unittest) runs against
# it with real processes, the prefix's orbitctl and C helpers built through pkg-config.
#   run.sh PREFIX SOURCE_DIR [-v] [test_module[.Class[.test]] ...]
# Its last line is "N passed, N failed, N skipped"; exit status 0 when every test passed.
#
# As root it runs in a mount namespace of its own, with a fresh /dev/shm and hugetlbfs
# instance: the tests leave dead members unreported on purpose, and an orbit-reaper --all
# of another suite on this host would report them first.
set -euo pipefail
if [ -z "${ORBIT_PY_PRIVATE:-}" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    exec env ORBIT_PY_PRIVATE=1 unshare --mount --propagation private "$0" "$@"
fi
if [ -n "${ORBIT_PY_PRIVATE:-}" ]; then
    mount -t tmpfs -o mode=1777 tmpfs /dev/shm
    hugetlbfs=$(awk '$3 == "hugetlbfs" { print $2; exit }' /proc/mounts)
    [ -z "$hugetlbfs" ] || mount -t hugetlbfs none "$hugetlbfs"
else
    echo "run.sh: not root: fleets share this host's /dev/shm (a reaper of another suite may report our dead)"
fi
prefix=$(cd "$1" && pwd) src=$(cd "$2" && pwd); shift 2
python=/usr/bin/python3
unset LD_LIBRARY_PATH PYTHONPATH

pc=$(find "$prefix" -name orbit.pc | head -1)
[ -n "$pc" ] || { echo "run.sh: no orbit.pc under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir orbit)
export ORBIT_LIBRARY=$libdir/liborbit.so.0 PATH=$prefix/bin:$PATH

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# pip builds in the source folder (build/, *.egg-info): give it a copy.
cp -r "$src/bindings/python" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
# Debian's pip (seen through --system-site-packages) installs into the venv: no ensurepip copy.
"$python" -m venv --without-pip --system-site-packages "$work/venv"
if ! "$work/venv/bin/python" -m pip install --no-index --quiet "$work/src" > "$work/pip.log" 2>&1; then
    cat "$work/pip.log"; echo "run.sh: pip install bindings/python failed" >&2; exit 1
fi
cd "$work"   # not the source folder: the package comes from the environment pip installed it in
"$work/venv/bin/python" -c 'import orbit, sys; print("orbit %s from %s, liborbit %s from %s" % (
    orbit.__version__, orbit.__file__, orbit.library_version(), orbit.library_path()))'
PYTHONPATH=$src/bindings/python/tests "$work/venv/bin/python" -m runner "$@"
