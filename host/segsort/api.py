"""Segmented sort: the public calls.

:func:`sort` is the operation on device arrays (the library's execution
contract: queue in, ``(result, Events)`` out); :func:`segmented_sort` is the
numpy-friendly call on top (numpy in, numpy out through page-locked staged
copies; device arrays in, device arrays out).

The seed's design (fast-segmented-sort-on-gpus.txt, section 3):

1. **Binning** on the device: each segment's length picks a bin; the
   histogram is counted by ``smallsort`` where that runs, else by
   ``bin_hist``; ``bin_scatter`` scans the counts and scatters the ids of
   the segments of the longer bins. All of it is enqueued without a host
   round trip; then the host reads the counts (``3 * nbins + 1`` words into
   page-locked memory, with the offsets-validation flags): the one sync.
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
"""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core import transfer
from ..core.device import as_device
from ..core.inputs import check_context, device_for, is_device_array
from ..core.launch import Events
from . import execute
from .plan import KEY_DTYPES, Plan

_UINT = {4: np.uint32, 8: np.uint64}


def _check_1d(name, a):
    if not (is_device_array(a) or isinstance(a, np.ndarray)):
        raise TypeError(f"{name} must be a numpy array or pyopencl.array.Array, got {type(a).__name__}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")


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
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"offsets must be an integer array, got {offsets.dtype}")
    if offsets.size < 1:
        raise ValueError("offsets must have at least one entry (nseg + 1)")
    if offsets.size - 1 >= 2**32:
        raise ValueError("at most 2**32 - 1 segments")
    n = keys.size
    if values is not None:
        _check_1d("values", values)
        if values.dtype.itemsize not in (4, 8):
            raise TypeError(f"values must have a 4- or 8-byte dtype, got {values.dtype}")
        if values.size != n:
            raise ValueError(f"values has {values.size} elements but keys has {n}")
    if isinstance(offsets, np.ndarray):
        check_host_offsets(offsets, n)
    return keys, offsets, values


def check_host_offsets(offsets, n):
    """numpy CSR offsets checked against ``n`` keys; returns them as int64."""
    if offsets.dtype == np.uint64 and (offsets > np.iinfo(np.int64).max).any():
        raise ValueError("offsets out of range [0, len(keys)]")
    o = offsets.astype(np.int64, copy=False)
    if o[0] != 0:
        raise ValueError(f"offsets[0] must be 0, got {o[0]}")
    if o[-1] != n:
        raise ValueError(f"offsets[-1] must equal len(keys) = {n}, got {o[-1]}")
    d = np.diff(o)
    if (d < 0).any():
        raise ValueError("offsets must be non-decreasing")
    if d.size and d.max() >= 2**32:
        raise ValueError("segments must be shorter than 2**32 elements")
    return o


def _on_device(device, q, a, dtype, alloc, events, waits, name):
    """(buffer, owner) of ``a``'s elements as ``dtype`` (the same bits for keys
    and values; offsets widened): a device array's own buffer where possible,
    else a copy from ``alloc``; numpy arrays are uploaded (staged). ``owner``
    keeps the buffer alive."""
    if not is_device_array(a):
        host = a.astype(dtype) if a.dtype.itemsize != dtype.itemsize else a.view(dtype)
        out = transfer.upload(device, host, queue=q, allocator=alloc, events=events, step="upload")
        return out.data, out
    if not a.flags.forc:
        raise ValueError(f"{name} must be a contiguous device array")
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


def _flags_error(f, n):
    why = []
    if f & 1:
        why.append("offsets must be non-decreasing and within [0, len(keys)]")
    if f & 2:
        why.append(f"offsets must start at 0 and end at len(keys) = {n}")
    if f & 4:
        why.append("segments must be shorter than 2**32 elements")
    return ValueError("; ".join(why))


