"""The rectangle join's plan: method (brute force, grid or sort and sweep),
count variant, work-group size, for the grid its geometry (origin, cell side,
cells per axis) and caps, for the sweep its width W. Every decision is made
here, in :meth:`RectPlan.resolve`.

The method rule (``method="auto"``): brute force when the problem is small
(``nq * nb <= BRUTE_MAX_TESTS`` box tests). Otherwise the data sample (SAMPLE
boxes, taken as typical queries too) gives each index method an estimated
cost per query box, in box tests:

* grid: the entries of the cells the query overlaps (pairs of sampled boxes
  sharing cells, so clustered data counts as clustered), plus the overflow
  list, plus one per cell visited; a query over more than ``QCAP`` cells
  costs ``nb`` (its brute-force pass) (:meth:`Geometry.cost`);
* sweep: the narrow data boxes whose lo_0 falls in [q.lo_0 - W, q.hi_0],
  plus the wide list, plus ``2 log2(nb)`` for the two binary searches
  (:func:`sweep_costs`, at the best W of :func:`sweep_width`), plus its
  sort's compare-exchanges shared by the queries (:func:`sort_tests`: the
  bitonic sort is O(nb log^2 nb), where the grid's build is a few linear
  passes, left out; on a CPU device the sort of 50K boxes takes ~25 ms,
  longer than either join).

The cheaper of the two is taken (the grid on ties), unless it still tests
more than ``GRID_MAX_TESTS`` (a quarter) of the data boxes per query: then
brute force (a brute-force test, read from a local-memory tile, counted as a
quarter of an index method's scattered one). Examples (tests/test_rectjoin.py
and measured): 5000 x 5000 map-like 2-D log-normal boxes, grid ~10 tests
per query, sweep ~300 + 75 for the sort -> grid; 5000 x 5000 1-D boxes, 90%
of them in 0.1% of the span, grid ~4000 (the crowded cells), sweep ~25 + 75
-> sweep (at 50K x 10K on the Intel CPU device: grid 1.0-1.5 s, sweep 30-40
ms); 5000 x 5000 2-D boxes spanning most of the square, both over nb / 4 ->
brute force. Small 2-D boxes along a diagonal (the grid's diagonal cells
hold ~sqrt(nb) boxes each) favour the sweep's join, but its sort decides:
at 50K x 10K grid ~120 vs sweep ~30 + 445 -> grid (Intel CPU: grid 10-15 ms,
sweep 36 ms, 25 of them the sort); with 10x more queries than data boxes
the estimate takes the sweep. The estimates cost a few ms of numpy per call (only when ``nq *
nb`` exceeds BRUTE_MAX_TESTS; the sweep's only when the grid's exceeds the
sweep's least cost, its sort and search probes).

The sweep's width W along axis 0: of the quantiles ``WIDTH_QUANTILES`` of
the sampled extents, the one of least estimated cost (a larger W widens
every query's window, a smaller one sends more boxes to the wide list that
every query tests). A data box is narrow when ``lo_0 + W >= hi_0`` in the
boxes' type (the device evaluates the same sum when it searches, so no
rounding can drop a candidate: see ``rectjoin_sweep.cl.mako``).

The grid's cell side along axis k: the ``SIDE_QUANTILE`` quantile of a sample
of data box extents along k (so a typical box overlaps at most 2 cells per
axis), raised (by 25% on every axis at a time) until the grid has at most
``max(1, CELLS_PER_BOX * nb)`` cells (and ``MAX_CELLS``). A data box is
listed in every cell it overlaps up to ``cap`` cells (the ``CAP_QUANTILE``
quantile of the sample's cells per box, within [4 * 2^d, ``MAX_CAP``]);
larger ones go to the overflow list that every query tests (in tiles). A
query box over more than ``QCAP`` cells is joined by brute force instead
(a second pass over those queries)."""

import dataclasses

import numpy as np

from ..core import tuning
from ..core.launch import check_wg_size, pow2_floor

TEMPLATE = "rectjoin.cl.mako"
SWEEP_TEMPLATE = "rectjoin_sweep.cl.mako"
#: boxes per set: indices are uint32 on the device, with room for a tile past the end
MAX_BOXES = (1 << 31) - 1
METHODS = ("auto", "brute", "grid", "sweep")
VARIANTS = ("atomic", "reduce")
OUTPUTS = ("count", "per_query", "pairs")
GRID_BUILDS = ("scatter", "sort")
REAL = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

