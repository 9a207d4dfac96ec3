"""numpy <-> device copies at the speed of the bus.

A copy from or to pageable numpy memory is staged by the driver through a
page-locked buffer of its own, one chunk at a time: 5.8 GB/s up and 7.9 GB/s
down on an H100 (NVIDIA OpenCL 580), where DMA from page-locked memory moves
51-54 GB/s. Here the library stages itself, on ``LANES`` copy threads at
once: the array is cut into chunks of ``CHUNK_BYTES``; lane t takes chunks
t, t + LANES, ... and moves each through one of its two page-locked staging
chunks (:meth:`Device.pinned_chunks`, the calling thread's), copying one on
the host while the DMA of the other runs, and the other way round for
downloads. numpy releases the GIL in these copies, so lanes add up (one
thread copies 8 GB/s on that host, eight lanes move 256 MiB up in 7.4-8.6
ms). Devices that share host memory (``Device.staged_io`` false: CPU
devices), small arrays and copies made inside a lane take one plain copy,
and so do downloads into result memory the driver has registered
(:func:`.hostmem.register`: 55 GB/s on that host, one command) and uploads
from it (an earlier result fed back).

The host arrays the library makes for results (downloads, drained pairs)
come from :func:`host_empty`: memory a caller lends for the arrays made on
its thread (:func:`host_arrays`; a dask worker's kept memory,
:mod:`..distributed.arena`), else the blocks of results dropped before
(:mod:`.hostmem`).
"""

import collections
import concurrent.futures
import contextlib
import os
import threading

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from . import hostmem

#: bytes per staging chunk; copy threads (lanes), each with two chunks (a
#: command costs ~20-40 us on NVIDIA's driver: smaller chunks for small
#: arrays, tried, made 2-24 MiB uploads 0.6-0.7 ms slower)
CHUNK_BYTES = 4 << 20
LANES = max(1, min(8, os.cpu_count() or 1))
#: arrays below this go in one plain copy
SMALL_BYTES = 1 << 20
_executor = None
_executor_lock = threading.Lock()


_host = threading.local()
_lane = threading.local()           # .on: this thread runs a lane


def host_empty(shape, dtype):
    """A new host array for a result: from the allocator :func:`host_arrays`
    set on this thread, else in memory of earlier results the caller has
    dropped (:mod:`.hostmem`)."""
    alloc = getattr(_host, "alloc", None)
    return hostmem.empty(shape, dtype) if alloc is None else alloc(shape, dtype)


@contextlib.contextmanager
def host_arrays(alloc):
    """Inside the block, :func:`host_empty` on this thread is ``alloc(shape, dtype)``."""
    prev = getattr(_host, "alloc", None)
    _host.alloc = alloc
    try:
        yield
    finally:
        _host.alloc = prev


def _pool():
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(LANES, thread_name_prefix="clkernels-copy")
        return _executor


def _lanes(device, nbytes, lane):
    """Run ``lane(offsets, slots)`` for each lane over its chunks' offsets
    (lane t: chunks t, t + L, ... of CHUNK_BYTES) and its two staging slots
    (``[page-locked uint8 array, pending event or None]``), each lane
    returning the events it enqueued; every lane ends before this returns or
    raises. Returns each lane's last event (on an in-order queue, what ends
    after all of that lane's)."""
    offs = range(0, nbytes, CHUNK_BYTES)
    nl = min(LANES, len(offs))
    chunks = device.pinned_chunks(2 * LANES, CHUNK_BYTES)   # one set a thread, made once

    def run(t):
        _lane.on = True
        try:
            return lane(offs[t::nl], chunks[2 * t:2 * t + 2])[-1]
        finally:
            _lane.on = False

    if nl == 1:
        return [run(0)]
    futs = [_pool().submit(run, t) for t in range(nl)]
    concurrent.futures.wait(futs)           # no lane still writes when an error is raised
    return [f.result() for f in futs]


def _staged(device, nbytes):
    """Whether a copy of ``nbytes`` goes through the staging lanes: a device
    that does not share host memory, an array past SMALL_BYTES, and not
    inside a lane (a ``fill`` that transfers: its copies take the plain way,
    not the staging chunks its lane is using)."""
    return device.staged_io and nbytes > SMALL_BYTES and not getattr(_lane, "on", False)


