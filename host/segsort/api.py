"""Segmented sort: the public calls.

:func:`sort` is the operation on device arrays (the library's execution
contract: queue in, ``(result, Events)`` out); :func:`segmented_sort` is the
numpy-friendly call on top (numpy in, numpy out through page-locked staged
copies; device arrays in, device arrays out).

The seed's design (fast-segmented-sort-on-gpus.txt, section 3):

1. **Binning** on the device: each segment's length picks a bin; the
   histogram is counted by ``bin_hist`` (by ``smallsort`` in async mode);
   ``bin_scatter`` scans the counts and scatters the ids of the segments of
   the longer bins. All of it is enqueued without a host round trip; the
   host reads the counts and the offsets-validation flags into page-locked
   memory on the device's side queue as soon as ``bin_hist`` is done, while
   the small sort runs: the one sync.
2. **small sort**: the reg bins up to ``small_max``: a work-group takes
   consecutive segments, groups them by bin in local memory and sorts each
   group with its bin's binding.
3. **reg-sort**: bins of padded length ``P = k * m <= 512``: ``m`` work-items
   of a sub-group sort a segment in registers with the bitonic network of
   Algorithm 1 (schedules from :mod:`.networks`).
4. **smem-merge**: bins up to ``block_max``: a work-group sorts sub-group
   chunks in registers and merges them by merge path in local memory.
5. **grid bin**: longer segments are cut into tiles sorted by the block
   kernel into a packed buffer, merged in global-memory rounds, gathered.

Elements are sorted as (order-preserving unsigned key, index in segment): the
index breaks ties (every sort is stable) and lets the write-out gather the
input's own key bits and values. Every decision is the :class:`~.plan.Plan`'s.

Async mode (``sort(..., sync=False)``) reads nothing back: every bin is
launched for an upper bound on its count (the kernels read the real one
from the control words and stride over it), the grid bin is laid out on the
device, and the offsets-validation flags are read without a wait into the
:class:`SortEvents`, whose ``check()`` raises what the sync call would.
"""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core import transfer
from ..core.device import as_device
from ..core.inputs import check_context, device_for, is_device_array
from ..core.launch import Events
from . import execute, forms
from .plan import KEY_DTYPES, Plan

_UINT = {4: np.uint32, 8: np.uint64}


def _check_1d(name, a):
    if not (is_device_array(a) or isinstance(a, np.ndarray)):
        raise TypeError(f"{name} must be a numpy array or pyopencl.array.Array, got {type(a).__name__}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if is_device_array(a) and not a.flags.forc:     # before any command is enqueued
        raise ValueError(f"{name} must be a contiguous device array")


def check_inputs(keys, offsets, values=None):
    """Check (and, lists, convert) the inputs; numpy offsets are validated
    here, device offsets on the device. Returns (keys, offsets, values)."""
    keys, offsets, values = (np.asarray(a) if isinstance(a, (list, tuple)) else a
                             for a in (keys, offsets, values))
    _check_1d("keys", keys)
    _check_1d("offsets", offsets)
    kdt = np.dtype(keys.dtype)
    if kdt not in KEY_DTYPES:
        raise TypeError("keys dtype must be one of uint32, int32, float32, uint64, int64, float64; "
                        f"got {kdt}")
    if offsets.size < 1:
        raise ValueError("offsets must have at least one entry (nseg + 1): [0, len(keys)] for one segment")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"offsets must be an integer array, got {offsets.dtype}")
    if offsets.size - 1 >= 2**32:
        raise ValueError("at most 2**32 - 1 segments")
    n = keys.size
    if values is not None:
        _check_1d("values", values)
        if values.dtype.hasobject:
            raise TypeError(f"values must be numbers (4 or 8 bytes each), got {values.dtype}")
        if values.dtype.itemsize not in (4, 8):
            raise TypeError(f"values must have a 4- or 8-byte dtype, got {values.dtype}")
        if values.size != n:
            raise ValueError(f"values has {values.size} elements but keys has {n}")
    if isinstance(offsets, np.ndarray):
        if not offsets.dtype.isnative:                  # uploaded as their bits
            offsets = offsets.astype(offsets.dtype.newbyteorder("="))
        _check_offsets(offsets, n)
    return keys, offsets, values


