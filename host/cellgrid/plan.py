"""Decisions of the cell-list grid: its geometry (cells of side >= the
largest distance of interest, non-empty cells only, 64-bit ids) and which
pair kernel runs over it. :meth:`Geometry.make` and :meth:`PairPlan.resolve`
decide; ``validate`` checks."""

import dataclasses
import math

import numpy as np

from ..core import tuning
from ..core.launch import check_wg_size, pow2_floor

TEMPLATE = "cellgrid.cl.mako"
VARIANTS = ("point", "row", "cell")
MAX_CELLS = 2 ** 62
#: grids with fewer cells may sort each cell's points by their first coordinate
#: (the cell id and the place in the cell share a 64-bit sort key)
XORDER_MAX_CELLS = 2 ** 32 - 1
MAX_POINTS = 2 ** 31 - 1
#: mean points per cell from which the work-group-per-cell variant is chosen (GPUs):
#: periodic grids from CELL_VARIANT_MIN_OCCUPANCY, open ones from CELL_VARIANT_OPEN_OCCUPANCY
CELL_VARIANT_MIN_OCCUPANCY = 32
CELL_VARIANT_OPEN_OCCUPANCY = 256
#: points up to which the grid's (cell key, index) pairs are sorted by the bitonic
#: primitive (padded to a power of two); beyond, by the segmented sort's merge path as
#: one segment (stable: the indices come in ascending, so both give (key, index)
#: order). H100: 0.32 against 0.92 ms of device time at 2^20 points, 1.25 against
#: 1.87 ms of wall clock; a grid and its pair count at 2^16 / 2^14 / 2^12 / 2^10
#: points 1.36 / 1.32 / 1.28 / 1.36 ms of wall by the merge path against 1.70 /
#: 1.42 / 1.21 / 0.92 by the bitonic one (examples/PERFORMANCE.md).
BITONIC_MAX_POINTS = 1 << 12


def wg_size(device):
    """Work-group size of the grid kernels (a power of two)."""
    return pow2_floor(min(256, device.max_work_group_size))


@dataclasses.dataclass(frozen=True)
class Geometry:
    """Cells of ``width`` per dimension from ``lo`` (or over [0, box)), ``ncell``
    per dimension, ids sum(c_k * stride_k) (stride_0 = 1). Float64 host units."""
    lo: tuple
    width: tuple
    ncell: tuple
    stride: tuple
    box: tuple = None
    cell_size: float = 0.0

    @property
    def total(self):
        return int(np.prod([int(m) for m in self.ncell], dtype=object))

    @classmethod
    def make(cls, cell_size, bounds, d, box=None, fp64=True):
        """Geometry with cells of at least ``cell_size`` over ``bounds`` (or the box).
        Open cells are a relative 2^-40 (2^-18 without fp64) wider than
        ``cell_size``, more than the key computation rounds, so two points
        within ``cell_size`` are never two cells apart; in a box they tile
        [0, L) exactly, each at least ``cell_size`` wide (a correctly rounded
        division then never puts such points two cells apart). ``cell_size``
        may be one side per dimension (cuboid cells; ``cell_size`` the largest)."""
        cs = np.broadcast_to(np.asarray(cell_size, np.float64), (d,)) if d else np.zeros(0)
        if not (np.isfinite(cs).all() and (cs > 0).all()):
            raise ValueError(f"cell_size must be finite and > 0, got {cell_size!r}")
        c = float(cs.max()) if d else float(cell_size)
        grow = 1 + (2.0 ** -40 if fp64 else 2.0 ** -18)
        if box is not None:
            # cells tile [0, L) exactly (the wrap-around neighbours need it: widening
            # them would misplace points near L), each at least cell_size wide
            ncell = []
            for L, ck in zip(box, cs):
                m = max(1, int(math.floor(L / ck)))
                while m > 1 and L / m < ck:       # L / c rounded up to an integer
                    m -= 1
                ncell.append(m)
            width = [L / m for L, m in zip(box, ncell)]
            lo = [0.0] * d
        else:
            lo_ = np.zeros(d) if bounds is None else bounds.lo
            ext = np.zeros(d) if bounds is None else bounds.extent
            w = cs * grow
            q = ext / w
            if not np.isfinite(q).all() or (q >= MAX_CELLS).any():
                raise ValueError("cell_size is too small for the data's extent (2**62 cells or more)")
            ncell = [int(math.floor(e)) + 1 for e in q]
            width = [float(v) for v in w]
            lo = [float(v) for v in lo_]
            # the last cell reaches past the largest coordinate in float64 as well (the
            # quotient ext / w may round down by a cell where ext is near a multiple of w);
            # at most two more (a width below lo's ulp never moves lo + w * ncell)
            hi_ = lo_ if bounds is None else bounds.hi
            for k in range(d):
                for _ in range(2):
                    if lo[k] + width[k] * ncell[k] > hi_[k]:
                        break
                    ncell[k] += 1
        stride, total = [], 1
        for m in ncell:
            stride.append(total)
            total *= m
        if total >= MAX_CELLS:
            raise ValueError(f"cell_size is too small for the data's extent: {total} cells >= 2**62")
        return cls(tuple(lo), tuple(width), tuple(ncell), tuple(stride),
                   None if box is None else tuple(float(L) for L in box), c)