def _registered(device, a, register=True):
    """Whether the host array ``a`` lies in page-locked memory the device's
    driver knows (a kept result block registered with it, see
    :mod:`.hostmem`; ``register``: registering a kept block now if it is
    not yet): a plain copy then moves at the DMA rate."""
    if not device.registers_host:
        return False
    ctx = device.context
    return hostmem.register(a, ctx.int_ptr, (lambda block: cl.Buffer(
        ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=block)) if register else None)


def _flat(a):
    return a.reshape(-1).view(np.uint8)


def fill_words(queue, buffer, nwords, value=0, *, events=None, step="zero", wait_for=None):
    """Set the first ``nwords`` 32-bit words of ``buffer`` to ``value`` with a
    kernel (never ``clEnqueueFillBuffer``: Oclgrind, our memory checker, reads
    a driver fill as uninitialised, and a buffer that had one stays so under
    later kernel stores -- a pool hands such a buffer on). Returns the event
    (None for no words)."""
    from .build import kernel
    from .device import as_device

    if not nwords:
        return None
    device = as_device(queue)
    k = kernel(device, "common.cl.mako", "word_fill", "clk_fill", {"sg_backend": "local"})
    groups = min(-(-nwords // 64), 64 * device.compute_units)
    ev = k(queue, (groups * 64,), (64,), buffer, np.uint64(nwords), np.uint32(value), wait_for=wait_for)
    if events is not None:
        events.add(step, ev)
    return ev


_zeroed = {}


def take_zeroed(queue, nwords):
    """A buffer of ``nwords`` words zero-filled on ``queue`` behind an earlier
    call's commands (:func:`prepare_zeroed`), or None."""
    got = _zeroed.pop((queue.int_ptr, nwords), None)
    return None if got is None or got[0] is not queue else got[1]


def prepare_zeroed(queue, nwords, alloc):
    """Zero-fill a buffer of ``nwords`` words (from ``alloc``) on ``queue``
    behind the commands enqueued so far, for the next call there that needs
    one (:func:`take_zeroed`): the fill's enqueue (~35 us of host time on
    NVIDIA's driver, and the device's wait for the next command) then leaves
    that call's critical path (the segmented sort's control words). Only for
    in-order queues (the fill must run before the next call's first
    command); one buffer per queue and size."""
    key = (queue.int_ptr, nwords)
    if key in _zeroed:
        return
    if queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE:
        return
    if len(_zeroed) >= 64:              # entries hold their queue: keep it bounded
        _zeroed.clear()
    ctl = alloc(4 * nwords)
    fill_words(queue, ctl, nwords)
    _zeroed[key] = (queue, ctl)


def zeros(queue, shape, dtype, *, allocator=None, events=None, step="zero", wait_for=None):
    """A zeroed device array (from ``allocator``, default the device's pool);
    its byte size must be a multiple of 4."""
    from .device import as_device

    out = cla.empty(queue, shape, dtype, allocator=allocator or as_device(queue).pool)
    ev = fill_words(queue, out.data, out.nbytes // 4, events=events, step=step, wait_for=wait_for)
    if ev is not None:
        out.add_event(ev)
    return out


def zeroed_buffer(queue, nbytes, *, allocator=None, events=None, step="zero"):
    """A zeroed raw device buffer of ``nbytes`` (a multiple of 4) from
    ``allocator`` (default: the device's pool), for kernel arguments that need
    no Array (making one costs ~40 us on the host)."""
    from .device import as_device

    buf = (allocator or as_device(queue).pool)(max(nbytes, 4))
    fill_words(queue, buf, nbytes // 4, events=events, step=step)
    return buf


def small_buffer(queue, host, keep, *, allocator=None):
    """A raw device buffer holding the small array ``host``, copied without
    blocking; the copy's event is appended to ``keep``, which must live until
    the copy is done (dropping it waits for the copy)."""
    from .device import as_device

    host = np.ascontiguousarray(host)
    buf = (allocator or as_device(queue).pool)(max(host.nbytes, 4))
    if host.nbytes:
        keep.append(cl.enqueue_copy(queue, buf, host, is_blocking=False))
    return buf


def small(queue, host, *, allocator=None):
    """A small parameter array (edges, bands, geometry) on the device, copied
    without blocking the host (pyopencl keeps ``host`` alive until the copy
    is done; kernels enqueued later on ``queue`` see it)."""
    from .device import as_device

    return cla.to_device(queue, np.ascontiguousarray(host), allocator=allocator or as_device(queue).pool,
                         async_=True)


#: how many parameter arrays :func:`kept` remembers (least recently used dropped)
KEPT_MAX = 64
_kept = collections.OrderedDict()
_kept_lock = threading.Lock()


def kept(queue, host, *, allocator=None):
    """:func:`small`, remembered: the device copy of the small read-only
    parameter array ``host`` (edges, bands, bin tables, geometry) made once
    per queue and contents, so a call repeated with the same parameters (a
    histogram over frames or catalogs) uploads nothing again and makes no
    Array. Kernels must only read it; ``allocator`` (default: the device's
    pool) serves the first copy."""
    host = np.ascontiguousarray(host)
    key = (queue.int_ptr, host.dtype.str, host.shape, host.tobytes())
    with _kept_lock:
        got = _kept.get(key)
        if got is not None:
            _kept.move_to_end(key)
            return got
    got = small(queue, host.copy(), allocator=allocator)     # its own copy: the key's bytes
    with _kept_lock:
        _kept[key] = got                # entries hold their queue: its pointer stays theirs
        while len(_kept) > KEPT_MAX:
            _kept.popitem(last=False)
    return got


def upload(device, host, *, queue=None, allocator=None, wait_for=None, events=None, step="upload"):
    """A device array holding ``host`` (a numpy array, made C-contiguous),
    allocated from ``allocator`` (default: the device's pool), filled on
    ``queue`` (default: the device's queue). The returned array is ready for
    kernels enqueued on that queue after this call; ``events`` (an
    :class:`~.launch.Events`) collects the copies under ``step``."""
    q = queue or device.queue
    host = np.ascontiguousarray(host)
    out = cla.empty(q, host.shape, host.dtype, allocator=allocator or device.pool)
    nbytes = host.nbytes
    if nbytes == 0:
        return out
    # an earlier result fed back (in a block registered by a download): one DMA
    if not _staged(device, nbytes) or _registered(device, host, register=False):
        ev = cl.enqueue_copy(q, out.data, host, is_blocking=False, wait_for=wait_for)
        if events is not None:
            events.add(step, ev)
        out.add_event(ev)
        return out
    src = _flat(host)
    _staged_up(device, q, out, lambda dst, off: np.copyto(dst, src[off:off + dst.size]), wait_for, events, step)
    return out


def upload_with(device, shape, dtype, fill, *, queue=None, allocator=None, events=None, step="upload"):
    """A device array of ``shape`` and ``dtype`` whose bytes ``fill(dst,
    offset)`` writes on the host, a piece at a time (``dst``: a flat uint8
    array to fill with the bytes from ``offset`` on): into the buffer mapped
    where the device shares host memory (no other copy), through the
    page-locked staging chunks elsewhere, where ``fill`` runs on the copy
    threads, several pieces at once (it must be thread-safe). For sources
    numpy cannot hand to :func:`upload` (another process's memory)."""
    q = queue or device.queue
    out = cla.empty(q, shape, dtype, allocator=allocator or device.pool)
    if out.nbytes == 0:
        return out
    if device.staged_io:
        if _staged(device, out.nbytes):
            _staged_up(device, q, out, fill, None, events, step)
        else:
            host = np.empty(out.nbytes, np.uint8)
            fill(host, 0)
            ev = cl.enqueue_copy(q, out.data, host, is_blocking=True)
            if events is not None:
                events.add(step, ev)
        return out
    host, ev = cl.enqueue_map_buffer(q, out.base_data, cl.map_flags.WRITE_INVALIDATE_REGION, out.offset,
                                     (out.nbytes,), np.uint8, is_blocking=True)
    try:
        fill(host, 0)
    finally:
        ev = host.base.release(q)
    if events is not None:
        events.add(step, ev)
    out.add_event(ev)
    return out


def _staged_up(device, q, out, fill, wait_for, events, step):
    """``out``'s bytes, each chunk filled on the host by ``fill`` into a lane's
    page-locked staging chunk while the DMA of the lane's other chunk runs."""
    nbytes = out.nbytes

    def lane(offs, slots):
        evs = []
        for i, off in enumerate(offs):
            slot = slots[i % 2]
            if slot[1] is not None:
                slot[1].wait()                  # the chunk's previous DMA is done
            m = min(CHUNK_BYTES, nbytes - off)
            fill(slot[0][:m], off)
            slot[1] = cl.enqueue_copy(q, out.data, slot[0][:m], dst_offset=off, is_blocking=False,
                                      wait_for=wait_for)
            q.flush()
            evs.append(slot[1])
            if events is not None:
                events.add(step, slot[1])
        return evs

    for ev in _lanes(device, nbytes, lane):    # the queues are in order (Device's, the user's)
        out.add_event(ev)


def direct(device, out):
    """Whether a download into the host array ``out`` is one plain copy (a
    device that shares host memory, a small array, or ``out`` in memory
    registered with the driver, see :func:`_registered`): then
    :func:`enqueue_download` can leave it to the device."""
    return not _staged(device, out.nbytes) or _registered(device, out)


def enqueue_download(device, arr, out, *, queue=None, wait_for=None, events=None, step="download"):
    """The copy of ``arr`` (a device array) into ``out`` (where :func:`direct`
    says it is one copy), enqueued and not waited for: returns its event."""
    if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.nbytes == arr.nbytes) \
            or not arr.flags.forc:
        raise ValueError("out must be a C-contiguous numpy array of the same size in bytes as the contiguous arr")
    ev = cl.enqueue_copy(queue or arr.queue or device.queue, out, arr.base_data, src_offset=arr.offset,
                         is_blocking=False, wait_for=list(wait_for or []) + list(arr.events) or None)
    if events is not None:
        events.add(step, ev)
    return ev


def download(device, arr, out=None, *, queue=None, wait_for=None, events=None, step="download"):
    """``arr`` (a device array) as numpy, in ``out`` if given (C-contiguous, the
    same number of bytes). Blocks until the data are on the host."""
    q = queue or arr.queue or device.queue
    if out is None:
        out = host_empty(arr.shape, arr.dtype)
    elif not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.nbytes == arr.nbytes):
        raise ValueError("out must be a C-contiguous numpy array of the same size in bytes")
    nbytes = arr.nbytes
    if nbytes == 0:
        return out
    if not arr.flags.forc:
        raise ValueError("download needs a contiguous device array")
    waits = list(wait_for or []) + list(arr.events)
    if not _staged(device, nbytes) or _registered(device, out):
        ev = cl.enqueue_copy(q, out, arr.base_data, src_offset=arr.offset, is_blocking=False,
                             wait_for=waits or None)
        if events is not None:
            events.add(step, ev)
        ev.wait()
        return out
    dst = _flat(out)
    src_off = arr.offset

    def lane(offs, slots):
        evs = []

        def issue(i):
            slot, off = slots[i % 2], offs[i]
            if slot[1] is not None:
                slot[1].wait()                  # an earlier copy out of the chunk is done
            slot[1] = cl.enqueue_copy(q, slot[0][:min(CHUNK_BYTES, nbytes - off)], arr.base_data,
                                      src_offset=src_off + off, is_blocking=False, wait_for=waits or None)
            q.flush()
            evs.append(slot[1])
            if events is not None:
                events.add(step, slot[1])

        for i in range(min(2, len(offs))):
            issue(i)
        for i, off in enumerate(offs):
            slot = slots[i % 2]
            slot[1].wait()
            m = min(CHUNK_BYTES, nbytes - off)
            np.copyto(dst[off:off + m], slot[0][:m])
            if i + 2 < len(offs):
                issue(i + 2)
        return evs

    _lanes(device, nbytes, lane)
    return out


__all__ = ["zeros", "fill_words", "upload", "upload_with", "download", "direct", "enqueue_download", "host_empty",
           "host_arrays",
           "CHUNK_BYTES", "LANES", "SMALL_BYTES"]
