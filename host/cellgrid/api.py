"""Cell-list grid built on the device, and pair statistics over it.

``Grid(points, cell_size, *, box=None, device=None, like=None)``
    Points ``(n, d)`` (d = 1..8; float32/float64, numpy or
    ``pyopencl.array.Array``) are binned into cells of side ``cell_size`` from
    the data's minimum per dimension, or, with ``box`` (periodic,
    orthorhombic), into ``max(1, floor(L / cell_size))`` cells per dimension
    over [0, L) (points wrapped into the box). Everything is done on the
    device: bounds and the NaN/inf check, 64-bit cell ids, a sort of (cell
    id, index) pairs, the runs of equal ids compacted into the non-empty
    cells, and the points' kernel coordinates gathered in cell order.
    Attributes (device arrays): ``cell_ids`` (uint64, sorted unique),
    ``cell_start``, ``cell_count``, ``point_cell`` (the cell of each sorted
    point), ``coords`` ((d, n) kernel coordinates in cell order: the input's,
    wrapped into the box and scaled by ``scaling.scale``), ``perm`` (sorted
    position -> input index); host values ``n``, ``d``, ``dtype``,
    ``num_cells``, ``geom``, ``cell_size``, ``box``. ``like=grid`` reuses
    another grid's geometry (cross pairs); ``Grid.joint(x, y, cell_size)``
    builds two grids over the union of their bounds. ``grid.get()`` copies
    everything to numpy.

``grid_pair_count(grid, r, other=None, *, variant=None, exact=True) -> int``
    Pairs at distance d <= r (``r <= grid.cell_size``): self pairs i < j, or
    all (i, j) between ``grid`` and ``other`` (same geometry).
``grid_histogram(grid, edges, other=None, *, variant=None, exact=True) -> int64``
    ``numpy.histogram`` of the pair distances over ``edges`` (non-decreasing,
    ``edges[-1] <= grid.cell_size``).

The two-body planner's entries (``count_within``, ``histogram_within``)
build grids whose cells sort their points by the first coordinate (cell ids
below 2^32), so the 'cell' kernel stages only the window of each neighbour
cell within reach of its chunk; ``Grid`` keeps (cell, index) order.

Exactness and comparison rules are those of :mod:`clkernels.host.twobody`:
pairs within a proven rounding band of r or an edge are decided in double
from the original coordinates. Variants (``variant=``, default from the
device, the mean occupancy and whether the grid is periodic:
:func:`~.plan.choose_variant`): 'point' (a work-item per point, 3^d
neighbour cells by binary search), 'row' (the three cells of dimension 0 of a
stencil row are one range of sorted points), 'cell' (work-groups per chunk
of a cell's points, each taking part of its stencil, neighbour points in
local-memory tiles; periodic images from the neighbour cell's wrap).
"""

import copy
import math

import numpy as np
import pyopencl.array as cla

from ..core import inputs
from ..core.device import as_device
from ..core.launch import Events
from ..core.transfer import kept, upload
from ..outputs.exact import choose_scaling, count_band, representable, squared_band
from ..primitives import Bounds, bounds as device_bounds, runs
from . import execute
from . import bins
from . import plan as plan_mod
from .plan import MAX_POINTS, XORDER_MAX_CELLS, Geometry, PairPlan, cell_size_for


