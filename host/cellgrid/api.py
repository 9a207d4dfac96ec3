"""Cell-list grid built on the device, and pair statistics over it.

API
---
``Grid(device, points, cell_size, box=None, like=None)``
    Points ``(n, d)`` (d = 1..8; float32/float64 numpy or ``pyopencl.array``;
    a 1-D array is ``(n, 1)``) are binned into cells of side ``cell_size``
    (``lo`` = the data's minimum per dimension), or, with ``box`` (periodic,
    orthorhombic; lengths per dimension), into ``max(1, floor(L / cell_size))``
    cells per dimension of width ``L / that`` (>= cell_size) over ``[0, L)``,
    points wrapped into the box. Everything is done on the device: bounds,
    64-bit linearized cell ids ``sum(c_k * stride_k)`` (``stride_0 = 1``), a
    bitonic sort of (cell id, index) pairs, cell starts by a scan, compaction
    of the non-empty cells. Only non-empty cells are stored. Attributes (device
    arrays): ``cell_ids`` (uint64, sorted unique), ``cell_start``,
    ``cell_count``, ``point_cell`` (uint32: the cell of each sorted point),
    ``coords`` (``(d, n)`` SoA, sorted by cell; the input coordinates, not
    wrapped), ``perm`` (uint32: sorted position -> input index); host values
    ``n``, ``d``, ``dtype``, ``num_cells``, ``lo``, ``width``, ``ncell``,
    ``stride``, ``box``, ``cell_size``. ``like=grid`` reuses another grid's
    geometry (for cross pairs); ``Grid.joint(device, x, y, cell_size, box)``
    builds two grids over the union of their bounds. ``grid.get()`` copies
    everything to numpy.

``grid_pair_count(grid, r, other=None, *, variant=None) -> int``
    Pairs at distance < r (``r <= grid.cell_size``): self pairs i < j, or all
    (i, j) between ``grid`` and ``other`` (same geometry).
``grid_histogram(grid, edges, other=None, *, variant=None) -> int64 counts``
    ``numpy.histogram`` of the pairwise distances over ``edges`` (increasing,
    ``edges[-1] <= grid.cell_size``; last bin closed).
``pair_count_grid(x, r, y=None, *, box=None, device=None, variant=None) -> int``
``distance_histogram_grid(x, bins, y=None, *, range=None, box=None, device=None,
variant=None) -> (counts, edges)``
    The same semantics as ``clkernels.pair_count`` / ``distance_histogram``:
    they build the grid(s) with cell side r (or the largest edge; larger where
    the cell count would pass 2^62) and count. The planner calls these.

Variants (``variant=``; ``None`` chooses from the device and the mean points
per cell, see :func:`choose_variant`):

* ``'point'``: one work-item per point; each of the 3^d neighbour cell ids is
  looked up by binary search in ``cell_ids`` (periodic wrap with a box; a
  dimension of 1 or 2 cells keeps only its distinct neighbours). Self pairs:
  half the stencil (larger ids) plus j > i inside the own cell.
* ``'row'``: one work-item per point; the three cells c0-1..c0+1 of dimension
  0 have consecutive ids, so each of the 3^(d-1) rows is one contiguous range
  of sorted points (two where a periodic row wraps), found by one binary
  search. Self pairs: the neighbour points at later sorted positions.
* ``'cell'``: one work-group per non-empty cell (its size the mean occupancy
  rounded up to a power of two, 32..256); the cell's points against tiles of
  each neighbour cell's points staged in local memory (the 'point' stencil).

Outputs: counts per work-item reduced per work-group, then one 64-bit global
atomic; histograms in a private local-memory histogram per work-group (32-bit
counters, 64-bit where one work-group may count 2^32 pairs), flushed with
64-bit global atomics, or straight global atomics when the bins do not fit. Distances are computed
in the input precision as squared distances (minimum image with a box) against
squared thresholds; totals are int64.
"""

import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..core.build import build, program_kernel
from ..core.inputs import box as check_box
from ..core.device import as_device

