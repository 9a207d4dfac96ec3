"""Host memory for the library's large results, kept once the caller drops them.

A result the library makes on the host (a download, drained pairs, a column
read out of a dask worker) is written once into fresh memory, and fresh
memory costs more to write than memory already touched: the kernel zeroes
and maps each page on first touch (on an H100 host a 256 MiB download takes
15.6 ms into fresh numpy memory, 9.1 ms into memory touched before), and a
host that hands freed memory back to its hypervisor (free page reporting:
this project's CI machine) faults it back at ~1 GB/s. So the blocks of
results the caller has dropped are kept, up to :data:`KEEP_BYTES`, and the
next large result takes one: calls in a loop write into warm memory.

A result is a numpy array whose ``base`` is a :class:`Lease` on its block;
when the last array viewing the lease is gone the block is kept again (the
oldest kept blocks are freed beyond the bound). :func:`trim` frees every
kept block; ``KEEP_BYTES = 0`` (or the environment variable
``CLKERNELS_HOST_CACHE=0``; any other number of bytes sets the bound) keeps
none. A dask worker keeps at most a quarter of its memory limit here too,
and frees all of it under memory pressure (:mod:`..distributed.arena`).
Below :data:`MIN_BYTES` results are numpy's own.

A kept block can also be *registered* with a GPU's driver (:func:`register`,
on devices whose driver pins host memory in place,
``Device.registers_host``): copies from the device into it then run at the
page-locked rate with no staging (an H100: 55 GB/s against 25-36 GB/s
staged). It stays registered while it is kept, and is unregistered when it
is freed.
"""

import collections
import math
import os
import threading
import weakref

import numpy as np

#: results below this are numpy's own arrays
MIN_BYTES = 4 << 20
#: blocks are made in multiples of this (a transparent huge page)
BLOCK = 2 << 20