class Grid:
    """Cell-list grid of points, built on the device (see the module docstring)."""

    def __init__(self, points, cell_size, *extra, box=None, device=None, like=None, _bounds=False,
                 _events=None, _xorder=False, _lazy=False, _sides=None):
        from ..core.device import Device

        if extra or isinstance(points, Device) or isinstance(cell_size, Device):
            raise TypeError("Grid(points, cell_size, *, box=None, device=None, like=None): "
                            "the device is the keyword device=")
        P = inputs.points(points, "points", max_n=MAX_POINTS)
        dev = inputs.device_for(device, P.array)
        inputs.check_context(dev, P.array)
        dev.check_dtype(P.dtype)
        c = inputs.scalar(cell_size, "cell_size", positive=True)
        b = inputs.box(box, P.d)
        self.device, self.n, self.d, self.dtype = dev, P.n, P.d, P.dtype
        self.cell_size, self.box = c, b
        self.events = Events() if _events is None else _events
        q = self.queue = dev.queue
        self.orig = P.array if P.on_device else upload(dev, P.array, queue=q, events=self.events)
        if like is not None:
            if not isinstance(like, Grid):
                raise TypeError("like must be a Grid")
            if like.d != P.d or like.dtype != P.dtype:
                raise ValueError(f"like has d = {like.d}, dtype {like.dtype}; points have d = {P.d}, "
                                 f"dtype {P.dtype}")
            if (like.box is None) != (b is None) or (b is not None and not np.array_equal(b, like.box)):
                raise ValueError("like has a different box")
            if c != like.cell_size:
                raise ValueError("like has a different cell_size")
        bnd = _bounds
        if bnd is False:
            bnd = device_bounds(q, self.orig, name="points", events=self.events) if P.n else None
        self._bnd, self._views = bnd, {}
        if like is not None:
            if P.n and b is None and bnd is not None and (
                    (bnd.lo < np.array(like.geom.lo)).any()
                    or (bnd.hi >= np.array(like.geom.lo) + np.array(like.geom.width) * np.array(like.geom.ncell)
                        ).any()):
                raise ValueError("points lie outside the geometry of like")
            self.geom, self.scaling, self.igeom, self.kbox = like.geom, like.scaling, like.igeom, like.kbox
        else:
            # _sides: one cell side per dimension, the largest cell_size (host/paircounts/gridded.py)
            self.geom = Geometry.make(c if _sides is None else _sides, bnd, P.d, b, dev.fp64)
            self.scaling = choose_scaling(P.dtype, P.d, bnd, box=b, thresholds=[c])
            self.igeom = self.kbox = None
        self._max_count = None
        self._coords, self._lazy = None, bool(_lazy)     # _lazy: coords gathered where first used
        # a cell's points sorted by their first coordinate (the 'row' and 'cell' kernels'
        # windows, execute.pairs): where cell ids fit 32 bits of the sort key
        self.xorder = bool(_xorder) and self.geom.total < XORDER_MAX_CELLS
        self._build()

    @classmethod
    def joint(cls, x, y, cell_size, *, box=None, device=None):
        """Two grids with one geometry (the union of both bounds) for cross pairs."""
        X, Y = inputs.points(x, "x"), inputs.points(y, "y")
        dev = inputs.device_for(device, X.array, Y.array)
        ev = Events()
        xo = X.array if X.on_device else upload(dev, X.array, events=ev)
        yo = Y.array if Y.on_device else upload(dev, Y.array, events=ev)
        return _grids(dev, xo, yo, cell_size, box, None, ev, grow=False)

    # -- construction -----------------------------------------------------
    def _build(self):
        dev, n, d, q = self.device, self.n, self.d, self.queue
        ev = self.events
        kk, vv, ig = execute.keys(q, dev, self.orig, n, execute.key_length(dev, n), self.geom, ev, self.xorder)
        if self.igeom is None:
            self.igeom = ig
            if self.box is not None:
                L = np.asarray(self.box) * self.scaling.scale
                self.kbox = kept(q, np.concatenate([L, 1.0 / L]).astype(self.scaling.real))
        if n == 0:
            self.num_cells = 0
            self.cell_ids = cla.empty(q, 0, np.uint64)
            self.cell_start = self.cell_count = self.point_cell = self.perm = cla.empty(q, 0, np.uint32)
            self.coords = cla.empty(q, (d, 0), self.scaling.real)
            return
        kk, vv = execute.sort(q, dev, kk, vv, n, ev)
        if self.xorder:
            execute.key_cells(q, dev, self.orig, kk, n, self.geom, ev)
        r, _ = runs(q, kk, n, events=ev)
        self._runs = r
        self.num_cells = r.count
        self.cell_ids, self.cell_start, self.cell_count, self.point_cell = r.keys, r.start, r.length, r.index
        self.perm = vv[:n]
        if not self._lazy:
            self._coords = self._gather()

    def _gather(self):
        return execute.gather(self.queue, self.device, self.orig, self.perm, self.scaling, self.box,
                              self.events)

    @property
    def coords(self):
        """(d, n) kernel coordinates in cell order (the two-body entries' grids,
        whose kernels mostly run on float32 views, gather them where first used)."""
        if self._coords is None:
            self._coords = self._gather()
        return self._coords

    @coords.setter
    def coords(self, value):
        self._coords = value

    @property
    def max_cell_count(self):
        """The largest number of points in one cell (found by the grid's build on
        the device; read once)."""
        if self._max_count is None:
            self._max_count = self._runs.longest_length(self.queue) if self.num_cells else 0
        return self._max_count

    # geometry as numpy (float64; ncell/stride uint64)
    lo = property(lambda self: np.array(self.geom.lo))
    width = property(lambda self: np.array(self.geom.width))
    ncell = property(lambda self: np.array(self.geom.ncell, np.uint64))
    stride = property(lambda self: np.array(self.geom.stride, np.uint64))

    def float32_view(self, scaling):
        """This float64 grid with float32 kernel coordinates of ``scaling``
        (gathered once per scaling): the exact ops' fast path, see
        :func:`_kernel_grids`."""
        v = self._views.get(scaling)
        if v is None:
            v = copy.copy(self)
            v.scaling, v._views = scaling, {}
            v.coords = v._gather()
            if self.box is not None:
                L = np.asarray(self.box) * scaling.scale
                v.kbox = kept(self.queue, np.concatenate([L, 1.0 / L]).astype(np.float32))
            self._views[scaling] = v
        return v

    def same_geometry(self, other):
        return self.geom == other.geom and self.scaling == other.scaling

    def get(self):
        """Everything as numpy (for tests and inspection); coords in kernel units."""
        return dict(cell_ids=self.cell_ids.get(), cell_start=self.cell_start.get(),
                    cell_count=self.cell_count.get(), point_cell=self.point_cell.get(),
                    perm=self.perm.get(), coords=self.coords.get())

    def __repr__(self):
        return (f"<Grid n={self.n} d={self.d} {self.dtype} cell_size={self.cell_size:g} "
                f"cells={self.num_cells} of {self.geom.total}{' periodic' if self.box is not None else ''}>")