#: offsets compared a block at a time (no temporary of the offsets' size)
_BLOCK = 1 << 20


def check_host_offsets(offsets, n):
    """numpy CSR offsets checked against ``n`` keys; returns them as int64."""
    _check_offsets(offsets, n)
    return offsets.astype(np.int64, copy=False)


def _check_offsets(offsets, n):
    """numpy CSR offsets against ``n`` keys, compared in their own dtype a
    block at a time (a whole ``np.diff`` and its reductions took 16 ms for 4M
    offsets on an H100 host): from 0 to n and non-decreasing bounds every
    entry to [0, n], so segments of 2**32 or more exist only where n does."""
    if offsets[0] != 0:
        raise ValueError(f"offsets[0] must be 0, got {offsets[0]}")
    if offsets[-1] != n:
        raise ValueError(f"offsets[-1] must equal len(keys) = {n}, got {offsets[-1]}")
    m = offsets.size - 1
    down = np.empty(min(m, _BLOCK), bool)
    for a in range(0, m, _BLOCK):
        b = min(m, a + _BLOCK)
        np.greater(offsets[a:b], offsets[a + 1:b + 1], out=down[:b - a])
        if down[:b - a].any():
            raise ValueError("offsets must be non-decreasing")
    if n >= 2**32 and np.diff(offsets.astype(np.int64)).max() >= 2**32:
        raise ValueError("segments must be shorter than 2**32 elements")


def _on_device(device, q, a, dtype, alloc, events, waits):
    """(buffer, owner) of ``a``'s elements as ``dtype`` (the same bits for keys
    and values; offsets widened): a device array's own buffer where possible,
    else a copy from ``alloc``; numpy arrays are uploaded (staged). ``owner``
    keeps the buffer alive. Device arrays are contiguous (checked by the
    callers)."""
    if not is_device_array(a):
        host = a.astype(dtype) if a.dtype.itemsize != dtype.itemsize else a.view(dtype)
        out = transfer.upload(device, host, queue=q, allocator=alloc, events=events, step="upload")
        return out.data, out
    if a.dtype.itemsize != dtype.itemsize:              # offsets of 32 bits: widened on the device
        src = cla.Array(q, a.shape, a.dtype, data=a.base_data, offset=a.offset, allocator=alloc,
                        events=list(waits))
        out = src.astype(dtype, queue=q)
        events.add("convert", out.events[-1] if out.events else None)
        return out.data, out
    if a.offset:                                        # kernels take whole buffers
        buf = alloc(a.nbytes)
        events.add("convert", cl.enqueue_copy(q, buf, a.base_data, src_offset=a.offset,
                                              byte_count=a.nbytes, wait_for=waits or None))
        return buf, buf
    return a.data, a


def _check_flags(f, n):
    if f:
        raise _flags_error(f, n)


def _flags_error(f, n):
    why = []
    if f & 1:
        why.append("offsets must be non-decreasing and within [0, len(keys)]")
    if f & 2:
        why.append(f"offsets must start at 0 and end at len(keys) = {n}")
    if f & 4:
        why.append("segments must be shorter than 2**32 elements")
    return ValueError("; ".join(why))


