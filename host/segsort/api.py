"""Segmented sort: sort many independent segments of keys (and values) at once.

The seed's design (fast-segmented-sort-on-gpus.txt, section 3):

1. **Binning** on the device (histogram -> scan -> scatter): each segment's
   length picks a bin; the histogram (sub-group ballot/popcount, one global
   atomic per bin and work-group) is counted by ``smallsort`` where that
   runs, else by ``bin_hist``; ``bin_scatter`` scans the counts and scatters
   the ids of the segments of the longer bins. Launch sizes come from the
   segment count, so all of it is enqueued without a host round trip; then
   the host reads the counts (one small read of ``3 * nbins + 1`` words into
   page-locked memory, which also carries the offsets-validation flags) to
   size the bins' launches and skip empty bins.
2. **small sort** (``smallsort``): the reg bins up to ``small_max`` need no
   bin counts: a work-group takes consecutive segments, groups them by bin in
   local memory and sorts each group with its bin's binding. Uniformly short
   segments are sorted by this one kernel (``bin_scatter`` returns at once).
3. **reg-sort** (``regsort``): bins of padded length ``P = k * m <= 512``;
   ``m`` work-items of a sub-group sort a segment of ``k * m`` elements in
   registers with the bitonic network of Algorithm 1 (exch_local /
   exch_intxn / exch_parallel over sub-group shuffles), padded with sentinels.
4. **smem-merge** (``block_sort``): bins up to ``block_max``; a work-group
   sorts sub-group chunks with reg-sort and merges them by merge path in
   local memory.
5. **grid bin**: longer segments are cut into tiles of ``block_max`` sorted by
   the block kernel into a packed buffer, then merged in global-memory rounds
   (merge path per work-item), then gathered.

Elements are sorted as (order-preserving unsigned key, index in segment): the
index breaks ties (so every sort is stable, ``stable=True`` costs nothing
extra) and lets the write-out gather the input's own key bits and values.
Bin boundaries, bindings and work-group sizes come from the ``segsort``
Tunable (``Tunable.resolve``), with model-based defaults.
"""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.device import as_device
from ..core.tuning import Tunable, register

TEMPLATES = ("segsort.cl.mako", "segsort_merge.cl.mako")

KEY_DTYPES = {
    np.dtype(np.uint32): ("u", 32), np.dtype(np.int32): ("i", 32), np.dtype(np.float32): ("f", 32),
    np.dtype(np.uint64): ("u", 64), np.dtype(np.int64): ("i", 64), np.dtype(np.float64): ("f", 64),
}
_UINT = {4: np.uint32, 8: np.uint64}
REG_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
BLOCK_SIZES = (1024, 2048, 4096, 8192)


# ----------------------------------------------------------------- tuning
def _sg(device, wg=256):
    """Sub-group width the bindings may assume (khr: unknown, take 8)."""
    return device.sg_size_for(device.sg_backend, wg) or 8