def _grids(dev, xo, yo, cell, box, bnd, events, grow=True, xorder=False, lazy=False):
    """Grids of device points xo (and yo, one geometry over the joint bounds);
    ``xorder``: each cell's points sorted by their first coordinate; ``lazy``:
    their coordinates gathered where first used."""
    if bnd is None:         # the NaN/inf check and the scaling's magnitudes, periodic or not
        bs = [device_bounds(dev.queue, a, name=nm, events=events) for a, nm in ((xo, "x"), (yo, "y"))
              if a is not None and a.shape[0]]
        bnd = Bounds.union(*bs)
    if grow and box is None:
        cell = cell_size_for(cell, bnd, xo.shape[1])
    gx = Grid(xo, cell, box=box, device=dev, _bounds=bnd, _events=events, _xorder=xorder, _lazy=lazy)
    if yo is None:
        return gx, None
    return gx, Grid(yo, cell, box=box, device=dev, like=gx, _bounds=bnd, _events=events, _xorder=xorder,
                    _lazy=lazy)


#: exact ops on float64 grids run float32 kernels (band pairs decided in double from
#: the float64 points, as for float32 points) while the coordinates' rounding to
#: float32 stays within this fraction of the smallest positive threshold (the bands
#: widen with it; beyond, too many pairs would fall into them)
FLOAT32_COORD_RATIO = 2.0 ** -10
#: ... and while thresholds and coordinates lie within these magnitudes (float32's
#: comfortable range: no scaling near its ends)
FLOAT32_MAGNITUDES = (2.0 ** -60, 2.0 ** 60)