#: auto: brute force up to this many box tests
BRUTE_MAX_TESTS = 1 << 22
#: auto: brute force when a query would test more than this fraction of the data boxes in the cheaper index
GRID_MAX_TESTS = 0.25
#: data boxes sampled for the grid's geometry, the sweep's width and the method rule
SAMPLE = 4096
#: sampled boxes taken as queries for the grid's pairwise cost estimate (QUERY_SAMPLE x SAMPLE pairs)
QUERY_SAMPLE = 64
#: the sweep's width W: the quantile of these of the sampled axis-0 extents with the least estimated cost
WIDTH_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)
SIDE_QUANTILE = 0.75
CELLS_PER_BOX = 2
MAX_CELLS = 1 << 26
#: a query box over more than this many cells tests every data box instead (a
#: work-item walks its cells alone: at 4096, the few map-wide queries of the
#: thesis-scale bench kept the grid kernel at 11.8 ms on an H100; at 256, 0.62 ms
#: with the brute-force pass over them)
QCAP = 256
#: the cap on cells per data box: this quantile of a sample's, within [cap_for(dims), MAX_CAP]
CAP_QUANTILE = 0.999
MAX_CAP = 1024
#: writers a brute-force pass over few query boxes aims at (splitting the data)
SPLIT_WRITERS = 1 << 15


def cap_for(dims):
    """The least cap on the cells a data box may be listed in before it goes
    to the overflow list."""
    return 4 << dims


def _wg_default(device, dims, real):
    wg = pow2_floor(min(256, device.max_work_group_size))
    row = 2 * dims * (8 if real == "double" else 4)
    while wg > 64 and wg * row > device.local_mem_size // 2:
        wg //= 2
    return wg


def _default(device, problem):
    # vector tiles (one local load per 2..4 columns) help GPUs; PoCL's work-group vectorizer
    # prefers scalars (2-D brute-force count at 100K x 10K: 4.0e9 box tests/s scalar, 1.55e9 vector)
    return {"wg_size": _wg_default(device, problem.get("dims", 2), problem.get("real", "float")),
            "variant": "reduce", "vec": bool(device.is_gpu)}


def _wg_space(device):
    out, w = [], 64
    while w <= min(1024, device.max_work_group_size):
        out.append(w)
        w *= 2
    return out


def _restrict(params, device):
    # the common problem (2-D float32); resolve halves a tuned size whose tile does not fit
    RectPlan("brute", params["variant"], "count", 2, "float", int(params["wg_size"]),
             vec=bool(params["vec"])).validate(device)
    return True