def default_params(device, problem):
    """Model-based defaults: bins by powers of two, k elements per work-item."""
    key_bits = np.dtype(problem.get("dtype", "uint32")).itemsize * 8
    sg = _sg(device)
    reg_max = min(512, 16 * sg)
    scratch = device.sg_backend == "local"
    # small_max: on back ends without hardware shuffles every network step of
    # smallsort is a barrier, and PoCL's compile time grows steeply with them
    # (cold, measured: 7 s for bins <= 16, 17 s <= 32, 53 s <= 64, 304 s <= 128)
    p = {"bin_wg": 256, "reg_wg": 128, "reg_max": reg_max, "block_k": 8,
         "small_max": min(16 if scratch else 128, reg_max),
         "reg_write": "striped" if device.is_gpu else "direct",
         "xchg": "scratch" if scratch else "shuffle",
         "block_max": 4096 if key_bits == 32 else 2048, "merge_k": 8, "merge_wg": 256}
    kmin = 4 if scratch else 2      # shuffles: more work-items per short segment pay (measured)
    for P in REG_SIZES:
        if P <= reg_max:
            p[f"k{P}"] = min(P, max(kmin, P // sg)) if P > 1 else 1
    return p


def _restrict(params, device):
    sg = _sg(device)
    for P in REG_SIZES:
        if P > params["reg_max"]:
            continue
        k = params.get(f"k{P}")
        if not k or P % k or P // k > sg or k > 16:
            return False
    small = params.get("small_max", 0)
    if small and (small not in REG_SIZES or small > params["reg_max"]
                  or (device.sg_backend == "local" and small > 32)    # compile time, see defaults
                  or _small_lmem(params, small, 16) > device.local_mem_size):
        return False
    wb = params["block_max"] // params["block_k"]
    if wb > device.max_work_group_size or wb < sg or params["block_max"] <= params["reg_max"]:
        return False
    return params["reg_wg"] <= device.max_work_group_size and params["reg_wg"] % sg == 0


def _reg_lmem(params, regs, elem_bytes):
    """Bytes of the largest regsort local arrays (xs, when declared; an emulated
    sub-group's sg_mem, 4 per work-item)."""
    wg = params["reg_wg"]
    kmax = max(params[f"k{P}"] for P in regs)
    return _lpad(kmax * wg, elem_bytes) * elem_bytes + 4 * wg


def _small_lmem(params, small, elem_bytes):
    """Bytes of smallsort's local arrays: those of regsort for its classes,
    llen + lstart (12 per work-item), cnt + cbase (8 per class), the bin
    counts lc (4 per bin, at most 64 bytes)."""
    sizes = [P for P in REG_SIZES if P <= small]
    return _reg_lmem(params, sizes, elem_bytes) + 12 * params["reg_wg"] + 8 * len(sizes) + 64


def _lpad(n, elem_bytes):
    """Slots of a local array of n elements padded as the templates' LPAD."""
    return n + n // (128 // elem_bytes)


SPACE = {
    "reg_wg": [64, 128, 256],
    "small_max": [0, 16, 32, 64, 128, 256],
    "reg_write": ["direct", "striped", "transpose"],
    "xchg": ["shuffle", "scratch"],
    "block_k": [4, 8, 16],
    "block_max": [2048, 4096],
    "merge_k": [4, 8, 16],
    **{f"k{P}": [x for x in (1, 2, 4, 8, 16) if x <= P and P // x <= 32] for P in REG_SIZES[1:]},
}


# ------------------------------------------------------------------ plan
class _Plan:
    """Bins and built programs for one (device, key width, params); the key kind,
    order and value width are kernel arguments."""

    def __init__(self, device, key_bits, params):
        self.device = device
        self.key_bits = key_bits
        base = dict(key_bits=key_bits, xchg=params["xchg"])
        self.elem_bytes = 8 if key_bits == 32 else 16
        sg = _sg(device)
        regs = [P for P in REG_SIZES if P <= params["reg_max"]]
        bmax = params["block_max"]
        blocks = [P for P in BLOCK_SIZES if params["reg_max"] < P <= bmax]
        # local memory: block tile + (local back end) the exchange scratch
        while blocks and self._block_lmem(blocks[-1], params, sg) > device.local_mem_size:
            blocks.pop()
        self.bounds = regs + blocks                 # bin i: length <= bounds[i]; last bin: grid
        self.nbins = len(self.bounds) + 1
        self.kinds = []                             # per bin: ("reg", k, m) | ("block", k, m, P)
        for P in regs:
            k = params[f"k{P}"]
            self.kinds.append(("reg", k, P // k))
        for P in blocks:
            k = params["block_k"]
            self.kinds.append(("block", k, min(sg, P // k), P))
        small = params.get("small_max", 0)
        self.nsmall = sum(1 for P in regs if P <= small)   # bins sorted by smallsort
        self.tile = blocks[-1] if blocks else None
        self.bin_wg = params["bin_wg"]
        # a configuration tuned for 32-bit keys may not fit 64-bit keys' local
        # arrays: fewer work-items per work-group then (same bindings; smallsort
        # needs one work-item per bin: at least 16)
        while params["reg_wg"] > max(sg, 16) and max(
                _reg_lmem(params, regs, self.elem_bytes),
                _small_lmem(params, small, self.elem_bytes) if self.nsmall else 0) > device.local_mem_size:
            params = dict(params, reg_wg=params["reg_wg"] // 2)
        self.reg_wg = params["reg_wg"]
        self.merge_k = params["merge_k"]
        self.merge_wg = params["merge_wg"]
        # a merge work-group's outputs (local memory) must divide the tile
        while self.tile and self.merge_k > 1 and (
                self.merge_k * self.merge_wg > self.tile
                or self.merge_k * self.merge_wg * self.elem_bytes + 64 > device.local_mem_size):
            self.merge_k //= 2
        self.prg_bin = build(device, "segsort.cl.mako", "binning",
                             dict(wg_size=self.bin_wg, bounds=self.bounds, nsmall=self.nsmall,
                                  sg_size=device.sg_size_for(device.sg_backend, self.bin_wg)))
        self.prg_small = None
        if self.nsmall:
            classes = [(P, k, m) for (_, k, m), P in zip(self.kinds[:self.nsmall], regs)]
            self.prg_small = build(device, "segsort.cl.mako", "smallsort",
                                   dict(base, wg_size=self.reg_wg, classes=classes,
                                        write=params["reg_write"], bounds=self.bounds))
        self.prg = []
        for b, kd in enumerate(self.kinds):
            if b < self.nsmall:
                self.prg.append(None)           # sorted by smallsort
            elif kd[0] == "reg":
                self.prg.append(build(device, "segsort.cl.mako", "regsort",
                                      dict(base, wg_size=self.reg_wg, k=kd[1], m=kd[2], nbins=self.nbins,
                                           write=params["reg_write"])))
            else:
                self.prg.append(self._build_block(device, b, base))
        self.prg_grid = (build(device, "segsort_merge.cl.mako", "grid",
                               dict(base, wg_size=self.merge_wg, K=self.merge_k))
                         if self.tile else None)

    # Kernel objects come from program_kernel: one per thread, since setting
    # arguments and enqueueing is not atomic (plans are shared by threads).
    @property
    def small(self):
        return program_kernel(self.prg_small, "smallsort") if self.prg_small else None

    @property
    def kernels_bin(self):
        return [program_kernel(self.prg_bin, x) for x in ("bin_hist", "bin_scatter")]

    @property
    def kern(self):
        return [program_kernel(p, "regsort" if kd[0] == "reg" else "block_sort") if p else None
                for p, kd in zip(self.prg, self.kinds)]

    @property
    def tile_sort(self):
        return program_kernel(self.prg[-1], "tile_sort") if self.tile else None

    @property
    def kernels_grid(self):
        return ([program_kernel(self.prg_grid, x) for x in ("grid_merge", "grid_gather")]
                if self.tile else None)

    def _build_block(self, device, b, base):
        """Build bin ``b``'s block program; where the kernel cannot launch P / k
        work-items (its CL_KERNEL_WORK_GROUP_SIZE, e.g. from register use on
        NVIDIA), give each work-item twice the elements (up to 16) instead."""
        _, k, m, P = self.kinds[b]
        while True:
            prg = build(device, "segsort_merge.cl.mako", "block",
                        dict(base, wg_size=P // k, k=k, m=m, P=P, nbins=self.nbins))
            limit = min(cl.Kernel(prg, name).get_work_group_info(
                cl.kernel_work_group_info.WORK_GROUP_SIZE, device.cl_device)
                for name in ("block_sort", "tile_sort"))
            if P // k <= limit or k >= 16 or P // (2 * k) < m:
                break
            k *= 2
        self.kinds[b] = ("block", k, m, P)
        return prg

    def _block_lmem(self, P, params, sg):
        k = params["block_k"]
        scratch = P if params["xchg"] == "scratch" else 0
        return _lpad(P + scratch, self.elem_bytes) * self.elem_bytes + 4 * (P // k) + 64


_plans = {}


def _plan(device, kdt, val_bits, n, params=None):
    source = "explicit"
    if params is None:
        params, source = TUNABLE.resolve(device, {"size": n, "dtype": kdt.name, "dims": val_bits})
    key_bits = kdt.itemsize * 8
    key = (device.context.int_ptr, device.cl_device.int_ptr, device.sg_backend, key_bits,
           tuple(sorted(params.items())))
    p = _plans.get(key)
    if p is None:
        p = _plans[key] = _Plan(device, key_bits, params)
    p.source = source
    return p


# ------------------------------------------------------------- validation
def _is_dev(a):
    return isinstance(a, cla.Array)


def _check_1d(name, a):
    if not (_is_dev(a) or isinstance(a, np.ndarray)):
        raise TypeError(f"{name} must be a numpy array or pyopencl.array.Array, got {type(a).__name__}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")


def _validate(keys, offsets, values):
    if isinstance(keys, (list, tuple)):
        keys = np.asarray(keys)
    if isinstance(offsets, (list, tuple)):
        offsets = np.asarray(offsets)
    if isinstance(values, (list, tuple)):
        values = np.asarray(values)
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
        o = offsets.astype(np.int64, copy=False)
        if offsets.dtype == np.uint64 and (offsets > np.iinfo(np.int64).max).any():
            raise ValueError("offsets out of range [0, len(keys)]")
        if o[0] != 0:
            raise ValueError(f"offsets[0] must be 0, got {o[0]}")
        if o[-1] != n:
            raise ValueError(f"offsets[-1] must equal len(keys) = {n}, got {o[-1]}")
        d = np.diff(o)
        if (d < 0).any():
            raise ValueError("offsets must be non-decreasing")
        if d.size and d.max() >= 2**32:
            raise ValueError("segments must be shorter than 2**32 elements")
    return keys, offsets, values


def _device_for(device, *arrays):
    if device is None:
        for a in arrays:
            if _is_dev(a):
                return as_device(a.queue)      # cached per queue
    return as_device(device)


def _to_dev(q, a, dtype, pool):
    """Device array of ``a``'s bits viewed as ``dtype`` (no copy for device arrays)."""
    if _is_dev(a):
        if a.dtype.itemsize != np.dtype(dtype).itemsize:
            return a.astype(dtype, queue=q)
        if a.offset or not a.flags.c_contiguous:
            a = a.copy(queue=q)
        return a.view(dtype) if a.dtype != dtype else a
    return cla.to_device(q, np.ascontiguousarray(a).view(dtype), allocator=pool)


# --------------------------------------------------------------- running
def run(keys, offsets, values=None, *, descending=False, stable=False, device=None, params=None,
        events=None):
    """segmented_sort's body; ``params`` overrides the tuned parameters (tuner,
    tests), ``events`` (a list) collects every enqueued kernel's event."""
    keys, offsets, values = _validate(keys, offsets, values)
    dev = _device_for(device, keys, values, offsets)
    q = dev.queue
    for a in (keys, values, offsets):
        if _is_dev(a) and a.context.int_ptr != dev.context.int_ptr:
            raise ValueError("device arrays must live on the context of the chosen device")
    for a in (keys, values, offsets):
        if _is_dev(a) and a.queue is not None and a.queue != q:
            a.finish()              # produced on another queue: wait for its pending writes
    kdt = np.dtype(keys.dtype)
    n, nseg = keys.size, offsets.size - 1
    on_dev = _is_dev(keys)
    val_bits = 0 if values is None else values.dtype.itemsize * 8
    ku = _UINT[kdt.itemsize]
    vu = _UINT[values.dtype.itemsize] if values is not None else None
    ev = events if events is not None else []
    if n == 0 or nseg == 0:
        if _is_dev(offsets):
            _check_dev_offsets_trivial(offsets, n)
        ok = keys.copy()
        return ok if values is None else (ok, values.copy())

    plan = _plan(dev, kdt, val_bits, n, params)
    mode = np.uint32({"u": 0, "i": 1, "f": 2}[KEY_DTYPES[kdt][0]] | (4 if descending else 0))
    pool = dev.pool     # outputs and temporaries: no fresh allocations (see Device.pool)
    dkeys = _to_dev(q, keys, ku, pool)
    dvals = _to_dev(q, values, vu, pool) if values is not None else None
    doff = _to_dev(q, offsets if offsets.dtype.itemsize == 8 or _is_dev(offsets) else offsets.astype(np.uint64),
                   np.uint64, pool)
    okeys = cla.empty(q, n, ku, allocator=pool)
    ovals = cla.empty(q, n, vu, allocator=pool) if values is not None else None

    nb = plan.nbins
    ctl = cla.empty(q, 3 * nb + 1, np.uint32, allocator=pool)
    seg_ids = cla.empty(q, max(nseg, 1), np.uint32, allocator=pool)
    wg = plan.bin_wg
    gsz = -(-nseg // wg) * wg
    kb = plan.kernels_bin
    if values is not None:
        vargs = [dvals.data, ovals.data, np.uint32(values.dtype.itemsize)]
    else:
        vargs = [ctl.data, ctl.data, np.uint32(0)]       # unused placeholders
    # Histogram by smallsort where it runs (it needs no bin counts, sorts the
    # short segments straight from the offsets and counts every segment's bin
    # on the way), else by bin_hist; then bin_scatter. All are enqueued before
    # the one read of the counts (and the offsets-check flags), which sizes
    # the bins' launches. Events: fill, histogram kernel, bin_scatter, read,
    # the bins' kernels.
    unseg, un = np.uint32(nseg), np.uint64(n)
    ev.append(cl.enqueue_fill_buffer(q, ctl.data, np.uint32(0), 0, ctl.nbytes))
    small = plan.small
    if small is not None:
        sw = plan.reg_wg
        ev.append(small(q, (-(-nseg // sw) * sw,), (sw,), dkeys.data, *vargs, mode, doff.data,
                        unseg, un, ctl.data, okeys.data))
    else:
        ev.append(kb[0](q, (gsz,), (wg,), doff.data, unseg, un, ctl.data))
    ev.append(kb[1](q, (gsz,), (wg,), doff.data, unseg, un, ctl.data, seg_ids.data))
    staged = dev.staging(3 * nb + 1)
    read = cl.enqueue_copy(q, staged, ctl.data, is_blocking=False)
    ev.append(read)
    q.flush()
    read.wait()
    hctl = staged[:3 * nb + 1].copy()
    if hctl[3 * nb]:
        f = int(hctl[3 * nb])
        why = []
        if f & 1:
            why.append("offsets must be non-decreasing and within [0, len(keys)]")
        if f & 2:
            why.append(f"offsets must start at 0 and end at len(keys) = {n}")
        if f & 4:
            why.append("segments must be shorter than 2**32 elements")
        raise ValueError("; ".join(why))
    counts = hctl[:nb]
    kern = plan.kern
    for b, kd in enumerate(plan.kinds):
        c = int(counts[b])
        if not c or b < plan.nsmall:
            continue
        if kd[0] == "reg":
            m = kd[2]
            g = -(-c * m // plan.reg_wg) * plan.reg_wg
            ev.append(kern[b](q, (g,), (plan.reg_wg,), dkeys.data, *vargs, mode, doff.data,
                              seg_ids.data, ctl.data, np.uint32(b), okeys.data))
        else:
            _, k, m, P = kd
            w = P // k
            ev.append(kern[b](q, (c * w,), (w,), dkeys.data, *vargs, mode, doff.data,
                              seg_ids.data, ctl.data, np.uint32(b), okeys.data))
    q.flush()
    cg = int(counts[nb - 1])
    if cg:
        _grid(plan, q, dkeys, vargs, mode, okeys, doff, seg_ids, int(counts[plan.nsmall:nb - 1].sum()), cg, ev)
    return _out(okeys, ovals, kdt, values, on_dev)


def _out(okeys, ovals, kdt, values, on_dev):
    okeys = okeys.view(kdt)
    if values is not None:
        ovals = ovals.view(values.dtype)
    if not on_dev:
        okeys = okeys.get()
        ovals = ovals.get() if values is not None else None
    return okeys if values is None else (okeys, ovals)


def _check_dev_offsets_trivial(offsets, n):
    o = offsets.get()
    if o[0] != 0 or o[-1] != n or (np.diff(o.astype(np.int64)) < 0).any():
        raise ValueError(f"offsets must be non-decreasing from 0 to len(keys) = {n}")


def _grid(plan, q, dkeys, vargs, mode, okeys, doff, seg_ids, gstart_in_bins, cg, ev):
    """Long segments: tile sort into a packed buffer, merge rounds, gather.

    Reads the grid bin's segment ids and their offsets (2 * count words) to
    lay out the packed buffer and the tile table on the host."""
    T = plan.tile
    pool = okeys.allocator
    ids = seg_ids[gstart_in_bins:gstart_in_bins + cg]
    ids_h = ids.get().astype(np.int64)
    starts = cla.take(doff, ids, queue=q).get().astype(np.int64)     # ids stay on the device
    ends = cla.take(doff, ids + 1, queue=q).get().astype(np.int64)
    order = np.argsort(ids_h, kind="stable")          # input order: better locality
    starts, ends = starts[order], ends[order]
    lens = ends - starts
    padded = -(-lens // T) * T
    pstart = np.zeros(cg + 1, np.uint64)
    np.cumsum(padded, out=pstart[1:])
    total = int(pstart[-1])
    ntiles = padded // T
    tseg = np.repeat(np.arange(cg), ntiles)
    tfirst = np.repeat(pstart[:-1].astype(np.int64) // T, ntiles)
    tidx = np.arange(total // T) - tfirst                  # tile number within its segment
    tstart = starts[tseg].astype(np.uint64)
    ttoff = (tidx * T).astype(np.uint32)
    tlen = lens[tseg].astype(np.uint32)
    tdst = (pstart[tseg] + ttoff).astype(np.uint64)
    dt = [cla.to_device(q, x, allocator=pool) for x in (tstart, ttoff, tlen, tdst)]
    ebytes = plan.elem_bytes
    bufs = [pool.allocate(total * ebytes) for _ in range(2)]
    tile_sort = plan.tile_sort
    _, k, m, P = plan.kinds[-1]
    w = P // k
    ev.append(tile_sort(q, (len(tstart) * w,), (w,), dkeys.data, mode, *[x.data for x in dt], bufs[0]))
    dps = cla.to_device(q, pstart, allocator=pool)
    grid_merge, grid_gather = plan.kernels_grid
    K, mw = plan.merge_k, plan.merge_wg
    gsz = total // (K * mw) * mw                      # K * mw divides the tile, hence total
    width, src = T, 0
    maxlen = int(padded.max())
    while width < maxlen:
        ev.append(grid_merge(q, (gsz,), (mw,), bufs[src], bufs[1 - src], dps.data, np.uint32(cg),
                                np.uint64(total), np.uint64(width)))
        src, width = 1 - src, width * 2
    gs = cla.to_device(q, starts.astype(np.uint64), allocator=pool)
    gl = cla.to_device(q, lens.astype(np.uint32), allocator=pool)
    g2 = -(-total // mw) * mw
    ev.append(grid_gather(q, (g2,), (mw,), bufs[src], dps.data, np.uint32(cg), np.uint64(total),
                             gs.data, gl.data, dkeys.data, *vargs, mode, okeys.data))


# ------------------------------------------------------------ the Tunable
def _problems(quick):
    """Power-law lengths (alpha 1, up to 2000: every reg and block bin) per
    size bucket; the cache keys on size, key dtype and value width only."""
    sizes = [1 << 18] if quick else [1 << 20, 1 << 22, 1 << 24, 1 << 26]
    return [{"size": s, "dtype": "uint32", "dims": 32, "lengths": "powerlaw"} for s in sizes]


def _setup(device, problem):
    rng = np.random.default_rng(12345)
    n = problem["size"]
    lk = problem.get("lengths", "powerlaw")
    if lk.startswith("uniform"):
        L = int(lk[7:])
        lens = np.full(n // L, L)
    else:
        lens = powerlaw_lengths(rng, n, 1.0, 2000)
    off = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    nn = int(off[-1])
    q = device.queue
    return {"keys": cla.to_device(q, rng.integers(0, 2**32, nn, dtype=np.uint32)),
            "vals": cla.to_device(q, np.arange(nn, dtype=np.uint32)),
            "off": cla.to_device(q, off)}


def _launch(device, params, state):
    ev = []
    k, v = run(state["keys"], state["off"], state["vals"], device=device, params=params, events=ev)
    return ev, lambda: (k.get(), v.get())     # copied back only when the sweep checks it


def powerlaw_lengths(rng, n_total, alpha, max_len):
    """Segment lengths with P(l) ~ l^-alpha on [1, max_len] summing to ~n_total."""
    ls = np.arange(1, max_len + 1, dtype=np.float64)
    p = ls ** -alpha
    p /= p.sum()
    mean = float((ls * p).sum())
    lens = rng.choice(np.arange(1, max_len + 1), size=int(n_total / mean * 1.1) + 1, p=p)
    c = np.cumsum(lens)
    cut = int(np.searchsorted(c, n_total))
    lens = lens[:cut + 1].copy()
    lens[-1] -= int(c[cut] - n_total) if cut < len(c) else 0
    return lens[lens > 0] if lens.size else lens


def _kernels(device, params):
    """(kernel, wg_size, 0) of every kernel a configuration launches (32-bit keys)."""
    plan = _plan(device, np.dtype(np.uint32), 32, 1, params)
    out = [(k, plan.bin_wg, 0) for k in plan.kernels_bin]
    if plan.small is not None:
        out.append((plan.small, plan.reg_wg, 0))
    for kern, kd in zip(plan.kern, plan.kinds):
        if kern is None:
            continue
        out.append((kern, plan.reg_wg if kd[0] == "reg" else kd[3] // kd[1], 0))
    if plan.tile:
        out.append((plan.tile_sort, plan.kinds[-1][3] // plan.kinds[-1][1], 0))
        out += [(k, plan.merge_wg, 0) for k in plan.kernels_grid]
    return out


TUNABLE = register(Tunable("segsort", TEMPLATES, SPACE, default_params, restrict=_restrict,
                           problem_defaults={"dtype": "uint32", "dims": 32},
                           problems=_problems, setup=_setup, launch=_launch, kernels=_kernels))


def segmented_sort(keys, offsets, values=None, *, descending=False, stable=False, device=None):
    """Sort each segment ``keys[offsets[i]:offsets[i+1]]`` (and ``values`` alongside).

    ``offsets`` is CSR: nseg + 1 non-decreasing entries from 0 to len(keys).
    Keys: uint32, int32, float32, uint64, int64, float64; values: any 4- or
    8-byte dtype. Floats order as numpy does (NaN last, in either order);
    -0.0 and 0.0 tie. Ties keep input order (the sort is always stable, so
    ``stable=True`` is honoured at no cost). numpy inputs give numpy outputs;
    ``pyopencl.array.Array`` keys give device arrays on the chosen device's
    queue (the keys' queue when ``device`` is not given).
    Returns sorted keys, or (keys, values).

    Device-resident offsets are validated on the device during binning; a bad
    one raises ValueError (the short-segment kernel may have run by then; it
    only touches segments within [0, len(keys)], and nothing is returned).
    Outputs and temporaries come from the device's memory pool
    (``Device.pool``; ``free_held()`` returns the kept memory): a device
    output used on another queue must be finished there before it is dropped.
    """
    return run(keys, offsets, values, descending=descending, stable=stable, device=device)