class SortEvents(Events):
    """The :class:`~clkernels.host.core.launch.Events` of a segmented sort,
    with the checks an async sort (``sync=False``) leaves pending.

    ``check()`` waits only for the small reads those checks need (the
    offsets-validation flags, read right after binning; not the sort) and
    raises the ValueError the synchronous call would have raised (every time
    it is called); the sorted arrays are unspecified then. ``wait()`` waits
    for every event, then checks. Without pending checks both only wait.

    The reads land in host memory that pyopencl keeps alive through their
    events (``NannyEvent``): dropping these events before a read is complete
    waits for it. ``checks=False`` (what ``segmented_sort(...,
    asynchronous=True)`` uses) enqueues no reads and so leaves no checks.
    """

    def __init__(self, *args, checks=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.checks = checks
        self._checks = []

    def defer(self, event, check):
        """Leave ``check()`` (it raises or returns) until ``event`` is complete."""
        self._checks.append((event, check))

    def check(self):
        """Raise the pending checks' ValueError, if any (waits for their reads)."""
        if self._checks:
            cl.wait_for_events([e for e, _ in self._checks])
            for _, fn in self._checks:
                fn()
        return self

    def wait(self):
        super().wait()
        return self.check()


def _run(device, keys, offsets, values, descending, wait_for, allocator, overrides, events, sync=True):
    """The sort of checked inputs (numpy parts uploaded); device outputs.
    ``sync=False``: no host wait (``events``, a :class:`SortEvents`, gets the
    checks)."""
    q = device.queue
    alloc = allocator or device.pool
    kdt = keys.dtype
    n, nseg = keys.size, offsets.size - 1
    waits = list(wait_for or []) + [e for a in (keys, offsets, values) if is_device_array(a) for e in a.events]
    if not sync:
        # a user's event among the waits is waited for on the host first: commands
        # of this sort queued behind an unset user event crashed NVIDIA's OpenCL
        # driver (580) once it was set; every other wait stays on the device
        user = [e for e in waits if isinstance(e, cl.UserEvent)]
        if user:
            cl.wait_for_events(user)
    plan = Plan.resolve(device, {"size": n, "dtype": kdt,
                                 "dims": 0 if values is None else values.dtype.itemsize * 8}, **overrides)
    # the outputs are raw buffers (kbuf, vbuf: allocated below, after the first
    # commands); wrapping them in Array objects (tens of microseconds each)
    # waits until the device is busy
    def wrap():
        okeys = cla.Array(q, n, kdt, data=kbuf) if n else cla.empty(q, 0, kdt)
        ovals = None if values is None else (cla.Array(q, n, values.dtype, data=vbuf) if n
                                             else cla.empty(q, 0, values.dtype))
        return okeys, ovals

    def result(last, arrays=None):
        okeys, ovals = arrays or wrap()
        if last is not None:
            for a in (okeys, ovals):
                if a is not None:
                    a.add_event(last)
        return okeys if values is None else (okeys, ovals)

    if nseg == 0:                                       # offsets == [0] and no keys
        start_error = ValueError(f"offsets must start at 0 and end at len(keys) = {n}")
        if n:
            raise start_error
        if not is_device_array(offsets) or not (sync or events.checks):
            return result(None)
        if sync:
            if int(offsets.get()[0]) != 0:
                raise start_error
            return result(None)
        o0 = np.empty(1, offsets.dtype)
        read = events.add("read", cl.enqueue_copy(q, o0, offsets.base_data, src_offset=offsets.offset,
                                                  is_blocking=False, wait_for=waits or None))
        q.flush()
        events.defer(read, lambda: _check_start(int(o0[0]), start_error))
        return result(read)
    if n == 0 and not is_device_array(offsets):         # checked on the host: nothing to sort
        return result(None)
    prg = execute.programs(device, plan, stride=not sync)
    fix = plan.bare and kdt.kind == "f"             # -0.0 and NaN payloads put back
    nb = plan.nbins
    nwords = plan.ctl_words
    # control words left zeroed by the last sort on this queue (default pool only)
    ctl = transfer.take_zeroed(q, nwords) if allocator is None else None
    zeroed = ctl is not None
    if not zeroed:
        ctl = alloc(4 * nwords)
    doff, keep = _on_device(device, q, offsets, np.dtype(np.uint64), alloc, events, waits)
    keep = [keep]
    nseg_, n_ = np.uint32(nseg), np.uint64(n)
    read = counted = None
    if sync:
        # the first command as early as possible: count the bins, read the counts
        # on the side queue; the rest of the set-up while the device counts
        host = device.staging(nb + 1)
        read, counted = execute.count_bins(q, plan, prg, doff, nseg_, n_, ctl, host, device.side_queue, events,
                                           waits or None, zeroed)
    else:
        # async: the control words land in this call's own host array (the
        # staging array is reused by the next call), or nowhere without checks
        host = np.empty(nb + 1, np.uint32) if events.checks else None
    kbuf = alloc(n * kdt.itemsize) if n else None
    vbuf = alloc(n * values.dtype.itemsize) if n and values is not None else None
    seg_ids = alloc(4 * nseg)
    buf = execute.Buffers(doff, ctl, seg_ids, kbuf if n else ctl,
                          vbuf if values is not None and n else ctl, nseg_, n_,
                          np.uint32(KEY_DTYPES[kdt] | (4 if descending else 0)),
                          np.uint32(0 if values is None else values.dtype.itemsize))

    def inputs():
        buf.keys, k = _on_device(device, q, keys, np.dtype(_UINT[kdt.itemsize]), alloc, events, waits)
        buf.vals, v = (ctl, None) if values is None else _on_device(   # ctl: an unused placeholder
            device, q, values, np.dtype(_UINT[values.dtype.itemsize]), alloc, events, waits)
        keep.extend((k, v))

    # uploads: the offsets first; keys and values before the small sort, which
    # needs them, else after the binning kernels (the host stages them while
    # the device bins); one in-order queue orders the rest
    if n and plan.nsmall:
        inputs()
    first_waits = None if counted is not None else waits or None
    async_read, binned = execute.binning(q, plan, prg, buf, host, events, first_waits, scatter=n > 0,
                                         counted=counted, zeroed=zeroed)
    read = read or async_read
    if n and not plan.nsmall:
        inputs()
    if not sync:
        if read is not None:
            events.defer(read, lambda: _check_flags(int(host[nb]), n))
        if n == 0:
            return result(read or binned)
        cap = plan.async_cap(device)
        last = execute.bins(q, plan, prg, buf, [plan.bin_bound(i, n, nseg) for i in range(nb)], events,
                            cap) or read or binned
        cg, total, widths = plan.grid_bounds(n, nseg)
        if cg:
            tables = execute.grid_device_tables(q, plan, prg, buf, cg, alloc, events)
            last = execute.grid(q, plan, prg, buf, tables, total, widths, alloc, events, cap)
        if fix:
            last = execute.floatfix(q, plan, prg, buf, device, events)
        if allocator is None:
            transfer.prepare_zeroed(q, nwords, alloc)
        return result(last)
    read.wait()
    counts, flags = host[:nb].copy(), int(host[nb])
    if flags:
        binned.wait()                   # nothing of this call runs on after it raises
        _check_flags(flags, n)
    if n == 0:
        return result(binned)
    last = execute.bins(q, plan, prg, buf, counts, events) or binned
    arrays = wrap()                     # while the device sorts (the bins wait for no host work)
    cg = int(counts[plan.grid_bin])
    if cg:
        first = int(counts[plan.nsmall:plan.grid_bin].sum())
        ids, starts, ends = execute.read_grid(q, cla.Array(q, nseg + 1, np.uint64, data=doff),
                                              cla.Array(q, nseg, np.uint32, data=seg_ids), first, cg, alloc,
                                              events)
        cl.wait_for_events(events["grid_read"])
        layout = execute.grid_layout(plan, ids, starts, ends)
        tables = execute.grid_tables(device, q, layout, alloc, events)
        last = execute.grid(q, plan, prg, buf, tables, layout.total, layout.widths, alloc, events)
    if fix:
        last = execute.floatfix(q, plan, prg, buf, device, events)
    if allocator is None:
        transfer.prepare_zeroed(q, nwords, alloc)     # for the next sort, behind this one
    return result(last, arrays)


def sort_long(queue, keys, values, events):
    """One segment: device ``keys`` (uint32/uint64) and ``values`` (4 or 8
    bytes; n of each, from offset 0) in (key, index) order, by the grid
    bin's kernels alone, its layout made on the host: no binning launches,
    no host wait (the cell grid's keys, :mod:`..cellgrid`). The commands go
    into ``events`` (an :class:`~..core.launch.Events`). Returns (keys,
    values) device arrays, or None where n is not longer than the plan's
    largest block (:func:`sort` then)."""
    device = as_device(queue)
    q = device.queue
    kdt, n = np.dtype(keys.dtype), keys.size
    if kdt not in (np.dtype(np.uint32), np.dtype(np.uint64)) or values.size != n or keys.offset \
            or values.offset or values.dtype.itemsize not in (4, 8):
        return None
    plan = Plan.resolve(device, {"size": n, "dtype": kdt, "dims": values.dtype.itemsize * 8})
    if not plan.block_bins or n <= plan.bounds[-1]:
        return None
    prg = execute.programs(device, plan)
    layout = execute.grid_layout(plan, np.zeros(1, np.uint32), np.zeros(1, np.uint64), np.array([n], np.uint64))
    tables = tuple(transfer.kept(q, getattr(layout, name)).data for name in ("pstart", "gstart", "glen", "hdr"))
    alloc = device.pool
    kbuf, vbuf = alloc(n * kdt.itemsize), alloc(n * values.dtype.itemsize)
    # ctl: only a bare plan's SPEC word uses it (keys without values): a placeholder here
    buf = execute.Buffers(None, kbuf, None, kbuf, vbuf, np.uint32(1), np.uint64(n), np.uint32(KEY_DTYPES[kdt]),
                          np.uint32(values.dtype.itemsize), keys=keys.data, vals=values.data)
    last = execute.grid(q, plan, prg, buf, tables, layout.total, layout.widths, alloc, events)
    return cla.Array(q, n, kdt, data=kbuf, events=[last]), cla.Array(q, n, values.dtype, data=vbuf, events=[last])


def _check_start(o0, error):
    if o0 != 0:
        raise error


def _not_on_device(keys, offsets, values, segment_ids, out):
    """(name, array) of the first array argument that is not a device array, or None."""
    pairs = (offsets if isinstance(offsets, (tuple, list)) else (offsets,))
    outs = (out if isinstance(out, (tuple, list)) else (out,))
    named = [("keys", keys), ("values", values), ("segment_ids", segment_ids)]
    named += [("offsets", a) for a in pairs] + [("out", a) for a in outs]
    return next(((name, a) for name, a in named if a is not None and not is_device_array(a)), None)


def sort(queue, keys, offsets=None, values=None, *, descending=False, wait_for=None, allocator=None,
         sync=True, checks=True, segment_ids=None, num_segments=None, return_indices=False, out=None, **overrides):
    """Sort each segment ``keys[offsets[i]:offsets[i+1]]`` of device arrays
    (and ``values`` alongside) on ``queue``.

    ``queue``: a ``pyopencl.CommandQueue`` (or a :class:`clkernels.Device`:
    its queue, with its facts, e.g. a forced sub-group back end). Keys:
    uint32, int32, float32, uint64, int64, float64; values: any 4- or 8-byte
    dtype; offsets: integers, nseg + 1 non-decreasing entries from 0 to
    len(keys), checked on the device (a bad one raises ValueError after the
    short-segment kernel may have run; it only touches segments within [0,
    len(keys)]). The commands wait for ``wait_for`` and the inputs' events;
    outputs and temporaries come from ``allocator`` (default: the device's
    pool, see :attr:`Device.pool`); ``overrides`` (any plan parameter, e.g.
    ``small_max=0``) replace the tuned ones. The extended forms of
    :func:`segmented_sort` (8/16-bit and float16 keys, values of 1-16
    bytes, ``segment_ids``/``num_segments``, ``offsets=(begins, ends)``,
    ``return_indices``, ``out``) work here too, every array a device array.

    Returns ``(result, events)``: the sorted keys, or (keys, values), with the
    indices last where asked for: device arrays (complete when the events
    are); the :class:`SortEvents` by step
    ("fill" -- absent where the last sort on the queue left the control
    words zeroed --, "hist", "read", "small", "scatter", "reg", "block",
    "tile", "merge", "gather", "fix" for float keys without values, ...;
    async mode: "small" counts the bins, no "hist").
    The host waits once, for the bin counts (and once more for the layout
    of segments longer than the largest block bin, where there are any).

    ``sync=False`` (async mode) waits for nothing on the host: the call
    returns as soon as everything is enqueued behind ``wait_for`` and the
    inputs' events -- except a ``pyopencl.UserEvent`` among them, which the
    host waits for first (commands queued behind an unset user event crashed
    NVIDIA's OpenCL driver 580 once it was set, in our tests). Each bin is launched for the most segments
    it can hold (bin 0: nseg; lengths in (a, b]: min(nseg, n // (a + 1))),
    at most ``ASYNC_GROUPS_PER_CU`` work-groups per compute unit, and its
    kernel reads the real count on the device (work-groups past it do
    nothing); segments longer than the largest block bin T are laid out on
    the device ("layout" step) into tables for min(nseg, n // (T + 1)) of
    them, with two packed buffers of up to n + that many * (T - 1) elements
    (8 or 16 bytes each) and merge rounds for a segment of length n (rounds
    past the longest real one do nothing). So async costs larger launches,
    more temporary memory where long segments are possible, and a few empty
    kernels; the sync path is the one without those. Bad offsets are not
    raised by the call: ``events.check()`` (or ``events.wait()``) raises the
    ValueError the sync call would have (outputs are unspecified then). In
    async mode device ``segment_ids`` need ``num_segments``, device
    ``offsets=(begins, ends)`` are refused (their packing reads a total).
    ``checks=False`` (async mode) leaves out those checks and their reads:
    nothing of the sort waits for a copy to the host (offsets the caller
    made on the device).
    """
    bad = _not_on_device(keys, offsets, values, segment_ids, out)
    if bad:
        raise TypeError(f"{bad[0]} must be a pyopencl.array.Array (segmented_sort takes numpy arrays), "
                        f"got {type(bad[1]).__name__}")
    device = as_device(queue)
    sync = bool(sync)
    events = SortEvents(checks=sync or bool(checks))
    # the extended forms; the plain path below stays as it was
    if forms.needed(keys, offsets, values, segment_ids, num_segments, return_indices, out):
        res = forms.segmented_sort(keys, offsets, values, descending=descending, device=device,
                                   segment_ids=segment_ids, num_segments=num_segments,
                                   return_indices=bool(return_indices), out=out, wait_for=wait_for,
                                   allocator=allocator, overrides=overrides, events=events, sync=sync)
        return res, events
    keys, offsets, values = check_inputs(keys, offsets, values)
    check_context(device, keys, offsets, values)
    res = _run(device, keys, offsets, values, descending, wait_for, allocator, overrides, events, sync)
    return res, events


def segmented_sort(keys, offsets=None, values=None, *, descending=False, stable=False, device=None,
                   segment_ids=None, num_segments=None, return_indices=False, out=None, asynchronous=False,
                   client=None, ranges=None):
    """Sort each segment ``keys[offsets[i]:offsets[i+1]]`` (and ``values`` alongside).

    ``client``: a ``dask.distributed.Client``: runs of whole segments
    (``ranges`` of them) over its workers, numpy or dask inputs, every form
    below but ``asynchronous`` (see :mod:`clkernels.host.distributed.segsort`).

    ``offsets`` is CSR: nseg + 1 non-decreasing entries from 0 to len(keys).
    Keys: uint32, int32, float32, uint64, int64, float64; values: any 4- or
    8-byte dtype. Floats order as numpy does (NaN last, in either order);
    -0.0 and 0.0 tie. Ties keep input order (the sort is always stable, so
    ``stable=True`` is honoured at no cost). numpy inputs give numpy outputs
    (copied through page-locked staging buffers on GPUs);
    ``pyopencl.array.Array`` keys give device arrays on the chosen device's
    queue (the keys' queue when ``device`` is not given); device inputs never
    go to the host. Returns sorted keys, or (keys, values).

    Device-resident offsets are validated on the device during binning; a bad
    one raises ValueError (the short-segment kernel may have run by then; it
    only touches segments within [0, len(keys)], and nothing is returned).
    Outputs and temporaries come from the device's memory pool
    (``Device.pool``; ``free_held()`` returns the kept memory): a device
    output used on another queue must be finished there before it is dropped.
    :func:`sort` is the same on device arrays with a queue, wait lists, an
    allocator and the events.

    ``asynchronous=True`` (device arrays only) enqueues everything without a
    host wait (:func:`sort`'s ``sync=False``, see there for the costs) and
    returns the device arrays at once, their ``.events`` holding the
    completion event. Device offsets are then not validated for you: bad ones
    leave the outputs unspecified and raise nothing; use ``sort(...,
    sync=False)`` and its ``events.check()`` to be told.

    Extended forms (:mod:`.forms`; every one stable, floats in numpy's order):

    * keys also int8, uint8, int16, uint16, float16; values of any dtype of
      1 to 16 bytes (structured, string and void dtypes too);
    * ``segment_ids=``: a sorted segment-id array (as PyG's ``batch``) instead
      of ``offsets``, with ``num_segments`` (default max id + 1);
    * ``offsets=(begins, ends)``: segments with gaps, non-overlapping, in any
      order; elements outside every segment keep their place;
    * ``return_indices=True``: the permutation within each segment (int64;
      ``-1`` outside every segment) as the last returned array;
    * ``out=``: the keys array, or a ``(keys, values)`` tuple, of the inputs'
      dtype, shape and kind (numpy / device), written and returned.
    """
    if client is not None:          # a dask.distributed.Client: runs of whole segments over its workers
        from .. import distributed
        return distributed.segmented_sort(client, keys, offsets, values, descending=descending, stable=stable,
                                          device=device, segment_ids=segment_ids, num_segments=num_segments,
                                          return_indices=return_indices, out=out, asynchronous=asynchronous,
                                          ranges=ranges)
    if ranges is not None:
        raise ValueError("ranges= applies with client= only")
    bad = _not_on_device(keys, offsets, values, segment_ids, out) if asynchronous else None
    if bad:
        raise ValueError(f"asynchronous=True needs device arrays (pyopencl.array.Array), got {bad[0]} of type "
                         f"{type(bad[1]).__name__}")
    sync = not asynchronous
    # the extended forms; the plain path below stays as it was
    if forms.needed(keys, offsets, values, segment_ids, num_segments, return_indices, out):
        return forms.segmented_sort(keys, offsets, values, descending=descending, device=device,
                                    segment_ids=segment_ids, num_segments=num_segments,
                                    return_indices=bool(return_indices), out=out, sync=sync,
                                    events=SortEvents(checks=sync))
    keys, offsets, values = check_inputs(keys, offsets, values)
    dev = device_for(device, keys, values, offsets)
    check_context(dev, keys, offsets, values)
    events = SortEvents(checks=sync)
    out = _run(dev, keys, offsets, values, descending, None, None, {}, events, sync)
    if is_device_array(keys):
        return out
    ok, ov = out if values is not None else (out, None)
    ok = transfer.download(dev, ok, queue=dev.queue, events=events)
    if ov is None:
        return ok
    return ok, transfer.download(dev, ov, queue=dev.queue, events=events)