def _keep_default():
    env = os.environ.get("CLKERNELS_HOST_CACHE")
    if env is not None:
        try:
            return int(env)
        except ValueError:
            raise ValueError(f"CLKERNELS_HOST_CACHE must be a number of bytes, got {env!r}") from None
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 1 << 30
    return min(phys // 16, 4 << 30)


#: bytes of dropped results kept for later ones: a sixteenth of the host's memory, at most 4 GiB
KEEP_BYTES = _keep_default()

class Blocks:
    """Kept blocks (uint8 arrays, whole multiples of :data:`BLOCK`), oldest first;
    its user holds a lock of its own around every call. This module's cache
    of dropped results and a dask worker's arena (:mod:`..distributed.arena`)
    each keep one."""

    def __init__(self):
        self.free = []

    def take(self, nbytes):
        """The smallest kept block that holds ``nbytes`` and is less than
        twice that (taken out), else None."""
        fits = [k for k, b in enumerate(self.free) if nbytes <= b.nbytes < 2 * nbytes + BLOCK]
        return self.free.pop(min(fits, key=lambda k: self.free[k].nbytes)) if fits else None

    def put(self, blocks):
        self.free.extend(blocks)

    def bound(self, keep):
        """The oldest blocks freed until at most ``keep`` bytes stay; returns them."""
        total, gone = self.nbytes(), []
        while self.free and total > keep:
            gone.append(self.free.pop(0))
            total -= gone[-1].nbytes
        return gone

    def nbytes(self):
        return sum(b.nbytes for b in self.free)


def block_bytes(nbytes):
    """The size of a new block for ``nbytes``: a whole multiple of :data:`BLOCK`."""
    return -(-nbytes // BLOCK) * BLOCK


_lock = threading.Lock()
_free = Blocks()
_back = collections.deque()  # blocks given back while _lock was held (a finalizer run by the GC inside it)
_regs = {}                   # id(block) -> (key, its registration: an object with release(), or None)
_reg_lock = threading.RLock()     # re-entered by a finalizer the GC runs inside register()


class Lease:
    """The owner of a block while arrays view it (their ``base``); ``warm``:
    the block was kept from an earlier result (touched before)."""

    __slots__ = ("__array_interface__", "warm", "block", "__weakref__")

    def __init__(self, block, shape, dtype, warm):
        self.__array_interface__ = {"data": (block.ctypes.data, False), "shape": shape, "typestr": dtype.str,
                                    "descr": dtype.descr, "version": 3}
        self.warm = warm
        self.block = block


def empty(shape, dtype):
    """An uninitialised array of ``shape`` and ``dtype``: in a kept block
    (the smallest that holds it and is less than twice its size) or a new
    one, numpy's own below :data:`MIN_BYTES` or with no cache."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or KEEP_BYTES <= 0 or dtype.hasobject:
        return np.empty(shape, dtype)
    with _lock:
        _take_back()
        block = _free.take(nbytes)
    warm = block is not None
    if not warm:
        block = np.empty(block_bytes(nbytes), np.uint8)
    lease = Lease(block, shape, dtype, warm)
    weakref.finalize(lease, _keep, block).atexit = False
    return np.asarray(lease)


def _keep(block):
    """A block whose arrays are all gone: kept, the oldest freed past
    KEEP_BYTES. Never waits for the lock: a finalizer may run inside a
    section that holds it (the GC collecting a cycle), so the block then
    waits in ``_back`` for the next one to take the lock."""
    _back.append(block)
    gone = []
    if _lock.acquire(blocking=False):
        try:
            _take_back()
            gone = _free.bound(KEEP_BYTES)
        finally:
            _lock.release()
    _unregister(gone)


def _take_back():
    """Under _lock: the blocks given back meanwhile to the kept ones."""
    while _back:
        _free.put([_back.popleft()])


def limit(nbytes):
    """Keep at most ``nbytes`` from now on (a dask worker's share of its memory limit)."""
    global KEEP_BYTES
    with _lock:
        KEEP_BYTES = min(KEEP_BYTES, int(nbytes))
        gone = _free.bound(KEEP_BYTES)
    _unregister(gone)


def trim():
    """Free every kept block."""
    with _lock:
        _take_back()
        gone = _free.bound(0)
    _unregister(gone)


def _lease(a):
    b = a.base
    while isinstance(b, np.ndarray):
        b = b.base
    return b if isinstance(b, Lease) else None


def warm(a):
    """Whether ``a`` lies in a block kept from an earlier result (memory
    touched before: copies into it may be spread over threads)."""
    b = _lease(a)
    return b is not None and b.warm


def register(a, key, make):
    """Whether the numpy array ``a`` lies in a kept block registered under
    ``key`` (a device's context), registering it now with ``make(block)``
    where it is not yet (``make`` returns an object with ``release()``, or
    raises: the block then stays unregistered under ``key``). Only blocks
    kept from an earlier result are registered: registering fresh memory
    costs its first touch and more (an H100 host: 200 us a MiB, 24 once
    touched), and a result made once may never come back. A block is
    registered under one key at a time (a driver may refuse memory
    registered already, or mirror it in device memory): another key's
    registration is released first (the block's last user wins; a
    registration keeps its context alive, so a key is never a dead
    context's reused handle). ``make`` None: whether it is registered under
    ``key``, registering nothing. The driver's pinning runs under this
    module's registration lock (tens of ms for a GiB, once a block)."""
    lease = _lease(a)
    if lease is None or not lease.warm:
        return False
    with _reg_lock:
        got = _regs.get(id(lease.block))
        if got is not None and got[0] != key and make is not None:
            _release(_regs.pop(id(lease.block)))
            got = None
        if got is None and make is None:        # asked only
            return False
        if got is None:
            try:
                got = (key, make(lease.block))
            except Exception:           # a driver that refuses: the staged copies stay
                got = (key, None)
            _regs[id(lease.block)] = got
        return got[0] == key and got[1] is not None


def _release(got):
    if got[1] is not None:
        try:
            got[1].release()
        except Exception:               # a driver gone at exit: nothing left to unpin
            pass


def _unregister(blocks):
    """The registrations of blocks being freed, released (before the memory
    goes; outside the cache's lock)."""
    with _reg_lock:
        for b in blocks:
            got = _regs.pop(id(b), None)
            if got is not None:
                _release(got)


def kept():
    """Bytes kept now."""
    with _lock:
        _take_back()
        gone = _free.bound(KEEP_BYTES)
        left = _free.nbytes()
    _unregister(gone)
    return left


__all__ = ["empty", "limit", "trim", "warm", "register", "kept", "Lease", "Blocks", "block_bytes", "KEEP_BYTES",
           "MIN_BYTES", "BLOCK"]
