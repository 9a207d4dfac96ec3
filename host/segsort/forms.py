"""Segmented sort: the extended input forms of :func:`~.api.segmented_sort`.

The forms users of CUB and torch expect, normalised here and sorted by the
existing sort underneath (``api._run``), with small kernels from
``segsort_forms.cl.mako``:

* keys of 8 and 16 bits and float16, widened on the device to 32 bits
  (float16 through ``vload_half``: float order and NaN stay numpy's);
* values of any item size from 1 to 16 bytes (structured, string and void
  dtypes included), moved as 1 to 16 words of the widest of 1, 2, 4, 8 or
  16 bytes that divides the size;
* ``return_indices=True``: the permutation within each segment (int64);
* ``segment_ids=``: a sorted segment-id array (PyG's ``batch``) instead of
  CSR offsets, turned into offsets by binary search on the device;
* ``offsets=(begins, ends)``: segments with gaps, in any order, not
  overlapping; elements outside every segment keep their place;
* ``out=``: the keys (or a ``(keys, values)`` tuple) written in place.

The uniform pipeline: the (widened) keys are sorted with the values
``0..n-1`` -> (sorted keys, perm); the sorted original keys (exact bits; the
sort is stable) and values are gathered through ``perm``; the indices are
``perm[i]`` less the begin of position i's segment. Gaps first pack the
segments' elements (CSR offsets from the lengths' cumulative sum), sort the
packed buffer and scatter the results into a copy of the input. Native keys
with 4- or 8-byte values and no indices or gaps go straight to the sort.
"""

import numbers

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core import transfer
from ..core.build import kernel
from ..core.inputs import check_context, device_for, is_device_array
from ..primitives.scan import exclusive_scan
from .plan import KEY_DTYPES

TEMPLATE = "segsort_forms.cl.mako"
#: keys sorted after widening to 32 bits: dtype -> (sort dtype, C type of the input)
WIDE_KEYS = {np.dtype(np.int8): (np.dtype(np.int32), "char"),
             np.dtype(np.uint8): (np.dtype(np.uint32), "uchar"),
             np.dtype(np.int16): (np.dtype(np.int32), "short"),
             np.dtype(np.uint16): (np.dtype(np.uint32), "ushort"),
             np.dtype(np.float16): (np.dtype(np.float32), "half")}
#: word size -> the C type that moves it
ITEM_T = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}
#: the largest value item size
MAX_ITEM = 16


def item_words(itemsize):
    """(C type, words) moving an item of ``itemsize`` bytes (1..MAX_ITEM): the
    widest word of ITEM_T that divides the size (buffers and items stay aligned
    to it), as many as make up the item."""
    w = max(b for b in ITEM_T if itemsize % b == 0)
    return ITEM_T[w], itemsize // w
_ID_T = {np.dtype(t): c for t, c in ((np.int8, "char"), (np.uint8, "uchar"), (np.int16, "short"),
                                     (np.uint16, "ushort"), (np.int32, "int"), (np.uint32, "uint"),
                                     (np.int64, "long"), (np.uint64, "ulong"))}
_KEY_NAMES = "uint8, int8, uint16, int16, float16, uint32, int32, float32, uint64, int64, float64"


# ------------------------------------------------------------------ dispatch
def _is_gap_pair(offsets):
    return (isinstance(offsets, (tuple, list)) and len(offsets) == 2
            and all(isinstance(a, (np.ndarray, cla.Array, tuple, list)) for a in offsets))


def needed(keys, offsets, values, segment_ids, num_segments, return_indices, out):
    """Whether a call uses any extended form (else the plain path runs untouched)."""
    if segment_ids is not None or num_segments is not None or return_indices or out is not None:
        return True
    if offsets is None or _is_gap_pair(offsets):
        return True
    kdt = _dtype_of(keys)
    if kdt is None:
        return False
    if kdt in WIDE_KEYS:
        return True
    if values is not None:
        vdt = _dtype_of(values)
        if vdt is None:
            return False
        if vdt.itemsize not in (4, 8):
            return True
    return False