#: the brute-force count: work-group size (data boxes per tile) and variant (``autotune --ops rectjoin``)
TUNABLE = tuning.register(tuning.Tunable(
    op="rectjoin.count", templates=[TEMPLATE, "pages.cl.mako"],
    space={"wg_size": _wg_space, "variant": list(VARIANTS), "vec": [False, True]},
    default=_default, restrict=_restrict, problem_defaults={"dims": 2}))


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A uniform grid: ``origin``/``inv_side`` (REAL values, per axis) and
    ``cells`` per axis; cell k of a value v: clamp(floor((v - origin) *
    inv_side), 0, cells - 1)."""
    origin: tuple
    inv_side: tuple
    cells: tuple

    @property
    def ncells(self):
        return int(np.prod(self.cells))

    @classmethod
    def from_stats(cls, lo, hi, extents, nb, dtype):
        """From the data's bounds (per axis), a sample of box extents (m, d)
        and the number of data boxes."""
        d = len(lo)
        lo = np.asarray(lo, np.float64)
        span = np.maximum(np.asarray(hi, np.float64) - lo, 0.0)
        side = np.quantile(extents, SIDE_QUANTILE, axis=0) if len(extents) else span.copy()
        side = np.where(side > 0, side, np.where(span > 0, span / max(1.0, nb ** (1.0 / d)), 1.0))
        limit = max(1, min(MAX_CELLS, CELLS_PER_BOX * nb))

        def cells(s):
            return np.maximum(1, np.minimum(np.ceil(span / s), 1 << 20)).astype(np.int64)

        c = cells(side)
        while int(np.prod(c)) > limit:
            side = side * 1.25
            c = cells(side)
        inv = np.where(span > 0, c / np.where(span > 0, span, 1.0), 0.0)
        # in the data's type, as the kernels compute: the clamp keeps anything outside the cells
        dt = np.dtype(dtype)
        return cls(tuple(float(dt.type(v)) for v in lo), tuple(float(dt.type(v)) for v in inv),
                   tuple(int(v) for v in c))

    def cells_per_box(self, sample, dims):
        """Cells each of the sample boxes (m, 2d) overlaps."""
        o, inv, n = (np.array(v, np.float64) for v in (self.origin, self.inv_side, self.cells))

        def cell(v):
            return np.clip(np.floor((v - o) * inv), 0, n - 1)

        return np.prod(cell(sample[:, dims:]) - cell(sample[:, :dims]) + 1, axis=1)

    def cap(self, sample, dims):
        """Cells a data box may be listed in: the CAP_QUANTILE quantile of the
        sample's cells per box within [cap_for(dims), MAX_CAP], so that only
        the largest boxes go to the overflow list (tested by every query)."""
        if len(sample) == 0:
            return cap_for(dims)
        q = float(np.quantile(self.cells_per_box(sample, dims), CAP_QUANTILE))
        return int(min(MAX_CAP, max(cap_for(dims), q)))

    def cost(self, sample, dims, cap, nb):
        """Estimated box tests per query box (QUERY_SAMPLE of the sample's
        boxes taken as the queries, against the others, at most SAMPLE): the cell
        entries it visits (the cells each sampled data box shares with it,
        summed and scaled to nb), the overflow list, and one per cell
        visited; ``nb`` for a query over more than QCAP cells (its
        brute-force pass)."""
        sample = sample[::max(1, -(-len(sample) // SAMPLE))]
        m = len(sample)
        if m == 0:
            return 0.0
        o, inv, n = (np.array(v, np.float64) for v in (self.origin, self.inv_side, self.cells))

        def cell(v):
            return np.clip(np.floor((v - o) * inv), 0, n - 1).astype(np.int32)

        lo, hi = cell(sample[:, :dims]), cell(sample[:, dims:])
        ncell = np.prod(hi - lo + 1, axis=1, dtype=np.float64)
        listed = ncell <= cap
        qs = np.arange(0, m, max(1, m // QUERY_SAMPLE))
        shared = np.broadcast_to(listed.astype(np.int32), (len(qs), m)).copy()
        for k in range(dims):
            shared *= np.maximum(0, np.minimum(hi[qs, None, k], hi[None, :, k])
                                 - np.maximum(lo[qs, None, k], lo[None, :, k]) + 1)
        shared[np.arange(len(qs)), qs] = 0          # a query is not in the data
        per = shared.sum(axis=1) * (nb / max(1, m - 1)) + nb * float(np.mean(~listed)) + ncell[qs]
        return float(np.mean(np.where(ncell[qs] > QCAP, nb, per)))

    def overflow_fraction(self, sample, dims, cap=None):
        """Fraction of sample boxes (m, 2d) over more than ``cap`` cells."""
        if len(sample) == 0:
            return 0.0
        cap = cap_for(dims) if cap is None else cap
        return float(np.mean(self.cells_per_box(sample, dims) > cap))


def sweep_costs(sample, widths, nb):
    """Estimated box tests per query box of the sweep for each width W (each
    of the sample's boxes (m, 2d) taken as a query against the others): the
    narrow boxes (lo_0 + W >= hi_0; float64 here, where the kernels' test in
    the boxes' type differs only within rounding of W, which moves an
    estimate, never a result) with lo_0 in [q.lo_0 - W, q.hi_0], the wide
    list, and 2 log2(nb) probes of the two binary searches."""
    m = len(sample)
    if m == 0:
        return [0.0 for _ in widths]
    with np.errstate(over="ignore"):            # (sums of huge values: inf compares as it should)
        return _sweep_costs(sample, widths, nb, m)


def _sweep_costs(sample, widths, nb, m):
    d = sample.shape[1] // 2
    order = np.argsort(sample[:, 0])
    lo, hi = sample[order, 0], sample[order, d]          # by lo_0: the searches' keys come sorted
    end = np.searchsorted(lo, hi, "right")
    out = []
    for w in widths:
        narrow = lo + w >= hi
        c = np.concatenate([[0], np.cumsum(narrow)])
        # the narrow boxes of the window, less the query itself (it is not in the data)
        window = c[end] - c[np.searchsorted(lo, lo - w, "left")] - narrow
        out.append(float(np.mean(window)) * nb / max(1, m - 1) + nb * float(np.mean(~narrow))
                   + 2 * np.log2(max(nb, 2)))
    return out


def sort_tests(nb, nq):
    """The sweep's sort in box tests per query box: the bitonic sort's
    n2 log2(n2) (log2(n2) + 1) / 4 compare-exchanges of (key, box) pairs (n2:
    nb padded to a power of two), each counted as a box test, shared by the
    nq query boxes."""
    lg = max(1, int(np.ceil(np.log2(max(nb, 2)))))
    return float(2 ** lg) * lg * (lg + 1) / 4 / max(nq, 1)


def sweep_width(sample, nb, dtype):
    """The sweep's width W: of the WIDTH_QUANTILES quantiles of the sample's
    axis-0 extents, the one of least :func:`sweep_costs`; a finite value of
    the boxes' type (as a Python float)."""
    if len(sample) == 0:
        return 0.0
    d = sample.shape[1] // 2
    top = float(np.finfo(dtype).max)
    with np.errstate(over="ignore"):            # (extents of float64 boxes may overflow: at most `top`)
        ws = np.unique(np.quantile(np.minimum(sample[:, d] - sample[:, 0], top), WIDTH_QUANTILES))
    w = ws[int(np.argmin(sweep_costs(sample, ws, nb)))]
    return float(np.dtype(dtype).type(min(float(w), top)))


@dataclasses.dataclass(frozen=True)
class RectPlan:
    """``method`` 'brute' | 'grid' | 'sweep'; ``variant`` of the count ('atomic' |
    'reduce'); ``output`` the kernel output ('count' | 'paircount' |
    'pairwrite' | 'pairs' are rendered from it); ``dims``; ``real`` 'float'
    | 'double'; ``wg_size``: work-items per group (= data boxes per tile);
    ``geometry`` (grid only), ``cap`` (cells per data box before the
    overflow list), ``qcap`` (cells per query box before it tests every
    box), ``grid_build``: 'scatter' (a counting sort through the scan: the
    default, 10-15x faster than the sort on PoCL at 200K boxes) or 'sort'
    (the (cell, box) pairs through the shared bitonic sort); ``vec``: the
    brute-force tile as 2/4-wide vectors (one local load for several
    columns) instead of one array per column; ``split``: brute force's parts
    of the data set (writer p * nqp + i joins query i with part p);
    ``order_on_device``: pairs put in (i, j) order by the library's segmented
    sort on the device (GPUs: milliseconds for 10^7 pairs, where numpy's sort
    takes ~0.4 s) rather than by numpy (CPU devices, where numpy is faster);
    ``width``: the sweep's W (a finite value of the boxes' type): data boxes
    with lo_0 + W >= hi_0 are sorted by lo_0 and searched, the others (the
    wide list) tested by every query."""
    method: str
    variant: str
    output: str
    dims: int
    real: str
    wg_size: int
    geometry: Geometry = None
    cap: int = 16
    qcap: int = QCAP
    grid_build: str = "scatter"
    vec: bool = False
    split: int = 1
    order_on_device: bool = False
    width: float = None

    @classmethod
    def resolve(cls, device, nq, nb, dims, dtype, output, *, method="auto", variant=None, wg_size=None,
                stats=None, grid_build="scatter", vec=None):
        """``stats()``: (lo, hi, extents sample (m, d), boxes sample (m, 2d)) of
        the data, called only when an index method is considered."""
        real = REAL[np.dtype(dtype)]
        tuned, _ = TUNABLE.resolve(device, {"size": max(1, nq) * max(1, nb), "dtype": np.dtype(dtype).name,
                                            "dims": dims, "real": real})
        variant = tuned["variant"] if variant is None else variant
        wg = int(tuned["wg_size"] if wg_size is None else wg_size)
        geometry = width = None
        if method == "auto" and nq * nb <= BRUTE_MAX_TESTS:
            method = "brute"
        cap = cap_for(dims)
        if method != "brute":
            lo, hi, ext, sample = stats()
            if method in ("auto", "grid"):
                geometry = Geometry.from_stats(lo, hi, ext, nb, dtype)
                cap = geometry.cap(sample, dims)
            if method == "auto":
                costs = {"grid": geometry.cost(sample, dims, cap, nb)}
                sort = sort_tests(nb, nq)
                # (the sweep costs at least its sort and 2 log2(nb) search probes: not estimated past that)
                if costs["grid"] > sort + 2 * np.log2(max(nb, 2)):
                    width = sweep_width(sample, nb, dtype)
                    costs["sweep"] = sort + sweep_costs(sample, [width], nb)[0]
                method = min(costs, key=costs.get)          # (the grid first: it wins ties)
                if costs[method] > GRID_MAX_TESTS * nb:
                    method = "brute"
            if method == "sweep" and width is None:
                width = sweep_width(sample, nb, dtype)
            if method != "grid":
                geometry = None
            if method != "sweep":
                width = None
        if wg_size is None:
            while wg > 32 and tile_bytes(wg, dims, real) > device.local_mem_size // 2:
                wg //= 2
        plan = cls(method, variant, output, int(dims), real, wg, geometry, cap, QCAP, grid_build,
                   bool(tuned["vec"] if vec is None else vec), order_on_device=bool(device.is_gpu), width=width)
        plan.validate(device)
        return plan

    def validate(self, device):
        if self.method not in ("brute", "grid", "sweep"):
            raise ValueError(f"method must be one of {METHODS[1:]}, got {self.method!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.dims not in (1, 2, 3, 4):
            raise ValueError(f"dims must be 1..4, got {self.dims}")
        w = self.wg_size
        check_wg_size(device, w)
        if w < 32 or w & (w - 1):
            raise ValueError(f"wg_size must be a power of two >= 32, got {w}")
        tile = tile_bytes(w, self.dims, self.real)
        if tile > device.local_mem_size:
            raise ValueError(f"a tile of {w} boxes ({tile} bytes) exceeds the {device.local_mem_size} "
                             f"bytes of local memory of {device.name}")
        if self.split < 1:
            raise ValueError(f"split must be >= 1, got {self.split}")
        if self.grid_build not in GRID_BUILDS:
            raise ValueError(f"grid_build must be one of {GRID_BUILDS}, got {self.grid_build!r}")
        if self.method == "grid":
            if self.geometry is None:
                raise ValueError("the grid method needs a geometry")
            if self.geometry.ncells >= (1 << 31):
                raise ValueError("too many grid cells")
        if self.method == "sweep" and (self.width is None or not 0 <= self.width <= np.finfo(
                np.float64 if self.real == "double" else np.float32).max):
            raise ValueError(f"width must be finite and >= 0 for method 'sweep', got {self.width!r}")

    def params(self, output):
        """Template parameters of the join def for the kernel ``output``."""
        variant = self.variant if output == "count" else "reduce"       # (the others do not use it)
        p = dict(real=self.real, dims=self.dims, wg_size=self.wg_size, output=output, variant=variant)
        if self.method == "grid":
            p["qcap"] = self.qcap
        elif self.method == "brute":
            p["vec"] = self.vec
        return p

    def brute_layout(self, nq, nb):
        """(nqp, chunk, writers) of brute force over ``split`` parts: queries
        padded to whole work-groups per part (one data range per group)."""
        if self.split <= 1:
            return nq, max(nb, 1), nq
        nqp = -(-nq // self.wg_size) * self.wg_size
        chunk = -(-nb // self.split)
        return nqp, chunk, nqp * self.split

    def split_for(self, device, nq, nb):
        """A brute-force plan for a few query boxes (the grid's large ones):
        the data split into parts so that about SPLIT_WRITERS writers run,
        a part at least a tile."""
        nqp = -(-nq // self.wg_size) * self.wg_size
        parts = max(1, min(SPLIT_WRITERS // nqp, -(-nb // self.wg_size)))
        return dataclasses.replace(self, method="brute", split=int(parts))

    def width_arg(self):
        """The sweep kernels' W argument, in the boxes' type."""
        return (np.float64 if self.real == "double" else np.float32)(self.width)

    def geom_args(self):
        """The kernels' geometry arguments: (origin, inv_side, cells) per axis."""
        g, t = self.geometry, (np.float64 if self.real == "double" else np.float32)
        out = []
        for k in range(self.dims):
            out += [t(g.origin[k]), t(g.inv_side[k]), np.int32(g.cells[k])]
        return out


def tile_bytes(wg, dims, real):
    """Local memory of a work-group (any join): the tile, its box ids
    (grid, sweep) and the reduction's partial sums."""
    return wg * 2 * dims * (8 if real == "double" else 4) + 12 * wg


__all__ = ["RectPlan", "Geometry", "TUNABLE", "METHODS", "VARIANTS", "OUTPUTS", "MAX_BOXES", "sweep_costs",
           "sweep_width", "sort_tests"]