def _kernel_grids(a, b, thresholds):
    """The grids an exact op over ``thresholds`` (distances) runs on: float32
    views of float64 grids (:meth:`Grid.float32_view`; the scaling from both
    grids' bounds and every threshold, the coordinates' extra rounding in its
    error bound) when float32 holds the coordinates and thresholds and the
    rounding stays within :data:`FLOAT32_COORD_RATIO` of the smallest positive
    threshold; else the grids themselves."""
    pos = [float(t) for t in thresholds if t > 0]
    if a.dtype != np.float64 or not pos:
        return a, b
    bnd = a._bnd if b is a else Bounds.union(a._bnd, b._bnd)
    ts = [a.cell_size] + pos
    mag = max(ts + [bnd.maxabs] + ([] if a.box is None else [float(np.max(a.box))]))
    if not (FLOAT32_MAGNITUDES[0] <= min(pos) and mag <= FLOAT32_MAGNITUDES[1]) or \
            not representable(np.float32, bnd, a.box, ts):
        return a, b
    sc = choose_scaling(np.float32, a.d, bnd, box=a.box, thresholds=ts, orig=np.float64)
    if sc.coord_err > FLOAT32_COORD_RATIO * min(pos) * sc.scale:
        return a, b
    va = a.float32_view(sc)
    return va, (va if b is a else b.float32_view(sc))


def _pairs(grid, other, output, values, exact, variant, nbins=0, plan=None):
    if not isinstance(grid, Grid):
        raise TypeError("grid must be a Grid")
    b = grid if other is None else other
    if other is not None:
        if not isinstance(other, Grid):
            raise TypeError("other must be a Grid")
        if not grid.same_geometry(other) or grid.device.context.int_ptr != other.device.context.int_ptr:
            raise ValueError("grids for cross pairs need one geometry and device (use Grid.joint)")
    if grid.n == 0 or b.n == 0:
        return np.zeros(1 if output == "count" else nbins, np.uint64)
    dev = grid.device
    if exact and not dev.fp64:
        from ..core.errors import DeviceCapabilityError

        raise DeviceCapabilityError(f"exact results are decided in double, which {dev.name} lacks; "
                                    "pass exact=False")
    if exact:
        grid, b = _kernel_grids(grid, b, [values] if output == "count" else values)
    if plan is None:
        plan = PairPlan.resolve(dev, grid, b, output, nbins, variant, grid.scaling.real.itemsize)
    plan.validate(dev, grid, b)
    sc, real = grid.scaling, grid.scaling.real
    xs = sc.exact_scale
    guess, table = "search", None
    xp_box = [0.0] * grid.d if grid.box is None else list(np.asarray(grid.box) * xs)
    if output == "count":
        r = values
        t = (r * sc.scale) ** 2
        tail = [real.type(t), real.type(count_band(sc, t) if exact else 0.0)]
        bands = [(t, float(tail[1]))]
        xpv = [r]
    else:
        e = np.asarray(values, np.float64)
        es = e * sc.scale
        sq = np.sign(es) * es * es
        sqk = sq.astype(real)           # as the kernel holds them
        sqd = kept(grid.queue, sqk)
        sbk = np.array([squared_band(sc, abs(x)) if exact else 0.0 for x in sq], real)
        if sq[0] == 0:
            # a first edge at 0: every distance is on its upper side (no band pair
            # there; coincident points would all be listed), told by a negative band
            sbk[0] = -1
        sbd = kept(grid.queue, sbk)
        bands = list(zip(sq.tolist(), np.maximum(sbk, 0).tolist()))
        guess, g_lo, g_scale = bins.bin_guess(sqk)
        tail = [np.uint32(nbins), sqd.data, sbd.data, np.float32(g_lo), np.float32(g_scale)]
        table = bins.bin_table(sqk, sbk, grid.d)
        if table is not None and not bins.table_fits(dev, plan, grid.d, nbins, real.itemsize, table):
            table = None
        if table is not None:
            tail += [kept(grid.queue, table.entries.view(np.uint32)).data, np.uint32(table.shift),
                     np.uint32(table.base), np.uint32(table.n)]
        xpv = list(e)
    ex = None
    cap = 0
    if exact:
        xp = kept(grid.queue, np.array([xs] + xp_box + [v * xs for v in xpv], np.float64))
        ex = [grid.orig, grid.perm, b.orig, b.perm, xp]
        cap = _band_capacity(grid, b, bands)
    return execute.pairs(grid.queue, dev, plan, grid, b, output, tail, ex, grid.events, nbins, guess, cap, table)


#: room for band pairs: this many times the estimate for evenly spread points, within
#: BAND_ROOM_LIMITS (8 bytes each on the device; more are listed in a second pass, or,
#: past plan.band_list_max, decided in the kernel's loop)
BAND_ROOM_FACTOR = 8
BAND_ROOM_LIMITS = (1 << 16, 1 << 24)


