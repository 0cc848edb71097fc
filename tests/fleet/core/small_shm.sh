#!/bin/sh
# SPDX-License-Identifier: MIT
# small_shm.sh SIZE PROGRAM [ARGS...]: run PROGRAM where /dev/shm is a tmpfs of SIZE
# of its own (a private mount namespace, as in a container started with
# --shm-size SIZE) and huge pages are off (ORBIT_HUGETLB_DIR=), so every segment
# lives there. Exit 77 (skipped) where a mount namespace cannot be had (not root).
size=$1
shift
if ! unshare -m true 2>/dev/null; then
    echo "SKIP: no private mount namespace here (unshare -m needs root)"
    exit 77
fi
exec unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs -o "size=$0,mode=1777" tmpfs /dev/shm &&
    ORBIT_HUGETLB_DIR= exec "$@"' "$size" "$@"