def _run(device, keys, offsets, values, descending, wait_for, allocator, overrides, events):
    """The sort of checked inputs (numpy parts uploaded); device outputs."""
    q = device.queue
    alloc = allocator or device.pool
    kdt = keys.dtype
    n, nseg = keys.size, offsets.size - 1
    waits = list(wait_for or []) + [e for a in (keys, offsets, values) if is_device_array(a) for e in a.events]
    plan = Plan.resolve(device, {"size": n, "dtype": kdt.name,
                                 "dims": 0 if values is None else values.dtype.itemsize * 8}, **overrides)
    okeys = cla.empty(q, n, kdt, allocator=alloc)
    ovals = cla.empty(q, n, values.dtype, allocator=alloc) if values is not None else None

    def result(last):
        if last is not None:
            for a in (okeys, ovals):
                if a is not None:
                    a.add_event(last)
        return okeys if values is None else (okeys, ovals)

    if nseg == 0:                                       # offsets == [0] and no keys
        o0 = int(offsets.get()[0]) if is_device_array(offsets) else 0
        if o0 != 0 or n:
            raise ValueError(f"offsets must start at 0 and end at len(keys) = {n}")
        return result(None)
    if n == 0 and not is_device_array(offsets):         # checked on the host: nothing to sort
        return result(None)
    prg = execute.programs(device, plan)
    nb = plan.nbins
    ctl = alloc(4 * (3 * nb + 1))
    seg_ids = alloc(4 * nseg)
    doff, keep = _on_device(device, q, offsets, np.dtype(np.uint64), alloc, events, waits, "offsets")
    keep = [keep]
    buf = execute.Buffers(doff, ctl, seg_ids, okeys.data if n else ctl,
                          ovals.data if values is not None and n else ctl, np.uint32(nseg), np.uint64(n),
                          np.uint32(KEY_DTYPES[kdt] | (4 if descending else 0)),
                          np.uint32(0 if values is None else values.dtype.itemsize))

    def inputs():
        buf.keys, k = _on_device(device, q, keys, np.dtype(_UINT[kdt.itemsize]), alloc, events, waits, "keys")
        buf.vals, v = (ctl, None) if values is None else _on_device(   # ctl: an unused placeholder
            device, q, values, np.dtype(_UINT[values.dtype.itemsize]), alloc, events, waits, "values")
        keep.extend((k, v))

    # uploads: the offsets first; keys and values before the small sort, which
    # needs them, else after the binning kernels (the host stages them while
    # the device bins); one in-order queue orders the rest
    if n and plan.nsmall:
        inputs()
    host = device.staging(3 * nb + 1)
    read = execute.binning(q, plan, prg, buf, host, events, waits or None, scatter=n > 0)
    if n and not plan.nsmall:
        inputs()
    read.wait()
    hctl = host[:3 * nb + 1].copy()
    if hctl[3 * nb]:
        raise _flags_error(int(hctl[3 * nb]), n)
    if n == 0:
        return result(read)
    counts = hctl[:nb]
    last = execute.bins(q, plan, prg, buf, counts, events) or read
    cg = int(counts[plan.grid_bin])
    if cg:
        first = int(counts[plan.nsmall:plan.grid_bin].sum())
        ids, starts, ends = execute.read_grid(q, cla.Array(q, nseg + 1, np.uint64, data=doff),
                                              cla.Array(q, nseg, np.uint32, data=seg_ids), first, cg, alloc,
                                              events)
        cl.wait_for_events(events["grid_read"])
        layout = execute.grid_layout(plan, ids, starts, ends)
        last = execute.grid(device, q, plan, prg, buf, layout, alloc, events)
    return result(last)


def sort(queue, keys, offsets, values=None, *, descending=False, wait_for=None, allocator=None,
         **overrides):
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
    ``small_max=0``) replace the tuned ones.

    Returns ``(sorted keys, or (keys, values), Events)``: device arrays
    (complete when the events are) and the events by step ("fill", "small"
    or "hist", "scatter", "read", "reg", "block", "tile", "merge", "gather",
    ...). The host waits once, for the bin counts (and once more for the
    layout of segments longer than the largest block bin, where there are any).
    """
    for name, a in (("keys", keys), ("offsets", offsets), ("values", values)):
        if a is not None and not is_device_array(a):
            raise TypeError(f"{name} must be a pyopencl.array.Array (segmented_sort takes numpy arrays), "
                            f"got {type(a).__name__}")
    keys, offsets, values = check_inputs(keys, offsets, values)
    device = as_device(queue)
    check_context(device, keys, offsets, values)
    events = Events()
    out = _run(device, keys, offsets, values, descending, wait_for, allocator, overrides, events)
    return out, events


def segmented_sort(keys, offsets=None, values=None, *, descending=False, stable=False, device=None,
                   segment_ids=None, num_segments=None, return_indices=False, out=None):
    """Sort each segment ``keys[offsets[i]:offsets[i+1]]`` (and ``values`` alongside).

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

    Extended forms (:mod:`.forms`; every one stable, floats in numpy's order):

    * keys also int8, uint8, int16, uint16, float16; values of any dtype of
      1, 2, 4, 8 or 16 bytes (structured dtypes too);
    * ``segment_ids=``: a sorted segment-id array (as PyG's ``batch``) instead
      of ``offsets``, with ``num_segments`` (default max id + 1);
    * ``offsets=(begins, ends)``: segments with gaps, non-overlapping, in any
      order; elements outside every segment keep their place;
    * ``return_indices=True``: the permutation within each segment (int64;
      ``-1`` outside every segment) as the last returned array;
    * ``out=``: the keys array, or a ``(keys, values)`` tuple, of the inputs'
      dtype, shape and kind (numpy / device), written and returned.
    """
    from . import forms             # the extended forms; the plain path below stays as it was
    if forms.needed(keys, offsets, values, segment_ids, num_segments, return_indices, out):
        return forms.segmented_sort(keys, offsets, values, descending=descending, device=device,
                                    segment_ids=segment_ids, num_segments=num_segments,
                                    return_indices=bool(return_indices), out=out)
    keys, offsets, values = check_inputs(keys, offsets, values)
    dev = device_for(device, keys, values, offsets)
    check_context(dev, keys, offsets, values)
    events = Events()
    out = _run(dev, keys, offsets, values, descending, None, None, {}, events)
    if is_device_array(keys):
        return out
    ok, ov = out if values is not None else (out, None)
    ok = transfer.download(dev, ok, queue=dev.queue, events=events)
    if ov is None:
        return ok
    return ok, transfer.download(dev, ov, queue=dev.queue, events=events)
