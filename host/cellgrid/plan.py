"""Decisions of the cell-list grid: its geometry (cells of side >= the
largest distance of interest, non-empty cells only, 64-bit ids) and which
pair kernel runs over it. :meth:`Geometry.make` and :meth:`PairPlan.resolve`
decide; ``validate`` checks."""

import dataclasses
import functools
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
#: 1.87 ms of wall clock; level at 2^16 (examples/PERFORMANCE.md).
BITONIC_MAX_POINTS = 1 << 16


def stage_fit(device, wg, stage):
    """The staged records per writer of a 'pairs' kernel (``Pairs.stage``)
    halved until the work-group's staging fits the device's local memory
    with 1 KiB to spare (``PAGE_STAGE_LOCALS``: 8 bytes a record; the counts'
    scan, the sub-group totals and the `local` back end's shuffle scratch, 4
    bytes a work-item each)."""
    while stage and wg * (8 * stage + 12) + 1024 > device.local_mem_size:
        stage //= 2
    return stage


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
        division then never puts such points two cells apart)."""
        c = float(cell_size)
        if not (math.isfinite(c) and c > 0):
            raise ValueError(f"cell_size must be finite and > 0, got {cell_size!r}")
        grow = 1 + (2.0 ** -40 if fp64 else 2.0 ** -18)
        if box is not None:
            # cells tile [0, L) exactly (the wrap-around neighbours need it: widening
            # them would misplace points near L), each at least cell_size wide
            ncell = []
            for L in box:
                m = max(1, int(math.floor(L / c)))
                while m > 1 and L / m < c:       # L / c rounded up to an integer
                    m -= 1
                ncell.append(m)
            width = [L / m for L, m in zip(box, ncell)]
            lo = [0.0] * d
        else:
            lo_ = np.zeros(d) if bounds is None else bounds.lo
            ext = np.zeros(d) if bounds is None else bounds.extent
            w = c * grow
            q = ext / w
            if not np.isfinite(q).all() or (q >= MAX_CELLS).any():
                raise ValueError("cell_size is too small for the data's extent (2**62 cells or more)")
            ncell = [int(math.floor(e)) + 1 for e in q]
            width = [w] * d
            lo = [float(v) for v in lo_]
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


def bin_guess(sq):
    """How the histogram kernels find a pair's bin from the squared edges
    ``sq`` (kernel scale, as the kernel holds them): ('uniform', lo, scale)
    when the edges sqrt(sq) are nearly evenly spaced (the guess
    (sqrt(d^2) - lo) * scale), ('log', lo, scale) when they are nearly
    geometric (log bins: (log2(d^2) - lo) * scale), else ('search', 0, 0).
    The kernel corrects a guess by comparisons with the edges, so the bin is
    the binary search's for any edges; a good guess only saves the search
    (4 dependent local loads at 14 bins, 8.4 of 39 ms on the clustered
    catalog on the H100)."""
    s = np.asarray(sq, np.float64)
    nb = len(s) - 1
    if nb < 2 or not np.all(np.isfinite(s)) or s[0] < 0 or not np.all(np.diff(s) > 0):
        return "search", 0.0, 0.0
    e = np.sqrt(s)
    if not np.all((e == 0) | ((e >= 1e-18) & (e <= 1e18))):       # float32 guesses stay meaningful
        return "search", 0.0, 0.0
    w = np.diff(e)
    if np.all(np.abs(w - w.mean()) <= 1e-3 * w.mean()):
        return "uniform", float(e[0]), float(nb / (e[-1] - e[0]))
    if s[0] > 0:
        g = np.diff(np.log2(s))
        if np.all(np.abs(g - g.mean()) <= 1e-3 * g.mean()):
            return "log", float(np.log2(s[0])), float(nb / (np.log2(s[-1]) - np.log2(s[0])))
    return "search", 0.0, 0.0


#: the bin table (:func:`bin_table`): at most this many one-byte entries; the
#: entries' codes past the bins (TABLE_EDGE + k: one edge, k + 1, in the span,
#: where there are at most TABLE_EDGE_MAX_BINS bins); the largest cost of the
#: spans left to comparisons (:func:`bin_table`) for a table to be made: a warp
#: whose lanes meet such spans runs the lookup and the comparisons, so the table
#: pays where few do (H100: the clustered catalog's 14 log bins, cost 0.15%,
#: pair kernel 13.4 -> 7.8 ms; an RDF's 75 uniform bins, 2.3%, within the run
#: to run spread either way, left to the guess: examples/PERFORMANCE.md)
TABLE_MAX = 4096
TABLE_EDGE, TABLE_OUT, TABLE_AMBIG = 128, 254, 255
TABLE_EDGE_MAX_BINS = TABLE_OUT - TABLE_EDGE - 1
TABLE_MAX_AMBIG = 0.01
#: the fraction bits a table's index may keep
TABLE_KEEP = range(1, 13)
#: the cost of a span holding one edge (a comparison and the band tests) against
#: one left to the guess (a logarithm or root, its corrections, the band tests)
TABLE_EDGE_COST = 0.25


@dataclasses.dataclass(frozen=True)
class BinTable:
    """A pair's bin from the high bits of its squared distance: entry
    ``entries[min(max(bits(d2) >> shift, base) - base, n - 1)]`` (``bits``:
    the float's bits as an unsigned integer, monotone for d2 >= 0) is the bin
    (< nbins), TABLE_OUT (no bin), TABLE_EDGE + k (bin k or, from sq[k + 1]
    on, k + 1; then the band tests) or TABLE_AMBIG (decide by the guess and
    the band tests). ``entries`` is padded with TABLE_AMBIG to whole words;
    ``ambiguous``: the cost of the spans left to comparisons, per pair in
    range (:func:`bin_table`)."""
    entries: np.ndarray
    shift: int
    base: int
    n: int
    ambiguous: float


def _bin_decisions(v, sq, sb):
    """The histogram kernel's decision for squared distances ``v`` (the
    kernel's real type, every operation in it): (bin, band, in range), bin
    the largest k < nbins with sq[k] <= v (0 below sq[0]); band when v is
    within the band of sq[k] or sq[k + 1] (``sb < 0``: no band)."""
    nb = len(sq) - 1
    k = np.clip(np.searchsorted(sq, v, side="right") - 1, 0, nb - 1)
    band = (np.abs(v - sq[k]) <= sb[k]) | (np.abs(sq[k + 1] - v) <= sb[k + 1])
    return k, band, (v >= sq[0]) & (v <= sq[nb])


def table_fits(device, plan, d, nbins, itemsize, table):
    """Whether a histogram kernel's local memory (its histogram copies, the
    edges and bands, the 'cell' variant's tile, 1 KiB to spare) holds the
    bin table too (:meth:`PairPlan.resolve` budgets half the local memory
    for the copies, edges and bands; global histograms read the table from
    global memory)."""
    if not plan.hist_local:
        return True
    need = (nbins * (8 if plan.local64 else 4) * plan.hist_local + 2 * (nbins + 1) * itemsize
            + table.entries.nbytes + d * plan.wg_size * itemsize + 1024)
    return need <= device.local_mem_size


def _spread_weight(a, b, d):
    """Pairs of a uniform spread with squared distances in [a, b] (d^(d - 1) dd)."""
    return np.maximum(b.astype(np.float64), 0) ** (d / 2) - np.maximum(a.astype(np.float64), 0) ** (d / 2)


def _log_weight(a, b, sq):
    """Pairs of a scale-free (clustered) spread in [a, b]: equal for every
    factor of d^2 down to half the first positive edge (none below)."""
    pos = sq[sq > 0]
    floor = float(pos[0]) / 2 if pos.size else np.finfo(np.float64).tiny
    return np.log2(np.maximum(b.astype(np.float64), floor)) - np.log2(np.maximum(a.astype(np.float64), floor))


def _share(w, cost):
    """The cost of the spans (weights ``w``), per unit of weight."""
    total = w.sum()
    return float((w * cost).sum() / total) if total > 0 else 1.0


def bin_table(sq, sb, d):
    """The bin table (:func:`_bin_table`, remembered for the last few edges: a
    histogram repeated over frames or calls builds it once)."""
    sq = np.asarray(sq)
    sb = np.asarray(sb, sq.dtype)
    return _bin_table(sq.tobytes(), sb.tobytes(), sq.dtype.str, int(d))


@functools.lru_cache(maxsize=32)
def _bin_table(sq, sb, dtype, d):
    """The bin table of squared edges ``sq`` with bands ``sb`` (the kernel's
    real type and values) for ``d``-dimensional distances, or None.

    Entry e covers the squared distances whose bits lie in
    [(base + e) << shift, (base + e + 1) << shift) (the first entry from the
    range's lower cut, the last up to its upper cut: the kernel's
    ``lo_cut``/``hi_cut``). An entry holds a bin only when the kernel's own
    decisions (bin, band, range) at both ends of its span give that bin with
    no band pair: each decision is monotone in the squared distance (a
    correctly rounded subtraction is monotone), so every value between
    decides alike, and the table gives exactly the bins of the guess and
    band tests it replaces. A span with one edge inside, at most (k + 1
    between bins k and k + 1 at its ends), gets TABLE_EDGE + k: the kernel's
    bin there is k + (d2 >= sq[k + 1]), the same decision. The shift (one to
    twelve bits of the fraction kept) minimises the cost of the spans left
    to comparisons (1 for the guess, TABLE_EDGE_COST for one edge), per pair
    in range, the larger of two spreads' costs: a uniform spread's (the
    spans weighted by d^2 to the power d/2) and a clustered, scale-free
    one's (by log d^2: a table that leaves the small distances to the guess
    would lose most of a galaxy catalog's pairs); None when that cost passes
    TABLE_MAX_AMBIG or the bins do not fit a byte."""
    sq, sb = np.frombuffer(sq, dtype), np.frombuffer(sb, dtype)
    with np.errstate(all="ignore"):         # extreme edges: inf weights, log2 of 0 (no table then)
        return _bin_table_of(sq, sb, d)


def _bin_table_of(sq, sb, d):
    """:func:`_bin_table`'s work on arrays (numpy's floating-point warnings
    silenced around it by the caller)."""
    nb = len(sq) - 1
    if sq.dtype not in (np.float32, np.float64) or not 1 <= nb < TABLE_OUT or not np.all(np.isfinite(sq)):
        return None
    real = sq.dtype.type
    uint = np.uint32 if real is np.float32 else np.uint64
    frac = np.finfo(real).nmant
    lo_cut = np.nextafter(real(sq[0] - max(sb[0], real(0))), real(-np.inf))
    hi_cut = np.nextafter(real(sq[nb] + sb[nb]), real(np.inf))
    if not (np.isfinite(hi_cut) and hi_cut > 0):
        return None
    lo_bits = int(np.array(max(lo_cut, real(0)), real).view(uint))
    hi_bits = int(np.array(hi_cut, real).view(uint))
    best = None
    for keep in TABLE_KEEP:
        shift = frac - keep
        hb = hi_bits >> shift
        base = max(lo_bits >> shift, hb - TABLE_MAX + 1)
        n = hb - base + 1
        first = (np.arange(n, dtype=np.uint64) + np.uint64(base)) << np.uint64(shift)
        last = first + np.uint64((1 << shift) - 1)
        first[0], last[-1] = lo_bits, hi_bits
        a, b = first.astype(uint).view(real), last.astype(uint).view(real)
        ka, band_a, in_a = _bin_decisions(a, sq, sb)
        kb, band_b, in_b = _bin_decisions(b, sq, sb)
        clean = (ka == kb) & ~band_a & ~band_b
        entries = np.full(n, TABLE_AMBIG, np.uint8)
        if nb <= TABLE_EDGE_MAX_BINS:
            one = kb - ka <= 1
            entries[one] = TABLE_EDGE + ka[one]
        entries[clean & in_a & in_b] = ka[clean & in_a & in_b]
        entries[clean & ((b < sq[0]) | (a > sq[nb]))] = TABLE_OUT
        cost = (entries == TABLE_AMBIG) + TABLE_EDGE_COST * ((entries >= TABLE_EDGE) & (entries < TABLE_OUT))
        share = max(_share(_spread_weight(a, b, d), cost), _share(_log_weight(a, b, sq), cost))
        if best is None or share < best[0]:
            best = (share, entries, shift, base, n)
    share, entries, shift, base, n = best
    if not share <= TABLE_MAX_AMBIG:        # NaN: no weights at all
        return None
    # immutable (the table is shared by the calls the cache serves): an array over bytes
    entries = np.frombuffer(np.concatenate([entries, np.full(-n % 4, TABLE_AMBIG, np.uint8)]).tobytes(), np.uint8)
    return BinTable(entries, shift, base, n, share)


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
#: handed out by a global atomic counter)
JOIN_ORDERS = ("cell", "sortbywl", "workqueue")
#: work-items per point
JOIN_K = (1, 2, 4, 8, 16, 32)
#: how k work-items share a point: its candidates (strided) or its stencil rows
JOIN_SPLITS = ("candidates", "rows")
#: rows per work-item from which k > 1 work-items split the rows (3^(d-1) rows a point)
ROWS_PER_ITEM = 4


@dataclasses.dataclass(frozen=True)
class JoinPlan:
    """Which self-join kernel runs over the grid: ``kernel`` (a cell access
    pattern), ``k`` work-items per point, the points' ``order``, the work-group
    size, and ``row``: LID-UNICOMP with k = 1 in cell order run by the grid's
    'row' kernel (today's self-join, the default) rather than
    ``selfjoin.cl.mako`` (which skips the rows of smaller ids without a
    search: faster on PoCL in 6-D, to be measured on GPUs)."""
    kernel: str = "lidunicomp"
    k: int = 1
    order: str = "cell"
    wg_size: int = 256
    row: bool = False
    split: str = "candidates"

    @classmethod
    def resolve(cls, device, n=0, kernel=None, k=None, order=None, row=None, dims=1, split=None, output=None):
        """The plan for ``n`` points of ``dims`` dimensions (None: the
        defaults, LID-UNICOMP, k = 1, cell order, by the 'row' kernel -- but
        per-point counts (``output='count'``) take the tuned choice of
        ``selfjoin.count`` (``autotune``), by default GPUCALCGLOBAL on GPUs,
        where counting a point's own row without atomics on its partners'
        counts beat the row kernel in 8 of the 9 sets of ``bench.py
        selfjoin`` on an H100, by up to 1.8x, though it evaluates every
        distance twice; k > 1
        work-items split a point's stencil rows when there are at least
        ROWS_PER_ITEM rows each -- the searches of 3^(d-1) rows dominate
        there -- else its candidates)."""
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
            split = "rows" if isinstance(k, int) and k > 1 and 3 ** (int(dims) - 1) >= ROWS_PER_ITEM * k \
                else "candidates"
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
    space={"kernel": list(JOIN_KERNELS), "k": [1, 2, 4, 8], "order": list(JOIN_ORDERS)},
    default=_join_default, restrict=_join_restrict))
