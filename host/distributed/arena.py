"""A worker's warm host memory, lent to one call's large arrays until the call ends.

Memory a process frees and asks for again can cost far more to touch than
memory it kept: a host that returns freed memory to its hypervisor (free
page reporting: the CI machine returns free 2 MiB blocks about a second
after they are freed) faults it back in at ~1 GB/s. On that machine 288
MiB copy in 24 ms into kept memory, 51 ms into fresh memory at once and
330 ms 1.5 s after a free. A direct call pays for fresh memory once (its
results); through a worker a call paid twice, once in the worker (the
inputs it reads out of the client, the results it downloads from its
device) and once in the client (the results it reads out of the worker).
The worker's half is avoidable: it keeps the blocks of its calls once they
end (up to :data:`KEEP_BYTES`) and lends them to the next calls' arrays.

A call lends (:func:`lending`) only where no large array its tasks make is
read after it ends: its inputs, and results the client reads before it ends
(:class:`.transport.Transport` ``lend=True``; a task's result may stay in
dask's store past the end, unread); results left on the workers for the
caller (``collect=False``) are never lent memory. A block goes back once the
worker learns that the call has ended (:func:`release`: its release message,
or its fence found cleared) and none of its tasks still runs; a task that
starts after that lends nothing. The worker keeps at most :data:`KEEP_BYTES`,
a quarter of its dask memory limit where that is less (:func:`limit`), kept
and lent together within that bound before a new block is made, and gives
back all it keeps when a call's release finds its process above dask's
target (:func:`trim`).
"""

import collections
import contextlib
import os
import threading

import numpy as np

from ..core import hostmem
from ..core.transfer import host_arrays

#: arrays below this are numpy's own (they may ride in dask's replies)
MIN_BYTES = 1 << 20
#: blocks kept for later calls once theirs ended: an eighth of the host's memory (see :func:`limit`)
KEEP_BYTES = (os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 8 if hasattr(os, "sysconf") else 1 << 30
ENDED_KEEP = 4096

_lock = threading.Lock()
_free = hostmem.Blocks()            # kept blocks
_lent = {}                          # call -> [blocks]
_running = collections.Counter()    # call -> its tasks running now
_ended = collections.OrderedDict()  # call -> None, the last ENDED_KEEP


def empty(call, shape, dtype):
    """An array of ``shape`` and ``dtype`` in memory lent to ``call``
    (numpy's own below :data:`MIN_BYTES`): the smallest kept block that
    holds it and is less than twice its size, else a new block."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    with _lock:
        block = _free.take(nbytes)
        if block is None:       # none fits: the oldest kept go first, kept and lent within KEEP_BYTES
            size = hostmem.block_bytes(nbytes)
            _free.bound(KEEP_BYTES - size - sum(b.nbytes for v in _lent.values() for b in v))
    if block is None:
        block = np.empty(size, np.uint8)
    with _lock:
        _lent.setdefault(call, []).append(block)
    return block[:nbytes].view(dtype).reshape(shape)


@contextlib.contextmanager
def lending(call):
    """The library's large host arrays made on this thread inside the block
    (:func:`..core.transfer.host_empty`) come from memory lent to ``call``;
    a call that has ended lends nothing (numpy's arrays)."""
    with _lock:
        live = call not in _ended
        if live:
            _running[call] += 1
    if not live:
        yield
        return
    try:
        with host_arrays(lambda shape, dtype: empty(call, shape, dtype)):
            yield
    finally:
        with _lock:
            _running[call] -= 1
            if _running[call] == 0:
                del _running[call]
                if call in _ended:
                    _recycle(call)


def release(call):
    """``call`` has ended: its blocks are kept for later calls once none of
    its tasks runs (now, or when the last one ends)."""
    with _lock:
        _ended[call] = None
        while len(_ended) > ENDED_KEEP:
            _ended.popitem(last=False)
        if call not in _running:
            _recycle(call)


def _recycle(call):
    """Under _lock: ``call``'s blocks to the kept ones, the oldest dropped past KEEP_BYTES."""
    _free.put(_lent.pop(call, []))
    _free.bound(KEEP_BYTES)


def limit(memory_limit):
    """Keep at most a quarter of ``memory_limit`` (a dask worker's, bytes; None or 0: no limit), and
    as much again of the worker's dropped results (:mod:`..core.hostmem`)."""
    global KEEP_BYTES
    if memory_limit:
        with _lock:
            KEEP_BYTES = min(KEEP_BYTES, int(memory_limit) // 4)
            _free.bound(KEEP_BYTES)
        hostmem.limit(int(memory_limit) // 4)


def trim():
    """Give back every kept block (numpy frees it once nothing views it), the
    worker's dropped results' too."""
    with _lock:
        _free.bound(0)
    hostmem.trim()


def calls():
    """The calls that have blocks lent now."""
    with _lock:
        return set(_lent)


def kept():
    """(bytes kept, bytes lent to calls): what this worker holds."""
    with _lock:
        return _free.nbytes(), sum(b.nbytes for v in _lent.values() for b in v)


__all__ = ["empty", "lending", "release", "limit", "trim", "calls", "kept", "KEEP_BYTES"]
