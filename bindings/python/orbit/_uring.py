# SPDX-License-Identifier: MIT
"""A small io_uring for orbit's prep calls, driven by an event loop through an eventfd.

orbit's io_uring prep calls (orbit_admission_prep_wait,
orbit_fleet_prep_wait_node_death, ...) fill a submission queue entry with a
FUTEX_WAIT on a word of the fleet's shared memory; the completion arrives
when the word moves. This ring holds those entries: its completions signal
an eventfd (IORING_REGISTER_EVENTFD), which an asyncio loop watches with
add_reader, so any number of waits need no thread.

Built on the kernel's interface (io_uring_setup(2), io_uring_enter(2),
io_uring_register(2), the mmap'd rings) rather than liburing: liburing's
submission and completion helpers are inline functions a foreign-function
interface cannot call. Used from one thread (the loop's) only.
"""

import ctypes
import os
from ctypes import c_int, c_long, c_size_t, c_uint32, c_uint64, c_void_p

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = c_long
_libc.mmap.restype = c_void_p
_libc.mmap.argtypes = (c_void_p, c_size_t, c_int, c_int, c_int, ctypes.c_int64)
_libc.munmap.argtypes = (c_void_p, c_size_t)

SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register = 425, 426, 427
IORING_OFF_SQ_RING, IORING_OFF_CQ_RING, IORING_OFF_SQES = 0, 0x8000000, 0x10000000
IORING_FEAT_SINGLE_MMAP = 1
IORING_REGISTER_EVENTFD = 4
IORING_OP_ASYNC_CANCEL = 14
PROT_RW, MAP_SHARED, MAP_POPULATE = 3, 1, 0x8000
SQE_BYTES, CQE_BYTES = 64, 16
SQE_USER_DATA = 32   # offsetof(struct io_uring_sqe, user_data)


class _SqOffsets(ctypes.Structure):
    _fields_ = [(n, c_uint32) for n in ("head", "tail", "ring_mask", "ring_entries", "flags", "dropped",
                                         "array", "resv1")] + [("user_addr", c_uint64)]


class _CqOffsets(ctypes.Structure):
    _fields_ = [(n, c_uint32) for n in ("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes",
                                         "flags", "resv1")] + [("user_addr", c_uint64)]


class _Params(ctypes.Structure):
    _fields_ = [(n, c_uint32) for n in ("sq_entries", "cq_entries", "flags", "sq_thread_cpu",
                                         "sq_thread_idle", "features", "wq_fd")] + \
               [("resv", c_uint32 * 3), ("sq_off", _SqOffsets), ("cq_off", _CqOffsets)]


def _os_error(what):
    e = ctypes.get_errno()
    return OSError(e, "%s: %s" % (what, os.strerror(e)))


class Ring:
    """One io_uring whose completions signal an eventfd (Ring.fd).

    prep(fill, user_data) takes the next entry, lets fill(address) write it
    (an orbit prep call: 0 armed, 1 ready now, < 0 an error) and submits it
    when armed; reap() returns the completions [(user_data, res)].
    """

    def __init__(self, entries=256):
        p = _Params()
        fd = _libc.syscall(c_long(SYS_io_uring_setup), c_long(entries), ctypes.byref(p))
        if fd < 0:
            raise _os_error("io_uring_setup")
        self.ring_fd, self._maps = fd, []
        try:
            self._map_rings(p)
            self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            efd = c_int(self.fd)
            if _libc.syscall(c_long(SYS_io_uring_register), c_long(fd), c_long(IORING_REGISTER_EVENTFD),
                             ctypes.byref(efd), c_long(1)) < 0:
                raise _os_error("io_uring_register(EVENTFD)")
        except BaseException:
            self.close()
            raise

    def _map(self, size, offset):
        addr = _libc.mmap(None, size, PROT_RW, MAP_SHARED | MAP_POPULATE, self.ring_fd, offset)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            raise _os_error("mmap of the io_uring")
        self._maps.append((addr, size))
        return addr

    def _map_rings(self, p):
        sq_size = p.sq_off.array + p.sq_entries * 4
        cq_size = p.cq_off.cqes + p.cq_entries * CQE_BYTES
        if p.features & IORING_FEAT_SINGLE_MMAP:
            sq = cq = self._map(max(sq_size, cq_size), IORING_OFF_SQ_RING)
        else:
            sq = self._map(sq_size, IORING_OFF_SQ_RING)
            cq = self._map(cq_size, IORING_OFF_CQ_RING)
        self._sqes = self._map(p.sq_entries * SQE_BYTES, IORING_OFF_SQES)
        u32 = c_uint32.from_address
        self._sq_tail, self._sq_mask = u32(sq + p.sq_off.tail), u32(sq + p.sq_off.ring_mask).value
        self._sq_array = sq + p.sq_off.array
        self._cq_head, self._cq_tail = u32(cq + p.cq_off.head), u32(cq + p.cq_off.tail)
        self._cq_mask, self._cqes = u32(cq + p.cq_off.ring_mask).value, cq + p.cq_off.cqes

    def _next_sqe(self):
        tail = self._sq_tail.value
        index = tail & self._sq_mask
        sqe = self._sqes + index * SQE_BYTES
        ctypes.memset(sqe, 0, SQE_BYTES)
        return tail, index, sqe

    def _submit(self, tail, index, sqe, user_data):
        c_uint64.from_address(sqe + SQE_USER_DATA).value = user_data
        c_uint32.from_address(self._sq_array + index * 4).value = index
        # The kernel reads the tail in io_uring_enter, on this thread: program order publishes the entry.
        self._sq_tail.value = (tail + 1) & 0xffffffff
        while True:
            rc = _libc.syscall(c_long(SYS_io_uring_enter), c_long(self.ring_fd), c_long(1), c_long(0),
                               c_long(0), None, c_long(8))
            if rc >= 0:
                return
            if ctypes.get_errno() not in (4, 11):   # EINTR, EAGAIN: the entry is still queued, try again
                raise _os_error("io_uring_enter")

    def prep(self, fill, user_data):
        """fill(sqe address): 0 submits it as armed, 1 means ready now (nothing submitted);
        returns what fill returned."""
        tail, index, sqe = self._next_sqe()
        rc = fill(sqe)
        if rc == 0:
            self._submit(tail, index, sqe, user_data)
        return rc

    def cancel(self, target, user_data=0):
        """Ask the kernel to cancel the entry whose user_data is target."""
        tail, index, sqe = self._next_sqe()
        ctypes.c_uint8.from_address(sqe).value = IORING_OP_ASYNC_CANCEL
        c_int.from_address(sqe + 4).value = -1
        c_uint64.from_address(sqe + 16).value = target
        self._submit(tail, index, sqe, user_data)

    def reap(self):
        """Drain the eventfd and return every completion as (user_data, res)."""
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass
        out = []
        head = self._cq_head.value
        # Read after the eventfd read: the kernel posts the entries (and moves the tail) before it signals.
        tail = self._cq_tail.value
        while head != tail:
            cqe = self._cqes + (head & self._cq_mask) * CQE_BYTES
            out.append((c_uint64.from_address(cqe).value, c_int.from_address(cqe + 8).value))
            head = (head + 1) & 0xffffffff
        self._cq_head.value = head   # the entries were copied out before the kernel may reuse them
        return out

    def close(self):
        """Cancel everything in flight (closing the ring does) and unmap it."""
        for addr, size in self._maps:
            _libc.munmap(addr, size)
        self._maps = []
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None
        if self.ring_fd is not None:
            os.close(self.ring_fd)
            self.ring_fd = None