def cell_size_for(r, bounds, d):
    """``r``, doubled until the grid over ``bounds`` has fewer than 2^62 cells."""
    if bounds is None or r <= 0:
        return r if r > 0 else 1.0
    ext = np.maximum(bounds.extent, 0)
    c = r
    while True:
        total = 1
        for e in ext:
            total *= int(math.floor(e / c)) + 1
        if total < MAX_CELLS:
            return c
        c *= 2


@dataclasses.dataclass(frozen=True)
class PairPlan:
    """Which pair kernel and its shape: ``variant``, work-group size, 64-bit
    local counters, ``hist_local`` copies of the histogram in local memory (0:
    global atomics); the 'cell' variant's
    work-groups per cell: ``chunks`` (one per chunk of wg_size points of the
    fullest cell: emptier cells' extra work-groups end at once) times
    ``parts``, each taking every parts-th offset of the stencil (a grid of
    few, full cells otherwise leaves most of a GPU idle); ``by_cell``: a
    periodic grid's neighbour images taken from the cells' wraps (every
    dimension of 3 or more cells), not a minimum image per pair."""
    variant: str
    wg_size: int
    local64: bool
    hist_local: int
    parts: int = 1
    chunks: int = 1
    by_cell: bool = False       # 'cell', periodic, 3+ cells a dimension: images from the cells' wraps

    @classmethod
    def resolve(cls, device, a, b, output, nbins=0, variant=None, itemsize=4):
        variant = variant or choose_variant(device, a)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        wg = wg_size(device)
        if variant == "cell":
            wg = min(cell_wg(a), CELL_HIST_WG) if output == "hist" else cell_wg(a)
        chunks = 1                          # a chunk of wg points, every chunks-th of the fullest cell
        if variant == "cell":
            chunks = min(CELL_MAX_CHUNKS, -(-max(a.max_cell_count, 1) // wg))
        local64 = _per_group(variant, wg, chunks, a) * b.n >= 2 ** 32
        item = 8 if local64 else 4
        hist_local = 0      # copies of the work-group's histogram in local memory (0: global atomics)
        if output == "hist":
            for copies in (HIST_COPIES if device.is_gpu else 1, 1):
                if nbins * item * copies + 2 * (nbins + 1) * itemsize <= device.local_mem_size // 2:
                    hist_local = copies
                    break
        parts = 1
        if variant == "cell":
            # work-groups of one cell's chunk of wg points and every parts-th stencil offset
            units = min(a.num_cells * chunks, a.num_cells + a.n // wg)     # non-empty (cell, chunk)s, about
            want = CELL_GROUPS_PER_CU * device.compute_units
            parts = min(3 ** a.d, max(1, -(-want // max(units, 1))))
        by_cell = _by_cell(variant, a)
        plan = cls(variant, wg, local64, hist_local, parts, chunks, by_cell)
        plan.validate(device, a, b)
        return plan

    def validate(self, device, a=None, b=None):
        """The plan's own rules, and with grids ``a`` and ``b`` (b is a for
        self pairs) the rules that tie it to them (a plan resolved for one
        grid given for another)."""
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        check_wg_size(device, self.wg_size)
        if a is None:
            return
        b = a if b is None else b
        if self.by_cell != _by_cell(self.variant, a):
            raise ValueError("by_cell must be set exactly for the 'cell' variant on a periodic grid of 3 or more "
                             f"cells a dimension (this grid: {_by_cell(self.variant, a)})")
        if self.hist_local and not self.local64 and \
                _per_group(self.variant, self.wg_size, self.chunks, a) * b.n >= 2 ** 32:
            raise ValueError("this grid needs 64-bit local histogram counters (local64=True): a work-group's "
                             "pairs may reach 2^32")


#: the band pairs a count or histogram kernel lists at most (8 bytes each), else the
#: kernel decides them in its loop: a 16th of the device's memory, below 2^31
BAND_LIST_SHARE = 16


def band_list_max(device):
    """The band pairs a count or histogram kernel may list for its band pass
    (more: the kernel decides them in double in its loop)."""
    return min(1 << 31, device.global_mem_size // BAND_LIST_SHARE // 8, device.max_mem_alloc_size // 4)


def _per_group(variant, wg, chunks, a):
    """The anchors a work-group of the plan takes at most on grid ``a``."""
    if variant != "cell":
        return wg
    return wg * -(-max(a.max_cell_count, 1) // (wg * max(chunks, 1)))


def _by_cell(variant, a):
    return variant == "cell" and a.geom.box is not None and min(a.geom.ncell) >= 3


#: copies of a work-group's local histogram on GPUs (work-item l counts into copy l % 32:
#: the lanes of a sub-group binning one partner mostly hit one bin, which serialises a
#: single copy's atomics)
HIST_COPIES = 32
#: the 'cell' variant's histograms in work-groups of at most this many work-items (H100,
#: uniform and clustered data, 64 bins: 64 work-items 5-25% faster than 128 or 256 in
#: every case measured; counts keep the occupancy rule of cell_wg)
CELL_HIST_WG = 64
#: work-groups per compute unit the 'cell' variant aims for (splitting stencils)
CELL_GROUPS_PER_CU = 16
#: work-groups per cell of the 'cell' variant at most (one per chunk of wg points; a
#: work-group takes every CELL_MAX_CHUNKS-th chunk of a fuller cell)
CELL_MAX_CHUNKS = 4096


def choose_variant(device, grid):
    """'cell' on a GPU when cells are dense (mean occupancy) and the grid is
    periodic (its neighbour cells' images come from their wraps: no minimum
    image per pair) or very dense, else 'row'. H100, uniform 2^20 points:
    open, 131 points a cell, 'row' 1.2x faster; 1,048 a cell, 'cell' 1.16x;
    periodic, 'cell' 1.25-1.75x; the clustered catalog (periodic, cells of
    one to 5,584 points) 1.20x (a cell's chunks are work-groups of their own,
    examples/PERFORMANCE.md). On PoCL 'row' and 'point' measured fastest at
    every occupancy, 'row' by a little."""
    if device.is_gpu and grid.num_cells:
        mean = grid.n / grid.num_cells
        periodic = grid.geom.box is not None
        if mean >= (CELL_VARIANT_MIN_OCCUPANCY if periodic else CELL_VARIANT_OPEN_OCCUPANCY):
            return "cell"
    return "row"


def cell_wg(grid):
    """Work-group size of the 'cell' variant: the mean cell occupancy rounded up
    to a power of two, between 32 and the usual grid work-group size."""
    base = wg_size(grid.device)
    mean = -(-grid.n // max(1, grid.num_cells))
    return max(min(32, base), min(base, 1 << max(0, (mean - 1).bit_length())))


#: the self-join kernels (``selfjoin.cl.mako``): cell access patterns of the self-join papers
JOIN_TEMPLATE = "selfjoin.cl.mako"
JOIN_KERNELS = ("gpucalcglobal", "unicomp", "lidunicomp")
#: point orders: cell order, SORTBYWL (descending neighbourhood size), WORKQUEUE (SORTBYWL
#: handed out by a global atomic counter), input (the caller's order: the papers'
#: GPUCALCGLOBAL, work-item gid on point D[gid], Algorithm 1 of the load-imbalance paper)
JOIN_ORDERS = ("cell", "sortbywl", "workqueue", "input")
#: work-items per point
JOIN_K = (1, 2, 4, 8, 16, 32)
#: how k work-items share a point: its candidates (strided; the rows' searches shared,
#: k at a time) or its stencil rows
JOIN_SPLITS = ("candidates", "rows")
#: the self-join kernels read each cell's neighbour rows from a table (``join_cells``: 8
#: bytes a row and cell, built by one search a row and cell) rather than search them a point
#: at a time where a cell has at most this many stencil rows (d <= 3: 16 or 64 bytes a cell)
JOIN_TABLE_MAX_ROWS = 9
#: the work-group of the self-join's per-cell kernels (the row table, SORTBYWL's counting sort)
CELLS_WG = 256
#: SORTBYWL's workload buckets (selfjoin.cl.mako's wl_bucket: exact below 16, 8 an octave)
WL_BUCKETS = 240


def join_table(d):
    """Whether the self-join kernels over a d-dimensional grid read a row table."""
    return 3 ** (d - 1) <= JOIN_TABLE_MAX_ROWS


@dataclasses.dataclass(frozen=True)
class JoinPlan:
    """Which self-join kernel runs over the grid: ``kernel`` (a cell access
    pattern), ``k`` work-items per point, the points' ``order``, the work-group
    size, and ``row``: LID-UNICOMP with k = 1 in cell order run by the grid's
    'row' kernel (today's self-join, the default) rather than
    ``selfjoin.cl.mako`` (which skips the rows of smaller ids without a
    search: faster on PoCL in 6-D, to be measured on GPUs); ``table``: the
    selfjoin.cl.mako kernels read each cell's neighbour rows from a table
    where the grid has d <= 3 (``join_table``), else (False, or beyond) they
    search them a point at a time, as the papers' kernels do."""
    kernel: str = "lidunicomp"
    k: int = 1
    order: str = "cell"
    wg_size: int = 256
    row: bool = False
    split: str = "candidates"
    table: bool = True      # the cells' row tables where the grid has them (join_table); False: searches

    @classmethod
    def resolve(cls, device, n=0, kernel=None, k=None, order=None, row=None, dims=1, split=None, output=None):
        """The plan for ``n`` points of ``dims`` dimensions (None: the
        defaults, LID-UNICOMP, k = 1, cell order, by the 'row' kernel -- but
        per-point counts (``output='count'``) take the tuned choice of
        ``selfjoin.count`` (``autotune``), by default GPUCALCGLOBAL on GPUs,
        where counting a point's own row without atomics on its partners'
        counts beat the row kernel in 8 of the 9 sets of ``bench.py
        selfjoin`` on an H100, by up to 1.8x, though it evaluates every
        distance twice; k > 1 work-items split a point's candidates, sharing
        the rows' searches, unless ``split='rows'``: on an H100 the shared
        searches ran 2.4-2.9x faster than the rows split in 6-D, where it was
        the default before, and 1.2-2.9x in 2-D)."""
        if output == "count" and (kernel, k, order) == (None, None, None):
            p, _ = JOIN_TUNABLE.resolve(device, {"size": max(n, 1), "dims": int(dims)})
            kernel, k, order = p["kernel"], int(p["k"]), p["order"]
        if kernel is None:
            kernel = "lidunicomp"
        k = 1 if k is None else k
        order = "cell" if order is None else order
        if row is None:
            row = (kernel, k, order) == ("lidunicomp", 1, "cell")
        if split is None:
            split = "candidates"
        plan = cls(kernel, k, order, wg_size(device), bool(row), split)
        plan.validate(device, n)
        return plan

    def validate(self, device, n=0, periodic=False):
        if self.kernel not in JOIN_KERNELS:
            raise ValueError(f"kernel must be one of {JOIN_KERNELS}, got {self.kernel!r}")
        if isinstance(self.k, bool) or self.k not in JOIN_K:
            raise ValueError(f"k must be one of {JOIN_K}, got {self.k!r}")
        if self.order not in JOIN_ORDERS:
            raise ValueError(f"order must be one of {JOIN_ORDERS}, got {self.order!r}")
        if self.split not in JOIN_SPLITS:
            raise ValueError(f"split must be one of {JOIN_SPLITS}, got {self.split!r}")
        check_wg_size(device, self.wg_size)
        if self.wg_size % self.k:
            raise ValueError(f"k = {self.k} does not divide the work-group size {self.wg_size}")
        if self.row and (self.kernel, self.k, self.order) != ("lidunicomp", 1, "cell"):
            raise ValueError("the grid's row kernel runs LID-UNICOMP with k = 1 in cell order only")
        if not self.row:
            if periodic:
                raise ValueError("the self-join kernels other than the default take no box")
            if n * self.k >= 2 ** 32:
                raise ValueError(f"{n} points x k = {self.k} work-items exceed 2^32 - 1 writers; use a smaller k")


def _join_default(device, problem):
    return {"kernel": "gpucalcglobal" if device.is_gpu else "lidunicomp", "k": 1, "order": "cell"}


def _join_restrict(params, device):
    JoinPlan(params["kernel"], int(params["k"]), params["order"], wg_size(device),
             (params["kernel"], int(params["k"]), params["order"]) == ("lidunicomp", 1, "cell")).validate(device)
    return True


#: the self-join kernel, work-items per point and point order for per-point
#: counts, per device and size (``autotune --ops selfjoin``)
JOIN_TUNABLE = tuning.register(tuning.Tunable(
    op="selfjoin.count", templates=["selfjoin.cl.mako", "cellgrid.cl.mako", "outputs.cl.mako"],
    # the input order is the papers' baseline, never a choice (its warps mix far-apart points)
    space={"kernel": list(JOIN_KERNELS), "k": [1, 2, 4, 8], "order": [o for o in JOIN_ORDERS if o != "input"]},
    default=_join_default, restrict=_join_restrict))