def _band_capacity(a, b, bands):
    """Room for the band pairs of an exact op (``bands``: (squared threshold,
    band) in kernel units): pairs with d^2 within a band of t, were the points
    spread evenly over the box (or their bounding box), times
    BAND_ROOM_FACTOR, as a power of two within BAND_ROOM_LIMITS."""
    d, sc = a.d, a.scaling
    bnd = a._bnd if b is a else Bounds.union(a._bnd, b._bnd)
    ext = np.asarray(a.box, np.float64) if a.box is not None else np.asarray(bnd.extent, np.float64)
    # in logarithms: kernel units may lie anywhere in float64's range
    log_vol = float(np.sum(np.log(np.maximum(ext, a.cell_size)))) + d * math.log(sc.scale)
    log_pairs = math.log(a.n * b.n * (0.5 if b is a else 1.0))
    log_c = 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d + 1) + math.log(0.5 * d)
    # the shell d^2 in [t - w, t + w] holds (D / 2) c_D t^(D/2 - 1) 2w of volume
    est = sum(math.exp(min(log_pairs - log_vol + log_c + (0.5 * d - 1) * math.log(t) + math.log(2 * w), 60.0))
              for t, w in bands if t > 0 and w > 0)
    want = min(max(BAND_ROOM_FACTOR * est, BAND_ROOM_LIMITS[0]), BAND_ROOM_LIMITS[1])
    return 1 << (int(want) - 1).bit_length()


def grid_pair_count(grid, r, other=None, *, variant=None, exact=True, plan=None):
    """Pairs at distance d <= r over a grid (self: i < j) or two grids (all i,
    j); ``plan`` a :class:`~.plan.PairPlan` (default: resolved)."""
    r = inputs.scalar(r, "r")
    if not isinstance(grid, Grid):
        raise TypeError("grid must be a Grid")
    if r > grid.cell_size:
        raise ValueError(f"r = {r} exceeds the grid's cell_size {grid.cell_size}")
    return int(_pairs(grid, other, "count", r, exact, variant, plan=plan)[0])


def grid_histogram(grid, edges, other=None, *, variant=None, exact=True, plan=None):
    """int64 counts of pairwise distances over ``edges`` (numpy.histogram rules)."""
    e = inputs.histogram_edges(edges).edges
    if not isinstance(grid, Grid):
        raise TypeError("grid must be a Grid")
    if e[-1] > grid.cell_size:
        raise ValueError(f"the last edge {e[-1]} exceeds the grid's cell_size {grid.cell_size}")
    return _pairs(grid, other, "hist", e, exact, variant, len(e) - 1, plan).astype(np.int64)


def count_within(queue, xo, yo, r, *, box=None, bounds=None, exact=True, events=None, variant=None):
    """The two-body planner's entry: pairs within r of device points xo (and yo)."""
    dev = as_device(queue)
    cell = r
    if r == 0:     # identical points only: any cell works; the data's scale keeps squares apart
        ext = [] if bounds is None else [float(e) for e in bounds.extent if e > 0]
        cell = min(ext) if ext else 1.0
        if box is not None:
            cell = min(cell, 0.5 * float(np.min(box)))
    gx, gy = _grids(dev, xo, yo, cell, box, bounds, Events() if events is None else events, xorder=True,
                    lazy=True)
    return int(_pairs(gx, gy, "count", r, exact, variant)[0])


def histogram_within(queue, xo, yo, edges, *, box=None, bounds=None, exact=True, events=None, variant=None):
    """The two-body planner's entry: the distance histogram over ``edges``."""
    dev = as_device(queue)
    e = np.asarray(edges, np.float64)
    if e[-1] < 0:
        return np.zeros(len(e) - 1, np.int64)
    gx, gy = _grids(dev, xo, yo, float(e[-1]) if e[-1] > 0 else 1.0, box, bounds,
                    Events() if events is None else events, xorder=True, lazy=True)
    return _pairs(gx, gy, "hist", e, exact, variant, len(e) - 1).astype(np.int64)


__all__ = ["Grid", "grid_pair_count", "grid_histogram", "count_within", "histogram_within"]