MAX_DIM = 8
_MAX_N = 2 ** 31 - 1
_MAX_CELLS = 2 ** 62
_SCAN_ITEMS = 8
VARIANTS = ("point", "row", "cell")
#: mean points per cell from which the work-group-per-cell variant is chosen
CELL_VARIANT_MIN_OCCUPANCY = 32


def _wg(device):
    """Work-group size of the grid kernels (a power of two)."""
    w = min(256, device.max_work_group_size)
    return 1 << (w.bit_length() - 1)


_k = program_kernel     # a cached cl.Kernel per (program, name, thread)


def _groups(n, wg):
    return max(1, (n + wg - 1) // wg)


# ------------------------------------------------------------------ inputs
def _check_points(x, name="points"):
    """(array, n, d, dtype, on_device) with shape checks; no transfer yet."""
    if isinstance(x, cla.Array):
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
        if x.ndim == 1:
            x = x.reshape(x.shape[0], 1)
        if x.ndim != 2 or not x.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous (n, d) array, got shape {x.shape}")
        arr, dev = x, True
    else:
        arr = np.asarray(x)
        if arr.dtype not in (np.float32, np.float64):
            if arr.dtype.kind not in "iub":
                raise TypeError(f"{name} must be float32 or float64, got {arr.dtype}")
            arr = arr.astype(np.float64)
        if arr.ndim == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be an (n, d) array, got shape {arr.shape}")
        arr = np.ascontiguousarray(arr)
        dev = False
    n, d = arr.shape
    if not 1 <= d <= MAX_DIM:
        raise ValueError(f"{name} must have 1..{MAX_DIM} dimensions, got d = {d}")
    if n > _MAX_N:
        raise ValueError(f"{name}: at most {_MAX_N} points, got {n}")
    if not dev and n and not np.isfinite(arr).all():
        raise ValueError(f"{name} contain NaN or inf")
    return arr, n, d, arr.dtype, dev


def _check_cell_size(cell_size):
    try:
        c = float(cell_size)
    except (TypeError, ValueError):
        raise TypeError(f"cell_size must be a number, got {type(cell_size).__name__}") from None
    if not (math.isfinite(c) and c > 0):
        raise ValueError(f"cell_size must be finite and > 0, got {cell_size!r}")
    return c


def _upload(device, arr, on_device):
    if on_device:
        if arr.context.int_ptr != device.context.int_ptr:
            raise ValueError("device array belongs to another context than the device")
        return arr
    return cla.to_device(device.queue, arr)


def _real(dtype):
    return "double" if np.dtype(dtype) == np.float64 else "float"


def device_bounds(device, xd):
    """(mins, maxs) float64 per dimension of device points (n, d) with n > 0,
    computed on the device; ValueError if any coordinate is NaN or inf."""
    n, d = xd.shape
    wg = _wg(device)
    ng = min(_groups(n, wg), 4 * device.compute_units, 1024)
    prg = build(device, "grid.cl.mako", "points",
                dict(real=_real(xd.dtype), dim=d, periodic=False, wg_size=wg))
    q = device.queue
    mins = cla.empty(q, ng * d, xd.dtype)
    maxs = cla.empty(q, ng * d, xd.dtype)
    bad = cla.empty(q, ng, np.uint32)
    _k(prg, 'grid_bounds')(q, (ng * wg,), (wg,), xd.data, np.uint32(n), mins.data, maxs.data, bad.data)
    if bad.get().any():
        raise ValueError("points contain NaN or inf")
    mn = mins.get().reshape(ng, d).min(axis=0).astype(np.float64)
    mx = maxs.get().reshape(ng, d).max(axis=0).astype(np.float64)
    return mn, mx


# ------------------------------------------------------------ sort and scan
def sort_pairs(device, keys, vals, wg=None):
    """Sort device arrays keys (uint64) / vals (uint32) in place by (key, val).

    The length must be a power of two and at least 2*wg (pad with the largest
    key). A bitonic sort: blocks of 2*wg in local memory, longer strides by one
    launch per step.
    """
    wg = wg or _wg(device)
    n2 = keys.size
    block = 2 * wg
    if n2 & (n2 - 1) or n2 < block:
        raise ValueError(f"sort length must be a power of two >= {block}, got {n2}")
    prg = build(device, "grid.cl.mako", "sort", dict(wg_size=wg))
    q = device.queue
    nb = n2 // block
    _k(prg, 'bitonic_block_sort')(q, (nb * wg,), (wg,), keys.data, vals.data)
    k = 2 * block
    while k <= n2:
        j = k // 2
        while j >= block:
            _k(prg, 'bitonic_step')(q, (n2 // 2,), None, keys.data, vals.data, np.uint64(k), np.uint64(j))
            j //= 2
        _k(prg, 'bitonic_block_merge')(q, (nb * wg,), (wg,), keys.data, vals.data, np.uint64(k))
        k *= 2


def exclusive_scan(device, data, n=None, wg=None):
    """Exclusive prefix sum of a uint32 device array in place; returns the total."""
    wg = wg or _wg(device)
    n = data.size if n is None else n
    if n == 0:
        return 0
    prg = build(device, "grid.cl.mako", "scan", dict(wg_size=wg, items=_SCAN_ITEMS))
    q = device.queue
    chunk = wg * _SCAN_ITEMS
    ng = _groups(n, chunk)
    sums = cla.empty(q, ng, np.uint32)
    _k(prg, 'scan_block')(q, (ng * wg,), (wg,), data.data, np.uint32(n), sums.data)
    if ng == 1:
        return int(sums[0].get())            # the block's total
    total = exclusive_scan(device, sums, ng, wg)
    _k(prg, 'scan_add')(q, (_groups(n, wg) * wg,), (wg,), data.data, np.uint32(n), sums.data)
    return total


# -------------------------------------------------------------------- grid
class Grid:
    """Cell-list grid of points, built on the device (see the module docstring)."""

    def __init__(self, device, points, cell_size, box=None, like=None, *, _bounds=None):
        device = as_device(device)
        arr, n, d, dtype, on_dev = _check_points(points)
        device.check_dtype(dtype)
        cell_size = _check_cell_size(cell_size)
        box = check_box(box, d)
        if like is not None:
            if not isinstance(like, Grid):
                raise TypeError("like must be a Grid")
            if like.d != d or like.dtype != dtype:
                raise ValueError(f"like has d = {like.d}, dtype {like.dtype}; points have d = {d}, dtype {dtype}")
            if (like.box is None) != (box is None) or (box is not None and not np.array_equal(box, like.box)):
                raise ValueError("like has a different box")
            if cell_size != like.cell_size:
                raise ValueError("like has a different cell_size")
        self.device, self.n, self.d, self.dtype = device, n, d, np.dtype(dtype)
        self.cell_size, self.box = cell_size, box
        self.periodic = box is not None
        self._wg = wg = _wg(device)
        self._max_count = None
        q = device.queue
        xd = _upload(device, arr, on_dev)
        mins = maxs = None
        if _bounds is not None:
            mins, maxs = (np.asarray(b, np.float64) for b in _bounds)
        elif n and (not self.periodic or on_dev):   # device arrays: the NaN check
            mins, maxs = device_bounds(device, xd)
        if like is not None:
            self._copy_geometry(like)
            if n and not self.periodic and ((mins < like.lo).any() or (maxs > like.hi).any()):
                raise ValueError("points lie outside the geometry of like")
        elif self.periodic:
            self._set_geometry(np.zeros(d), box, box)
        elif mins is None:
            self._set_geometry(np.zeros(d), np.zeros(d), None)
        else:
            self._set_geometry(mins, maxs, None)
        if n == 0:
            self.num_cells = 0
            self.cell_ids = cla.empty(q, 0, np.uint64)
            self.cell_start = cla.empty(q, 0, np.uint32)
            self.cell_count = cla.empty(q, 0, np.uint32)
            self.point_cell = cla.empty(q, 0, np.uint32)
            self.perm = cla.empty(q, 0, np.uint32)
            self.coords = cla.empty(q, (d, 0), self.dtype)
            return
        self._build(xd)

    @classmethod
    def joint(cls, device, x, y, cell_size, box=None):
        """Two grids with one geometry (the union of both bounds) for cross pairs."""
        device = as_device(device)
        return _grids(x, y, cell_size, box, device, grow=False)

    # -- geometry ---------------------------------------------------------
    def _set_geometry(self, lo, hi, box):
        d, c = self.d, self.cell_size
        if box is not None:
            ncell = [max(1, int(math.floor(L / c))) for L in box]
            width = box / np.array(ncell, dtype=np.float64)
        else:
            ext = (hi - lo) / c
            if (ext >= _MAX_CELLS).any():
                raise ValueError("cell_size is too small for the data's extent (more than 2**62 cells)")
            ncell = [int(math.floor(e)) + 1 for e in ext]
            width = np.full(d, c)
        total = 1
        stride = []
        for m in ncell:
            stride.append(total)
            total *= m
        if total >= _MAX_CELLS:
            raise ValueError(f"cell_size is too small for the data's extent: {total} cells > 2**62")
        self.lo, self.hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        self.width = np.asarray(width, np.float64)
        self.ncell = np.array(ncell, np.uint64)
        self.stride = np.array(stride, np.uint64)
        self.total_cells = total
        L = box if box is not None else np.ones(d)
        w = self.width.astype(self.dtype)      # rounded up: cells never narrower than cell_size
        w = np.where(w < self.width, np.nextafter(w, self.dtype.type(np.inf)), w)
        geom = np.concatenate([self.lo.astype(self.dtype), w, L.astype(self.dtype),
                               (1.0 / L).astype(self.dtype)])
        q = self.device.queue
        self.geom = cla.to_device(q, geom)
        self.igeom = cla.to_device(q, np.concatenate([self.ncell, self.stride]))

    def _copy_geometry(self, g):
        for a in ("lo", "hi", "width", "ncell", "stride", "total_cells", "geom", "igeom"):
            setattr(self, a, getattr(g, a))

    def same_geometry(self, other):
        return (self.d == other.d and self.dtype == other.dtype and self.cell_size == other.cell_size
                and np.array_equal(self.lo, other.lo) and np.array_equal(self.width, other.width)
                and np.array_equal(self.ncell, other.ncell)
                and ((self.box is None and other.box is None)
                     or (self.box is not None and other.box is not None and np.array_equal(self.box, other.box))))

    # -- construction -----------------------------------------------------
    def _build(self, xd):
        dev, n, d, wg = self.device, self.n, self.d, self._wg
        q = dev.queue
        prg = build(dev, "grid.cl.mako", "points",
                    dict(real=_real(self.dtype), dim=d, periodic=self.periodic, wg_size=wg))
        n2 = max(2 * wg, 1 << (n - 1).bit_length())
        keys = cla.empty(q, n2, np.uint64)
        vals = cla.empty(q, n2, np.uint32)
        _k(prg, 'grid_keys')(q, (_groups(n2, wg) * wg,), (wg,), xd.data, np.uint32(n), np.uint32(n2),
                      self.geom.data, self.igeom.data, keys.data, vals.data)
        sort_pairs(dev, keys, vals, wg)
        cprg = build(dev, "grid.cl.mako", "compact", dict(wg_size=wg))
        gsz = (_groups(n, wg) * wg,)
        pos = cla.empty(q, n, np.uint32)
        _k(cprg, 'cell_flags')(q, gsz, (wg,), keys.data, np.uint32(n), pos.data)
        ncells = exclusive_scan(dev, pos, n, wg)
        self.num_cells = ncells
        self.cell_ids = cla.empty(q, ncells, np.uint64)
        self.cell_start = cla.empty(q, ncells, np.uint32)
        self.cell_count = cla.empty(q, ncells, np.uint32)
        _k(cprg, 'cell_compact')(q, gsz, (wg,), keys.data, np.uint32(n), pos.data,
                          self.cell_ids.data, self.cell_start.data)
        _k(cprg, 'cell_counts')(q, (_groups(ncells, wg) * wg,), (wg,), self.cell_start.data,
                         np.uint32(ncells), np.uint32(n), self.cell_count.data)
        self.point_cell = pos
        self.perm = vals[:n]
        self.coords = cla.empty(q, (d, n), self.dtype)
        _k(prg, 'grid_gather')(q, gsz, (wg,), xd.data, np.uint32(n), self.perm.data, self.coords.data)

    @property
    def max_cell_count(self):
        """The largest number of points in one cell (computed once, on the device)."""
        if self._max_count is None:
            self._max_count = int(cla.max(self.cell_count).get()) if self.num_cells else 0
        return self._max_count

    def get(self):
        """Everything as numpy (for tests and inspection)."""
        return dict(cell_ids=self.cell_ids.get(), cell_start=self.cell_start.get(),
                    cell_count=self.cell_count.get(), point_cell=self.point_cell.get(),
                    perm=self.perm.get(), coords=self.coords.get())

    def __repr__(self):
        return (f"<Grid n={self.n} d={self.d} {self.dtype} cell_size={self.cell_size:g} "
                f"cells={self.num_cells} of {self.total_cells}{' periodic' if self.periodic else ''}>")


def _joint_bounds(device, x, y):
    out = []
    for a, name in ((x, "x"), (y, "y")):
        arr, n, d, dtype, on_dev = _check_points(a, name)
        if n:
            out.append(device_bounds(device, _upload(device, arr, on_dev)))
    if not out:
        return None
    return (np.min([o[0] for o in out], axis=0), np.max([o[1] for o in out], axis=0))


# ------------------------------------------------------------ pair kernels
def choose_variant(grid):
    """'cell' on a GPU when cells are dense (mean occupancy), else 'row' (on
    PoCL 'row' and 'point' measured fastest at every occupancy, 'row' by a
    little)."""
    if grid.device.is_gpu and grid.num_cells and grid.n / grid.num_cells >= CELL_VARIANT_MIN_OCCUPANCY:
        return "cell"
    return "row"


def _run_pairs(grid, other, output, r2=None, sq=None, variant=None, force=None):
    if not isinstance(grid, Grid):
        raise TypeError("grid must be a Grid")
    cross = other is not None
    b = other if cross else grid
    if cross:
        if not isinstance(other, Grid):
            raise TypeError("other must be a Grid")
        if not grid.same_geometry(other) or grid.device.context.int_ptr != other.device.context.int_ptr:
            raise ValueError("grids for cross pairs need one geometry and device (use Grid.joint)")
    variant = variant or choose_variant(grid)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    dev = grid.device
    wg = cell_wg(grid) if variant == "cell" else grid._wg
    q = dev.queue
    nbins = 0 if sq is None else len(sq) - 1
    if grid.n == 0 or b.n == 0:
        return np.zeros(1 if output == "count" else nbins, np.uint64)
    out = cla.zeros(q, 1 if output == "count" else nbins, np.uint64)
    item = 8 if local64_needed(grid, b, variant, wg) else 4
    hist_local = output == "hist" and nbins * item + (nbins + 1) * grid.dtype.itemsize <= dev.local_mem_size // 2
    params = dict(real=_real(grid.dtype), dim=grid.d, periodic=grid.periodic, wg_size=wg,
                  variant=variant,
                  output=output, hist_local=hist_local, local64=item == 8)
    params.update(force or {})  # tests force local64 / hist_local
    prg = build(dev, "grid_pairs.cl.mako", "pairs", params)
    if output == "count":
        last = (grid.dtype.type(r2),)
    else:
        last = (np.uint32(nbins), cla.to_device(q, np.asarray(sq, grid.dtype)).data)
        if params["hist_local"]:
            last += (cl.LocalMemory((nbins + 1) * grid.dtype.itemsize),
                     cl.LocalMemory(nbins * (8 if params["local64"] else 4)))
    args = (grid.coords.data, np.uint32(grid.n), grid.point_cell.data, grid.cell_ids.data,
            grid.cell_start.data, grid.cell_count.data, np.uint32(grid.num_cells),
            b.coords.data, np.uint32(b.n), b.cell_ids.data, b.cell_start.data, b.cell_count.data,
            np.uint32(b.num_cells), grid.geom.data, grid.igeom.data, np.uint32(cross), *last, out.data)
    if variant in ("point", "row"):
        _k(prg, 'grid_pairs_' + variant)(q, (_groups(grid.n, wg) * wg,), (wg,), *args)
    else:
        _k(prg, 'grid_pairs_cell')(q, (grid.num_cells * wg,), (wg,), *args)
    return out.get()


def cell_wg(grid):
    """Work-group size of the 'cell' variant: the mean cell occupancy rounded up
    to a power of two, between 32 and the usual grid work-group size."""
    mean = -(-grid.n // max(1, grid.num_cells))
    return max(min(32, grid._wg), min(grid._wg, 1 << max(0, (mean - 1).bit_length())))


def local64_needed(grid, b, variant, wg):
    """Whether one work-group may tally 2^32 pairs or more (then 64-bit local counters)."""
    per_group = grid.max_cell_count if variant == "cell" else wg
    return per_group * b.n >= 2 ** 32


def _check_r(r):
    try:
        r = float(r)
    except (TypeError, ValueError):
        raise TypeError(f"r must be a number, got {type(r).__name__}") from None
    if not (r >= 0 and math.isfinite(r)):
        raise ValueError(f"r must be finite and >= 0, got {r!r}")
    return r


def grid_pair_count(grid, r, other=None, *, variant=None, _force=None):
    """Pairs at distance < r over a grid (self: i < j) or two grids (all i, j)."""
    r = _check_r(r)
    if not isinstance(grid, Grid):
        raise TypeError("grid must be a Grid")
    if r > grid.cell_size:
        raise ValueError(f"r = {r} exceeds the grid's cell_size {grid.cell_size}")
    if r == 0:
        return 0
    return int(_run_pairs(grid, other, "count", r2=r * r, variant=variant, force=_force)[0])


def _squared_edges(edges):
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise ValueError("edges must be a 1-D array of at least two values")
    if not np.isfinite(e).all():
        raise ValueError("edges must be finite")
    if (np.diff(e) < 0).any():
        raise ValueError("edges must increase monotonically")
    return e, np.sign(e) * e * e


def grid_histogram(grid, edges, other=None, *, variant=None, _force=None):
    """int64 counts of pairwise distances over ``edges`` (numpy.histogram rules)."""
    e, sq = _squared_edges(edges)
    if not isinstance(grid, Grid):
        raise TypeError("grid must be a Grid")
    if e[-1] > grid.cell_size:
        raise ValueError(f"the last edge {e[-1]} exceeds the grid's cell_size {grid.cell_size}")
    return _run_pairs(grid, other, "hist", sq=sq, variant=variant, force=_force).astype(np.int64)


# ------------------------------------------------ planner-facing functions
def _cell_size_for(r, bounds, d):
    """r, enlarged where the grid over ``bounds`` would have 2^62 cells or more."""
    if bounds is None:
        return r
    ext = np.maximum(bounds[1] - bounds[0], 0)
    c = r
    while True:
        total = 1
        for e in ext:
            total *= int(math.floor(e / c)) + 1
        if total < _MAX_CELLS:
            return c
        c *= 2


def _one_device(device):
    """The device to use: a list of devices (accepted by the all-pairs
    functions) runs the grid on its first device."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise ValueError("device list is empty")
        device = device[0]
    return as_device(device)


def _inputs(x, y, box, device):
    """(device, x, y, box, d) checked before anything is enqueued (y may be None)."""
    device = _one_device(device)
    xa = _check_points(x, "x")
    d = xa[2]
    box = check_box(box, d)
    ya = None
    if y is not None:
        ya = _check_points(y, "y")
        if ya[2] != d:
            raise ValueError(f"x and y have different dimensions ({d} and {ya[2]})")
        if ya[3] != xa[3]:
            raise ValueError(f"x and y have different dtypes ({xa[3]} and {ya[3]})")
    device.check_dtype(xa[3])
    return device, xa, ya, box, d


def _uploaded(device, xa, ya):
    """x and y on the device, each copied once (device arrays stay)."""
    xd = _upload(device, xa[0], xa[4])
    return xd, None if ya is None else _upload(device, ya[0], ya[4])


def _grids(x, y, cell, box, device, grow=True, _pre=None, _bounds=False):
    """Grids of x (and y, same geometry over the joint bounds): the points are
    checked and uploaded once, their bounds computed once (``_bounds``: known
    already). ``grow``: enlarge the cell where the grid would have 2^62 cells
    or more."""
    device, xa, ya, box, d = _pre or _inputs(x, y, box, device)
    if box is None:
        x, y = _uploaded(device, xa, ya)
        bounds = (_joint_bounds(device, x, y if y is not None else np.empty((0, d)))
                  if _bounds is False else _bounds)
    else:
        x, y = xa[0], None if ya is None else ya[0]    # checked arrays; Grid uploads them
        bounds = None
    if grow:
        cell = _cell_size_for(cell, bounds, d)
    gx = Grid(device, x, cell, box, _bounds=bounds)
    if y is None:
        return gx, None
    return gx, Grid(device, y, cell, box, like=gx, _bounds=bounds)


def pair_count_grid(x, r, y=None, *, box=None, device=None, variant=None):
    """``clkernels.pair_count`` through cell lists: pairs at distance < r."""
    r = _check_r(r)
    pre = _inputs(x, y, box, device)
    if r == 0:
        return 0
    gx, gy = _grids(x, y, r, box, device, _pre=pre)
    return grid_pair_count(gx, r, gy, variant=variant)


def distance_histogram_grid(x, bins, y=None, *, range=None, box=None, device=None, variant=None):
    """``clkernels.distance_histogram`` through cell lists -> (int64 counts, edges).

    ``bins``: an int (uniform over ``range``; default 0 .. the largest possible
    distance: the half-box diagonal with a box, else the data's bounding-box
    diagonal) or an array of edges.
    """
    pre = _inputs(x, y, box, device)
    device, xa, ya, bx, d = pre
    if np.ndim(bins) == 0:
        nb = int(bins)
        if nb != bins or nb <= 0:
            raise ValueError(f"bins must be a positive integer or an array of edges, got {bins!r}")
        bnd = False
        if range is None:
            if bx is not None:
                hi = float(np.sqrt(((bx / 2) ** 2).sum()))
            else:
                xd, yd = _uploaded(device, xa, ya)      # uploaded once: the grids reuse them
                pre = (device, (xd, xa[1], d, xa[3], True),
                       None if ya is None else (yd, ya[1], d, ya[3], True), bx, d)
                bnd = _joint_bounds(device, xd, yd if yd is not None else np.empty((0, d)))
                hi = 0.0 if bnd is None else float(np.sqrt(((bnd[1] - bnd[0]) ** 2).sum()))
            lo = 0.0
        else:
            lo, hi = (float(v) for v in range)
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
                raise ValueError(f"range must be finite with min <= max, got {range!r}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.linspace(lo, hi, nb + 1)
    else:
        bnd = False
        edges = _squared_edges(bins)[0]
    nbins = len(edges) - 1
    if edges[-1] < 0:  # distances are >= 0
        return np.zeros(nbins, np.int64), edges
    gx, gy = _grids(x, y, float(edges[-1]) if edges[-1] > 0 else 1.0, bx, device, _pre=pre, _bounds=bnd)
    return grid_histogram(gx, edges, gy, variant=variant), edges