def _dtype_of(a):
    """The dtype of an array or array-like (None when it is neither: the
    plain path's checks then say what is wrong)."""
    dt = getattr(a, "dtype", None)
    if dt is None:
        try:
            dt = np.asarray(a).dtype
        except Exception:
            return None
    return np.dtype(dt)


# -------------------------------------------------------------------- checks
def _array(name, a, *, integer=False):
    if isinstance(a, (list, tuple)):
        a = np.asarray(a)
    if not (is_device_array(a) or isinstance(a, np.ndarray)):
        raise TypeError(f"{name} must be a numpy array or pyopencl.array.Array, got {type(a).__name__}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if is_device_array(a) and not a.flags.forc:
        raise ValueError(f"{name} must be a contiguous device array")
    if integer and (a.dtype.kind not in "iu"):
        raise TypeError(f"{name} must be an integer array, got {a.dtype}")
    return a


def _check_keys(keys):
    keys = _array("keys", keys)
    kdt = np.dtype(keys.dtype)
    if kdt not in KEY_DTYPES and kdt not in WIDE_KEYS:
        raise TypeError(f"keys dtype must be one of {_KEY_NAMES}; got {kdt}")
    return keys


def _check_values(values, n):
    if values is None:
        return None
    values = _array("values", values)
    vdt = np.dtype(values.dtype)
    if vdt.hasobject:
        raise TypeError(f"values must not hold Python objects, got {vdt}")
    if not 1 <= vdt.itemsize <= MAX_ITEM:
        raise TypeError(f"values must have an item size of 1 to {MAX_ITEM} bytes, got {vdt} "
                        f"({vdt.itemsize} bytes)")
    if values.size != n:
        raise ValueError(f"values has {values.size} elements but keys has {n}")
    return values


def _check_csr(offsets, n):
    """numpy CSR offsets checked on the host -> int64; device ones as they are."""
    offsets = _array("offsets", offsets, integer=True)
    if offsets.size < 1:
        raise ValueError("offsets must have at least one entry (nseg + 1)")
    if offsets.size - 1 >= 2**32:
        raise ValueError("at most 2**32 - 1 segments")
    if is_device_array(offsets):
        return offsets
    from .api import check_host_offsets  # api imports this module lazily

    return check_host_offsets(offsets, n).astype(np.int64)


def _check_num_segments(num_segments):
    if num_segments is None:
        return None
    if isinstance(num_segments, (bool, np.bool_)) or not isinstance(num_segments, numbers.Integral):
        raise TypeError(f"num_segments must be an integer, got {num_segments!r}")
    v = int(num_segments)
    if not 0 <= v < 2**32:
        raise ValueError(f"num_segments must be in [0, 2**32), got {v}")
    return v


def _host_ids(ids, n, nseg):
    """numpy segment ids -> (CSR offsets int64, nseg), checked on the host."""
    if ids.dtype == np.uint64 and ids.size and ids.max() > np.iinfo(np.int64).max:
        raise ValueError("segment_ids must be in [0, num_segments)")
    ids = ids.astype(np.int64)
    if ids.size > 1 and (ids[1:] < ids[:-1]).any():
        raise ValueError("segment_ids must be sorted (non-decreasing)")
    if ids.size and ids[0] < 0:
        raise ValueError(f"segment_ids must be non-negative, got {ids[0]}")
    if nseg is None:
        nseg = int(ids[-1]) + 1 if ids.size else 0
        if nseg >= 2**32:
            raise ValueError("at most 2**32 - 1 segments")
    elif ids.size and ids[-1] >= nseg:
        raise ValueError(f"segment_ids must be < num_segments = {nseg}, got {ids[-1]}")
    off = np.searchsorted(ids, np.arange(nseg + 1, dtype=np.int64), side="left").astype(np.int64)
    if off.size > 1 and np.diff(off).max() >= 2**32:
        raise ValueError("segments must be shorter than 2**32 elements")
    return off, nseg


def _host_gaps(begins, ends, n):
    """numpy (begins, ends) -> (packed CSR offsets int64, packed -> original map int64)."""
    b = begins.astype(np.int64)
    e = ends.astype(np.int64)
    for name, a, src in (("begins", b, begins), ("ends", e, ends)):
        if src.dtype == np.uint64 and src.size and src.max() > np.iinfo(np.int64).max:
            raise ValueError(f"offsets=(begins, ends): {name} out of range [0, len(keys) = {n}]")
        if a.size and (a.min() < 0 or a.max() > n):
            raise ValueError(f"offsets=(begins, ends): {name} out of range [0, len(keys) = {n}]")
    bad = np.flatnonzero(b > e)
    if bad.size:
        s = int(bad[0])
        raise ValueError(f"offsets=(begins, ends): begin > end for segment {s} ({b[s]} > {e[s]})")
    lens = e - b
    if lens.size and lens.max() >= 2**32:
        raise ValueError("segments must be shorter than 2**32 elements")
    nz = np.flatnonzero(lens)
    order = nz[np.argsort(b[nz], kind="stable")]
    over = np.flatnonzero(e[order][:-1] > b[order][1:])
    if over.size:
        s, t = int(order[over[0]]), int(order[over[0] + 1])
        raise ValueError(f"offsets=(begins, ends): segments {s} [{b[s]}, {e[s]}) and {t} [{b[t]}, {e[t]}) "
                         "overlap")
    off = np.zeros(b.size + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    total = int(off[-1])
    gidx = np.repeat(b - off[:-1], lens) + np.arange(total, dtype=np.int64)
    return off, gidx


def _check_out(out, keys, values):
    """``out`` -> [keys out, values out or None] (or None): same dtype, shape and
    kind (numpy / device) as the inputs."""
    if out is None:
        return None
    on_dev = is_device_array(keys)
    if values is None:
        if isinstance(out, (tuple, list)):
            if len(out) != 1:
                raise ValueError(f"out must be one keys array when no values are given, got {len(out)} arrays")
            out = out[0]
        outs = [("out", out, keys)]
    else:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("out must be a (keys, values) tuple when values are given")
        outs = [("out[0]", out[0], keys), ("out[1]", out[1], values)]
    for name, o, like in outs:
        if on_dev:
            if not is_device_array(o):
                raise TypeError(f"{name} must be a pyopencl.array.Array for device inputs, "
                                f"got {type(o).__name__}")
            if not o.flags.forc:
                raise ValueError(f"{name} must be a contiguous device array")
            if o.context.int_ptr != keys.context.int_ptr:
                raise ValueError(f"{name} must live in the context of the keys")
        else:
            if not isinstance(o, np.ndarray):
                raise TypeError(f"{name} must be a numpy array for numpy keys, got {type(o).__name__}")
            if not (o.flags.c_contiguous and o.flags.writeable):
                raise ValueError(f"{name} must be a writeable C-contiguous numpy array")
        if np.dtype(o.dtype) != np.dtype(like.dtype):
            raise TypeError(f"{name} must have dtype {like.dtype}, got {o.dtype}")
        if tuple(o.shape) != (like.size,):
            raise ValueError(f"{name} must have shape ({like.size},), got {tuple(o.shape)}")
    return [o for _, o, _ in outs] + ([None] if values is None else [])


# ------------------------------------------------------------------- device
class _Ctx:
    """The device, its queue and allocator, the events, the launch of the
    kernels and the checks of flags (async: left to ``events.check()``)."""

    def __init__(self, dev, events, waits, allocator, sync):
        self.dev, self.q, self.alloc, self.events = dev, dev.queue, allocator or dev.pool, events
        self.waits = list(waits)
        self.sync = sync
        self.wg = min(256, dev.max_work_group_size)

    def launch(self, defname, params, name, n, *args, step):
        """Grid-stride kernel over ``n`` items (nothing for n = 0); waits for the
        inputs' events the first time."""
        if n <= 0:
            return None
        k = kernel(self.dev, TEMPLATE, defname, name, dict(params, wg_size=self.wg))
        g = min(-(-int(n) // self.wg), 64 * self.dev.compute_units)
        ev = k(self.q, (g * self.wg,), (self.wg,), *args, wait_for=self.waits or None)
        self.waits = []
        return self.events.add(step, ev)

    def empty(self, n, dtype):
        return cla.empty(self.q, int(n), dtype, allocator=self.alloc)

    def whole(self, a, name):
        """A device array of ``a``'s elements at offset 0 (a numpy array is uploaded)."""
        if not is_device_array(a):
            return transfer.upload(self.dev, np.ascontiguousarray(a), queue=self.q, allocator=self.alloc,
                                   events=self.events, step="upload")
        if not a.offset:
            return a
        out = self.empty(a.size, a.dtype)
        if a.nbytes:
            self.events.add("convert", cl.enqueue_copy(self.q, out.data, a.base_data, src_offset=a.offset,
                                                       byte_count=a.nbytes, wait_for=self.waits or None))
        return out

    def read_flag(self, flag):
        h = np.empty(1, np.uint32)
        cl.enqueue_copy(self.q, h, flag, is_blocking=True)
        return int(h[0])

    def check_flag(self, flag, check):
        """``check(flag word)`` (it raises) now, or in async mode once a
        non-blocking read of it completes (``events.check()``; nothing where
        the events take no checks)."""
        if self.sync:
            check(self.read_flag(flag))
            return
        if not self.events.checks:
            return
        h = np.empty(1, np.uint32)
        read = self.events.add("read", cl.enqueue_copy(self.q, h, flag, is_blocking=False))
        self.events.defer(read, lambda: check(int(h[0])))

    def gather(self, src, perm, n, *, dst=None, didx=None, idx_t="uint", step="gather"):
        """dst[didx[i] or i] = src[perm[i] or i] for i < n (a new array of src's dtype if
        dst is None)."""
        if dst is None:
            dst = self.empty(n, src.dtype)
        item, words = item_words(np.dtype(src.dtype).itemsize)
        dummy = dst.data if dst.nbytes else self.alloc(4)
        self.launch("gather", {"item_t": item, "words": words, "idx_t": idx_t, "perm": perm is not None,
                               "didx": didx is not None}, "clk_gather", n,
                    src.data, dst.data, perm.data if perm is not None else dummy,
                    didx.data if didx is not None else dummy, np.uint64(n), step=step)
        return dst


def _device_ids(ctx, ids, n, nseg):
    """Device segment ids -> (device CSR offsets uint64, nseg); checked on the device."""
    ids = ctx.whole(ids, "segment_ids")
    if nseg is None:
        if not ctx.sync:
            raise ValueError("sync=False with device segment_ids needs num_segments (else the last id is read)")
        if n:
            h = np.empty(1, ids.dtype)
            cl.enqueue_copy(ctx.q, h, ids.data, src_offset=(n - 1) * ids.dtype.itemsize, is_blocking=True,
                            wait_for=(ctx.waits + list(ids.events)) or None)
            last = int(h[0])
            if last >= 2**32 - 1:
                raise ValueError("segment_ids must be < 2**32 - 1 (at most 2**32 - 1 segments)")
            nseg = max(last + 1, 0)
        else:
            nseg = 0
    flag = transfer.zeroed_buffer(ctx.q, 4, allocator=ctx.alloc, events=ctx.events)
    off = ctx.empty(nseg + 1, np.uint64)
    p = {"id_t": _ID_T[np.dtype(ids.dtype)]}
    ctx.waits += list(ids.events)
    ctx.launch("ids_offsets", p, "clk_ids_check", n, ids.data, np.uint64(n), np.uint64(nseg), flag, step="ids")
    ctx.launch("ids_offsets", p, "clk_ids_offsets", nseg + 1, ids.data if n else flag, np.uint64(n),
               np.uint64(nseg), off.data, step="ids")
    ctx.check_flag(flag, lambda f: _ids_flags(f, nseg))
    return off, nseg


def _ids_flags(f, nseg):
    if f & 2:
        raise ValueError("segment_ids must be sorted (non-decreasing)")
    if f & 1:
        raise ValueError(f"segment_ids must be in [0, num_segments = {nseg})")


def _device_gaps(ctx, begins, ends, n, idx_t, idx_dt):
    """Device (begins, ends) -> (packed CSR offsets uint64, packed -> original map,
    total), checked on the device (range, order, overlap)."""
    if n >= 2**32:
        raise ValueError("offsets=(begins, ends) on the device: at most 2**32 - 1 keys")
    if not ctx.sync:
        raise ValueError("sync=False cannot take device offsets=(begins, ends): their packing reads "
                         "the packed total on the host")
    nseg = begins.size
    b = ctx.whole(begins, "begins")
    e = ctx.whole(ends, "ends")
    ctx.waits += list(b.events) + list(e.events)
    if b.dtype != np.int64:
        b = b.astype(np.int64, queue=ctx.q)
    if e.dtype != np.int64:
        e = e.astype(np.int64, queue=ctx.q)
    flag = transfer.zeroed_buffer(ctx.q, 4, allocator=ctx.alloc, events=ctx.events)
    lens = ctx.empty(nseg + 1, np.uint32)
    p = {"idx_t": idx_t}
    ctx.waits += list(b.events) + list(e.events)
    ctx.launch("gaps", p, "clk_gap_lengths", nseg + 1, b.data if nseg else flag, e.data if nseg else flag,
               np.uint64(nseg), np.int64(n), lens.data, flag, step="gaps")
    f = ctx.read_flag(flag)
    _gap_flags(f, n)
    total, _ = exclusive_scan(ctx.q, lens, nseg + 1, events=ctx.events)
    if total > n:
        raise ValueError("offsets=(begins, ends): segments overlap")
    off = lens.astype(np.uint64, queue=ctx.q)
    gidx = ctx.empty(total, idx_dt)
    cover = transfer.zeros(ctx.q, max(n, 1), np.uint32, allocator=ctx.alloc, events=ctx.events)
    ctx.waits += list(off.events)
    ctx.launch("gaps", p, "clk_gap_index", total, off.data, b.data if nseg else flag, np.uint64(nseg),
               gidx.data if total else flag, cover.data, flag, np.uint64(total), np.uint64(n), step="gaps")
    _gap_flags(ctx.read_flag(flag), n)
    return off, gidx, total


def _gap_flags(f, n):
    if f & 1:
        raise ValueError(f"offsets=(begins, ends): begins and ends must be within [0, len(keys) = {n}]")
    if f & 2:
        raise ValueError("offsets=(begins, ends): begin > end for some segment")
    if f & 8:
        raise ValueError("segments must be shorter than 2**32 elements")
    if f & 4:
        raise ValueError("offsets=(begins, ends): segments overlap")


# --------------------------------------------------------------------- main
def segmented_sort(keys, offsets, values, *, descending, device, segment_ids, num_segments, return_indices,
                   out, wait_for=None, allocator=None, overrides=None, events=None, sync=True):
    """The extended :func:`~.api.segmented_sort` (see its docstring), and
    :func:`~.api.sort`'s extended forms: after ``wait_for``, temporaries from
    ``allocator``, plan ``overrides``, steps into ``events`` (a
    :class:`~.api.SortEvents`); ``sync=False`` waits for nothing on the host
    (device segment_ids then need ``num_segments``; device gaps are refused)."""
    from .api import SortEvents, _run  # api imports this module: a cycle at import time

    keys = _check_keys(keys)
    n = keys.size
    kdt = np.dtype(keys.dtype)
    values = _check_values(values, n)
    nseg_arg = _check_num_segments(num_segments)
    if (offsets is None) == (segment_ids is None):
        raise ValueError("give exactly one of offsets and segment_ids")
    if nseg_arg is not None and segment_ids is None:
        raise ValueError("num_segments goes with segment_ids (offsets give the number of segments)")
    gaps = offsets is not None and _is_gap_pair(offsets)
    begins = ends = ids = None
    if gaps:
        begins = _array("offsets=(begins, ends): begins", offsets[0], integer=True)
        ends = _array("offsets=(begins, ends): ends", offsets[1], integer=True)
        if begins.size != ends.size:
            raise ValueError(f"offsets=(begins, ends): begins has {begins.size} entries "
                             f"but ends has {ends.size}")
        if is_device_array(begins) != is_device_array(ends):
            raise TypeError("offsets=(begins, ends): begins and ends must both be numpy or both device arrays")
        if begins.size >= 2**32:
            raise ValueError("at most 2**32 - 1 segments")
    elif offsets is not None:
        offsets = _check_csr(offsets, n)
    else:
        ids = _array("segment_ids", segment_ids, integer=True)
        if ids.size != n:
            raise ValueError(f"segment_ids has {ids.size} entries but keys has {n}")
    outs = _check_out(out, keys, values)
    arrays = [a for a in (keys, values, offsets if not gaps else None, ids, begins, ends) if a is not None]
    dev = device_for(device, *arrays)
    check_context(dev, *arrays)
    idx_dt = np.dtype(np.uint32 if n < 2**32 else np.uint64)
    idx_t = "uint" if idx_dt == np.uint32 else "ulong"
    events = SortEvents() if events is None else events
    ctx = _Ctx(dev, events, list(wait_for or []) + [ev for a in arrays if is_device_array(a) for ev in a.events],
               allocator, sync)
    overrides = overrides or {}

    # ---- segments -> CSR offsets of the (packed) elements
    gidx = None
    if ids is not None:
        if is_device_array(ids):
            offsets, _ = _device_ids(ctx, ids, n, nseg_arg)
        else:
            offsets, _ = _host_ids(ids, n, nseg_arg)
    elif gaps:
        if is_device_array(begins):
            offsets, gidx, total = _device_gaps(ctx, begins, ends, n, idx_t, idx_dt)
        else:
            offsets, g = _host_gaps(begins, ends, n)
            total = int(offsets[-1])
            gidx = ctx.whole(g.astype(idx_dt), "gidx")
    npk = total if gaps else n                         # elements sorted

    direct = (kdt in KEY_DTYPES and not return_indices and not gaps
              and (values is None or np.dtype(values.dtype).itemsize in (4, 8)))
    if direct:
        res = _run(dev, keys, offsets, values, descending, ctx.waits, allocator, overrides, events, sync)
        sk, sv = res if values is not None else (res, None)
        li = None
    else:
        doff = ctx.whole(offsets.astype(np.uint64) if not is_device_array(offsets) else offsets, "offsets")
        if doff.dtype.itemsize != 8:                 # device offsets of 32 bits
            doff = doff.astype(np.uint64, queue=ctx.q)
        dkeys = ctx.whole(keys, "keys")
        dvals = ctx.whole(values, "values") if values is not None else None
        ctx.waits += [ev for a in (dkeys, dvals, doff, gidx) if a is not None for ev in a.events]
        pkeys = ctx.gather(dkeys, gidx, npk, idx_t=idx_t, step="pack") if gaps else dkeys
        if kdt in WIDE_KEYS:
            wdt, src_t = WIDE_KEYS[kdt]
            wkeys = ctx.empty(npk, wdt)
            ctx.launch("widen", {"src_t": src_t, "dst_t": "float" if wdt.kind == "f" else
                                 ("int" if wdt.kind == "i" else "uint")}, "clk_widen", npk,
                       pkeys.data, wkeys.data, np.uint64(npk), step="widen")
        else:
            wkeys = pkeys
        iota = ctx.empty(npk, idx_dt)
        ctx.launch("iota", {"idx_t": idx_t}, "clk_iota", npk, iota.data, np.uint64(npk), step="iota")
        swk, perm = _run(dev, wkeys, doff, iota, descending, ctx.waits, allocator, overrides, events, sync)
        ctx.waits = list(perm.events)
        li = None
        if return_indices:
            li = ctx.empty(npk, np.int64)
            nseg = doff.size - 1
            ctx.launch("local_index", {"idx_t": idx_t}, "clk_local_index", npk, perm.data, doff.data,
                       np.uint64(nseg), li.data, np.uint64(npk), step="indices")
        if not gaps:
            sk = swk if kdt in KEY_DTYPES else ctx.gather(dkeys, perm, n, idx_t=idx_t)
            sv = ctx.gather(dvals, perm, n, idx_t=idx_t) if dvals is not None else None
        else:
            # gperm[i] = gidx[perm[i]]: the original position of packed output i's element;
            # result[gidx[i]] = input[gperm[i]] over a copy of the input
            gperm = ctx.gather(gidx, perm, npk, idx_t=idx_t, step="pack")
            sk = _copy(ctx, dkeys)
            ctx.gather(dkeys, gperm, npk, dst=sk, didx=gidx, idx_t=idx_t, step="scatter")
            sv = None
            if dvals is not None:
                sv = _copy(ctx, dvals)
                ctx.gather(dvals, gperm, npk, dst=sv, didx=gidx, idx_t=idx_t, step="scatter")
            if li is not None:
                full = ctx.empty(n, np.int64)
                full.fill(-1, queue=ctx.q)
                ctx.gather(li, None, npk, dst=full, didx=gidx, idx_t=idx_t, step="scatter")
                li = full
    return _finish(ctx, keys, values, sk, sv, li, outs)


def _copy(ctx, a):
    out = ctx.empty(a.size, a.dtype)
    if a.nbytes:
        ctx.events.add("copy", cl.enqueue_copy(ctx.q, out.data, a.data, byte_count=a.nbytes,
                                               wait_for=ctx.waits or None))
    return out


def _finish(ctx, keys, values, sk, sv, li, outs):
    """Outputs in ``out`` (copied / downloaded there) or new arrays, numpy for numpy keys."""
    q = ctx.q
    last = cl.enqueue_marker(q)
    res = [sk] + ([sv] if values is not None else [])
    for a in res + ([li] if li is not None else []):
        a.events.clear()
        a.add_event(last)
    if is_device_array(keys):
        if outs is not None:
            for i, (o, r) in enumerate(zip(outs, res)):
                if r.nbytes:
                    ev = cl.enqueue_copy(q, o.base_data, r.data, dst_offset=o.offset, byte_count=r.nbytes,
                                         wait_for=list(o.events) + list(r.events))
                    ctx.events.add("out", ev)
                    o.add_event(ev)
                res[i] = o
        got = res + ([li] if li is not None else [])
    else:
        # the host waits for the sort before the downloads (it blocks for them anyway):
        # on Intel's CPU runtime a read queued behind the marker ran at half speed
        # (segmented_sort(..., out=numpy) of 2^24 keys 385-780 ms against 195 ms)
        last.wait()
        got = []
        for i, r in enumerate(res):
            o = outs[i] if outs is not None else None
            got.append(transfer.download(ctx.dev, r, out=o, queue=q, events=ctx.events))
        if li is not None:
            got.append(transfer.download(ctx.dev, li, queue=q, events=ctx.events))
    return got[0] if len(got) == 1 else tuple(got)
