"""The rectangle join's plan: method (brute force or grid), count variant,
work-group size, and for the grid its geometry (origin, cell side, cells per
axis) and caps. Every decision is made here, in :meth:`RectPlan.resolve`.

The method rule (``method="auto"``): brute force when the problem is small
(``nq * nb <= BRUTE_MAX_TESTS`` box tests) or when the grid would not prune
(a query would test more than ``GRID_MAX_TESTS`` of the data boxes: cells per
query times entries per cell plus the overflow list, estimated from a sample
of the data boxes, :meth:`Geometry.candidates`); else the grid.

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
#: boxes per set: indices are uint32 on the device, with room for a tile past the end
MAX_BOXES = (1 << 31) - 1
METHODS = ("auto", "brute", "grid")
VARIANTS = ("atomic", "reduce")
OUTPUTS = ("count", "per_query", "pairs")
GRID_BUILDS = ("scatter", "sort")
REAL = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

#: auto: brute force up to this many box tests
BRUTE_MAX_TESTS = 1 << 22
#: auto: brute force when a query would test more than this fraction of the data boxes in the grid
GRID_MAX_TESTS = 0.25
#: data boxes sampled for the grid's geometry and the method rule
SAMPLE = 4096
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

    def candidates(self, sample, dims, cap, nb):
        """Expected data boxes a query box tests in the grid (taking the data
        sample as typical queries): cells per query times entries per cell,
        plus the overflow list."""
        if len(sample) == 0:
            return 0.0
        m = self.cells_per_box(sample, dims)
        listed = m <= cap
        entries = nb * float(np.mean(np.where(listed, m, 0)))
        return float(np.mean(np.minimum(m, QCAP))) * entries / self.ncells + nb * float(np.mean(~listed))

    def overflow_fraction(self, sample, dims, cap=None):
        """Fraction of sample boxes (m, 2d) over more than ``cap`` cells."""
        if len(sample) == 0:
            return 0.0
        cap = cap_for(dims) if cap is None else cap
        return float(np.mean(self.cells_per_box(sample, dims) > cap))


@dataclasses.dataclass(frozen=True)
class RectPlan:
    """``method`` 'brute' | 'grid'; ``variant`` of the count ('atomic' |
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
    takes ~0.4 s) rather than by numpy (CPU devices, where numpy is faster)."""
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

    @classmethod
    def resolve(cls, device, nq, nb, dims, dtype, output, *, method="auto", variant=None, wg_size=None,
                stats=None, grid_build="scatter", vec=None):
        """``stats()``: (lo, hi, extents sample (m, d), boxes sample (m, 2d)) of
        the data, called only when the grid is considered."""
        real = REAL[np.dtype(dtype)]
        tuned, _ = TUNABLE.resolve(device, {"size": max(1, nq) * max(1, nb), "dtype": np.dtype(dtype).name,
                                            "dims": dims, "real": real})
        variant = tuned["variant"] if variant is None else variant
        wg = int(tuned["wg_size"] if wg_size is None else wg_size)
        geometry = None
        if method == "auto" and nq * nb <= BRUTE_MAX_TESTS:
            method = "brute"
        cap = cap_for(dims)
        if method in ("auto", "grid"):
            lo, hi, ext, sample = stats()
            geometry = Geometry.from_stats(lo, hi, ext, nb, dtype)
            cap = geometry.cap(sample, dims)
            if method == "auto":
                method = "brute" if geometry.candidates(sample, dims, cap, nb) > GRID_MAX_TESTS * nb else "grid"
            if method == "brute":
                geometry = None
        if wg_size is None:
            while wg > 32 and tile_bytes(wg, dims, real) > device.local_mem_size // 2:
                wg //= 2
        plan = cls(method, variant, output, int(dims), real, wg, geometry, cap, QCAP, grid_build,
                   bool(tuned["vec"] if vec is None else vec), order_on_device=bool(device.is_gpu))
        plan.validate(device)
        return plan

    def validate(self, device):
        if self.method not in ("brute", "grid"):
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
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

    def params(self, output):
        """Template parameters of the join def for the kernel ``output``."""
        variant = self.variant if output == "count" else "reduce"       # (the others do not use it)
        p = dict(real=self.real, dims=self.dims, wg_size=self.wg_size, output=output, variant=variant)
        if self.method == "grid":
            p["qcap"] = self.qcap
        else:
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

    def geom_args(self):
        """The kernels' geometry arguments: (origin, inv_side, cells) per axis."""
        g, t = self.geometry, (np.float64 if self.real == "double" else np.float32)
        out = []
        for k in range(self.dims):
            out += [t(g.origin[k]), t(g.inv_side[k]), np.int32(g.cells[k])]
        return out


def tile_bytes(wg, dims, real):
    """Local memory of a work-group (either join): the tile, its box ids
    (grid) and the reduction's partial sums."""
    return wg * 2 * dims * (8 if real == "double" else 4) + 12 * wg


__all__ = ["RectPlan", "Geometry", "TUNABLE", "METHODS", "VARIANTS", "OUTPUTS", "MAX_BOXES"]
